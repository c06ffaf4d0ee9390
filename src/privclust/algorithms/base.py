"""What every clustering algorithm receives and returns, and the registry."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .._parallel import one_thread
from ..geometry.domain import Domain
from ..privacy.budget import Budget
from ..privacy.noise import Randomness
from ..queries.base import count_query
from ..queries.plan import Oracle, Part, Plan, Spec, Staged
from .params import check_params

__all__ = [
    "FitContext",
    "FitResult",
    "ALGORITHMS",
    "NON_PRIVATE",
    "BASELINE",
    "SKLEARN_ALGORITHMS",
    "SPECS",
    "register",
    "algorithm_spec",
    "estimate_rows",
    "count_part",
    "ROW_COUNT_PART",
    "algorithm_params",
    "weighted_kmeans",
]


@dataclass
class FitContext:
    """Everything an algorithm may use: the oracle is its only door to the data.

    An algorithm first declares its plan (``oracle.plan(parts, needs=...)``), which is checked
    against the oracle's capabilities and the budget before any row is read, and then releases
    through that plan only.  ``budget`` is public (the user's request): central-only algorithms
    that price their own mechanisms (explicit parts) read it; the others declare shares."""

    oracle: Oracle
    n_clusters: int
    budget: Budget | None  # None: non-private
    randomness: Randomness  # public geometry streams (the noise belongs to the oracle)
    public_n: int | None = None
    count_fraction: float = 0.05
    # The estimator-level options and 'params' (the algorithm_params), as algorithms.params.check_params takes them
    options: dict = field(default_factory=dict)
    callback: Callable[[int, int], None] | None = None  # (iterations done, iterations planned)
    # The public domain (data units <-> the unit box), for points the user declares in data units (a public
    # start); a private box is found on its first use, after the plan is checked.  None when planning.
    domain: Domain | None = None
    # (what, fraction done) of a long public stage before the iterations, e.g. placing many starting centers
    progress: Callable[[str, float], None] | None = None

    def stage(self, what: str) -> Callable[[float], None] | None:
        """``progress`` for one stage, or None when nobody listens."""
        if self.progress is None:
            return None
        report = self.progress
        return lambda fraction: report(what, fraction)

    @property
    def n_features(self) -> int:
        return self.oracle.n_features

    @property
    def non_private(self) -> bool:
        return self.budget is None


@dataclass
class FitResult:
    centers: np.ndarray  # in the unit box [-1, 1]^d
    n_iter: int
    n_estimate: float | None = None  # the (noisy or public) row count the heuristics used
    info: dict = field(default_factory=dict)


ALGORITHMS: dict[str, Callable[[FitContext], FitResult]] = {}
# The non-private baseline: exact releases, epsilon = inf.  Not "lloyd": scikit-learn's KMeans(algorithm="lloyd")
# names its (non-private) Lloyd implementation, and code written for it must never get a non-private fit here
# by passing its own parameter on (the estimator reads "lloyd" and "elkan" as scikit-learn's: docs/sklearn.md).
BASELINE = "nonprivate-lloyd"
NON_PRIVATE = frozenset({BASELINE})
SKLEARN_ALGORITHMS = ("lloyd", "elkan")  # scikit-learn's KMeans(algorithm=...): its implementations of Lloyd
NEARLY_EMPTY = 0.01  # a center whose noisy size is below 1% of the noisy row count serves (nearly) nobody
SPECS: dict[str, Callable[[FitContext], Spec | Staged]] = {}  # each algorithm's plan as a value
MAX_ROW_ESTIMATE = 2.0**53


def register(name: str, spec: Callable[[FitContext], Spec | Staged]):
    """Register an algorithm: ``run(ctx)`` fits, and ``spec(ctx)`` is its plan, computed from the public
    parameters in ``ctx`` alone (the oracle's capabilities and budget, k, d, options), reading no row."""

    def wrap(fn: Callable[[FitContext], FitResult]):
        ALGORITHMS[name] = fn
        SPECS[name] = spec
        return fn

    return wrap


def algorithm_spec(name: str, ctx: FitContext) -> Spec | Staged:
    """The plan ``name`` would make in ``ctx``, as a value: check it with ``ctx.oracle.check``."""
    if name not in SPECS:
        raise ValueError(f"unknown algorithm {name!r}; choose one of {sorted(SPECS)}")
    return SPECS[name](ctx)


def algorithm_params(ctx: FitContext, algorithm: str) -> dict:
    """``algorithm``'s parameters from ``ctx.options``, checked against its table (``algorithms.params``):
    the options it takes and every key of its ``algorithm_params``, defaults filled in, in one flat dict."""
    checked = check_params(algorithm, ctx.options)
    return {**{key: value for key, value in checked.items() if key != "params"}, **checked["params"]}


def weighted_kmeans(
    points: np.ndarray, weights: np.ndarray, k: int, rng: np.random.Generator, starts: int = 3
) -> np.ndarray:
    """Non-private weighted k-means of released points (post-processing), from ``starts`` k-means++ starts drawn
    from the public ``rng``; keeps the heaviest if at most k weigh."""
    import warnings

    from sklearn.cluster import KMeans as SkKMeans
    from sklearn.exceptions import ConvergenceWarning

    heavy = np.flatnonzero(weights > 0)
    if heavy.size <= k:
        return points[np.argsort(-weights, kind="stable")[:k]]
    model = SkKMeans(n_clusters=k, n_init=starts, random_state=int(rng.integers(0, 2**31 - 1)))
    with warnings.catch_warnings(), one_thread():  # a few released points: threads cost more than they save
        warnings.simplefilter("ignore", ConvergenceWarning)  # duplicate released points are expected
        return model.fit(points[heavy], sample_weight=weights[heavy]).cluster_centers_


ROW_COUNT_PART = "row count"


def count_part(
    ctx: FitContext, *, share: float | None = None, epsilon: float | None = None, counted: bool | None = None
) -> list[Part]:
    """The plan's part for a noisy row count -- none when the count is declared public (``public_n``).

    ``share`` (of the pool) by default ``count_fraction``; ``epsilon`` for an explicit Laplace count;
    ``counted`` overrides ``public_n`` (a plan made before a staged count, which makes n known)."""
    if not (ctx.public_n is None if counted is None else counted):
        return []
    if epsilon is not None:
        return [Part(ROW_COUNT_PART, epsilon=epsilon)]
    return [Part(ROW_COUNT_PART, share=ctx.count_fraction if share is None else share)]


def estimate_rows(ctx: FitContext, plan: Plan) -> float:
    """The row count for data-dependent heuristics: public if declared, else a noisy count.

    Under add/remove neighbouring the count is private, so it is either
    declared by the user (``public_n``) or released from the plan's
    :func:`count_part` (its cost recorded like any other release).  The result is clamped to
    [1, 2^53] -- post-processing: heuristics only need its order of magnitude, and
    at tiny epsilon the noise alone can be large enough to overflow them.
    """
    if ctx.public_n is not None:
        return float(ctx.public_n)
    noisy = plan.release(count_query(), ROW_COUNT_PART)["count"]
    return min(max(float(noisy[0, 0]), 1.0), MAX_ROW_ESTIMATE)

"""Locating one small cluster privately, and sample-and-aggregate (Nissim, Stemmer & Vadhan 2016).

``one_cluster`` finds a ball holding about ``t`` of the rows;
``sample_and_aggregate`` runs any non-private analysis on disjoint random
parts of the data and privately returns a point close to most of its
outputs (by locating the 1-cluster of the outputs).  The algorithms and
their privacy argument are in ``privclust.algorithms.onecluster``.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ._validation import check_delta, check_epsilon, check_int
from .algorithms.onecluster import background_rows, locate, make_plan
from .geometry.domain import make_domain
from .privacy.budget import Budget, PrivacyAccountant, PrivacyReport, Spend
from .privacy.noise import Randomness
from .queries.curator import fit_ledger
from .queries.plan import EXACT
from .session import open_session

__all__ = ["OneCluster", "one_cluster", "sample_and_aggregate"]


@dataclass
class OneCluster:
    """A privately located ball: ``center`` and ``radius`` in data units.

    ``found`` is False when a step found no heavy region; the center is then
    a uniform point of the domain (that reveals only the failure).  For
    per-feature bounds of different widths the radius is that of the ball
    containing the located (unit-box) ball's image, i.e. conservative.
    """

    center: np.ndarray
    radius: float
    found: bool
    privacy_spent: PrivacyReport

    def contains(self, X) -> np.ndarray:
        """Which rows lie in the ball (post-processing; on private rows, not itself private)."""
        X = np.asarray(X, dtype=np.float64)
        return np.linalg.norm(X - self.center, axis=1) <= self.radius

    def outliers(self, X) -> np.ndarray:
        """The rows outside the ball."""
        return ~self.contains(X)


def one_cluster(
    X,
    t: int,
    epsilon: float = 1.0,
    delta: float = 1e-6,
    bounds=None,
    *,
    budget_split: dict | None = None,
    shifts: int = 30,
    public_n: int | None = None,
    random_state=None,
    accountant: PrivacyAccountant | None = None,
) -> OneCluster:
    """Privately find a ball holding about ``t`` rows of ``X`` with near-minimal radius (GoodRadius + GoodCenter).

    ``t`` is public (chosen without looking at the data); ``bounds`` is the
    public domain as for :class:`privclust.KMeans`.  The whole call is
    (epsilon, delta)-DP; ``budget_split`` divides it between the steps
    (keys radius, shift, box, axes, average, refine; see the algorithm's docs).
    ``public_n``, a row count that is public knowledge, sets GoodCenter's JL
    dimension to the seed's ceil(ln n); without it a public stand-in is used
    (``algorithms.onecluster.jl_dimension``), never the rows' count.
    """
    budget = Budget(check_epsilon(epsilon), check_delta(delta))
    t = check_int("t", t)
    if public_n is not None:
        public_n = check_int("public_n", public_n)
    plan = make_plan(budget.epsilon, budget.delta, budget_split, shifts, n_hint=public_n or background_rows(t))
    with open_session(budget, bounds, X, parent=accountant, random_state=random_state) as session:
        parts = plan.parts()
        served = session.oracle.plan(parts, needs={EXACT}, what="1-cluster")
        rng = session.randomness.geometry()
        center, radius, found = served.run_exact(
            [part.name for part in parts],
            lambda rows: locate(
                rows.map_rows(lambda chunk: np.array(chunk, dtype=np.float64)), t, plan, rows.noise, rng
            ),
        )
    return OneCluster(
        center=session.domain.from_unit(center[None, :])[0],
        radius=radius * session.domain.length_scale,
        found=found,
        privacy_spent=session.report(),
    )


MAX_SUBSETS = 10**6  # a public cap on the parts (each is one call of f); never compared with the row count


def sample_and_aggregate(
    f: Callable[[np.ndarray], np.ndarray],
    X,
    n_subsets: int,
    output_bounds,
    epsilon: float = 1.0,
    delta: float = 1e-6,
    *,
    output_dim: int | None = None,
    t: int | None = None,
    random_state=None,
    accountant: PrivacyAccountant | None = None,
    **one_cluster_options,
) -> OneCluster:
    """Run ``f`` on ``n_subsets`` disjoint random parts of ``X`` and privately aggregate (Nissim, Stemmer & Vadhan 2016, Section 6).

    Each row goes to one uniformly random part (drawn independently of the
    data), so adding or removing a row changes one part and hence at most one
    of the ``n_subsets`` outputs.  The outputs -- vectors of the public length
    ``output_dim`` inside ``output_bounds`` (public, as for ``bounds``; with
    per-feature bounds their count is the length) -- are then a data set in
    which one row of ``X`` is one point, and :func:`one_cluster` on them with
    ``t`` (default: half the parts) is (epsilon, delta)-DP for ``X``.

    ``f`` need not be private, deterministic or total: a part on which it
    raises (any exception but ``KeyboardInterrupt``, ``SystemExit`` too),
    returns something of another length, or returns NaN or infinity
    contributes a fixed public point (the center of ``output_bounds``)
    instead, so the outcome is a released ball whatever ``f`` does -- an
    exception or a message would reveal how ``f`` behaved on the private
    parts.  For the same reason every warning ``f`` raises on a part is
    suppressed (``warnings.simplefilter("ignore")`` and numpy's
    ``errstate(all="ignore")`` around each call, the caller's settings
    restored after): test ``f`` on public data to see its warnings.  What
    ``f`` does beyond returning -- printing, logging, writing files, its
    running time -- is up to ``f``.  Every parameter is checked (and the
    budget charged in advance) before ``f`` runs.  The result's ``center`` is
    the private answer; ``radius`` says how tightly most parts agreed.
    """
    n_subsets = check_int("n_subsets", n_subsets, 2, MAX_SUBSETS)
    t = n_subsets // 2 if t is None else check_int("t", t)
    if t > n_subsets:
        raise ValueError(f"t={t} exceeds the number of subsets {n_subsets}")
    width = _output_dim(output_bounds, output_dim)
    budget = Budget(check_epsilon(epsilon), check_delta(delta))
    if isinstance(output_bounds, str):
        raise ValueError("output_bounds must be declared (numbers): f's outputs are private, never read them off")
    domain = make_domain(output_bounds, width)  # validates the bounds before f runs
    unknown = set(one_cluster_options) - {"budget_split", "shifts"}
    if unknown:
        raise TypeError(f"unknown one_cluster options {sorted(unknown)}; accepted: budget_split, shifts")
    plan = make_plan(
        budget.epsilon, budget.delta, one_cluster_options.get("budget_split"), one_cluster_options.get("shifts", 30)
    )
    # The whole cost is charged up front (the plan's explicit parts), before f runs on any part.
    spends = [Spend(part.name, epsilon=part.epsilon, delta=part.delta) for part in plan.parts()]
    fit_ledger(budget, output_bounds, accountant).check(spends)
    fallback = domain.from_unit(np.zeros((1, width)))[0]

    X = np.asarray(X)
    if X.ndim == 0:
        raise ValueError("X must be a sequence of rows (an array with at least one dimension)")
    rng = Randomness(random_state).geometry()
    part_of = rng.integers(0, n_subsets, size=X.shape[0])
    order = np.argsort(part_of, kind="stable")  # each part's rows in their original order
    starts = np.searchsorted(part_of[order], np.arange(n_subsets + 1))
    outputs = np.empty((n_subsets, width))
    for part in range(n_subsets):
        outputs[part] = _output_or(fallback, f, X[order[starts[part] : starts[part + 1]]])
    return one_cluster(
        outputs,
        t,
        budget.epsilon,
        budget.delta,
        output_bounds,
        public_n=n_subsets,  # one output per part: the aggregated data set's size is public
        random_state=random_state,
        accountant=accountant,
        **one_cluster_options,
    )


def _output_dim(output_bounds, output_dim) -> int:
    """The public length of f's output: ``output_dim``, or the number of per-feature output bounds."""
    if output_dim is not None:
        return check_int("output_dim", output_dim)
    try:
        shape = np.shape(output_bounds) if not isinstance(output_bounds, (str, dict)) else ()
    except ValueError:
        shape = ()
    if len(shape) == 2 and shape[1] == 2:
        return shape[0]
    raise ValueError(
        "give output_dim (the length of f's output vector), or per-feature output_bounds [(lo, hi), ...]: "
        "the length must be public, since one read off f's outputs would depend on the private data"
    )


def _output_or(fallback: np.ndarray, f, part: np.ndarray) -> np.ndarray:
    """f(part) as a vector of the public length, or the fixed ``fallback`` whatever went wrong."""
    try:
        # f's warnings (its own, numpy's floating-point ones) on a private part would show how it
        # behaved there: none is let through, and the caller's filters and numpy's settings are back after.
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            value = np.asarray(f(part), dtype=np.float64).ravel()
    except KeyboardInterrupt:  # the user's, not f's
        raise
    except BaseException:  # noqa: BLE001 -- how f failed on a private part (sys.exit included) must not show
        return fallback
    if value.shape != fallback.shape or not np.all(np.isfinite(value)):
        return fallback
    return value

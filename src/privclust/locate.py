"""Locating one small cluster privately, and sample-and-aggregate (seed 001).

``one_cluster`` finds a ball holding about ``t`` of the rows;
``sample_and_aggregate`` runs any non-private analysis on disjoint random
parts of the data and privately returns a point close to most of its
outputs (by locating the 1-cluster of the outputs).  The algorithms and
their privacy argument are in ``privclust.algorithms.onecluster``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ._validation import check_delta, check_epsilon, check_int
from .algorithms.onecluster import locate, make_plan
from .privacy.budget import Budget, PrivacyAccountant, PrivacyReport
from .privacy.noise import Randomness
from .queries.curator import central_oracle

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
    random_state=None,
    accountant: PrivacyAccountant | None = None,
) -> OneCluster:
    """Privately find a ball holding about ``t`` rows of ``X`` with near-minimal radius (GoodRadius + GoodCenter).

    ``t`` is public (chosen without looking at the data); ``bounds`` is the
    public domain as for :class:`privclust.KMeans`.  The whole call is
    (epsilon, delta)-DP; ``budget_split`` divides it between the steps
    (keys radius, shift, box, axes, average, refine; see the algorithm's docs).
    """
    budget = Budget(check_epsilon(epsilon), check_delta(delta))
    t = check_int("t", t)
    plan = make_plan(budget.epsilon, budget.delta, budget_split, shifts)
    ledger = PrivacyAccountant(budget, parent=accountant)
    randomness = Randomness(random_state)
    with central_oracle(X, bounds, ledger, randomness.noise) as curated:
        oracle, domain = curated.oracle, curated.domain
        rng = randomness.geometry()
        center, radius, found = oracle.run_mechanism(
            plan.spends(),
            lambda rows: locate(
                rows.map_rows(lambda chunk: np.array(chunk, dtype=np.float64)), t, plan, oracle.noise, rng
            ),
        )
    return OneCluster(
        center=domain.from_unit(center[None, :])[0],
        radius=radius * domain.length_scale,
        found=found,
        privacy_spent=ledger.report(budget.delta),
    )


def sample_and_aggregate(
    f: Callable[[np.ndarray], np.ndarray],
    X,
    n_subsets: int,
    output_bounds,
    epsilon: float = 1.0,
    delta: float = 1e-6,
    *,
    t: int | None = None,
    random_state=None,
    accountant: PrivacyAccountant | None = None,
    **one_cluster_options,
) -> OneCluster:
    """Run ``f`` on ``n_subsets`` disjoint random parts of ``X`` and privately aggregate (seed 001, Section 6).

    Each row goes to one uniformly random part (drawn independently of the
    data), so adding or removing a row changes one part and hence at most one
    of the ``n_subsets`` outputs.  The outputs -- vectors of one fixed length
    inside ``output_bounds`` (public, as for ``bounds``) -- are then a data set
    in which one row of ``X`` is one point, and :func:`one_cluster` on them
    with ``t`` (default: half the parts) is (epsilon, delta)-DP for ``X``.
    ``f`` itself need not be private or even deterministic; a subset on which it
    raises or returns NaN contributes the zero vector instead (an exception
    would reveal which subset failed).  The result's
    ``center`` is the private answer; ``radius`` says how tightly most
    subsets agreed.
    """
    n_subsets = check_int("n_subsets", n_subsets, 2)
    t = n_subsets // 2 if t is None else check_int("t", t)
    if t > n_subsets:
        raise ValueError(f"t={t} exceeds the number of subsets {n_subsets}")
    X = np.asarray(X)
    if X.ndim == 0 or X.shape[0] < n_subsets:
        raise ValueError(f"sample_and_aggregate needs at least n_subsets={n_subsets} rows, got {X.shape[:1]}")
    rng = Randomness(random_state).geometry()
    part_of = rng.integers(0, n_subsets, size=X.shape[0])
    outputs: list[np.ndarray | None] = []
    for part in range(n_subsets):
        try:
            value = np.atleast_1d(np.asarray(f(X[part_of == part]), dtype=np.float64)).ravel()
        except Exception:  # noqa: BLE001 -- which subset made f fail is private: it becomes a fixed point
            value = None
        outputs.append(value)
    lengths = {v.size for v in outputs if v is not None}
    if not lengths:
        raise ValueError("f failed on every subset; check it on public or synthetic data first")
    if len(lengths) > 1:
        raise ValueError(f"f returned vectors of different lengths ({sorted(lengths)})")
    width = lengths.pop()
    outputs = np.array([np.zeros(width) if v is None else v for v in outputs])
    outputs = np.nan_to_num(outputs, nan=0.0, posinf=0.0, neginf=0.0)  # f's failures become fixed points
    return one_cluster(
        outputs,
        t,
        epsilon,
        delta,
        output_bounds,
        random_state=random_state,
        accountant=accountant,
        **one_cluster_options,
    )

"""The private elbow curve (Dupré la Tour, Henzinger & Saulpic 2024, Appendix A.3): one greedy run, a cost for every k <= k_max.

One greedy run with k_max centers and its lifting (one Gaussian release of
every cell's size, sum and sum of squared norms) are all the curve needs:
for each k, the k_max cells' noisy means are clustered into k centers,
weighted by their noisy sizes (Lemma C.1), and the cost of sending every
cell to its nearest center is read off the released moments (Lemma 2.5).
The cost counts the cells whose noisy size clears its noise (the ones the
centers are fit to): an empty cell's moments are pure noise, and its term
would swing the tail of the curve as k changes.  The released estimates are
then made a valid cost curve -- non-negative and non-increasing in k, by
isotonic regression (``monotone_costs``) -- and the elbow is the smallest k
after which no larger k improves it by more than the estimate's noise
(public, from the release's error model) allows (``settled_elbow``).
Everything after the release is post-processing, so the whole curve costs
exactly that run, which ``privacy_spent`` reports.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._validation import check_delta, check_epsilon, check_n_clusters
from .algorithms.greedy import (
    greedy_spec,
    monotone_costs,
    select_and_lift,
    settled_elbow,
    solution_cost_and_std,
)
from .algorithms.lloyd import fastlloyd_eta
from .privacy.budget import Budget, PrivacyAccountant, PrivacyReport
from .session import open_session

__all__ = ["ElbowCurve", "elbow_curve"]


@dataclass
class ElbowCurve:
    ks: np.ndarray
    costs: np.ndarray  # estimated k-means cost in the unit box of the bounds: >= 0, non-increasing in k
    elbow: int
    privacy_spent: PrivacyReport
    raw_costs: np.ndarray | None = None  # the estimates before they were made monotone (may dip below 0)
    cost_std: np.ndarray | None = None  # each raw estimate's noise standard deviation (the error model)

    def plot(self, path) -> None:
        from .plotting import plot_cost_curves

        spent = self.privacy_spent.epsilon
        title = f"private elbow curve, epsilon = {spent:.3g}" if np.isfinite(spent) else "elbow curve, NOT private"
        plot_cost_curves(path, [self.costs], self.elbow, f"elbow: k = {self.elbow}", title)


def elbow_curve(
    X,
    k_max: int,
    epsilon: float = 1.0,
    delta: float = 1e-6,
    bounds=None,
    *,
    random_state=None,
    accountant: PrivacyAccountant | None = None,
    algorithm_params: dict | None = None,
) -> ElbowCurve:
    """The noisy k-means cost of the greedy's solution for every k = 1 .. k_max, and the elbow."""
    budget = Budget(check_epsilon(epsilon), check_delta(delta))
    check_n_clusters(k_max, "k_max")
    with open_session(budget, bounds, X, parent=accountant, random_state=random_state) as session:
        ctx = session.context(k_max, options={"params": algorithm_params})
        spec = greedy_spec(ctx, int(k_max))
        if spec.restarts != 1:
            raise ValueError("the elbow curve uses one greedy run; drop 'restarts'")
        plan = spec.open(session.oracle)
        rng = session.randomness.geometry()
        _, lifted = select_and_lift(ctx, plan, spec, rng, 0, fastlloyd_eta(session.n_features, int(k_max)))
    raw, stds = [], []
    for k in range(1, int(k_max) + 1):
        _, cost, std = solution_cost_and_std(lifted, k, rng, significant=True)
        raw.append(cost)
        stds.append(std)
    raw, stds = np.array(raw), np.array(stds)
    costs = monotone_costs(raw)
    return ElbowCurve(np.arange(1, k_max + 1), costs, settled_elbow(costs, stds), session.report(), raw, stds)

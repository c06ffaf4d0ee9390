"""The private elbow curve (Dupré la Tour, Henzinger & Saulpic 2024, Appendix A.3): one greedy run, a cost for every k <= k_max.

One greedy run with k_max centers and its lifting (one Gaussian release of
every cell's size, sum and sum of squared norms) are all the curve needs:
for each k, the k_max cells' noisy means are clustered into k centers,
weighted by their noisy sizes (Lemma C.1), and the cost of sending every
cell to its nearest center is read off the released moments (Lemma 2.5).
Everything after the release is post-processing, so the whole curve costs
exactly that run, which ``privacy_spent`` reports.  The elbow is the k
farthest below the chord of the normalised curve.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._validation import check_delta, check_epsilon, check_n_clusters
from .algorithms.greedy import find_elbow, greedy_spec, select_and_lift, solution_cost
from .algorithms.lloyd import fastlloyd_eta
from .privacy.budget import Budget, PrivacyAccountant, PrivacyReport
from .session import open_session

__all__ = ["ElbowCurve", "elbow_curve"]


@dataclass
class ElbowCurve:
    ks: np.ndarray
    costs: np.ndarray  # estimated k-means cost in the unit box of the bounds (private)
    elbow: int
    privacy_spent: PrivacyReport

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
    costs = np.array([solution_cost(lifted, k, rng)[1] for k in range(1, int(k_max) + 1)])
    return ElbowCurve(np.arange(1, k_max + 1), costs, find_elbow(costs), session.report())

"""The private elbow curve (seed 000, Appendix A.3): one greedy run, the cost of every k <= k_max.

The greedy's first j centers solve j-clustering for every j at once, so one
run with k_max centers and one lifting release (per-cell noisy size, sum and
sum of squared norms) give an estimated cost for every j (Lemma 2.5: every
cell's rows go to the lifted prefix center nearest the cell's mean) -- by
post-processing, at the privacy cost of that single run, which is what
``privacy_spent`` reports.  The elbow is the k farthest below the chord of
the normalised curve.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._validation import check_data, check_delta, check_epsilon, check_n_clusters
from .algorithms.base import FitContext
from .algorithms.greedy import find_elbow, lift, plan, prefix_cost_query, projection_for, run_greedy
from .algorithms.lloyd import fastlloyd_eta
from .geometry.domain import make_domain
from .privacy.budget import Budget, PrivacyAccountant, PrivacyReport
from .privacy.gdp import gdp_mu
from .privacy.noise import Randomness
from .queries.central import CentralOracle

__all__ = ["ElbowCurve", "elbow_curve"]


@dataclass
class ElbowCurve:
    ks: np.ndarray
    costs: np.ndarray  # noisy clipped k-means cost in the unit box of the bounds (private)
    elbow: int
    privacy_spent: PrivacyReport

    def plot(self, path) -> None:
        from .plotting import _pyplot

        plt = _pyplot()
        fig, ax = plt.subplots(figsize=(5, 3.2), dpi=100)
        ax.plot(self.ks, self.costs, marker="o", markersize=3)
        ax.axvline(self.elbow, color="red", linestyle="--", label=f"elbow: k = {self.elbow}")
        ax.set_xlabel("k")
        ax.set_ylabel("noisy cost (unit box)")
        ax.set_title(f"private elbow curve, epsilon = {self.privacy_spent.epsilon:.3g}")
        ax.legend()
        fig.tight_layout()
        fig.savefig(path)
        plt.close(fig)


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
    cost_share: float = 0.4,
    clip: float | None = None,
) -> ElbowCurve:
    """The noisy k-means cost of the greedy's solution for every k = 1 .. k_max, and the elbow."""
    budget = Budget(check_epsilon(epsilon), check_delta(delta))
    check_n_clusters(k_max)
    if not 0 < cost_share < 1:
        raise ValueError(f"cost_share must lie in (0, 1), got {cost_share!r}")
    if clip is not None and not (np.isfinite(clip) and clip > 0):
        raise ValueError(f"clip must be a positive number, got {clip!r}")
    X = check_data(X)
    check_n_clusters(k_max, X.shape[0])
    domain = make_domain(bounds, X.shape[1], data=X)
    ledger = PrivacyAccountant(budget, parent=accountant)
    randomness = Randomness(random_state)
    oracle = CentralOracle(X, ledger, randomness.noise, transform=domain.to_unit)
    greedy_budget = Budget(budget.epsilon * (1.0 - cost_share), budget.delta / 2.0)
    ctx = FitContext(oracle, int(k_max), greedy_budget, randomness, options={"params": algorithm_params})
    spec = plan(ctx, int(k_max))
    if spec.restarts != 1:
        raise ValueError("the elbow curve uses one greedy run; drop 'restarts'")
    mu_cost = gdp_mu(budget.epsilon * cost_share, budget.delta / 2.0)
    rng = randomness.geometry()
    project = projection_for(spec, X.shape[1], rng)
    reach = fastlloyd_eta(X.shape[1], int(k_max))
    clip = clip if clip is not None else 2.0 * reach
    centers = run_greedy(ctx, spec, project, rng)
    # The prefix centers in the original space: the greedy's cells' noisy means, in the greedy's order.
    means = lift(oracle, project, centers, spec, X.shape[1], reach).means
    costs = oracle.release(prefix_cost_query(lambda rows: rows, means, clip, mu_cost))["cost"][0]
    return ElbowCurve(np.arange(1, k_max + 1), costs, find_elbow(costs), ledger.report(budget.delta))

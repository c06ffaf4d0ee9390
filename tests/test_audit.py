"""Statistical privacy audits on neighbouring data sets.

Run a release many times on D and on D' = D plus one adversarial point, pick
an event, and lower-bound epsilon from Clopper-Pearson intervals of the two
event frequencies: with the right noise the bound stays below the claim;
with half the noise it exceeds it.
"""

import math

import numpy as np
import pytest
from scipy.stats import beta

from privclust.privacy.budget import PrivacyAccountant
from privclust.privacy.mechanisms import GaussianMechanism, LaplaceMechanism
from privclust.privacy.noise import SeededNoise
from privclust.queries import CentralOracle, count_query
from privclust.queries.base import voronoi_query
from privclust.queries.voronoi import VoronoiCells

RUNS = 4000


def epsilon_lower_bound(hits_d, hits_d2, runs, delta=0.0, alpha=0.05):
    """High-confidence lower bound on epsilon from event counts (both directions)."""
    def cp_low(k):
        return beta.ppf(alpha / 2, k, runs - k + 1) if k > 0 else 0.0

    def cp_high(k):
        return beta.ppf(1 - alpha / 2, k + 1, runs - k) if k < runs else 1.0

    best = 0.0
    for a, b in ((hits_d, hits_d2), (hits_d2, hits_d)):
        p_low, q_high = cp_low(a), cp_high(b)
        if p_low > delta and q_high > 0:
            best = max(best, math.log((p_low - delta) / q_high))
    return best


def released(X, query, seed):
    return CentralOracle(X, PrivacyAccountant(), SeededNoise(np.random.SeedSequence(seed))).release(query)


def audit(X, X2, query, statistic, threshold, delta):
    a = sum(statistic(released(X, query, s)) > threshold for s in range(RUNS))
    b = sum(statistic(released(X2, query, RUNS + s)) > threshold for s in range(RUNS))
    return epsilon_lower_bound(a, b, RUNS, delta)


@pytest.mark.slow
@pytest.mark.parametrize("broken", [False, True])
def test_laplace_count_audit(broken):
    eps = 1.0
    X = np.zeros((50, 1))
    X2 = np.zeros((51, 1))
    mech = LaplaceMechanism(1.0, (0.5 if broken else 1.0) / eps)
    bound = audit(X, X2, count_query(mech), lambda r: r["count"][0, 0], 50.5, 0.0)
    if broken:
        assert bound > eps
    else:
        assert bound <= eps


@pytest.mark.slow
@pytest.mark.parametrize("broken", [False, True])
def test_fastlloyd_step_audit(broken):
    """One radius-constrained relative-sum release; the extra point sits at the radius."""
    from privclust.privacy.gdp import gdp_delta

    mu = 2.0
    eps = 2.6  # the claim is (eps, gdp_delta(eps, mu)), a point on the mechanism's privacy curve
    claimed_delta = gdp_delta(eps, mu)
    radius = 0.5
    cells = VoronoiCells(np.array([[0.0, 0.0]]), radius=radius, relative=True)
    std = radius / mu * (0.5 if broken else 1.0)
    q = voronoi_query("it", cells, GaussianMechanism(radius, std), GaussianMechanism(1.0, 1e6))
    X = np.zeros((20, 2))
    X2 = np.vstack([X, [[radius * (1 - 1e-6), 0.0]]])
    bound = audit(X, X2, q, lambda r: r["sum"][0, 0], radius / 2 + 2 * std, claimed_delta)
    assert (bound > eps) == broken

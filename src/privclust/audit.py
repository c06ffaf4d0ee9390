"""Statistical privacy audits: empirical lower bounds on epsilon.

For a mechanism (or a whole algorithm) M, neighbouring data sets D and D'
(D' = D plus one adversarially chosen point), and a scalar statistic of the
output, the audit draws the statistic ``runs`` times on each side.  The first
half of the draws picks the event E = {statistic > t} or {statistic <= t}
(over a grid of thresholds t) that separates the sides best; the second half,
fresh, measures P[M(D) in E] and P[M(D') in E].  With Clopper-Pearson bounds
at the given confidence, (epsilon, delta)-DP implies

    epsilon >= ln((p_low - delta) / q_high)

in both directions, so that value is a high-confidence lower bound on the true
epsilon.  It must stay at or below the claimed epsilon; a mechanism with too
little noise is caught when its bound exceeds the claim.

An audit can only refute a claim, never prove one: a bound below the claim
means this event, at this sample size, found no violation.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Callable

import numpy as np
from scipy.stats import beta

__all__ = ["AuditResult", "epsilon_lower_bound", "run_audit", "AUDITS", "audit_all"]

Sampler = Callable[[int], float]  # seed -> statistic of one run


@dataclass
class AuditResult:
    name: str
    claimed_epsilon: float
    claimed_delta: float
    empirical_epsilon: float
    runs: int
    event: str

    @property
    def violated(self) -> bool:
        return self.empirical_epsilon > self.claimed_epsilon

    def as_dict(self) -> dict:
        return {**asdict(self), "violated": self.violated}


def _cp_low(hits: int, n: int, alpha: float) -> float:
    return float(beta.ppf(alpha, hits, n - hits + 1)) if hits > 0 else 0.0


def _cp_high(hits: int, n: int, alpha: float) -> float:
    return float(beta.ppf(1 - alpha, hits + 1, n - hits)) if hits < n else 1.0


def epsilon_lower_bound(hits_d: int, hits_d2: int, runs: int, delta: float = 0.0, confidence: float = 0.95) -> float:
    """High-confidence lower bound on epsilon from the counts of one event on each side."""
    alpha = (1.0 - confidence) / 2.0  # two one-sided bounds
    best = 0.0
    for a, b in ((hits_d, hits_d2), (hits_d2, hits_d)):
        p_low, q_high = _cp_low(a, runs, alpha), _cp_high(b, runs, alpha)
        if p_low > delta and q_high > 0:
            best = max(best, math.log((p_low - delta) / q_high))
    return best


def _best_event(a: np.ndarray, b: np.ndarray, delta: float) -> tuple[float, bool]:
    """Threshold and direction whose event separates the two samples most (on the selection half)."""
    pooled = np.concatenate([a, b])
    best, choice = -1.0, (float(np.median(pooled)), True)
    for t in np.unique(np.quantile(pooled, np.linspace(0.01, 0.99, 99))):
        for upper in (True, False):
            ha = int(np.sum(a > t) if upper else np.sum(a <= t))
            hb = int(np.sum(b > t) if upper else np.sum(b <= t))
            score = epsilon_lower_bound(ha, hb, len(a), delta, confidence=0.5)
            if score > best:
                best, choice = score, (float(t), upper)
    return choice


def run_audit(
    name: str,
    sample_d: Sampler,
    sample_d2: Sampler,
    claimed_epsilon: float,
    claimed_delta: float = 0.0,
    runs: int = 2000,
    confidence: float = 0.95,
) -> AuditResult:
    """Audit one mechanism; ``runs`` draws per side (half choose the event, half measure it)."""
    half = runs // 2
    a = np.array([sample_d(s) for s in range(runs)])
    b = np.array([sample_d2(runs + s) for s in range(runs)])
    t, upper = _best_event(a[:half], b[:half], claimed_delta)
    test_a, test_b = a[half:], b[half:]
    hits_a = int(np.sum(test_a > t) if upper else np.sum(test_a <= t))
    hits_b = int(np.sum(test_b > t) if upper else np.sum(test_b <= t))
    bound = epsilon_lower_bound(hits_a, hits_b, len(test_a), claimed_delta, confidence)
    event = f"statistic {'>' if upper else '<='} {t:.4g}"
    return AuditResult(name, claimed_epsilon, claimed_delta, bound, runs, event)


# --- the audits of every mechanism and algorithm --------------------------------------------


def _seeded(seed: int):
    from .privacy.noise import SeededNoise

    return SeededNoise(np.random.SeedSequence(seed))


def _ledger():
    from .privacy.budget import PrivacyAccountant

    return PrivacyAccountant()


def _count_sampler(mech, rows: int) -> Sampler:
    """A noisy row count of ``rows`` rows; the neighbour has one row more."""
    return lambda seed: float(mech.apply(np.array([float(rows)]), _seeded(seed))[0])


def _laplace(noise_factor: float = 1.0):
    from .privacy.mechanisms import LaplaceMechanism

    eps = 1.0
    mech = LaplaceMechanism(1.0, noise_factor / eps)
    return _count_sampler(mech, 40), _count_sampler(mech, 41), eps, 0.0


def _gaussian():
    from .privacy.gdp import gdp_delta
    from .privacy.mechanisms import GaussianMechanism

    mu, eps = 1.0, 1.0
    mech = GaussianMechanism.for_mu(mu, 1.0)
    return _count_sampler(mech, 40), _count_sampler(mech, 41), eps, gdp_delta(eps, mu)


def _exponential():
    from .privacy.mechanisms import exponential_mechanism

    eps = 1.0

    # Scores are counts (sensitivity 1); the extra point adds one to candidate 0.
    def sampler(scores) -> Sampler:
        return lambda seed: float(exponential_mechanism(scores, eps, 1.0, _seeded(seed), _ledger(), "em"))

    return sampler([3.0, 3.0, 3.0]), sampler([4.0, 3.0, 3.0]), eps, 0.0


def _implicit_exponential():
    from .privacy.mechanisms import sample_exponential

    eps = 1.0

    # Three listed candidates and e^2 implicit ones of score 0; the extra point covers candidate 0.
    def sampler(scores) -> Sampler:
        def run(seed: int) -> float:
            pick = sample_exponential(np.array(scores), eps, 1.0, _seeded(seed), log_n_implicit=2.0)
            return 1.0 if pick == 0 else 0.0  # was the candidate the extra point helps chosen?

        return run

    return sampler([2.0, 2.0, 2.0]), sampler([3.0, 2.0, 2.0]), eps, 0.0


def _good_radius():
    from .algorithms.onecluster import good_radius, radius_grid

    eps, t = 1.0, 8
    rng = np.random.default_rng(1)
    spread = rng.uniform(-0.9, 0.9, size=(8, 2))
    tight = np.zeros((4, 2)) + [0.3, 0.3]

    def sampler(points: np.ndarray) -> Sampler:
        radii = radius_grid(2)

        def run(seed: int) -> float:
            r = good_radius(points, t, eps, _seeded(seed), radii)
            return 1.0 if r is None else math.log(r)

        return run

    # Four coincident points and spread ones; the extra point is a fifth coincident one, which raises
    # L at every small radius by the most one point can (2): the search tends to stop earlier.
    base = np.vstack([spread, tight])
    return sampler(base), sampler(np.vstack([base, [[0.3, 0.3]]])), eps, 0.0


def _good_center():
    from .algorithms.onecluster import good_center, make_plan

    eps, delta = 1.0, 0.05
    split = {"radius": 0.2, "shift": 0.15, "box": 0.35, "axes": 0.1, "average": 0.1, "refine": 0.1}
    plan = make_plan(eps / 0.8, delta, split)  # the parts GoodCenter spends sum to eps
    threshold = 1.0 + 2.0 * math.log(2.0 / plan.part_delta) / plan.part("box")
    size = int(math.ceil(threshold))
    base = np.full((size, 2), 0.2)

    def sampler(points: np.ndarray) -> Sampler:
        def run(seed: int) -> float:
            center = good_center(points, 0.1, 4, plan, _seeded(seed), np.random.default_rng(seed))
            return 9.0 if center is None else float(center[0])

        return run

    # The heavy box holds about the stability threshold's worth of points; the extra point tips it.
    return sampler(base), sampler(np.vstack([base, [[0.2, 0.2]]])), eps, 3.0 * plan.part_delta


def _sparse_vector():
    from .privacy.mechanisms import above_threshold

    eps = 1.0

    def sampler(values) -> Sampler:
        def run(seed: int) -> float:
            index = above_threshold(values, 5.0, eps, 1.0, _seeded(seed), _ledger(), "svt")
            return -1.0 if index is None else float(index)

        return run

    # The extra point raises every query's count by one.
    return sampler([4.0, 4.0, 4.0, 4.0]), sampler([5.0, 5.0, 5.0, 5.0]), eps, 0.0


def _noisy_average():
    from .privacy.mechanisms import noisy_average

    eps, delta = 1.0, 1e-3

    def sampler(points: np.ndarray) -> Sampler:
        total, count = points.sum(axis=0), len(points)
        return lambda seed: float(
            noisy_average(total, count, 2.0, eps, delta, -np.ones(1), np.ones(1), _seeded(seed), _ledger(), "avg")[0]
        )

    base = np.full((60, 1), -1.0)
    return sampler(base), sampler(np.vstack([base, [[1.0]]])), eps, delta


def _algorithm(algorithm: str, params: dict | None = None):
    from .estimator import KMeans

    eps, delta = 1.0, 1e-3
    rng = np.random.default_rng(0)
    base = np.clip(rng.normal([-0.5, -0.5], 0.05, size=(30, 2)), -1, 1)
    extreme = np.vstack([base, [[1.0, 1.0]]])  # a point alone in a far corner

    def sampler(X: np.ndarray) -> Sampler:
        def run(seed: int) -> float:
            model = KMeans(
                2,
                epsilon=eps,
                delta=delta if algorithm != "sulloyd" else 0.0,
                bounds=(-1, 1),
                algorithm=algorithm,
                random_state=seed,
                public_n=30,
                max_iter=2,
                algorithm_params=params,
            ).fit(X)
            # How close any released center came to the lone corner point.
            return float(np.linalg.norm(model.cluster_centers_ - 1.0, axis=1).min())

        return run

    claimed_delta = 0.0 if algorithm == "sulloyd" else delta
    return sampler(base), sampler(extreme), eps, claimed_delta


AUDITS: dict[str, Callable[[], tuple]] = {
    "laplace": _laplace,
    "gaussian": _gaussian,
    "exponential mechanism": _exponential,
    "sparse vector": _sparse_vector,
    "implicit exponential mechanism": _implicit_exponential,
    "GoodRadius": _good_radius,
    "GoodCenter": _good_center,
    "NoisyAVG": _noisy_average,
    "fastlloyd": lambda: _algorithm("fastlloyd"),
    "glloyd": lambda: _algorithm("glloyd"),
    "sulloyd": lambda: _algorithm("sulloyd"),
    "greedy (exponential mechanism)": lambda: _algorithm("greedy", {"selection": "exponential", "levels": 4}),
}

# A deliberately broken mechanism (half the Laplace noise it claims): an audit must catch it.
BROKEN: dict[str, Callable[[], tuple]] = {"laplace, noise halved (broken on purpose)": lambda: _laplace(0.5)}


def audit_all(runs: int, names=None, include_broken: bool = True, on_done=None) -> list[AuditResult]:
    chosen = {**AUDITS, **(BROKEN if include_broken else {})}
    results = []
    for name, build in chosen.items():
        if names and name not in names:
            continue
        sample_d, sample_d2, eps, delta = build()
        results.append(run_audit(name, sample_d, sample_d2, eps, delta, runs))
        if on_done:
            on_done(results[-1])
    return results

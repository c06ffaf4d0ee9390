"""The noise-adding mechanisms, each carrying its own accounting.

A mechanism object says how much noise it adds, what sensitivity it assumes
and in which norm, and what one application costs (:meth:`spend`).  The
aggregate-query oracles (``privclust.queries``) clip every contribution to
the mechanism's sensitivity before summing, so the assumption always holds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._validation import positive_finite
from .budget import PrivacyAccountant, Spend
from .gdp import gdp_mu
from .noise import NoiseSource

__all__ = [
    "GaussianMechanism",
    "LaplaceMechanism",
    "NonPrivate",
    "Mechanism",
    "exponential_mechanism",
    "above_threshold",
    "noisy_average",
]


@dataclass(frozen=True)
class GaussianMechanism:
    """x + N(0, std^2 I) for a query of l2 sensitivity ``sensitivity``: (sensitivity/std)-GDP."""

    sensitivity: float
    std: float
    norm = "l2"

    def __post_init__(self):
        positive_finite("sensitivity", self.sensitivity)
        positive_finite("noise std", self.std)

    @classmethod
    def calibrated(cls, epsilon: float, delta: float, sensitivity: float) -> "GaussianMechanism":
        """The analytic Gaussian mechanism (Balle & Wang 2018): the least noise for (epsilon, delta)."""
        return cls(sensitivity=sensitivity, std=sensitivity / gdp_mu(epsilon, delta))

    @classmethod
    def for_mu(cls, mu: float, sensitivity: float) -> "GaussianMechanism":
        return cls(sensitivity=sensitivity, std=positive_finite("sensitivity", sensitivity) / positive_finite("mu", mu))

    @property
    def mu(self) -> float:
        return self.sensitivity / self.std

    def spend(self, label: str) -> Spend:
        return Spend(label=label, mu=self.mu)

    def apply(self, values: np.ndarray, noise: NoiseSource) -> np.ndarray:
        return noise.add_gaussian(values, self.std)


@dataclass(frozen=True)
class LaplaceMechanism:
    """x + Lap(scale) per coordinate for l1 sensitivity ``sensitivity``: (sensitivity/scale)-DP."""

    sensitivity: float
    scale: float
    norm = "l1"

    def __post_init__(self):
        positive_finite("sensitivity", self.sensitivity)
        positive_finite("Laplace scale", self.scale)

    @classmethod
    def calibrated(cls, epsilon: float, sensitivity: float) -> "LaplaceMechanism":
        return cls(
            sensitivity=sensitivity,
            scale=positive_finite("sensitivity", sensitivity) / positive_finite("epsilon", epsilon),
        )

    @property
    def epsilon(self) -> float:
        return self.sensitivity / self.scale

    def spend(self, label: str) -> Spend:
        return Spend(label=label, epsilon=self.epsilon)

    def apply(self, values: np.ndarray, noise: NoiseSource) -> np.ndarray:
        return noise.add_laplace(values, self.scale)


@dataclass(frozen=True)
class NonPrivate:
    """Exact release, for the non-private baseline only: recorded as epsilon = inf."""

    sensitivity: float = math.inf
    norm = None

    def spend(self, label: str) -> Spend:
        return Spend(label=label, epsilon=math.inf)

    def apply(self, values: np.ndarray, noise: NoiseSource) -> np.ndarray:
        return np.asarray(values, dtype=np.float64)


Mechanism = GaussianMechanism | LaplaceMechanism | NonPrivate


def exponential_mechanism(
    scores: np.ndarray,
    epsilon: float,
    sensitivity: float,
    noise: NoiseSource,
    accountant: PrivacyAccountant,
    label: str,
) -> int:
    """Privately select the index of a high score; epsilon-DP.

    Implemented as report-noisy-max with exponential noise of scale
    ``2 * sensitivity / epsilon`` -- the permute-and-flip mechanism (McKenna &
    Sheldon 2020), which is epsilon-DP like the exponential mechanism, never
    less accurate, and needs no exponentials (so it cannot overflow).
    ``sensitivity`` bounds how much any score changes between neighbours.
    """
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim != 1 or scores.size == 0:
        raise ValueError("scores must be a non-empty 1-D array")
    if not np.all(np.isfinite(scores)):
        raise ValueError("scores must be finite")
    spend = Spend(label=label, epsilon=positive_finite("epsilon", epsilon))
    accountant.check([spend])
    index = noise.noisy_argmax(scores, 2.0 * positive_finite("sensitivity", sensitivity) / epsilon)
    accountant.spend(spend)
    return index


def above_threshold(
    values,
    threshold: float,
    epsilon: float,
    sensitivity: float,
    noise: NoiseSource,
    accountant: PrivacyAccountant,
    label: str,
) -> int | None:
    """Sparse vector technique (AboveThreshold, Dwork & Roth Alg. 1): epsilon-DP.

    ``values`` are the exact answers of a stream of queries, each of
    sensitivity ``sensitivity``, in a data-independent order.  The threshold
    gets Laplace(2 sensitivity / epsilon) noise once, each answer
    Laplace(4 sensitivity / epsilon); the index of the first noisy answer at or
    above the noisy threshold is returned (``None`` if none is).  The cost is
    epsilon however many queries are asked, because only the first crossing is
    released.
    """
    spend = Spend(label=label, epsilon=positive_finite("epsilon", epsilon))
    accountant.check([spend])
    sensitivity = positive_finite("sensitivity", sensitivity)
    noisy_threshold = noise.add_laplace(np.array([float(threshold)]), 2.0 * sensitivity / epsilon)[0]
    accountant.spend(spend)
    values = np.asarray(values, dtype=np.float64)
    noisy = noise.add_laplace(values, 4.0 * sensitivity / epsilon)
    above = np.flatnonzero(noisy >= noisy_threshold)
    return int(above[0]) if above.size else None


def noisy_average(
    total: np.ndarray,
    count: float,
    diameter: float,
    epsilon: float,
    delta: float,
    low: np.ndarray,
    high: np.ndarray,
    noise: NoiseSource,
    accountant: PrivacyAccountant,
    label: str,
) -> np.ndarray:
    """NoisyAVG (seed 001, Alg. 5; seed 004, Alg. 3): (epsilon, delta)-DP average of a point set.

    ``total`` and ``count`` are the exact sum and size of the set V, whose
    points lie in a public region of diameter ``diameter``.  A noisy size
    m = |V| + Lap(5/eps) - (5/eps) ln(2/delta) is drawn; if m <= 0 the output is
    a uniform point of the box [low, high] (it reveals only that the set is
    small), else the average plus N(0, sigma^2 I) with
    sigma = 5 diameter / (4 eps m) * sqrt(2 ln(3.5/delta)).
    """
    epsilon = positive_finite("epsilon", epsilon)
    if not 0 < delta < 1:
        raise ValueError(f"delta must lie in (0, 1), got {delta!r}")
    diameter = positive_finite("diameter", diameter)
    spend = Spend(label=label, epsilon=epsilon, delta=float(delta))
    accountant.check([spend])
    shift = 5.0 / epsilon * math.log(2.0 / delta)
    m = noise.add_laplace(np.array([float(count)]), 5.0 / epsilon)[0] - shift
    accountant.spend(spend)
    if m <= 0:
        return noise.uniform(np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64))
    sigma = 5.0 * diameter / (4.0 * epsilon * m) * math.sqrt(2.0 * math.log(3.5 / delta))
    return noise.add_gaussian(np.asarray(total, dtype=np.float64) / max(float(count), 1.0), sigma)

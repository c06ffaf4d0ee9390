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
        return cls(sensitivity=sensitivity, scale=positive_finite("sensitivity", sensitivity) / positive_finite("epsilon", epsilon))

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

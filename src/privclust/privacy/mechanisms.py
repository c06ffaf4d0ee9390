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
    "NoisyAverage",
    "sample_exponential",
    "ExponentialCandidates",
    "first_above_threshold",
    "stable_argmax",
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
    """Sparse vector technique (AboveThreshold, Dwork & Roth Alg. 1): epsilon-DP, charged to ``accountant``.

    See :func:`first_above_threshold`; the cost is epsilon however many queries are asked.
    """
    spend = Spend(label=label, epsilon=positive_finite("epsilon", epsilon))
    accountant.check([spend])
    index = first_above_threshold(values, threshold, epsilon, sensitivity, noise)
    accountant.spend(spend)
    return index


def first_above_threshold(values, threshold: float, epsilon: float, sensitivity: float, noise: NoiseSource):
    """AboveThreshold (Dwork & Roth Alg. 1), *unaccounted*: epsilon-DP for the caller to charge.

    ``values`` are the exact answers of a stream of queries, each of
    sensitivity ``sensitivity``, in a data-independent order: an array, or an
    iterable evaluated lazily (queries after the first crossing are never
    computed).  The threshold gets Laplace(2 sensitivity / epsilon) noise
    once, each answer Laplace(4 sensitivity / epsilon); the index of the
    first noisy answer at or above the noisy threshold is returned (``None``
    if none is).  Only that index is released.
    """
    epsilon = positive_finite("epsilon", epsilon)
    sensitivity = positive_finite("sensitivity", sensitivity)
    noisy_threshold = noise.add_laplace(np.array([float(threshold)]), 2.0 * sensitivity / epsilon)[0]
    if isinstance(values, np.ndarray):
        noisy = noise.add_laplace(np.asarray(values, dtype=np.float64), 4.0 * sensitivity / epsilon)
        above = np.flatnonzero(noisy >= noisy_threshold)
        return int(above[0]) if above.size else None
    for index, value in enumerate(values):
        if noise.add_laplace(np.array([float(value)]), 4.0 * sensitivity / epsilon)[0] >= noisy_threshold:
            return index
    return None


def stable_argmax(counts: np.ndarray, epsilon: float, delta: float, noise: NoiseSource) -> int | None:
    """The heaviest bin of a histogram by the stability-based mechanism, *unaccounted*: (epsilon, delta)-DP.

    ``counts`` lists the non-empty bins only (of a possibly infinite,
    data-independent universe; a point falls in one bin).  Each gets
    Laplace(2/epsilon) noise; bins whose noisy count is below
    1 + 2 ln(2/delta) / epsilon are suppressed (an empty bin of the
    neighbour can only appear with probability delta); the index of the
    largest surviving noisy count is returned, or ``None``.
    """
    epsilon = positive_finite("epsilon", epsilon)
    if not 0 < delta < 1:
        raise ValueError(f"delta must lie in (0, 1), got {delta!r}")
    counts = np.asarray(counts, dtype=np.float64)
    if counts.size == 0:
        return None
    noisy = noise.add_laplace(counts, 2.0 / epsilon)
    best = int(np.argmax(noisy))
    return best if noisy[best] >= 1.0 + 2.0 * math.log(2.0 / delta) / epsilon else None


@dataclass(frozen=True)
class NoisyAverage:
    """NoisyAVG (Nissim, Stemmer & Vadhan 2016, Alg. 5; Nguyen, Chaturvedi & Xu (2021), Alg. 3): an (epsilon, delta)-DP average of a point set.

    For a set V of points in a public region of diameter ``diameter``: a noisy
    size m = |V| + Lap(5/eps) - (5/eps) ln(2/delta) is drawn; if m <= 0 the
    output is a uniform point of the box [low, high] (it reveals only that the
    set is small), else the average plus N(0, sigma^2 I) with
    sigma = 5 diameter / (4 eps m) * sqrt(2 ln(3.5/delta)).

    :meth:`apply` averages several *disjoint* sets at once (one per row of
    ``totals``): a point is in at most one of them, so by parallel composition
    all the averages together cost one (epsilon, delta).
    """

    epsilon: float
    delta: float
    diameter: float

    def __post_init__(self):
        positive_finite("epsilon", self.epsilon)
        if not 0 < self.delta < 1:
            raise ValueError(f"delta must lie in (0, 1), got {self.delta!r}")
        positive_finite("diameter", self.diameter)

    def spend(self, label: str) -> Spend:
        return Spend(label=label, epsilon=float(self.epsilon), delta=float(self.delta))

    def apply(self, totals, counts, low, high, noise: NoiseSource) -> np.ndarray:
        """Noisy averages of the sets with exact sums ``totals`` (k, d) and sizes ``counts`` (k,)."""
        totals = np.atleast_2d(np.asarray(totals, dtype=np.float64))
        counts = np.atleast_1d(np.asarray(counts, dtype=np.float64))
        eps, delta = self.epsilon, self.delta
        m = noise.add_laplace(counts, 5.0 / eps) - 5.0 / eps * math.log(2.0 / delta)
        low, high = np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64)
        out = np.empty_like(totals)
        for i in range(totals.shape[0]):
            if m[i] <= 0:
                out[i] = noise.uniform(low, high)
                continue
            sigma = 5.0 * self.diameter / (4.0 * eps * m[i]) * math.sqrt(2.0 * math.log(3.5 / delta))
            out[i] = noise.add_gaussian(totals[i] / max(counts[i], 1.0), sigma)
        return out


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
    """:class:`NoisyAverage` of one set with exact sum ``total`` and size ``count``, charged to ``accountant``."""
    mechanism = NoisyAverage(epsilon=epsilon, delta=delta, diameter=diameter)
    spend = mechanism.spend(label)
    accountant.check([spend])
    out = mechanism.apply(total, count, low, high, noise)[0]
    accountant.spend(spend)
    return out


def sample_exponential(
    scores: np.ndarray, epsilon: float, sensitivity: float, noise: NoiseSource, log_n_implicit: float | None = None
) -> int | None:
    """One draw of the exponential mechanism, *unaccounted*: the caller charges what it proves.

    Candidate i is chosen with probability proportional to
    exp(epsilon * score_i / (2 sensitivity)) (McSherry & Talwar), which is
    epsilon-DP when every score has sensitivity ``sensitivity``.  Several
    algorithms compose many such draws with a better bound than one epsilon
    each (max cover's Lemma 17, the greedy's per-level accounting), so this
    primitive records nothing; they charge their bound before drawing.

    ``log_n_implicit`` adds exp(log_n_implicit) further candidates of score
    0 without listing them -- the *implicit* exponential mechanism over a
    huge universe of which only the listed candidates have non-zero score.
    The function returns ``None`` when one of those is drawn; the caller
    picks it uniformly among them (each has the same probability).

    Candidates of equal score are drawn as one group: the group of value v
    and size c has weight c * exp(eps v / (2 s)); a Gumbel-max draw over the
    groups (OpenDP's exact sampler in secure mode) picks a group, then a
    uniform member.  Scores here are counts, with few distinct values, so a
    draw costs one pass over the scores whatever the universe's size.
    """
    return ExponentialCandidates(scores, epsilon, sensitivity, log_n_implicit).draw(noise)


class ExponentialCandidates:
    """Scores fixed for several draws of :func:`sample_exponential`: grouped once, drawn many times.

    Each :meth:`draw` is one exponential-mechanism draw, unaccounted, exactly as
    :func:`sample_exponential` with the same arguments (the same noise calls in
    the same order); the grouping by score and each group's members are
    computed once instead of per draw.
    """

    def __init__(self, scores, epsilon: float, sensitivity: float, log_n_implicit: float | None = None):
        scores = np.asarray(scores, dtype=np.float64)
        if scores.ndim != 1 or not np.all(np.isfinite(scores)):
            raise ValueError("scores must be a finite 1-D array")
        epsilon = positive_finite("epsilon", epsilon)
        sensitivity = positive_finite("sensitivity", sensitivity)
        self._scores = scores
        self._values, sizes = _score_groups(scores)
        log_weights = epsilon * self._values / (2.0 * sensitivity) + np.log(sizes)
        if log_n_implicit is not None and log_n_implicit > -math.inf:
            log_weights = np.append(log_weights, float(log_n_implicit))
        if log_weights.size == 0:
            raise ValueError("the exponential mechanism needs at least one candidate")
        self._log_weights = log_weights
        self._members: dict[int, np.ndarray] = {}

    def draw(self, noise: NoiseSource) -> int | None:
        """A candidate's index, or ``None`` for one of the implicit candidates (the caller picks it uniformly)."""
        group = noise.gumbel_argmax(self._log_weights, 1.0)
        if group == self._values.size:
            return None
        if group not in self._members:
            self._members[group] = np.flatnonzero(self._scores == self._values[group])
        members = self._members[group]
        return int(members[noise.uniform_index(members.size)])


def _score_groups(scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct scores and how many candidates have each (counting for small integer scores)."""
    if scores.size and scores.min() >= 0 and scores.max() < 2**24 and np.all(scores == np.floor(scores)):
        sizes = np.bincount(scores.astype(np.int64))
        values = np.flatnonzero(sizes)
        return values.astype(np.float64), sizes[values]
    values, sizes = np.unique(scores, return_counts=True)
    return values, sizes

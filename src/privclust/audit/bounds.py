"""From counts of an event on neighbouring data sets to a lower bound on the privacy loss.

A test that tells D from D' by an event E has a false-positive rate
alpha = P[M(D) in E] and a false-negative rate beta = P[M(D') not in E].  Every
privacy claim bounds the pair (alpha, beta) from below by a trade-off curve
(Dong, Roth & Su): a claim is *refuted* when the measured point lies under the
curve.  With Clopper-Pearson upper bounds on alpha and beta (each at level
(1 - confidence) / 2, so both hold together with probability >= confidence),
the smallest privacy parameter that still fits them is a lower bound on the
true one with that confidence:

* an (epsilon, delta) claim: epsilon >= ln((1 - delta - alpha) / beta) and
  ln((1 - delta - beta) / alpha);
* a mu-GDP claim: mu >= Phi^-1(1 - alpha) - Phi^-1(beta), exactly the Gaussian
  trade-off curve -- far more powerful than an (epsilon, delta) event, because
  the middle of the curve is where the counts are large;
* a claim that composes (epsilon0, delta0) steps with a mu-GDP part (what
  privclust's accountant reports for e.g. maxcover): the curve of the canonical
  (epsilon0, delta0) pair composed with the Gaussian, whose privacy profile is
  delta(eps) = delta0 + (1 - delta0) [w+ H(eps - eps0) + w- H(eps + eps0)] with
  w+ = e^eps0 / (1 + e^eps0), w- = 1 - w+ and H the Gaussian's hockey-stick
  divergence; the bound is the smallest mu that fits.

Each bound is reported as an epsilon at the claim's delta, by the claim's own
formula (the accountant's), so "empirical > claimed" means "refuted".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import log_ndtr, ndtr, ndtri
from scipy.stats import beta as beta_dist

from ..privacy.gdp import gdp_epsilon

__all__ = ["Claim", "cp_upper", "cp_lower"]


def cp_upper(hits, n, level: float) -> np.ndarray:
    """One-sided Clopper-Pearson upper bound on a binomial proportion, exceeded with probability <= level."""
    hits = np.asarray(hits, dtype=np.float64)
    inner = np.minimum(hits, n - 1)
    return np.where(hits >= n, 1.0, beta_dist.ppf(1.0 - level, inner + 1.0, n - inner))


def cp_lower(hits, n, level: float) -> np.ndarray:
    """One-sided Clopper-Pearson lower bound on a binomial proportion."""
    return 1.0 - cp_upper(n - np.asarray(hits, dtype=np.float64), n, level)


# Epsilons at which a mixed claim's profile is checked.  Checking fewer points than all only
# makes a violation harder to find, never easier, so the grid keeps the bound valid.
_EPS_GRID = np.linspace(0.0, 16.0, 801)


def _hockey_stick(x: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """H_{e^x}(N(mu, 1) || N(0, 1)) for any real x (the Gaussian's privacy profile)."""
    mu = np.maximum(mu, 1e-300)
    return np.maximum(ndtr(-x / mu + mu / 2) - np.exp(x + log_ndtr(-x / mu - mu / 2)), 0.0)


@dataclass(frozen=True)
class Claim:
    """What a mechanism or a fit says it spends.

    ``epsilon`` at ``delta`` is the total as reported.  ``mu`` is the Gaussian
    part (composed in GDP); ``dp_epsilon`` and ``dp_delta`` the basic-composed
    (epsilon, delta) steps besides it.  Without ``mu`` the claim is plain
    (epsilon, delta) with epsilon = dp_epsilon, delta = dp_delta.
    """

    epsilon: float
    delta: float = 0.0
    mu: float | None = None
    dp_epsilon: float = 0.0
    dp_delta: float = 0.0

    @classmethod
    def dp(cls, epsilon: float, delta: float = 0.0) -> "Claim":
        return cls(float(epsilon), float(delta), None, float(epsilon), float(delta))

    @classmethod
    def gaussian(cls, mu: float, delta: float) -> "Claim":
        return cls(gdp_epsilon(mu, delta), float(delta), float(mu))

    @classmethod
    def from_report(cls, report) -> "Claim":
        """The claim of a :class:`privclust.PrivacyReport`: its total and how its steps compose."""
        steps = [s for s in report.steps if not s.is_gdp]
        eps0, delta0 = sum(s.epsilon for s in steps), sum(s.delta for s in steps)
        if not report.mu:
            return cls(report.epsilon, report.delta, None, report.epsilon, report.delta)
        return cls(report.epsilon, report.delta, float(report.mu), eps0, delta0)

    @property
    def kind(self) -> str:
        if self.mu is None:
            return "epsilon-delta"
        return "GDP" if self.dp_epsilon == 0 and self.dp_delta == 0 else "GDP + epsilon-delta"

    @property
    def parameter(self) -> float:
        """The claimed value of the parameter the bound is on: mu when there is a Gaussian part, else epsilon."""
        return self.epsilon if self.mu is None else self.mu

    def loss_bound(self, alpha, beta) -> np.ndarray:
        """The smallest parameter (see :attr:`parameter`) consistent with error rates ``alpha``, ``beta``."""
        alpha = np.clip(np.asarray(alpha, dtype=np.float64), 1e-300, 1.0)
        beta = np.clip(np.asarray(beta, dtype=np.float64), 1e-300, 1.0)
        if self.mu is None:
            slack = 1.0 - self.delta
            with np.errstate(divide="ignore", invalid="ignore"):
                one = np.log(np.maximum(slack - alpha, 0.0) / beta)
                two = np.log(np.maximum(slack - beta, 0.0) / alpha)
            return np.maximum(np.nan_to_num(np.maximum(one, two), nan=0.0, neginf=0.0), 0.0)
        if self.kind == "GDP":
            return np.maximum(-ndtri(alpha) - ndtri(beta), 0.0)
        return self._mixed_mu(alpha, beta)

    def _violates(self, alpha: np.ndarray, beta: np.ndarray, mu: np.ndarray) -> np.ndarray:
        """Does (alpha, beta) lie under the mixed claim's curve at Gaussian part ``mu``?"""
        eps0, delta0 = self.dp_epsilon, self.dp_delta
        e = _EPS_GRID[None, :]
        m = mu[:, None]
        w_plus = 1.0 / (1.0 + math.exp(-eps0))
        profile = delta0 + (1.0 - delta0) * (
            w_plus * _hockey_stick(e - eps0, m) + (1.0 - w_plus) * _hockey_stick(e + eps0, m)
        )
        a, b = alpha[:, None], beta[:, None]
        under = (b < 1.0 - profile - np.exp(e) * a) | (b < np.exp(-e) * (1.0 - profile - a))
        return under.any(axis=1)

    def _mixed_mu(self, alpha: np.ndarray, beta: np.ndarray) -> np.ndarray:
        shape = np.broadcast(alpha, beta).shape
        alpha, beta = np.broadcast_to(alpha, shape).ravel(), np.broadcast_to(beta, shape).ravel()
        low, high = np.zeros(alpha.size), np.full(alpha.size, 40.0)
        # No Gaussian part at all fits: bisect on mu (a larger mu only lowers the curve).
        needed = self._violates(alpha, beta, low)
        for _ in range(40):
            mid = (low + high) / 2.0
            bad = self._violates(alpha, beta, mid)
            low, high = np.where(bad, mid, low), np.where(bad, high, mid)
        return np.where(needed, low, 0.0).reshape(shape)

    def epsilon_at_delta(self, bound: float) -> float:
        """The reported total with the bounded parameter in place of the claimed one."""
        if self.mu is None:
            return float(bound)
        if bound <= 0:
            return float(self.dp_epsilon) if self.kind != "GDP" else 0.0
        return float(self.dp_epsilon + gdp_epsilon(float(bound), self.delta - self.dp_delta))

"""Gaussian differential privacy (mu-GDP) and its conversions.

A Gaussian mechanism with l2 sensitivity ``Delta`` and noise standard
deviation ``sigma`` is ``mu``-GDP with ``mu = Delta / sigma`` (Dong, Roth & Su,
"Gaussian Differential Privacy", Theorem 1).  GDP composes exactly:
``mu = sqrt(sum mu_i^2)`` (their Corollary 2), and a ``mu``-GDP mechanism is
``(epsilon, delta(epsilon))``-DP for every ``epsilon >= 0`` with

    delta(epsilon) = Phi(-epsilon/mu + mu/2) - e^epsilon * Phi(-epsilon/mu - mu/2)

(their Corollary 1).  With ``mu = Delta / sigma`` this is exactly the
condition of Balle & Wang's analytic Gaussian mechanism (ICML 2018,
Theorem 8), so calibrating sigma by inverting it *is* the analytic Gaussian
mechanism.  The inverses below are found by bracketing and Brent's method and
are then nudged to the conservative side, so a calibrated mechanism never
claims less privacy loss than it has.
"""

from __future__ import annotations

import math

from scipy.special import log_ndtr, ndtr

from .._validation import positive_finite

__all__ = [
    "gdp_delta",
    "gdp_epsilon",
    "gdp_mu",
    "analytic_gaussian_sigma",
    "compose_mu",
    "mu_to_zcdp_rho",
    "zcdp_epsilon",
]


def gdp_delta(epsilon: float, mu: float) -> float:
    """delta(epsilon) of a mu-GDP mechanism (Dong et al., Corollary 1)."""
    epsilon = float(epsilon)
    mu = float(mu)
    if mu == 0:
        return 0.0
    if math.isinf(mu):
        return 1.0
    first = ndtr(-epsilon / mu + mu / 2)
    # e^eps * Phi(b) evaluated in log space: e^eps overflows long before the
    # product does.
    second = math.exp(epsilon + log_ndtr(-epsilon / mu - mu / 2))
    return float(max(first - second, 0.0))


def gdp_epsilon(mu: float, delta: float) -> float:
    """Smallest epsilon >= 0 such that a mu-GDP mechanism is (epsilon, delta)-DP."""
    mu = float(mu)
    if mu < 0 or math.isnan(mu):
        raise ValueError(f"mu must be >= 0, got {mu!r}")
    if not 0 < delta < 1:
        raise ValueError(f"delta must lie in (0, 1), got {delta!r}")
    if mu == 0:
        return 0.0
    if math.isinf(mu):
        return math.inf
    if gdp_delta(0.0, mu) <= delta:
        return 0.0
    hi = max(1.0, mu * mu)
    while gdp_delta(hi, mu) > delta:
        hi *= 2.0
    from scipy.optimize import brentq  # loaded on first use: the CLI starts without it

    eps = brentq(lambda e: gdp_delta(e, mu) - delta, 0.0, hi, xtol=1e-14, rtol=1e-14)
    # Brent returns a point within tolerance of the root; step to the side
    # where the guarantee certainly holds.
    while gdp_delta(eps, mu) > delta:
        eps = math.nextafter(eps, math.inf) + 1e-15
    return float(eps)


def gdp_mu(epsilon: float, delta: float) -> float:
    """Largest mu such that mu-GDP implies (epsilon, delta)-DP."""
    epsilon = positive_finite("epsilon", epsilon)
    if not 0 < delta < 1:
        raise ValueError(f"delta must lie in (0, 1), got {delta!r}")
    lo, hi = 1e-12, 1.0
    while gdp_delta(epsilon, hi) < delta:
        hi *= 2.0
        if hi > 1e6:  # pragma: no cover - delta ~ 1 is rejected above
            raise ValueError("no finite mu reaches this delta")
    from scipy.optimize import brentq  # loaded on first use: the CLI starts without it

    mu = brentq(lambda m: gdp_delta(epsilon, m) - delta, lo, hi, xtol=1e-15, rtol=1e-14)
    while gdp_delta(epsilon, mu) > delta:
        mu *= 1 - 1e-12
    return float(mu)


def analytic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """Noise standard deviation of the analytic Gaussian mechanism (Balle & Wang 2018)."""
    sensitivity = positive_finite("sensitivity", sensitivity)
    return sensitivity / gdp_mu(epsilon, delta)


def compose_mu(*mus: float) -> float:
    """Exact composition of GDP guarantees: sqrt(sum mu_i^2)."""
    return float(math.sqrt(sum(float(m) ** 2 for m in mus)))


def mu_to_zcdp_rho(mu: float) -> float:
    """A Gaussian mechanism that is mu-GDP is (mu^2 / 2)-zCDP."""
    return 0.5 * float(mu) ** 2


def zcdp_epsilon(rho: float, delta: float) -> float:
    """epsilon of rho-zCDP at delta (Bun & Steinke 2016, Prop. 1.3).

    Looser than the GDP conversion for Gaussian mechanisms; offered for users
    who account in zCDP.
    """
    if not 0 < delta < 1:
        raise ValueError(f"delta must lie in (0, 1), got {delta!r}")
    rho = float(rho)
    return rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))

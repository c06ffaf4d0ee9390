"""GDP conversions and analytic-Gaussian calibration, against an independent accountant."""

import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting.pld import pld_privacy_accountant
from scipy.stats import norm

from privclust.privacy.gdp import (
    analytic_gaussian_sigma,
    compose_mu,
    gdp_delta,
    gdp_epsilon,
    gdp_mu,
    mu_to_zcdp_rho,
    zcdp_epsilon,
)


def pld_epsilon(noise_multiplier: float, delta: float, count: int = 1) -> float:
    """Google's PLD accountant: epsilon of `count` Gaussian mechanisms (sensitivity 1)."""
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    acc.compose(dp_accounting.GaussianDpEvent(noise_multiplier), count)
    return acc.get_epsilon(delta)


@pytest.mark.parametrize("eps,delta", [(0.1, 1e-6), (0.5, 1e-5), (1.0, 1e-6), (2.0, 1e-8), (4.0, 1e-5)])
def test_analytic_gaussian_matches_pld_accountant(eps, delta):
    sigma = analytic_gaussian_sigma(eps, delta)
    # The PLD accountant is pessimistic by its discretisation only: equal to 1%.
    assert pld_epsilon(sigma, delta) == pytest.approx(eps, rel=1e-2)
    # And 5% less noise would break the guarantee.
    assert pld_epsilon(sigma * 0.95, delta) > eps


def test_gdp_delta_formula_by_hand():
    mu, eps = 0.7, 1.3
    expected = norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)
    assert gdp_delta(eps, mu) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("eps,delta", [(0.05, 1e-9), (0.3, 1e-6), (1.0, 1e-5), (8.0, 1e-6)])
def test_mu_and_epsilon_are_inverse_and_conservative(eps, delta):
    mu = gdp_mu(eps, delta)
    assert gdp_delta(eps, mu) <= delta
    assert gdp_delta(eps, mu * (1 + 1e-6)) > delta
    back = gdp_epsilon(mu, delta)
    assert back <= eps * (1 + 1e-9)
    assert back == pytest.approx(eps, rel=1e-7)


def test_composition_matches_pld_for_repeated_gaussians():
    # T Gaussian releases with noise multiplier s*sqrt(T) compose to (1/s)-GDP.
    s, T, delta = 2.0, 7, 1e-6
    mu = compose_mu(*([1 / (s * math.sqrt(T))] * T))
    assert mu == pytest.approx(1 / s)
    assert gdp_epsilon(mu, delta) == pytest.approx(pld_epsilon(s * math.sqrt(T), delta, count=T), rel=1e-2)


def test_zcdp_conversion_is_looser_than_gdp():
    mu, delta = 0.5, 1e-6
    rho = mu_to_zcdp_rho(mu)
    assert rho == pytest.approx(0.125)
    assert zcdp_epsilon(rho, delta) > gdp_epsilon(mu, delta)


def test_edge_cases():
    assert gdp_epsilon(0.0, 1e-6) == 0.0
    assert gdp_epsilon(math.inf, 1e-6) == math.inf
    assert gdp_epsilon(1e-4, 0.5) == 0.0  # delta(0) < 0.5 already
    for bad in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(ValueError):
            gdp_mu(bad, 1e-6)
    for bad in (0.0, 1.0, -0.1):
        with pytest.raises(ValueError):
            gdp_mu(1.0, bad)
    assert np.isfinite(gdp_delta(700.0, 5.0))  # no overflow of e^eps

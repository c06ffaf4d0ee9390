"""The audit's statistics: Clopper-Pearson, the claims' trade-off bounds, and validity on known mechanisms."""

import math

import numpy as np
import pytest
from scipy.special import ndtr
from scipy.stats import binom

from privclust import PrivacyAccountant
from privclust.audit import Claim, cp_lower, cp_upper, run_audit
from privclust.privacy.gdp import gdp_epsilon


def test_clopper_pearson_covers_at_its_level():
    # The upper bound misses the true p with probability at most its level (checked exactly, over all counts).
    n, p, level = 200, 0.3, 0.05
    hits = np.arange(n + 1)
    missed = cp_upper(hits, n, level) < p
    assert binom.pmf(hits[missed], n, p).sum() <= level
    assert cp_upper(0, n, level) == pytest.approx(1 - level ** (1 / n))
    assert cp_upper(n, n, level) == 1.0 and cp_lower(0, n, level) == 0.0
    assert cp_lower(60, n, level) < 0.3 < cp_upper(60, n, level)


def test_epsilon_delta_bound():
    claim = Claim.dp(1.0)
    assert claim.loss_bound(0.5, 0.5) == 0.0  # a coin flip tells nothing
    # (alpha, beta) = (0.1, 0.5): (1 - alpha) / beta = 1.8 and (1 - beta) / alpha = 5.
    assert claim.loss_bound(0.1, 0.5) == pytest.approx(math.log(5.0))
    assert claim.loss_bound(0.5, 0.1) == pytest.approx(math.log(5.0))  # symmetric
    # delta is subtracted before the ratio.
    assert Claim.dp(1.0, 0.05).loss_bound(0.1, 0.5) == pytest.approx(math.log(0.45 / 0.1))


@pytest.mark.parametrize("mu", [0.3, 1.0, 2.5])
def test_gdp_bound_is_exact_on_the_gaussian_curve(mu):
    # Every test between N(0, 1) and N(mu, 1) lies on the curve: the bound recovers mu at any threshold.
    t = np.linspace(-1.0, mu + 1.0, 7)
    alpha, beta = ndtr(-t), ndtr(t - mu)
    np.testing.assert_allclose(Claim.gaussian(1.0, 1e-5).loss_bound(alpha, beta), mu, rtol=1e-9)


def test_mixed_claim_bound():
    mu = 1.2
    t = np.linspace(-1.0, 2.0, 5)
    alpha, beta = ndtr(-t), ndtr(t - mu)
    gdp = Claim.gaussian(mu, 1e-5).loss_bound(alpha, beta)
    for eps0 in (1e-6, 0.3, 1.0):
        mixed = Claim(1.0, 1e-5, mu, eps0, 1e-6).loss_bound(alpha, beta)
        # A plain mu-Gaussian is consistent with mu composed with anything: never above mu ...
        assert np.all(mixed <= gdp + 1e-6)
        # ... and the more the claim allows besides the Gaussian, the less the Gaussian part must explain.
        if eps0 == 1e-6:
            np.testing.assert_allclose(mixed, gdp, atol=0.02)
        else:
            assert np.all(mixed < gdp - 0.01)
    # A point no (0.3, 1e-6) claim explains without a Gaussian part needs one.
    assert Claim(1.0, 1e-5, 0.5, 0.3, 1e-6).loss_bound(0.05, 0.05)[()] > 0


def test_claim_from_reports():
    gaussian = PrivacyAccountant()
    gaussian.spend_gdp("sum", 0.6)
    gaussian.spend_gdp("count", 0.8)
    claim = Claim.from_report(gaussian.report(1e-5))
    assert claim.kind == "GDP" and claim.mu == pytest.approx(1.0)
    assert claim.epsilon == pytest.approx(gdp_epsilon(1.0, 1e-5))

    pure = PrivacyAccountant()
    pure.spend_dp("a", 0.5, 1e-6)
    pure.spend_dp("b", 0.25)
    claim = Claim.from_report(pure.report())
    assert claim.kind == "epsilon-delta" and (claim.epsilon, claim.delta) == (0.75, 1e-6)

    mixed = PrivacyAccountant()
    mixed.spend_dp("a", 0.5, 1e-6)
    mixed.spend_gdp("b", 1.0)
    claim = Claim.from_report(mixed.report(1e-5))
    assert claim.kind == "GDP + epsilon-delta"
    assert (claim.dp_epsilon, claim.dp_delta, claim.mu) == (0.5, 1e-6, 1.0)
    # The empirical epsilon uses the claim's own formula: at the claimed mu it is the claimed total.
    assert claim.epsilon_at_delta(1.0) == pytest.approx(claim.epsilon)


MIXED = Claim(0.2 + gdp_epsilon(0.8, 1e-5 - 1e-6), 1e-5, 0.8, 0.2, 1e-6)


@pytest.mark.parametrize("claim", [Claim.dp(1.0, 1e-3), Claim.gaussian(0.8, 1e-5), MIXED], ids=lambda c: c.kind)
def test_violated_exactly_when_the_empirical_epsilon_exceeds_the_claim(claim):
    for bound in np.linspace(0.05, 2.0, 40) * claim.parameter:
        assert (claim.epsilon_at_delta(bound) > claim.epsilon) == (bound > claim.parameter)


def _randomised_response(eps):
    rng = np.random.default_rng(0)
    keep = math.exp(eps) / (1 + math.exp(eps))
    return lambda side, n: np.where(rng.random(n) < keep, side, 1 - side)


def test_bound_stays_under_the_truth_for_a_known_mechanism():
    # Randomised response at epsilon = ln 3 is exactly ln 3-DP on every pair: the bound approaches it
    # from below and never passes it.
    truth = math.log(3)
    for runs in (500, 4000, 20000):
        result = run_audit("rr", _randomised_response(truth), Claim.dp(truth), runs, discrete=True)
        assert not result.violated and result.empirical_epsilon <= truth
    assert result.empirical_epsilon > 0.9  # and with enough draws it comes close


def test_a_claim_below_the_truth_is_refuted():
    result = run_audit("rr", _randomised_response(math.log(3)), Claim.dp(0.7), 20000, discrete=True)
    assert result.violated and result.empirical_epsilon > 0.7


def test_gaussian_shift_against_gdp_claims():
    rng = np.random.default_rng(1)

    def shift(side, n):
        return rng.normal(1.0 * side, 1.0, n)

    fair = run_audit("gauss", shift, Claim.gaussian(1.0, 1e-5), 20000)
    assert not fair.violated and 0.85 < fair.empirical_mu <= 1.0
    assert run_audit("gauss", shift, Claim.gaussian(0.8, 1e-5), 20000).violated
    # A vector output: Fisher's discriminant finds the direction of the shift.
    plane = run_audit(
        "plane",
        lambda side, n: rng.normal(0, 1, (n, 2)) + side * np.array([0.6, 0.8]),
        Claim.gaussian(0.8, 1e-5),
        20000,
    )
    assert plane.violated and plane.empirical_mu > 0.85


def test_identical_sides_give_no_evidence():
    rng = np.random.default_rng(2)
    result = run_audit("same", lambda side, n: rng.random(n), Claim.dp(0.0), 4000)
    assert result.empirical_epsilon == 0.0 and not result.violated


def test_too_few_draws_are_refused():
    with pytest.raises(ValueError, match="at least 20"):
        run_audit("x", lambda side, n: np.zeros(n), Claim.dp(1.0), 10)

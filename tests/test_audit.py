"""Statistical privacy audits on neighbouring data sets (privclust.audit), at test-suite strength."""

import math

import pytest

from privclust.audit import AUDITS, BROKEN, epsilon_lower_bound, run_audit


def test_lower_bound_arithmetic():
    # Identical frequencies give no evidence; very different ones give a large bound.
    assert epsilon_lower_bound(500, 500, 1000) == 0.0
    assert epsilon_lower_bound(900, 10, 1000) > 3.0
    # delta is subtracted from the larger probability before the ratio.
    assert epsilon_lower_bound(900, 10, 1000, delta=0.5) < epsilon_lower_bound(900, 10, 1000)
    # Symmetric in the two sides.
    assert epsilon_lower_bound(10, 900, 1000) == pytest.approx(epsilon_lower_bound(900, 10, 1000))


def test_bound_never_exceeds_truth_for_a_known_mechanism():
    # Randomised response with epsilon = ln 3: P = 3/4 vs 1/4.
    import numpy as np

    rng = np.random.default_rng(0)
    hits_d = int((rng.random(4000) < 0.75).sum())
    hits_d2 = int((rng.random(4000) < 0.25).sum())
    bound = epsilon_lower_bound(hits_d, hits_d2, 4000)
    assert 0.8 < bound <= math.log(3)


@pytest.mark.parametrize("name", list(AUDITS))
def test_every_mechanism_and_algorithm_stays_under_its_claim(name):
    sample_d, sample_d2, eps, delta = AUDITS[name]()
    runs = 400 if name in ("fastlloyd", "glloyd", "sulloyd", "greedy (exponential mechanism)") else 1500
    result = run_audit(name, sample_d, sample_d2, eps, delta, runs=runs)
    assert not result.violated, result


@pytest.mark.parametrize("name", list(BROKEN))
def test_the_broken_variant_is_caught(name):
    sample_d, sample_d2, eps, delta = BROKEN[name]()
    assert run_audit(name, sample_d, sample_d2, eps, delta, runs=6000).violated

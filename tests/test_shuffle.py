"""The shuffle model: the amplification bound against independent computations, and fits that meet the target."""

import math

import numpy as np
import pytest
from scipy import stats

from privclust import KMeans
from privclust.metrics import nicv
from privclust.shuffle import Shuffler, closed_form_epsilon, local_epsilon_for, shuffle_delta, shuffle_epsilon


def brute_force_delta(eps, eps0, n):
    """The clone reduction's hockey-stick divergence summed term by term over every (c, a): no shortcuts."""
    alpha, p, e = math.exp(eps0) / (math.exp(eps0) + 1), math.exp(-eps0), math.exp(eps)
    total = 0.0
    for c in range(n):
        weight = stats.binom.pmf(c, n - 1, p)
        if weight < 1e-18:
            continue
        a = np.arange(c + 2)
        b, b_shift = stats.binom.pmf(a, c, 0.5), stats.binom.pmf(a - 1, c, 0.5)
        P, Q = alpha * b + (1 - alpha) * b_shift, (1 - alpha) * b + alpha * b_shift
        total += weight * max(np.maximum(P - e * Q, 0).sum(), np.maximum(Q - e * P, 0).sum())
    return total


@pytest.mark.parametrize("eps, eps0, n", [(0.5, 2.0, 500), (1.0, 3.0, 2000), (0.3, 1.0, 1000), (0.8, 4.0, 3000)])
def test_the_bound_equals_the_term_by_term_sum(eps, eps0, n):
    assert shuffle_delta(eps, eps0, n) == pytest.approx(brute_force_delta(eps, eps0, n), rel=1e-6, abs=1e-15)


def shuffled_randomized_response_delta(eps, eps0, n):
    """The exact delta(eps) of n users' binary randomized response, shuffled (the count of ones), on the
    neighbours 'the first user holds 0 / 1, everyone else 0': a lower bound on any valid bound's delta."""
    q = 1.0 / (math.exp(eps0) + 1.0)
    k = np.arange(n + 1)
    others = stats.binom.pmf(k, n - 1, q), stats.binom.pmf(k - 1, n - 1, q)
    low = (1 - q) * others[0] + q * others[1]  # the first user holds 0
    high = q * others[0] + (1 - q) * others[1]  # the first user holds 1
    e = math.exp(eps)
    return max(np.maximum(high - e * low, 0).sum(), np.maximum(low - e * high, 0).sum())


@pytest.mark.parametrize("eps0, n", [(1.0, 1_000), (3.0, 10_000), (5.0, 100_000), (8.0, 1_000_000)])
def test_the_bound_is_never_below_an_exact_shuffled_mechanism(eps0, n):
    for eps in (0.05, 0.2, 0.5, 1.0):  # (deltas below 1e-15 are rounding: the pmfs carry 1e-16 error)
        assert shuffled_randomized_response_delta(eps, eps0, n) <= shuffle_delta(eps, eps0, n) * (1 + 1e-9) + 1e-15


@pytest.mark.parametrize("eps0, n", [(1.0, 10_000), (2.0, 100_000), (4.0, 1_000_000)])
def test_the_numerical_bound_is_never_above_the_closed_form(eps0, n):
    closed = closed_form_epsilon(eps0, n, 1e-6)
    assert closed is not None and shuffle_epsilon(eps0, n, 1e-6) <= closed


def test_the_bound_moves_the_right_way():
    assert shuffle_delta(0.1, 2.0, 10_000) > shuffle_delta(0.15, 2.0, 10_000) > 1e-9  # more epsilon, less delta
    assert shuffle_delta(0.1, 2.0, 10_000) < shuffle_delta(0.1, 2.5, 10_000)  # more local epsilon, more delta
    assert shuffle_epsilon(3.0, 10_000, 1e-6) > shuffle_epsilon(3.0, 100_000, 1e-6)  # more users, more privacy
    assert shuffle_delta(3.0, 3.0, 50) == 0.0  # never worse than the reports alone


@pytest.mark.parametrize("n", [10_000, 200_000, 10_000_000])
def test_the_solved_local_epsilon_is_the_largest_that_meets_the_target(n):
    eps0 = local_epsilon_for(1.0, 1e-6, n)
    assert eps0 > 1.0
    assert shuffle_delta(1.0, eps0, n) <= 1e-6
    assert shuffle_delta(1.0, eps0 * 1.001, n) > 1e-6


def test_the_shuffler_permutes_and_keeps_every_report():
    reports = np.arange(1000)
    out = Shuffler(np.random.default_rng(0)).shuffle(reports)
    assert sorted(out.tolist()) == reports.tolist() and not np.array_equal(out, reports)


def test_kmeans_in_the_shuffle_model_meets_the_central_target():
    rng = np.random.default_rng(0)
    centers = rng.uniform(-0.8, 0.8, (8, 2))
    X = np.clip(centers[rng.integers(0, 8, 100_000)] + rng.normal(0, 0.05, (100_000, 2)), -1, 1)
    model = KMeans(
        8, epsilon=1.0, delta=1e-6, bounds=(-1, 1), algorithm="greedy", privacy_model="shuffle", random_state=0
    ).fit(X)
    spent = model.privacy_spent_
    assert spent.epsilon == pytest.approx(1.0) and spent.delta == pytest.approx(1e-6)
    assert model.fit_info_["local_epsilon"] == pytest.approx(local_epsilon_for(1.0, 1e-6, 100_000))
    from sklearn.cluster import KMeans as SkKMeans

    floor = nicv(X, SkKMeans(8, n_init=3, random_state=0).fit(X).cluster_centers_)
    assert nicv(X, model.cluster_centers_) < 2.0 * floor


def test_the_shuffle_model_needs_a_delta():
    with pytest.raises(ValueError, match="delta > 0"):
        KMeans(2, epsilon=1.0, delta=0.0, bounds=(-1, 1), algorithm="greedy", privacy_model="shuffle").fit(
            np.zeros((100, 2))
        )


def test_the_unseeded_shuffler_draws_its_permutation_from_the_os_csprng(monkeypatch):
    import privclust.local.secure as secure

    def stream(seed):
        source = np.random.default_rng(seed)
        monkeypatch.setattr(secure.os, "urandom", lambda n: source.bytes(n))

    reports = np.arange(1000)
    stream(1)
    first = Shuffler().shuffle(reports)
    stream(1)
    again = Shuffler().shuffle(reports)
    stream(2)
    other = Shuffler().shuffle(reports)
    assert sorted(first.tolist()) == reports.tolist()
    assert np.array_equal(first, again) and not np.array_equal(first, other)

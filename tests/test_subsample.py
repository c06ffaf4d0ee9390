"""Sublinear clustering by Poisson subsampling (Blocki, Grigorescu & Mukherjee 2021): amplification, group privacy, the wrapper."""

import math

import numpy as np
import pytest

from privclust import Budget, BudgetExceededError, KMeans, PrivacyAccountant, Subsampled
from privclust.subsample import amplified, group_privacy, sample_size, suggest_rate


@pytest.mark.parametrize("eps,delta,rate", [(1.0, 1e-6, 0.01), (0.3, 0.0, 0.5), (4.0, 1e-5, 0.1)])
def test_amplification_matches_theorem_1_by_hand(eps, delta, rate):
    up = rate * (math.exp(eps) - 1) + 1
    down = 1 / (rate * (math.exp(-eps) - 1) + 1)
    expected_eps = math.log(max(up, down))
    expected_delta = max(math.exp(-eps) * delta * rate / (rate * (math.exp(-eps) - 1) + 1), delta * rate)
    assert amplified(eps, delta, rate) == pytest.approx((expected_eps, expected_delta))
    assert amplified(eps, delta, rate)[0] < eps


def test_amplification_edge_cases():
    assert amplified(1.0, 1e-6, 1.0) == pytest.approx((1.0, 1e-6))
    assert amplified(math.inf, 0.0, 0.1)[0] == math.inf
    for bad in (0.0, 1.5, -0.1):
        with pytest.raises(ValueError):
            amplified(1.0, 0.0, bad)


def test_group_privacy_is_a_binomial_tail():
    eps, rate, g, T = 0.5, 0.1, 20, 4
    tail = 1 - sum(math.comb(g, j) * rate**j * (1 - rate) ** (g - j) for j in range(T + 1))
    assert group_privacy(eps, rate, g, T) == pytest.approx((T * eps, tail))
    assert group_privacy(eps, rate, g, g)[1] == pytest.approx(0.0, abs=1e-15)
    # The seed's example: rate 1/sqrt(g), T = 2 sqrt(g): (2 sqrt(g) eps, tiny) instead of the naive (g eps, 0).
    g = 1000
    eps_group, delta_group = group_privacy(eps, 1 / math.sqrt(g), g, int(2 * math.sqrt(g)))
    assert eps_group == pytest.approx(int(2 * math.sqrt(g)) * eps) and eps_group < g * eps / 10
    assert delta_group < 1e-6


def blobs(n, seed=0):
    rng = np.random.default_rng(seed)
    centers = np.array([[-0.6, -0.5], [0.55, -0.4], [0.0, 0.6]])
    return np.clip(centers[rng.integers(0, 3, n)] + rng.normal(0, 0.06, (n, 2)), -1, 1)


def test_subsampled_reports_theorem_1_and_finds_the_clusters():
    X = blobs(200_000)
    base = KMeans(3, epsilon=1.0, delta=1e-6, bounds=(-1, 1), random_state=0)
    model = Subsampled(base, rate=0.05, random_state=1).fit(X)
    spent = model.base_privacy_spent_
    assert (model.privacy_spent_.epsilon, model.privacy_spent_.delta) == pytest.approx(
        amplified(spent.epsilon, spent.delta, 0.05)
    )
    assert model.privacy_spent_.epsilon < 0.1
    cost = ((X[:, None] - model.cluster_centers_[None]) ** 2).sum(-1).min(1).mean()
    assert cost < 0.03
    assert model.predict(X[:5]).shape == (5,)


class RowReader:
    """An array-like that records which rows were read."""

    def __init__(self, X):
        self.X, self.read = X, set()

    def __len__(self):
        return len(self.X)

    def __getitem__(self, rows):
        self.read.update(np.atleast_1d(np.arange(len(self.X))[rows]).tolist())
        return self.X[rows]


def test_only_sampled_rows_are_read():
    reader = RowReader(blobs(100_000))
    Subsampled(KMeans(3, bounds=(-1, 1), random_state=0), rate=0.01, random_state=0).fit(reader)
    assert 500 < len(reader.read) < 1500  # ~1% of the rows, never all of them


def test_shared_accountant_is_charged_the_amplified_spend_and_refuses_first():
    X = blobs(20_000)
    shared = PrivacyAccountant(Budget(0.5, 1e-6))
    base = KMeans(3, epsilon=2.0, delta=1e-6, bounds=(-1, 1), algorithm="fastlloyd", random_state=0)
    Subsampled(base, rate=0.1, random_state=0, accountant=shared).fit(X)
    assert shared.guarantee()[0] == pytest.approx(amplified(2.0, 1e-6, 0.1)[0], rel=1e-6)
    reader = RowReader(X)
    with pytest.raises(BudgetExceededError):
        Subsampled(base, rate=0.5, random_state=0, accountant=shared).fit(reader)
    assert reader.read == set()


def test_reproducible_and_validated():
    X = blobs(20_000)
    a = Subsampled(KMeans(3, bounds=(-1, 1)), rate=0.1, random_state=3).fit(X).cluster_centers_
    b = Subsampled(KMeans(3, bounds=(-1, 1)), rate=0.1, random_state=3).fit(X).cluster_centers_
    np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="rate"):
        Subsampled(KMeans(3, bounds=(-1, 1)), rate=0.0).fit(X)
    # An empty sample is fitted like any other (noise only): a refusal would reveal the sample size.
    empty = Subsampled(KMeans(3, bounds=(-1, 1)), rate=1e-9, random_state=0).fit(X)
    assert empty.cluster_centers_.shape == (3, 2)
    with pytest.raises(ValueError, match="non-private"):
        Subsampled(KMeans(3, bounds=(-1, 1), algorithm="nonprivate-lloyd"), rate=0.1).fit(X)


def test_sample_size_follows_the_theorems_by_hand():
    M, eta, theta, k, n, d = 2.0, 0.5, 0.1, 5, 10**6, 3
    # Theorem 7 (k-means, any metric): max{M^2 ln(1/theta)/eta, M^4/eta^2 (ln(1/theta) + k ln n)}
    t7 = max(M**2 * math.log(10) / eta, M**4 / eta**2 * (math.log(10) + k * math.log(n)))
    assert sample_size(k, M, eta, theta, "means", n=n) == math.ceil(t7)
    # Theorem 3 (k-median, any metric): M/eta in place of M^2/eta
    t3 = max(M * math.log(10) / eta, (M / eta) ** 2 * (k * math.log(n) + math.log(10)))
    assert sample_size(k, M, eta, theta, "median", n=n) == math.ceil(t3)
    # Theorem 8 (k-means, R^d), approximation w(1 + alpha) = 2
    t8 = max(
        M**2 * 2 * 3 * math.log(10) / eta,
        M**4 / eta**2 * (math.log(10) + k * d * math.log(math.sqrt(d) * M / (2 * eta))),
    )
    assert sample_size(k, M, eta, theta, "means", d=d, approximation=2.0) == math.ceil(t8)
    # smaller error, larger sample; the rate is capped at 1
    assert sample_size(k, M, eta / 2, theta, n=n) > sample_size(k, M, eta, theta, n=n)
    assert suggest_rate(100, k=k, diameter=M, eta=eta, theta=theta) == 1.0
    assert 0 < suggest_rate(10**9, k=k, diameter=M, eta=eta, theta=theta) < 1e-3
    with pytest.raises(ValueError):
        sample_size(k, M, eta, theta, "means")  # general metric needs n


def test_a_declared_row_count_is_scaled_to_the_sample():
    from privclust import KMeans, Subsampled

    X = np.random.default_rng(0).uniform(-1, 1, (20_000, 2))
    model = Subsampled(KMeans(2, bounds=(-1, 1), public_n=20_000, random_state=0), rate=0.05, random_state=1).fit(X)
    assert model.estimator_.public_n == 1_000


def test_an_accountant_and_its_child_are_charged_the_amplified_spend_once():
    """The subsampled fit's accountant and the base estimator's, one the other's parent: the child records each
    spend in its parent too, so charging both charged the parent twice."""
    X = np.random.default_rng(0).uniform(-1, 1, (2000, 2))
    parent = PrivacyAccountant(Budget(10.0, 1e-4))
    child = PrivacyAccountant(Budget(5.0, 1e-4), parent=parent)
    base = KMeans(3, epsilon=1.0, delta=1e-6, bounds=(-1, 1), algorithm="fastlloyd", accountant=child)
    model = Subsampled(base, rate=0.1, accountant=parent, random_state=0).fit(X)
    assert len(child.spends) == len(parent.spends) == 1
    assert parent.spends[0].epsilon == pytest.approx(model.privacy_spent_.epsilon)

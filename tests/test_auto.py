"""algorithm='auto': the choice is a function of public parameters, and its cost stays in the budget."""

import numpy as np
import pytest

from privclust import KMeans, PrivacyAccountant
from privclust.algorithms.auto import GREEDY_SIGNAL, choose


def blobs(n, d, k, seed=0):
    rng = np.random.default_rng(seed)
    centers = rng.uniform(-0.7, 0.7, (k, d))
    return centers[rng.integers(0, k, n)] + rng.normal(0, 0.03, (n, d))


def test_the_rule():
    assert choose(None, 6, 3, 1.0, adaptive=False)[0] == "greedy"  # one-round models
    assert choose(10_000, 2, 10, 1.0, adaptive=True)[0] == "greedy"  # 1000 >= 100
    assert choose(10_000, 2, 10, 0.05, adaptive=True)[0] == "fastlloyd"  # 50 < 100
    assert choose(10**7, 3, 10, 1.0, adaptive=True)[0] == "fastlloyd"  # d > 2
    n = GREEDY_SIGNAL * 4 / 0.5
    assert choose(n, 2, 4, 0.5, adaptive=True)[0] == "greedy"


def test_auto_is_the_default_and_says_what_it_chose():
    X = blobs(6_000, 2, 4)
    model = KMeans(4, bounds=(-1, 1)).fit(X)
    assert model.algorithm == "auto" and model.fit_info_["auto"]["chose"] == "greedy"
    assert "n epsilon / k" in model.fit_info_["auto"]["because"]
    assert model.cluster_centers_.shape == (4, 2)


def test_a_private_n_is_paid_for_inside_the_budget_and_a_public_one_is_free():
    X = blobs(3_000, 5, 3)
    shared = PrivacyAccountant()
    model = KMeans(3, bounds=(-1, 1), epsilon=1.0, delta=1e-6, accountant=shared).fit(X)
    labels = [s.label for s in model.privacy_spent_.steps]
    assert model.fit_info_["auto"]["chose"] == "fastlloyd" and "rows/count" in labels
    assert model.privacy_spent_.epsilon <= 1.0 + 1e-9
    public = KMeans(3, bounds=(-1, 1), public_n=3_000).fit(X)
    assert "rows/count" not in [s.label for s in public.privacy_spent_.steps]
    assert public.privacy_spent_.epsilon == pytest.approx(1.0, rel=1e-6)


def test_one_round_models_get_the_greedy_without_a_count():
    X = blobs(20_000, 2, 3)
    model = KMeans(3, bounds=(-1, 1), epsilon=4.0, privacy_model="local").fit(X)
    assert model.fit_info_["auto"]["chose"] == "greedy"
    assert model.privacy_spent_.epsilon == pytest.approx(4.0)


def test_auto_takes_no_algorithm_params():
    with pytest.raises(ValueError, match="unknown auto parameters"):
        KMeans(2, bounds=(-1, 1), algorithm_params={"levels": 3}).fit(np.zeros((10, 2)))

"""algorithm='auto': the choice is a function of public parameters, and its cost stays in the budget."""

import numpy as np
import pytest

from privclust import Budget, BudgetExceededError, KMeans, PrivacyAccountant
from privclust.algorithms.auto import (
    EVOLVE_MIN_K,
    EVOLVE_MIN_N,
    EVOLVE_SIGNAL,
    GREEDY_SIGNAL,
    GREEDY_START,
    GREEDY_START_SIGNAL,
    OVERCLUSTER_MIN_K,
    OVERCLUSTER_SIGNAL,
    OVERCLUSTERED,
    PLANE_REFINED,
    REFINED_GREEDY_SHARE,
    choose,
)
from privclust.algorithms.lloyd import AUTO_FASTLLOYD, DEFAULT_INIT_SHARE, FEW_ROUNDS, merged_rounds
from privclust.privacy.gdp import compose_mu, gdp_epsilon, gdp_mu


def blobs(n, d, k, seed=0):
    rng = np.random.default_rng(seed)
    centers = rng.uniform(-0.7, 0.7, (k, d))
    return centers[rng.integers(0, k, n)] + rng.normal(0, 0.03, (n, d))


def test_the_rule():
    assert choose(None, 6, 3, 1.0, adaptive=False)[0] == "greedy"  # one-round models
    assert choose(10_000, 2, 10, 1.0, adaptive=True)[0] == PLANE_REFINED  # 1000 >= EVOLVE_SIGNAL
    assert choose(10_000, 2, 10, 0.05, adaptive=True)[0] == "evolve"  # 50 < EVOLVE_SIGNAL, k >= EVOLVE_MIN_K
    assert choose(4_000, 2, 4, 0.05, adaptive=True)[0] == "evolve"  # k = 4 >= EVOLVE_MIN_K
    # evolve below its signal, the refined greedy from it on, whatever k (from EVOLVE_MIN_K)
    n = EVOLVE_SIGNAL * 20 / 0.5
    assert choose(n * 0.99, 2, 20, 0.5, adaptive=True)[0] == "evolve"
    assert choose(n, 2, 20, 0.5, adaptive=True)[0] == PLANE_REFINED
    assert choose(n * 0.99, 1, 20, 0.5, adaptive=True)[0] == "evolve"
    # too few clusters for evolve: FastLloyd at every signal; too few rows: FastLloyd below the greedy's signal
    assert choose(1_000, 2, EVOLVE_MIN_K - 1, 0.1, adaptive=True)[0] == "fastlloyd"
    assert choose(100_000, 2, EVOLVE_MIN_K - 1, 1.0, adaptive=True)[0] == OVERCLUSTERED  # FastLloyd, overclustered
    assert choose(EVOLVE_MIN_N - 1, 2, 4, 0.5, adaptive=True)[0] == "fastlloyd"
    assert choose(EVOLVE_MIN_N - 1, 2, 4, 100.0, adaptive=True)[0] == PLANE_REFINED
    assert choose(EVOLVE_MIN_N, 2, 4, 0.5, adaptive=True)[0] == "evolve"
    why = choose(1_000, 2, EVOLVE_MIN_K - 1, 0.1, adaptive=True)[1]
    assert f"k = {EVOLVE_MIN_K - 1} < {EVOLVE_MIN_K}" in why
    assert choose(10_000, 3, 10, 0.05, adaptive=True)[0] == "fastlloyd"  # evolve only in the plane
    assert choose(99_000, 4, 10, 1.0, adaptive=True)[0] == OVERCLUSTERED  # d > 3: 9,900 is not yet enough
    n = GREEDY_SIGNAL * 4 / 0.5
    # d = 3: FastLloyd from the greedy's centers once n epsilon / k reaches the same signal, else plain FastLloyd
    assert choose(n, 3, 4, 0.5, adaptive=True)[0] == GREEDY_START
    assert choose(n * 0.99, 3, 4, 0.5, adaptive=True)[0] == "fastlloyd"
    assert choose(None, 3, 4, 0.5, adaptive=False)[0] == "greedy"  # one round: no FastLloyd at all
    # d >= 4: the greedy start only from a hundred times the signal
    n = GREEDY_START_SIGNAL * 3 / 0.5
    assert choose(n, 6, 3, 0.5, adaptive=True)[0] == GREEDY_START
    assert choose(n * 0.99, 6, 3, 0.5, adaptive=True)[0] == OVERCLUSTERED
    assert choose(n, 784, 3, 0.5, adaptive=True)[0] == GREEDY_START


def test_fastlloyd_is_overclustered_from_its_signal_below_the_mean_starts_dimensions():
    n = OVERCLUSTER_SIGNAL * 3 / 0.5
    for d in (1, 2, 8):
        chosen, why = choose(n, d, 3, 0.5, adaptive=True)
        assert chosen == OVERCLUSTERED and f">= {OVERCLUSTER_SIGNAL:g}" in why
        assert choose(n * 0.99, d, 3, 0.5, adaptive=True)[0] == "fastlloyd"
    # two clusters have no third to be stuck between: plain FastLloyd
    assert choose(n, 8, OVERCLUSTER_MIN_K - 1, 0.5, adaptive=True)[0] == "fastlloyd"
    # in d = 3 the greedy start takes over at the same signal; from the mean start's d = 32 FastLloyd stays plain
    assert choose(n, 3, 3, 0.5, adaptive=True)[0] == GREEDY_START
    assert choose(n, 32, 3, 0.5, adaptive=True)[0] == "fastlloyd"
    # the greedy and evolve are never overclustered
    assert choose(n, 2, 10, 10.0, adaptive=True)[0] == PLANE_REFINED


def test_auto_runs_fastlloyd_overclustered_and_says_so():
    X = blobs(1_200, 2, 3, seed=4)
    model = KMeans(3, epsilon=1.0, bounds=(-1, 1), public_n=1_200, random_state=0).fit(X)
    auto = model.fit_info_["auto"]
    assert auto["chose"] == OVERCLUSTERED and auto["algorithm_params"]["overcluster"] == 2
    over = model.fit_info_["overcluster"]
    assert over["centers"] == 6 and over["merged after round"] == over["rounds"] - merged_rounds(over["rounds"])
    assert model.cluster_centers_.shape == (3, 2) and model.cluster_sizes_.shape == (3,)


def test_auto_is_the_default_and_says_what_it_chose():
    X = blobs(6_000, 2, 4)
    model = KMeans(4, bounds=(-1, 1)).fit(X)
    assert model.algorithm == "auto" and model.fit_info_["auto"]["chose"] == PLANE_REFINED
    assert "n epsilon / k" in model.fit_info_["auto"]["because"]
    assert model.cluster_centers_.shape == (4, 2)


def test_in_the_plane_the_greedy_is_refined_by_a_few_short_clipped_rounds_within_the_budget():
    X = blobs(6_000, 2, 4)
    model = KMeans(4, bounds=(-1, 1), epsilon=1.0, delta=1e-6, random_state=0).fit(X)  # n epsilon / k ~ 1500
    auto, info = model.fit_info_["auto"], model.fit_info_
    assert auto["chose"] == PLANE_REFINED and auto["algorithm"] == "fastlloyd"
    assert auto["algorithm_params"]["radii"] == "per-cluster" and auto["algorithm_params"]["rounds"] == "few"
    assert info["init"]["start"] == "greedy" and info["init"]["init_share"] == REFINED_GREEDY_SHARE
    assert model.n_iter_ == FEW_ROUNDS
    labels = [s.label for s in model.privacy_spent_.steps]
    assert labels.count("rows/count") == 1 and any(label.startswith("greedy") for label in labels)
    assert model.privacy_spent_.epsilon <= 1.0 + 1e-9 and model.privacy_spent_.delta <= 1e-6
    # the refined centers sit on the clusters: within the clusters' spread of k-means++'s cost
    from sklearn.cluster import KMeans as SkKMeans

    floor = SkKMeans(4, n_init=5, random_state=0).fit(X).inertia_ / len(X)
    assert -model.score(X) / len(X) < 3 * floor


def test_per_cluster_radii_are_the_shrinking_radii_over_sqrt_k():
    from privclust.algorithms.lloyd import PER_CLUSTER_RADII, _radius_ends

    params = {"radii": "per-cluster", "first_radius": None, "final_radius": None}
    assert _radius_ends(params, 16) == pytest.approx((PER_CLUSTER_RADII[0] / 4, PER_CLUSTER_RADII[1] / 4))
    shrinking = {"radii": "shrinking", "first_radius": 0.3, "final_radius": 0.1}
    assert _radius_ends(shrinking, 16) == pytest.approx((0.3, 0.1))


def test_a_private_n_is_paid_for_inside_the_budget_and_a_public_one_is_free():
    X = blobs(3_000, 5, 3)
    shared = PrivacyAccountant()
    model = KMeans(3, bounds=(-1, 1), epsilon=1.0, delta=1e-6, accountant=shared).fit(X)
    labels = [s.label for s in model.privacy_spent_.steps]
    assert model.fit_info_["auto"]["algorithm"] == "fastlloyd" and "rows/count" in labels
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


def test_in_three_dimensions_auto_starts_fastlloyd_from_the_greedy_and_says_so():
    X = blobs(6_000, 3, 4)
    model = KMeans(4, bounds=(-1, 1), public_n=6_000, random_state=0).fit(X)  # n epsilon / k = 1500
    auto = model.fit_info_["auto"]
    assert auto["chose"] == GREEDY_START and "d = 3" in auto["because"]
    assert auto["algorithm"] == "fastlloyd" and auto["algorithm_params"] == {**AUTO_FASTLLOYD, "init": "greedy"}
    assert model.fit_info_["init"]["start"] == "greedy"
    assert model.fit_info_["init"]["init_share"] == DEFAULT_INIT_SHARE
    assert model.privacy_spent_.epsilon == pytest.approx(1.0, rel=1e-6)
    few = KMeans(4, bounds=(-1, 1), epsilon=0.05, public_n=6_000, random_state=0).fit(X)  # n epsilon / k = 75
    assert few.fit_info_["auto"]["chose"] == "fastlloyd"
    assert few.fit_info_["init"]["start"] == "noisy mean"  # d >= 3: sphere packing pulled in about the mean
    assert few.fit_info_["init"]["around"] == "compact sphere packing"


def test_a_private_n_and_the_greedy_start_share_the_budget():
    X = blobs(6_000, 3, 4)
    model = KMeans(4, bounds=(-1, 1), epsilon=1.0, delta=1e-6, random_state=0).fit(X)
    labels = [s.label for s in model.privacy_spent_.steps]
    assert model.fit_info_["auto"]["chose"] == GREEDY_START
    assert labels.count("rows/count") == 1  # auto's count; FastLloyd reads it as public, counts no more
    assert any(label.startswith("greedy") for label in labels)
    assert model.privacy_spent_.epsilon <= 1.0 + 1e-9
    assert model.privacy_spent_.delta <= 1e-6


def test_autos_rest_takes_all_that_its_count_leaves_once_composed():
    """The count in 5% of (epsilon, delta), the algorithm in the largest epsilon beside it: the count with any
    candidate (even paired adaptively: the union of their covers) composes to the whole budget, where 95% of
    (epsilon, delta) for the rest left part of it unspent; every fit stays within it."""
    from privclust.opendp import make_private_kmeans

    X = blobs(6_000, 3, 4)
    for epsilon in (0.1, 1.0):
        params = dict(bounds=(-1, 1), epsilon=epsilon, delta=1e-6)
        assert make_private_kmeans(KMeans(4, **params), n_features=3).map(1)[0] == pytest.approx(epsilon, rel=1e-6)
        model = KMeans(4, random_state=0, **params).fit(X)
        steps = model.privacy_spent_.steps
        count = next(s.mu for s in steps if s.label == "rows/count")
        rest = compose_mu(*(s.mu for s in steps if s.mu and s.label != "rows/count"))
        assert count == pytest.approx(gdp_mu(0.05 * epsilon, 0.05e-6))
        assert model.privacy_spent_.epsilon <= epsilon * (1 + 1e-9)
        assert rest >= gdp_mu(0.95 * epsilon, 0.95e-6) * (1 - 1e-9)  # never less than the 95:5 split gave


def test_a_refused_auto_fit_spends_nothing_not_even_its_count():
    X = blobs(6_000, 3, 4)
    shared = PrivacyAccountant(Budget(1.2, 1e-6))
    first = KMeans(4, bounds=(-1, 1), epsilon=1.0, delta=5e-7, accountant=shared, random_state=0).fit(X)
    assert first.fit_info_["auto"]["chose"] == GREEDY_START
    before = len(shared.spends)
    with pytest.raises(BudgetExceededError):
        KMeans(4, bounds=(-1, 1), epsilon=1.0, delta=5e-7, accountant=shared, random_state=1).fit(X)
    assert len(shared.spends) == before
    # Each part alone fits this ledger -- the count (5%) and the greedy start with FastLloyd (95%) -- the
    # two together do not: refused as a whole before the count is released.
    count, rest = gdp_mu(0.05, 0.05e-6), gdp_mu(0.95, 0.95e-6)  # count_fraction 0.05 of (1, 1e-6)
    alone, together = gdp_epsilon(rest, 1e-6), gdp_epsilon(compose_mu(count, rest), 1e-6)
    tight = PrivacyAccountant(Budget((alone + together) / 2, 1e-6))
    with pytest.raises(BudgetExceededError):
        KMeans(4, bounds=(-1, 1), epsilon=1.0, delta=1e-6, accountant=tight, random_state=2).fit(X)
    assert tight.spends == []

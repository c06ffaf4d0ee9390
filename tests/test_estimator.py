"""privclust.KMeans: scikit-learn conventions, bounds, bad input, shared budgets."""

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone

from privclust import Budget, BudgetExceededError, KMeans, PrivacyAccountant, PrivacyLeakWarning


def test_sklearn_api(blobs):
    X, _ = blobs
    m = KMeans(3, epsilon=1.0, bounds=(-1, 1), algorithm="fastlloyd", random_state=0)
    labels = m.fit_predict(X)
    assert labels.shape == (len(X),) and set(labels) <= {0, 1, 2}
    assert np.array_equal(labels, m.labels_) and np.array_equal(m.predict(X), labels)
    assert m.cluster_centers_.shape == (3, 2) and m.n_features_in_ == 2
    assert m.transform(X[:10]).shape == (10, 3)
    assert m.score(X) == pytest.approx(-m.inertia_)
    assert m.inertia_ == pytest.approx(np.sum(np.min(m.transform(X), axis=1) ** 2))
    assert 2 <= m.n_iter_ <= 7
    params = m.get_params()
    assert params["epsilon"] == 1.0 and params["bounds"] == (-1, 1)
    m2 = clone(m).set_params(epsilon=0.5)
    assert m2.epsilon == 0.5 and not hasattr(m2, "cluster_centers_")


def test_reproducible_with_seed_and_accepts_pandas(blobs):
    X, _ = blobs
    a = KMeans(3, bounds=(-1, 1), random_state=42).fit(X).cluster_centers_
    b = KMeans(3, bounds=(-1, 1), random_state=42).fit(pd.DataFrame(X, columns=["u", "v"])).cluster_centers_
    np.testing.assert_array_equal(a, b)
    c = KMeans(3, bounds=(-1, 1), random_state=43).fit(X).cluster_centers_
    assert not np.array_equal(a, c)


def test_baseline_needs_bounds_and_data_bounds_warn(blobs):
    X, _ = blobs
    with pytest.raises(ValueError, match="non-private baseline has no budget"):  # bounds=None is private
        KMeans(3, algorithm="nonprivate-lloyd").fit(X)
    with pytest.warns(PrivacyLeakWarning, match="NOT differentially private"):
        KMeans(3, bounds="data", random_state=0).fit(X)


@pytest.mark.parametrize(
    "bounds,message",
    [
        ((1, -1), "empty"),
        ([(0, 1)] * 3, "do not fit"),
        ("auto", "only string"),
        (-2.0, "positive"),
        ({"r": 1}, "radius"),
        ((0, np.inf), "finite"),
    ],
)
def test_bad_bounds(blobs, bounds, message):
    with pytest.raises(ValueError, match=message):
        KMeans(3, bounds=bounds).fit(blobs[0])


def test_out_of_bounds_rows_are_clipped_and_centers_stay_inside():
    rng = np.random.default_rng(0)
    X = rng.normal(0, 5, (2000, 2))  # mostly outside [-1, 1]^2
    m = KMeans(4, bounds=(-1, 1), random_state=0).fit(X)
    assert np.all(np.abs(m.cluster_centers_) <= 1)


def test_per_feature_and_radius_bounds_map_back_to_data_units():
    rng = np.random.default_rng(1)
    X = np.column_stack([rng.uniform(0, 100, 5000), rng.uniform(-3, 3, 5000)])
    m = KMeans(2, bounds=[(0, 100), (-3, 3)], random_state=0).fit(X)
    assert np.all((m.cluster_centers_[:, 0] >= 0) & (m.cluster_centers_[:, 0] <= 100))
    r = KMeans(2, bounds=4.0, random_state=0).fit(X[:, 1:])
    assert np.all(np.abs(r.cluster_centers_) <= 4.0)
    r2 = KMeans(2, bounds={"radius": 4.0}, random_state=0).fit(X[:, 1:])
    np.testing.assert_allclose(r.cluster_centers_, r2.cluster_centers_)


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"epsilon": 0}, "epsilon"),
        ({"epsilon": -1.0}, "epsilon"),
        ({"epsilon": math.nan}, "epsilon"),
        ({"delta": 1.0}, "delta"),
        ({"delta": -0.1}, "delta"),
        ({"n_clusters": 0}, "n_clusters"),
        ({"n_clusters": 2.5}, "n_clusters"),
        ({"algorithm": "dbscan"}, "unknown algorithm"),
        ({"public_n": 0}, "public_n"),
        ({"count_fraction": 1.0}, "count_fraction"),
        ({"max_iter": 0}, "max_iter"),
        ({"postprocess": "round"}, "postprocess"),
        ({"radius_strategy": "wild"}, "radius_strategy"),
    ],
)
def test_bad_parameters_get_clear_errors(blobs, kwargs, message):
    params = {"n_clusters": 3, "bounds": (-1, 1), **kwargs}
    with pytest.raises(ValueError, match=message):
        KMeans(**params).fit(blobs[0])


def test_pure_dp_algorithm_needs_no_delta_but_gaussian_does(blobs):
    X, _ = blobs
    KMeans(3, epsilon=1.0, delta=0.0, bounds=(-1, 1), algorithm="sulloyd", random_state=0).fit(X)
    with pytest.raises(ValueError, match="delta > 0"):
        KMeans(3, epsilon=1.0, delta=0.0, bounds=(-1, 1), random_state=0).fit(X)


@pytest.mark.parametrize(
    "X,message",
    [
        (np.array([[0.0, np.nan], [1.0, 1.0]] * 5), "NaN or infinite"),
        (np.array([[0.0, np.inf], [1.0, 1.0]] * 5), "NaN or infinite"),
        (np.zeros(10), "2-D"),
        (np.zeros((10, 0)), "no features"),
        (np.array([["a", "b"]] * 5), "numeric"),
        (pd.DataFrame({"x": [1.0, 2.0, 3.0], "name": ["a", "b", "c"]}), "non-numeric columns"),
    ],
)
def test_bad_data_gets_clear_errors(X, message):
    with pytest.raises(ValueError, match=message):
        KMeans(3, bounds=(-1, 1)).fit(X)


def test_predict_checks_shape(blobs):
    m = KMeans(3, bounds=(-1, 1), random_state=0).fit(blobs[0])
    with pytest.raises(ValueError, match="features"):
        m.predict(np.zeros((3, 5)))


def test_gaussian_fits_compose_tighter_than_basic_composition(blobs):
    X, _ = blobs
    shared = PrivacyAccountant(Budget(1.5, 1e-6))
    for seed in range(2):
        KMeans(
            3, epsilon=1.0, delta=5e-7, bounds=(-1, 1), algorithm="fastlloyd", accountant=shared, random_state=seed
        ).fit(X)
    assert 1.0 < shared.guarantee()[0] < 1.5  # basic composition would say 2.0


def test_shared_accountant_refuses_a_fit_that_would_overspend(blobs):
    X, _ = blobs
    shared = PrivacyAccountant(Budget(1.2, 1e-6))
    KMeans(3, epsilon=1.0, delta=5e-7, bounds=(-1, 1), algorithm="fastlloyd", accountant=shared, random_state=0).fit(X)
    before = len(shared.spends)
    with pytest.raises(BudgetExceededError):
        KMeans(
            3, epsilon=1.0, delta=5e-7, bounds=(-1, 1), algorithm="fastlloyd", accountant=shared, random_state=1
        ).fit(X)
    assert len(shared.spends) == before  # nothing of the refused fit was released
    # A small second fit still fits in what is left.
    KMeans(3, epsilon=0.2, delta=4e-7, bounds=(-1, 1), algorithm="fastlloyd", accountant=shared, random_state=2).fit(X)
    assert shared.guarantee()[0] <= 1.2


def test_clone_keeps_the_shared_accountant(blobs):
    shared = PrivacyAccountant(Budget(3.0, 1e-6))
    m = KMeans(3, bounds=(-1, 1), accountant=shared)
    assert clone(m).accountant is shared


def test_non_private_baseline_cannot_be_charged_to_a_budget(blobs):
    with pytest.raises(BudgetExceededError):
        KMeans(3, bounds=(-1, 1), algorithm="nonprivate-lloyd", accountant=PrivacyAccountant(Budget(5.0))).fit(blobs[0])


def test_no_warning_in_normal_use(blobs):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        KMeans(3, bounds=(-1, 1)).fit(blobs[0])  # secure noise, public bounds: nothing to warn about


def test_transform_survives_coordinates_near_the_float_limit():
    big = 1e200
    rng = np.random.default_rng(0)
    X = rng.uniform(-big, big, (200, 2))
    model = KMeans(2, bounds=(-big, big), random_state=0).fit(X)
    distances = model.transform(X)
    assert np.all(np.isfinite(distances))
    assert np.array_equal(np.argmin(distances, axis=1), model.predict(X))


@pytest.mark.parametrize("algorithm", ["fastlloyd", "glloyd", "sulloyd", "greedy"])
def test_cluster_sizes_are_the_noisy_sizes_of_the_last_release(algorithm):
    rng = np.random.default_rng(4)
    X = np.r_[rng.normal(-0.5, 0.05, (3000, 2)), rng.normal(0.5, 0.05, (1000, 2))]
    # seeded: with secure noise about one FastLloyd fit in 40 lands more than 15% off [3000, 1000] (measured on
    # the code before and after issue 26), which made this test flaky; what it checks is where the sizes come from
    model = KMeans(2, bounds=(-1, 1), algorithm=algorithm, epsilon=2.0, random_state=1).fit(X)
    sizes = model.cluster_sizes_[np.argsort(model.cluster_centers_[:, 0])]
    np.testing.assert_allclose(sizes, [3000, 1000], rtol=0.15)
    assert model.fit_info_["nearly_empty_centers"] == 0


def test_a_center_far_from_every_row_is_reported_nearly_empty():
    X = np.random.default_rng(5).normal(-0.5, 0.05, (2000, 2))
    model = KMeans(2, bounds=(-1, 1), algorithm="fastlloyd", max_iter=1, public_n=2000, epsilon=4.0)
    model.fit(X)
    sizes = model.cluster_sizes_
    assert model.fit_info_["nearly_empty_centers"] == int(np.sum(sizes < 0.01 * 2000))


def test_a_center_with_under_one_percent_of_the_rows_is_nearly_empty():
    """Counted against 1% of the (noisy) row count, not against one row: 10 rows of 2,000 serve nearly nobody."""
    rng = np.random.default_rng(3)
    X = np.r_[rng.normal(-0.5, 0.02, (1990, 2)), rng.normal(0.5, 0.02, (10, 2))]
    model = KMeans(2, bounds=(-1, 1), algorithm="nonprivate-lloyd", random_state=0).fit(X)
    assert sorted(model.cluster_sizes_) == [10, 1990]
    assert model.fit_info_["nearly_empty_centers"] == 1


def test_rows_outside_the_bounds_are_counted_for_the_data_holder():
    X = np.r_[np.zeros((50, 2)), [[5.0, 0.0], [0.0, -3.0]]]
    assert KMeans(2, bounds=(-1, 1)).fit(X).n_rows_clipped_ == 2
    assert KMeans(2, bounds=1.0).fit(np.r_[X, [[0.8, 0.8]]]).n_rows_clipped_ == 3  # outside the unit ball

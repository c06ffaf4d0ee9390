"""privclust.KMeans against scikit-learn's own estimator checks, and its input messages."""

import numpy as np
import pandas as pd
import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from privclust import KMeans, PrivacyLeakWarning
from privclust.elbow import elbow_curve

EMPTY_DATA_IS_FITTED = (
    "an empty data set is fitted, not refused: under add/remove neighbours it neighbours every one-row "
    "data set, so refusing it would reveal that n = 0 (docs/privacy.md)"
)


WEIGHTS_ARE_REFUSED = (
    "fit takes sample_weight (as scikit-learn's KMeans does) only to refuse weights with the reason: a weight "
    "would scale every release's sensitivity, and privclust takes no public bound on the weights (docs/sklearn.md)"
)
SAMPLE_WEIGHT_CHECKS = (
    "check_sample_weights_pandas_series",
    "check_sample_weights_not_an_array",
    "check_sample_weights_list",
    "check_all_zero_sample_weights_error",
    "check_sample_weights_shape",
    "check_sample_weights_not_overwritten",
    "check_sample_weight_equivalence_on_dense_data",
)


# epsilon = 10: check_clustering asks 50 points in three blobs to be labelled with an adjusted Rand index above 0.4.
# A private fit of so few points at epsilon = 1 does that in about a third of the seeds (the default: 13 of 40 seeds
# 0-39; at epsilon = 10, 40 of 40), so at the default budget the check would test the seed, not the estimator.
@parametrize_with_checks(
    [KMeans(3, bounds=(-10, 10), epsilon=10.0, random_state=0)],
    expected_failed_checks=lambda _: {
        "check_estimators_empty_data_messages": EMPTY_DATA_IS_FITTED,
        **dict.fromkeys(SAMPLE_WEIGHT_CHECKS, WEIGHTS_ARE_REFUSED),
    },
)
def test_scikit_learn_estimator_checks(estimator, check):
    check(estimator)


@pytest.fixture(scope="module")
def fitted_on_a_frame():
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.uniform(-1, 1, (300, 3)), columns=["age", "income", "visits"])
    return frame, KMeans(2, bounds=(-1, 1), random_state=0).fit(frame)


def test_feature_names_are_kept_and_checked(fitted_on_a_frame):
    frame, model = fitted_on_a_frame
    assert list(model.feature_names_in_) == ["age", "income", "visits"]
    assert model.n_features_in_ == 3
    with pytest.raises(ValueError, match="feature names"):
        model.predict(frame[["visits", "income", "age"]])


def test_transform_names_its_columns_and_follows_set_output(fitted_on_a_frame):
    frame, model = fitted_on_a_frame
    assert list(model.get_feature_names_out()) == ["kmeans0", "kmeans1"]
    out = model.set_output(transform="pandas").transform(frame)
    model.set_output(transform="default")
    assert list(out.columns) == ["kmeans0", "kmeans1"] and out.shape == (300, 2)


@pytest.mark.parametrize(
    "bad, message",
    [
        (np.array([[1.0, 2.0], [3.0, 1 + 2j]]), "complex-valued"),
        (np.array([["0.5", "alice"], ["0.1", "0.2"]], dtype=object), "could not be converted"),
        (np.array([0.25, 0.75, 0.125]), "Reshape your data"),
        (np.empty((4, 0)), "no features"),
    ],
)
def test_input_errors_never_quote_the_rows(bad, message):
    for call in (lambda: KMeans(2, bounds=(-1, 1)).fit(bad), lambda: fitted_predict(bad)):
        with pytest.raises(ValueError, match=message) as caught:
            call()
        text = str(caught.value)
        assert "alice" not in text and "0.25" not in text and "0.125" not in text and "(4, 0)" not in text


def fitted_predict(X):
    model = KMeans(2, bounds=(-1, 1), random_state=0).fit(np.zeros((10, 2)))
    return model.predict(X)


# --- what is and is not private, said plainly ----------------------------------------------------


def test_privacy_leak_warnings_are_runtime_warnings_at_the_users_line():
    X = np.random.default_rng(1).uniform(-1, 1, (200, 2))
    cases = [
        (dict(bounds="data"), "NOT differentially private"),
        (dict(bounds=(-1, 1), random_state=3), "seeded random_state draws the noise"),
        (dict(bounds=(-1, 1), algorithm="nonprivate-lloyd"), "non-private baseline"),
    ]
    assert issubclass(PrivacyLeakWarning, RuntimeWarning)
    for params, message in cases:
        with pytest.warns(PrivacyLeakWarning, match=message) as caught:
            KMeans(2, **params).fit(X)
        assert {w.filename for w in caught if issubclass(w.category, PrivacyLeakWarning)} == {__file__}


@pytest.mark.parametrize("algorithm", ["fastlloyd", "glloyd", "sulloyd", "nonprivate-lloyd"])
def test_the_lloyd_family_refuses_algorithm_params(algorithm):
    with pytest.raises(ValueError, match="unknown .* parameters \\['levels'\\]"):
        KMeans(2, bounds=(-1, 1), algorithm=algorithm, algorithm_params={"levels": 3}).fit(np.zeros((5, 2)))


def test_elbow_curve_has_no_ignored_parameters():
    with pytest.raises(TypeError):
        elbow_curve(np.zeros((5, 2)), 3, bounds=(-1, 1), cost_share=0.5)


# --- bounds that cannot be misread ----------------------------------------------------------------


def test_diffprivlib_bounds_are_read_as_lower_and_upper_vectors():
    X = np.random.default_rng(2).uniform(0, 1, (100, 3)) * [1, 2, 3]
    model = KMeans(2, bounds=([0, 0, 0], [1, 2, 3]), random_state=0).fit(X)
    np.testing.assert_array_equal(model.domain_.upper, [1, 2, 3])
    pairs = KMeans(2, bounds=[(0, 1), (0, 2), (0, 3)], random_state=0).fit(X)
    np.testing.assert_array_equal(pairs.domain_.upper, [1, 2, 3])


def test_two_by_two_bounds_that_read_two_ways_are_refused_with_both_readings():
    with pytest.raises(ValueError, match="ambiguous") as caught:
        KMeans(2, bounds=[(0, 10), (50, 100)]).fit(np.zeros((5, 2)))
    message = str(caught.value)
    assert "feature 0 in [0, 10]" in message and "feature 0 in [0, 50]" in message
    explicit = KMeans(2, bounds={"lower": [0, 10], "upper": [50, 100]}, random_state=0).fit(np.zeros((5, 2)))
    np.testing.assert_array_equal(explicit.domain_.lower, [0, 10])
    # only one reading is a box: no ambiguity
    square = KMeans(2, bounds=[(-1, 1), (-1, 1)], random_state=0).fit(np.zeros((5, 2)))
    np.testing.assert_array_equal(square.domain_.upper, [1, 1])

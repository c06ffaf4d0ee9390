"""Privacy by construction: no outcome a user sees depends on the private rows except through accounted releases.

Each test runs the public API on neighbouring data sets (one row added) or under a spent budget and
checks that refusals, messages and accounting do not tell them apart for free.
"""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest
from sklearn.model_selection import GridSearchCV

from privclust import (
    Budget,
    BudgetExceededError,
    KMeans,
    PrivacyAccountant,
    PrivacyLeakWarning,
    Subsampled,
    sample_and_aggregate,
)
from privclust.algorithms import onecluster as oc
from privclust.elbow import elbow_curve


def neighbours(n: int = 123, d: int = 2, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    X = np.random.default_rng(seed).uniform(-1, 1, (n, d))
    return X, np.vstack([X, np.full((1, d), 0.5)])


def outcome(call) -> str:
    """The kind and text of what a user sees: a result, or an exception's type and message."""
    try:
        call()
    except Exception as exc:  # noqa: BLE001 -- the outcome is what we compare
        return f"{type(exc).__name__}: {exc}"
    return "result"


class Untouchable:
    """An array-like whose rows must not be read."""

    shape = (100, 2)

    def __array__(self, *args, **kwargs):
        raise AssertionError("the rows were read")

    def __len__(self):
        return 100


@pytest.mark.parametrize(
    "call",
    [
        lambda X: KMeans(10**9, bounds=(-1, 1), random_state=0).fit(X),
        lambda X: elbow_curve(X, k_max=10**9, bounds=(-1, 1), random_state=0),
        lambda X: sample_and_aggregate(np.median, X, 10**8, output_bounds=(-1, 1), output_dim=1, random_state=0),
        lambda X: KMeans(3, epsilon=0.0, bounds=(-1, 1)).fit(X),
    ],
)
def test_refusals_are_the_same_on_neighbours_and_name_no_row_count(call):
    X, Y = neighbours(123)
    seen_x, seen_y = outcome(lambda: call(X)), outcome(lambda: call(Y))
    assert seen_x != "result"
    assert seen_x == seen_y
    assert "123" not in seen_x and "124" not in seen_x


def test_more_centers_than_rows_is_a_fit_not_a_refusal():
    X, Y = neighbours(20)
    for data in (X, Y):
        model = KMeans(50, bounds=(-1, 1), random_state=0).fit(data)
        assert model.cluster_centers_.shape == (50, 2)
    curve = elbow_curve(X, k_max=40, bounds=(-1, 1), random_state=0)
    assert curve.costs.shape == (40,)


def test_empty_data_is_fitted_privately_not_refused():
    model = KMeans(3, bounds=(-1, 1), random_state=0).fit(np.zeros((0, 2)))
    assert model.cluster_centers_.shape == (3, 2)
    assert 0.9 < model.privacy_spent_.epsilon <= 1.0  # auto: a noisy count, then the chosen algorithm


def test_missing_values_are_refused_without_saying_where():
    X, _ = neighbours(50)
    first, second = X.copy(), X.copy()
    first[3, 0], second[41, 1] = np.nan, np.nan
    a = outcome(lambda: KMeans(2, bounds=(-1, 1)).fit(first))
    b = outcome(lambda: KMeans(2, bounds=(-1, 1)).fit(second))
    assert a == b and "NaN" in a
    assert not any(str(i) in a for i in (3, 41))


def test_a_spent_budget_refuses_before_any_row_is_read():
    spent = PrivacyAccountant(Budget(1.0, 1e-6))
    spent.spend_dp("earlier release", 1.0)
    for algorithm in ("fastlloyd", "greedy", "maxcover", "onecluster", "sulloyd"):
        with pytest.raises(BudgetExceededError):
            KMeans(
                3, bounds=(-1, 1), accountant=spent, algorithm=algorithm, delta=0.0 if algorithm == "sulloyd" else 1e-6
            ).fit(Untouchable())
    with pytest.raises(BudgetExceededError):
        elbow_curve(Untouchable(), 5, bounds=(-1, 1), accountant=spent)


def test_sample_and_aggregate_gives_an_outcome_of_one_kind_whatever_f_does():
    X, Y = neighbours(400, d=1)
    marker = 0.5  # the added row

    def fails_on_marker(part):
        if np.any(part == marker):
            raise RuntimeError("f breaks on this row")
        return np.median(part, axis=0)

    def length_from_data(part):
        return np.ones(2 if np.any(part == marker) else 1)

    for f in (fails_on_marker, length_from_data, lambda part: np.full(1, np.nan), lambda part: 1 / 0):
        for data in (X, Y):
            result = sample_and_aggregate(f, data, 40, output_bounds=(-1, 1), output_dim=1, random_state=1)
            assert result.center.shape == (1,)


def test_sample_and_aggregate_checks_the_budget_before_f_runs():
    calls = []
    spent = PrivacyAccountant(Budget(0.5, 1e-6))
    with pytest.raises(BudgetExceededError):
        sample_and_aggregate(
            lambda part: calls.append(1) or np.median(part),
            np.zeros((100, 1)),
            10,
            output_bounds=(-1, 1),
            output_dim=1,
            epsilon=1.0,
            accountant=spent,
        )
    assert calls == []


def test_subsampled_charges_the_base_estimators_accountant():
    X = np.random.default_rng(0).uniform(-1, 1, (5_000, 2))
    shared = PrivacyAccountant(Budget(10.0, 1e-3))
    base = KMeans(3, epsilon=1.0, delta=1e-6, bounds=(-1, 1), accountant=shared)
    for seed in range(4):
        Subsampled(base, rate=0.1, random_state=seed).fit(X)
    assert len(shared.spends) == 4
    assert shared.guarantee()[0] > 0.3  # four amplified fits, not (0, 0)


def test_subsampled_charges_a_shared_accountant_once_when_both_hold_it():
    X = np.random.default_rng(0).uniform(-1, 1, (2_000, 2))
    shared = PrivacyAccountant(Budget(10.0, 1e-3))
    base = KMeans(3, bounds=(-1, 1), accountant=shared, random_state=0)
    Subsampled(base, rate=0.1, random_state=0, accountant=shared).fit(X)
    assert len(shared.spends) == 1


def test_an_empty_sample_is_fitted_and_says_nothing_about_its_size():
    X, Y = neighbours(30)
    for data in (X, Y):
        model = Subsampled(KMeans(3, bounds=(-1, 1)), rate=1e-4, random_state=0).fit(data)
        assert model.cluster_centers_.shape == (3, 2)
    # k larger than any plausible sample: still a fit, never a refusal that depends on m.
    model = Subsampled(KMeans(40, bounds=(-1, 1)), rate=0.05, random_state=0).fit(X)
    assert model.cluster_centers_.shape == (40, 2)


def test_data_bounds_are_reported_as_not_private_and_refused_by_a_finite_budget():
    X, _ = neighbours(200)
    with pytest.warns(Warning):
        model = KMeans(3, bounds="data", random_state=0).fit(X)
    assert math.isinf(model.privacy_spent_.epsilon)
    assert any(math.isinf(step.epsilon) for step in model.privacy_spent_.steps)
    shared = PrivacyAccountant(Budget(100.0, 0.5))
    with pytest.raises(BudgetExceededError, match="non-private"):
        KMeans(3, bounds="data", accountant=shared).fit(Untouchable())
    assert shared.spends == []


def test_subsampled_with_data_bounds_is_refused_by_a_finite_budget():
    X, _ = neighbours(200)
    shared = PrivacyAccountant(Budget(100.0, 0.5))
    with pytest.raises(BudgetExceededError):
        Subsampled(KMeans(3, bounds="data"), rate=0.5, accountant=shared).fit(X)


class RecordingRng:
    """A numpy Generator stand-in that records the shapes of the Gaussian matrices drawn."""

    def __init__(self, seed: int):
        self._rng = np.random.default_rng(seed)
        self.normal_shapes = []

    def standard_normal(self, size):
        self.normal_shapes.append(tuple(np.atleast_1d(size)))
        return self._rng.standard_normal(size)

    def uniform(self, *args, **kwargs):
        return self._rng.uniform(*args, **kwargs)


def test_good_center_projects_to_a_dimension_set_by_a_public_count_not_the_rows():
    from privclust.privacy.noise import SeededNoise

    plan = oc.make_plan(10.0, 1e-3, n_hint=500.0)
    d = 30
    shapes = []
    for n in (20, 21):  # ceil(ln 20) = 3 but ceil(ln 21) = 4
        points = np.random.default_rng(0).uniform(-0.01, 0.01, (n, d))
        rng = RecordingRng(1)
        oc.good_center(points, 0.05, 5, plan, SeededNoise(np.random.SeedSequence(2)), rng)
        shapes.append(rng.normal_shapes[0])
    assert shapes[0] == shapes[1] == (d, math.ceil(math.log(500.0)))


def test_a_shared_accountant_refuses_to_be_sent_to_another_process():
    shared = PrivacyAccountant(Budget(1.0, 1e-6))
    with pytest.raises(TypeError, match="another process"):
        pickle.dumps(shared)
    with pytest.raises(TypeError, match="another process"):
        pickle.dumps(KMeans(3, bounds=(-1, 1), accountant=shared))


def test_grid_search_in_one_process_charges_every_fit():
    X = np.random.default_rng(0).uniform(-1, 1, (600, 2))
    shared = PrivacyAccountant(Budget(100.0, 1e-3))
    search = GridSearchCV(
        KMeans(bounds=(-1, 1), epsilon=0.5, accountant=shared, random_state=0),
        {"n_clusters": [2, 3, 4]},
        cv=2,
        n_jobs=1,
    )
    search.fit(X)
    fits = 3 * 2 + 1  # every candidate on every fold, then the refit
    rounds = [s for s in shared.spends if s.label == "rows/count"]
    assert len(rounds) == fits


def test_grid_search_across_processes_fails_loudly_instead_of_forking_the_budget():
    X = np.random.default_rng(0).uniform(-1, 1, (200, 2))
    shared = PrivacyAccountant(Budget(100.0, 1e-3))
    search = GridSearchCV(KMeans(bounds=(-1, 1), accountant=shared), {"n_clusters": [2, 3]}, cv=2, n_jobs=2)
    with pytest.raises(Exception) as raised:
        search.fit(X)
    chain, error = [], raised.value
    while error is not None:  # joblib wraps our TypeError in its own PicklingError
        chain.append(str(error))
        error = error.__cause__ or error.__context__
    assert any("another process" in text for text in chain)


def test_huge_rows_in_a_ball_domain_raise_no_warning_and_stay_finite():
    import warnings

    X = np.array([[1e308, -1e308], [0.1, 0.2], [0.0, 0.0]] * 10)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning here would depend on the private rows
        model = KMeans(2, bounds=0.5).fit(X)
    assert np.all(np.isfinite(model.cluster_centers_))


def test_a_training_row_far_outside_the_bounds_raises_no_warning():
    import warnings

    X = np.array([[1.7e308, -1.7e308], [0.5, 0.5], [0.2, 0.2]] * 5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning here would say that such a row exists
        model = KMeans(2, bounds=(0, 1)).fit(X)
        model.predict(X), model.transform(X)
    assert model.labels_.shape == (15,)


def test_data_bounds_beyond_two_to_the_53_still_give_a_finite_domain():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        model = KMeans(3, bounds="data").fit(np.array([[9.00719925e15]]))
    assert np.all(np.isfinite(model.cluster_centers_))

"""1-cluster (Nissim, Stemmer & Vadhan 2016): the L statistic, GoodRadius/GoodCenter, one_cluster, onecluster k-means, sample-and-aggregate."""

import math
import warnings

import numpy as np
import pytest
from scipy.spatial.distance import cdist

from privclust import KMeans, one_cluster, sample_and_aggregate
from privclust.algorithms import onecluster as oc
from privclust.bench.onecluster import planted
from privclust.privacy.budget import Budget, PrivacyAccountant
from privclust.privacy.leaks import PrivacyLeakWarning


def brute_force_L(points, t, r):
    counts = np.minimum((cdist(points, points) <= r).sum(axis=1), t)
    return np.sort(counts)[::-1][:t].sum() / t


@pytest.mark.parametrize("t", [1, 5, 40])
def test_capped_counts_match_the_definition_on_every_radius(t, monkeypatch):
    rng = np.random.default_rng(t)
    points = np.vstack([rng.normal(0.2, 0.03, (60, 3)), rng.uniform(-1, 1, (90, 3))])
    monkeypatch.setattr(oc, "KNN_SWITCH", 0.05)  # force the nearest-neighbour path part of the way
    stats = oc.CappedCounts(points, t)
    for r in oc.radius_grid(3)[-14:]:
        assert stats.L(r) == pytest.approx(brute_force_L(points, t, r))
    assert stats._knn is not None


def test_the_L_statistic_has_sensitivity_two():
    rng = np.random.default_rng(0)
    worst = 0.0
    for _ in range(40):
        points = rng.uniform(-1, 1, (rng.integers(5, 30), 2))
        extra = np.vstack([points, rng.uniform(-1, 1, (1, 2))])
        t = int(rng.integers(1, 12))
        for r in (0.05, 0.2, 0.5, 1.0, 3.0):
            worst = max(worst, abs(brute_force_L(extra, t, r) - brute_force_L(points, t, r)))
    assert worst <= 2.0 + 1e-12
    assert worst > 1.0  # the bound is nearly attained: a looser statistic would show here


def test_one_cluster_finds_a_planted_ball():
    successes = 0
    for seed in range(3):
        X, center = planted(20_000, 5, 1_000, 0.1, seed)
        found = one_cluster(X, 1_000, epsilon=1.0, delta=1e-6, bounds=(-1, 1), random_state=seed)
        inside = found.contains(X).sum()
        successes += found.found and inside >= 500 and found.radius <= 0.4
    assert successes >= 2


def test_one_cluster_accounting_and_units():
    X, _ = planted(5_000, 3, 400, 0.05, 0)
    ledger = PrivacyAccountant(Budget(2.0, 1e-5))
    found = one_cluster(X * 10.0, 400, epsilon=0.8, delta=1e-6, bounds=(-10, 10), random_state=0, accountant=ledger)
    report = found.privacy_spent
    parts = {s.label.split(": ")[1].split(" (")[0]: s for s in report.steps}
    assert report.epsilon == pytest.approx(0.8) and report.delta == pytest.approx(1e-6)
    assert parts["GoodRadius"].epsilon == pytest.approx(0.8 * oc.DEFAULT_SPLIT["radius"])
    assert sum(s.delta for s in report.steps) == pytest.approx(1e-6)
    assert ledger.guarantee()[0] == pytest.approx(0.8)  # charged to the shared ledger too
    assert found.radius == pytest.approx(
        10.0 * float(oc.radius_grid(3)[np.searchsorted(oc.radius_grid(3), found.radius / 10.0)])
    )


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"t": 0}, "t must be"),
        ({"budget_split": {"radius": 1.0}}, "exactly the parts"),
        ({"budget_split": {**oc.DEFAULT_SPLIT, "radius": 0.5}}, "sum to 1"),
        ({"delta": 0.0}, "delta"),
        ({"shifts": 0}, "shifts"),
    ],
)
def test_one_cluster_refuses_bad_parameters_before_reading_data(kwargs, message):
    ledger = PrivacyAccountant(Budget(5.0, 1e-3))
    args = {"t": 10, "epsilon": 1.0, "delta": 1e-6, "bounds": (-1, 1), "accountant": ledger, **kwargs}
    with pytest.raises(ValueError, match=message):
        one_cluster(np.zeros((50, 2)), **args)
    assert ledger.spends == []


def test_onecluster_kmeans_finds_clusters_and_flags_background_as_outliers():
    rng = np.random.default_rng(0)
    centers = np.array([[0.5, 0.5], [-0.5, -0.2], [0.2, -0.6]])
    X = np.vstack(
        [centers[rng.integers(0, 3, 30_000)] + rng.normal(0, 0.03, (30_000, 2)), rng.uniform(-1, 1, (1_500, 2))]
    )
    model = KMeans(3, epsilon=1.0, delta=1e-6, bounds=(-1, 1), algorithm="onecluster", random_state=0).fit(X)
    error = cdist(model.cluster_centers_, centers).min(axis=0)
    assert np.all(error < 0.05)
    assert model.radii_.shape == (3,) and np.all(model.radii_ < 0.3)
    assert model.outliers_[30_000:].mean() > 0.9  # the uniform background lies outside the balls
    assert model.outliers_[:30_000].mean() < 0.2  # most cluster points lie inside (balls at 2r)
    rounds = {s.label.split(":")[0] for s in model.privacy_spent_.steps}
    assert {"1-cluster round 1", "1-cluster round 2", "1-cluster round 3"} <= rounds
    assert model.privacy_spent_.epsilon == pytest.approx(1.0)


def test_outlier_mask_needs_balls():
    model = KMeans(2, bounds=(-1, 1), random_state=0).fit(np.random.default_rng(0).uniform(-1, 1, (300, 2)))
    with pytest.raises(AttributeError, match="onecluster"):
        model.outlier_mask(np.zeros((2, 2)))


def test_outlier_mask_flags_a_row_beyond_the_squares_range_without_a_warning_only_it_would_raise():
    rng = np.random.default_rng(1)
    X = np.vstack([rng.normal(0.3, 0.05, (2_000, 2)), [[1e200, -1e200]]])
    model = KMeans(1, epsilon=1.0, delta=1e-6, bounds=(-1, 1), algorithm="onecluster", random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # an overflow's warning would tell the row was there
        warnings.simplefilter("ignore", PrivacyLeakWarning)  # the seeded noise's notice, raised whatever the rows
        model.fit(X)
        assert model.outlier_mask(X)[-1] and model.outliers_[-1]


def test_sample_and_aggregate_estimates_a_robust_mean():
    rng = np.random.default_rng(3)
    data = np.concatenate([rng.normal(3.0, 1.0, 60_000), rng.uniform(-1e3, 1e3, 1_000)])[:, None]
    result = sample_and_aggregate(
        np.median, data, 3_000, output_bounds=(-10, 10), output_dim=1, epsilon=1.0, random_state=0
    )
    assert result.found
    assert abs(result.center[0] - 3.0) < 0.3


def test_sample_and_aggregate_partition_does_not_depend_on_other_rows():
    seen = []
    data = np.arange(1_000, dtype=float)[:, None]

    def record(part):
        seen.append(set(part[:, 0].tolist()))
        return np.array([0.0])

    sample_and_aggregate(record, data, 10, output_bounds=[(-1, 1)], random_state=5)
    first = seen[:]
    seen.clear()
    sample_and_aggregate(record, np.vstack([data, [[5_000.0]]]), 10, output_bounds=[(-1, 1)], random_state=5)
    changed = [a != b for a, b in zip(first, seen)]
    assert sum(changed) == 1  # the neighbour differs in exactly one part


@pytest.mark.parametrize(
    "n_subsets, options, message",
    [
        (1, {"output_bounds": (-5, 5), "output_dim": 1}, "n_subsets"),
        (10**7, {"output_bounds": (-5, 5), "output_dim": 1}, "n_subsets"),
        (20, {"output_bounds": (-5, 5)}, "output_dim"),
        (20, {"output_bounds": (-5, 5), "output_dim": 1, "epsilon": 0.0}, "epsilon"),
        (20, {"output_bounds": "data", "output_dim": 1}, "declared"),
        (20, {"output_bounds": (5, -5), "output_dim": 1}, "empty"),
    ],
)
def test_sample_and_aggregate_refuses_bad_parameters_before_f_runs(n_subsets, options, message):
    calls = []
    with pytest.raises(ValueError, match=message):
        sample_and_aggregate(lambda part: calls.append(1) or np.median(part), np.zeros((100, 1)), n_subsets, **options)
    assert calls == []


def test_good_radius_slack_is_dwork_roth_at_sensitivity_two():
    assert oc._slack(2.0, 10, 0.5) == pytest.approx(16.0 * (math.log(10) + math.log(2 / 0.05)) / 0.5)


def test_the_robust_mean_example_runs(capsys):
    import runpy
    from pathlib import Path

    runpy.run_path(str(Path(__file__).parents[1] / "examples" / "robust_mean.py"), run_name="__main__")
    line = capsys.readouterr().out.splitlines()[0]
    assert abs(float(line.split(":")[1].split()[0]) - 3.0) < 0.3


def test_sample_and_aggregate_absorbs_failures_of_f():
    data = np.random.default_rng(0).normal(2.0, 0.1, (20_000, 1))
    calls = []

    def fragile(part):
        calls.append(len(part))
        if len(calls) % 7 == 0:
            raise RuntimeError("this subset breaks f")
        return np.median(part, axis=0)

    result = sample_and_aggregate(fragile, data, 2_000, output_bounds=(-5, 5), output_dim=1, random_state=0)
    assert result.found and abs(result.center[0] - 2.0) < 0.3
    # f failing everywhere is an outcome of the same kind: a released ball (of the fixed fallback points).
    result = sample_and_aggregate(lambda part: 1 / 0, data, 10, output_bounds=(-5, 5), output_dim=1)
    assert result.center.shape == (1,)

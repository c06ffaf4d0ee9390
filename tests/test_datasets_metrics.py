import numpy as np
import pytest

from privclust import datasets, metrics

PAPER_SHAPES = {
    "iris": (150, 4, 3),
    "lsun": (400, 2, 3),
    "s1": (5000, 2, 15),
    "house": (1837, 3, 3),
    "adult": (48842, 6, 3),
    "wine": (178, 13, 3),
    "breast": (699, 9, 2),
    "yeast": (1484, 8, 10),
    "mnist": (10000, 784, 10),
    "birch2": (25000, 2, 100),
}


@pytest.mark.parametrize("name", list(PAPER_SHAPES))
def test_bundled_data_sets_match_the_paper(name):
    ds = datasets.load(name)
    n, d, k = PAPER_SHAPES[name]
    assert ds.X.shape == (n, d) and ds.k == k
    assert ds.X.min() >= -1 and ds.X.max() <= 1
    if name != "mnist":
        assert np.allclose(ds.X.min(0), -1) and np.allclose(ds.X.max(0), 1)
    if ds.labels is not None:
        assert len(ds.labels) == n


def test_unknown_data_set():
    with pytest.raises(ValueError, match="unknown data set"):
        datasets.load("nope")


def test_nicv_and_cost_by_hand():
    X = np.array([[0.0, 0.0], [2.0, 0.0], [10.0, 0.0]])
    C = np.array([[1.0, 0.0], [10.0, 0.0]])
    assert metrics.kmeans_cost(X, C) == pytest.approx(2.0)
    assert metrics.nicv(X, C) == pytest.approx(2.0 / 3)


def test_auc_trapezoid():
    assert metrics.auc_over_epsilon([0.1, 0.5, 1.0], [3.0, 1.0, 1.0]) == pytest.approx(0.4 * 2 + 0.5 * 1)
    assert metrics.auc_over_epsilon([1.0, 0.1, 0.5], [1.0, 3.0, 1.0]) == pytest.approx(1.3)


def test_centroid_mse_matches_after_permutation():
    ref = np.array([[0.0, 0.0], [1.0, 1.0], [5.0, 5.0]])
    found = ref[[2, 0, 1]] + np.array([[0.1, 0.0], [0.0, 0.0], [0.0, 0.2]])
    assert metrics.centroid_mse(found, ref) == pytest.approx((0.01 + 0.04) / 3)
    with pytest.raises(ValueError):
        metrics.centroid_mse(found[:2], ref)


def test_silhouette_and_db_degenerate_cases():
    X = np.random.default_rng(0).normal(size=(100, 2))
    one = np.array([[0.0, 0.0], [100.0, 100.0]])  # every point in cluster 0
    assert metrics.silhouette(X, one) == -1.0
    assert metrics.davies_bouldin(X, one) == float("inf")
    two = np.array([[-1.0, 0.0], [1.0, 0.0]])
    assert -1 <= metrics.silhouette(X, two) <= 1


def test_silhouette_when_the_sample_holds_one_cluster():
    X = np.vstack([np.zeros((1000, 2)), np.ones((2, 2))])
    centers = np.array([[0.0, 0.0], [1.0, 1.0]])
    # A 10-row sample almost surely misses the 2-point cluster: defined as -1, no exception.
    assert metrics.silhouette(X, centers, sample_size=10, random_state=0) == -1.0
    assert metrics.silhouette(X, centers, sample_size=None) > 0.9

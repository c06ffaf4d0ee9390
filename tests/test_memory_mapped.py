"""Memory-mapped input stays on disk: checked, clustered and scored chunk by chunk, never converted whole.

The peak memory itself is measured in docs/benchmarks.md ("Memory: a memory-mapped 10^7 x 10 .npy
through the CLI"); these tests check the structure that keeps it low: the map is passed on as it is,
and every consumer gets the same answers from it as from an in-memory copy.
"""

import numpy as np
import pytest

from privclust import KMeans, metrics
from privclust._validation import check_data
from privclust.geometry.domain import make_domain
from privclust.privacy.budget import PrivacyAccountant
from privclust.privacy.noise import Randomness
from privclust.queries.curator import central_oracle


def memmap_of(tmp_path, X, dtype, name="x.npy"):
    path = tmp_path / name
    np.save(path, np.asarray(X).astype(dtype))
    return np.load(path, mmap_mode="r")


@pytest.fixture
def rows():
    rng = np.random.default_rng(3)
    centers = rng.uniform(10, 90, (4, 3))
    return np.clip(centers[rng.integers(0, 4, 3000)] + rng.normal(0, 4, (3000, 3)), 0, 100).round()


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int16, np.uint8, np.bool_])
def test_check_data_returns_a_memory_map_as_it_is(tmp_path, rows, dtype):
    mapped = memmap_of(tmp_path, rows % 2 if dtype is np.bool_ else rows, dtype)
    assert check_data(mapped) is mapped  # neither converted to float64 nor copied


def test_check_data_still_converts_in_memory_arrays(rows):
    checked = check_data(rows.astype(np.int32))
    assert checked.dtype == np.float64 and not isinstance(checked, np.memmap)


def test_check_data_finds_a_nan_deep_in_a_memory_map_without_naming_it(tmp_path, rows):
    X = rows.astype(np.float32)
    X[2345, 1] = np.nan
    mapped = memmap_of(tmp_path, X, np.float32)
    with pytest.raises(ValueError, match="NaN or infinite") as err:
        check_data(mapped)
    assert "2345" not in str(err.value) and "3000" not in str(err.value)


@pytest.mark.parametrize(
    "dtype,message", [(np.complex64, "complex"), (np.dtype("S4"), "numeric"), (np.dtype("M8[s]"), "numeric")]
)
def test_check_data_refuses_non_numeric_memory_maps(tmp_path, dtype, message):
    path = tmp_path / "odd.npy"
    np.save(path, np.zeros((5, 2), dtype=dtype))
    with pytest.raises(ValueError, match=message):
        check_data(np.load(path, mmap_mode="r"))


def test_check_data_refuses_a_one_dimensional_memory_map(tmp_path):
    with pytest.raises(ValueError, match="2-D"):
        check_data(memmap_of(tmp_path, np.arange(10.0), np.float32))


def test_the_curator_holds_the_map_itself(tmp_path, rows):
    mapped = memmap_of(tmp_path, rows, np.int16)
    with central_oracle(mapped, (0, 100), None, PrivacyAccountant(), Randomness(0).noise) as curated:
        assert curated.rows.data is mapped  # checked block by block, neither converted nor copied


@pytest.mark.parametrize("dtype", [np.float32, np.int16])
def test_fit_on_a_memory_map_matches_the_fit_on_a_float64_copy(tmp_path, rows, dtype):
    mapped = memmap_of(tmp_path, rows, dtype)
    copy = np.asarray(mapped, dtype=np.float64)
    fit = dict(n_clusters=4, bounds=(0, 100), random_state=5, public_n=3000)
    on_map, in_memory = KMeans(**fit).fit(mapped), KMeans(**fit).fit(copy)
    np.testing.assert_allclose(on_map.cluster_centers_, in_memory.cluster_centers_, rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(on_map.labels_, in_memory.labels_)
    assert on_map.inertia_ == pytest.approx(in_memory.inertia_, rel=1e-9)


def test_chunked_metrics_on_a_memory_map_match_the_in_memory_ones(tmp_path, rows):
    mapped = memmap_of(tmp_path, rows, np.int16)
    copy = np.asarray(mapped, dtype=np.float64)
    centers = np.array([[20.0, 30, 40], [70, 60, 50], [50, 50, 50]])
    labels, sq = metrics.assign(copy, centers)
    chunked_labels, cost = metrics.labels_and_cost(mapped, centers)
    np.testing.assert_array_equal(chunked_labels, labels)
    assert cost == pytest.approx(sq.sum(), rel=1e-12)
    assert metrics.kmeans_cost(mapped, centers) == pytest.approx(sq.sum(), rel=1e-12)
    domain = make_domain((0, 100), 3)
    unit = domain.to_unit(copy.copy())
    assert metrics.nicv(mapped, domain.to_unit(centers.copy()), transform=domain.to_unit) == pytest.approx(
        metrics.nicv(unit, domain.to_unit(centers.copy())), rel=1e-12
    )


def test_nicv_of_no_rows_is_nan():
    assert np.isnan(metrics.nicv(np.zeros((0, 2)), np.zeros((3, 2))))

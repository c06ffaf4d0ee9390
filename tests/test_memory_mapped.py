"""Memory-mapped input stays on disk: checked, clustered and scored chunk by chunk, never converted whole.

The peak memory itself is measured in docs/benchmarks.md ("Memory: a memory-mapped 10^7 x 10 .npy
through the CLI"); these tests check the structure that keeps it low: the map is passed on as it is,
and every consumer gets the same answers from it as from an in-memory copy.
"""

import numpy as np
import pytest

from privclust import KMeans, metrics
from privclust._pages import drop_pages, gather_rows
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


# ----------------------------------------------------------------------------- pages given back after a pass


def resident_kib(X) -> int:
    """The resident kB of the mapping that holds ``X`` (Linux: its line in /proc/self/smaps)."""
    try:
        smaps = open("/proc/self/smaps").read().splitlines()
    except OSError:
        pytest.skip("the resident pages of one mapping are read from /proc/self/smaps (Linux)")
    address, inside = X.ctypes.data, False
    for line in smaps:
        head = line.split()[0]
        if "-" in head and not head.endswith(":"):
            low, high = (int(part, 16) for part in head.split("-"))
            inside = low <= address < high
        elif inside and line.startswith("Rss:"):
            return int(line.split()[1])
    raise AssertionError("no mapping holds the array")


@pytest.fixture
def wide(tmp_path):
    """A float64 map of 8 MiB, every page of it read once so that it is resident."""
    mapped = memmap_of(tmp_path, np.random.default_rng(8).uniform(0, 100, (16384, 64)), np.float64)
    assert np.isfinite(mapped.sum()) and resident_kib(mapped) >= 8192
    return mapped


def test_a_fit_gives_back_the_pages_of_a_memory_map(wide):
    model = KMeans(4, bounds=(0, 100), random_state=1, public_n=16384).fit(wide)
    assert resident_kib(wide) == 0  # every pass (check, greedy sample, sums, labels, clipped rows) dropped its pages
    assert model.labels_.shape == (16384,) and np.isfinite(model.inertia_)


def test_the_checks_and_the_metrics_give_back_the_pages_they_read(wide):
    check_data(wide)
    assert resident_kib(wide) == 0
    assert np.isfinite(wide.sum()) and resident_kib(wide) > 0
    metrics.labels_and_cost(wide, np.full((3, 64), 50.0))
    assert resident_kib(wide) == 0
    assert np.isfinite(wide.sum()) and make_domain((0, 100), 64).count_outside(wide) == 0
    assert resident_kib(wide) == 0


def test_dropped_pages_read_back_the_same_rows_and_a_view_drops_only_its_rows(wide):
    before = np.array(wide)
    columns = wide[:, 3:60:4]  # a strided view of the map, as a choice of columns gives
    drop_pages(columns, slice(0, 4096))  # the first quarter: 2 MiB
    assert 4096 <= resident_kib(wide) <= 6144  # the last half stays (the dropped range is whole 2 MiB windows)
    np.testing.assert_array_equal(np.array(wide), before)


def test_a_copy_on_write_map_keeps_its_changes(tmp_path):
    path = tmp_path / "x.npy"
    np.save(path, np.zeros((16384, 64)))
    private = np.load(path, mmap_mode="c")
    private[:] = 7.0  # changes held in this process only
    drop_pages(private, slice(None))  # dropping these pages would lose the changes: left alone
    assert np.all(private == 7.0)


@pytest.mark.parametrize("in_memory", [False, True])
def test_a_gathered_sample_is_the_indexed_rows(wide, in_memory):
    X = np.array(wide) if in_memory else wide
    index = np.sort(np.random.default_rng(2).choice(16384, 3000, replace=False))
    np.testing.assert_array_equal(gather_rows(X, index, block=256), np.asarray(wide)[index])
    if not in_memory:
        drop_pages(wide, slice(None))
        gather_rows(wide, index, block=256)
        assert resident_kib(wide) == 0  # each block's pages given back as the gather went


def test_devices_reports_give_back_the_pages_of_a_memory_mapped_points_file(tmp_path, monkeypatch):
    from privclust.local import Protocol, Randomizer
    from privclust.local import protocol as protocol_module

    monkeypatch.setattr(protocol_module, "REPORTS_CHUNK", 20_000)
    mapped = memmap_of(tmp_path, np.random.default_rng(4).uniform(-1, 1, (262_144, 4)), np.float64)  # 8 MiB
    assert np.isfinite(mapped.sum()) and resident_kib(mapped) >= 8192
    protocol = Protocol(n_clusters=2, n_features=4, bounds=[-1, 1], epsilon=2.0, users=300_000, seed=1)
    made = Randomizer(protocol, np.random.default_rng(0)).reports(mapped)
    assert len(made) == 13 + 27 * 262_144 and resident_kib(mapped) == 0

"""The aggregate-query seam and its central implementation."""

import numpy as np
import pytest

from privclust.privacy.budget import Budget, BudgetExceededError, PrivacyAccountant
from privclust.privacy.mechanisms import GaussianMechanism, LaplaceMechanism, NonPrivate, exponential_mechanism
from privclust.privacy.noise import SeededNoise
from privclust.queries import BucketSumQuery, CentralOracle, ValueBlock, clip_blocks, count_query
from privclust.queries.base import voronoi_query
from privclust.queries.voronoi import VoronoiCells


def oracle(X, budget=None, seed=0, **kw):
    return CentralOracle(X, PrivacyAccountant(budget), SeededNoise(np.random.SeedSequence(seed)), **kw)


def brute_force(X, cells, bound):
    """Clipped per-cell sums of [x - c, 1], by a Python loop (the reference)."""
    k, d = cells.centers.shape
    out = np.zeros((k, d + 1))
    for x in X:
        dist = np.linalg.norm(cells.centers - x, axis=1)
        j = int(np.argmin(dist))
        if cells.radius is not None and dist[j] >= cells.radius:
            continue
        v = x - cells.centers[j] if cells.relative else x.copy()
        n = np.linalg.norm(v)
        if n > bound:
            v *= bound / n
        out[j, :d] += v
        out[j, d] += 1
    return out


@pytest.mark.parametrize("relative,radius,bound", [(True, 0.5, 0.5), (False, None, 0.3), (True, None, 0.2)])
def test_voronoi_fast_path_matches_definition_and_brute_force(relative, radius, bound):
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (700, 3))
    cells = VoronoiCells(rng.uniform(-1, 1, (4, 3)), radius=radius, relative=relative)
    query = voronoi_query("q", cells, NonPrivate() if bound is None else GaussianMechanism(bound, 1.0), NonPrivate())
    fast = oracle(X, chunk_rows=128).exact_sums(query)
    generic = oracle(X, chunk_rows=128).exact_sums(
        BucketSumQuery(query.label, query.n_buckets, query.blocks, query.contribution)  # no structure: definition
    )
    ref = brute_force(X, cells, bound)
    np.testing.assert_allclose(fast, ref, atol=1e-7)
    np.testing.assert_allclose(generic, ref, atol=1e-9)


def test_clip_blocks_enforces_each_blocks_norm():
    q = BucketSumQuery(
        "q",
        1,
        (ValueBlock("a", 2, GaussianMechanism(1.0, 1.0)), ValueBlock("b", 2, LaplaceMechanism(1.0, 1.0))),
        contribution=lambda c: None,
    )
    v = np.array([[3.0, 4.0, 3.0, 1.0], [0.3, 0.4, 0.2, 0.2]])
    out = clip_blocks(v.copy(), q)
    np.testing.assert_allclose(out[0], [0.6, 0.8, 0.75, 0.25])
    np.testing.assert_allclose(out[1], v[1])


def test_contributions_beyond_the_bound_cannot_leak():
    # A contribution function that misbehaves (huge values) is clipped by the oracle.
    X = np.zeros((10, 1))
    q = BucketSumQuery(
        "q",
        2,
        (ValueBlock("v", 1, GaussianMechanism(1.0, 1e-9)),),
        contribution=lambda c: (np.zeros(len(c), dtype=np.intp), np.full((len(c), 1), 1e6)),
    )
    out = oracle(X).exact_sums(q)
    np.testing.assert_allclose(out, [[10.0], [0.0]])


def test_count_query_is_exact_row_count_plus_noise():
    X = np.zeros((1234, 2))
    o = oracle(X)
    assert o.exact_sums(count_query(NonPrivate()))[0, 0] == 1234
    mech = LaplaceMechanism.calibrated(1.0, 1.0)
    released = [oracle(X, seed=s).release(count_query(mech))["count"][0, 0] for s in range(400)]
    assert np.mean(released) == pytest.approx(1234, abs=0.3)
    assert np.std(released) == pytest.approx(np.sqrt(2), rel=0.15)


def test_release_is_refused_before_data_is_read():
    class Exploding(np.ndarray):
        def __getitem__(self, item):
            raise AssertionError("data was read")

    X = np.zeros((5, 1))
    o = oracle(X, budget=Budget(0.5))
    o._prepared = None  # force lazy reads from the array
    o._data = X.view(Exploding)
    with pytest.raises(BudgetExceededError):
        o.release(count_query(LaplaceMechanism.calibrated(1.0, 1.0)))
    assert o.accountant.spends == []


def test_release_records_each_block_with_its_label():
    X = np.random.default_rng(1).uniform(-1, 1, (50, 2))
    o = oracle(X, budget=Budget(5.0, 1e-6))
    cells = VoronoiCells(np.array([[0.0, 0.0], [0.5, 0.5]]))
    out = o.release(voronoi_query("it", cells, GaussianMechanism(2.0, 4.0), LaplaceMechanism(1.0, 2.0)))
    assert out["sum"].shape == (2, 2) and out["count"].shape == (2, 1)
    assert [s.label for s in o.accountant.spends] == ["it/sum", "it/count"]
    assert o.accountant.spends[0].mu == pytest.approx(0.5)
    assert o.accountant.spends[1].epsilon == pytest.approx(0.5)


def test_memory_mapped_input_gives_same_sums(tmp_path):
    X = np.random.default_rng(3).uniform(-2, 2, (3000, 3))
    path = tmp_path / "x.npy"
    np.save(path, X)
    mm = np.load(path, mmap_mode="r")
    cells = VoronoiCells(np.eye(3) * 0.5, radius=1.0, relative=True)
    q = voronoi_query("q", cells, GaussianMechanism(1.0, 1.0), GaussianMechanism(1.0, 1.0))
    clip = lambda rows: np.clip(rows, -1, 1)  # noqa: E731
    a = oracle(X, transform=clip, chunk_rows=500).exact_sums(q)
    b = oracle(mm, transform=clip, chunk_rows=500).exact_sums(q)
    np.testing.assert_allclose(a, b)


def test_exponential_mechanism_accounts_and_validates():
    acc = PrivacyAccountant(Budget(1.0))
    noise = SeededNoise(np.random.SeedSequence(0))
    picks = [exponential_mechanism([0, 0, 50], 0.1, 1.0, noise, PrivacyAccountant(), "x") for _ in range(50)]
    assert np.mean(np.array(picks) == 2) > 0.8
    exponential_mechanism([1.0, 2.0], 0.4, 1.0, noise, acc, "pick")
    assert acc.spends[0].epsilon == pytest.approx(0.4)
    with pytest.raises(BudgetExceededError):
        exponential_mechanism([1.0, 2.0], 0.7, 1.0, noise, acc, "pick again")
    with pytest.raises(ValueError):
        exponential_mechanism([np.nan], 0.1, 1.0, noise, acc, "bad")


def test_sparse_release_threshold_is_calibrated_and_keeps_a_lone_row_with_probability_delta():
    from scipy.stats import norm

    from privclust.privacy.budget import PrivacyAccountant
    from privclust.privacy.mechanisms import GaussianMechanism
    from privclust.privacy.noise import SeededNoise
    from privclust.queries.base import BucketSumQuery, ValueBlock, sparse_threshold
    from privclust.queries.central import CentralOracle

    mechanism = GaussianMechanism(sensitivity=1.0, std=2.0)
    delta = 0.2
    tau = sparse_threshold(mechanism, delta)
    assert norm.sf((tau - 1.0) / 2.0) == pytest.approx(delta)  # a one-row bucket clears it w.p. delta

    rows = np.vstack([np.zeros((1, 1)), np.ones((200, 1))])  # bucket 0: one row; bucket 1: 200 rows
    query = BucketSumQuery(
        "lone",
        2,
        (ValueBlock("value", 1, mechanism),),
        lambda chunk: ((chunk[:, 0] > 0.5).astype(np.intp), np.ones((len(chunk), 1))),
    )
    kept_lone = 0
    for seed in range(2000):
        oracle = CentralOracle(rows, PrivacyAccountant(), SeededNoise(np.random.SeedSequence(seed)))
        ids, out = oracle.release_sparse(query, delta)
        assert 1 in ids  # the heavy bucket always survives
        kept_lone += 0 in ids
    assert abs(kept_lone / 2000 - delta) < 0.03
    assert oracle.accountant.spends[-1].delta == delta


def test_stable_argmax_suppresses_a_single_count_at_the_promised_rate():
    from privclust.privacy.mechanisms import stable_argmax
    from privclust.privacy.noise import SeededNoise

    eps, delta = 1.0, 0.4
    noise = SeededNoise(np.random.SeedSequence(0))
    released = sum(stable_argmax(np.array([1.0]), eps, delta, noise) is not None for _ in range(4000))
    # P[1 + Lap(2/eps) >= 1 + 2 ln(2/delta)/eps] = exp(-ln(2/delta)) / 2 = delta / 4
    assert abs(released / 4000 - delta / 4) < 0.02
    assert stable_argmax(np.array([3.0, 500.0]), eps, delta, noise) == 1


def _mixed_requests():
    def cells(rows):
        return np.floor((rows[:, 0] + 1.0) * 3).astype(np.int64), np.hstack([rows, np.ones((len(rows), 1))])

    gauss = GaussianMechanism.for_mu(1.0, 1.0)
    dense = BucketSumQuery("dense", 6, (ValueBlock("v", 3, gauss),), cells)
    sparse = BucketSumQuery("sparse", 6, (ValueBlock("v", 3, gauss),), cells)
    return [(dense, None), (sparse, 1e-6), (dense, None)]


@pytest.mark.parametrize("memory_mapped", [False, True])
def test_release_many_answers_as_the_calls_one_by_one(tmp_path, memory_mapped):
    X = np.random.default_rng(0).uniform(-1, 1, (3000, 2))
    if memory_mapped:
        np.save(tmp_path / "x.npy", X)
        X = np.load(tmp_path / "x.npy", mmap_mode="r")
    together = oracle(X, chunk_rows=256)
    one_by_one = oracle(X, chunk_rows=256)
    batched = together.release_many(_mixed_requests())
    single = [one_by_one.release(q) if d is None else one_by_one.release_sparse(q, d) for q, d in _mixed_requests()]
    assert np.array_equal(batched[0]["v"], single[0]["v"]) and np.array_equal(batched[2]["v"], single[2]["v"])
    assert np.array_equal(batched[1][0], single[1][0]) and np.allclose(batched[1][1]["v"], single[1][1]["v"])
    assert [s.label for s in together.accountant.spends] == [s.label for s in one_by_one.accountant.spends]


def test_release_many_is_refused_whole_before_any_row_is_read():
    class Exploding(np.ndarray):
        def __getitem__(self, item):
            raise AssertionError("data was read")

    X = np.zeros((50, 2))
    o = oracle(X, budget=Budget(1.0, 1e-6))
    o._prepared = None
    o._data = X.view(Exploding)
    with pytest.raises(BudgetExceededError):
        o.release_many(_mixed_requests())  # three Gaussian releases at mu = 1 are over (1, 1e-6)
    assert o.accountant.spends == []

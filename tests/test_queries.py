"""The query seam: queries declare what is public, plans carry the budget, oracles own the noise."""

import math

import numpy as np
import pytest
from scipy.stats import norm

from privclust import KMeans
from privclust.privacy.budget import Budget, BudgetExceededError, PrivacyAccountant
from privclust.privacy.gdp import gdp_mu
from privclust.privacy.mechanisms import exponential_mechanism
from privclust.privacy.noise import SeededNoise
from privclust.queries import (
    ADAPTIVE,
    DENSE,
    EXACT,
    SPARSE,
    Block,
    CapabilityError,
    MemoryRows,
    Part,
    SumQuery,
    clip_blocks,
    count_query,
    in_memory,
    voronoi_query,
)
from privclust.queries.central import CentralOracle, sparse_threshold
from privclust.queries.plan import Oracle, pooled_allotments
from privclust.queries.voronoi import VoronoiCells


def noise(seed=0):
    return SeededNoise(np.random.SeedSequence(seed))


def oracle(X, budget=None, seed=0, **kw):
    return in_memory(X, budget, noise=noise(seed), **kw)


def exact(X, query, **kw):
    return MemoryRows(X, X.shape[1], **kw).sums([query])[0]


def brute_force(X, cells, bound, norm="l2"):
    """Clipped per-cell sums of [x - c, 1], by a Python loop (the reference): the first nearest center."""
    k, d = cells.centers.shape
    out = np.zeros((k, d + 1))
    for x in X:
        dist = np.linalg.norm(cells.centers - x, axis=1)
        j = int(np.argmin(dist))
        if cells.radius is not None and dist[j] >= cells.radius:
            continue
        v = x - cells.centers[j] if cells.relative else x.copy()
        n = np.abs(v).sum() if norm == "l1" else np.linalg.norm(v)
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
    query = voronoi_query("q", cells, Block("sum", 3, bound))
    fast = exact(X, query, chunk_rows=128)
    generic = exact(X, SumQuery(query.label, query.n_buckets, query.blocks, query.contribution), chunk_rows=128)
    ref = brute_force(X, cells, bound)
    np.testing.assert_allclose(fast, ref, atol=1e-7)
    np.testing.assert_allclose(generic, ref, atol=1e-9)


def test_the_voronoi_kernel_reuses_its_work_arrays_across_blocks(monkeypatch):
    """A chunk of many blocks (the blocks sized to stay in cache) is summed with one scores array for all of
    them -- written in place, not allocated per block -- and gives the definition's sums."""
    from privclust.queries import voronoi

    rng = np.random.default_rng(1)
    X = rng.uniform(-1, 1, (5000, 3))
    cells = VoronoiCells(rng.uniform(-1, 1, (4, 3)), radius=0.7, relative=True)
    block = Block("sum", 3, 0.4)
    monkeypatch.setattr(voronoi, "BLOCK_CELLS", 4 * 300)  # blocks of 300 rows: 17 of them
    seen = []
    real = voronoi._Work.scores

    def spy(self, chunk):
        scores = real(self, chunk)
        seen.append(scores.__array_interface__["data"][0])
        return scores

    monkeypatch.setattr(voronoi._Work, "scores", spy)
    got = cells.clipped_sums(X, np.einsum("ij,ij->i", X, X), block, Block("count", 1, 1.0, count=True))
    assert len(seen) == 17 and len(set(seen)) == 1
    np.testing.assert_allclose(got, brute_force(X, cells, 0.4), atol=1e-7)


@pytest.mark.parametrize("relative", [True, False])
def test_the_voronoi_kernel_counts_a_row_tied_between_centers_once(relative):
    """Two equal centers tie every row nearest to them exactly: each such row goes to the first of them
    alone (as argmin), never to both; the blocks without a tie take the one-hot path."""
    rng = np.random.default_rng(2)
    X = rng.uniform(-1, 1, (3000, 2))
    X[:5] = [0.5, 0.5]  # rows on the doubled center itself
    centers = np.array([[-0.5, -0.5], [0.5, 0.5], [0.5, 0.5], [0.9, -0.9]])
    cells = VoronoiCells(centers, radius=1.0 if relative else None, relative=relative)
    got = exact(X, voronoi_query("q", cells, Block("sum", 2, 0.6)), chunk_rows=700)
    np.testing.assert_allclose(got, brute_force(X, cells, 0.6), atol=1e-9)
    assert got[2, 2] == 0 and got[1, 2] > 0


def test_the_voronoi_kernel_clips_l1_relative_rows_about_their_own_center():
    """SuLloyd's blocks are l1-bounded: a relative row's l1 norm needs its own center, which the one-hot
    kernel otherwise never lists."""
    rng = np.random.default_rng(3)
    X = rng.uniform(-1, 1, (900, 3))
    cells = VoronoiCells(rng.uniform(-1, 1, (5, 3)), radius=None, relative=True)
    got = exact(X, voronoi_query("q", cells, Block("sum", 3, 0.3, norm="l1")), chunk_rows=256)
    np.testing.assert_allclose(got, brute_force(X, cells, 0.3, norm="l1"), atol=1e-9)


def test_clip_blocks_enforces_each_blocks_norm():
    q = SumQuery("q", 1, (Block("a", 2, 1.0), Block("b", 2, 1.0, norm="l1")), contribution=lambda c: None)
    v = np.array([[3.0, 4.0, 3.0, 1.0], [0.3, 0.4, 0.2, 0.2]])
    out = clip_blocks(v.copy(), q)
    np.testing.assert_allclose(out[0], [0.6, 0.8, 0.75, 0.25])
    np.testing.assert_allclose(out[1], v[1])


def test_contributions_beyond_the_bound_cannot_leak():
    X = np.zeros((10, 1))
    q = SumQuery(
        "q",
        2,
        (Block("v", 1, 1.0),),
        contribution=lambda c: (np.zeros(len(c), dtype=np.intp), np.full((len(c), 1), 1e6)),
    )
    np.testing.assert_allclose(exact(X, q), [[10.0], [0.0]])


def test_a_laplace_count_is_the_exact_count_plus_noise_of_the_parts_epsilon():
    X = np.zeros((1234, 2))
    assert exact(X, count_query())[0, 0] == 1234
    released = []
    for s in range(400):
        plan = oracle(X, Budget(1.0), seed=s).plan([Part("rows", epsilon=1.0)], family="laplace")
        released.append(plan.release(count_query(), "rows")["count"][0, 0])
    assert np.mean(released) == pytest.approx(1234, abs=0.3)
    assert np.std(released) == pytest.approx(np.sqrt(2), rel=0.15)


class Untouchable:
    """Rows that must not be read: any attempt raises."""

    shape = (5, 1)

    def __array__(self, *args, **kwargs):
        raise AssertionError("data was read")


def test_a_plan_over_a_shared_budget_is_refused_before_any_row_is_read():
    shared = PrivacyAccountant(Budget(0.5))
    o = in_memory(Untouchable(), Budget(1.0), accountant=PrivacyAccountant(Budget(1.0), parent=shared))
    with pytest.raises(BudgetExceededError):
        o.plan([Part("rows", epsilon=1.0)], family="laplace")
    assert o.accountant.spends == [] and shared.spends == []


def test_no_row_is_read_before_the_first_release():
    plan = oracle(Untouchable(), Budget(1.0)).plan([Part("rows", epsilon=1.0)], family="laplace")  # no row read
    with pytest.raises(AssertionError, match="data was read"):
        plan.release(count_query(), "rows")


def test_block_noise_follows_its_share_and_every_block_is_charged():
    X = np.random.default_rng(1).uniform(-1, 1, (50, 2))
    budget = Budget(5.0, 1e-6)
    o = oracle(X, budget)
    plan = o.plan([Part("it", share=1.0)])
    cells = VoronoiCells(np.array([[0.0, 0.0], [0.5, 0.5]]))
    out = plan.release(voronoi_query("it", cells, Block("sum", 2, 2.0, share=3.0), count_share=1.0), "it")
    assert out["sum"].shape == (2, 2) and out["count"].shape == (2, 1)
    mu = gdp_mu(5.0, 1e-6)
    assert out.std["sum"] == pytest.approx(2.0 / (mu * math.sqrt(0.75)))  # bound / (mu sqrt(share))
    assert out.std["count"] == pytest.approx(1.0 / (mu * math.sqrt(0.25)))
    assert [s.label for s in o.accountant.spends] == ["it/sum", "it/count"]
    spent = math.sqrt(sum(s.mu**2 for s in o.accountant.spends))
    assert spent == pytest.approx(mu)
    assert o.accountant.guarantee()[0] == pytest.approx(5.0, rel=1e-9)


def test_pooled_parts_split_the_rest_of_the_budget_after_explicit_ones():
    parts = [Part("a", share=3.0), Part("b", share=1.0), Part("x", epsilon=0.4, delta=2e-7)]
    allot = pooled_allotments(Budget(1.0, 1e-6), parts, "gaussian")
    mu = gdp_mu(0.6, 8e-7)
    assert allot["a"].mu == pytest.approx(mu * math.sqrt(0.75)) and allot["b"].mu == pytest.approx(mu * 0.5)
    assert allot["x"].epsilon == 0.4 and allot["x"].delta == 2e-7
    laplace = pooled_allotments(Budget(1.0), [Part("a", share=1.0), Part("c", epsilon=0.25)], "laplace")
    assert laplace["a"].epsilon == pytest.approx(0.75)
    with pytest.raises(ValueError, match="delta > 0"):
        pooled_allotments(Budget(1.0), [Part("a", share=1.0)], "gaussian")
    with pytest.raises(ValueError, match="more than the budget"):
        pooled_allotments(Budget(1.0, 1e-6), [Part("x", epsilon=2.0)], "gaussian")


def test_a_part_cannot_be_overdrawn():
    X = np.zeros((20, 1))
    plan = oracle(X, Budget(1.0, 1e-6)).plan([Part("rows", share=1.0)])
    plan.release(count_query(), "rows", 0.5)
    plan.release(count_query(), "rows", 0.5)
    with pytest.raises(RuntimeError, match="overdrawn"):
        plan.release(count_query(), "rows", 0.1)
    with pytest.raises(KeyError):
        plan.release(count_query(), "no such part")


def test_memory_mapped_input_gives_same_sums(tmp_path):
    X = np.random.default_rng(3).uniform(-2, 2, (3000, 3))
    np.save(tmp_path / "x.npy", X)
    mm = np.load(tmp_path / "x.npy", mmap_mode="r")
    cells = VoronoiCells(np.eye(3) * 0.5, radius=1.0, relative=True)
    q = voronoi_query("q", cells, Block("sum", 3, 1.0))
    clip = lambda rows: np.clip(rows, -1, 1)  # noqa: E731
    np.testing.assert_allclose(
        exact(X, q, transform=clip, chunk_rows=500), exact(mm, q, transform=clip, chunk_rows=500)
    )


def test_exponential_mechanism_accounts_and_validates():
    acc, source = PrivacyAccountant(Budget(1.0)), noise()
    picks = [exponential_mechanism([0, 0, 50], 0.1, 1.0, source, PrivacyAccountant(), "x") for _ in range(50)]
    assert np.mean(np.array(picks) == 2) > 0.8
    exponential_mechanism([1.0, 2.0], 0.4, 1.0, noise(), acc, "pick")
    assert acc.spends[0].epsilon == pytest.approx(0.4)
    with pytest.raises(BudgetExceededError):
        exponential_mechanism([1.0, 2.0], 0.7, 1.0, noise(), acc, "pick again")
    with pytest.raises(ValueError):
        exponential_mechanism([np.nan], 0.1, 1.0, noise(), acc, "bad")


def _lone_and_heavy(chunk):  # bucket by the first column, valued by the second
    return (chunk[:, 0] > 0.5).astype(np.intp), chunk[:, 1:2]


def test_sparse_release_threshold_is_calibrated_and_keeps_a_lone_row_with_probability_delta():
    from privclust.privacy.mechanisms import GaussianMechanism, LaplaceMechanism

    # Bucket 0: the worst case for partition selection -- without its row of value 1 (a neighbour), it holds
    # 0.999, under the listing floor, so that neighbour never lists it; bucket 1: 200 rows.
    rows = np.vstack([[[0.0, 0.999], [0.0, 1.0]], np.ones((200, 2))])
    query = SumQuery("lone", 2, (Block("value", 1, 1.0),), _lone_and_heavy, sparse=True)
    delta = 0.2
    kept_lone = 0
    for seed in range(2000):
        o = oracle(rows, Budget(1.0, 0.4), seed=seed)
        plan = o.plan([Part("sel", share=1.0, delta=delta)], needs={SPARSE})
        out = plan.release(query, "sel")
        assert 1 in out.ids  # the heavy bucket always survives
        kept_lone += 0 in out.ids
    assert abs(kept_lone / 2000 - delta) < 0.03
    mu = plan.allotment("sel").mu
    assert mu == pytest.approx(gdp_mu(1.0, 0.2))  # the pool gets the delta the selection does not take
    tau = sparse_threshold(GaussianMechanism(1.0, 1.0 / mu), delta)
    # a bucket only one neighbour lists holds under floor (1) + one row (1): it clears tau w.p. delta
    assert norm.sf((tau - 2.0) * mu) == pytest.approx(delta)
    assert o.accountant.spends[-1].delta == delta and o.accountant.spends[-1].label == "lone/threshold"
    laplace_tau = sparse_threshold(LaplaceMechanism(1.0, 2.0), delta)
    assert 0.5 * math.exp(-(laplace_tau - 2.0) / 2.0) == pytest.approx(delta)


def test_a_sparse_release_never_noises_a_bucket_under_one_rows_value():
    """The listing floor: a bucket whose exact first value is under one row's most is not noised, so never
    kept -- however small the noise, and at no cost in secure draws."""
    rows = np.vstack([[[0.0, 0.999]], np.ones((50, 2))])  # bucket 0 holds 0.999, bucket 1 holds 50
    query = SumQuery("lone", 2, (Block("value", 1, 1.0),), _lone_and_heavy, sparse=True)
    o = oracle(rows, Budget(50.0, 0.5), seed=0)  # tiny noise: 0.999 would clear the old threshold half the time
    draws = []
    o.noise = _Counting(o.noise, draws)
    plan = o.plan([Part("sel", share=1.0, delta=0.4)], needs={SPARSE})
    out = plan.release(query, "sel")
    assert list(out.ids) == [1] and draws == [1]  # one bucket noised: the heavy one


class _Counting:
    """A noise source that records how many values each draw noises."""

    def __init__(self, inner, sizes):
        self.inner, self.sizes = inner, sizes

    def __getattr__(self, name):
        method = getattr(self.inner, name)

        def counted(*args, **kwargs):
            out = method(*args, **kwargs)
            self.sizes.append(int(np.size(out)))
            return out

        return counted if callable(method) else method


def test_stable_argmax_suppresses_a_single_count_at_the_promised_rate():
    from privclust.privacy.mechanisms import stable_argmax

    eps, delta, source = 1.0, 0.4, noise()
    released = sum(stable_argmax(np.array([1.0]), eps, delta, source) is not None for _ in range(4000))
    # P[1 + Lap(2/eps) >= 1 + 2 ln(2/delta)/eps] = exp(-ln(2/delta)) / 2 = delta / 4
    assert abs(released / 4000 - delta / 4) < 0.02
    assert stable_argmax(np.array([3.0, 500.0]), eps, delta, source) == 1


def _cells(rows):
    return np.floor((rows[:, 0] + 1.0) * 3).astype(np.int64), np.hstack([rows, np.ones((len(rows), 1))])


def _mixed():
    dense = SumQuery("dense", 6, (Block("v", 3, 1.0),), _cells)
    sparse = SumQuery("sparse", 6, (Block("v", 3, 1.0),), _cells, sparse=True)
    return [(dense, "a", 0.5), (sparse, "b", 1.0), (dense, "a", 0.5)]


@pytest.mark.parametrize("memory_mapped", [False, True])
def test_release_many_answers_as_the_releases_one_by_one(tmp_path, memory_mapped):
    X = np.random.default_rng(0).uniform(-1, 1, (3000, 2))
    if memory_mapped:
        np.save(tmp_path / "x.npy", X)
        X = np.load(tmp_path / "x.npy", mmap_mode="r")
    parts = [Part("a", share=2.0), Part("b", share=1.0, delta=1e-7)]
    together = oracle(X, Budget(20.0, 1e-5), chunk_rows=256)
    one_by_one = oracle(X, Budget(20.0, 1e-5), chunk_rows=256)
    batched = together.plan(parts, needs={SPARSE}).release_many(_mixed())
    single_plan = one_by_one.plan(parts, needs={SPARSE})
    single = [single_plan.release(q, part, f) for q, part, f in _mixed()]
    assert np.array_equal(batched[0]["v"], single[0]["v"]) and np.array_equal(batched[2]["v"], single[2]["v"])
    assert np.array_equal(batched[1].ids, single[1].ids) and np.allclose(batched[1]["v"], single[1]["v"])
    assert [s.label for s in together.accountant.spends] == [s.label for s in one_by_one.accountant.spends]


class SumsOnly(Oracle):
    """An oracle with dense sums only, as a stand-in for a restricted privacy model."""

    capabilities = frozenset({DENSE, ADAPTIVE})
    model = "a dense-sums-only model"

    def allot(self, parts, family):
        return pooled_allotments(self.budget, parts, family)

    def answer(self, requests):
        raise AssertionError("a refused plan never releases")


@pytest.mark.parametrize(
    "algorithm, params",
    [
        ("maxcover", None),
        ("onecluster", None),
        ("greedy", {"selection": "exponential"}),
        ("greedy", {"projection_dim": 4, "levels": 6}),  # fine levels need sparse releases
        ("sulloyd", None),  # Laplace noise
    ],
)
def test_an_oracle_lacking_a_capability_refuses_the_plan_before_anything_is_spent(algorithm, params):
    from privclust.algorithms import ALGORITHMS, FitContext
    from privclust.privacy.noise import Randomness

    budget = Budget(1.0, 1e-6 if algorithm != "sulloyd" else 0.0)
    ledger = PrivacyAccountant(budget)
    o = SumsOnly(6, budget, ledger)
    ctx = FitContext(o, 3, budget, Randomness(0), options={"params": params})
    with pytest.raises(CapabilityError, match="nothing was spent"):
        ALGORITHMS[algorithm](ctx)
    assert ledger.spends == []


def test_a_fit_charges_exactly_what_its_plan_reserved(blobs):
    X, _ = blobs
    for algorithm in ("fastlloyd", "greedy", "maxcover"):
        model = KMeans(3, epsilon=0.8, delta=1e-6, bounds=(-1, 1), algorithm=algorithm, random_state=0).fit(X)
        assert model.privacy_spent_.epsilon == pytest.approx(0.8, rel=1e-6)
        assert model.privacy_spent_.epsilon <= 0.8 * (1 + 1e-9)


def test_central_oracle_declares_every_capability():
    assert {DENSE, SPARSE, ADAPTIVE, EXACT} <= CentralOracle.capabilities


def test_the_running_sparse_merge_is_np_unique_and_bincount():
    """Merging sorted parts (a running total and a chunk) takes a linear path; it must sum exactly as before."""
    from privclust.queries.rows import merge_sparse

    rng = np.random.default_rng(4)
    first = merge_sparse([(rng.integers(0, 500, 3000), rng.normal(size=(3000, 2)))], 2)
    second = merge_sparse([(rng.integers(200, 900, 2000), rng.normal(size=(2000, 2)))], 2)
    ids, sums = merge_sparse([first, second], 2)
    every = np.concatenate([first[0], second[0]])
    unique, inverse = np.unique(every, return_inverse=True)
    values = np.concatenate([first[1], second[1]])
    expected = np.stack([np.bincount(inverse, weights=values[:, j]) for j in range(2)], 1)
    assert np.array_equal(ids, unique) and np.array_equal(sums, expected)


def _coarse_and_fine(rows):
    """Coarse bucket: the row's first coordinate (-1: none); fine bucket: its second."""
    return rows[:, 0].astype(np.int64), np.ones((rows.shape[0], 1))


def _fine(rows):
    return rows[:, 1].astype(np.int64), np.ones((rows.shape[0], 1))


def test_a_narrowing_sparse_query_draws_noise_only_at_the_candidates_of_the_release_before_it():
    """The central oracle answers a sparse query that narrows at the candidates its coarser release names:
    a fine bucket outside them is not listed, however heavy, and draws no noise."""
    coarse = SumQuery("coarse", 4, (Block("v", 1, 1.0),), _coarse_and_fine)
    fine = SumQuery("fine", 100, (Block("v", 1, 1.0),), _fine, sparse=True, narrows=lambda kept: 10 * kept)
    rows = np.array([[1, 10]] * 900 + [[2, 21]] * 900 + [[2, 20]] * 900 + [[-1, 77]] * 2000, dtype=float)
    drawn = []

    class Counting(SeededNoise):
        def add_gaussian(self, values, std):
            drawn.append(np.size(values))
            return super().add_gaussian(values, std)

    o = in_memory(rows, Budget(4.0, 1e-6), noise=Counting(np.random.SeedSequence(0)))
    plan = o.plan([Part("coarse", share=1.0), Part("fine", share=1.0, delta=1e-7)], needs={SPARSE})
    first, second = plan.release_many([(coarse, "coarse", 1.0), (fine, "fine", 1.0)])
    assert first.values["v"].shape == (4, 1)
    assert sorted(second.ids.tolist()) == [10, 20]  # 21 and 77 are not candidates (coarse 1 and 2 -> 10, 20)
    assert drawn == [4, 2]  # noise for the coarse buckets and the two non-empty candidates only
    assert o.accountant.report().epsilon > 0  # both releases are charged as before


@pytest.mark.parametrize("memory_mapped", [False, True])
def test_a_narrowed_release_with_no_candidate_reads_no_row_in_memory(memory_mapped, tmp_path):
    """Rows in memory: a narrowing query is summed after the release it narrows from, in a pass of its own,
    and not at all when that release names no candidate (every coarse bucket here is empty, so none is
    significant); its answer is empty either way.  A memory map answers the batch in one pass (a pass is a
    read), summing the fine query with the coarse one."""
    coarse = SumQuery(
        "coarse", 4, (Block("v", 1, 1.0),), lambda rows: (np.full(rows.shape[0], -1), np.ones((rows.shape[0], 1)))
    )
    read = []

    def fine_contribution(rows):
        read.append(rows.shape[0])
        return _fine(rows)

    fine = SumQuery("fine", 100, (Block("v", 1, 1.0),), fine_contribution, sparse=True, narrows=lambda kept: kept)
    rows = np.array([[1, 10]] * 900 + [[2, 21]] * 900, dtype=float)
    if memory_mapped:
        np.save(tmp_path / "rows.npy", rows)
        rows = np.load(tmp_path / "rows.npy", mmap_mode="r")
    o = in_memory(rows, Budget(4.0, 1e-6), noise=noise())
    plan = o.plan([Part("coarse", share=1.0), Part("fine", share=1.0, delta=1e-7)], needs={SPARSE})
    first, second = plan.release_many([(coarse, "coarse", 1.0), (fine, "fine", 1.0)])
    assert not np.any(first.values["v"] > 5) and second.ids.size == 0
    assert (sum(read) == rows.shape[0]) if memory_mapped else not read


def test_passes_reuse_one_pool_of_threads_and_keep_few_chunks_in_flight():
    """The chunk pool is started once per process (not per pass), a pass holds at most two chunks per worker
    in flight, answers come back in chunk order, and a chunk function that maps chunks itself runs inline."""
    import threading

    from privclust import _parallel

    seen_threads, in_flight, most = set(), [0], [0]
    lock = threading.Lock()

    def work(i):
        with lock:
            in_flight[0] += 1
            most[0] = max(most[0], in_flight[0])
            seen_threads.add(threading.get_ident())
        inner = _parallel.map_chunks(lambda j: j * j, range(3))  # nested: inline, no deadlock
        with lock:
            in_flight[0] -= 1
        return i, inner

    first = _parallel.map_chunks(work, range(50), workers=2)
    pool = _parallel._shared_pool()
    second = list(_parallel.imap_chunks(work, range(50), workers=2))
    assert first == second == [(i, [0, 1, 4]) for i in range(50)]
    assert _parallel._shared_pool() is pool and len(seen_threads) <= _parallel.n_workers()
    assert most[0] <= 2 * 2


def test_a_chunk_of_nearby_bucket_ids_is_summed_by_counting_bit_for_bit(monkeypatch):
    """A sparse query's chunk whose ids span a short range is summed by np.bincount, not sorted: the same
    ids (a bucket whose rows add 0 is still listed: it is non-empty) and the same sums, bit for bit."""
    from privclust.queries import rows

    rng = np.random.default_rng(4)
    ids = rng.integers(10_000, 10_400, 3000)
    ids[::7] = -1  # rows outside every bucket
    values = rng.uniform(0, 1, (3000, 2))
    values[ids == 10_007] = 0.0
    query = SumQuery("q", 20_000, (Block("v", 2, 10.0),), lambda chunk: (ids, values.copy()), sparse=True)
    want = rows.merge_sparse([(ids[ids >= 0], values[ids >= 0])], 2)
    sorted_calls = []
    monkeypatch.setattr(rows, "merge_sparse", lambda *a: sorted_calls.append(a))
    got_ids, got_sums = rows.chunk_sparse_part(query, np.zeros((3000, 1)))
    assert not sorted_calls
    assert np.array_equal(got_ids, want[0]) and 10_007 in got_ids
    assert np.array_equal(got_sums, want[1])


@pytest.mark.parametrize("k", [1, 5, 40])
def test_nearest_center_takes_the_first_of_tied_centers_for_few_and_many(k, monkeypatch):
    """Few centers compare score rows one center at a time, many take argmin: either way each row's nearest
    center, the first of two equal ones, over blocks of rows, with the squared distance to it."""
    from privclust.queries import voronoi

    monkeypatch.setattr(voronoi, "BLOCK_CELLS", 8 * k)  # blocks of 256 rows
    rng = np.random.default_rng(5)
    X = rng.uniform(-1, 1, (1000, 3))
    centers = rng.uniform(-1, 1, (k, 3))
    if k > 1:
        centers[k - 1] = centers[k // 2]  # a center twice: its rows go to the first copy
    nearest, sq = voronoi.nearest_center(X, centers)
    dist = ((X[:, None, :] - centers[None, :, :]) ** 2).sum(2)
    np.testing.assert_array_equal(nearest, np.argmin(dist, axis=1))
    np.testing.assert_allclose(sq, dist.min(axis=1), atol=1e-12)
    if k > 1:  # center 0 twice too: its rows stay with center 0
        centers[1] = centers[0]
        dist = ((X[:, None, :] - centers[None, :, :]) ** 2).sum(2)
        np.testing.assert_array_equal(voronoi.nearest_center(X, centers)[0], np.argmin(dist, axis=1))

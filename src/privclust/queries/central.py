"""The central model: a trusted curator holds the rows and adds the noise.

The oracle reads the private array in chunks, maps each chunk through the
public ``transform`` (clipping to the declared bounds and normalising),
evaluates the query's contribution function, clips each value row to its
block's norm bound, and accumulates exact per-bucket sums; then it adds each
block's noise once and records the spend.  See ``queries.base`` for the
privacy argument.

Speed: an in-memory array is transformed once, up front (chunks already
inside the unit box are kept as views, not copied), with each row's squared
norm cached; memory-mapped input is transformed chunk by chunk on every
query instead, so arrays larger than memory work.  Chunks are processed on
every core.  Voronoi-cell queries and row counts take exact shortcuts
(``queries.voronoi``).

:class:`CuratorOracle` is the trusted curator apart from where the rows
live: it releases, noises and charges; a subclass says only how to compute
exact sums over its rows.  :class:`CentralOracle` holds them in memory (or a
memory map); ``queries.spark.SparkOracle`` keeps them in a Spark cluster.
The same exact sums get the same noise, so no engine touches the privacy
argument.
"""

from __future__ import annotations

from typing import Callable, TypeVar

import numpy as np
from scipy import sparse

from .._parallel import map_chunks, n_workers
from ..privacy.budget import PrivacyAccountant, Spend
from ..privacy.noise import NoiseSource
from .base import (
    ROW_COUNT,
    AggregateOracle,
    BucketSumQuery,
    ExactAccess,
    clip_blocks,
    request_spends,
    sparse_spends,
    sparse_threshold,
)
from .voronoi import VoronoiCells

__all__ = ["CentralOracle", "CuratorOracle", "bucket_sums", "chunk_rows_for", "chunk_sums", "merge_sparse"]

T = TypeVar("T")

DENSE_INDICATOR_CELLS = 2**20  # above this, per-bucket sums use a sparse indicator
CHUNK_BYTES = 4 * 2**20  # rows are processed ~4 MiB at a time: cache-friendly, enough for BLAS


def chunk_rows_for(n_features: int) -> int:
    return int(min(65_536, max(256, CHUNK_BYTES // (8 * max(1, n_features)))))


def bucket_sums(buckets: np.ndarray, values: np.ndarray, n_buckets: int) -> np.ndarray:
    """Exact per-bucket column sums of ``values``; rows with bucket -1 are skipped."""
    keep = np.flatnonzero(buckets >= 0)
    buckets = buckets[keep]
    if buckets.size and buckets.max() >= n_buckets:
        raise ValueError(f"bucket id {int(buckets.max())} out of range for {n_buckets} buckets")
    if n_buckets * values.shape[0] <= DENSE_INDICATOR_CELLS:
        indicator = np.zeros((n_buckets, values.shape[0]))
        indicator[buckets, keep] = 1.0
        return indicator @ values
    indicator = sparse.csr_matrix((np.ones(keep.size), (buckets, keep)), shape=(n_buckets, values.shape[0]))
    return np.asarray(indicator @ values)


class RowChunk:
    __slots__ = ("rows", "sq_norms")

    def __init__(self, rows: np.ndarray):
        self.rows = rows
        self.sq_norms = np.einsum("ij,ij->i", rows, rows)


def chunk_sums(query: BucketSumQuery, rows: np.ndarray, sq_norms: np.ndarray) -> np.ndarray:
    """Exact clipped per-bucket sums of one chunk of unit-box rows (``sq_norms``: their squared norms)."""
    cells = query.structure
    if isinstance(cells, VoronoiCells):
        sum_block, count_block = query.blocks
        return cells.clipped_sums(rows, sq_norms, sum_block.mechanism, count_block.mechanism)
    buckets, values = query.contribution(rows)
    # Contribution functions return fresh arrays, so clipping in place is safe.
    values = clip_blocks(np.asarray(values, dtype=np.float64), query)
    return bucket_sums(np.asarray(buckets, dtype=np.intp), values, query.n_buckets)


def chunk_sparse_part(query: BucketSumQuery, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(bucket ids, sums) of one chunk's non-empty buckets."""
    buckets, values = query.contribution(rows)
    values = clip_blocks(np.asarray(values, dtype=np.float64), query)
    keep = np.asarray(buckets) >= 0
    return merge_sparse([(np.asarray(buckets, dtype=np.int64)[keep], values[keep])], query.width)


def merge_sparse(parts, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Sum (ids, values) parts by id: the sorted distinct ids and their summed values."""
    parts = list(parts)
    ids = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, dtype=np.int64)
    values = np.concatenate([p[1] for p in parts]) if parts else np.zeros((0, width))
    unique, inverse = np.unique(ids, return_inverse=True)
    sums = np.stack([np.bincount(inverse, weights=values[:, j], minlength=unique.size) for j in range(width)], 1)
    return unique, sums.reshape(unique.size, width)


class CuratorOracle(AggregateOracle):
    """The central model's release logic over exact sums that a subclass computes where its rows live."""

    def exact_sums(self, query: BucketSumQuery) -> np.ndarray:
        """The exact (noiseless) clipped sums; callers must noise them before release."""
        raise NotImplementedError

    def exact_sparse_sums(self, query: BucketSumQuery) -> tuple[np.ndarray, np.ndarray]:
        """(ids of the non-empty buckets, their exact clipped sums); callers must noise them before release."""
        raise NotImplementedError

    def map_rows(self, fn: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """``fn`` of every chunk of unit-box rows, concatenated: exact access, for ``run_mechanism`` only."""
        raise NotImplementedError

    def exact_many(self, requests: list[tuple[BucketSumQuery, float | None]]) -> list:
        """Exact answers of several queries (dense totals, or (ids, sums) where a delta is given);
        an engine overrides this to compute them all in one pass over its rows."""
        return [self.exact_sums(q) if delta is None else self.exact_sparse_sums(q) for q, delta in requests]

    def release(self, query: BucketSumQuery) -> dict[str, np.ndarray]:
        self.accountant.check(query.spends())
        return self._noised(query, self.exact_sums(query))

    def release_sparse(self, query: BucketSumQuery, delta: float):
        self.accountant.check(sparse_spends(query, delta))
        return self._noised_sparse(query, delta, *self.exact_sparse_sums(query))

    def release_many(self, requests: list[tuple[BucketSumQuery, float | None]]) -> list:
        self.accountant.check([s for q, delta in requests for s in request_spends(q, delta)])
        exact = self.exact_many(requests)
        return [
            self._noised(q, answer) if delta is None else self._noised_sparse(q, delta, *answer)
            for (q, delta), answer in zip(requests, exact)
        ]

    def _noised(self, query: BucketSumQuery, total: np.ndarray) -> dict[str, np.ndarray]:
        out = {}
        for (block, cols), spend in zip(query.block_slices(), query.spends()):
            out[block.name] = block.mechanism.apply(total[:, cols], self.noise)
            self.accountant.spend(spend)
        return out

    def _noised_sparse(self, query: BucketSumQuery, delta: float, ids: np.ndarray, total: np.ndarray):
        out = {}
        for block, cols in query.block_slices():
            out[block.name] = block.mechanism.apply(total[:, cols], self.noise)
        for spend in sparse_spends(query, delta):
            self.accountant.spend(spend)
        keep = out[query.blocks[0].name][:, 0] >= sparse_threshold(query.blocks[0].mechanism, delta)
        return ids[keep], {name: values[keep] for name, values in out.items()}

    def run_mechanism(self, spends: list[Spend], mechanism):
        self.accountant.check(spends)
        out = mechanism(_CuratorAccess(self))
        for spend in spends:
            self.accountant.spend(spend)
        return out


class CentralOracle(CuratorOracle):
    """Answers queries over an in-memory array or a memory map."""

    def __init__(
        self,
        data: np.ndarray,
        accountant: PrivacyAccountant,
        noise: NoiseSource,
        transform: Callable[[np.ndarray], np.ndarray] | None = None,
        chunk_rows: int | None = None,
    ):
        super().__init__(data.shape[1], accountant, noise)
        self._data = data
        self._n_rows = data.shape[0]
        self._transform = transform or (lambda rows: rows)
        self._chunk_rows = int(chunk_rows or chunk_rows_for(data.shape[1]))
        starts = range(0, self._n_rows, self._chunk_rows)
        self._slices = [slice(s, s + self._chunk_rows) for s in starts]
        self._prepared = None
        if not isinstance(data, np.memmap):
            self._prepared = map_chunks(self._prepare, self._slices)

    def _prepare(self, rows: slice) -> RowChunk:
        return RowChunk(self._transform(np.asarray(self._data[rows], dtype=np.float64)))

    def _map(self, fn: Callable[[RowChunk], T]) -> list[T]:
        if self._prepared is not None:
            return map_chunks(fn, self._prepared)
        return [fn(self._prepare(s)) for s in self._slices]  # memory map: one chunk in memory at a time

    def exact_sums(self, query: BucketSumQuery) -> np.ndarray:
        if query.structure is ROW_COUNT:
            return np.array([[float(self._n_rows)]])
        total = np.zeros((query.n_buckets, query.width))
        for part in self._map(lambda c: chunk_sums(query, c.rows, c.sq_norms)):
            total += part
        return total

    def exact_sparse_sums(self, query: BucketSumQuery) -> tuple[np.ndarray, np.ndarray]:
        return merge_sparse(self._map(lambda c: chunk_sparse_part(query, c.rows)), query.width)

    def exact_many(self, requests):
        if any(q.structure is ROW_COUNT for q, _ in requests):
            return super().exact_many(requests)
        answers = RunningAnswers(requests)
        if self._prepared is not None:
            chunks, read = self._prepared, _as_is
        else:  # memory map: one chunk read per worker at a time
            chunks, read = self._slices, self._prepare
        group = max(1, n_workers())  # chunks in flight: memory stays a few partial answers, whatever n is
        for start in range(0, len(chunks), group):
            for parts in map_chunks(lambda c: answers.of_chunk(read(c)), chunks[start : start + group]):
                answers.add(parts)
        return answers.result()

    def map_rows(self, fn):
        parts = self._map(lambda chunk: fn(chunk.rows))
        return np.concatenate(parts) if parts else np.empty((0,))


def _as_is(chunk: RowChunk) -> RowChunk:
    return chunk


class RunningAnswers:
    """Running exact answers of several requests, fed one chunk at a time (see ``exact_many``)."""

    def __init__(self, requests):
        self.requests = requests
        # Allocated on first use, so an empty accumulator is small (Spark ships one to every task).
        self.totals: list = [None] * len(requests)

    def of_chunk(self, chunk: RowChunk) -> list:
        return [
            chunk_sums(q, chunk.rows, chunk.sq_norms) if d is None else chunk_sparse_part(q, chunk.rows)
            for q, d in self.requests
        ]

    def add(self, parts: list) -> "RunningAnswers":
        """Absorb one chunk's answers (as :meth:`of_chunk` gives them)."""
        for i, part in enumerate(parts):
            self._absorb(i, part)
        return self

    def merge(self, other: "RunningAnswers") -> "RunningAnswers":
        for i, total in enumerate(other.totals):
            if total is not None:
                self._absorb(i, total)
        return self

    def _absorb(self, i: int, part) -> None:
        query, delta = self.requests[i]
        if self.totals[i] is None:
            self.totals[i] = part
        elif delta is None:
            self.totals[i] += part
        else:  # merged as it goes, so a sparse answer never holds more than its distinct ids
            self.totals[i] = merge_sparse([self.totals[i], part], query.width)

    def result(self) -> list:
        return [t if t is not None else _empty_answer(q, d) for (q, d), t in zip(self.requests, self.totals)]


def _empty_answer(query: BucketSumQuery, delta: float | None):
    return np.zeros((query.n_buckets, query.width)) if delta is None else merge_sparse([], query.width)


class _CuratorAccess(ExactAccess):
    def __init__(self, oracle: CuratorOracle):
        self._oracle = oracle

    def map_rows(self, fn):
        return self._oracle.map_rows(fn)

    def sums(self, query):
        return self._oracle.exact_sums(query)

    def sparse_sums(self, query):
        return self._oracle.exact_sparse_sums(query)

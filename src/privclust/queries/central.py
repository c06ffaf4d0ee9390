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
"""

from __future__ import annotations

from typing import Callable

import numpy as np
from scipy import sparse

from .._parallel import map_chunks
from ..privacy.budget import PrivacyAccountant, Spend
from ..privacy.noise import NoiseSource
from .base import ROW_COUNT, AggregateOracle, BucketSumQuery, ExactAccess, clip_blocks, sparse_spends, sparse_threshold
from .voronoi import VoronoiCells

__all__ = ["CentralOracle", "bucket_sums", "chunk_rows_for"]

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


class _Chunk:
    __slots__ = ("rows", "sq_norms")

    def __init__(self, rows: np.ndarray):
        self.rows = rows
        self.sq_norms = np.einsum("ij,ij->i", rows, rows)


class CentralOracle(AggregateOracle):
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

    def _prepare(self, rows: slice) -> _Chunk:
        return _Chunk(self._transform(np.asarray(self._data[rows], dtype=np.float64)))

    def _chunks(self):
        if self._prepared is not None:
            return self._prepared
        return (self._prepare(s) for s in self._slices)

    def _chunk_sums(self, query: BucketSumQuery, chunk: _Chunk) -> np.ndarray:
        cells = query.structure
        if isinstance(cells, VoronoiCells):
            sum_block, count_block = query.blocks
            return cells.clipped_sums(chunk.rows, chunk.sq_norms, sum_block.mechanism, count_block.mechanism)
        buckets, values = query.contribution(chunk.rows)
        # Contribution functions return fresh arrays, so clipping in place is safe.
        values = clip_blocks(np.asarray(values, dtype=np.float64), query)
        return bucket_sums(np.asarray(buckets, dtype=np.intp), values, query.n_buckets)

    def exact_sums(self, query: BucketSumQuery) -> np.ndarray:
        """The exact (noiseless) clipped sums; callers must noise them before release."""
        if query.structure is ROW_COUNT:
            return np.array([[float(self._n_rows)]])
        if self._prepared is not None:
            return sum(map_chunks(lambda c: self._chunk_sums(query, c), self._prepared))
        total = np.zeros((query.n_buckets, query.width))
        for chunk in self._chunks():
            total += self._chunk_sums(query, chunk)
        return total

    def release(self, query: BucketSumQuery) -> dict[str, np.ndarray]:
        spends = query.spends()
        self.accountant.check(spends)
        total = self.exact_sums(query)
        out = {}
        for (block, cols), spend in zip(query.block_slices(), spends):
            out[block.name] = block.mechanism.apply(total[:, cols], self.noise)
            self.accountant.spend(spend)
        return out

    def exact_sparse_sums(self, query: BucketSumQuery) -> tuple[np.ndarray, np.ndarray]:
        """(ids of the non-empty buckets, their exact clipped sums); callers must noise them before release."""

        def chunk_part(chunk: _Chunk):
            buckets, values = query.contribution(chunk.rows)
            values = clip_blocks(np.asarray(values, dtype=np.float64), query)
            keep = np.asarray(buckets) >= 0
            return np.asarray(buckets, dtype=np.int64)[keep], values[keep]

        parts = (
            map_chunks(chunk_part, self._prepared)
            if self._prepared is not None
            else [chunk_part(c) for c in self._chunks()]
        )
        ids = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, dtype=np.int64)
        values = np.concatenate([p[1] for p in parts]) if parts else np.zeros((0, query.width))
        unique, inverse = np.unique(ids, return_inverse=True)
        sums = np.stack(
            [np.bincount(inverse, weights=values[:, j], minlength=unique.size) for j in range(query.width)], 1
        )
        return unique, sums.reshape(unique.size, query.width)

    def release_sparse(self, query: BucketSumQuery, delta: float):
        spends = sparse_spends(query, delta)
        first = query.blocks[0].mechanism
        threshold = sparse_threshold(first, delta)
        self.accountant.check(spends)
        ids, total = self.exact_sparse_sums(query)
        out = {}
        for block, cols in query.block_slices():
            out[block.name] = block.mechanism.apply(total[:, cols], self.noise)
        for spend in spends:
            self.accountant.spend(spend)
        keep = out[query.blocks[0].name][:, 0] >= threshold
        return ids[keep], {name: values[keep] for name, values in out.items()}

    def run_mechanism(self, spends: list[Spend], mechanism):
        self.accountant.check(spends)
        out = mechanism(_CentralAccess(self))
        for spend in spends:
            self.accountant.spend(spend)
        return out


class _CentralAccess(ExactAccess):
    def __init__(self, oracle: CentralOracle):
        self._oracle = oracle

    def map_rows(self, fn):
        oracle = self._oracle
        if oracle._prepared is not None:
            parts = map_chunks(lambda chunk: fn(chunk.rows), oracle._prepared)
        else:
            parts = [fn(chunk.rows) for chunk in oracle._chunks()]
        return np.concatenate(parts) if parts else np.empty((0,))

    def sums(self, query):
        return self._oracle.exact_sums(query)

    def sparse_sums(self, query):
        return self._oracle.exact_sparse_sums(query)

"""The central model: a trusted curator holds the rows and adds the noise.

The oracle reads the private array in chunks (so memory stays a small
multiple of one chunk, whatever n is), maps each chunk through the public
``transform`` (clipping to the declared bounds and normalising), evaluates
the query's contribution function, clips each value row to its block's norm
bound, and accumulates exact per-bucket sums.  It then adds each block's
noise once and records the spend.  See ``queries.base`` for the privacy
argument.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
from scipy import sparse

from ..privacy.budget import PrivacyAccountant
from ..privacy.noise import NoiseSource
from .base import AggregateOracle, BucketSumQuery, clip_blocks

__all__ = ["CentralOracle", "bucket_sums"]

DEFAULT_CHUNK_ROWS = 65_536


def bucket_sums(buckets: np.ndarray, values: np.ndarray, n_buckets: int) -> np.ndarray:
    """Exact per-bucket column sums of ``values``; rows with bucket -1 are skipped."""
    keep = buckets >= 0
    if not np.all(keep):
        buckets, values = buckets[keep], values[keep]
    if buckets.size and buckets.max() >= n_buckets:
        raise ValueError(f"bucket id {int(buckets.max())} out of range for {n_buckets} buckets")
    width = values.shape[1]
    if width == 1:
        return np.bincount(buckets, weights=values[:, 0], minlength=n_buckets)[:, None]
    indicator = sparse.csr_matrix(
        (np.ones(buckets.size), (buckets, np.arange(buckets.size))), shape=(n_buckets, buckets.size)
    )
    return np.asarray(indicator @ values)


class CentralOracle(AggregateOracle):
    """Answers queries over an in-memory array (numpy array or memory map)."""

    def __init__(
        self,
        data: np.ndarray,
        accountant: PrivacyAccountant,
        noise: NoiseSource,
        transform: Callable[[np.ndarray], np.ndarray] | None = None,
        chunk_rows: int = DEFAULT_CHUNK_ROWS,
    ):
        super().__init__(data.shape[1], accountant, noise)
        self._data = data
        self._transform = transform
        self._chunk_rows = int(chunk_rows)

    def chunks(self):
        """The private rows, transformed, one chunk at a time."""
        for start in range(0, self._data.shape[0], self._chunk_rows):
            chunk = np.asarray(self._data[start : start + self._chunk_rows], dtype=np.float64)
            yield self._transform(chunk) if self._transform is not None else chunk

    def exact_sums(self, query: BucketSumQuery) -> np.ndarray:
        total = np.zeros((query.n_buckets, query.width))
        for chunk in self.chunks():
            buckets, values = query.contribution(chunk)
            # Contribution functions return fresh arrays, so clipping in place is safe.
            values = clip_blocks(np.asarray(values, dtype=np.float64), query)
            total += bucket_sums(np.asarray(buckets, dtype=np.intp), values, query.n_buckets)
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

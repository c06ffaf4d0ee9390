"""Johnson-Lindenstrauss projection into the unit ball: public geometry drawn without data.

The matrix has i.i.d. N(0, 1/d') entries, so a fixed vector's squared norm is
preserved in expectation and concentrates as chi^2_{d'} / d'.  Points of the
unit box [-1, 1]^d have norm at most sqrt(d); after projection they are
divided by sqrt(d) times the 99th percentile of sqrt(chi^2_{d'} / d') and the
few that still fall outside the unit ball are projected onto it.  Every
constant is public: nothing is read off the data, so the map costs no privacy
and any mechanism run on its output keeps its guarantee (a neighbouring data
set maps to a neighbouring data set).
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Callable

import numpy as np

__all__ = ["BallProjection", "ChunkMemo", "default_projection_dim"]


def default_projection_dim(n_estimate: float) -> int:
    """Nguyen et al.'s experimental choice d' = log(n) / 2 (at least 1)."""
    return max(1, int(round(math.log(max(n_estimate, 2.0)) / 2.0)))


@dataclass(frozen=True, eq=False)
class BallProjection:
    """x -> the JL image of x, scaled (and if need be projected) into the unit ball of R^{d'}."""

    matrix: np.ndarray  # (d, d')
    scale: float

    @classmethod
    def draw(cls, n_features: int, dim: int, rng: np.random.Generator, quantile: float = 0.99) -> "BallProjection":
        if dim < 1:
            raise ValueError(f"the projection dimension must be at least 1, got {dim}")
        from scipy import stats  # loaded on first use: Spark's workers unpickle projections without it

        matrix = rng.standard_normal((n_features, dim)) / math.sqrt(dim)
        stretch = math.sqrt(stats.chi2.ppf(quantile, dim) / dim)
        return cls(matrix=matrix, scale=1.0 / (math.sqrt(n_features) * stretch))

    @property
    def dim(self) -> int:
        return self.matrix.shape[1]

    def __call__(self, rows: np.ndarray) -> np.ndarray:
        out = (rows @ self.matrix) * self.scale
        norms = np.sqrt(np.einsum("ij,ij->i", out, out))
        outside = norms > 1.0
        if np.any(outside):
            out[outside] /= norms[outside, None]
        return out


class ChunkMemo:
    """``fn`` remembered for the last ``size`` chunks it saw, by identity.

    The queries of one pass over the rows (the greedy's levels) each map the same chunk through the same
    projection; with this they compute it once.  Results are shared, so callers must not write to them.
    Pickled (to Spark executors) without its memory."""

    def __init__(self, fn: Callable[[np.ndarray], np.ndarray], size: int = 8):
        self.fn, self.size = fn, size
        self._seen: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._lock = threading.Lock()

    def __call__(self, chunk: np.ndarray) -> np.ndarray:
        with self._lock:
            hit = self._seen.get(id(chunk))
        if hit is not None and hit[0] is chunk:  # the chunk is held in the entry, so its id is not reused
            return hit[1]
        out = self.fn(chunk)
        with self._lock:
            self._seen[id(chunk)] = (chunk, out)
            while len(self._seen) > self.size:
                del self._seen[next(iter(self._seen))]
        return out

    def __reduce__(self):
        return ChunkMemo, (self.fn, self.size)

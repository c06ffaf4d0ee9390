"""Hierarchical nets of balls (seed 000): public geometry drawn without data.

Level i has radius r_i = top * 2^-i and a net: the grid of side r_i shifted by
a public uniform offset, whose points are the centers of the level's balls.
The grid's covering radius is r_i sqrt(d) / 2.  A point lies in several
balls of a level; split the grid into the 3^d sub-lattices {m : m = a mod 3}
(a in {0, 1, 2}^d): their points are 3 r_i > 2 r_i apart, so a point lies in
at most one ball of each sub-lattice.  Queries over one sub-lattice are then
ordinary one-bucket-per-row summations, and the seam's privacy argument
applies unchanged.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

__all__ = ["Level", "make_levels"]

STRIDE = 3  # sub-lattice stride: 3 grid steps = 3 r > 2 r, balls of one sub-lattice are disjoint


@dataclass(frozen=True, eq=False)
class Level:
    """The balls of one level: centers shift + r * m for integer m with low <= m <= high."""

    index: int
    radius: float
    shift: np.ndarray
    low: np.ndarray
    high: np.ndarray

    @property
    def dim(self) -> int:
        return self.shift.shape[0]

    @property
    def radix(self) -> np.ndarray:
        return self.high - self.low + 1

    @property
    def log_size(self) -> float:
        return float(np.log(self.radix.astype(np.float64)).sum())

    def centers(self, m: np.ndarray) -> np.ndarray:
        return self.shift + self.radius * m

    def encode(self, m: np.ndarray) -> np.ndarray:
        """Ball ids (int64, mixed radix over the index box)."""
        ids = np.zeros(m.shape[0], dtype=np.int64)
        for j in range(self.dim):
            ids = ids * int(self.radix[j]) + (m[:, j] - self.low[j])
        return ids

    def decode(self, ids: np.ndarray) -> np.ndarray:
        ids = np.asarray(ids, dtype=np.int64).copy()
        m = np.empty((ids.size, self.dim), dtype=np.int64)
        for j in reversed(range(self.dim)):
            m[:, j] = ids % int(self.radix[j]) + self.low[j]
            ids //= int(self.radix[j])
        return m

    def sublattices(self) -> list[np.ndarray]:
        return [np.array(a, dtype=np.int64) for a in itertools.product(range(STRIDE), repeat=self.dim)]

    def nearest_in(self, points: np.ndarray, residue: np.ndarray, z: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(index m, inside, ((r - dist) / r)^z) of each point's nearest ball of the sub-lattice ``residue``."""
        step = STRIDE * self.radius
        base = self.shift + self.radius * residue
        m = residue + STRIDE * np.round((points - base) / step).astype(np.int64)
        dist = np.linalg.norm(points - self.centers(m), axis=1)
        inside = (dist < self.radius) & np.all((m >= self.low) & (m <= self.high), axis=1)
        value = np.where(inside, np.maximum(1.0 - dist / self.radius, 0.0) ** z, 0.0)
        return m, inside, value

    def sublattice_box(self, residue: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(first j, count per axis) of the sub-lattice's balls m = residue + 3 j inside the index box."""
        first = -((residue - self.low) // STRIDE)  # ceil((low - residue) / 3)
        last = (self.high - residue) // STRIDE
        return first, np.maximum(last - first + 1, 0)

    def sublattice_bucket(self, m: np.ndarray, residue: np.ndarray) -> np.ndarray:
        """Dense bucket (0 .. size-1) of balls m of the sub-lattice ``residue``."""
        first, count = self.sublattice_box(residue)
        j = (m - residue) // STRIDE - first
        bucket = np.zeros(m.shape[0], dtype=np.int64)
        for axis in range(self.dim):
            bucket = bucket * int(count[axis]) + j[:, axis]
        return bucket

    def sublattice_balls(self, residue: np.ndarray) -> np.ndarray:
        """Every ball m of the sub-lattice, in bucket order."""
        first, count = self.sublattice_box(residue)
        axes = [residue[a] + STRIDE * (first[a] + np.arange(count[a])) for a in range(self.dim)]
        return np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, self.dim)

    def near(self, center: np.ndarray, reach: float) -> np.ndarray:
        """Indices m of this level's balls whose center lies within ``reach`` of ``center``."""
        lo = np.maximum(np.floor((center - reach - self.shift) / self.radius).astype(np.int64), self.low)
        hi = np.minimum(np.ceil((center + reach - self.shift) / self.radius).astype(np.int64), self.high)
        if np.any(hi < lo):
            return np.zeros((0, self.dim), dtype=np.int64)
        grid = np.stack(np.meshgrid(*[np.arange(a, b + 1) for a, b in zip(lo, hi)], indexing="ij"), -1)
        grid = grid.reshape(-1, self.dim)
        return grid[np.linalg.norm(self.centers(grid) - center, axis=1) <= reach]


def make_levels(top: float, count: int, dim: int, rng: np.random.Generator) -> list[Level]:
    """Levels 0 .. count-1 with radii top * 2^-i over the box [-1, 1]^dim, each with its own public shift."""
    levels = []
    for i in range(count):
        r = top * 2.0**-i
        shift = rng.uniform(0.0, r, size=dim)
        low = np.floor((-1.0 - r - shift) / r).astype(np.int64)
        high = np.ceil((1.0 + r - shift) / r).astype(np.int64)
        level = Level(i, r, shift, low, high)
        if level.log_size >= math.log(2.0**62):
            raise ValueError(
                f"level {i} has about e^{level.log_size:.0f} balls in {dim} dimensions, too many to index; "
                "use fewer levels or a smaller projection_dim"
            )
        levels.append(level)
    return levels

"""Hierarchical nets of balls (Dupré la Tour, Henzinger & Saulpic 2024): public geometry drawn without data.

Level i has radius r_i = top * 2^-i and a net: the grid of side r_i shifted by
a public uniform offset, whose points are the centers of the level's balls.
The grid's covering radius is r_i sqrt(d) / 2.  A point lies in several
balls of a level (at most 2^d: every ball holding it is a corner of the grid
cube it lies in).  Queries need one bucket per point, so a level is read
through *sub-lattices* {m : m = a mod s} (a in {0, .., s-1}^d) of stride s:

* s = 2: points of a sub-lattice are 2 r_i apart and balls are open
  (|p - x| < r), so a point lies in at most one ball of each of the 2^d
  sub-lattices, and together they give every ball its full value;
* s = 1: one sub-lattice, the whole grid; a point is credited only to the
  ball of its nearest grid point, so a ball's value sums the points of the
  cube of side r_i centred on it -- every point within r_i / 2 of its
  center, none beyond r_i.

Either way a sub-lattice query is an ordinary one-bucket-per-row summation,
and the seam's privacy argument applies unchanged.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

__all__ = ["Level", "make_levels"]

STRIDE = 2  # default sub-lattice stride: 2 grid steps = 2 r, open balls of one sub-lattice are disjoint


@dataclass(frozen=True, eq=False)
class Level:
    """The balls of one level: centers shift + r * m for integer m with low <= m <= high, read through
    sub-lattices of stride ``stride`` (see the module docstring)."""

    index: int
    radius: float
    shift: np.ndarray
    low: np.ndarray
    high: np.ndarray
    stride: int = STRIDE

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
        return [np.array(a, dtype=np.int64) for a in itertools.product(range(self.stride), repeat=self.dim)]

    def nearest_in(self, points: np.ndarray, residue: np.ndarray, z: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(index m, inside, ((r - dist) / r)^z) of each point's nearest ball of the sub-lattice ``residue``."""
        step = self.stride * self.radius
        base = self.shift + self.radius * residue
        # m as integer-valued floats first: the same numbers as the integers (exact below 2^53), so the
        # centers come without a second conversion.  Work arrays are reused in place.
        m = points - base
        m /= step
        np.rint(m, out=m)
        if self.stride != 1:
            m *= self.stride
        if residue.any():
            m += residue
        diff = m * self.radius
        diff += self.shift
        np.subtract(points, diff, out=diff)
        diff *= diff
        dist = np.sqrt(_row_sums(diff))
        m = m.astype(np.int64)
        inside = dist < self.radius
        for axis in range(self.dim):  # column by column: far faster than np.all(..., axis=1) on d' <= 8 columns
            column = m[:, axis]
            inside &= (column >= self.low[axis]) & (column <= self.high[axis])
        value = dist / self.radius
        np.subtract(1.0, value, out=value)
        np.maximum(value, 0.0, out=value)
        value **= z
        value[~inside] = 0.0
        return m, inside, value

    def sublattice_box(self, residue: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(first j, count per axis) of the sub-lattice's balls m = residue + stride j inside the index box."""
        first = -((residue - self.low) // self.stride)  # ceil((low - residue) / stride)
        last = (self.high - residue) // self.stride
        return first, np.maximum(last - first + 1, 0)

    def sublattice_bucket(self, m: np.ndarray, residue: np.ndarray) -> np.ndarray:
        """Dense bucket (0 .. size-1) of balls m of the sub-lattice ``residue``."""
        first, count = self.sublattice_box(residue)
        j = m - residue
        if self.stride != 1:
            j //= self.stride
        j -= first
        bucket = np.zeros(m.shape[0], dtype=np.int64)
        for axis in range(self.dim):
            bucket = bucket * int(count[axis]) + j[:, axis]
        return bucket

    def sublattice_balls(self, residue: np.ndarray) -> np.ndarray:
        """Every ball m of the sub-lattice, in bucket order."""
        first, count = self.sublattice_box(residue)
        axes = [residue[a] + self.stride * (first[a] + np.arange(count[a])) for a in range(self.dim)]
        return np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, self.dim)

    def cubes_meeting(self, parent: "Level", ids: np.ndarray) -> np.ndarray:
        """Ids of this level's balls whose cube (side r about the center: the points a stride-1 level credits
        to the ball) meets the cube of one of ``parent``'s balls ``ids``; sorted, distinct.

        Two cubes meet when their centers are closer than the half-sum of their sides on every axis, so each
        axis has a short public range of candidates (3 when the parent's side is twice this level's)."""
        if ids.size == 0:
            return np.zeros(0, dtype=np.int64)
        centers = parent.centers(parent.decode(ids))
        half = (parent.radius + self.radius) / 2.0
        first = np.ceil((centers - half - self.shift) / self.radius - 1e-9).astype(np.int64)
        last = np.floor((centers + half - self.shift) / self.radius + 1e-9).astype(np.int64)
        width = int((last - first).max()) + 1
        m = first[:, None, :] + _offsets(width, self.dim)[None, :, :]
        ok = np.ones(m.shape[:2], dtype=bool)
        for axis in range(self.dim):  # column by column: far faster than np.all(..., axis=2)
            column = m[:, :, axis]
            ok &= (column <= last[:, None, axis]) & (column >= self.low[axis]) & (column <= self.high[axis])
        return np.unique(self.encode(m[ok]))

    def around(self, ids: np.ndarray, cells: int) -> np.ndarray:
        """Ids of the balls at most ``cells`` grid steps from one of ``ids`` on every axis (theirs included):
        their cubes tile the cubes of ``ids`` grown by ``cells`` cells on every side.  Sorted, distinct."""
        if cells == 0 or ids.size == 0:
            return np.unique(ids)
        m = self.decode(ids)[:, None, :] + (_offsets(2 * cells + 1, self.dim) - cells)[None, :, :]
        ok = np.ones(m.shape[:2], dtype=bool)
        for axis in range(self.dim):
            column = m[:, :, axis]
            ok &= (column >= self.low[axis]) & (column <= self.high[axis])
        return np.unique(self.encode(m[ok]))

    def near(self, center: np.ndarray, reach: float) -> np.ndarray:
        """Indices m of this level's balls whose center lies within ``reach`` of ``center``."""
        lo = np.maximum(np.floor((center - reach - self.shift) / self.radius).astype(np.int64), self.low)
        hi = np.minimum(np.ceil((center + reach - self.shift) / self.radius).astype(np.int64), self.high)
        if np.any(hi < lo):
            return np.zeros((0, self.dim), dtype=np.int64)
        grid = np.stack(np.meshgrid(*[np.arange(a, b + 1) for a, b in zip(lo, hi)], indexing="ij"), -1)
        grid = grid.reshape(-1, self.dim)
        return grid[np.linalg.norm(self.centers(grid) - center, axis=1) <= reach]


def _row_sums(values: np.ndarray) -> np.ndarray:
    """``values.sum(axis=1)`` as numpy computes it (so np.linalg.norm's distances, bit for bit), column by
    column below 8 columns, where numpy adds in order and a reduction over a short row is slow."""
    if values.shape[1] >= 8:  # numpy sums 8 or more terms pairwise
        return np.add.reduce(values, axis=1)
    out = values[:, 0].copy()
    for column in range(1, values.shape[1]):
        out += values[:, column]
    return out


def _offsets(width: int, dim: int) -> np.ndarray:
    """Every integer vector of {0, .., width-1}^dim, one per row."""
    return np.stack(np.meshgrid(*[np.arange(width)] * dim, indexing="ij"), -1).reshape(-1, dim)


def make_levels(top: float, count: int, dim: int, rng: np.random.Generator, stride: int = STRIDE) -> list[Level]:
    """Levels 0 .. count-1 with radii top * 2^-i over the box [-1, 1]^dim, each with its own public shift,
    read through sub-lattices of stride ``stride`` (1 or 2)."""
    if stride not in (1, 2):
        raise ValueError(f"the sub-lattice stride must be 1 or 2, got {stride!r}")
    levels = []
    for i in range(count):
        r = top * 2.0**-i
        shift = rng.uniform(0.0, r, size=dim)
        low = np.floor((-1.0 - r - shift) / r).astype(np.int64)
        high = np.ceil((1.0 + r - shift) / r).astype(np.int64)
        level = Level(i, r, shift, low, high, stride)
        if level.log_size >= math.log(2.0**62):
            raise ValueError(
                f"level {i} has about e^{level.log_size:.0f} balls in {dim} dimensions, too many to index; "
                "use fewer levels or a smaller projection_dim"
            )
        levels.append(level)
    return levels

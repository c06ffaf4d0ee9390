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

from .._arrays import sorted_distinct

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
        columns, inside, value = self._nearest_columns(points, residue, z)
        return columns.T.astype(np.int64), inside, value

    def ball_ids(self, points: np.ndarray, residue: np.ndarray, z: int, dense: bool) -> tuple[np.ndarray, np.ndarray]:
        """Each point's ball of the sub-lattice ``residue`` -- its bucket among the sub-lattice's balls (``dense``,
        :meth:`sublattice_bucket`) or its ball id (:meth:`encode`), -1 when the point is in none -- and its value
        ((r - dist) / r)^z: :meth:`nearest_in` without the (points x dim) array of indices."""
        columns, inside, value = self._nearest_columns(points, residue, z)
        ids = np.zeros(points.shape[0], dtype=np.int64)
        first, count = self.sublattice_box(residue) if dense else (None, self.radix)
        for axis, column in enumerate(columns):
            np.clip(column, self.low[axis], self.high[axis], out=column)  # an index outside the box: any id, dropped
            if dense:  # the sub-lattice's j = (m - residue) / stride, counted from its first ball
                column -= residue[axis]
                column /= self.stride
                column -= first[axis]
            else:
                column -= self.low[axis]
            ids *= int(count[axis])
            ids += column.astype(np.int64)
        ids[~inside] = -1
        return ids, value

    def _nearest_columns(self, points: np.ndarray, residue: np.ndarray, z: int):
        """(m, inside, value) of :meth:`nearest_in`, with m as integer-valued floats, one row per axis.

        Worked axis by axis on the points' columns, in contiguous rows: numpy's operations on (points x dim)
        arrays run their inner loop along a row of dim values and took 2-3x as long.  The same arithmetic, in
        the same order, as the whole-array form: the same numbers bit for bit."""
        n, dim = points.shape
        step = self.stride * self.radius
        base = self.shift + self.radius * residue
        columns, squares = np.empty((dim, n)), np.empty((dim, n))
        inside = np.ones(n, dtype=bool)
        for axis in range(dim):
            m, diff = columns[axis], squares[axis]
            np.subtract(points[:, axis], base[axis], out=m)
            m /= step
            np.rint(m, out=m)
            if self.stride != 1:
                m *= self.stride
            if residue.any():
                m += residue[axis]
            np.multiply(m, self.radius, out=diff)
            diff += self.shift[axis]
            np.subtract(points[:, axis], diff, out=diff)
            diff *= diff
            inside &= (m >= self.low[axis]) & (m <= self.high[axis])  # integer-valued floats: exact comparisons
        dist = np.sqrt(_column_sums(squares))
        inside &= dist < self.radius
        value = dist / self.radius
        np.subtract(1.0, value, out=value)
        np.maximum(value, 0.0, out=value)
        value **= z
        value[~inside] = 0.0
        return columns, inside, value

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
        return self._boxes(first, int((last - first).max()) + 1, last)

    def around(self, ids: np.ndarray, cells: int) -> np.ndarray:
        """Ids of the balls at most ``cells`` grid steps from one of ``ids`` on every axis (theirs included):
        their cubes tile the cubes of ``ids`` grown by ``cells`` cells on every side.  Sorted, distinct."""
        if cells == 0 or ids.size == 0:
            return sorted_distinct(ids)
        return self._boxes(self.decode(ids) - cells, 2 * cells + 1)

    def _boxes(self, first: np.ndarray, width: int, last: np.ndarray | None = None) -> np.ndarray:
        """Sorted distinct ids of the balls m with first <= m < first + ``width`` (and m <= ``last``) on every
        axis, inside the index box, for each row of ``first``.  An id is linear in m (:meth:`encode`), so each
        box's ids are its first corner's plus the offsets' -- no (boxes x offsets x dim) array of indices."""
        offsets = _offsets(width, self.dim)
        ok = np.ones((first.shape[0], offsets.shape[0]), dtype=bool)
        for axis in range(self.dim):  # column by column: far faster than np.all(..., axis=2)
            column = first[:, axis, None] + offsets[None, :, axis]
            ok &= (column >= self.low[axis]) & (column <= self.high[axis])
            if last is not None:
                ok &= column <= last[:, axis, None]
        ids = self.encode(first)[:, None] + offsets @ self._place_values()
        return sorted_distinct(ids[ok])

    def _place_values(self) -> np.ndarray:
        """What one step along each axis adds to a ball's id (:meth:`encode`'s mixed radix)."""
        radix = [int(r) for r in self.radix]
        return np.array([math.prod(radix[axis + 1 :]) for axis in range(self.dim)], dtype=np.int64)

    def near(self, center: np.ndarray, reach: float) -> np.ndarray:
        """Indices m of this level's balls whose center lies within ``reach`` of ``center``."""
        lo = np.maximum(np.floor((center - reach - self.shift) / self.radius).astype(np.int64), self.low)
        hi = np.minimum(np.ceil((center + reach - self.shift) / self.radius).astype(np.int64), self.high)
        if np.any(hi < lo):
            return np.zeros((0, self.dim), dtype=np.int64)
        grid = np.stack(np.meshgrid(*[np.arange(a, b + 1) for a, b in zip(lo, hi)], indexing="ij"), -1)
        grid = grid.reshape(-1, self.dim)
        return grid[np.linalg.norm(self.centers(grid) - center, axis=1) <= reach]


def _column_sums(values: np.ndarray) -> np.ndarray:
    """Per column of a (dim x n) array, the sum of its dim values as ``values.T.sum(axis=1)`` computes it (so
    np.linalg.norm's distances, bit for bit): in order, row by row, below 8 rows, where numpy adds a short row
    in order; pairwise, as numpy does, from 8."""
    if values.shape[0] >= 8:
        return np.add.reduce(np.ascontiguousarray(values.T), axis=1)
    out = values[0].copy()
    for row in values[1:]:
        out += row
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

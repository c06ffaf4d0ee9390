"""Data-independent initial centers: Su et al.'s sphere packing.

Find (by binary search) the largest radius ``a`` such that ``k`` points can
be drawn uniformly at random, each at least ``a`` from the walls of
[-1, 1]^d and at least ``2a`` from every point drawn before it, allowing
``tries`` draws per point.  No data is read, so it costs no privacy.

Speed.  Each of the search's passes places up to ``k`` points, and a
candidate is tested only against the points placed near it: the placed
points are filed in a grid of cells of side at least ``2a`` over (up to)
their first three coordinates, so a point within ``2a`` of a candidate lies
in one of the 3^g cells around the candidate's.  That makes a pass about
O(k) tests in the plane, instead of the O(k^2) of testing every placed point
(k = 5000: minutes instead of hours).  The random draws are those of the
plain rejection sampler (one candidate, then the remaining ``tries - 1`` at
once), so the centers are the same, up to the rounding of a distance within
one ulp of ``2a``.
"""

from __future__ import annotations

from itertools import product
from typing import Callable

import numpy as np

__all__ = ["sphere_packing"]

GRID_DIMS = 3  # the cells file points by at most this many coordinates: 3^g neighbouring cells per test
MAX_CELLS_PER_POINT = 8  # the grid is coarsened so it never holds more than this many cells per point
PROGRESS_EVERY = 256  # placements between two progress reports
FAR = 1e100  # an empty slot's coordinate: its squared distance to any candidate is far beyond any limit
WORK = 2**18  # numbers a test's work array holds at most: the candidates are tested in slices that fit


class _Grid:
    """Placed points filed by cell, every cell's slots a row of an array (-1: empty), grown on demand.

    With fewer than three cells per axis (``a`` large next to the box) every placed point is a neighbour:
    then the candidates are tested against all of them, by one matrix product (``brute``)."""

    def __init__(self, k: int, d: int, a: float):
        self.g = min(d, GRID_DIMS)
        width = 2.0 - 2.0 * a  # the candidates' box [-1 + a, 1 - a] on every axis
        most = max(1, int((MAX_CELLS_PER_POINT * k) ** (1.0 / self.g)) - 2)
        per_axis = min(most, max(1, int(width / (2.0 * a))))  # cells of side >= 2a, at most ``most`` per axis
        self.brute = per_axis < 3
        if self.brute:
            per_axis = 1
        self.low, self.side, self.m = -1.0 + a, width / per_axis, per_axis + 2  # one padding cell each side
        self.placed = 0
        self.sq_norms = np.zeros(k)
        self.stride = self.m ** np.arange(self.g)
        offsets = np.array(list(product((-1, 0, 1), repeat=self.g)))
        self.offsets = offsets @ self.stride
        self.slots = np.full((self.m**self.g, 2), -1, dtype=np.int64)
        self.filled = np.zeros(self.m**self.g, dtype=np.int64)
        self.points = np.full((k + 1, d), FAR)  # row k: the empty slot's point

    def cells(self, x: np.ndarray) -> np.ndarray:
        # Candidates lie in [low, 1 - a], so the truncation is a floor; the last edge goes to the last cell.
        at = ((x[:, : self.g] - self.low) * (1.0 / self.side)).astype(np.int64)
        np.minimum(at, self.m - 3, out=at)
        return (at + 1) @ self.stride

    def first_far(self, cand: np.ndarray, limit: float) -> int | None:
        """The first candidate whose squared distance to every placed point is at least ``limit``."""
        if self.placed == 0:
            return 0
        width = (self.placed if self.brute else self.offsets.size * self.slots.shape[1]) * cand.shape[1]
        step = max(1, WORK // width)
        for start in range(0, cand.shape[0], step):
            ok = np.flatnonzero(self._min_sq(cand[start : start + step]) >= limit)
            if ok.size:
                return start + int(ok[0])
        return None

    def _min_sq(self, cand: np.ndarray) -> np.ndarray:
        if self.brute:  # |c|^2 - 2 c.p + |p|^2 against every placed point
            placed = self.points[: self.placed]
            sq = (cand * cand).sum(1)[:, None] - 2.0 * cand @ placed.T + self.sq_norms[None, : self.placed]
            return sq.min(axis=1)
        near = self.slots[self.cells(cand)[:, None] + self.offsets[None, :]].reshape(cand.shape[0], -1)
        diff = self.points[near]
        diff -= cand[:, None, :]
        return np.einsum("bmd,bmd->bm", diff, diff).min(axis=1)

    def add(self, j: int, x: np.ndarray) -> None:
        self.points[j] = x
        self.sq_norms[j] = (x * x).sum()
        self.placed = j + 1
        if self.brute:
            return
        cell = int(self.cells(x[None])[0])
        if self.filled[cell] == self.slots.shape[1]:
            self.slots = np.concatenate([self.slots, np.full_like(self.slots, -1)], axis=1)
        self.slots[cell, self.filled[cell]] = j
        self.filled[cell] += 1


def _place(
    k: int, d: int, a: float, rng: np.random.Generator, tries: int, report: Callable[[int], None] | None = None
) -> np.ndarray | None:
    if a <= 0.0:  # nothing to keep apart: every first candidate is kept
        return rng.uniform(-1.0, 1.0, size=(k, d))
    grid, limit = _Grid(k, d, a), (2.0 * a) ** 2
    for j in range(k):
        # One candidate first (it usually fits), then the remaining tries at once.
        for batch in (1, tries - 1):
            cand = rng.uniform(-1.0 + a, 1.0 - a, size=(batch, d))
            pick = grid.first_far(cand, limit)
            if pick is not None:
                grid.add(j, cand[pick])
                break
        else:
            return None
        if report is not None and j % PROGRESS_EVERY == 0:
            report(j)
    return grid.points[:k].copy()


def sphere_packing(
    k: int,
    d: int,
    rng: np.random.Generator,
    tries: int = 100,
    steps: int = 16,
    progress: Callable[[float], None] | None = None,
) -> np.ndarray:
    """``k`` well-spread initial centers in [-1, 1]^d.

    ``progress(fraction)``, if given, is called as the search goes (fraction of its passes done)."""
    if k < 1 or d < 1:
        raise ValueError("sphere packing needs k >= 1 and d >= 1")
    passes = steps + 1

    def reporter(done: int):
        if progress is None:
            return None
        return lambda j: progress((done + j / k) / passes)

    lo, hi = 0.0, 1.0
    best = _place(k, d, 0.0, rng, tries)
    for step in range(steps):
        mid = (lo + hi) / 2.0
        centers = _place(k, d, mid, rng, tries, reporter(step + 1))
        if centers is None:
            hi = mid
        else:
            lo, best = mid, centers
    if progress is not None:
        progress(1.0)
    return best

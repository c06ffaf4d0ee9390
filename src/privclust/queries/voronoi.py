"""Voronoi cells of public centers: the buckets of every Lloyd-type step.

The cells are public geometry (the centers were released, or drawn without
data).  A point's bucket is its nearest center, or none when it lies at or
beyond ``radius`` from it (FastLloyd's radius constraint).  Its value row is
``[x - c, 1]`` (``relative``) or ``[x, 1]``.

:meth:`VoronoiCells.contribution` is the definition any oracle can run.
:meth:`VoronoiCells.clipped_sums` computes the same clipped per-cell sums
faster -- the assignment's distances are the relative rows' norms, and one
matrix product gives every cell's sum -- and the central oracle uses it.
Because the fast path's norms come from the distance formula
``|x|^2 - 2 x.c + |c|^2``, which carries rounding error, it clips to the
bound shrunk by a relative 1e-9, so a row never exceeds the bound the
mechanism assumes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .base import SumQuery, row_norms

__all__ = ["VoronoiCells", "nearest_center", "FLOAT_MARGIN", "projected_cells_query", "count_values", "moment_values"]

FLOAT_MARGIN = 1e-9
BLOCK_CELLS = 2**16  # (rows x cells) work arrays of 512 KiB: they stay in a core's cache (2**19 did not)


FEW_CENTERS = 16  # up to this many centers, rows find theirs in (cells x rows) scores, by a one-hot matrix


def nearest_center(
    chunk: np.ndarray, centers: np.ndarray, sq_norms: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Index of the nearest center (the first, on a tie) and the squared distance to it, for each row.  Rows
    go in blocks of ``BLOCK_CELLS`` / centers through one work array, so the scores stay in cache whatever
    the chunk's length.  Up to ``FEW_CENTERS`` centers the scores are laid out cells by rows and a row's
    center is read off the one-hot matrix of its minimum (:meth:`_Work.one_hot`, :meth:`_Work.cells`):
    numpy's argmin along rows of ten scores took 3x as long."""
    n, k = chunk.shape[0], centers.shape[0]
    if sq_norms is None:
        sq_norms = np.einsum("ij,ij->i", chunk, chunk)
    step = max(256, BLOCK_CELLS // max(k, 1))
    nearest, sq = np.empty(n, dtype=np.intp), np.empty(n)
    if 0 < k <= FEW_CENTERS:
        work = _Work(centers, min(n, step))
        for start in range(0, n, step):
            rows = slice(start, start + step)
            scores = work.scores(chunk[rows])
            best = scores.min(axis=0)
            nearest[rows] = work.cells(work.one_hot(scores, best), scores)
            np.add(best, sq_norms[rows], out=sq[rows])
        return nearest, np.maximum(sq, 0.0, out=sq)
    scaled, center_sq, work = -2.0 * centers.T, np.einsum("ij,ij->i", centers, centers), np.empty((min(n, step), k))
    for start in range(0, n, step):
        rows = slice(start, start + step)
        nearest[rows], sq[rows] = _nearest_block(chunk[rows], scaled, center_sq, sq_norms[rows], work)
    return nearest, sq


def _first_minimum(scores: np.ndarray, best: np.ndarray) -> np.ndarray:
    """``np.argmin(scores, axis=0)`` given each column's minimum ``best``: the first row that reaches it."""
    first = np.zeros(scores.shape[1], dtype=np.intp)
    for j in range(scores.shape[0] - 1, -1, -1):  # down to 0: a row tied between center 0 and another is 0's
        np.putmask(first, scores[j] == best, j)
    return first


def _nearest_block(chunk, scaled_centers_t, center_sq, sq_norms, scores) -> tuple[np.ndarray, np.ndarray]:
    n = chunk.shape[0]
    scores = np.matmul(chunk, scaled_centers_t, out=scores[:n])
    scores += center_sq
    nearest = np.argmin(scores, axis=1)
    sq = scores[np.arange(n), nearest]
    sq += sq_norms
    return nearest, np.maximum(sq, 0.0, out=sq)


@dataclass(frozen=True, eq=False)
class VoronoiCells:
    centers: np.ndarray
    radius: float | None = None
    relative: bool = False

    @property
    def n_cells(self) -> int:
        return self.centers.shape[0]

    def assign(self, chunk: np.ndarray, sq_norms: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(cell id or -1, squared distance to the nearest center) per row."""
        nearest, sq = nearest_center(chunk, self.centers, sq_norms)
        if self.radius is not None:
            nearest = np.where(sq < self.radius**2, nearest, -1)
        return nearest, sq

    def contribution(self, chunk: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        cells, _ = self.assign(chunk)
        d = chunk.shape[1]
        values = np.empty((chunk.shape[0], d + 1))
        if self.relative:
            np.subtract(chunk, self.centers[np.maximum(cells, 0)], out=values[:, :d])
        else:
            values[:, :d] = chunk
        values[:, d] = 1.0
        return cells, values

    def clipped_sums(self, chunk: np.ndarray, sq_norms: np.ndarray, sum_block, count_block) -> np.ndarray:
        """Per-cell sums of the clipped rows ``[x - c or x, 1]``: shape (n_cells, d + 1).

        ``sum_block`` and ``count_block`` are the query's blocks (``queries.base.Block``): their norm bounds.
        Rows go in blocks small enough that the (cells x rows) work arrays stay in cache, allocated once
        (:class:`_Work`); see :meth:`_block_sums` for the kernel."""
        step = max(1, min(chunk.shape[0], max(256, BLOCK_CELLS // self.n_cells)))
        work = _Work(self.centers, step)
        total = np.zeros((self.n_cells, chunk.shape[1] + 1))
        for start in range(0, chunk.shape[0], step):
            rows = slice(start, start + step)
            self._block_sums(chunk[rows], sq_norms[rows], sum_block, count_block, work, total)
        if self.relative:  # sum of w (x - c) over a cell = sum of w x - (sum of w) c
            total[:, :-1] -= work.weights[:, None] * self.centers
        return total

    def _block_sums(self, chunk, sq_norms, sum_block, count_block, work: "_Work", total: np.ndarray) -> None:
        """Add one block's clipped sums to ``total`` (relative sums without their ``- (sum of w) c``, which
        :meth:`clipped_sums` subtracts once; the weights' sums gather in ``work.weights``).

        The kernel never lists the rows' cells: with the scores s[j, i] = |c_j|^2 - 2 c_j.x_i (one matrix
        product, cells by rows), a row's nearest center is where s equals the row's minimum, so that
        comparison is the (cells x rows) one-hot matrix of the assignment (:meth:`_Work.one_hot`).  As 0/1
        floats, written over the spent scores, one product with the rows' (clipping factor, counted) pairs
        gives every cell's size and sum of factors (a factor is 0 beyond the radius), and scaled by the
        factors, one more product with the rows gives every cell's sum."""
        n = chunk.shape[0]
        scores = work.scores(chunk)
        best = scores.min(axis=0)
        onehot = work.one_hot(scores, best)
        sq = best + sq_norms
        np.maximum(sq, 0.0, out=sq)  # squared distance to the nearest center (rounding can make it negative)
        weighted = scores  # the scores are spent: the one-hot matrix as floats, then weighted, in their place
        if self.relative and sum_block.norm == "l2":
            norms = np.sqrt(sq)
        elif self.relative:  # an l1 norm about the row's own center needs the center
            norms = row_norms(chunk - self.centers[work.cells(onehot, weighted)], sum_block.norm)
        elif sum_block.norm == "l2":
            norms = np.sqrt(sq_norms)
        else:
            norms = row_norms(chunk, "l1")
        factors, counted = work.per_row[:, :n]  # each row's clipping factor, and whether it is counted
        factors[:] = sum_block.scale_to_bound(norms, FLOAT_MARGIN)
        if self.radius is not None:
            np.less(sq, self.radius**2, out=counted)
            factors *= counted
        else:
            counted.fill(1.0)
        np.copyto(weighted, onehot)
        factors_and_counts = weighted @ work.per_row[:, :n].T
        if self.relative:
            work.weights += factors_and_counts[:, 0]
        total[:, -1] += factors_and_counts[:, 1] * min(1.0, count_block.bound)
        weighted *= factors
        total[:, :-1] += weighted @ work.columns[:, :n].T


class _Work:
    """The Voronoi kernel's work arrays for blocks of up to ``rows`` rows, allocated once per chunk: the
    block's rows as columns, the (cells x rows) scores and one-hot assignment, each row's clipping factor
    and count, and the running sum of each cell's weights."""

    def __init__(self, centers: np.ndarray, rows: int):
        k, d = centers.shape
        self.scaled = -2.0 * centers
        self.center_sq = np.einsum("ij,ij->i", centers, centers)[:, None]
        self.index = np.arange(k, dtype=np.float64)
        self.columns = np.empty((d, rows))
        self._scores = np.empty(k * rows)
        self.onehot = np.empty((k, rows), dtype=bool)
        self.per_row = np.empty((2, rows))
        self.weights = np.zeros(k)

    def scores(self, chunk: np.ndarray) -> np.ndarray:
        """|c|^2 - 2 c.x for every center (row) and row of ``chunk`` (column), in the work array.  The rows
        are copied into columns first (kept in :attr:`columns` for the block's sums): BLAS multiplies
        contiguous columns in a third of the time it takes over the rows' transpose, copy included."""
        k, n = self.scaled.shape[0], chunk.shape[0]
        columns = self.columns[:, :n]
        np.copyto(columns, chunk.T)
        out = np.matmul(self.scaled, columns, out=self._scores[: k * n].reshape(k, n))
        out += self.center_sq
        return out

    def one_hot(self, scores: np.ndarray, best: np.ndarray) -> np.ndarray:
        """The (cells x rows) one-hot matrix of each row's nearest center: where its score equals the row's
        minimum ``best``.  A row tied between two centers (exactly equal scores) would sit in both: such a
        block is assigned to the first of them instead, as ``argmin`` does."""
        n = scores.shape[1]
        onehot = np.equal(scores, best, out=self.onehot[:, :n])
        if np.count_nonzero(onehot) != n:
            onehot.fill(False)
            onehot[_first_minimum(scores, best), np.arange(n)] = True
        return onehot

    def cells(self, onehot: np.ndarray, spare: np.ndarray) -> np.ndarray:
        """Each row's cell, from its column of the one-hot matrix (through ``spare``, a float array of its
        shape that may be overwritten): the cells' indices times that column, one matrix-vector product."""
        np.copyto(spare, onehot)
        return (self.index @ spare).astype(np.intp)


def count_values(chunk: np.ndarray) -> np.ndarray:
    """Value row [1]: the query counts its bucket's rows."""
    return np.ones((chunk.shape[0], 1))


def moment_values(chunk: np.ndarray) -> np.ndarray:
    """Value row [x, |x|^2, 1]: a bucket's sum, sum of squared norms and size (Dupré la Tour, Henzinger & Saulpic 2024, Lemma 2.5)."""
    d = chunk.shape[1]
    out = np.empty((chunk.shape[0], d + 2))
    out[:, :d] = chunk
    out[:, d] = np.einsum("ij,ij->i", chunk, chunk)
    out[:, d + 1] = 1.0
    return out


def projected_cells_query(label: str, project, centers: np.ndarray, blocks, values) -> SumQuery:
    """Buckets: the Voronoi cells of public ``centers`` in the space that ``project`` maps rows to
    (e.g. a JL projection); value rows: ``values(chunk)`` of the original rows."""

    def contribution(chunk):
        nearest, _ = nearest_center(project(chunk), centers)
        return nearest, values(chunk)

    return SumQuery(label=label, n_buckets=centers.shape[0], blocks=tuple(blocks), contribution=contribution)

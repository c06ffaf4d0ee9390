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


def nearest_center(
    chunk: np.ndarray, centers: np.ndarray, sq_norms: np.ndarray | None = None, scores: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Index of the nearest center and the squared distance to it, for each row (``scores``: a work array of
    at least (rows, centers) to reuse).  Without one, rows go in blocks of ``BLOCK_CELLS`` / centers through
    one work array, so the (rows x centers) scores stay in cache whatever the chunk's length."""
    n, k = chunk.shape[0], centers.shape[0]
    if sq_norms is None:
        sq_norms = np.einsum("ij,ij->i", chunk, chunk)
    step = max(256, BLOCK_CELLS // max(k, 1))
    if scores is not None or n <= step:
        return _nearest_block(chunk, -2.0 * centers.T, np.einsum("ij,ij->i", centers, centers), sq_norms, scores)
    nearest, sq = np.empty(n, dtype=np.intp), np.empty(n)
    scaled, center_sq, work = -2.0 * centers.T, np.einsum("ij,ij->i", centers, centers), np.empty((step, k))
    for start in range(0, n, step):
        rows = slice(start, start + step)
        nearest[rows], sq[rows] = _nearest_block(chunk[rows], scaled, center_sq, sq_norms[rows], work)
    return nearest, sq


def _nearest_block(chunk, scaled_centers_t, center_sq, sq_norms, scores) -> tuple[np.ndarray, np.ndarray]:
    n = chunk.shape[0]
    scores = np.matmul(chunk, scaled_centers_t, out=None if scores is None else scores[:n])
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

    def assign(
        self, chunk: np.ndarray, sq_norms: np.ndarray | None = None, scores: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """(cell id or -1, squared distance to the nearest center) per row."""
        nearest, sq = nearest_center(chunk, self.centers, sq_norms, scores)
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

        ``sum_block`` and ``count_block`` are the query's blocks (``queries.base.Block``): their norm bounds."""
        # Blocks of rows small enough that the (rows x cells) work arrays stay in cache; allocated once.
        step = max(1, min(chunk.shape[0], max(256, BLOCK_CELLS // self.n_cells)))
        work = (np.empty((step, self.n_cells)), np.empty((self.n_cells, step)))
        total = self._block_sums(chunk[:step], sq_norms[:step], sum_block, count_block, work)
        for start in range(step, chunk.shape[0], step):
            rows = slice(start, start + step)
            total += self._block_sums(chunk[rows], sq_norms[rows], sum_block, count_block, work)
        return total

    def _block_sums(self, chunk, sq_norms, sum_block, count_block, work) -> np.ndarray:
        scores, indicator = work
        cells, sq = self.assign(chunk, sq_norms, scores)
        inside = cells >= 0
        rows = np.flatnonzero(inside)
        cells = cells[rows]
        k, d = self.centers.shape
        if self.relative and sum_block.norm == "l2":
            norms = np.sqrt(sq[rows])
        elif self.relative:
            norms = row_norms(chunk[rows] - self.centers[cells], sum_block.norm)
        elif sum_block.norm == "l2":
            norms = np.sqrt(sq_norms[rows])
        else:
            norms = row_norms(chunk[rows], "l1")
        weight = sum_block.scale_to_bound(norms, FLOAT_MARGIN)
        indicator = indicator[:, : chunk.shape[0]]
        indicator.fill(0.0)
        indicator[cells, rows] = weight
        out = np.empty((k, d + 1))
        np.matmul(indicator, chunk, out=out[:, :d])
        if self.relative:
            out[:, :d] -= np.bincount(cells, weights=weight, minlength=k)[:, None] * self.centers
        out[:, d] = np.bincount(cells, minlength=k) * min(1.0, count_block.bound)
        return out


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

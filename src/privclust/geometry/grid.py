"""Integer grid cells: exact dense ids for rows of cell indices."""

from __future__ import annotations

import numpy as np

__all__ = ["dense_ids", "cell_ids"]


def dense_ids(indices: np.ndarray, radix: np.ndarray) -> np.ndarray:
    """A dense id (0, 1, ...) per distinct row of non-negative ``indices`` (column j below ``radix[j]``).

    Columns are folded into one int64 key, mixed-radix; whenever the next
    column could overflow, the keys so far are first renumbered densely, so
    the ids are exact whatever the grid's size.
    """
    ids = np.zeros(indices.shape[0], dtype=np.int64)
    bound = 1
    for j in range(indices.shape[1]):
        if bound * int(radix[j]) >= 2**62:
            _, ids = np.unique(ids, return_inverse=True)
            ids = ids.astype(np.int64).ravel()
            bound = int(ids.max()) + 1 if ids.size else 1
        ids = ids * int(radix[j]) + indices[:, j]
        bound *= int(radix[j])
    _, ids = np.unique(ids, return_inverse=True)
    return ids.astype(np.int64).ravel()


def cell_ids(points: np.ndarray, side: float, shift: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(dense cell id per point, one cell index row per id) for the grid of ``side`` offset by ``shift``."""
    cells = np.floor((points - shift) / side).astype(np.int64)
    low = cells.min(axis=0) if cells.size else np.zeros(points.shape[1], dtype=np.int64)
    shifted = cells - low
    ids = dense_ids(shifted, shifted.max(axis=0) + 1 if cells.size else np.ones(points.shape[1], dtype=np.int64))
    rows = np.empty((int(ids.max()) + 1 if ids.size else 0, points.shape[1]), dtype=np.int64)
    rows[ids] = cells
    return ids, rows

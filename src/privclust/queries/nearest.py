"""Every row's nearest center, in chunks on every core: the labelling shared by the metrics
(``privclust.metrics``), the estimator's training labels and Spark's executors (``queries.spark``).

Post-processing over rows the caller already holds: nothing here is released or charged."""

from __future__ import annotations

from typing import Callable, TypeVar

import numpy as np

from .._pages import drop_pages
from .._parallel import map_chunks
from .rows import chunk_rows_for
from .voronoi import nearest_center

__all__ = ["assign", "labels_and_cost", "map_row_chunks", "as_rows"]

T = TypeVar("T")


def map_row_chunks(X, centers: np.ndarray, fn: Callable[[slice], T]) -> list[T]:
    """``fn`` of every chunk of rows (a slice), on every core.  Each chunk is read and converted to
    float64 on its own, so a memory map of any dtype is never copied whole, and its pages are given back
    once the chunk is done (``_pages.drop_pages``), so the pass never holds the whole map either."""
    step = min(chunk_rows_for(X.shape[1]), max(256, 2**19 // max(1, len(centers))))

    def one(start: int) -> T:
        rows = slice(start, start + step)
        try:
            return fn(rows)
        finally:
            drop_pages(X, rows)

    return map_chunks(one, range(0, X.shape[0], step))


def as_rows(X) -> np.ndarray:
    return X if isinstance(X, np.ndarray) else np.asarray(X, dtype=np.float64)  # np.memmap is an ndarray


def assign(X: np.ndarray, centers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Nearest center and squared distance for every row, in chunks."""
    X = as_rows(X)
    labels = np.empty(X.shape[0], dtype=np.intp)
    sq = np.empty(X.shape[0])

    def one(rows: slice) -> None:
        labels[rows], sq[rows] = nearest_center(np.asarray(X[rows], dtype=np.float64), centers)

    map_row_chunks(X, centers, one)
    return labels, sq


def labels_and_cost(X: np.ndarray, centers: np.ndarray) -> tuple[np.ndarray, float]:
    """Nearest center of every row and the k-means cost, without an array of n squared distances.

    The labels are int32, as scikit-learn's ``KMeans.labels_`` (k is capped far below 2^31): for 10^7 rows
    that is 40 MB, where int64 labels and the squared distances of :func:`assign` take 160 MB."""
    X = as_rows(X)
    labels = np.empty(X.shape[0], dtype=np.int32)

    def one(rows: slice) -> float:
        labels[rows], sq = nearest_center(np.asarray(X[rows], dtype=np.float64), centers)
        return float(sq.sum())

    return labels, float(sum(map_row_chunks(X, centers, one)))

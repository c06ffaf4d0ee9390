"""Utility metrics, as the papers privclust implements measure them.

* NICV -- normalised intra-cluster variance: the k-means cost divided by n,
  ``(1/n) sum_i min_j ||x_i - c_j||^2`` (data scaled to [-1, 1]^d).
* AUC over epsilon -- the trapezoid-rule area under NICV(epsilon).
* Silhouette and Davies-Bouldin of the induced partition (scikit-learn's);
  following FastLloyd (Diaa, Humphries & Kerschbaum, 2024), a partition with
  fewer than two clusters scores -1 and +inf respectively.
* Centroid MSE -- after matching the k released centers one-to-one to the
  reference centers (Hungarian algorithm on squared distances), the mean over
  the k pairs of the squared Euclidean distance between matched centers.
"""

from __future__ import annotations

from typing import Callable, TypeVar

import numpy as np
from scipy.optimize import linear_sum_assignment
from sklearn import metrics as skm

from ._parallel import map_chunks
from .queries.rows import chunk_rows_for
from .queries.voronoi import nearest_center

__all__ = [
    "kmeans_cost",
    "nicv",
    "auc_over_epsilon",
    "silhouette",
    "davies_bouldin",
    "centroid_mse",
    "assign",
    "labels_and_cost",
]

T = TypeVar("T")


def _row_chunks(X, centers: np.ndarray, fn: Callable[[slice], T]) -> list[T]:
    """``fn`` of every chunk of rows (a slice), on every core.  Each chunk is read and converted to
    float64 on its own, so a memory map of any dtype is never copied whole."""
    step = min(chunk_rows_for(X.shape[1]), max(256, 2**19 // max(1, len(centers))))
    return map_chunks(lambda start: fn(slice(start, start + step)), range(0, X.shape[0], step))


def _as_rows(X) -> np.ndarray:
    return X if isinstance(X, np.ndarray) else np.asarray(X, dtype=np.float64)  # np.memmap is an ndarray


def assign(X: np.ndarray, centers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Nearest center and squared distance for every row, in chunks."""
    X = _as_rows(X)
    labels = np.empty(X.shape[0], dtype=np.intp)
    sq = np.empty(X.shape[0])

    def one(rows: slice) -> None:
        labels[rows], sq[rows] = nearest_center(np.asarray(X[rows], dtype=np.float64), centers)

    _row_chunks(X, centers, one)
    return labels, sq


def labels_and_cost(X: np.ndarray, centers: np.ndarray) -> tuple[np.ndarray, float]:
    """Nearest center of every row and the k-means cost, without an array of n squared distances.

    The labels are int32, as scikit-learn's ``KMeans.labels_`` (k is capped far below 2^31): for 10^7 rows
    that is 40 MB, where int64 labels and the squared distances of :func:`assign` take 160 MB."""
    X = _as_rows(X)
    labels = np.empty(X.shape[0], dtype=np.int32)

    def one(rows: slice) -> float:
        labels[rows], sq = nearest_center(np.asarray(X[rows], dtype=np.float64), centers)
        return float(sq.sum())

    return labels, float(sum(_row_chunks(X, centers, one)))


def kmeans_cost(
    X: np.ndarray, centers: np.ndarray, transform: Callable[[np.ndarray], np.ndarray] | None = None
) -> float:
    """Sum over rows of the squared distance to the nearest center, chunk by chunk.

    ``transform`` maps each float64 chunk first (e.g. a domain's ``to_unit``; it must not write into
    its argument, which may be a view of read-only memory-mapped rows)."""
    X, centers = _as_rows(X), np.asarray(centers, dtype=np.float64)

    def one(rows: slice) -> float:
        chunk = np.asarray(X[rows], dtype=np.float64)
        return float(nearest_center(chunk if transform is None else transform(chunk), centers)[1].sum())

    return float(sum(_row_chunks(X, centers, one)))


def nicv(X: np.ndarray, centers: np.ndarray, transform: Callable[[np.ndarray], np.ndarray] | None = None) -> float:
    """The k-means cost divided by n (NaN for no rows); ``transform`` as in :func:`kmeans_cost`."""
    X = _as_rows(X)
    return kmeans_cost(X, centers, transform) / len(X) if len(X) else float("nan")


def auc_over_epsilon(epsilons, values) -> float:
    """Trapezoid area under values(epsilon), epsilons sorted ascending."""
    eps = np.asarray(epsilons, dtype=float)
    vals = np.asarray(values, dtype=float)
    order = np.argsort(eps)
    eps, vals = eps[order], vals[order]
    return float(np.sum((eps[1:] - eps[:-1]) * (vals[1:] + vals[:-1]) / 2.0))


def silhouette(X: np.ndarray, centers: np.ndarray, sample_size: int | None = 5000, random_state: int = 0) -> float:
    """Silhouette of the induced partition, on a random sample of rows when X is large."""
    if sample_size is not None and len(X) > sample_size:
        rows = np.random.default_rng(random_state).choice(len(X), size=sample_size, replace=False)
        X = X[rows]
    labels = assign(X, centers)[0]
    if not 2 <= np.unique(labels).size < len(X):
        return -1.0
    return float(skm.silhouette_score(X, labels))


def davies_bouldin(X: np.ndarray, centers: np.ndarray) -> float:
    labels = assign(X, centers)[0]
    if np.unique(labels).size < 2:
        return float("inf")
    return float(skm.davies_bouldin_score(X, labels))


def centroid_mse(centers: np.ndarray, reference: np.ndarray) -> float:
    centers, reference = np.asarray(centers, float), np.asarray(reference, float)
    if centers.shape != reference.shape:
        raise ValueError(f"shapes differ: {centers.shape} vs {reference.shape}")
    cost = ((centers[:, None, :] - reference[None, :, :]) ** 2).sum(-1)
    rows, cols = linear_sum_assignment(cost)
    return float(cost[rows, cols].mean())

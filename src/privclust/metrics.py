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

from typing import Callable

import numpy as np
from scipy.optimize import linear_sum_assignment
from sklearn import metrics as skm

from .queries.nearest import as_rows, assign, labels_and_cost, map_row_chunks
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


def kmeans_cost(
    X: np.ndarray, centers: np.ndarray, transform: Callable[[np.ndarray], np.ndarray] | None = None
) -> float:
    """Sum over rows of the squared distance to the nearest center, chunk by chunk.

    ``transform`` maps each float64 chunk first (e.g. a domain's ``to_unit``; it must not write into
    its argument, which may be a view of read-only memory-mapped rows)."""
    X, centers = as_rows(X), np.asarray(centers, dtype=np.float64)

    def one(rows: slice) -> float:
        chunk = np.asarray(X[rows], dtype=np.float64)
        return float(nearest_center(chunk if transform is None else transform(chunk), centers)[1].sum())

    return float(sum(map_row_chunks(X, centers, one)))


def nicv(X: np.ndarray, centers: np.ndarray, transform: Callable[[np.ndarray], np.ndarray] | None = None) -> float:
    """The k-means cost divided by n (NaN for no rows); ``transform`` as in :func:`kmeans_cost`."""
    X = as_rows(X)
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

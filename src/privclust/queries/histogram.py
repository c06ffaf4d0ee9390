"""Per-feature histograms of the input's own coordinates: the queries that find a private domain.

A :class:`HistogramQuery` declares only what is public: its ``n_buckets`` and a
``bucket`` function that maps a chunk of rows to one bucket index per row and
feature -- ``(m, d)`` integers in ``[0, n_buckets)``.  It reads the rows in the
input's own coordinates (checked, at user level the kept rows, but not mapped
into a unit box: a domain is what these queries find), so no domain is needed
to answer it.  Its exact answer is the ``(d, n_buckets)`` counts, one histogram
per feature (:func:`histogram_counts`); where the rows live
(``Rows.histograms``) computes them, and the oracle noises them
(``queries.central``).  Only an oracle offering ``HISTOGRAMS`` answers it.

It is not a :class:`~privclust.queries.base.SumQuery`: it has no blocks to
clip, no sparse listing and no narrowing, and it reads the rows before any
domain maps them.  What a plan releases is a :data:`Query` -- either kind:
``Plan.release`` takes both, refuses a histogram at an oracle without
``HISTOGRAMS`` before drawing anything, and never reduces one
(``Plan.release_reduced``); the oracle answers a batch of histograms apart
from unit-box sums (``CentralOracle.answer``).

Privacy argument: a row falls in exactly one bucket of each feature's
histogram, so adding or removing it changes d counts by one each: the d
histograms together have l2 sensitivity sqrt(d) and l1 sensitivity d
(``l2_bound``, ``l1_bound``); a user's m rows change them by at most m times
that (triangle inequality).  One Gaussian (or Laplace) mechanism calibrated
for these sensitivities over the whole ``(d, n_buckets)`` array makes the
release DP, and anything computed from the noisy counts is post-processing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Union

import numpy as np

from .base import SumQuery

__all__ = ["HistogramQuery", "Query", "histogram_counts", "COUNTS"]

COUNTS = "counts"  # the name of a histogram release's one value array (``Released.values``)


@dataclass(frozen=True)
class HistogramQuery:
    """Per-feature counts of a public bucketing of the rows, in the input's own coordinates (see the module
    docstring).  ``bucket(rows)`` takes an ``(m, d)`` float64 chunk and returns ``(m, d)`` bucket indices."""

    label: str
    n_features: int
    n_buckets: int
    bucket: Callable[[np.ndarray], np.ndarray]

    def __post_init__(self):
        if self.n_features < 1 or self.n_buckets < 1:
            raise ValueError(f"histogram {self.label!r} needs at least one feature and one bucket")

    @property
    def l2_bound(self) -> float:
        """The l2 sensitivity of the counts: one row moves one count in each of the d histograms."""
        return math.sqrt(self.n_features)

    @property
    def l1_bound(self) -> float:
        """The l1 sensitivity of the counts (d)."""
        return float(self.n_features)


Query = Union[SumQuery, HistogramQuery]  # what a plan releases: noisy sums of the unit box, or histograms


def histogram_counts(query: HistogramQuery, rows: np.ndarray) -> np.ndarray:
    """Exact ``(d, n_buckets)`` counts of one chunk of rows (input coordinates), one bincount for every
    feature at once.  A bucket function that leaves its range is a bug, refused without naming a value."""
    d, buckets = query.n_features, query.n_buckets
    index = np.asarray(query.bucket(rows), dtype=np.int64)
    if index.shape != (rows.shape[0], d):
        raise ValueError(f"histogram {query.label!r}: the bucket function must give one index per row and feature")
    if index.size and (index.min() < 0 or index.max() >= buckets):
        raise ValueError(f"histogram {query.label!r}: a bucket index out of range for {buckets} buckets")
    flat = (index + buckets * np.arange(d)).ravel()
    return np.bincount(flat, minlength=d * buckets).reshape(d, buckets).astype(np.float64)

"""Summary statistics shared by the benchmark reports."""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

__all__ = ["mean_ci", "median_range", "loglog_slope"]


def mean_ci(values, level: float = 0.95) -> tuple[float, float, float]:
    """(mean, lower, upper) of a Student-t confidence interval for the mean."""
    v = np.asarray([x for x in values if math.isfinite(x)], dtype=float)
    if v.size == 0:
        return math.nan, math.nan, math.nan
    mean = float(v.mean())
    if v.size < 2:
        return mean, mean, mean
    half = float(stats.t.ppf(0.5 + level / 2, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size))
    return mean, mean - half, mean + half


def median_range(values) -> tuple[float, float, float]:
    """(median, min, max) of the finite values; NaNs when there are none."""
    v = np.asarray([x for x in values if math.isfinite(x)], dtype=float)
    if v.size == 0:
        return math.nan, math.nan, math.nan
    return float(np.median(v)), float(v.min()), float(v.max())


def loglog_slope(x, y) -> float:
    """Least-squares growth exponent b in y ~ a * x^b."""
    x, y = np.log(np.asarray(x, float)), np.log(np.asarray(y, float))
    if x.size < 2:
        return math.nan
    return float(np.polyfit(x, y, 1)[0])

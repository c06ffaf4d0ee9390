"""Data-independent initial centers: Su et al.'s sphere packing.

Find (by binary search) the largest radius ``a`` such that ``k`` points can
be drawn uniformly at random, each at least ``a`` from the walls of
[-1, 1]^d and at least ``2a`` from every point drawn before it, allowing
``tries`` draws per point.  No data is read, so it costs no privacy.
"""

from __future__ import annotations

import numpy as np

__all__ = ["sphere_packing"]


def _place(k: int, d: int, a: float, rng: np.random.Generator, tries: int) -> np.ndarray | None:
    centers = np.empty((k, d))
    for j in range(k):
        # One candidate first (it usually fits), then the remaining tries at once.
        for batch in (1, tries - 1):
            cand = rng.uniform(-1.0 + a, 1.0 - a, size=(batch, d))
            if j == 0:
                centers[0] = cand[0]
                break
            placed = centers[:j]
            sq = (cand * cand).sum(1)[:, None] - 2.0 * cand @ placed.T + (placed * placed).sum(1)[None, :]
            ok = np.flatnonzero(sq.min(axis=1) >= (2.0 * a) ** 2)
            if ok.size:
                centers[j] = cand[ok[0]]
                break
        else:
            return None
    return centers


def sphere_packing(k: int, d: int, rng: np.random.Generator, tries: int = 100, steps: int = 16) -> np.ndarray:
    """``k`` well-spread initial centers in [-1, 1]^d."""
    if k < 1 or d < 1:
        raise ValueError("sphere packing needs k >= 1 and d >= 1")
    lo, hi = 0.0, 1.0
    best = _place(k, d, 0.0, rng, tries)
    for _ in range(steps):
        mid = (lo + hi) / 2.0
        centers = _place(k, d, mid, rng, tries)
        if centers is None:
            hi = mid
        else:
            lo, best = mid, centers
    return best

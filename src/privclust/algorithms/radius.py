"""FastLloyd's step geometry (seed 003): the radius of its relative updates and the split of each
iteration's noise between sums and counts -- shared by FastLloyd, the greedy's lifting and maxcover."""

from __future__ import annotations

import math

from .params import DEFAULT_ALPHA

__all__ = ["fastlloyd_eta", "fastlloyd_shares"]


def fastlloyd_eta(d: int, k: int, alpha: float = DEFAULT_ALPHA) -> float:
    """FastLloyd's radius: alpha times half the unit box's diagonal over k^(1/d), at most the diagonal."""
    beta = 2.0 * math.sqrt(d)
    return min(alpha * beta / (2.0 * k ** (1.0 / d)), beta)


def fastlloyd_shares(d: int) -> tuple[float, float]:
    """The seed's split of one iteration's mu^2 between relative sums and counts (eq. 7):
    sigma_R = sigma sqrt(1 + sqrt(4d)) / (4d)^(1/4) and sigma_C = sigma sqrt(1 + sqrt(4d)),
    i.e. shares sqrt(4d) / (1 + sqrt(4d)) and 1 / (1 + sqrt(4d)) of mu^2."""
    spread = 1.0 + math.sqrt(4.0 * d)
    return math.sqrt(4.0 * d) / spread, 1.0 / spread

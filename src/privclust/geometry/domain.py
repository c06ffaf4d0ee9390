"""The declared data domain and the normalised space the algorithms work in.

Every algorithm works in the unit box ``[-1, 1]^d`` (the seeds' convention:
data scaled to [-1, 1]).  A :class:`Domain` maps raw rows into it and maps
centers back.  It is built from the user's *declared* bounds -- never from the
data -- so the map is public and costs no privacy.  Rows outside the declared
bounds are clipped to them (box bounds: per coordinate; radius bounds:
projected onto the ball), which is what keeps every sensitivity bound true.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

__all__ = ["Domain", "BoxDomain", "BallDomain", "make_domain", "fold", "PrivacyLeakWarning"]


class PrivacyLeakWarning(UserWarning):
    """The requested operation weakens or voids the differential-privacy guarantee."""


class Domain:
    n_features: int
    extent: float

    def to_unit(self, rows: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def from_unit(self, points: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError


@dataclass(frozen=True)
class BoxDomain(Domain):
    """Per-feature bounds ``lower <= x <= upper``, mapped affinely onto [-1, 1]^d."""

    lower: np.ndarray
    upper: np.ndarray

    @property
    def n_features(self) -> int:
        return self.lower.shape[0]

    def __post_init__(self):
        object.__setattr__(self, "_scale", 2.0 / (self.upper - self.lower))
        object.__setattr__(self, "_offset", -1.0 - self.lower * self._scale)
        object.__setattr__(self, "_is_unit", bool(np.all(self.lower == -1.0) and np.all(self.upper == 1.0)))

    def to_unit(self, rows):
        if self._is_unit and rows.size and rows.min() >= -1.0 and rows.max() <= 1.0:
            return rows  # already in the unit box: clipping would change nothing, skip the copy
        rows = np.clip(rows, self.lower, self.upper)
        if not self._is_unit:
            rows *= self._scale
            rows += self._offset
        return rows

    def from_unit(self, points):
        points = np.clip(points, -1.0, 1.0)
        return self.lower + (points + 1.0) * ((self.upper - self.lower) / 2.0)  # halve first: width * 2 may overflow

    @property
    def length_scale(self) -> float:
        """The largest stretch of a unit-box length back to data units (exact for equal-width features)."""
        return float(np.max((self.upper - self.lower) / 2.0))

    @property
    def extent(self) -> float:
        """The largest absolute coordinate the domain allows."""
        return float(max(np.abs(self.lower).max(), np.abs(self.upper).max()))

    def describe(self) -> str:
        if np.all(self.lower == self.lower[0]) and np.all(self.upper == self.upper[0]):
            return f"box [{self.lower[0]:g}, {self.upper[0]:g}]^{self.n_features}"
        return f"box with per-feature bounds ({self.n_features} features)"


@dataclass(frozen=True)
class BallDomain(Domain):
    """The ball of radius ``radius`` about the origin, mapped onto the unit ball."""

    radius: float
    dims: int

    @property
    def n_features(self) -> int:
        return self.dims

    def to_unit(self, rows):
        # Clip each coordinate to the radius first (a point of the ball has none beyond it): still a public
        # map into the ball, and a huge coordinate can no longer overflow into inf, a warning and NaNs.
        rows = np.clip(rows, -self.radius, self.radius) / self.radius
        norms = np.sqrt(np.einsum("ij,ij->i", rows, rows))
        outside = norms > 1.0
        if np.any(outside):
            rows[outside] /= norms[outside, None]
        return rows

    def from_unit(self, points):
        points = np.array(points, dtype=np.float64)
        norms = np.linalg.norm(points, axis=1)
        outside = norms > 1.0
        points[outside] /= norms[outside, None]
        return points * self.radius

    @property
    def length_scale(self) -> float:
        return float(self.radius)

    @property
    def extent(self) -> float:
        return float(self.radius)

    def describe(self) -> str:
        return f"ball of radius {self.radius:g} in R^{self.dims}"


def _finite_float(value, what: str) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a number, got {value!r}") from None
    if not np.isfinite(out):
        raise ValueError(f"{what} must be finite, got {value!r}")
    return out


def make_domain(bounds, n_features: int, data: np.ndarray | None = None) -> Domain:
    """Build the domain from declared ``bounds``.

    Accepted forms: ``(lower, upper)`` scalars for every feature; a sequence of
    ``n_features`` pairs, or a ``(n_features, 2)`` array; a positive number
    ``R`` for the ball of radius R about the origin; ``{"radius": R}``.  The
    string ``"data"`` derives a box from ``data`` itself, which breaks the
    privacy guarantee and warns with :class:`PrivacyLeakWarning`.
    """
    if bounds is None:
        raise ValueError(
            "bounds are required: declare the data domain without looking at the data, e.g. "
            "bounds=(0, 1) for every feature, bounds=[(lo1, hi1), ...] per feature, or bounds=R "
            "for the ball of radius R. Deriving them from the data leaks it; pass bounds='data' "
            "only if you accept that the result is then not differentially private."
        )
    if isinstance(bounds, str):
        if bounds != "data":
            raise ValueError(f"unknown bounds {bounds!r}: the only string accepted is 'data'")
        if data is None:
            raise ValueError("bounds='data' needs the data")
        warnings.warn(
            "bounds='data' reads the domain off the private data: the result is NOT differentially "
            "private. Declare public bounds instead.",
            PrivacyLeakWarning,
            stacklevel=3,
        )
        lower, upper = np.min(data, axis=0).astype(float), np.max(data, axis=0).astype(float)
        flat = upper <= lower
        upper[flat] = lower[flat] + 1.0
        return BoxDomain(lower, upper)
    if isinstance(bounds, dict):
        if set(bounds) != {"radius"}:
            raise ValueError(f"bounds as a dict must be {{'radius': R}}, got keys {sorted(bounds)}")
        bounds = bounds["radius"]
    if np.ndim(bounds) == 0:
        radius = _finite_float(bounds, "the bounds radius")
        if radius <= 0:
            raise ValueError(f"the bounds radius must be positive, got {radius}")
        return BallDomain(radius, n_features)
    try:
        arr = np.asarray(bounds, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"bounds must be numbers, got {bounds!r}") from None
    if arr.shape == (2,):
        lower, upper = np.full(n_features, arr[0]), np.full(n_features, arr[1])
    elif arr.shape == (n_features, 2):
        lower, upper = arr[:, 0].copy(), arr[:, 1].copy()
    else:
        raise ValueError(
            f"bounds of shape {arr.shape} do not fit data with {n_features} features: give (lower, "
            f"upper), {n_features} (lower, upper) pairs, or a radius"
        )
    if not np.all(np.isfinite(arr)):
        raise ValueError("bounds must be finite")
    if np.any(upper <= lower):
        bad = int(np.flatnonzero(upper <= lower)[0])
        raise ValueError(f"bounds for feature {bad} are empty: lower {lower[bad]} >= upper {upper[bad]}")
    with np.errstate(over="ignore"):
        too_wide = ~np.isfinite(upper - lower)
    if np.any(too_wide):
        bad = int(np.flatnonzero(too_wide)[0])
        raise ValueError(
            f"bounds for feature {bad} are too wide to represent ({lower[bad]:g} to {upper[bad]:g}): "
            "rescale the data or declare narrower bounds"
        )
    return BoxDomain(lower, upper)


def fold(points: np.ndarray, bound: float = 1.0) -> np.ndarray:
    """Reflect values back into [-bound, bound] (FastLloyd's folding post-processing).

    Reflection at both walls is periodic with period 4*bound; distances to the
    nearest wall are preserved.
    """
    shifted = np.mod(points + bound, 4.0 * bound)
    shifted = np.where(shifted > 2.0 * bound, 4.0 * bound - shifted, shifted)
    return shifted - bound

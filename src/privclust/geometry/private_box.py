"""A private data domain: a per-feature box that holds nearly all rows, found from noisy histograms.

Every sum privclust releases is clipped to the domain and its noise scales with
the domain's width, so a fit needs bounds -- and bounds much looser than the
data cost accuracy (docs/choosing.md, "A private domain").  A box is found
privately, in three releases of noisy counts, each a histogram per feature
(nothing else about the rows is read).  This module is its public geometry -- the
bucketings of a row's coordinates -- and the post-processing of the noisy counts;
``private_domain`` is the stage that releases them: a plan like any
other, whose three histogram queries the fit's own central oracle answers
(counting where the rows live -- memory, memory map, Spark; at user level the
kept rows -- and drawing the noise).  A row falls in one
bucket per feature, so the d histograms of a release together have l2
sensitivity sqrt(d) (add/remove one row): Gaussian noise in GDP, or Laplace with
l1 sensitivity d when ``delta = 0`` (at user level, m times both:
``privacy.unit``); ``STAGE_SHARES`` splits the budget (in mu^2, or epsilon).

1. **Magnitudes** -- buckets of ``OCTAVES`` octaves of |x| from 2^MIN_EXPONENT
   to 2^MAX_EXPONENT (the whole range of doubles; 1e300 and beyond) plus a zero
   bucket, closed above (1.0 lies in (1/16, 1]); the exponent comes from
   ``frexp``, so nothing overflows.  The heaviest noisy bucket, or pair of
   adjacent buckets, must stand out of the noise (an empty one does with
   probability ``FALSE_BUCKET`` over all of them; if none does the stage
   refuses with :class:`NoScaleFound`, the spend recorded); the scale ``M`` is
   the top of the highest bucket above it that holds data (the next one at
   ``NEXT_Z`` noise deviations, up to ``WINDOW`` further at the
   ``FALSE_BUCKET`` threshold).
2. **Octaves** -- x by sign and octave: one bucket for each of the ``FINE``
   octaves below ``M`` on either side of 0, and one for |x| below them
   (``SIGNED`` buckets).  The scale comes down past the top octaves of |x|
   while they are confidently nearly empty (both signs' noisy counts plus
   ``DROP_Z`` deviations within ``DROP_SHARE`` of the feature's noisy total);
   then a side of 0 that is confidently nearly empty (within ``DROP_SHARE`` / 2)
   is dropped, with the empty octaves nearest 0 on the other side (data in
   [100, 110] get [64, 128], not [-128, 128]).  The box is within an outer
   limit when one is given.
3. **Edges** -- ``LINEAR_BINS`` equal bins over that box: each edge moves inward
   past bins that are confidently nearly empty (within ``CLIP_SHARE``).  This
   tightens boxes of data far from the origin when there are enough rows.

Every choice is post-processing of the noisy counts and of public values; each
release is recorded by the oracle (labels ``DOMAIN_LABELS``) as it is made, in the
box's own ledger under the fit's.  A feature whose rows
are all equal still gets a box of positive width (at least ``MIN_WIDTH``
relative to its scale, and 2^(MIN_EXPONENT + 1)); the box stays inside
``[-2^1020, 2^1020]``, so its width is a finite double.  Non-finite input is refused before any release,
by the rows that check every input (``privclust._validation.check_data``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy.special import ndtri

from .._validation import positive_finite
from ..privacy.budget import Spend

__all__ = [
    "PrivateBox",
    "DOMAIN_SHARE",
    "DOMAIN_LABELS",
    "STAGE_SHARES",
    "is_private_domain_request",
    "parse_request",
    "NoScaleFound",
    "NO_BUDGET_FOR_A_BOX",
    "magnitude_buckets",
    "signed_octave_buckets",
    "linear_buckets",
    "exponents",
    "outer_limit",
    "found_scales",
    "lowered_scales",
    "signed_box",
    "within_outer",
    "edge_box",
]

OCTAVES = 4  # octaves per magnitude bucket g >= 1: (2^(MIN_EXPONENT + 4(g-1)), 2^(MIN_EXPONENT + 4g)]
MIN_EXPONENT, MAX_EXPONENT = -1020, 1020  # up to 2^MIN_EXPONENT is "zero"; beyond 2^MAX_EXPONENT counts in the top
N_BUCKETS = (MAX_EXPONENT - MIN_EXPONENT) // OCTAVES + 1  # the zero bucket (index 0), then one per OCTAVES octaves
LINEAR_BINS = 32
NEXT_Z = 3.0  # noise deviations the bucket just above the heaviest must reach to widen the scale to it
WINDOW = 4  # the scale is looked for at most this many buckets above the heaviest noisy bucket
FALSE_BUCKET = 1e-3  # the chance that an empty bucket or margin is taken for data, over all the candidates
STAGE_SHARES = (0.5, 0.35, 0.15)  # shares of the box's mu^2 (or epsilon): magnitudes, octaves, edges
FINE = 8  # the octaves below the scale that the second release looks at, one bucket each, on each side of 0
SIGNED = 2 * FINE + 1  # the second release's buckets per feature: FINE negative octaves, |x| below them, FINE positive
DROP_Z = 1.0  # deviations of noise added to an octave's noisy count before it is called nearly empty
DROP_SHARE = 0.1  # the scale comes down past octaves holding at most this share of the rows (noisy); half of it a side
DOMAIN_SHARE = 0.1  # default share of a fit's (epsilon, delta) the algorithm leaves to the box (docs/choosing.md)
CLIP_SHARE = 0.01  # the edges clip at most about this share of a feature's rows (by its noisy total), per side
EDGE_Z = 2.0  # noise deviations a margin's noisy count must clear to be called nearly empty
MIN_WIDTH = 2.0**-20  # a feature's box is never narrower than this, relative to its scale
CAP = 2.0**MAX_EXPONENT  # the box stays inside [-CAP, CAP]: its width is then a finite double
DOMAIN_LABELS = ("domain: magnitudes", "domain: octaves", "domain: edges")


@dataclass(frozen=True)
class PrivateBox:
    """The box found by :func:`private_bounds`: per-feature ``lower`` and ``upper``, and what it cost.

    Unpacks as ``lower, upper = private_bounds(...)``."""

    lower: np.ndarray
    upper: np.ndarray
    epsilon: float
    delta: float
    steps: list[Spend] = field(default_factory=list)
    outer: tuple[np.ndarray, np.ndarray] | None = None

    def __iter__(self):
        return iter((self.lower, self.upper))

    def as_dict(self) -> dict:
        """What the box is and what it cost, for ``fit_info_["domain"]`` and the CLI (all public)."""
        out = {
            "lower": self.lower.tolist(),
            "upper": self.upper.tolist(),
            "epsilon": self.epsilon,
            "delta": self.delta,
            "steps": [s.as_dict() for s in self.steps],
        }
        if self.outer is not None:
            out["outer"] = {"lower": self.outer[0].tolist(), "upper": self.outer[1].tolist()}
        return out

    def describe(self) -> str:
        lo, hi = self.lower, self.upper
        if np.all(lo == lo[0]) and np.all(hi == hi[0]):
            box = f"[{lo[0]:.4g}, {hi[0]:.4g}]^{lo.size}"
        else:
            box = "per feature " + ", ".join(f"[{a:.4g}, {b:.4g}]" for a, b in zip(lo, hi))
        within = "" if self.outer is None else " within the declared outer limit"
        return f"private box {box}{within}, found for (epsilon={self.epsilon:.3g}, delta={self.delta:.3g})"


def _tail(family: str, std: float, candidates: int) -> float:
    """A count that one noise draw (of standard deviation ``std``) exceeds with probability at most
    FALSE_BUCKET / candidates."""
    p = FALSE_BUCKET / max(candidates, 1)
    if family == "gaussian":
        return float(std * ndtri(1.0 - p))
    return float(std / math.sqrt(2.0) * math.log(1.0 / (2.0 * p)))  # Laplace(b), std b sqrt(2): P(X > t) = e^(-t/b) / 2


def exponents(mag: np.ndarray) -> np.ndarray:
    """The least integer k with mag <= 2^k, from frexp (no 2^k is formed: 1e300 does not overflow)."""
    frac, exp = np.frexp(mag)  # mag = frac 2^exp, frac in [0.5, 1)
    return exp.astype(np.int64) - (frac == 0.5)


# The three bucketings: public functions of a row and of public values (an outer limit, earlier releases),
# that the box's histogram queries count (``private_domain``); module functions, so Spark can ship them.


def magnitude_buckets(rows: np.ndarray, outer_hi: np.ndarray) -> np.ndarray:
    """|x| per octave group (bucket 0: |x| <= 2^MIN_EXPONENT); an outer limit caps the magnitude."""
    mag = np.minimum(np.abs(rows), outer_hi)
    group = -((MIN_EXPONENT - exponents(mag)) // OCTAVES)  # ceil((k - MIN_EXPONENT) / OCTAVES)
    return np.where(mag <= 2.0**MIN_EXPONENT, 0, np.clip(group, 1, N_BUCKETS - 1))


def signed_octave_buckets(rows: np.ndarray, outer_lo: np.ndarray, outer_hi: np.ndarray, top: np.ndarray) -> np.ndarray:
    """x (within the outer limit) by sign and octave below 2^top (per feature; beyond it in the outermost):
    bucket FINE + e for x in (2^(top-FINE+e-1), 2^(top-FINE+e)], FINE - e for -x there (e = 1 .. FINE), and
    bucket FINE for |x| <= 2^(top - FINE)."""
    x = np.clip(rows, outer_lo, outer_hi)
    octave = np.clip(exponents(np.abs(x)) - (top - FINE), 0, FINE)
    octave[x == 0] = 0
    return FINE + np.sign(x).astype(np.int64) * octave


def linear_buckets(rows: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The rows clipped to [lo, hi], in LINEAR_BINS equal bins."""
    half = (hi - lo) / 2.0  # halve first: hi - lo may not be representable
    unit = (np.clip(rows, lo, hi) - lo) / 2.0 / half  # in [0, 1]
    return np.minimum((unit * LINEAR_BINS).astype(np.int64), LINEAR_BINS - 1)


class NoScaleFound(ValueError):
    """No magnitude bucket of a feature stood out of the noise: the budget or the rows are too few."""


def _scale(noisy: np.ndarray, std: float, z_found: float, z_top: float) -> float | None:
    """A feature's scale M (post-processing of its noisy magnitude histogram), or None.

    The heaviest bucket or pair of adjacent buckets (rows near a bucket's edge split between two; a
    pair's noise is sqrt(2) times one's), in noise deviations, must reach ``z_found`` -- which an empty
    bucket or pair does with probability FALSE_BUCKET over all of them.  M is then the top edge of the
    largest bucket above it that holds data: the next one if it reaches NEXT_Z deviations, any of the
    WINDOW buckets above if it reaches ``z_top``."""
    pairs = np.concatenate([[-np.inf], (noisy[:-1] + noisy[1:]) / math.sqrt(2.0)])  # pair (b-1, b) at b
    score = np.maximum(noisy, pairs) / std
    heaviest = int(np.argmax(score))
    if score[heaviest] < z_found:
        return None
    index = heaviest  # the top of the heaviest bucket or pair
    # the next bucket up on a low bar (a third of the rows past a bucket edge is still far from the threshold
    # of a small data set; clipping them costs more than a box up to 16x wide), those further up on z_top
    if index + 1 < noisy.size and noisy[index + 1] >= NEXT_Z * std:
        index += 1
    top = min(heaviest + WINDOW, noisy.size - 1)
    above = np.flatnonzero(noisy[index + 1 : top + 1] >= z_top * std)
    if above.size:
        index += 1 + int(above[-1])
    if index == 0:  # the zero bucket: every row is (nearly) 0
        return 2.0**MIN_EXPONENT
    return min(math.ldexp(1.0, index * OCTAVES + MIN_EXPONENT), CAP)


def _edges(noisy: np.ndarray, std: float, lo: float, hi: float) -> tuple[float, float]:
    """The box within [lo, hi] (post-processing): each edge moves inward past the outer bins while they
    are confidently nearly empty -- their noisy count plus EDGE_Z noise deviations of that sum stays
    within CLIP_SHARE of the feature's noisy total.  Where the noise is too large to tell, the edge stays."""
    m = noisy.size
    allowed = CLIP_SHARE * max(float(noisy.sum()), 0.0)
    slack = EDGE_Z * std * np.sqrt(np.arange(1, m + 1))

    def margin(counts: np.ndarray) -> int:
        empty = np.cumsum(counts) + slack <= allowed
        return int(np.argmin(empty)) if not np.all(empty) else m  # bins confidently nearly empty

    first, last = margin(noisy), m - 1 - margin(noisy[::-1])
    if last < first:
        first, last = 0, m - 1
    step = (hi - lo) / 2.0 / m  # of a bin, halved (see _linear_counts)
    return lo + 2.0 * step * first, lo + 2.0 * step * (last + 1)


def outer_limit(outer, d: int) -> tuple[np.ndarray, np.ndarray] | None:
    if outer is None:
        return None
    from .domain import BallDomain, make_domain

    domain = make_domain(outer, d)
    if isinstance(domain, BallDomain):  # a ball's bounding box
        return np.full(d, -domain.radius), np.full(d, domain.radius)
    return np.asarray(domain.lower, dtype=np.float64), np.asarray(domain.upper, dtype=np.float64)


def found_scales(noisy: np.ndarray, std: float, family: str) -> list[float | None]:
    """Each feature's scale M from its noisy magnitude histogram (``noisy``: (d, N_BUCKETS), noise of
    standard deviation ``std`` from ``family``), or None where no bucket stands out of the noise."""
    d = noisy.shape[0]
    z_found = _tail(family, std, 2 * d * N_BUCKETS) / std
    z_top = _tail(family, std, d * (WINDOW + 1)) / std
    return [_scale(noisy[j], std, z_found, z_top) for j in range(d)]


def _signed_edge(bucket: int, top: int, side: int) -> float:
    """The lower (``side`` -1) or upper (+1) edge of a signed octave bucket (:func:`signed_octave_buckets`)."""
    e = bucket - FINE
    if e == 0:
        return side * math.ldexp(1.0, top - FINE)
    # the far edge of octave |e| on x's side is 2^(top-FINE+|e|), the near one half that
    far = e * side > 0
    return math.copysign(math.ldexp(1.0, top - FINE + abs(e) - (0 if far else 1)), e)


def lowered_scales(magnitudes: np.ndarray, std: float, scale: np.ndarray, top: np.ndarray) -> np.ndarray:
    """The scales brought down past the top octaves that the noisy octave counts of |x| (``magnitudes``:
    (d, FINE + 1), below ``2^top``, bucket 0 at or below 2^(top - FINE)) say are confidently nearly empty:
    their noisy count plus DROP_Z deviations of that sum's noise (``std`` a bucket) within DROP_SHARE of the
    feature's noisy total."""
    scale = scale.copy()
    for j in range(magnitudes.shape[0]):
        beyond = np.cumsum(magnitudes[j, :0:-1])  # octaves top, top-1, ..., top-FINE+1
        allowed = DROP_SHARE * max(float(magnitudes[j].sum()), 0.0)
        empty = beyond + DROP_Z * std * np.sqrt(np.arange(1, FINE + 1)) <= allowed
        dropped = FINE - 1 if np.all(empty[: FINE - 1]) else int(np.argmin(empty))
        scale[j] = min(scale[j], max(math.ldexp(1.0, int(top[j]) - dropped), 2.0**MIN_EXPONENT))
    return scale


def signed_box(
    noisy: np.ndarray, std: float, scale: np.ndarray, top: np.ndarray, family: str = "gaussian"
) -> tuple[np.ndarray, np.ndarray]:
    """Each feature's box from its noisy signed octave counts (``noisy``: (d, SIGNED), below ``2^top``).

    The scale first comes down as the octaves of |x| say (:func:`lowered_scales`; both signs' counts of an
    octave added, their noise sqrt(2) times a bucket's).  Then a side of 0 with no rows to speak of is
    dropped: walking in from that side's outermost bucket, an edge moves past the buckets that are both
    indistinguishable from empty (below the count an empty bucket's noise reaches with probability
    FALSE_BUCKET over all of them) and, summed, confidently nearly empty (their noisy counts plus DROP_Z
    deviations within DROP_SHARE / 2 of the feature's noisy total).  The edge moves only if that walk
    crosses 0 (the bucket of |x| <= 2^(top - FINE)); it then stops at the first bucket on the other side
    that holds data.  Data on both sides of 0 keep the symmetric box: a sparse tail on one side (Adult's
    capital gain) is kept, since its rows would be moved by about the box's width."""
    magnitudes = np.concatenate([noisy[:, FINE : FINE + 1], noisy[:, FINE + 1 :] + noisy[:, FINE - 1 :: -1]], axis=1)
    scale = lowered_scales(magnitudes, std * math.sqrt(2.0), scale, top)
    lo, hi = -scale, scale.copy()
    slack = DROP_Z * std * np.sqrt(np.arange(1, SIGNED + 1))
    holds_data = _tail(family, std, noisy.size)

    def passed(counts: np.ndarray, allowed: float) -> int:
        empty = (np.cumsum(counts) + slack <= allowed) & (np.maximum.accumulate(counts) < holds_data)
        return SIGNED if np.all(empty) else int(np.argmin(empty))

    for j in range(noisy.shape[0]):
        allowed = DROP_SHARE / 2.0 * max(float(noisy[j].sum()), 0.0)
        first, last = passed(noisy[j], allowed), SIGNED - 1 - passed(noisy[j, ::-1], allowed)
        if last < first:  # the noise: both sides look empty
            continue
        t = int(top[j])
        if first > FINE:  # no negative rows to speak of: the box starts above 0
            lo[j] = min(_signed_edge(first, t, -1), hi[j] / 2.0)
        if last < FINE:  # no positive rows to speak of
            hi[j] = max(_signed_edge(last, t, 1), lo[j] / 2.0)
    return lo, hi


def within_outer(lo: np.ndarray, hi: np.ndarray, outer_box) -> tuple[np.ndarray, np.ndarray]:
    """``[lo, hi]`` per feature, within the outer limit if one is given (where the two do not meet, the outer
    box)."""
    lo, hi = lo.copy(), hi.copy()
    if outer_box is not None:
        lo, hi = np.maximum(lo, outer_box[0]), np.minimum(hi, outer_box[1])
        empty = hi <= lo
        lo[empty], hi[empty] = outer_box[0][empty], outer_box[1][empty]
    return lo, hi


def edge_box(noisy: np.ndarray, std: float, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The box within ``[lo, hi]`` from the noisy edge histogram (``noisy``: (d, LINEAR_BINS)), at least a public
    minimum width relative to the feature's scale (a constant feature keeps a positive width) and at least
    2^(MIN_EXPONENT + 1), so that the map onto [-1, 1] stays finite."""
    d = noisy.shape[0]
    lower, upper = np.empty(d), np.empty(d)
    for j in range(d):
        lower[j], upper[j] = _edges(noisy[j], std, lo[j], hi[j])
    least = np.maximum(MIN_WIDTH * np.maximum(np.abs(lower), np.abs(upper)), 2.0 ** (MIN_EXPONENT + 1))
    narrow = (upper - lower) < least
    mid = lower / 2.0 + upper / 2.0
    half = least / 2.0
    lower[narrow], upper[narrow] = mid[narrow] - half[narrow], mid[narrow] + half[narrow]
    flat = ~(upper > lower)
    lower[flat], upper[flat] = lo[flat], hi[flat]
    return lower, upper


# ----------------------------------------------------------------------------------- the estimator's request


def is_private_domain_request(bounds) -> bool:
    """``bounds=None`` (find the box privately) or ``{"outer": ..., "share": ...}`` (either key optional)."""
    return bounds is None or (isinstance(bounds, dict) and bool(set(bounds) & {"outer", "share"}))


def parse_request(bounds) -> tuple[object, float]:
    """(outer limit or None, share of the fit's budget) of a private-domain request; refused if malformed."""
    if bounds is None:
        return None, DOMAIN_SHARE
    extra = set(bounds) - {"outer", "share"}
    if extra:
        raise ValueError(
            f"bounds as a dict with 'outer' or 'share' finds the box privately and takes no other keys, got {sorted(extra)}"
        )
    share = bounds.get("share", DOMAIN_SHARE)
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share < 1:
        raise ValueError(f"bounds['share'] (the box's share of the budget) must lie in (0, 1), got {share!r}")
    outer = bounds.get("outer")
    if outer is None and "outer" in bounds:
        raise ValueError("bounds['outer'] must be declared bounds (e.g. (-100, 100)); omit it for no outer limit")
    if isinstance(outer, (str, dict)) and (isinstance(outer, str) or set(outer) & {"outer", "share"}):
        raise ValueError("bounds['outer'] must be declared numeric bounds, e.g. (-100, 100)")
    return outer, float(positive_finite("share", share))


NO_BUDGET_FOR_A_BOX = (
    "bounds=None finds the domain privately, which the non-private baseline has no budget for: "
    "declare bounds (or bounds='data')"
)

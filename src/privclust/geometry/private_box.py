"""A private data domain: a per-feature box that holds nearly all rows, found from noisy histograms.

Every sum privclust releases is clipped to the domain and its noise scales with
the domain's width, so a fit needs bounds -- and bounds much looser than the
data cost accuracy (docs/choosing.md, "A private domain").  This module finds a
box privately, in three releases of noisy counts, each a histogram per feature
(nothing else about the rows is read).  A row falls in one bucket per feature,
so the d histograms of a release together have l2 sensitivity sqrt(d)
(add/remove one row): Gaussian noise in GDP, or Laplace with l1 sensitivity d
when ``delta = 0`` (at user level, m times both: ``privacy.unit``); ``STAGE_SHARES`` splits the budget (in mu^2, or epsilon).

1. **Magnitudes** -- buckets of ``OCTAVES`` octaves of |x| from 2^MIN_EXPONENT
   to 2^MAX_EXPONENT (the whole range of doubles; 1e300 and beyond) plus a zero
   bucket, closed above (1.0 lies in (1/16, 1]); the exponent comes from
   ``frexp``, so nothing overflows.  The heaviest noisy bucket, or pair of
   adjacent buckets, must stand out of the noise (an empty one does with
   probability ``FALSE_BUCKET`` over all of them; if none does the function
   refuses with :class:`NoScaleFound`, the spend recorded); the scale ``M`` is
   the top of the highest bucket above it that holds data (the next one at
   ``NEXT_Z`` noise deviations, up to ``WINDOW`` further at the
   ``FALSE_BUCKET`` threshold).
2. **Octaves** -- one-octave buckets for the ``FINE`` octaves below ``M``: the
   scale comes down past the top octaves while they are confidently nearly
   empty (their noisy count plus ``DROP_Z`` deviations within ``DROP_SHARE`` of
   the feature's noisy total).  The box is ``[-M, M]``, within an outer limit
   when one is given.
3. **Edges** -- ``LINEAR_BINS`` equal bins over that box: each edge moves inward
   past bins that are confidently nearly empty (within ``CLIP_SHARE``).  This
   tightens boxes of data far from the origin when there are enough rows.

Every choice is post-processing of the noisy counts; each release is recorded in
the accountant (labels ``DOMAIN_LABELS``) as it is made.  A feature whose rows
are all equal still gets a box of positive width (at least ``MIN_WIDTH``
relative to its scale, and 2^(MIN_EXPONENT + 1)); the box stays inside
``[-2^1020, 2^1020]``, so its width is a finite double.  Non-finite input is refused before any row is read
(``privclust._validation.check_data``), as everywhere.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from functools import partial
from typing import Callable

import numpy as np
from scipy.special import ndtri

from .._validation import positive_finite
from ..privacy.budget import Budget, PrivacyAccountant, Spend
from ..privacy.noise import NoiseSource, Randomness
from ..privacy.unit import ROW, PrivacyUnit, UserBound
from ..queries.central import CentralOracle
from ..queries.curator import input_features
from ..queries.histogram import COUNTS, HistogramQuery
from ..queries.plan import ADAPTIVE, HISTOGRAMS, Oracle, Part, PlanningOracle, Spec
from ..queries.rows import MemoryRows
from ..queries.spark import is_spark_frame, spark_features
from .domain import BoxDomain, Domain

__all__ = [
    "PrivateBox",
    "private_bounds",
    "DOMAIN_SHARE",
    "DOMAIN_LABELS",
    "is_private_domain_request",
    "parse_request",
    "find_fit_domain",
    "NoScaleFound",
    "PrivateDomain",
    "box_spec",
    "find_box",
]

OCTAVES = 4  # octaves per magnitude bucket g >= 1: (2^(MIN_EXPONENT + 4(g-1)), 2^(MIN_EXPONENT + 4g)]
MIN_EXPONENT, MAX_EXPONENT = -1020, 1020  # up to 2^MIN_EXPONENT is "zero"; beyond 2^MAX_EXPONENT counts in the top
N_BUCKETS = (MAX_EXPONENT - MIN_EXPONENT) // OCTAVES + 1  # the zero bucket (index 0), then one per OCTAVES octaves
LINEAR_BINS = 32
NEXT_Z = 3.0  # noise deviations the bucket just above the heaviest must reach to widen the scale to it
WINDOW = 4  # the scale is looked for at most this many buckets above the heaviest noisy bucket
FALSE_BUCKET = 1e-3  # the chance that an empty bucket or margin is taken for data, over all the candidates
STAGE_SHARES = (0.5, 0.35, 0.15)  # shares of the box's mu^2 (or epsilon): magnitudes, octaves, edges
FINE = 8  # the octaves below the scale that the second release looks at, one bucket each
DROP_Z = 1.0  # deviations of noise added to an octave's noisy count before it is called nearly empty
DROP_SHARE = 0.1  # the scale comes down past octaves holding at most this share of the rows (noisy)
DOMAIN_SHARE = 0.1  # default share of a fit's (epsilon, delta) spent on the box (docs/choosing.md)
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


def box_spec(budget: Budget) -> Spec:
    """The box's plan as a value: its three releases, each a part of the box's pool named by its spend label,
    with the budget's shares of mu^2 (Gaussian noise, when delta > 0) or of epsilon (Laplace)."""
    parts = tuple(Part(label, share=share) for label, share in zip(DOMAIN_LABELS, STAGE_SHARES))
    family = "gaussian" if budget.delta > 0 else "laplace"
    return Spec("the private box", parts, family, frozenset({HISTOGRAMS, ADAPTIVE}))


def _tail(family: str, std: float, candidates: int) -> float:
    """A count that one noise draw (of standard deviation ``std``) exceeds with probability at most
    FALSE_BUCKET / candidates."""
    p = FALSE_BUCKET / max(candidates, 1)
    if family == "gaussian":
        return float(std * ndtri(1.0 - p))
    return float(std / math.sqrt(2.0) * math.log(1.0 / (2.0 * p)))  # Laplace(b), std b sqrt(2): P(X > t) = e^(-t/b) / 2


def _exponents(mag: np.ndarray) -> np.ndarray:
    """The least integer k with mag <= 2^k, from frexp (no 2^k is formed: 1e300 does not overflow)."""
    frac, exp = np.frexp(mag)  # mag = frac 2^exp, frac in [0.5, 1)
    return exp.astype(np.int64) - (frac == 0.5)


# The three bucketings: public functions of a row and of public values (an outer limit, earlier releases),
# answered as histograms by the oracle (``queries.histogram``); module functions, so that Spark can ship them.


def _magnitude_buckets(rows: np.ndarray, outer_hi: np.ndarray) -> np.ndarray:
    """|x| per octave group (bucket 0: |x| <= 2^MIN_EXPONENT); an outer limit caps the magnitude."""
    mag = np.minimum(np.abs(rows), outer_hi)
    group = -((MIN_EXPONENT - _exponents(mag)) // OCTAVES)  # ceil((k - MIN_EXPONENT) / OCTAVES)
    return np.where(mag <= 2.0**MIN_EXPONENT, 0, np.clip(group, 1, N_BUCKETS - 1))


def _octave_buckets(rows: np.ndarray, outer_hi: np.ndarray, top: np.ndarray) -> np.ndarray:
    """|x| in the FINE octaves (2^(k-1), 2^k] up to 2^top (per feature, beyond it in the last), and at or
    below 2^(top - FINE) in bucket 0."""
    mag = np.minimum(np.abs(rows), outer_hi)
    index = np.clip(_exponents(mag) - (top - FINE), 0, FINE)
    index[mag == 0] = 0
    return index


def _linear_buckets(rows: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The rows clipped to [lo, hi], in LINEAR_BINS equal bins."""
    half = (hi - lo) / 2.0  # halve first: hi - lo may not be representable
    unit = (np.clip(rows, lo, hi) - lo) / 2.0 / half  # in [0, 1]
    return np.minimum((unit * LINEAR_BINS).astype(np.int64), LINEAR_BINS - 1)


def magnitude_query(d: int, outer_hi: np.ndarray) -> HistogramQuery:
    return HistogramQuery(DOMAIN_LABELS[0], d, N_BUCKETS, partial(_magnitude_buckets, outer_hi=outer_hi))


def octave_query(d: int, outer_hi: np.ndarray, top: np.ndarray) -> HistogramQuery:
    return HistogramQuery(DOMAIN_LABELS[1], d, FINE + 1, partial(_octave_buckets, outer_hi=outer_hi, top=top))


def edge_query(d: int, lo: np.ndarray, hi: np.ndarray) -> HistogramQuery:
    return HistogramQuery(DOMAIN_LABELS[2], d, LINEAR_BINS, partial(_linear_buckets, lo=lo, hi=hi))


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


def _outer_box(outer, d: int) -> tuple[np.ndarray, np.ndarray] | None:
    if outer is None:
        return None
    from .domain import BallDomain, make_domain

    domain = make_domain(outer, d)
    if isinstance(domain, BallDomain):  # a ball's bounding box
        return np.full(d, -domain.radius), np.full(d, domain.radius)
    return np.asarray(domain.lower, dtype=np.float64), np.asarray(domain.upper, dtype=np.float64)


def private_bounds(
    X,
    epsilon: float,
    delta: float = 0.0,
    *,
    outer=None,
    random_state=None,
    accountant: PrivacyAccountant | None = None,
    noise: NoiseSource | None = None,
    users: UserBound | None = None,
) -> PrivateBox:
    """A box holding nearly all rows of ``X``, found with (epsilon, delta)-DP (see the module docstring).

    ``outer``: declared bounds (any form :func:`~privclust.geometry.domain.make_domain` takes) used as an
    outer limit: the box is found inside it.  ``accountant``: the spends are checked against it before any
    row is read, and recorded in it.  ``noise`` (for callers that own a :class:`Randomness`) overrides
    ``random_state``.  ``users``: a user-level bound (``privacy.unit``): the histograms count each
    user's kept rows only, with every sensitivity m times a row's.  The releases are made by the central
    oracle over the rows of ``X`` (:func:`find_box`), as in a fit.  Returns a :class:`PrivateBox`
    (``lower, upper = private_bounds(...)``)."""
    budget = Budget(epsilon, delta)
    d = input_features(X)
    outer_box = _outer_box(outer, d)
    if noise is None:
        noise = Randomness(random_state).noise
    unit = ROW if users is None else users.unit
    rows = MemoryRows(X, d, users=users)  # checked (and at user level bounded) on the first release
    oracle = CentralOracle(rows, budget, accountant if accountant is not None else PrivacyAccountant(), noise, unit)
    return find_box(oracle, budget, outer_box)


def find_box(oracle: Oracle, budget: Budget, outer_box: tuple[np.ndarray, np.ndarray] | None = None) -> PrivateBox:
    """The box of the rows ``oracle`` answers for, found with ``budget`` through its releases.

    The box's plan (:func:`box_spec`) is opened in a ledger of its own under the oracle's -- checked against
    both before any row is read -- and each histogram is released by the oracle: counted where the rows live
    (in memory, memory-mapped, on Spark; at user level the kept rows) and noised by its mechanism, calibrated
    for the sensitivity the query declares (m times it at user level).  Everything else here is
    post-processing of the noisy counts and of public values."""
    d = oracle.n_features
    view = oracle.within(budget)
    plan = view.open(box_spec(budget))  # refused before any row is read
    if outer_box is None:
        outer_hi = np.full(d, np.inf)
    else:
        outer_hi = np.maximum(np.abs(outer_box[0]), np.abs(outer_box[1]))

    released = plan.release(magnitude_query(d, outer_hi), DOMAIN_LABELS[0])
    noisy, std = released[COUNTS], float(released.std[COUNTS])
    z_found = _tail(plan.family, std, 2 * d * N_BUCKETS) / std
    z_top = _tail(plan.family, std, d * (WINDOW + 1)) / std
    scales = [_scale(noisy[j], std, z_found, z_top) for j in range(d)]
    missing = [j for j, m in enumerate(scales) if m is None]
    if missing and outer_box is None:
        raise NoScaleFound(
            f"the private box found no scale for feature {missing[0]} ({len(missing)} of {d} features): its "
            f"noisy histogram did not rise above the noise at (epsilon={budget.epsilon:.3g}, "
            f"delta={budget.delta:.3g}) -- the spend is recorded. Declare bounds, give an outer limit "
            "(bounds={'outer': ...}), or spend a larger share on the box (bounds={'share': ...})"
        )
    scale = np.array([np.inf if m is None else m for m in scales])  # no scale found: the outer limit holds
    scale = np.minimum(scale, outer_hi)

    # the octave of the scale: FINE one-octave buckets below 2^top, where top = log2 of the scale (rounded up)
    top = _exponents(scale)
    released = plan.release(octave_query(d, outer_hi, top), DOMAIN_LABELS[1])
    noisy, std = released[COUNTS], float(released.std[COUNTS])
    for j in range(d):
        # from the top octave down, while the octaves passed are confidently nearly empty: their noisy count
        # plus DROP_Z deviations of that sum's noise within DROP_SHARE of the feature's noisy total
        beyond = np.cumsum(noisy[j, :0:-1])  # octaves top, top-1, ..., top-FINE+1
        allowed = DROP_SHARE * max(float(noisy[j].sum()), 0.0)
        empty = beyond + DROP_Z * std * np.sqrt(np.arange(1, FINE + 1)) <= allowed
        dropped = FINE - 1 if np.all(empty[: FINE - 1]) else int(np.argmin(empty))
        scale[j] = min(scale[j], max(math.ldexp(1.0, int(top[j]) - dropped), 2.0**MIN_EXPONENT))
    lo, hi = -scale, scale
    if outer_box is not None:
        lo, hi = np.maximum(lo, outer_box[0]), np.minimum(hi, outer_box[1])
        empty = hi <= lo  # the scale is all below the outer box's far side: keep the outer box there
        lo[empty], hi[empty] = outer_box[0][empty], outer_box[1][empty]

    released = plan.release(edge_query(d, lo, hi), DOMAIN_LABELS[2])
    noisy, std = released[COUNTS], float(released.std[COUNTS])
    lower, upper = np.empty(d), np.empty(d)
    for j in range(d):
        lower[j], upper[j] = _edges(noisy[j], std, lo[j], hi[j])
    # a public minimum width relative to the feature's scale (a constant feature keeps a positive width)
    # (and at least 2^(MIN_EXPONENT + 1), so that the map onto [-1, 1] stays finite)
    least = np.maximum(MIN_WIDTH * np.maximum(np.abs(lower), np.abs(upper)), 2.0 ** (MIN_EXPONENT + 1))
    narrow = (upper - lower) < least
    mid = lower / 2.0 + upper / 2.0
    half = least / 2.0
    lower[narrow], upper[narrow] = mid[narrow] - half[narrow], mid[narrow] + half[narrow]
    flat = ~(upper > lower)
    lower[flat], upper[flat] = lo[flat], hi[flat]
    spent_eps, spent_delta = view.accountant.guarantee(budget.delta)
    return PrivateBox(lower, upper, spent_eps, spent_delta, view.accountant.spends, outer_box)


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


class PrivateDomain(Domain):
    """The box of a private-domain request, found on first use through the oracle of the rows it bounds.

    ``queries.curator`` attaches the oracle it opens over the rows (:meth:`attach`).  The rows fix their
    transform on their first read -- after the algorithm has checked its parameters and its plan against
    the budget -- and the box is found (its releases made by that oracle) only then: a fit refused for its
    parameters spends nothing on the box either.  Until then only the number of features is known.  Once
    found it pickles as its plain :class:`BoxDomain` (how Spark's executors receive the map into the unit
    box); before, it refuses to."""

    def __init__(self, n_features: int, budget: Budget, outer_box: tuple[np.ndarray, np.ndarray] | None = None):
        self._d = int(n_features)
        self._budget, self._outer = budget, outer_box
        self._oracle: Oracle | None = None
        self._lock = threading.RLock()  # rows may be mapped chunk by chunk on several threads
        self._domain: BoxDomain | None = None
        self._failed: BaseException | None = None
        self.box: PrivateBox | None = None

    @property
    def n_features(self) -> int:
        return self._d

    def attach(self, oracle: Oracle) -> None:
        """The oracle whose releases find the box: the fit's own, over the rows this domain maps."""
        self._oracle = oracle

    def resolve(self) -> BoxDomain:
        """The box (found now if it has not been yet), as a declared domain."""
        with self._lock:
            if self._failed is not None:  # found once, refused once: a later read (another chunk) releases nothing
                raise self._failed
            if self._domain is None:
                oracle, self._oracle = self._oracle, None  # the oracle is not kept, whatever happens
                if oracle is None:
                    raise RuntimeError("a private domain is found through the oracle of its rows: none is attached")
                try:
                    box = find_box(oracle, self._budget, self._outer)
                except BaseException as exc:
                    self._failed = exc
                    raise
                self.box, self._domain = box, BoxDomain(box.lower, box.upper)
            return self._domain

    def __reduce__(self):
        if self._domain is None:
            raise TypeError("a private domain is sent elsewhere only once its box is found (then as a BoxDomain)")
        return (BoxDomain, (self._domain.lower, self._domain.upper))

    def to_unit(self, rows):
        return self.resolve().to_unit(rows)

    def from_unit(self, points):
        return self.resolve().from_unit(points)

    def outside(self, rows):
        return self.resolve().outside(rows)

    @property
    def length_scale(self) -> float:
        return self.resolve().length_scale

    @property
    def extent(self) -> float:
        return self.resolve().extent

    def describe(self) -> str:
        return "a private box, found on the first read of the rows" if self._domain is None else self.box.describe()


NO_BUDGET_FOR_A_BOX = (
    "bounds=None finds the domain privately, which the non-private baseline has no budget for: "
    "declare bounds (or bounds='data')"
)


def box_spends(budget: Budget, d: int, unit: PrivacyUnit = ROW) -> list[Spend]:
    """What finding a box in ``d`` features with ``budget`` spends (its three releases), from its plan as a value
    (:func:`box_spec`) as the central oracle serves it, stated for ``unit``."""
    planner = PlanningOracle(d, budget, CentralOracle.capabilities, "the central model", unit)
    return planner.spends(box_spec(budget))[0]


def find_fit_domain(
    X,
    bounds,
    budget: Budget | None,
    accountant: PrivacyAccountant,
    model,
    planned: Callable[[Budget, int], list[list[Spend]]],
    users: UserBound | None = None,
):
    """For an estimator's ``fit``: ``(bounds, budget)`` to fit with.

    Declared bounds pass unchanged.  A private-domain request (``bounds=None`` or
    ``{"outer": ..., "share": ...}``) is checked now, against the fit's ledger and without reading a row:
    the box's releases at ``share`` of (epsilon, delta) together with each plan the algorithm may make in
    the rest (``planned(rest, d)``, its plans as values).  It returns a :class:`PrivateDomain` --
    ``make_domain`` takes it as the bounds, and ``queries.curator`` attaches the fit's oracle to it -- that
    spends the box's share through that oracle when the rows are first read (in memory, memory-mapped or
    on Spark), and the rest of the budget for the algorithm."""
    if not is_private_domain_request(bounds):
        return bounds, budget
    outer, share = parse_request(bounds)
    if budget is None:  # refused with the parameters (KMeans._check_params), before any warning or setup
        raise ValueError(NO_BUDGET_FOR_A_BOX)
    if model != "central":
        raise ValueError(f"the {model} model needs public bounds that every device knows: declare bounds")
    if is_spark_frame(X):  # the frame's schema: its feature columns (a user-level fit's user column is not one)
        d = spark_features(X, ignore=None if users is None else users.column)
    else:
        d = input_features(X)
    outer_box = _outer_box(outer, d)  # a malformed outer limit is refused now
    box_budget = Budget(budget.epsilon * share, budget.delta * share)
    rest = Budget(budget.epsilon * (1.0 - share), budget.delta * (1.0 - share))
    unit = ROW if users is None else users.unit
    for plan in planned(rest, d):  # the box, then any plan the algorithm may make: both fit, or nothing runs
        accountant.check(box_spends(box_budget, d, unit) + plan)
    return PrivateDomain(d, box_budget, outer_box), rest

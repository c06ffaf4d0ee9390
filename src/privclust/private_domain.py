"""The private domain: the private box as a stage before a fit -- its plan, its three histogram releases through the oracle, its domain.

``geometry.private_box`` describes the box -- its buckets and the
post-processing that turns noisy counts into a box -- and this module runs it:
:func:`box_spec` is its plan as a value (three parts named by their spend labels
``domain: magnitudes / octaves / edges``, shares 0.5 / 0.35 / 0.15 of mu^2 or of
epsilon), and :func:`find_box` opens that plan with the oracle of the rows and
releases each stage as a :class:`~privclust.queries.histogram.HistogramQuery`:
the oracle counts where the rows live (memory, memory map chunk by chunk on every
core, Spark's executors; at user level each user's kept rows) and noises the
counts with the mechanism calibrated for the query's declared sensitivity.

Privacy argument: one row falls in one bucket of each feature's histogram, so a
release's d histograms have l2 sensitivity sqrt(d) and l1 sensitivity d (m times
both for a user's m rows); the oracle's Gaussian (GDP) or Laplace mechanism makes
each release DP at its part of the box's budget, and the three compose to the
box's budget (checked before any row is read, recorded as each is made).  Each
query's buckets depend only on public values and earlier releases, and the box is
post-processing of the noisy counts: nothing else about the rows is read.

In a fit, :func:`find_fit_domain` checks the box with the algorithm's plans and
returns a :class:`PrivateDomain`, which ``queries.curator`` attaches to the fit's
oracle; the rows fix their transform on their first read, and the box is found
then, through that oracle -- first, whether the rows are in memory,
memory-mapped or in Spark.
"""

from __future__ import annotations

import threading
from functools import partial
from typing import Callable

import numpy as np

from .geometry.domain import BoxDomain, Domain
from .geometry.private_box import (
    DOMAIN_LABELS,
    LINEAR_BINS,
    N_BUCKETS,
    NO_BUDGET_FOR_A_BOX,
    SIGNED,
    STAGE_SHARES,
    NoScaleFound,
    PrivateBox,
    edge_box,
    exponents,
    found_scales,
    is_private_domain_request,
    linear_buckets,
    magnitude_buckets,
    outer_limit,
    parse_request,
    signed_box,
    signed_octave_buckets,
    within_outer,
)
from .privacy.budget import Budget, Cover, PrivacyAccountant, Spend, largest_epsilon
from .privacy.noise import NoiseSource, Randomness
from .privacy.unit import ROW, PrivacyUnit, UserBound
from .queries.central import CentralOracle
from .queries.curator import input_features
from .queries.histogram import COUNTS, HistogramQuery
from .queries.plan import ADAPTIVE, HISTOGRAMS, Oracle, Part, PlanningOracle, Spec
from .queries.rows import MemoryRows
from .queries.spark import is_spark_frame, spark_features

__all__ = [
    "private_bounds",
    "find_box",
    "open_box",
    "box_spec",
    "box_spends",
    "find_fit_domain",
    "box_budget_beside",
    "PrivateDomain",
    "magnitude_query",
    "octave_query",
    "edge_query",
]


def box_spec(budget: Budget) -> Spec:
    """The box's plan as a value: its three releases, each a part of the box's pool named by its spend label,
    with the budget's shares of mu^2 (Gaussian noise, when delta > 0) or of epsilon (Laplace)."""
    parts = tuple(Part(label, share=share) for label, share in zip(DOMAIN_LABELS, STAGE_SHARES))
    family = "gaussian" if budget.delta > 0 else "laplace"
    return Spec("the private box", parts, family, frozenset({HISTOGRAMS, ADAPTIVE}))


def magnitude_query(d: int, outer_hi: np.ndarray) -> HistogramQuery:
    """The first release: |x| per group of octaves over the range of doubles (capped by an outer limit)."""
    return HistogramQuery(DOMAIN_LABELS[0], d, N_BUCKETS, partial(magnitude_buckets, outer_hi=outer_hi))


def octave_query(d: int, outer_lo: np.ndarray, outer_hi: np.ndarray, top: np.ndarray) -> HistogramQuery:
    """The second release: x by sign and octave below ``2^top``, the scale the first release found (public)."""
    bucket = partial(signed_octave_buckets, outer_lo=outer_lo, outer_hi=outer_hi, top=top)
    return HistogramQuery(DOMAIN_LABELS[1], d, SIGNED, bucket)


def edge_query(d: int, lo: np.ndarray, hi: np.ndarray) -> HistogramQuery:
    """The third release: x clipped to ``[lo, hi]`` (found from the first two) in equal bins."""
    return HistogramQuery(DOMAIN_LABELS[2], d, LINEAR_BINS, partial(linear_buckets, lo=lo, hi=hi))


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
    outer_box = outer_limit(outer, d)
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
    if outer_box is None:
        outer_lo, outer_hi = np.full(d, -np.inf), np.full(d, np.inf)
    else:
        outer_lo, outer_hi = outer_box
    outer_mag = np.maximum(np.abs(outer_lo), np.abs(outer_hi))

    view, plan, released = open_box(oracle, budget, outer_mag)
    scales = found_scales(released[COUNTS], float(released.std[COUNTS]), plan.family)
    missing = [j for j, m in enumerate(scales) if m is None]
    if missing and outer_box is None:
        raise NoScaleFound(
            f"the private box found no scale for feature {missing[0]} ({len(missing)} of {d} features): its "
            f"noisy histogram did not rise above the noise at (epsilon={budget.epsilon:.3g}, "
            f"delta={budget.delta:.3g}) -- the spend is recorded. Declare bounds, give an outer limit "
            "(bounds={'outer': ...}), or spend a larger share on the box (bounds={'share': ...})"
        )
    scale = np.array([np.inf if m is None else m for m in scales])  # no scale found: the outer limit holds
    scale = np.minimum(scale, outer_mag)

    # the octaves of the scale, by sign: FINE one-octave buckets below 2^top on either side of 0, where top =
    # log2 of the scale (rounded up)
    top = exponents(scale)
    released = plan.release(octave_query(d, outer_lo, outer_hi, top), DOMAIN_LABELS[1])
    signed = signed_box(released[COUNTS], float(released.std[COUNTS]), scale, top, plan.family)
    lo, hi = within_outer(*signed, outer_box)

    released = plan.release(edge_query(d, lo, hi), DOMAIN_LABELS[2])
    lower, upper = edge_box(released[COUNTS], float(released.std[COUNTS]), lo, hi)
    spent_eps, spent_delta = view.accountant.guarantee(budget.delta)
    return PrivateBox(lower, upper, spent_eps, spent_delta, view.accountant.spends, outer_box)


def open_box(oracle: Oracle, budget: Budget, outer_hi: np.ndarray):
    """The box's opening, as :func:`find_box` makes it (and the audit of its first release): its plan opened with
    ``budget`` in a ledger of its own under the oracle's (refused before any row is read), and its first release,
    the magnitude histogram capped by ``outer_hi``.  Returns (that ledger's view of the oracle, the plan, the
    release)."""
    view = oracle.within(budget)
    plan = view.open(box_spec(budget))
    return view, plan, plan.release(magnitude_query(oracle.n_features, outer_hi), DOMAIN_LABELS[0])


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
    the box's releases (at what the algorithm leaves of the budget, :func:`box_budget_beside`) together
    with each plan the algorithm may make in ``1 - share`` of it (``planned(rest, d)``, its plans as
    values), and with their union, which a choice among them is recorded at.  It returns a :class:`PrivateDomain` -- ``make_domain`` takes it as the bounds, and
    ``queries.curator`` attaches the fit's oracle to it -- that spends the box's share through that oracle
    when the rows are first read (in memory, memory-mapped or on Spark), and the rest of the budget for the
    algorithm."""
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
    outer_box = outer_limit(outer, d)  # a malformed outer limit is refused now
    rest = Budget(budget.epsilon * (1.0 - share), budget.delta * (1.0 - share))
    unit = ROW if users is None else users.unit
    plans = planned(rest, d)
    box_budget = box_budget_beside(budget, share, plans, d, unit)
    box = box_spends(box_budget, d, unit)
    for plan in plans:  # the box, then any plan the algorithm may make: both fit, or nothing runs
        accountant.check(box + plan)
    if len(plans) > 1:  # ... and their union, which a choice made after the box is recorded at (Oracle.open)
        accountant.check(box + Cover.of_any(plans).spends("the plans' union"))
    return PrivateDomain(d, box_budget, outer_box), rest


def box_budget_beside(
    budget: Budget, share: float, plans: list[list[Spend]], d: int, unit: PrivacyUnit = ROW
) -> Budget:
    """The box's budget when the algorithm runs in ``1 - share`` of ``budget`` (``plans``: what it may spend
    there): all that the costliest plan leaves of ``budget`` once composed, at ``share`` of delta.

    Splitting (epsilon, delta) by ``share`` is what basic composition needs; Gaussian releases compose in
    GDP, where the algorithm's mu at ``(1 - share)`` of the budget leaves much more: at (1, 1e-6) and share
    0.1 the box may have about 19% of mu^2 beside FastLloyd, the greedy or ``auto``, not the 1% that ``share``
    of (epsilon, delta) alone converts to: noise 4-5x smaller.  The box's epsilon is the largest at which its
    spends (a value, from its plan) compose within ``budget`` beside the union of the plans
    (``privacy.budget.largest_epsilon``: ``auto`` may choose among them on its noisy count), so it holds for
    any mix of spends; pure-epsilon releases compose by basic composition, where it stays at ``share`` of
    epsilon."""
    delta = budget.delta * share
    epsilon = largest_epsilon(
        budget, budget.epsilon * share, lambda e: [box_spends(Budget(e, delta), d, unit) + plan for plan in plans]
    )
    return Budget(epsilon, delta)

"""Plans and oracles: an algorithm declares its whole budget, the privacy model turns it into noise.

An algorithm never sees a noise scale, an accountant or a noise source.  It
declares, before it reads anything, the :class:`Part` s of its budget -- each a
*share* of the oracle's pool for noisy sums (the oracle decides the noise), or
an explicit (epsilon, delta) for a mechanism it prices itself -- and the
capabilities it will use.  ``oracle.plan(parts, needs=...)`` refuses a plan the
oracle cannot serve or the budget cannot afford, before any row is read, and
returns the :class:`Plan`: the only way to release.  Each release draws a
*fraction* of one part, so the sum of what is charged can never exceed what
was checked (plan and execution are one object); the oracle calibrates every
block's noise from the fraction and the block's share, draws the noise, and
records every spend, itemised, in the fit's ledger.

Each privacy model is one :class:`Oracle`: the central curator
(``queries.central``; its rows in memory, in a memory map or on Spark), a
federated party (``federated.client``), the local and shuffle models
(``privclust.local``, ``privclust.shuffle``) and continual observation
(``privclust.stream``).  Where the rows live is a separate piece
(``queries.rows``).

Capabilities an oracle may offer:

``DENSE``
    noisy sums over every bucket of a query;
``SPARSE``
    noisy sums of the non-empty buckets of a huge bucket universe (partition selection);
``ADAPTIVE``
    queries that depend on earlier answers (several rounds);
``EXACT``
    mechanisms that read exact rows (the exponential mechanism over exact
    counts, NoisyAVG, the sparse vector): the trusted curator only;
``LAPLACE``
    pure epsilon-DP sums (``family="laplace"``);
``DISTRIBUTED``
    the rows live on many machines, and a sparse release asked with a reduction
    (``Plan.release_reduced``) is noised and reduced there, only the reduction's
    result reaching the driver (``queries.reduce``).  Every oracle serves
    ``release_reduced``; without this capability it reduces on one machine.
``SAMPLED``
    a plan can be answered on a Poisson sample of the rows (``Plan.on_sample``):
    the trusted curator over rows in memory or kept by Spark's executors.
``HISTOGRAMS``
    noisy per-feature histograms of the rows in the input's own coordinates
    (``queries.histogram``): what finds a private domain before the fit, so
    the trusted curator only (wherever its rows live: memory, memory map, Spark).
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Callable, Iterable, TypeVar

from ..privacy.budget import Budget, Cover, PrivacyAccountant, Spend
from ..privacy.gdp import gdp_mu
from ..privacy.unit import EXACT_AT_USER_LEVEL, ROW, PrivacyUnit
from .base import Released, SumQuery
from .histogram import HistogramQuery, Query

__all__ = [
    "DENSE",
    "SPARSE",
    "ADAPTIVE",
    "EXACT",
    "LAPLACE",
    "DISTRIBUTED",
    "SAMPLED",
    "HISTOGRAMS",
    "CapabilityError",
    "Part",
    "Spec",
    "Stage",
    "Staged",
    "shared_pool",
    "Allotment",
    "Plan",
    "Oracle",
    "PlanningOracle",
    "Portion",
    "pooled_allotments",
]

T = TypeVar("T")

DENSE = "dense sums"
SPARSE = "sparse sums over huge bucket universes"
ADAPTIVE = "adaptive rounds"
EXACT = "exact access to the rows"
LAPLACE = "pure epsilon-DP (Laplace) sums"
DISTRIBUTED = "sparse releases reduced where the rows live (MPC)"
SAMPLED = "parts of a plan answered on a Poisson sample of the rows"
HISTOGRAMS = "per-feature histograms of the input's own coordinates (a private domain)"
FAMILIES = ("gaussian", "laplace")
_SLACK = 1e-9  # relative rounding slack when fractions of a part are added up


class CapabilityError(ValueError):
    """The privacy model cannot serve what the algorithm's plan needs (raised before anything is spent)."""


@dataclass(frozen=True)
class Part:
    """One part of an algorithm's budget, declared before any row is read.

    Either ``share`` > 0 -- a share of the oracle's pool for noisy sums, calibrated by the oracle, with
    ``delta`` the partition-selection delta its sparse queries may spend -- or an explicit ``epsilon``
    (and ``delta``) that the algorithm prices itself: Laplace sums, or a mechanism with exact access."""

    name: str
    share: float = 0.0
    epsilon: float = 0.0
    delta: float = 0.0

    def __post_init__(self):
        for what, value in (("share", self.share), ("epsilon", self.epsilon)):
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"part {self.name!r}: {what} must be a non-negative finite number, got {value!r}")
        if not 0 <= self.delta < 1:
            raise ValueError(f"part {self.name!r}: delta must lie in [0, 1), got {self.delta!r}")
        if (self.share > 0) == (self.epsilon > 0):
            raise ValueError(f"part {self.name!r} needs either a share of the pool or an explicit epsilon")

    @property
    def pooled(self) -> bool:
        return self.share > 0


@dataclass(frozen=True)
class Spec:
    """An algorithm's public plan as a value: the parts of its budget, the noise family of its pooled parts
    and the capabilities it needs.  It is computed from public parameters alone, before any row is read,
    and can be checked against an oracle and its ledger (:meth:`Oracle.check`) or combined with others
    (:func:`shared_pool`, :class:`Staged`) without running anything; :meth:`Oracle.open` turns it into the
    :class:`Plan` that releases."""

    what: str  # the algorithm, as messages name it
    parts: tuple[Part, ...]
    family: str = "gaussian"
    needs: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self):
        object.__setattr__(self, "parts", tuple(self.parts))
        object.__setattr__(self, "needs", frozenset(self.needs) | ({LAPLACE} if self.family == "laplace" else set()))
        names = [p.name for p in self.parts]
        if not names or len(set(names)) != len(names):
            raise ValueError(f"a plan needs parts with unique names, got {names}")
        if self.family not in FAMILIES:
            raise ValueError(f"family must be one of {FAMILIES}, got {self.family!r}")

    def scaled(self, share: float) -> "Spec":
        """This plan at ``share`` of the pool: its pooled parts' shares times ``share`` (explicit parts, which
        price themselves, as they are)."""
        parts = [dataclasses.replace(p, share=p.share * share) if p.pooled else p for p in self.parts]
        return dataclasses.replace(self, parts=tuple(parts))

    def prefixed(self, prefix: str) -> "Spec":
        """This plan with every part named ``prefix + name``: several plans made by the same code (two FastLloyd
        runs, say) can then share one pool (:func:`shared_pool`) and each draw from its own parts
        (:class:`Portion`)."""
        return dataclasses.replace(self, parts=tuple(dataclasses.replace(p, name=prefix + p.name) for p in self.parts))


def shared_pool(what: str, *stages: tuple[Spec, float]) -> Spec:
    """Stages that share one pool: each ``(spec, share)`` takes ``share`` of it (the shares add up to at
    most 1), and the result is one plan, checked as a whole before any stage releases.  Its Gaussian parts
    compose exactly (GDP), so the stages together get the noise of one mechanism at the pool's mu -- more
    than two pools split by basic composition would leave them.  Example: FastLloyd started from the
    private greedy's centers (``algorithms.lloyd``)."""
    if sum(share for _, share in stages) > 1.0 + _SLACK:
        raise ValueError(f"{what}: the stages' shares add up to more than the pool")
    families = {spec.family for spec, _ in stages}
    if len(families) != 1:
        raise ValueError(f"{what}: stages sharing a pool need one noise family, got {sorted(families)}")
    parts = [part for spec, share in stages for part in spec.scaled(share).parts]
    needs = frozenset().union(*(spec.needs for spec, _ in stages))
    return Spec(what, tuple(parts), families.pop(), needs)


@dataclass(frozen=True)
class Stage:
    """One stage of a :class:`Staged` plan: ``fraction`` of the budget's (epsilon, delta), a pool of its own,
    and the plans it may run -- one of ``options``, chosen by public post-processing of the stages before.

    ``epsilon_fraction``, where given, is the stage's share of epsilon instead: more than ``fraction`` where
    GDP composes the stages into less than basic composition's sum (``privacy.budget.largest_epsilon``);
    ``Oracle.check`` holds every combination of the stages to the ledger either way."""

    fraction: float
    options: tuple[Spec, ...]
    epsilon_fraction: float | None = None

    def __post_init__(self):
        object.__setattr__(self, "options", tuple(self.options))
        if not (0 < self.fraction <= 1) or not self.options:
            raise ValueError("a stage needs a fraction in (0, 1] of the budget and at least one plan")
        if self.epsilon_fraction is not None and not self.epsilon_fraction > 0:
            raise ValueError("a stage's epsilon_fraction must be positive")


@dataclass(frozen=True)
class Staged:
    """Stages that split the budget: stage i plans within (fraction_i epsilon, fraction_i delta), a pool of its
    own (``Oracle.stage``), so a later stage may depend on an earlier one's releases -- and choose among
    its options by them.  The fractions add up to at most 1, so any choice is (epsilon, delta)-DP by basic
    composition (the shared ledger reports it exactly, in GDP); a stage's ``epsilon_fraction`` may take what
    GDP's tighter composition leaves beyond that.  ``Oracle.check`` checks every combination of the stages'
    options, and their union cover, against the ledger before anything is released; a stage records its
    choice at its options' union (``Oracle.open``).  Example: ``auto``'s noisy row count and then
    the algorithm it chooses by it."""

    what: str
    stages: tuple[Stage, ...]

    def __post_init__(self):
        object.__setattr__(self, "stages", tuple(self.stages))
        if sum(stage.fraction for stage in self.stages) > 1.0 + _SLACK:
            raise ValueError(f"{self.what}: the stages' fractions add up to more than the budget")

    def combinations(self) -> Iterable[tuple[Spec, ...]]:
        """Every plan the staged run may make: one option of each stage."""
        return itertools.product(*(stage.options for stage in self.stages))


@dataclass(frozen=True)
class Allotment:
    """What a part (or one release from it) may spend: mu-GDP, epsilon, or nothing (non-private)."""

    mu: float | None = None
    epsilon: float | None = None
    delta: float = 0.0
    exact: bool = False  # the non-private baseline: no noise, epsilon = inf

    def fraction(self, f: float) -> "Allotment":
        """The share ``f`` of it: mu^2, epsilon and delta compose additively, so they scale by f."""
        return Allotment(
            mu=None if self.mu is None else self.mu * math.sqrt(f),
            epsilon=None if self.epsilon is None else self.epsilon * f,
            delta=self.delta * f,
            exact=self.exact,
        )

    def spends(self, label: str) -> list[Spend]:
        if self.exact:
            return [Spend(label, epsilon=math.inf)]
        if self.mu is not None:
            out = [Spend(label, mu=self.mu)]
            return out + ([Spend(f"{label} (selection)", delta=self.delta)] if self.delta > 0 else [])
        return [Spend(label, epsilon=self.epsilon or 0.0, delta=self.delta)]


class Plan:
    """An algorithm's declared budget, served by one oracle: the only way to release (see the module doc)."""

    def __init__(self, oracle: "Oracle", parts: list[Part], allotments: dict[str, Allotment], family: str):
        self.oracle, self.parts, self.family = oracle, list(parts), family
        self._allotments = allotments
        self._used = {p.name: 0.0 for p in parts}
        self._prefix = ""  # a portion's view (:meth:`portion`) names its parts without the prefix

    def reserved(self) -> list[Spend]:
        """The spends the whole plan may make: what the budget is checked against up front."""
        return [s for p in self.parts for s in self._allotments[self._known(p.name)].spends(self._prefix + p.name)]

    def allotment(self, part: str) -> Allotment:
        """A part's whole allotment (for heuristics that need the noise level, e.g. FastLloyd's iterations)."""
        return self._allotments[self._known(part)]

    def portion(self, prefix: str, spec: "Spec") -> "Plan":
        """A view of this opened plan that releases through the parts named ``prefix + name`` for each part of
        ``spec`` (a plan made by :meth:`Spec.prefixed` and joined to others by :func:`shared_pool`), calling them
        by their own names and labelling its releases ``prefix + label``.  It shares this plan's allotments and
        what has been drawn of them, so the portions together can never draw more than was checked."""
        view = copy.copy(self)
        view._prefix, view.parts = self._prefix + prefix, list(spec.parts)
        for part in spec.parts:
            view._known(part.name)
        return view

    def _labelled(self, query: Query) -> Query:
        return dataclasses.replace(query, label=self._prefix + query.label) if self._prefix else query

    def release(self, query: Query, part: str, fraction: float = 1.0) -> Released:
        """The noisy answer to ``query`` (sums, or histograms), spending ``fraction`` of ``part``."""
        return self.release_many([(query, part, fraction)])[0]

    def release_many(self, requests: Iterable[tuple[Query, str, float]]) -> list[Released]:
        """Several releases fixed in advance: one pass over the rows.  None depends on another's answer, except a
        sparse query whose ``narrows`` names its candidates from the release before it."""
        requests = list(requests)
        if HISTOGRAMS not in self.oracle.capabilities and any(isinstance(q, HistogramQuery) for q, *_ in requests):
            raise CapabilityError(f"{self.oracle.model} releases no histograms of its input; nothing was spent")
        drawn = [(self._labelled(query), self._draw(part, fraction)) for query, part, fraction in requests]
        return self.oracle.answer(drawn)

    def release_reduced(self, requests: Iterable[tuple[SumQuery, str, float, "Reduction"]]) -> list[Released]:  # noqa: F821
        """Releases fixed in advance, each used only through its reduction (``queries.reduce``): what each
        reduction keeps of its release.  Charged like ``release_many``; the reductions are post-processing."""
        requests = list(requests)
        if any(not isinstance(query, SumQuery) for query, *_ in requests):
            raise ValueError("a reduced release is of unit-box sums: histograms are released whole (release_many)")
        if any(query.narrows is not None for query, *_ in requests):
            raise ValueError("a reduced release is answered whole: its sparse queries cannot narrow (drop narrows)")
        drawn = [
            (self._labelled(query), self._draw(part, fraction), reduction)
            for query, part, fraction, reduction in requests
        ]
        return self.oracle.answer_reduced(drawn)

    def on_sample(self, rate: float, rng) -> "Plan":
        """This plan -- its parts, allotments and what has been drawn of them, shared -- answered on a Poisson
        sample of the rows (``Oracle.sampled``).  A release on a sample costs what it costs on all rows: an
        (epsilon, delta)-DP mechanism run on rows kept by coins independent of the data is (epsilon, delta)-DP
        for the whole data set (a neighbour's extra row is kept or not; the others are sampled alike), and
        no amplification is claimed."""
        sampled = copy.copy(self)
        sampled.oracle = self.oracle.sampled(rate, rng)
        return sampled

    def run_exact(self, parts: list[str], mechanism: Callable[["ExactAccess"], T]) -> T:  # noqa: F821
        """Run a mechanism that reads exact rows (central model), charging the whole of ``parts``."""
        spends = [s for part in parts for s in self._draw(part, 1.0).spends(self._prefix + part)]
        return self.oracle.run_exact(spends, mechanism)

    def _known(self, part: str) -> str:
        """The part's name in the opened plan (``prefix + part`` in a portion's view)."""
        name = self._prefix + part
        if name not in self._used:
            raise KeyError(f"the plan has no part {name!r}; it has {list(self._used)}")
        return name

    def _draw(self, part: str, fraction: float) -> Allotment:
        name = self._known(part)
        if not (0 < fraction <= 1):
            raise ValueError(f"a release draws a fraction in (0, 1] of its part, got {fraction!r}")
        self._used[name] += fraction
        if self._used[name] > 1.0 + _SLACK:  # a bug in the algorithm, never a data-dependent event
            raise RuntimeError(f"the plan's part {name!r} is overdrawn ({self._used[name]:.6g} of it)")
        return self._allotments[name].fraction(fraction)


class Oracle(ABC):
    """One privacy model: it plans, calibrates, draws every noise value and charges every spend.

    ``unit`` is what its guarantee protects (``privacy.unit``): a row, or a user owning up to m rows.  Every
    spend it reserves and charges is stated for that unit's neighbours, and a user-level oracle refuses the
    mechanisms over exact rows (their proofs price one row)."""

    capabilities: frozenset[str] = frozenset()
    model = "this privacy model"
    unit: PrivacyUnit = ROW
    # In a stage's view (:meth:`stage`) and its copies: the plans the stage was checked with -- a plan opened
    # there must be within their union cover, or the guarantee checked before the first stage released is not
    # the run's -- and whether one was opened.
    _stage: "_StageState | None" = None

    def __init__(self, n_features: int, budget: Budget | None, accountant: PrivacyAccountant):
        self.n_features = int(n_features)
        self.budget = budget  # None: the non-private baseline
        self.accountant = accountant

    def plan(
        self, parts: Iterable[Part], *, family: str = "gaussian", needs: Iterable[str] = (), what: str = "it"
    ) -> Plan:
        """``open`` the plan of ``parts`` (see :class:`Spec`)."""
        return self.open(Spec(what, tuple(parts), family, frozenset(needs)))

    def open(self, spec: Spec) -> Plan:
        """Check that this oracle can serve ``spec`` within the budget and return its :class:`Plan`; raises
        before any row is read (:class:`CapabilityError`, ``ValueError`` or ``BudgetExceededError``)."""
        plan = self._unchecked(spec)
        reserved = self.reserved(plan)
        choice = self._choice_spends(spec, reserved) if self._stage is not None else []
        self.accountant.check([*reserved, *choice])
        if self._stage is not None:
            self._stage.opened = True
        for spend in choice:  # before the plan releases anything (each spend is checked again as it is made)
            self.accountant.spend(spend)
        return plan

    def _choice_spends(self, spec: Spec, reserved: list[Spend]) -> list[Spend]:
        """What records this stage's choice of ``spec`` among its options at their union cover.

        The choice is made on earlier releases, so the run is private at the union cover of the options (each
        option is within it, whatever was released before), not at the chosen plan's own cost, which depends on
        those releases: recorded at the chosen plan's cost alone, the ledger and ``privacy_spent_`` would
        report less than the guarantee rests on.  Nothing where the stage has one option."""
        stage, union = self._stage, self._stage.cover()
        converted = [spend.under(union.relation) for spend in reserved]  # one by one, as the ledger converts them
        chosen = Cover.of(converted) if converted else Cover(relation=union.relation)
        # Bugs in the caller, never data-dependent events: a plan the stage was not checked with, or a second one
        # (each would be held to the union alone, their sum to nothing)
        if not chosen.within(union):
            raise RuntimeError(
                f"{spec.what} is not one of the plans this stage was checked with "
                f"({', '.join(option.what for option in stage.options)}): nothing was released for it"
            )
        if stage.opened:
            raise RuntimeError(f"{spec.what}: this stage has opened its plan already; a stage runs one of its options")
        if len(stage.options) == 1:
            return []
        return union.beyond(chosen, f"{spec.what}: chosen among {len(stage.options)} plans (their union cover)")

    def check(self, spec: "Spec | Staged") -> None:
        """Refuse, without running or reading anything, a plan this oracle cannot serve or its ledger cannot
        afford; for a :class:`Staged` plan, every combination of its stages' options and their union cover: a
        choice made on an earlier stage's release can pair one combination's mu with another's delta, and the
        run records that cover (:meth:`open`)."""
        plans = self.spends(spec)
        for spends in plans:
            self.accountant.check(spends)
        if len(plans) > 1:
            self.accountant.check(Cover.of_any(plans).spends(spec.what))

    def spends(self, spec: "Spec | Staged") -> list[list[Spend]]:
        """What serving ``spec`` may spend at most, without consulting the ledger: one list of spends, or for
        a :class:`Staged` plan one list per combination of its stages' options (each stage in its pool).
        Raises :class:`CapabilityError` or ``ValueError`` for a plan this oracle cannot serve."""
        if isinstance(spec, Spec):
            return [self.reserved(self._unchecked(spec))]
        out = []
        for chosen in spec.combinations():
            reserved = []
            for stage, option in zip(spec.stages, chosen):
                view = self.stage(stage)
                reserved += view.reserved(view._unchecked(option))
            out.append(reserved)
        return out

    def stage(self, stage: Stage) -> "Oracle":
        """This oracle planning within ``stage``'s fraction of its budget (a pool of its own), for one of the stage's
        options: a plan opened through it must lie within their union cover (:meth:`open`), the bound every
        combination was checked with before the first stage released."""
        if self.budget is None:
            return self
        epsilon = stage.fraction if stage.epsilon_fraction is None else stage.epsilon_fraction
        view = self.with_pool(Budget(self.budget.epsilon * epsilon, self.budget.delta * stage.fraction))
        view._stage = _StageState(stage.options, view)  # what :meth:`open` holds a plan to, in every copy
        return view

    def _unchecked(self, spec: Spec) -> Plan:
        self.require(spec.needs, spec.what)
        return Plan(self, list(spec.parts), self.allot(list(spec.parts), spec.family), spec.family)

    def with_pool(self, budget: Budget) -> "Oracle":
        """This oracle -- the same rows, noise and ledger -- planning within ``budget``, a part of its pool.

        For an algorithm in stages whose later stages depend on earlier releases: each stage plans in
        its own part (parts whose (epsilon, delta) sum to at most the pool's), and the shared ledger
        composes what they spend, so the total stays within the pool by basic composition (tighter
        in the ledger's GDP accounting)."""
        view = copy.copy(self)
        view.budget = budget
        return view

    def within(self, budget: Budget) -> "Oracle":
        """This oracle -- the same rows and noise -- planning within ``budget``, its spends recorded in a ledger
        of their own (``budget``, under this oracle's, which records and checks them too): for a stage that
        reports its own cost, as the private box reports its share of a fit."""
        view = self.with_pool(budget)
        view.accountant = PrivacyAccountant(budget, parent=self.accountant)
        return view

    def require(self, needs: Iterable[str], what: str = "it") -> None:
        """Refuse, before anything is read or spent, an algorithm needing what this model does not offer."""
        if self.unit.user and EXACT in set(needs):
            raise CapabilityError(
                f"{what} needs {EXACT}, which a user-level fit (privacy_unit='user') does not offer: "
                f"{EXACT_AT_USER_LEVEL}; nothing was spent. Choose an algorithm built on noisy sums (fastlloyd, "
                "glloyd, sulloyd, the greedy with selection='histogram', or auto)."
            )
        missing = sorted(set(needs) - self.capabilities)
        if missing:
            raise CapabilityError(
                f"{what} needs {', '.join(missing)}, which {self.model} does not offer; nothing was spent. "
                "Choose an algorithm this privacy model can run (docs/design.md lists which runs where)."
            )

    def reserved(self, plan: Plan) -> list[Spend]:
        """What serving ``plan`` may spend, checked before any row is read: by default its parts' spends,
        stated for the unit's neighbours."""
        return [self.unit.stated(spend) for spend in plan.reserved()]

    @abstractmethod
    def allot(self, parts: list[Part], family: str) -> dict[str, Allotment]:
        """Turn the budget into each part's allotment; raise ``ValueError`` if the parts do not fit it."""

    @abstractmethod
    def answer(self, requests: list[tuple[Query, Allotment]]) -> list[Released]:
        """Compute, noise and charge the releases (called by :class:`Plan` only; histograms only if the oracle
        offers ``HISTOGRAMS``)."""

    def answer_reduced(self, requests: list[tuple[SumQuery, Allotment, "Reduction"]]) -> list[Released]:  # noqa: F821
        """Releases and their reductions on one machine (an oracle whose rows are distributed overrides it)."""
        answers = self.answer([(query, allotment) for query, allotment, _ in requests])
        return [reduction.select(answer, 0, 0) for (_, _, reduction), answer in zip(requests, answers)]

    def run_exact(self, spends: list[Spend], mechanism):
        raise CapabilityError(f"{self.model} gives no exact access to the rows")

    def sampled(self, rate: float, rng) -> "Oracle":
        """This oracle -- its budget, ledger and noise -- reading a Poisson sample of its rows (``SAMPLED``)."""
        raise CapabilityError(f"{self.model} cannot answer on a sample of the rows")


@dataclass(eq=False)
class _StageState:
    """What a stage's view and its copies (``with_pool``, ``within``, ``sampled``) share: the options the stage was
    checked with, priced in the stage's own pool (``home``), and whether a plan was opened."""

    options: tuple
    home: Oracle
    opened: bool = False
    _cover: Cover | None = None

    def cover(self) -> Cover:
        """The union cover of the options, priced in the stage's pool (as :meth:`Oracle.spends` priced them)."""
        if self._cover is None:
            self._cover = Cover.of_any(self.home.reserved(self.home._unchecked(o)) for o in self.options)
        return self._cover


def pooled_allotments(budget: Budget | None, parts: list[Part], family: str) -> dict[str, Allotment]:
    """The curator's split (central, Spark, federated): explicit parts cost what they say (basic
    composition); the rest of (epsilon, delta) is the pool, shared by the pooled parts -- as one
    mu-GDP Gaussian mechanism (``family="gaussian"``, shares of mu^2) or one epsilon (shares of epsilon).

    With ``budget=None`` (the non-private baseline) every part is exact."""
    if budget is None:
        return {p.name: Allotment(exact=True) for p in parts}
    explicit = [p for p in parts if not p.pooled]
    pooled = [p for p in parts if p.pooled]
    eps_left = budget.epsilon - sum(p.epsilon for p in explicit)
    delta_left = budget.delta - sum(p.delta for p in parts)
    out = {p.name: Allotment(epsilon=p.epsilon, delta=p.delta) for p in explicit}
    if eps_left < -1e-12 * budget.epsilon or delta_left < -1e-12:
        raise ValueError("the plan's explicit parts cost more than the budget")
    if not pooled:
        return out
    if eps_left <= 1e-12 * budget.epsilon:
        raise ValueError("the plan's explicit parts leave no epsilon for its noisy sums")
    total_share = sum(p.share for p in pooled)
    if family == "gaussian":
        if delta_left <= 0:
            raise ValueError(
                "Gaussian noise needs delta > 0 (beyond the plan's explicit deltas); "
                "use a pure epsilon-DP algorithm (e.g. algorithm='sulloyd') for delta = 0"
            )
        mu = gdp_mu(eps_left, delta_left)
        out.update({p.name: Allotment(mu=mu * math.sqrt(p.share / total_share), delta=p.delta) for p in pooled})
    else:
        out.update({p.name: Allotment(epsilon=eps_left * p.share / total_share, delta=p.delta) for p in pooled})
    return out


class PlanningOracle(Oracle):
    """A privacy model's capabilities and a budget, and no rows: it checks and allots plans (a curator's
    split) and answers nothing.  For checking an algorithm against a model before any row or party is
    there -- e.g. a federated job, announced before the parties join."""

    def __init__(
        self, n_features: int, budget: Budget | None, capabilities: Iterable[str], model: str, unit: PrivacyUnit = ROW
    ):
        super().__init__(n_features, budget, PrivacyAccountant(budget))
        self.capabilities, self.model, self.unit = frozenset(capabilities), model, unit

    def allot(self, parts: list[Part], family: str) -> dict[str, Allotment]:
        return pooled_allotments(self.budget, parts, family)

    def answer(self, requests):
        raise CapabilityError(f"{self.model}: a planning oracle answers no query")


class Portion(Oracle):
    """One portion of a plan already opened (checked against the capabilities and the ledger as a whole): an
    oracle through which an unmodified algorithm runs inside a larger plan -- ``auto``'s private selection runs
    each candidate in its share of one pool this way.

    The algorithm opens its own plan as usual; :meth:`open` accepts only the plan this portion was cut for
    (``spec``, compared as a value: the candidate's plan is a function of the same public parameters) and
    returns the opened plan's view of it (:meth:`Plan.portion`).  Nothing is checked or charged again: the
    whole was checked when it was opened, every release is charged by the opened plan's oracle when it is
    made, and the view cannot draw more than its parts.  ``budget`` is the nominal budget the algorithm's
    public heuristics read (its parts' noise is what the opened plan allotted them)."""

    def __init__(self, plan: Plan, prefix: str, spec: Spec, budget: Budget):
        super().__init__(plan.oracle.n_features, budget, plan.oracle.accountant)
        self.capabilities, self.model, self.unit = plan.oracle.capabilities, plan.oracle.model, plan.oracle.unit
        self._plan, self._prefix, self._spec = plan, prefix, spec

    def open(self, spec: Spec) -> Plan:
        if spec != self._spec:  # a bug in the caller: the portion was cut for another plan
            raise RuntimeError(f"this portion was planned for {self._spec.what}, not for {spec.what}")
        return self._plan.portion(self._prefix, spec)

    def allot(self, parts, family):
        raise CapabilityError("a portion of an opened plan allots nothing: its parts were allotted with the whole")

    def answer(self, requests):
        raise CapabilityError("a portion of an opened plan answers through the plan it was cut from")

    def with_pool(self, budget: Budget) -> "Oracle":
        raise CapabilityError("a portion of an opened plan cannot be split into further pools")

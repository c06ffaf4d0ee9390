"""Privacy budgets and the accountant that composes what is spent.

Two kinds of spend are recorded:

* ``(epsilon, delta)`` spends (Laplace, exponential mechanism, ...), composed
  by basic composition: epsilons add, deltas add;
* ``mu``-GDP spends (Gaussian mechanisms), composed exactly in GDP:
  ``mu = sqrt(sum mu_i^2)``.

The guarantee of everything recorded is ``(eps_dp + eps_gdp(delta - delta_dp),
delta)`` where ``eps_gdp`` converts the composed ``mu`` to approximate DP at
the delta that the ``(epsilon, delta)`` spends leave over (basic composition of
the two parts).  An accountant created with a :class:`Budget` refuses any
spend -- and any *plan* of spends -- that would exceed it, before anything is
released.

**Neighbour relations.**  A spend states its guarantee for one relation: central
mechanisms for add/remove-one neighbours (the default), the local and shuffle
models' rounds for replace-one neighbours (the number of users is public there;
one user's point changes).  Guarantees for different relations do not add up as
they stand, so an accountant composes in one relation: when any spend is
replace-one, every add/remove spend is first converted by group privacy (a
replacement is a removal and an addition: (epsilon, delta) add/remove gives
(2 epsilon, (1 + e^epsilon) delta) replace-one, and mu-GDP gives 2 mu-GDP), and
the total -- and the budget check -- is stated for replace-one neighbours.  The
other way has no conversion: a replace-one guarantee says nothing about whether
a user took part (the local model publishes the number of reports).  A user-level fit's spends are for neighbours that differ
in one user's rows, at most m of them (``privacy.unit``): they compose only with
spends for the same relation, and mixing them with any other is refused.

An in-memory accountant belongs to the process that made it.  A copy in another process -- pickled
(refused by ``__reduce__``) or inherited through ``fork`` (``multiprocessing`` or joblib's
``"multiprocessing"`` backend with the fork start method, which copy memory and pickle nothing) --
would spend the same budget without the original ever hearing of it, so a copy refuses every check
and spend (it may still be read).  :class:`~privclust.privacy.ledger.LedgerAccountant` keeps its
budget in a file that every process rereads, so its copies compose and are exempt.
"""

from __future__ import annotations

import math
import os
import threading
from dataclasses import dataclass, field
from typing import Callable, Iterable

from .errors import BudgetExceededError
from .gdp import compose_mu, gdp_delta, gdp_epsilon
from .unit import is_user_relation, rows_per_unit, user_relation

__all__ = [
    "Budget",
    "Spend",
    "PrivacyAccountant",
    "BudgetExceededError",
    "PrivacyReport",
    "ADD_REMOVE",
    "REPLACE_ONE",
    "largest_epsilon",
    "composes_within",
    "Cover",
]

ADD_REMOVE, REPLACE_ONE = "add/remove", "replace-one"  # neighbouring data sets: one row added or removed; replaced

# Relative slack for comparing floating-point totals with a budget: spends are
# calibrated to use the budget exactly, and rounding must not turn that into a
# refusal.  1e-9 relative is far below any meaningful privacy difference.
_TOLERANCE = 1e-9

# How many forks the memory of this process has gone through since the module was imported: a child of
# os.fork() (multiprocessing's fork start method included) counts one more than its parent.  Together
# with the process id, this tells an accountant that it is a copy inherited by fork: the id alone could
# in principle be recycled, the count alone misses a fork made without Python's at-fork hooks.
_forks = 0

# Held from the check of a spend to its recording, so that two threads (joblib's threading backend, a
# thread pool) cannot both pass the check for the last of a budget.  One lock for every in-memory
# accountant: a spend is checked and recorded along its whole chain of parents, and spends are few.
_spending = threading.RLock()


def _count_fork() -> None:
    global _forks, _spending
    _forks += 1
    _spending = threading.RLock()  # a lock held by another thread at the fork would never be released here


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_count_fork)


def _this_process() -> tuple[int, int]:
    return os.getpid(), _forks


@dataclass(frozen=True)
class Budget:
    """An explicit (epsilon, delta) privacy budget."""

    epsilon: float
    delta: float = 0.0

    def __post_init__(self) -> None:
        eps, delta = self.epsilon, self.delta
        if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not math.isfinite(eps) or eps <= 0:
            raise ValueError(
                f"epsilon must be a positive finite number, got {eps!r}; typical values are 0.1 (strong privacy) to 1-2"
            )
        if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not 0 <= delta < 1:
            raise ValueError(f"delta must lie in [0, 1), got {delta!r}; use a value well below 1/n, e.g. 1e-6")
        object.__setattr__(self, "epsilon", float(eps))
        object.__setattr__(self, "delta", float(delta))


@dataclass(frozen=True)
class Spend:
    """One release: either an (epsilon, delta) spend or a mu-GDP spend."""

    label: str
    epsilon: float = 0.0
    delta: float = 0.0
    mu: float | None = None
    relation: str = ADD_REMOVE  # the neighbours the guarantee is for (see the module docstring)

    def __post_init__(self) -> None:
        if self.relation not in (ADD_REMOVE, REPLACE_ONE) and not is_user_relation(self.relation):
            raise ValueError(
                f"a spend's relation is {ADD_REMOVE!r}, {REPLACE_ONE!r} or a user-level one "
                f"({user_relation(5)!r}), got {self.relation!r}"
            )

    @property
    def is_gdp(self) -> bool:
        return self.mu is not None

    def under(self, relation: str) -> "Spend":
        """The same spend stated for ``relation`` neighbours: add/remove -> replace-one by group privacy
        (two steps); replace-one -> add/remove is refused (no such conversion exists)."""
        if relation == self.relation:
            return self
        if is_user_relation(relation) or is_user_relation(self.relation):
            raise ValueError(
                f"a guarantee for {self.relation} neighbours cannot be stated for {relation} neighbours: "
                "spends for different privacy units do not compose; give a user-level fit an accountant "
                "of its own (or one holding user-level spends with the same max_rows_per_user)"
            )
        if relation != REPLACE_ONE:
            raise ValueError("a replace-one guarantee cannot be stated for add/remove neighbours")
        if self.is_gdp:
            return Spend(self.label, mu=2.0 * self.mu, relation=REPLACE_ONE)
        eps, delta = self.epsilon, self.delta
        if delta > 0:
            delta = 1.0 if eps > 700 else min(1.0, (1.0 + math.exp(eps)) * delta)
        return Spend(self.label, epsilon=2.0 * eps, delta=delta, relation=REPLACE_ONE)

    def as_dict(self) -> dict:
        if self.is_gdp:
            out = {"label": self.label, "mu": self.mu}
        else:
            out = {"label": self.label, "epsilon": self.epsilon, "delta": self.delta}
        if self.relation != ADD_REMOVE:  # the default stays implicit (files written before the field)
            out["relation"] = self.relation
        return out


def relation_of(spends: Iterable[Spend]) -> str:
    """The relation spends compose in: replace-one as soon as one is (see the module docstring); a
    user-level relation when they all are (mixed with another, ``Spend.under`` refuses)."""
    return common_relation(s.relation for s in spends)


def common_relation(relations: Iterable[str]) -> str:
    """The relation guarantees stated for ``relations`` compose in (:func:`relation_of`)."""
    relations = set(relations)
    users = sorted(r for r in relations if is_user_relation(r))
    if users:
        return users[0]
    return REPLACE_ONE if REPLACE_ONE in relations else ADD_REMOVE


def _composition(spends: Iterable[Spend]) -> tuple[float, float, float]:
    """(epsilon, delta, mu) of ``spends`` in their common relation (:func:`relation_of`): the pure and
    approximate spends composed by basic composition, the Gaussian ones exactly in GDP (mu 0 if none)."""
    spends = list(spends)
    eps_dp, delta_dp, mu2 = _sums(spends, relation_of(spends))
    return eps_dp, delta_dp, math.sqrt(mu2)


def _sums(spends: Iterable[Spend], relation: str, start: tuple[float, float, float] = (0, 0, 0)):
    """(epsilon, delta, mu^2) of ``spends`` stated for ``relation``, added to ``start`` one spend at a time, in
    order: running totals kept this way equal the totals of the whole list, bit for bit."""
    eps_dp, delta_dp, mu2 = start
    for spend in spends:
        spend = spend.under(relation)
        if spend.is_gdp:
            mu2 += float(spend.mu) ** 2
        else:
            eps_dp, delta_dp = eps_dp + spend.epsilon, delta_dp + spend.delta
    return eps_dp, delta_dp, mu2


def _guarantee(spends: Iterable[Spend], delta: float) -> tuple[float, float]:
    """(epsilon, delta) of the composition of ``spends`` in their common relation (:func:`relation_of`),
    converting GDP at ``delta``."""
    eps_dp, delta_dp, mu = _composition(spends)
    if mu == 0:
        return eps_dp, delta_dp
    left = delta - delta_dp
    if left <= 0:
        return math.inf, delta
    return eps_dp + gdp_epsilon(mu, left), delta


def _within(spends: Iterable[Spend], delta: float, epsilon_limit: float, delta_limit: float) -> bool:
    """Whether ``_guarantee(spends, delta)`` is within (``epsilon_limit``, ``delta_limit``), without solving for
    its epsilon: a mu-GDP part is (e, d)-DP exactly when ``gdp_delta(e, mu) <= d``, and ``gdp_delta`` falls as e
    grows, so the GDP part fits in the epsilon the other spends leave iff its delta there is within what they
    leave of ``delta``.  One evaluation of the trade-off instead of a root search (each check of a release:
    about a tenth of the time).  Where the two disagree, the epsilon lies within the root search's tolerance
    (1e-14) of the limit, and this answer is the exact one (up to the evaluation of ``gdp_delta``)."""
    return _totals_within(*_composition(spends), delta, epsilon_limit, delta_limit)


def _totals_within(eps_dp: float, delta_dp: float, mu: float, delta: float, epsilon_limit: float, delta_limit: float):
    """:func:`_within` on the composed totals."""
    if mu == 0:
        return eps_dp <= epsilon_limit and delta_dp <= delta_limit
    left, room = delta - delta_dp, epsilon_limit - eps_dp
    return left > 0 and delta <= delta_limit and room >= 0 and gdp_delta(room, mu) <= left


@dataclass
class PrivacyReport:
    """What one fit spent: the total guarantee and every step, labelled."""

    epsilon: float
    delta: float
    mu: float | None
    steps: list[Spend] = field(default_factory=list)
    relation: str = ADD_REMOVE  # the neighbours the total is for

    def as_dict(self) -> dict:
        out = {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "mu": self.mu,
            "steps": [s.as_dict() for s in self.steps],
        }
        if self.relation != ADD_REMOVE:
            out["relation"] = self.relation
        if is_user_relation(self.relation):
            out["privacy_unit"] = self.privacy_unit
        return out

    @property
    def privacy_unit(self) -> dict:
        """What the total protects: ``{"unit": "row"}``, or ``{"unit": "user", "max_rows_per_user": m}``."""
        if is_user_relation(self.relation):
            return {"unit": "user", "max_rows_per_user": rows_per_unit(self.relation)}
        return {"unit": "row"}

    def __str__(self) -> str:
        head = f"(epsilon={self.epsilon:.6g}, delta={self.delta:.3g})"
        if self.mu is not None:
            head += f", Gaussian part {self.mu:.6g}-GDP"
        if self.relation != ADD_REMOVE:
            head += f" for {self.relation} neighbours"
        return head + f" over {len(self.steps)} releases"


class PrivacyAccountant:
    """Records labelled spends, composes them, and refuses to overspend.

    Parameters
    ----------
    budget:
        The total the accountant may spend, or ``None`` for a ledger that only
        records.  With a budget, the GDP part is converted at ``budget.delta``.
    parent:
        Another accountant (for example one shared by several fits) that every
        spend is also recorded in and checked against.
    """

    def __init__(self, budget: Budget | None = None, parent: "PrivacyAccountant | None" = None):
        self.budget = budget
        self.parent = parent
        self._spends: list[Spend] = []
        self._home = _this_process()
        self._running: tuple | None = None  # (the list, how many of it, relation, totals): see _composed

    def _bound_to_its_process(self) -> bool:
        """Whether only the process that made this accountant may check and spend with it.

        True for the in-memory accountant, which refuses to be pickled: a copy in another process
        would compose its spends apart from the original.  A subclass that may be pickled (defines its
        own ``__reduce__``) declares by that that its copies compose -- as
        :class:`~privclust.privacy.ledger.LedgerAccountant`'s do, through the file they all reread --
        and is not bound; a subclass may override this method to say so explicitly."""
        return type(self).__reduce__ is PrivacyAccountant.__reduce__

    def _refuse_if_copied(self) -> None:
        """Refuse (before anything is checked or recorded) in a process this accountant was copied into."""
        home = getattr(self, "_home", None)
        if home is not None and home != _this_process() and self._bound_to_its_process():
            raise BudgetExceededError(
                "this PrivacyAccountant was made in another process and copied into this one (a forked "
                "worker: multiprocessing or joblib with the fork start method); a copy's spends would never "
                "reach the original's budget, so it spends nothing. To share a budget across processes use "
                "a LedgerAccountant file (privclust.privacy.ledger), or give each process an accountant "
                "with its own share of the budget."
            )

    def __deepcopy__(self, memo):
        # An accountant is a ledger shared by identity: cloning an estimator
        # (scikit-learn's clone deep-copies parameters) must not fork the budget.
        return self

    def __copy__(self):
        return self

    def __reduce__(self):
        # A pickled copy in another process (joblib, GridSearchCV(n_jobs>1), multiprocessing) would
        # spend the same budget again without this ledger ever hearing of it: refuse, loudly.
        raise TypeError(
            "a PrivacyAccountant cannot be sent to another process: each copy would spend the same budget "
            "without the others knowing. Run the search or the jobs in this process (e.g. GridSearchCV(..., "
            "n_jobs=1)), or give each process an accountant with its own share of the budget."
        )

    @property
    def spends(self) -> list[Spend]:
        return list(self._spends)

    def guarantee(self, delta: float | None = None, extra: Iterable[Spend] = ()) -> tuple[float, float]:
        """(epsilon, delta) of everything spent (plus ``extra``), GDP converted at ``delta``."""
        if delta is None:
            delta = self.budget.delta if self.budget is not None else 0.0
        return _guarantee([*self._spends, *extra], delta)

    def check(self, planned: Iterable[Spend]) -> None:
        """Raise :class:`BudgetExceededError` if ``planned`` would overspend here or in a parent.

        Also raised by a copy of this accountant in another process (see the module docstring).  Decided on
        the spends as this accountant holds them now (:func:`_within`), never through :meth:`guarantee`, which a
        ledger overrides to reread its file: a ledger that has just set a new reservation in memory checks that
        (the caller rereads the file first where it must)."""
        self._refuse_if_copied()
        planned = list(planned)
        if any(s.epsilon == math.inf for s in planned if not s.is_gdp):
            if self.budget is not None:
                raise BudgetExceededError("a non-private step cannot be charged to a finite privacy budget")
        if self.budget is not None:
            limits = (self.budget.epsilon * (1 + _TOLERANCE), self.budget.delta * (1 + _TOLERANCE))
            if not _totals_within(*self._composed(planned), self.budget.delta, *limits):
                eps, delta = _guarantee([*self._spends, *planned], self.budget.delta)
                spent_eps, _ = _guarantee(self._spends, self.budget.delta)
                raise BudgetExceededError(
                    f"this would spend up to (epsilon={eps:.6g}, delta={delta:.3g}) in total, over the "
                    f"budget (epsilon={self.budget.epsilon:.6g}, delta={self.budget.delta:.3g}); "
                    f"already spent epsilon={spent_eps:.6g}. Lower the request or raise the budget."
                )
        if self.parent is not None:
            self.parent.check(planned)

    def _composed(self, planned: list[Spend]) -> tuple[float, float, float]:
        """``_composition([*recorded, *planned])``, from running totals of the recorded spends: a check costs the
        planned spends, not every spend so far (a 100-round federated run's checks were quadratic in its rounds).
        The totals are kept for the list they were summed from while it only grows (a ledger rereading its file
        makes a new list), in the recorded spends' relation; planned spends of another (a replace-one release,
        which restates every other) are composed with the whole list anew."""
        spends, running = self._spends, getattr(self, "_running", None)
        if running is None or running[0] is not spends or running[1] > len(spends):
            running = (spends, 0, relation_of([]), (0, 0, 0))
        fresh = spends[running[1] :]
        relation = common_relation([running[2], *(s.relation for s in fresh)])
        if relation != running[2]:  # the new spends restate the others: sum them all in the new relation
            running = (spends, 0, relation, (0, 0, 0))
            fresh = spends
        self._running = (spends, len(spends), relation, _sums(fresh, relation, running[3]))
        if common_relation([relation, *(s.relation for s in planned)]) != relation:
            return _composition([*spends, *planned])
        eps_dp, delta_dp, mu2 = _sums(planned, relation, self._running[3])
        return eps_dp, delta_dp, math.sqrt(mu2)

    def spend(self, spend: Spend) -> None:
        """Record one release (checked first: nothing is recorded on refusal).

        The check and the recording are one step for other threads: of two spends that only fit the
        budget one at a time, the second is checked after the first is recorded, and refused."""
        with _spending:
            self.check([spend])
            self._record(spend)

    def _record(self, spend: Spend) -> None:
        self._refuse_if_copied()
        if self.parent is not None:  # first: a ledger parent checks again under its file's lock, and may refuse
            self.parent._record(spend)
        self._spends.append(spend)

    def spend_gdp(self, label: str, mu: float) -> None:
        self.spend(Spend(label=label, mu=float(mu)))

    def spend_dp(self, label: str, epsilon: float, delta: float = 0.0) -> None:
        self.spend(Spend(label=label, epsilon=float(epsilon), delta=float(delta)))

    def report(self, delta: float | None = None) -> PrivacyReport:
        eps, total_delta = self.guarantee(delta)
        relation = relation_of(self._spends)
        mus = [s.under(relation).mu for s in self._spends if s.is_gdp]
        return PrivacyReport(
            epsilon=eps,
            delta=total_delta,
            mu=compose_mu(*mus) if mus else None,
            steps=self.spends,
            relation=relation,
        )


_COVER_SLACK = 1e-9  # relative rounding in a cover's sums, far below any meaningful privacy difference


@dataclass(frozen=True)
class Cover:
    """A bound on a list of spends, one number per way the file composes them: the Gaussian spends'
    composed mu, and the other spends' summed epsilon and delta, all stated for ``relation``'s neighbours
    (the spends' common relation, :func:`relation_of`).  The total is monotone in each, so spends within a
    cover cost at most what the cover does, beside anything else."""

    mu: float = 0.0
    epsilon: float = 0.0
    delta: float = 0.0
    relation: str = ADD_REMOVE

    @classmethod
    def of(cls, spends: Iterable[Spend]) -> "Cover":
        """The cover of ``spends`` in their common relation, each converted to it as the accountant does."""
        spends = list(spends)
        relation = relation_of(spends)
        spends = [s.under(relation) for s in spends]
        return cls(
            mu=math.sqrt(math.fsum(s.mu**2 for s in spends if s.is_gdp)),
            epsilon=math.fsum(s.epsilon for s in spends if not s.is_gdp),
            delta=math.fsum(s.delta for s in spends if not s.is_gdp),
            relation=relation,
        )

    def under(self, relation: str) -> "Cover":
        """This cover stated for ``relation``'s neighbours (``Spend.under``; refused where no conversion
        exists).  Converting the summed epsilon and delta at once bounds converting each spend: the factor
        (1 + e^epsilon) on a delta only grows with epsilon."""
        if relation == self.relation:
            return self
        gaussian = Spend("cover", mu=self.mu, relation=self.relation).under(relation)
        other = Spend("cover", epsilon=self.epsilon, delta=self.delta, relation=self.relation).under(relation)
        return Cover(gaussian.mu, other.epsilon, other.delta, relation)

    def within(self, other: "Cover") -> bool:
        mine, theirs = _in_common(self, other)
        slack = 1.0 + _COVER_SLACK
        return (
            mine.mu <= theirs.mu * slack
            and mine.epsilon <= theirs.epsilon * slack
            and mine.delta <= theirs.delta * slack
        )

    def union(self, other: "Cover") -> "Cover":
        mine, theirs = _in_common(self, other)
        return Cover(
            max(mine.mu, theirs.mu), max(mine.epsilon, theirs.epsilon), max(mine.delta, theirs.delta), mine.relation
        )

    @classmethod
    def of_any(cls, plans: Iterable[Iterable[Spend]]) -> "Cover":
        """The union of the plans' covers: a bound on what a choice among them may spend, even an adaptive
        one (made on earlier releases), which can pair one plan's Gaussian mu with another's selection delta
        -- where the largest of the plans' own guarantees is no bound."""
        plans = [list(spends) for spends in plans]
        cover = cls.of(plans[0])
        for spends in plans[1:]:
            cover = cover.union(cls.of(spends))
        return cover

    def spends(self, entry_id: str) -> list[Spend]:
        return self._as_spends(f"reserved by {entry_id} (running, or ended without settling)")

    def beyond(self, chosen: "Cover", label: str) -> list[Spend]:
        """The spends that, recorded beside spends covered by ``chosen`` (within this cover), make them cost
        what this cover does: the rest of its mu (squares add) and of its epsilon and delta.  What records an
        adaptive choice among plans at their union cover, the bound its guarantee rests on."""
        if chosen.relation != self.relation:  # converting its sums at once would overstate it, and lift too little
            raise ValueError("a cover lifts only spends stated for its own relation: convert each spend first")
        if not chosen.within(self):
            raise ValueError("a cover lifts only spends within it")

        def rest(mine: float, theirs: float) -> float:  # what is left, or none where the two differ by rounding
            return 0.0 if mine <= theirs * (1.0 + _COVER_SLACK) else mine - theirs

        lift = Cover(
            math.sqrt(rest(self.mu**2, chosen.mu**2)),
            rest(self.epsilon, chosen.epsilon),
            rest(self.delta, chosen.delta),
            self.relation,
        )
        return lift._as_spends(label)

    def _as_spends(self, label: str) -> list[Spend]:
        out = [Spend(label, mu=self.mu, relation=self.relation)] if self.mu > 0 else []
        if self.epsilon > 0 or self.delta > 0:
            out.append(Spend(label, epsilon=self.epsilon, delta=self.delta, relation=self.relation))
        return out


def _in_common(first: Cover, second: Cover) -> tuple[Cover, Cover]:
    """Both covers stated for their common relation (``relation_of``; mixing user levels is refused)."""
    relation = common_relation([first.relation, second.relation])
    return first.under(relation), second.under(relation)


def composes_within(budget: Budget, plans: Iterable[list[Spend]]) -> bool:
    """Whether any choice among ``plans`` -- even an adaptive one -- stays within ``budget``: their union cover
    (:meth:`Cover.of_any`), in the plans' common relation, composed at ``budget.delta``, its epsilon and delta
    both within the budget's (with no Gaussian part the deltas add up as they stand).  False where the plans
    mix relations that do not convert (two user levels, or a user level with another)."""
    try:
        cover = Cover.of_any(plans)
    except ValueError:
        return False
    return _within(cover.spends("any"), budget.delta, budget.epsilon * (1.0 - _TOLERANCE), budget.delta)


def largest_epsilon(
    budget: Budget, low: float, spends_at: Callable[[float], Iterable[list[Spend]]], high: float | None = None
) -> float:
    """The largest epsilon in ``[low, high]`` (``high``: ``budget.epsilon`` unless given) at which the lists of
    spends that ``spends_at(epsilon)`` gives -- the plans a run may choose among, even adaptively -- compose
    within ``budget``: their union cover (:meth:`Cover.of_any`), GDP composed exactly and converted at
    ``budget.delta``, found by bisection on the composed guarantee.  For a part planned beside others: splitting
    (epsilon, delta) as basic composition does (``low``) leaves room in GDP, which this gives to the part.
    ``low`` is returned where even it does not fit, or where the plans mix relations that do not convert; the
    ledger's check decides then (pure-epsilon spends compose by basic composition, so they stay at ``low``)."""

    def fits(epsilon: float) -> bool:
        return composes_within(budget, spends_at(epsilon))

    high = budget.epsilon if high is None else high
    if not fits(low):
        return low
    while high - low > 1e-7 * budget.epsilon:  # about 24 halvings: what is left unused is below 1e-7 of it
        middle = (low + high) / 2.0
        low, high = (middle, high) if fits(middle) else (low, middle)
    return low

"""One entry point's setup, in one place and one order: the run's ledger, its randomness and its oracle.

Every entry point that runs an algorithm -- ``KMeans.fit``, ``one_cluster``,
``elbow_curve``, ``ContinualKMeans``, a federated party (``federated.join``) and
the local protocol -- opens its run here (:func:`open_session`), after its own
parameters are checked and before any row is read:

1. the run's ledger (``fit_ledger``): its checked budget, under the caller's
   shared accountant, if any;
2. the warning the run owes its caller: not private (the baseline), or noise
   drawn from a seed;
3. its :class:`~privclust.privacy.noise.Randomness`;
4. its oracle and domain, from the privacy model's factory -- by default the
   central curator's over ``X`` (``queries.curator``); ``models.open_oracle``
   for the local and shuffle simulations; the stream's, a federated party's
   or the local protocol's own.

The oracle factory is given the ledger and the randomness and returns a
:class:`~privclust.queries.curator.Curated` (or a context manager yielding
one, closed when the session ends).
"""

from __future__ import annotations

from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, fields
from typing import Callable, ContextManager, Iterator

from .algorithms.base import FitContext
from .privacy.budget import Budget, PrivacyAccountant, PrivacyReport
from .privacy.leaks import warn_if_seeded, warn_leak
from .privacy.noise import Randomness
from .queries.curator import Curated, central_oracle, fit_ledger

__all__ = ["Session", "open_session"]

OracleFactory = Callable[[PrivacyAccountant, Randomness], object]


@dataclass(frozen=True)
class Session(Curated):
    """One run: what its privacy model's factory opened -- oracle, domain, width and the rows when they are in
    this process (:class:`~privclust.queries.curator.Curated`) -- with its budget, ledger and randomness (see
    the module docstring)."""

    budget: Budget | None  # None: not private (the baseline, or bounds read off the data)
    accountant: PrivacyAccountant
    randomness: Randomness

    def context(self, n_clusters: int, **public) -> FitContext:
        """The algorithm's view of the run: this oracle, budget and randomness, and the public options."""
        return FitContext(self.oracle, int(n_clusters), self.budget, self.randomness, **public)

    def report(self) -> PrivacyReport:
        """What the run spent, stated at its budget's delta."""
        return self.accountant.report(self.budget.delta if self.budget is not None else None)


def open_session(
    budget: Budget | None,
    bounds,
    X=None,
    *,
    parent: PrivacyAccountant | None = None,
    random_state=None,
    oracle: OracleFactory | None = None,
    not_private: str | None = None,
    seeded_noise: bool = True,
) -> ContextManager[Session]:
    """Open one run (see the module docstring); the oracle is opened by ``with`` and closed when it ends.

    ``oracle``: the privacy model's factory, by default the central curator's over ``X``.  ``not_private``:
    the warning a run without a budget gives.  ``seeded_noise=False``: ``random_state`` seeds public
    geometry only (a federated or local protocol's shared seed), so it warns of nothing.  The ledger is
    made and the warnings given here, in the caller's frame (a warning names the user's line)."""
    accountant = fit_ledger(budget, bounds, parent)
    if budget is None and not_private is not None:
        warn_leak(not_private)
    elif seeded_noise:
        warn_if_seeded(random_state)
    randomness = Randomness(random_state)
    if oracle is None:

        def oracle(accountant, randomness):
            return central_oracle(X, bounds, budget, accountant, randomness.noise)

    return _opened(budget, accountant, randomness, oracle(accountant, randomness))


@contextmanager
def _opened(budget, accountant, randomness, opened) -> Iterator[Session]:
    with nullcontext(opened) if isinstance(opened, Curated) else opened as curated:
        held = {f.name: getattr(curated, f.name) for f in fields(Curated)}
        yield Session(**held, budget=budget, accountant=accountant, randomness=randomness)

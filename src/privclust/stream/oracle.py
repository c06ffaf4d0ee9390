"""Continual observation: the queries are fixed once, and answered after every step of a changing data set.

**Neighbouring streams** (event level, Dupré la Tour, Henzinger & Saulpic (2024)): two streams of updates are
neighbours when one has one more item -- inserted at one step and possibly
deleted at a later one -- and they agree on every other update.  The guarantee
covers everything published over the whole public horizon T.

**The round.**  As in the local model, an algorithm's queries are all declared
before any update is read (one ``release_many``; no ``ADAPTIVE`` capability):
the stream cannot ask new questions of past data.  :class:`ContinualOracle` then
keeps one set of continual counters per query (``stream.counters``), one
counter per bucket and value column, and after every step publishes each
query's estimates -- the same :class:`~privclust.queries.base.Released` a
central release gives, with the error model of that step.

**Calibration and accounting.**  The plan's pool is one mu-GDP Gaussian budget,
split as the central oracle splits it: block b of a query gets
mu_b = mu_part sqrt(share_b).  Its counters' node noise is
sigma_b = tree_sensitivity(T) Delta_b / mu_b, so the whole horizon's nodes of the
block are mu_b-GDP (``stream.counters``: an insertion and its deletion move them
by at most sqrt(2 L) Delta_b), and the blocks and queries compose to mu.  The
spends are charged once, when the round is designed, for the whole horizon;
every published estimate afterwards is post-processing.

**Sparse queries** (huge bucket universes) keep counters only for buckets some
update touched, and publish a touched bucket at step t only when its first
value's estimate reaches Delta + std_t Phi^-1(1 - delta / T): a bucket that only
the one differing item touched (its true first value is at most Delta at every
step) clears that at some step of the horizon with probability at most delta
(a union bound over the T steps).  That delta is the part's selection delta,
charged like the central sparse release's.

**Deletions are the caller's promise.**  Whether a row was inserted before is a
fact about private data, so the oracle does not check it (no check, no
message, no exception can depend on it): a deletion is an update of the same
sensitivity as an insertion, with the contribution negated, and the counters
accept any.  Deleting a row that was never inserted cannot corrupt the state --
the counters keep estimating the running sum of the updates actually given --
but it makes that sum differ from the data the caller has in mind.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import norm

from ..privacy.budget import Budget, PrivacyAccountant, Spend
from ..privacy.noise import PartitionedNoise
from ..queries.base import Released, SumQuery, clip_blocks
from ..queries.plan import DENSE, SPARSE, Allotment, CapabilityError, Oracle, pooled_allotments
from .counters import ContinualCounters, tree_sensitivity

__all__ = ["ContinualOracle", "HorizonError", "StepNoise"]


class HorizonError(ValueError):
    """An update past the stream's public horizon (nothing was read or changed)."""


class StepNoise(PartitionedNoise):
    """The noise of each step: secure (OS entropy, not reproducible), or seeded per step from one root
    (counter-based: the noise of step t depends only on the root and t, so a resumed stream draws the
    same noise as an uninterrupted one).  ``at(step)`` is :meth:`PartitionedNoise.at`, steps for partitions."""


class ContinualOracle(Oracle):
    """Continual observation over a public horizon: one round of queries, answered after every step."""

    capabilities = frozenset({DENSE, SPARSE})
    model = "continual observation (queries fixed before the stream, answered at every step)"

    def __init__(
        self,
        n_features: int,
        budget: Budget,
        accountant: PrivacyAccountant,
        horizon: int,
        noise: StepNoise,
        mechanism: str = "honaker",
    ):
        if budget is None:
            raise ValueError("continual observation is a private release: it needs a budget")
        super().__init__(n_features, budget, accountant)
        self.horizon, self.noise, self.mechanism = int(horizon), noise, mechanism
        self.queries: list[SumQuery] = []
        self.counters: list[ContinualCounters] = []
        self._deltas: list[float] = []
        self._blocks: list[list[tuple[float, float]]] = []  # per query, per block: (sigma, l2 bound)

    @property
    def step(self) -> int:
        return self.counters[0].step if self.counters else 0

    def allot(self, parts, family):
        if family != "gaussian":
            raise CapabilityError(f"{self.model} adds Gaussian noise only (exact GDP accounting)")
        explicit = [p.name for p in parts if not p.pooled]
        if explicit:
            raise CapabilityError(
                f"{self.model} serves shares of its Gaussian pool only, not explicit costs {explicit}"
            )
        return pooled_allotments(self.budget, parts, family)

    def answer(self, requests: list[tuple[SumQuery, Allotment]]) -> list[Released]:
        if self.counters:
            raise CapabilityError(f"{self.model}: the queries are declared once, before the stream")
        spends = []
        for query, allotment in requests:
            sigmas, blocks = [], []
            for block, share in zip(query.blocks, query.shares()):
                mu = allotment.mu * math.sqrt(share)
                sigma = tree_sensitivity(self.horizon) * block.l2_bound / mu
                sigmas += [sigma] * block.width
                blocks.append((sigma, block.l2_bound))
                spends.append(Spend(f"{query.label}/{block.name} (continual, {self.horizon} steps)", mu=mu))
            if query.sparse:
                if allotment.delta <= 0:
                    raise ValueError(f"the sparse query {query.label!r} needs a partition-selection delta in its part")
                spends.append(Spend(f"{query.label}/threshold (continual)", delta=allotment.delta))
            dense = None if query.sparse else query.n_buckets
            self.queries.append(query)
            self.counters.append(ContinualCounters(self.horizon, sigmas, self.mechanism, dense))
            self._deltas.append(allotment.delta)
            self._blocks.append(blocks)
        self.accountant.check(spends)
        for spend in spends:
            self.accountant.spend(spend)
        return self.releases()

    def update(self, insert: np.ndarray | None, delete: np.ndarray | None) -> None:
        """One step: add the contributions of ``insert`` (unit-box rows), subtract those of ``delete``, and
        close the step.  Refused past the horizon, before anything changes."""
        if not self.counters:
            raise RuntimeError("the oracle has no queries yet: declare them (release_many) before the stream")
        if self.step >= self.horizon:
            raise HorizonError(
                f"the stream's horizon of {self.horizon} steps is over: no update was applied. The guarantee "
                "covers the declared horizon only; start a new stream (with its own budget) to go on."
            )
        noise = self.noise.at(self.step + 1)
        for query, counters in zip(self.queries, self.counters):
            for rows, sign in ((insert, 1.0), (delete, -1.0)):
                if rows is None or rows.shape[0] == 0:
                    continue
                buckets, values = query.contribution(rows)
                values = clip_blocks(np.asarray(values, dtype=np.float64), query)
                counters.add(buckets, sign * values, noise)
        for counters in self.counters:
            counters.end_step(noise)

    def releases(self) -> list[Released]:
        """Every query's estimates at the current step, with their error model."""
        return [self._release(i) for i in range(len(self.queries))]

    def _release(self, i: int) -> Released:
        query, counters = self.queries[i], self.counters[i]
        estimates, std = counters.estimates(), counters.std()
        ids = None
        if query.sparse:
            first_std, first_bound = counters.std()[0], self._blocks[i][0][1]
            keep = estimates[:, 0] >= sparse_threshold(first_bound, first_std, self._deltas[i], self.horizon)
            if self.step == 0:
                keep[:] = False
            order = np.argsort(counters.ids[keep], kind="stable")
            ids, estimates = counters.ids[keep][order], estimates[keep][order]
        values, stds = {}, {}
        for block, cols in query.block_slices():
            values[block.name] = estimates[:, cols]
            stds[block.name] = float(std[cols.start])
        return Released(values, stds, ids)

    @property
    def nbytes(self) -> int:
        """The memory the counters hold (touched sparse buckets and dense universes, times 2 L values).
        **Not public**: the touched sparse buckets depend on the data -- for benchmarks on synthetic data."""
        return sum(c.nbytes for c in self.counters)


def sparse_threshold(bound: float, std: float, delta: float, horizon: int) -> float:
    """A bucket whose true first value stays at most ``bound`` clears this at some step of the horizon
    with probability at most ``delta`` (estimates of standard deviation ``std``; a union bound)."""
    return float(bound + std * norm.isf(delta / horizon))

"""The central model: a trusted curator holds the rows and adds the noise.

:class:`CentralOracle` serves a plan (``queries.plan``) over any
:class:`~privclust.queries.rows.Rows` -- an in-memory array or memory map, or
a Spark DataFrame whose executors compute the exact sums -- so where the rows
live never touches the privacy argument.  For each release it computes the
exact clipped per-bucket sums (one pass for a batch), calibrates each block's
noise from the release's allotment and the block's share:

* a Gaussian pool (mu-GDP): block mu_b = mu sqrt(share_b), noise std =
  l2 bound / mu_b, so the blocks compose to exactly mu;
* a Laplace (pure) allotment: block epsilon_b = epsilon share_b, scale =
  l1 bound / epsilon_b, so the blocks add up to exactly epsilon;

adds the noise once, and records every block's spend.  At user level
(``privacy.unit``: the rows are bounded to m per user where they live) every
sensitivity is m times a row's and a sparse release's threshold covers m new
buckets.  A sparse query
(a huge universe of buckets) is answered by Gaussian (or Laplace) partition
selection: the buckets whose exact first value reaches one row's most (the
listing floor) get the block noise, and a bucket is kept when its noisy first
value reaches the threshold that a bucket only one neighbour lists clears
with probability at most the release's delta; that delta is charged too.

A sparse query that ``narrows`` (the greedy's finer levels) is answered only
at the candidates it names from the significant buckets of the release
before it in the batch (``queries.base.significant_buckets``): the exact sums
of the one pass are restricted to them before any noise is drawn, as if the
contribution were -1 elsewhere.  The candidates are a public function of an
earlier release (post-processing), so each release keeps its guarantee under
adaptive composition, and a fine level whose coarser one kept nothing draws
no noise at all (with secure noise, that was most of a large fit's time).  Rows
held in memory sum such a release in a pass of its own, after the release it
narrows from, and skip the pass when there is no candidate: the exact answer
at no candidate is empty whatever the rows.  Which passes run is thus a
function of released values, as the candidates are (memory-mapped and Spark
rows answer the whole batch in one pass instead, where a pass is a read).

Histogram queries (``queries.histogram``: the private box's per-feature counts
of the input's own coordinates) are counted where the rows live and noised as
one array by the mechanism calibrated for their declared sensitivities (m
times them at user level), through the same :func:`calibrated` as every block.

Mechanisms that are not noisy sums (the exponential mechanism
over exact counts, NoisyAVG, the sparse vector) run through ``run_exact``:
their proven cost is checked before the rows are read and recorded after.
See ``queries.base`` for the shared privacy argument.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..privacy.budget import Budget, PrivacyAccountant, Spend
from ..privacy.mechanisms import GaussianMechanism, LaplaceMechanism, NonPrivate
from ..privacy.noise import NoiseSource, PartitionedNoise
from ..privacy.unit import ROW, PrivacyUnit
from .base import Released, SumQuery, significant_buckets
from .histogram import COUNTS, HistogramQuery, Query
from .plan import (
    ADAPTIVE,
    DENSE,
    DISTRIBUTED,
    EXACT,
    HISTOGRAMS,
    LAPLACE,
    SAMPLED,
    SPARSE,
    Allotment,
    CapabilityError,
    Oracle,
    pooled_allotments,
)
from .reduce import tree_height
from .rows import MemoryRows, Rows, empty_answer

__all__ = [
    "CentralOracle",
    "ExactAccess",
    "PartitionNoiser",
    "block_mechanisms",
    "calibrated",
    "noised",
    "release_spends",
    "sparse_threshold",
    "listing_floor",
    "in_memory",
]


def block_mechanisms(query: SumQuery, allotment: Allotment, group: int = 1) -> list:
    """Each block's mechanism for a release with ``allotment`` (see the module docstring), calibrated for
    ``group`` rows changed at once (a user-level unit's m: by the triangle inequality, m rows clipped to a
    block's bound move its sums by at most m times the bound, in l2 and in l1)."""
    return [
        calibrated(group * block.l2_bound, group * block.l1_bound, allotment, share)
        for block, share in zip(query.blocks, query.shares())
    ]


def calibrated(l2: float, l1: float, allotment: Allotment, share: float = 1.0):
    """The mechanism for ``share`` of ``allotment`` on values of l2 sensitivity ``l2`` and l1 sensitivity ``l1``:
    Gaussian at mu sqrt(share) for a GDP allotment, Laplace at epsilon share for a pure one, none when exact."""
    if allotment.exact:
        return NonPrivate()
    if allotment.mu is not None:
        return GaussianMechanism(l2, l2 / (allotment.mu * math.sqrt(share)))
    return LaplaceMechanism(l1, l1 / (allotment.epsilon * share))


def noise_std(mechanism) -> float:
    if isinstance(mechanism, GaussianMechanism):
        return mechanism.std
    if isinstance(mechanism, LaplaceMechanism):
        return mechanism.scale * math.sqrt(2.0)
    return 0.0


def listing_floor(mechanism) -> float:
    """The exact first value a bucket of a sparse release must reach to be noised at all: one row's most.

    Buckets below it are never noised (most of a fine level's non-empty buckets hold a row or two, and
    every secure draw costs ~10 us), and the keep-threshold is raised by as much (:func:`sparse_threshold`),
    so the release stays Gaussian partition selection with the same delta: a bucket that only one of two
    neighbours lists has exact first value below floor + sensitivity there (its value in the other
    neighbour is below the floor, or it is absent there and holds only the changed row), and clears
    floor + sensitivity + std z(delta) with probability at most delta.  A bucket both list is the
    Gaussian release it always was."""
    return float(mechanism.sensitivity)


def sparse_threshold(mechanism, delta: float, group: int = 1) -> float:
    """The keep-threshold of a sparse release: a bucket that only one of two neighbours lists (exact first
    value below ``listing_floor`` + the sensitivity) clears it with probability ``delta``.

    With ``group`` rows changed at once (a user's m rows; the mechanism's sensitivity is then m times a
    row's), the change may add up to ``group`` buckets, each with first value at most the sensitivity: each
    clears the threshold with probability ``delta / group``, so any of them does with probability at most
    ``delta`` (union bound)."""
    from scipy.stats import norm

    if not 0 < delta < 1:
        raise ValueError(f"the sparse release's delta must lie in (0, 1), got {delta!r}")
    per_bucket = delta / group
    reach = listing_floor(mechanism) + mechanism.sensitivity  # what such a bucket's exact first value stays under
    if isinstance(mechanism, LaplaceMechanism):  # P[Lap(b) >= t] = exp(-t / b) / 2
        return float(reach + mechanism.scale * math.log(1.0 / (2.0 * per_bucket)))
    return float(reach + mechanism.std * norm.isf(per_bucket))


def _among(total: tuple[np.ndarray, np.ndarray], candidates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A sparse answer's (ids, sums) restricted to the buckets ``candidates`` names: the answer of the same
    query whose contribution is -1 outside them."""
    ids, sums = total
    candidates = np.sort(candidates)  # found by bisection: np.isin took 10 ms on the greedy's 20,000 candidates
    at = np.minimum(np.searchsorted(candidates, ids), max(candidates.size - 1, 0))
    inside = candidates[at] == ids if candidates.size else np.zeros(ids.size, dtype=bool)
    return ids[inside], sums[inside]


def _narrowed(query: SumQuery) -> bool:
    return query.sparse and query.narrows is not None


def release_spends(
    query: SumQuery, mechanisms: list, allotment: Allotment, unit: PrivacyUnit = ROW
) -> tuple[list[Spend], float | None]:
    """What a release charges (stated for ``unit``'s neighbours), and the keep-threshold of a sparse one
    (None: keep every bucket)."""
    spends = [unit.stated(m.spend(f"{query.label}/{b.name}")) for b, m in zip(query.blocks, mechanisms)]
    if not query.sparse or allotment.exact:
        return spends, None
    if allotment.delta <= 0:
        raise ValueError(f"the sparse release {query.label!r} needs a partition-selection delta in its part")
    spends.append(unit.stated(Spend(f"{query.label}/threshold", delta=allotment.delta)))
    return spends, sparse_threshold(mechanisms[0], allotment.delta, unit.max_rows)


def noised(query: SumQuery, mechanisms, total, noise: NoiseSource, threshold: float | None) -> Released:
    """Exact sums (a dense array, or a sparse answer's (ids, sums)) noised block by block; a sparse
    release noises the buckets whose exact first value reaches the listing floor and keeps those whose
    noisy first value clears ``threshold``."""
    ids = None
    if query.sparse:
        ids, total = total
    if threshold is not None:
        first = query.block_slices()[0][1].start
        listed = total[:, first] >= listing_floor(mechanisms[0])
        ids, total = ids[listed], total[listed]
    values, std = {}, {}
    for (block, cols), mechanism in zip(query.block_slices(), mechanisms):
        values[block.name] = mechanism.apply(total[:, cols], noise)
        std[block.name] = noise_std(mechanism)
    if threshold is not None:
        keep = values[query.blocks[0].name][:, 0] >= threshold
        ids, values = ids[keep], {name: v[keep] for name, v in values.items()}
    return Released(values, std, ids)


@dataclass(frozen=True)
class PartitionNoiser:
    """One sparse release's noise for the buckets of one partition, drawn where they live (picklable).

    Partition p draws from its own source ``noise.at(p)``; each bucket lives in exactly one partition, so
    every bucket is noised once, from the release's mechanism (``queries.reduce``)."""

    query: SumQuery
    mechanisms: tuple
    threshold: float | None
    noise: PartitionedNoise

    def __call__(self, partition: int, total: tuple[np.ndarray, np.ndarray]) -> Released:
        return noised(self.query, self.mechanisms, total, self.noise.at(partition), self.threshold)


class ExactAccess:
    """What a central-model mechanism may read -- the rows, exact sums -- and the noise it may draw."""

    def __init__(self, rows: Rows, noise: NoiseSource):
        self._rows, self.noise = rows, noise

    def map_rows(self, fn: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """``fn`` applied to every chunk of rows (unit-box coordinates), results concatenated in row order."""
        return self._rows.map_rows(fn)

    def sums(self, query: SumQuery):
        """The exact clipped sums of ``query`` (dense array, or (ids, sums) for a sparse query)."""
        return self._rows.sums([query])[0]


class CentralOracle(Oracle):
    """The trusted curator over ``rows``: Gaussian or Laplace noise on exact sums, and exact access."""

    capabilities = frozenset({DENSE, SPARSE, ADAPTIVE, EXACT, LAPLACE, HISTOGRAMS})
    model = "the central model"

    def __init__(
        self,
        rows: Rows,
        budget: Budget | None,
        accountant: PrivacyAccountant,
        noise: NoiseSource,
        unit: PrivacyUnit = ROW,
    ):
        super().__init__(rows.n_features, budget, accountant)
        self.rows, self.noise, self.unit = rows, noise, unit
        if unit.user:  # the rows are bounded to unit.max_rows per user where they live (privacy.unit.UserBound)
            self.model = f"the central model at user level (at most {unit.max_rows} rows per user)"
        if rows.distributed:
            self.capabilities = self.capabilities | {DISTRIBUTED}
        if rows.samplable:  # in memory without a pass over the rows; on Spark by the executors' coins
            self.capabilities = self.capabilities | {SAMPLED}

    def sampled(self, rate, rng):
        """The same curator (budget, ledger, noise) over a Poisson sample of the rows; see ``Plan.on_sample``."""
        if SAMPLED not in self.capabilities:
            return super().sampled(rate, rng)
        out = copy.copy(self)
        out.rows = self.rows.poisson_sample(rate, rng)
        return out

    def allot(self, parts, family):
        return pooled_allotments(self.budget, parts, family)

    def answer(self, requests: list[tuple[Query, Allotment]]) -> list[Released]:
        if any(isinstance(query, HistogramQuery) for query, _ in requests):
            return self._histograms(requests)
        for query, _ in requests:
            if query.sparse and SPARSE not in self.capabilities:
                raise CapabilityError(f"{self.model} has no sparse release")
        # Rows in memory: a narrowed release is summed in a pass of its own once the release it narrows from is
        # out, and not at all when that names no candidate.  Elsewhere one pass answers the whole batch.
        later = [bool(i) and _narrowed(query) and self.rows.in_memory for i, (query, _) in enumerate(requests)]
        exact = iter(self.rows.sums([query for (query, _), wait in zip(requests, later) if not wait]))
        out = []
        for (query, allotment), wait in zip(requests, later):
            if wait:
                candidates = query.narrows(significant_buckets(out[-1]))
                total = _among(self.rows.sums([query])[0] if candidates.size else empty_answer(query), candidates)
            else:
                total = next(exact)
                if _narrowed(query) and out:
                    total = _among(total, query.narrows(significant_buckets(out[-1])))
            out.append(self._noised(query, allotment, total))
        return out

    def _noised(self, query: SumQuery, allotment: Allotment, total) -> Released:
        mechanisms = block_mechanisms(query, allotment, self.unit.max_rows)
        spends, threshold = release_spends(query, mechanisms, allotment, self.unit)
        released = noised(query, mechanisms, total, self.noise, threshold)
        for spend in spends:
            self.accountant.spend(spend)
        return released

    def _histograms(self, requests: list[tuple[HistogramQuery, Allotment]]) -> list[Released]:
        """Noisy per-feature histograms (``queries.histogram``), counted in one pass where the rows live -- in
        the input's own coordinates, at user level over the kept rows -- each noised as one array by a mechanism
        calibrated for its sensitivities (m times them at user level), and charged as it is released."""
        if not all(isinstance(query, HistogramQuery) for query, _ in requests):
            raise ValueError("histograms of the input's own coordinates are released apart from unit-box sums")
        exact = self.rows.histograms([query for query, _ in requests])
        out = []
        for (query, allotment), counts in zip(requests, exact):
            group = self.unit.max_rows
            mechanism = calibrated(group * query.l2_bound, group * query.l1_bound, allotment)
            spend = self.unit.stated(mechanism.spend(query.label))
            out.append(Released({COUNTS: mechanism.apply(counts, self.noise)}, {COUNTS: noise_std(mechanism)}))
            self.accountant.spend(spend)
        return out

    def answer_reduced(self, requests):
        """Dense releases as usual, reduced on the driver; sparse ones noised and reduced where their buckets
        live (``queries.reduce``), charged before any of it runs."""
        top = tree_height(self.rows.partitions)
        out: list = [None] * len(requests)
        dense = [i for i, (query, _, _) in enumerate(requests) if not query.sparse]
        if dense:  # (no pass for none)
            for i, released in zip(dense, self.answer([requests[i][:2] for i in dense])):
                out[i] = requests[i][2].select(released, top, top)
        sparse = [i for i, (query, _, _) in enumerate(requests) if query.sparse]
        if sparse:
            self.rows.check_values()  # before the charges below, which precede the pass
        noisers = []
        for i in sparse:
            query, allotment, _ = requests[i]
            mechanisms = block_mechanisms(query, allotment, self.unit.max_rows)
            spends, threshold = release_spends(query, mechanisms, allotment, self.unit)
            for spend in spends:
                self.accountant.spend(spend)
            noisers.append(PartitionNoiser(query, tuple(mechanisms), threshold, self.noise.partitioned()))
        if sparse:
            queries = [requests[i][0] for i in sparse]
            reduced = self.rows.reduced(queries, noisers, [requests[i][2] for i in sparse])
            for i, released in zip(sparse, reduced):
                out[i] = released
        return out

    def run_exact(self, spends: list[Spend], mechanism):
        self.require({EXACT}, "a mechanism over exact rows")  # refused at user level (privacy.unit)
        self.accountant.check(spends)
        out = mechanism(ExactAccess(self.rows, self.noise))
        for spend in spends:
            self.accountant.spend(spend)
        return out


def in_memory(
    X: np.ndarray,
    budget: Budget | None = None,
    accountant: PrivacyAccountant | None = None,
    noise: NoiseSource | None = None,
    transform=None,
    chunk_rows: int | None = None,
) -> CentralOracle:
    """A central oracle over an array already in the unit box (tests, benchmarks, building blocks)."""
    accountant = accountant if accountant is not None else PrivacyAccountant(budget)
    rows = MemoryRows(X, np.shape(X)[1], transform=transform, chunk_rows=chunk_rows)
    return CentralOracle(rows, budget, accountant, noise)

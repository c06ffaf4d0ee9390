"""The local model: every user randomizes their own contribution once; the server sees only reports.

**One round.** The local model here is non-interactive: an algorithm's queries are
all fixed before any report is read (``release_many`` once; no ``ADAPTIVE``
capability), so each device sends a single report and is never asked again.

**Users spread over queries** (Dupré la Tour, Henzinger & Saulpic 2024, Lemma B.2).  A point belongs to one
bucket of every query; a user answering all Q queries would split epsilon Q ways.
Instead every user reports on *one* query, drawn with probability equal to the
query's share of the plan -- the shares the algorithm declared -- from public
randomness that does not depend on the data, and spends all of epsilon on it.
The server scales each query's estimates by 1 / share, which is unbiased
(E[users of q holding v] = share_q x #holders of v).  Per user the round is
epsilon-LDP: the choice of query says nothing about the point, and the report is
an epsilon-LDP randomizer of it.  The number of users (reports) is public in this
model; the guarantee protects what each user's report says.

**Per query** (:class:`LocalQuery`):

* *histogram* -- one block, a count or a value in [0, bound]: randomized rounding
  keeps the user's bucket with probability value / bound, else the user reports
  the extra symbol "none"; a frequency oracle over the n_buckets + 1 symbols
  gives unbiased per-bucket sums (bound times the estimated count);
* *vector* -- anything else: the bucket (or "none") through a frequency oracle at
  ``bucket_share`` x epsilon, and the non-count blocks' values, each divided by
  its coordinate bound (or its norm bound; so every coordinate lies in [-1, 1],
  and is clipped there by the randomizer), through the one-coordinate
  randomizer at the rest of epsilon (basic composition within the report).  The
  sum over bucket c is the sum over users of w_c(report) z, with w_c the
  frequency oracle's unbiased indicator weight and z the value estimate:
  independent given the user's point, so the product is unbiased.  Count blocks
  come from the bucket reports alone.

The randomizers are in ``local.frequency``; :class:`LocalRound` is the whole
round, shared by the simulated oracle (:class:`LocalOracle`, every row one user)
and the deployed devices and server (``local.protocol``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..privacy.budget import REPLACE_ONE, Budget, PrivacyAccountant, Spend
from ..queries.base import Block, Released, SumQuery, significant_buckets
from ..queries.plan import DENSE, SPARSE, CapabilityError, Oracle
from ..queries.rows import Rows
from .frequency import LocalHashing, OneCoordinate, frequency_oracle

__all__ = ["REPORT", "UserShare", "LocalQuery", "LocalRound", "LocalOracle", "DEFAULT_BUCKET_SHARE"]

# One report, 27 bytes: the query it answers, the frequency oracle's output (hash function, value), for
# vector queries the one-coordinate randomizer's output (coordinate, bit), and the device's nonce (16 random
# bytes from the OS CSPRNG, independent of the point: the server refuses a nonce it has seen, so a batch
# cannot be counted twice; the simulation, which tallies its own reports, leaves it zero).
REPORT = np.dtype([("query", "<u2"), ("hash", "<u2"), ("y", "<u4"), ("coord", "<u2"), ("bit", "i1"), ("nonce", "V16")])
DEFAULT_BUCKET_SHARE = 0.5  # of a vector report's epsilon, for its bucket


@dataclass(frozen=True)
class UserShare:
    """A local part's allotment: a share of the users (each reports on one query with all of epsilon)."""

    share: float

    def fraction(self, f: float) -> "UserShare":
        return UserShare(self.share * f)

    def spends(self, label: str) -> list[Spend]:
        return []  # the round costs each user epsilon once, charged by the oracle as one spend


def _coordinate_scale(block: Block) -> float:
    """What a value's coordinates are divided by to lie in [-1, 1]: the declared coordinate bound, else the
    norm bound (which bounds every coordinate too)."""
    return block.coordinate_bound if block.coordinate_bound is not None else block.bound


def _histogram_block(query: SumQuery) -> Block | None:
    """The query's one block if it is a count or a scalar value (then randomized rounding applies)."""
    if len(query.blocks) == 1 and query.blocks[0].width == 1:
        return query.blocks[0]
    return None


@dataclass(frozen=True)
class LocalQuery:
    """How the users assigned to one query report it: public, fixed before any report."""

    query: SumQuery
    share: float
    buckets: object  # a frequency oracle over n_buckets + 1 symbols ("none" is the last)
    values: OneCoordinate | None  # vector queries: the non-count blocks' values

    @classmethod
    def design(
        cls, query: SumQuery, share: float, epsilon: float, seed: int, bucket_share: float, users: float
    ) -> "LocalQuery":
        """``users``: the expected number of reports for this query (public in the local model)."""
        symbols = query.n_buckets + 1
        if _histogram_block(query) is not None:
            return cls(query, share, frequency_oracle(symbols, epsilon, seed, users), None)
        width = sum(b.width for b in query.blocks if not b.count)
        if width == 0:
            raise ValueError(f"query {query.label!r}: only one count block per query is supported locally")
        eps_bucket = epsilon * bucket_share
        buckets = frequency_oracle(symbols, eps_bucket, seed, users)
        return cls(query, share, buckets, OneCoordinate(width, epsilon - eps_bucket))

    @property
    def none(self) -> int:
        return self.query.n_buckets

    def _value_columns(self) -> list[tuple[Block, slice]]:
        return [(b, cols) for b, cols in self.query.block_slices() if not b.count]

    def randomize(self, buckets: np.ndarray, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The reports of users with these (bucket, clipped value row) contributions."""
        buckets = np.asarray(buckets, dtype=np.int64)
        out = np.zeros(buckets.size, dtype=REPORT)
        block = _histogram_block(self.query)
        if block is not None:
            weight = np.ones(buckets.size) if block.count else np.clip(values[:, 0] / block.bound, 0.0, 1.0)
            symbols = np.where((buckets >= 0) & (rng.random(buckets.size) < weight), buckets, self.none)
        else:
            symbols = np.where(buckets >= 0, buckets, self.none)
            scaled = np.hstack([values[:, cols] / _coordinate_scale(b) for b, cols in self._value_columns()])
            coordinates = self.values.randomize(scaled, rng)
            out["coord"], out["bit"] = coordinates[:, 0], coordinates[:, 1]
        reports = self.buckets.randomize(symbols, rng)
        if reports.ndim == 2:  # local hashing: (hash function, value)
            out["hash"], out["y"] = reports[:, 0], reports[:, 1]
        else:
            out["y"] = reports
        return out

    @property
    def _hashed(self) -> bool:
        return isinstance(self.buckets, LocalHashing)

    def _cells(self, reports: np.ndarray) -> np.ndarray:
        """Each report's cell of the frequency oracle's output table."""
        if self._hashed:
            return reports["hash"].astype(np.int64) * self.buckets.g + reports["y"].astype(np.int64)
        return reports["y"].astype(np.int64)

    def _table_size(self) -> int:
        return self.buckets.hash_functions * self.buckets.g if self._hashed else self.none + 1

    def _check(self, reports: np.ndarray) -> None:
        """Refuse reports no honest device of this round could send (a cell beyond the oracle's table, a
        coordinate beyond the vector, a bit other than -1 or +1): they would land in another cell."""
        if not reports.size:
            return
        bad = reports["y"] >= (self.buckets.g if self._hashed else self.none + 1)
        if self._hashed:
            bad |= reports["hash"] >= self.buckets.hash_functions
        if self.values is not None:
            bad |= (reports["coord"] >= self.values.width) | ~np.isin(reports["bit"], (-1, 1))
        if np.any(bad):
            raise ValueError(
                "a report has a field out of range for this protocol (a damaged or forged report): the batch is refused"
            )

    def tally(self, reports: np.ndarray) -> "Tally":
        """The additive summary the server keeps of this query's reports."""
        self._check(reports)
        cells = self._cells(reports)
        size = self._table_size()
        counts = np.bincount(cells, minlength=size).astype(np.float64)
        sums = None
        if self.values is not None:
            width = self.values.width
            contribution = reports["bit"].astype(np.float64) * width * self.values.scale
            flat = cells * width + reports["coord"].astype(np.int64)
            sums = np.bincount(flat, weights=contribution, minlength=size * width).reshape(size, width)
        return Tally(counts, sums, float(reports.size))

    def _decode(self, table: np.ndarray, total, candidates: np.ndarray) -> np.ndarray:
        """Unbiased estimates for the ``candidates`` buckets from a table of the oracle's output cells."""
        if self._hashed:
            table = table.reshape(self.buckets.hash_functions, self.buckets.g, *table.shape[1:])
        return self.buckets.estimate(table, total, candidates)

    def release(self, tally: "Tally", candidates: np.ndarray | None = None) -> Released:
        """The query's estimated sums over all users (scaled by 1 / share), and their noise: for every bucket,
        or for the ``candidates`` of a sparse query (then ``ids`` lists them)."""
        ids = None if candidates is None else np.asarray(candidates, dtype=np.int64)
        wanted = np.arange(self.query.n_buckets) if ids is None else ids
        n = tally.reports
        raw = self._decode(tally.counts, n, wanted)
        counts = raw / self.share
        variance = max(n, 1.0) * self.buckets.variance()
        if self._hashed:
            # Heavy values collide with every candidate under the shared hash functions: the decoded buckets
            # and the "none" symbol (most reports, after randomized rounding), their squared counts estimated
            # from the estimates themselves (post-processing).
            none = self._decode(tally.counts, n, np.array([self.none]))
            heavy = float(np.sum(np.maximum(raw, 0.0) ** 2) + np.maximum(none, 0.0).sum() ** 2)
            variance += self.buckets.collision_variance(heavy)
        count_std = math.sqrt(variance) / self.share
        values, std = {}, {}
        block = _histogram_block(self.query)
        if block is not None:
            values[block.name] = (counts * block.bound)[:, None]
            std[block.name] = count_std * block.bound
            return Released(values, std, ids)
        sums = self._decode(tally.sums, tally.sums.sum(axis=0), wanted) / self.share
        value_std = math.sqrt(variance * (1.0 + 1.0 / self.buckets.variance()) * self.values.variance()) / self.share
        start = 0
        for b in self.query.blocks:
            if b.count:
                values[b.name], std[b.name] = counts[:, None], count_std
            else:
                scale = _coordinate_scale(b)
                values[b.name], std[b.name] = sums[:, start : start + b.width] * scale, value_std * scale
                start += b.width
        return Released(values, std, ids)


@dataclass
class Tally:
    """Additive summary of one query's reports: counts per output cell, and value sums for vector queries."""

    counts: np.ndarray
    sums: np.ndarray | None
    reports: float

    def merge(self, other: "Tally") -> "Tally":
        sums = None if self.sums is None else self.sums + other.sums
        return Tally(self.counts + other.counts, sums, self.reports + other.reports)


@dataclass(frozen=True)
class LocalRound:
    """The one round of a local protocol: every query with its share of the users and its randomizers."""

    queries: tuple[LocalQuery, ...]
    epsilon: float

    @classmethod
    def design(
        cls, requests, epsilon: float, seed: int, users: float, bucket_share: float = DEFAULT_BUCKET_SHARE
    ) -> "LocalRound":
        """``requests``: (query, share of the users) pairs, the shares normalised to sum to 1; ``users``: the
        (public) number of users the round is sized for."""
        requests = list(requests)
        if not requests:
            raise ValueError("a local round needs at least one query")
        total = sum(share for _, share in requests)
        queries = tuple(
            LocalQuery.design(query, share / total, epsilon, seed + i, bucket_share, users * share / total)
            for i, (query, share) in enumerate(requests)
        )
        return cls(queries, float(epsilon))

    @property
    def shares(self) -> np.ndarray:
        return np.array([q.share for q in self.queries])

    def assign(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """Which query each of ``n`` users answers: public randomness, independent of the data."""
        return rng.choice(len(self.queries), size=n, p=self.shares)

    def report(self, index: int, buckets, values, rng: np.random.Generator) -> np.ndarray:
        """Reports of users answering query ``index`` with these contributions."""
        out = self.queries[index].randomize(buckets, values, rng)
        out["query"] = index
        return out

    def tally(self, reports: np.ndarray) -> list[Tally]:
        """One additive summary per query of a batch of reports (in any order)."""
        reports = np.asarray(reports, dtype=REPORT)
        if reports.size and int(reports["query"].max()) >= len(self.queries):
            raise ValueError("a report names a query this round does not have (another protocol's report?)")
        return [q.tally(reports[reports["query"] == i]) for i, q in enumerate(self.queries)]

    def release(self, tallies: list[Tally]) -> list[Released]:
        """Every query's estimates.  A sparse query is decoded at the candidates its ``narrows`` names from the
        buckets kept by the query before it -- those whose estimate is significant over the buckets decoded
        there (hierarchical decoding: all from the same round of reports)."""
        out, kept = [], None
        for query, tally in zip(self.queries, tallies):
            candidates = None
            if query.query.sparse:
                candidates = query.query.narrows(kept) if kept is not None else np.zeros(0, dtype=np.int64)
            released = query.release(tally, candidates)
            out.append(released)
            kept = significant_buckets(released)
        return out


def user_shares(model: str, parts) -> dict[str, UserShare]:
    """A one-round model's allotments: each part gets its share of the users (each reports once, with
    all of epsilon); a part with an explicit cost cannot be served."""
    explicit = [p.name for p in parts if not p.pooled]
    if explicit:
        raise CapabilityError(f"{model} serves shares of its users only, not explicit costs ({explicit})")
    total = sum(p.share for p in parts)
    return {p.name: UserShare(p.share / total) for p in parts}


class LocalOracle(Oracle):
    """The local model, simulated end to end: every row is one user who sends one randomized report."""

    capabilities = frozenset({DENSE, SPARSE})
    model = "the local model (one round of reports, no adaptive rounds, no exact access)"

    def __init__(
        self,
        rows: Rows,
        epsilon: float,
        accountant: PrivacyAccountant,
        rng: np.random.Generator,
        seed: int,
        bucket_share: float = DEFAULT_BUCKET_SHARE,
    ):
        super().__init__(rows.n_features, Budget(epsilon), accountant)
        self.rows, self.rng, self.seed, self.bucket_share = rows, rng, int(seed), float(bucket_share)
        self.local_epsilon = float(epsilon)
        self._answered = False
        self.reports: np.ndarray | None = None  # the round's reports, as the server received them

    def round_spend(self) -> Spend:
        # epsilon-LDP: one user's point replaced, their report's law moves by at most e^epsilon.  The number of
        # users is public here, so it is a replace-one guarantee (composed as such: privacy.budget).
        return Spend("local reports: one per user, each epsilon-LDP", epsilon=self.local_epsilon, relation=REPLACE_ONE)

    def allot(self, parts, family):
        return user_shares(self.model, parts)

    def reserved(self, plan):
        return [self.round_spend()]

    def design(self, requests) -> LocalRound:
        if self._answered:
            raise CapabilityError(f"{self.model}: an algorithm may release once (every user reports once)")
        for query, _ in requests:
            if query.sparse and query.narrows is None:
                raise CapabilityError(f"{self.model} decodes a sparse query only at candidates a coarser one names")
        pairs = [(q, a.share) for q, a in requests]
        return LocalRound.design(pairs, self.local_epsilon, self.seed, self.rows.count(), self.bucket_share)

    def collect(self, round_: LocalRound) -> np.ndarray:
        """Every user's report, as the devices would send them."""
        assignment = round_.assign(self.rows.count(), self.rng)
        batches = []
        for index, query in enumerate(round_.queries):
            users = np.flatnonzero(assignment == index)
            buckets, values = self.rows.contributions(query.query, users)
            batches.append(round_.report(index, buckets, values, self.rng))
        return np.concatenate(batches) if batches else np.zeros(0, dtype=REPORT)

    def answer(self, requests):
        round_ = self.design(requests)
        self.reports = self.collect(round_)
        self._answered = True
        self.accountant.spend(self.round_spend())
        return round_.release(round_.tally(self.reports))

"""Where the rows live: one piece every privacy model composes with its noise.

A :class:`Rows` holds private rows somewhere -- an in-memory array or a memory
map (:class:`MemoryRows`), a Spark DataFrame (``queries.spark.SparkRows``), one
federated party's rows -- and answers the questions an oracle may ask of
them, in the unit box of the declared bounds (the histograms excepted):

* ``sums(queries)``: the exact clipped per-bucket sums of several queries in
  one pass over the rows (dense, or the non-empty buckets of a sparse query);
* ``contributions(query)``: every row's own clipped (bucket, value), chunk by
  chunk -- what each device computes in the local model;
* ``map_rows(fn)``: exact rows mapped by ``fn`` -- for the central model's
  exact-access mechanisms only;
* ``histograms(queries)``: exact per-feature counts of the rows in the input's
  own coordinates (``queries.histogram``) -- what a private box is found from,
  before there is a domain to map into.

At user level (``privacy.unit``) the rows keep at most m per user where they
live: :class:`MemoryRows` answers every question over the rows a
``UserBound`` keeps (chosen from the user ids and secret coins on first use),
``SparkRows`` over a frame its executors bound the same way.

Nothing here adds noise or charges a budget: that is the oracle's job.  Rows
are validated (numeric, finite) and mapped into the unit box lazily, on the
first question, so an oracle can check a plan against the budget before any
row is read.

Speed: an in-memory array is transformed once, on first use (chunks already
inside the unit box are kept as views, not copied), with each row's squared
norm cached; memory-mapped input is transformed chunk by chunk on every pass
instead, so arrays larger than memory work, and each chunk's pages of the map are
given back once it is done (``privclust._pages``).  Chunks are processed on every
core.  Voronoi-cell queries and row counts take exact shortcuts
(``queries.voronoi``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Callable, TypeVar

import numpy as np
from scipy import sparse

from .._pages import drop_pages, gather_rows
from .._parallel import imap_chunks, map_chunks
from .._validation import check_data, check_int
from ..privacy.unit import UserBound
from .base import ROW_COUNT, SumQuery, clip_blocks
from .histogram import HistogramQuery, histogram_counts
from .reduce import leaf_selections, merge_and_reduce, split, tree_height
from .voronoi import VoronoiCells

__all__ = [
    "Rows",
    "MemoryRows",
    "RowChunk",
    "RunningAnswers",
    "bucket_sums",
    "chunk_rows_for",
    "chunk_sums",
    "merge_sparse",
    "poisson_indices",
]

T = TypeVar("T")

DENSE_INDICATOR_CELLS = 2**20  # above this, per-bucket sums use a sparse indicator
CHUNK_BYTES = 4 * 2**20  # rows are processed ~4 MiB at a time: cache-friendly, enough for BLAS


def chunk_rows_for(n_features: int) -> int:
    return int(min(65_536, max(256, CHUNK_BYTES // (8 * max(1, n_features)))))


class Rows(ABC):
    """Private rows, wherever they live; see the module docstring."""

    n_features: int

    @abstractmethod
    def sums(self, queries: list[SumQuery]) -> list:
        """Exact clipped sums of every query, in one pass: a (n_buckets, width) array for a dense query,
        (ids of the non-empty buckets, their sums) for a sparse one.  Exact: only an oracle may see them."""

    @abstractmethod
    def count(self) -> int:
        """The exact number of rows (private: only an oracle may see it)."""

    def contributions(self, query: SumQuery, select: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The (bucket id, clipped value row) of every row -- or of the rows ``select`` (sorted indices) --
        in row order: what each device computes for itself in the local model."""
        raise NotImplementedError(f"{type(self).__name__} does not hand out per-row contributions")

    def map_rows(self, fn: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """``fn`` of every chunk of unit-box rows, concatenated in row order (exact access)."""
        raise NotImplementedError(f"{type(self).__name__} gives no exact access to its rows")

    def histograms(self, queries: list[HistogramQuery]) -> list[np.ndarray]:
        """Exact ``(d, n_buckets)`` counts of every histogram query (``queries.histogram``) in one pass over the
        rows in the input's own coordinates -- checked, at user level the kept ones, not mapped into the unit
        box: these queries find the domain that map needs.  Exact: only an oracle may see them."""
        raise NotImplementedError(f"{type(self).__name__} counts no histograms of its input")

    samplable = False  # whether poisson_sample works where the rows live (the oracle then has ``SAMPLED``)

    def poisson_sample(self, rate: float, rng: np.random.Generator) -> "Rows":
        """The rows each kept independently with probability ``rate`` (coins from ``rng``, never released).
        Rows that cannot be sampled where they live say so; the oracle then lacks ``SAMPLED``."""
        raise NotImplementedError(f"{type(self).__name__} cannot be sampled")

    def close(self) -> None:  # noqa: B027 -- most rows hold nothing elsewhere
        """Release what the rows hold elsewhere (a Spark cache)."""

    distributed = False  # on many machines: reductions run where the buckets live (``queries.reduce``)

    @property
    def in_memory(self) -> bool:
        """Whether the rows are held in memory, so that another pass over them costs no read (public: where
        the rows live, never their values)."""
        return False

    @property
    def partitions(self) -> int:
        """The partitions a reduced release's buckets are hashed to (public: never read off the rows)."""
        return 1

    def check_values(self) -> None:  # noqa: B027 -- most rows refuse missing values when they are first read
        """Refuse missing values now, before a release charged ahead of its pass (``reduced``) runs: rows
        that check their values only as a pass reads them (Spark rows reread from their files) read them."""

    def reduced(self, queries: list[SumQuery], noisers: list, reductions: list) -> list:
        """Sparse releases reduced by seed 000's merge-and-reduce (``queries.reduce``), here on one machine:
        each query's exact sums split by owning partition, each part noised by ``noisers[i](p, part)`` and
        reduced, then the partitions' selections merged up the tree."""
        partitions = self.partitions
        top = tree_height(partitions)
        parts = [split(ids, sums, partitions) for ids, sums in self.sums(queries)]
        leaves = [leaf_selections(p, [part[p] for part in parts], noisers, reductions, top) for p in range(partitions)]
        return merge_and_reduce(leaves, reductions)


# A chunk whose bucket ids span fewer than this many times its rows is summed by counting (np.bincount over the
# span), not by sorting: the greedy's coarse sparse levels (a few hundred balls a chunk) took 7 ms a chunk of
# 52,428 rows to sort, 0.2-0.6 ms to count.
COUNTED_SPAN = 4
COUNTED_COLUMNS = 2  # up to this many value columns, per-bucket sums are counted (np.bincount per column)


def bucket_sums(buckets: np.ndarray, values: np.ndarray, n_buckets: int) -> np.ndarray:
    """Exact per-bucket column sums of ``values``; rows with bucket -1 are skipped.

    A narrow query over at most ``COUNTED_SPAN`` buckets a row (the greedy's dense levels: one value a row,
    thousands of balls) is counted, each bucket's values added in row order as the sparse indicator's product
    adds them: the same sums bit for bit, in half the time."""
    keep = np.flatnonzero(buckets >= 0)
    buckets = buckets[keep]
    if buckets.size and buckets.max() >= n_buckets:
        raise ValueError(f"bucket id {int(buckets.max())} out of range for {n_buckets} buckets")
    counted = values.shape[1] <= COUNTED_COLUMNS and n_buckets <= COUNTED_SPAN * values.shape[0]
    if counted and n_buckets * values.shape[0] > DENSE_INDICATOR_CELLS:
        kept = values[keep]
        return np.stack(
            [np.bincount(buckets, weights=kept[:, j], minlength=n_buckets) for j in range(kept.shape[1])], 1
        )
    if n_buckets * values.shape[0] <= DENSE_INDICATOR_CELLS:
        indicator = np.zeros((n_buckets, values.shape[0]))
        indicator[buckets, keep] = 1.0
        return indicator @ values
    indicator = sparse.csr_matrix((np.ones(keep.size), (buckets, keep)), shape=(n_buckets, values.shape[0]))
    return np.asarray(indicator @ values)


class RowChunk:
    __slots__ = ("rows", "sq_norms")

    def __init__(self, rows: np.ndarray):
        self.rows = rows
        self.sq_norms = np.einsum("ij,ij->i", rows, rows)


def clipped_contribution(query: SumQuery, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(bucket ids, clipped value rows) of one chunk."""
    buckets, values = query.contribution(rows)
    # Contribution functions return fresh arrays, so clipping in place is safe.
    return np.asarray(buckets, dtype=np.int64), clip_blocks(np.asarray(values, dtype=np.float64), query)


def chunk_sums(query: SumQuery, rows: np.ndarray, sq_norms: np.ndarray) -> np.ndarray:
    """Exact clipped per-bucket sums of one chunk of unit-box rows (``sq_norms``: their squared norms)."""
    cells = query.structure
    if isinstance(cells, VoronoiCells):
        return cells.clipped_sums(rows, sq_norms, *query.blocks)
    buckets, values = clipped_contribution(query, rows)
    return bucket_sums(buckets, values, query.n_buckets)


def chunk_sparse_part(query: SumQuery, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(bucket ids, sums) of one chunk's non-empty buckets (a bucket is non-empty when a row falls in it,
    whatever its value): the same ids and sums, bit for bit, whether counted or sorted."""
    buckets, values = clipped_contribution(query, rows)
    keep = buckets >= 0
    if not keep.all():
        buckets, values = buckets[keep], values[keep]
    if buckets.size and int(buckets.max()) - int(buckets.min()) < COUNTED_SPAN * buckets.size:
        return _counted(buckets, values)
    return merge_sparse([(buckets, values)], query.width)


def _counted(ids: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``merge_sparse`` of one part whose ids span a short range: each bucket's values are added in row order,
    as there."""
    low = int(ids.min())
    offset = ids - low
    present = np.flatnonzero(np.bincount(offset))
    sums = [np.bincount(offset, weights=values[:, j])[present] for j in range(values.shape[1])]
    return present + low, np.stack(sums, 1).reshape(present.size, values.shape[1])


def merge_sparse(parts, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Sum (ids, values) parts by id: the sorted distinct ids and their summed values."""
    parts = list(parts)
    ids = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, dtype=np.int64)
    values = np.concatenate([p[1] for p in parts]) if parts else np.zeros((0, width))
    unique, inverse = _unique_inverse(ids, presorted=len(parts) > 1)
    sums = np.stack([np.bincount(inverse, weights=values[:, j], minlength=unique.size) for j in range(width)], 1)
    return unique, sums.reshape(unique.size, width)


def _unique_inverse(ids: np.ndarray, presorted: bool) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(ids, return_inverse=True)``.  ``presorted``: ``ids`` are sorted runs laid end to end (the
    parts of a running merge), which a stable sort merges in linear time, where np.unique sorts afresh."""
    if not presorted:
        return np.unique(ids, return_inverse=True)
    order = np.argsort(ids, kind="stable")
    ordered = ids[order]
    starts = np.empty(ids.size, dtype=bool)
    starts[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=starts[1:])
    inverse = np.empty(ids.size, dtype=np.intp)
    inverse[order] = np.cumsum(starts) - 1
    return ordered[starts], inverse


SPARSE_PARTS = 8  # a running sparse answer merges its parts when it holds this many


class RunningAnswers:
    """Running exact answers of several queries, fed one chunk at a time (see ``Rows.sums``)."""

    def __init__(self, queries: list[SumQuery]):
        self.queries = queries
        # Allocated on first use, so an empty accumulator is small (Spark ships one to every task).
        self.totals: list = [None] * len(queries)

    def of_chunk(self, chunk: RowChunk) -> list:
        return [
            chunk_sparse_part(q, chunk.rows) if q.sparse else chunk_sums(q, chunk.rows, chunk.sq_norms)
            for q in self.queries
        ]

    def add(self, parts: list) -> "RunningAnswers":
        """Absorb one chunk's answers (as :meth:`of_chunk` gives them)."""
        for i, part in enumerate(parts):
            self._absorb(i, part)
        return self

    def merge(self, other: "RunningAnswers") -> "RunningAnswers":
        for i, total in enumerate(other.totals):
            if total is not None:
                self._absorb(i, other._merged(i))
        return self

    def _absorb(self, i: int, part) -> None:
        query = self.queries[i]
        if not query.sparse:
            if self.totals[i] is None:
                self.totals[i] = part
            else:
                self.totals[i] += part
            return
        # A sparse answer keeps a few sorted parts and merges them in one sort, so it never holds more than
        # SPARSE_PARTS times its distinct ids.  The sums are those of merging one part at a time, bit for bit:
        # each bucket's values are added in the same order.
        if self.totals[i] is None:
            self.totals[i] = []
        self.totals[i].append(part)
        if len(self.totals[i]) >= SPARSE_PARTS:
            self.totals[i] = [self._merged(i)]

    def _merged(self, i: int):
        total = self.totals[i]
        if not self.queries[i].sparse:
            return total
        return total[0] if len(total) == 1 else merge_sparse(total, self.queries[i].width)

    def result(self) -> list:
        return [
            self._merged(i) if t is not None else empty_answer(q)
            for i, (q, t) in enumerate(zip(self.queries, self.totals))
        ]


def empty_answer(query: SumQuery):
    return merge_sparse([], query.width) if query.sparse else np.zeros((query.n_buckets, query.width))


COIN_BLOCK = 2**20  # a Poisson sample's coins are drawn this many at a time


def poisson_indices(n: int, rate: float, rng: np.random.Generator) -> np.ndarray:
    """Sorted indices of the rows a Poisson sample keeps: one independent coin of probability ``rate`` per
    row, drawn without reading the rows, a block of coins at a time (8 MiB whatever n is).  Five times
    faster at 1e6 rows than m ~ Binomial(n, rate) then m distinct indices (the same distribution), for which
    numpy built a permutation of all n indices."""
    parts = [start + np.flatnonzero(rng.random(min(COIN_BLOCK, n - start)) < rate) for start in range(0, n, COIN_BLOCK)]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


class MemoryRows(Rows):
    """Rows in an in-memory array or a memory map, checked and mapped into the unit box on first use."""

    def __init__(
        self,
        data,
        n_features: int,
        transform: Callable[[np.ndarray], np.ndarray] | None = None,
        chunk_rows: int | None = None,
        what: str = "X",
        partitions: int = 1,
        users: UserBound | None = None,
    ):
        self.n_features = int(n_features)
        # User level: the releases read each user's kept rows only (``privacy.unit``), chosen on first use
        self._users, self._keep = users, None
        self._partitions = check_int("partitions", partitions, 1, 1 << 20)  # > 1: reduced releases run the merge tree
        self._input, self._what = data, what
        self._transform = transform or (lambda rows: rows)
        self._chunk_rows = int(chunk_rows or chunk_rows_for(self.n_features))
        self._data = None  # the checked array, on first use
        self._prepared: list[RowChunk] | None = None
        self._settled = False  # the transform fixed (a private domain found): see _ready

    def _checked(self) -> np.ndarray:
        """The checked input (numeric, finite, of the declared width) and, at user level, the kept rows chosen:
        all the histograms of the input's own coordinates need (no transform)."""
        if self._data is None:
            data = check_data(self._input, self._what)  # numeric and finite; refused before any release
            if data.shape[1] != self.n_features:
                raise ValueError(f"{self._what} has {data.shape[1]} features, expected {self.n_features}")
            if self._users is not None:  # from the user ids and secret coins: no row's values are read
                self._keep = self._users.kept(data.shape[0])
            starts = range(0, self._released_rows(data), self._chunk_rows)
            self._slices = [slice(s, s + self._chunk_rows) for s in starts]
            self._data = data
        return self._data

    def _ready(self) -> np.ndarray:
        data = self._checked()
        if not self._settled:
            # The transform is fixed here, on the calling thread, before any row is mapped or counted: a domain
            # found by releases of its own (a private box, ``private_domain``) is found now -- first,
            # whether the rows are in memory or memory-mapped -- and never from a worker thread.
            self._transform(np.zeros((0, self.n_features)))
            self._settled = True
            if not isinstance(data, np.memmap):
                self._prepared = map_chunks(self._prepare, self._slices)
        return data

    def _released_rows(self, data) -> int:
        return data.shape[0] if self._keep is None else self._keep.size

    def _at(self, index) -> np.ndarray:
        """The rows the releases read at positions ``index`` (a slice or sorted indices): at user level,
        positions among the kept rows."""
        return self._data[index] if self._keep is None else self._data[self._keep[index]]

    def _prepare(self, rows: slice) -> RowChunk:
        return RowChunk(self._transform(np.asarray(self._at(rows), dtype=np.float64)))

    def _read(self, rows, fn: Callable[[RowChunk], T]) -> T:
        """``fn`` of the chunk at ``rows`` (a slice of the released rows); a memory map's pages of those rows are
        given back afterwards (``_pages``), so a pass never holds more of the map than its chunks in flight."""
        try:
            return fn(self._prepare(rows))
        finally:
            drop_pages(self._data, rows if self._keep is None else self._keep[rows])

    @property
    def partitions(self) -> int:
        return self._partitions

    @property
    def in_memory(self) -> bool:
        self._ready()
        return self._prepared is not None

    @property
    def data(self) -> np.ndarray:
        """The checked input array (raw coordinates, not the unit box); at user level, every row, not only
        the kept ones (for the data holder's labels)."""
        return self._ready()

    def _map(self, fn: Callable[[RowChunk], T]) -> list[T]:
        self._ready()
        if self._prepared is not None:
            return map_chunks(fn, self._prepared)
        return [self._read(s, fn) for s in self._slices]  # memory map: one chunk in memory at a time

    def count(self) -> int:
        return int(self._released_rows(self._ready()))

    def sums(self, queries):
        counts = [q.structure is ROW_COUNT for q in queries]
        if any(counts):  # a count needs no pass over the rows
            others = self.sums([q for q, is_count in zip(queries, counts) if not is_count]) if not all(counts) else []
            others = iter(others)
            return [np.array([[float(self.count())]]) if c else next(others) for c in counts]
        answers = RunningAnswers(list(queries))
        self._ready()
        if self._prepared is not None:
            chunks, one = self._prepared, answers.of_chunk
        else:  # memory map: one chunk read per worker at a time
            chunks, one = self._slices, lambda rows: self._read(rows, answers.of_chunk)
        # A few chunks in flight (imap_chunks): memory stays a few partial answers, whatever n is.
        for parts in imap_chunks(one, chunks):
            answers.add(parts)
        return answers.result()

    def histograms(self, queries):
        """In one pass, chunk by chunk on every core: a chunk of kept rows is read at a time (never a copy of
        them all), and at most a few chunks' counts are in flight."""
        self._checked()
        totals = [np.zeros((q.n_features, q.n_buckets)) for q in queries]

        def count(rows: slice) -> list[np.ndarray]:
            try:
                chunk = np.asarray(self._at(rows), dtype=np.float64)
                return [histogram_counts(q, chunk) for q in queries]
            finally:  # a memory map's pages of these rows given back, as every pass does (``_read``)
                drop_pages(self._data, rows if self._keep is None else self._keep[rows])

        for parts in imap_chunks(count, self._slices):
            for total, part in zip(totals, parts):
                total += part
        return totals

    def contributions(self, query, select=None):
        data = self._ready()
        if select is None:
            select = np.arange(self._released_rows(data))
        buckets, values = [], []
        for start in range(0, select.size, self._chunk_rows):
            part = select[start : start + self._chunk_rows]
            b, v = clipped_contribution(query, self._transform(np.asarray(self._at(part), dtype=np.float64)))
            drop_pages(data, part if self._keep is None else self._keep[part])
            buckets.append(b)
            values.append(v)
        if not buckets:
            return np.zeros(0, dtype=np.int64), np.zeros((0, query.width))
        return np.concatenate(buckets), np.concatenate(values)

    samplable = True

    def poisson_sample(self, rate, rng):
        """Independent coins, drawn without a pass over the rows (``poisson_indices``: one coin per row, a block
        of coins at a time).  Only the kept rows are copied."""
        data = self._ready()
        sample = poisson_indices(self._released_rows(data), rate, rng)
        return MemoryRows(
            gather_rows(data, sample if self._keep is None else self._keep[sample], self._chunk_rows),
            self.n_features,
            transform=self._transform,
            chunk_rows=self._chunk_rows,
            what=self._what,
            partitions=self._partitions,
        )

    def map_rows(self, fn):
        parts = self._map(lambda chunk: fn(chunk.rows))
        if parts:
            return np.concatenate(parts)
        return fn(np.zeros((0, self.n_features)))  # no rows: fn's output of the right shape, empty

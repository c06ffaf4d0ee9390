"""Rows kept by a Spark cluster: the central model's curator, its sums computed by the executors.

A frame that is exactly a scan of local Parquet files, in local mode, is read
by the Python workers themselves on every pass, uncached
(:mod:`~privclust.queries.spark_parquet`).  Any other Spark DataFrame of
numeric columns (one feature each) crosses from the JVM
to the Python workers as Arrow record batches (Spark's
``spark.sql.execution.arrow.maxRecordsPerBatch`` rows each, 10,000 by
default), never as one Python object per row; the batches become numpy
chunks, which the executors map through the public ``transform`` (clip to the
declared bounds, normalise) and cache.  The batches come from the JVM's own
Arrow encoding of the frame (``Dataset.toArrowBatchRdd``, what PySpark's
``toPandas`` collects), one hop into the Python workers: 10^7 x 10 rows were
read and cached 2.7x faster this way than through ``mapInArrow`` and
``DataFrame.rdd`` (two hops more; the same session, docs/benchmarks.md), which
remains the path where the JVM lacks that method.  For each query the driver ships the query itself (pickled: its
public geometry and clipping bounds) to the executors, which return *exact*
per-bucket sums of their chunks; the driver adds them, and
:class:`~privclust.queries.central.CentralOracle` -- the very oracle of
in-memory rows, composed with :class:`SparkRows` instead -- noises the total.

Privacy: what crosses from executors to the driver are exact aggregates
inside the trusted curator (Spark is the curator's machinery, as RAM is for
the in-memory oracle); only noised totals leave the oracle, each charged to
the accountant before any executor runs.  So every algorithm keeps its
guarantee unchanged, and a seeded fit gives the in-memory fit's centers up
to the rounding of a different summation order.

``map_rows`` (exact access for the central-only mechanisms: maxcover's
cover, 1-cluster, the greedy's exponential variant) collects the mapped rows
to the driver, so those algorithms need their mapped rows (e.g. maxcover's
d'-dimensional projection) to fit in the driver's memory.
"""

from __future__ import annotations

import copy
import math
import warnings
from functools import partial, wraps
from itertools import groupby
from operator import itemgetter
from typing import Callable

import numpy as np

from ..privacy.unit import missing_ids_refusal
from .base import ROW_COUNT
from .histogram import histogram_counts
from .nearest import assign
from .reduce import FAN_IN, leaf_selections, merged_selections, split, tree_height
from .rows import RowChunk, Rows, RunningAnswers, chunk_rows_for, merge_sparse
from .spark_parquet import CHANGED, InputChangedError, group_pieces, parquet_pieces, read_pieces

__all__ = [
    "SparkRows",
    "is_spark_frame",
    "spark_features",
    "spark_session",
    "predict_frame",
    "bounded_frame",
    "refuse_missing_ids",
    "parquet_read_by_workers",
]

NUMERIC_TYPES = ("tinyint", "smallint", "int", "bigint", "float", "double", "decimal")


def is_spark_frame(X) -> bool:
    """True for a PySpark DataFrame (classic or Spark Connect), without importing pyspark."""
    return any(cls.__module__.startswith("pyspark.sql") and cls.__name__ == "DataFrame" for cls in type(X).__mro__)


def spark_features(frame, ignore: str | None = None) -> int:
    """The number of features of ``frame``; refuses non-numeric columns (column types are public schema).
    ``ignore``: a user-level fit's user column, which is not a feature (and may hold strings)."""
    if ignore is not None and ignore not in frame.columns:
        raise ValueError(f"the Spark DataFrame has no user column {ignore!r}: user_ids names the column of user ids")
    dtypes = [(name, kind) for name, kind in frame.dtypes if name != ignore]
    if not dtypes:
        raise ValueError("the Spark DataFrame has no columns")
    bad = [name for name, kind in dtypes if not kind.startswith(NUMERIC_TYPES)]
    if bad:
        raise ValueError(
            f"the Spark DataFrame has non-numeric columns {bad}: select or cast the feature columns first, "
            "e.g. df.select([F.col(c).cast('double') for c in features])"
        )
    return len(dtypes)


# In local mode the driver's JVM runs the executors, and Java's default collector (G1) lets its heap grow towards the
# maximum as more rows pass through, though it holds none of them (they are cached on disk): a throughput collector
# whose generations keep their first sizes collects the passing buffers instead (measured: docs/benchmarks.md)
LOCAL_JAVA_OPTIONS = "-XX:+UseParallelGC -XX:-UseAdaptiveSizePolicy"


def is_local_master(master: str) -> bool:
    """Whether ``master`` runs the executors in the driver's JVM (not ``local-cluster``, whose executors are JVMs)."""
    return master == "local" or master.startswith("local[")


def spark_session(master: str = "local[*]", driver_memory: str = "4g"):
    """A Spark session for ``master``.  Executors unpickle privclust's queries, so they must run a Python
    with privclust installed: unless ``PYSPARK_PYTHON`` says otherwise, they run this process's Python
    (right for ``local[...]``; on a cluster, install privclust on the workers and set ``PYSPARK_PYTHON``).

    ``driver_memory`` applies when this call starts the JVM; in ``local[...]`` mode the driver also
    runs the executors and caches the rows of any frame but a plain Parquet scan, so Spark's default of 1g
    holds only a few million rows.  In local
    mode the JVM it starts also collects with ``LOCAL_JAVA_OPTIONS`` (a session made beforehand keeps its own)."""
    import os
    import sys

    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master).appName("privclust").config("spark.driver.memory", driver_memory)
    if is_local_master(master):
        builder = builder.config("spark.driver.extraJavaOptions", LOCAL_JAVA_OPTIONS)
    session = builder.config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false").getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


class _SparkChunk(RowChunk):
    __slots__ = ("finite",)

    def __init__(self, raw: np.ndarray, transform, checked: bool = False):
        """``checked``: the block's values were checked finite already (or it was emptied: ``_noting_missing``)."""
        self.finite = checked or bool(np.all(np.isfinite(raw)))
        super().__init__(transform(raw) if self.finite else raw)


def _arrow_blocks(batches, n_features: int, rows_per_block: int):
    """The JVM's Arrow record batches of a partition (IPC messages of ``n_features`` double columns) -> float64
    blocks of about ``rows_per_block`` rows (nulls become nan): the chunks of the in-memory rows' size, each
    filled column by column straight from the batches (one copy of the rows)."""
    import pyarrow as pa

    schema = pa.schema([(f"x{j}", pa.float64()) for j in range(n_features)])
    held: list = []

    def block() -> np.ndarray:
        out = np.empty((sum(batch.num_rows for batch in held), n_features))
        start = 0
        for batch in held:
            for j, column in enumerate(batch.columns):
                out[start : start + batch.num_rows, j] = column.to_numpy(zero_copy_only=False)
            start += batch.num_rows
        held.clear()
        return out

    rows = 0
    for message in batches:
        batch = pa.ipc.read_record_batch(pa.py_buffer(message), schema)
        if batch.num_rows:
            held.append(batch)
            rows += batch.num_rows
        if rows >= rows_per_block:
            yield block()
            rows = 0
    if held:
        yield block()


def _packed_batches(batches, rows_per_block: int):
    """Arrow record batches of rows -> packed float64 blocks of about ``rows_per_block`` rows (nulls become nan):
    the chunks of the in-memory rows' size, not Spark's Arrow batches of 10,000 rows, so that reading and caching
    the rows handles 5x fewer objects (1e6 x 10: 8.6 -> 5.3 s of CPU) and every pass runs its kernels on
    longer chunks.

    Rows cross from the JVM as Arrow columns, never as one Python object per row."""
    import pyarrow as pa

    held: list[np.ndarray] = []

    def packed():
        block = np.concatenate(held) if len(held) > 1 else held[0]
        held.clear()
        return pa.RecordBatch.from_pydict({"rows": [block.shape[0]], "block": [block.tobytes()]})

    for batch in batches:
        if batch.num_rows == 0:
            continue
        columns = [np.asarray(column.to_numpy(zero_copy_only=False), dtype=np.float64) for column in batch.columns]
        held.append(np.column_stack(columns))
        if sum(part.shape[0] for part in held) >= rows_per_block:
            yield packed()
    if held:
        yield packed()


MISSING_VALUES = (
    "the Spark DataFrame has missing or non-finite values: drop or impute them first "
    "(e.g. df.na.drop()); privclust does not guess values for private rows"
)


def _noting_missing(rows: np.ndarray, missing) -> np.ndarray:
    """A block read from the files, or none of it when it holds a missing value: counted, so that the pass's answer
    is withheld, and kept from the queries (an unclipped nan has no bucket)."""
    if np.all(np.isfinite(rows)):
        return rows
    missing.add(1)
    return rows[:0]


def _reading(action):
    """A pass of :class:`SparkRows`, whose workers' refusal of an input file changed mid-fit reaches the caller as
    :class:`InputChangedError`, not as the tail of a worker's traceback."""

    @wraps(action)
    def run(self, *args, **kwargs):
        try:
            return action(self, *args, **kwargs)
        except Exception as exc:
            # a worker's error reaches the driver as Spark's exception carrying the worker's traceback as text
            if self._rereadable and CHANGED in str(exc):
                raise InputChangedError() from None
            raise

    return run


def _unpack_raw(packed, n_features: int) -> np.ndarray:
    return np.frombuffer(packed.block, dtype=np.float64).reshape(packed.rows, n_features).copy()


def _histograms_of(totals, rows: np.ndarray, queries):
    """One more chunk (input coordinates) counted into a task's running histograms (None: none yet)."""
    parts = [histogram_counts(q, rows) for q in queries]
    return parts if totals is None else [t + p for t, p in zip(totals, parts)]


def _merge_histograms(a, b):
    return b if a is None else a if b is None else [x + y for x, y in zip(a, b)]


def _kept_by_coins(partition: int, chunks, rate: float, seed: int):
    """The rows of a partition's chunks each kept by a coin of probability ``rate`` (the coins depend on the
    seed and on the partition's and the chunk's places, so a recomputed partition keeps the same rows)."""
    for place, chunk in enumerate(chunks):
        coins = np.random.default_rng([seed, partition, place]).random(chunk.rows.shape[0])
        kept = chunk.rows[coins < rate]
        if kept.shape[0]:
            yield RowChunk(kept)


def _add_chunk(state: tuple[RunningAnswers, int], chunk: _SparkChunk) -> tuple[RunningAnswers, int]:
    answers, rows = state
    return answers.add(answers.of_chunk(chunk)), rows + chunk.rows.shape[0]


def _merge_answers(a: tuple[RunningAnswers, int], b: tuple[RunningAnswers, int]) -> tuple[RunningAnswers, int]:
    return a[0].merge(b[0]), a[1] + b[1]


def parquet_read_by_workers(frame) -> list | None:
    """The Parquet pieces :class:`SparkRows` has its workers read for ``frame``, or None (read through the JVM).
    Local mode only: there the driver and the workers see one file system, so the files the driver planned and
    stamped are the files the workers read (a cluster's node-local copies would all look changed)."""
    return parquet_pieces(frame) if is_local_master(frame.sparkSession.sparkContext.master) else None


class SparkRows(Rows):
    """A Spark DataFrame's rows as unit-box chunks: read by the workers from Parquet files on every pass, or taken
    from the JVM and cached by the executors on first use."""

    def __init__(self, frame, transform: Callable[[np.ndarray], np.ndarray] | None = None, users=None):
        self.n_features = spark_features(frame, ignore=None if users is None else users.column)
        self._ids = None
        if users is not None:  # user level: the executors keep at most m rows per user (privacy.unit)
            self._ids = (frame, users.column)  # checked on first use, before the rows are cached or released
            frame = bounded_frame(frame, users.column, users.max_rows, users.seed())
        self._frame, self._transform = frame, transform or _identity
        self._rdd = None
        self._source = None  # the rows' blocks as first read: planned (and their files stamped) once
        self._rereadable = False  # whether they come from the files on every pass (spark_parquet), uncached
        self._missing = None  # then: an accumulator of the blocks with missing values that the passes read
        self._checked = False  # whether a whole pass has found none yet
        self._raw = None  # the rows in the input's coordinates, cached while histograms of them are asked for
        self._samples: list[SparkRows] = []  # cached samples of these rows, dropped with them
        self._share = 1.0  # of the frame's rows these rows are expected to hold (a sample's rate: public)

    def _check_ids(self) -> None:
        """Refuse missing user ids once, before the first read of the rows (and so before any release)."""
        if self._ids is not None:
            refuse_missing_ids(*self._ids)
            self._ids = None

    def _raw_blocks(self):
        """The frame's rows, an RDD of float64 blocks in the input's coordinates (not yet checked or cached),
        planned once: every later pass reads the files the first plan stamped."""
        if self._source is None:
            blocks = self._parquet_rdd()
            if blocks is None:
                blocks = self._arrow_rdd()
            if blocks is None:
                blocks = self._packed().map(partial(_unpack_raw, n_features=self.n_features))
            self._source = blocks
        return self._source

    def _parquet_rdd(self):
        """The rows read by the Python workers from the local Parquet files the frame is exactly a scan of
        (``spark_parquet``), every pass: no JVM encoding and no cache; None for any other frame."""
        pieces = parquet_read_by_workers(self._frame)
        if pieces is None:
            return None
        context = self._frame.sparkSession.sparkContext
        self._rereadable, self._missing = True, context.accumulator(0)
        runs = group_pieces(pieces, 2 * int(context.defaultParallelism))
        read = partial(read_pieces, columns=list(self._frame.columns), rows_per_block=chunk_rows_for(self.n_features))
        blocks = context.parallelize(runs, max(1, len(runs))).mapPartitions(read)
        return blocks.map(partial(_noting_missing, missing=self._missing))

    def _arrow_rdd(self):
        """The rows through the JVM's Arrow encoding of the frame, its columns cast to double (so the batches'
        schema is known here); None where the JVM has no ``toArrowBatchRdd`` (then ``mapInArrow`` serves)."""
        from py4j.protocol import Py4JError
        from pyspark import RDD
        from pyspark.serializers import NoOpSerializer
        from pyspark.sql import functions as F

        frame = self._positional()
        doubles = frame.select([F.col(name).cast("double") for name in frame.columns])
        try:
            batches = doubles._jdf.toArrowBatchRdd().toJavaRDD()
        except (AttributeError, Py4JError):
            return None
        blocks = partial(_arrow_blocks, n_features=self.n_features, rows_per_block=chunk_rows_for(self.n_features))
        return RDD(batches, frame.sparkSession.sparkContext, NoOpSerializer()).mapPartitions(blocks)

    def _positional(self):
        """The frame's columns renamed x0, x1, ... by position: a name such as "a.b" would be read as a field."""
        return self._frame.toDF(*(f"x{j}" for j in range(self.n_features)))

    def _packed(self):
        try:
            with warnings.catch_warnings():
                # The rows travel as Arrow batches into numpy, never through pandas: PySpark's notice
                # about its support of pandas >= 3 does not concern this path.
                warnings.filterwarnings("ignore", "PySpark does not yet fully support pandas", FutureWarning)
                pack = partial(_packed_batches, rows_per_block=chunk_rows_for(self.n_features))
                packed = self._positional().mapInArrow(pack, "rows long, block binary")
            return packed.rdd
        except Exception as exc:  # Spark Connect sessions have no RDD API
            raise ValueError(f"privclust needs a classic Spark session (DataFrame.rdd): {exc}") from None

    def _persist(self, rdd):
        from pyspark import StorageLevel

        # In local mode the executors are the driver's JVM: rows cached in its heap would make the driver grow
        # with n (measured: 1.6 GB at 10^6 rows, 4 GB at 10^7), so there they go to local disk -- read back
        # through the OS page cache -- and on a cluster to the executors' memory, spilling to disk.
        local = is_local_master(self._frame.sparkSession.sparkContext.master)
        return rdd.persist(StorageLevel.DISK_ONLY if local else StorageLevel.MEMORY_AND_DISK)

    def _cached(self, rdd, finite: Callable):
        """``rdd`` persisted, in one pass that also fills the cache and refuses missing values -- as the in-memory
        rows do (check_data): before any release, naming no row.  Rows reread from their files are not cached
        and not read an extra time: each pass notes missing values as it reads, and its answer is withheld."""
        if self._rereadable:
            return rdd
        rdd = self._persist(rdd)
        if not rdd.map(finite).fold(True, lambda a, b: a and b):
            rdd.unpersist()
            raise ValueError(MISSING_VALUES)
        return rdd

    def _refuse_missing(self) -> None:
        """After a pass over rows reread from their files, before its exact answer reaches any mechanism: refuse
        the rows if the pass met a missing value (a pass reads every row; a sample's first pass, all of them)."""
        if self._missing is not None and self._missing.value:
            raise ValueError(MISSING_VALUES)
        self._checked = True

    def _ready(self):
        if self._rdd is not None:
            return self._rdd
        self._check_ids()
        # The transform is fixed here, on the driver, before it is shipped: a domain found by releases of its own
        # (a private box) is found now, first, and travels to the executors as the plain box it found.
        self._transform(np.zeros((0, self.n_features)))
        if self._raw is not None:  # the rows the histograms counted (at user level the same kept rows), mapped;
            # checked when they were cached: this pass only fills the new cache
            rdd = self._raw.map(partial(_SparkChunk, transform=self._transform, checked=True))
            self._rdd = self._cached(rdd, lambda chunk: True)
        else:
            blocks = self._raw_blocks()  # rows reread from their files are checked as each pass reads them
            rdd = blocks.map(partial(_SparkChunk, transform=self._transform, checked=self._rereadable))
            self._rdd = self._cached(rdd, lambda chunk: chunk.finite)
        if self._raw is not None:
            self._raw.unpersist()
            self._raw = None
        return self._rdd

    @_reading
    def histograms(self, queries):
        """One Spark job per call over the rows in the input's coordinates (the private box asks three times, each
        query depending on the last release), cached by the executors on the first call and mapped into the unit
        box from that cache afterwards -- or read from the files each time; every task folds its chunks into
        running counts."""
        if self._raw is None:
            self._check_ids()
            self._raw = self._cached(self._raw_blocks(), lambda rows: bool(np.all(np.isfinite(rows))))
        totals = self._raw.treeAggregate(None, partial(_histograms_of, queries=queries), _merge_histograms)
        self._refuse_missing()
        return totals if totals is not None else [np.zeros((q.n_features, q.n_buckets)) for q in queries]

    def close(self) -> None:
        """Drop the cached chunks (and those of the samples taken of them) from the executors."""
        for sample in self._samples:
            sample.close()
        for rdd in (self._rdd, self._raw):
            if rdd is not None:
                rdd.unpersist()

    samplable = True

    def poisson_sample(self, rate, rng):
        """The rows each kept with probability ``rate`` by an independent coin, tossed by the executors on the
        chunks: the coins come from a seed drawn from ``rng`` (never released) and the chunk's place in its
        partition, never from the rows' values.  The sample is cached (also when the rows are reread from their
        files), so each of the passes made on it (the greedy start's levels) reads the kept rows only, and is
        dropped with these rows."""
        seed = int(rng.integers(2**63))
        chunks = self._ready()
        sample = copy.copy(self)  # the same frame (its session's settings) and transform
        sample._samples, sample._share, sample._raw = [], self._share * rate, None
        sample._rdd = self._persist(chunks.mapPartitionsWithIndex(partial(_kept_by_coins, rate=rate, seed=seed)))
        self._samples.append(sample)
        return sample

    def check_values(self) -> None:
        self._ready()  # rows read through the JVM are checked here, as they are cached
        if self._rereadable and not self._checked:
            self.count()

    @_reading
    def count(self) -> int:
        rows = int(self._ready().map(lambda chunk: chunk.rows.shape[0]).sum())
        self._refuse_missing()
        return rows

    @_reading
    def sums(self, queries):
        """One Spark job for all the queries, row counts included: every task folds its chunks into one running
        answer and its number of rows."""
        if not queries:
            return []
        counts = [q.structure is ROW_COUNT for q in queries]
        others = [q for q, is_count in zip(queries, counts) if not is_count]
        answers, rows = self._ready().treeAggregate((RunningAnswers(others), 0), _add_chunk, _merge_answers)
        self._refuse_missing()
        results = iter(answers.result())
        return [np.array([[float(rows)]]) if is_count else next(results) for is_count in counts]

    @_reading
    def map_rows(self, fn):
        parts = [p for p in self._ready().map(lambda chunk: fn(chunk.rows)).collect() if len(p)]
        self._refuse_missing()
        return np.concatenate(parts) if parts else fn(np.zeros((0, self.n_features)))

    distributed = True

    @property
    def partitions(self) -> int:
        """``spark.sql.shuffle.partitions`` (200 by default): Spark's public setting, never read off the rows;
        a sample of rate q spreads its balls over q of them (a public share: fewer, fuller tasks)."""
        setting = self._frame.sparkSession.conf.get("spark.sql.shuffle.partitions", "200")
        try:
            partitions = int(setting)
        except ValueError:
            partitions = 0
        if partitions < 1:
            raise ValueError(
                f"spark.sql.shuffle.partitions is {setting!r}: the MPC greedy hashes its balls to that many "
                "partitions, so set it to a positive number (e.g. 200) for this job"
            )
        return max(1, math.ceil(partitions * self._share))

    @_reading
    def reduced(self, queries, noisers, reductions):
        """Seed 000's merge-and-reduce on the executors (``queries.reduce``): every task sums its chunks and
        sends each partition the buckets it owns; each partition noises and reduces its buckets; groups of
        ``FAN_IN`` merge and reduce until one is left, and only that selection is collected.

        The tree's partitions are its machines; Spark runs them in :meth:`_tasks` tasks, each a contiguous run
        of machines in order (a task per machine cost ~0.1 s of Python each: 200 of them were most of the
        MPC greedy's time on two cores).  A task receives its machines' parts sorted by machine (Spark's
        external sort: its memory does not grow with them) and runs each machine as before, so the tree,
        its noise (``noisers[i](p, ...)``) and the selections are the same whatever the number of tasks."""
        partitions = self.partitions
        top = tree_height(partitions)
        tasks = self._tasks(partitions)
        owned = self._ready().mapPartitionsWithIndex(partial(_owned_parts, queries=queries, partitions=partitions))
        selections = owned.repartitionAndSortWithinPartitions(
            tasks, partial(_run_of, per=-(-partitions // tasks))
        ).mapPartitions(partial(_leaves, noisers=noisers, reductions=reductions, top=top))
        count, height = partitions, 0
        while count > 1:
            height += 1
            count = -(-count // FAN_IN)
            runs = min(count, tasks)
            selections = (
                selections.map(_to_parent)
                .partitionBy(runs, partial(_run_of, per=-(-count // runs)))
                .mapPartitions(partial(_merges, reductions=reductions, height=height, top=top))
            )
        ((_, result),) = selections.collect()
        self._refuse_missing()
        return result

    def _tasks(self, machines: int) -> int:
        """Spark tasks that run a merge tree's ``machines``: two per core of Spark's default parallelism (a
        public setting), so that none idles through another's last machine; never more than the machines."""
        cores = int(self._frame.sparkSession.sparkContext.defaultParallelism)
        return max(1, min(machines, 2 * cores))


def refuse_missing_ids(frame, column: str) -> None:
    """Refuse ``frame`` if its user ``column`` holds a missing id (null; for a float column also NaN or an
    infinite value), as the in-memory rows refuse them (``privacy.unit.missing_ids_refusal``): one Spark job
    that stops at the first such row.  Before any release, and naming no row or count."""
    from pyspark.sql import functions as F

    floating = dict(frame.dtypes)[column] in ("float", "double")
    missing = F.col(column).isNull()
    if floating:
        missing = missing | F.isnan(F.col(column)) | (F.abs(F.col(column)) == float("inf"))
    if frame.where(missing).limit(1).count():
        raise missing_ids_refusal(floating)


def bounded_frame(frame, column: str, max_rows: int, seed: int):
    """The feature columns of ``frame`` with each user's rows (by ``column``) bounded to ``max_rows``: the
    rows with the smallest i.i.d. uniform priorities (``rand`` from a secret ``seed``), ranked within each
    user where the rows live.  The choice reads the user ids and the coins only, never a feature's value
    (``privacy.unit``).  A null id would make its rows one user: :class:`SparkRows` refuses them first
    (:func:`refuse_missing_ids`)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    features = [name for name in frame.columns if name != column]
    priority, rank = "__privclust_priority", "__privclust_rank"
    ranked = frame.withColumn(priority, F.rand(seed)).withColumn(
        rank, F.row_number().over(Window.partitionBy(column).orderBy(priority))
    )
    return ranked.where(F.col(rank) <= max_rows).select(*features)


def _identity(rows: np.ndarray) -> np.ndarray:
    return rows


def _owned_parts(task: int, chunks, queries, partitions: int):
    """One task's exact sparse sums, cut into the parts each partition owns: (partition, (task, [part per query]))."""
    answers = RunningAnswers(queries)
    for chunk in chunks:
        answers.add(answers.of_chunk(chunk))
    cut = [split(ids, sums, partitions) for ids, sums in answers.result()]
    for p in range(partitions):
        yield p, (task, [parts[p] for parts in cut])


def _run_of(machine: int, per: int) -> int:
    """The task that runs ``machine``: contiguous runs of ``per`` machines."""
    return machine // per


def _leaves(items, noisers, reductions, top: int):
    """A task's machines at height 0, one after another: items (machine p, (task, parts)) arrive sorted by p.

    Machine p's buckets' exact sums, noised here (``noisers[i](p, ...)``) and reduced.  The tasks' parts are
    added in task order, not in the order the shuffle delivers them, so a seeded fit sums -- and so releases --
    the same values however Spark schedules the tasks."""
    for p, machine in groupby(items, key=itemgetter(0)):
        grouped = [[] for _ in noisers]
        for _, parts in sorted((part for _, part in machine), key=itemgetter(0)):
            for bucket_parts, part in zip(grouped, parts):
                bucket_parts.append(part)
        totals = [merge_sparse(parts, noiser.query.width) for noiser, parts in zip(noisers, grouped)]
        yield p, leaf_selections(p, totals, noisers, reductions, top)


def _to_parent(item):
    p, selections = item
    return p // FAN_IN, (p, selections)


def _merges(items, reductions, height: int, top: int):
    """A task's machines g of a merge round: each one's children's selections, in partition order, merged and
    reduced (the selections are small: a few per level)."""
    children: dict[int, list] = {}
    for g, child in items:
        children.setdefault(g, []).append(child)
    for g in sorted(children):
        ordered = [selections for _, selections in sorted(children[g], key=itemgetter(0))]
        yield g, merged_selections(ordered, reductions, height, top)


def predict_frame(frame, centers: np.ndarray, column: str = "cluster"):
    """``frame`` with one more column: the index of each row's nearest center (post-processing, free).

    Computed by the executors, batch by batch: the rows stay in Spark."""
    from pyspark.sql.types import IntegerType, StructField, StructType

    n_features = spark_features(frame)
    if n_features != centers.shape[1]:
        raise ValueError(f"the DataFrame has {n_features} features, but the model was fitted with {centers.shape[1]}")
    if column in frame.columns:
        raise ValueError(f"the DataFrame already has a column {column!r}: pass another name")
    schema = StructType(frame.schema.fields + [StructField(column, IntegerType(), False)])
    with warnings.catch_warnings():  # Arrow batches into numpy, never pandas (see SparkRows)
        warnings.filterwarnings("ignore", "PySpark does not yet fully support pandas", FutureWarning)
        return frame.mapInArrow(partial(_label_batches, centers=np.asarray(centers, float), column=column), schema)


def _label_batches(batches, centers: np.ndarray, column: str):
    import pyarrow as pa

    for batch in batches:
        labels = np.zeros(0, dtype=np.int32)
        if batch.num_rows:
            block = np.column_stack([np.asarray(c.to_numpy(zero_copy_only=False), np.float64) for c in batch.columns])
            labels = assign(block, centers)[0].astype(np.int32)
        yield batch.append_column(column, pa.array(labels, pa.int32()))

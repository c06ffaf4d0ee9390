"""The central model on a Spark cluster: the same trusted curator, its rows kept by the executors.

A Spark DataFrame of numeric columns (one feature each) crosses from the JVM
to the Python workers as Arrow record batches (``mapInArrow``; Spark's
``spark.sql.execution.arrow.maxRecordsPerBatch`` rows each, 10,000 by
default), never as one Python object per row; each batch becomes a numpy
chunk, which the executors map through the public ``transform`` (clip to the
declared bounds, normalise) and cache.  For each query the driver ships the query itself (pickled: its
public geometry and clipping bounds) to the executors, which return *exact*
per-bucket sums of their chunks; the driver adds them and noises the total
with :class:`~privclust.queries.central.CuratorOracle`'s release code, the
code the in-memory oracle uses.

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

import warnings
from functools import partial
from typing import Callable

import numpy as np

from ..privacy.budget import PrivacyAccountant
from ..privacy.noise import NoiseSource
from .base import ROW_COUNT, BucketSumQuery
from .central import CuratorOracle, RowChunk, RunningAnswers

__all__ = ["SparkOracle", "is_spark_frame", "spark_features", "spark_session", "predict_frame"]

NUMERIC_TYPES = ("tinyint", "smallint", "int", "bigint", "float", "double", "decimal")


def is_spark_frame(X) -> bool:
    """True for a PySpark DataFrame (classic or Spark Connect), without importing pyspark."""
    return any(cls.__module__.startswith("pyspark.sql") and cls.__name__ == "DataFrame" for cls in type(X).__mro__)


def spark_features(frame) -> int:
    """The number of features of ``frame``; refuses non-numeric columns (column types are public schema)."""
    dtypes = frame.dtypes
    if not dtypes:
        raise ValueError("the Spark DataFrame has no columns")
    bad = [name for name, kind in dtypes if not kind.startswith(NUMERIC_TYPES)]
    if bad:
        raise ValueError(
            f"the Spark DataFrame has non-numeric columns {bad}: select or cast the feature columns first, "
            "e.g. df.select([F.col(c).cast('double') for c in features])"
        )
    return len(dtypes)


def spark_session(master: str = "local[*]", driver_memory: str = "4g"):
    """A Spark session for ``master``.  Executors unpickle privclust's queries, so they must run a Python
    with privclust installed: unless ``PYSPARK_PYTHON`` says otherwise, they run this process's Python
    (right for ``local[...]``; on a cluster, install privclust on the workers and set ``PYSPARK_PYTHON``).

    ``driver_memory`` applies when this call starts the JVM; in ``local[...]`` mode the driver also
    runs the executors and caches the rows, so Spark's default of 1g holds only a few million rows."""
    import os
    import sys

    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master).appName("privclust").config("spark.driver.memory", driver_memory)
    session = builder.config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false").getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


class _SparkChunk(RowChunk):
    __slots__ = ("finite",)

    def __init__(self, raw: np.ndarray, transform):
        self.finite = bool(np.all(np.isfinite(raw)))
        super().__init__(transform(raw) if self.finite else raw)


def _packed_batches(batches):
    """Arrow record batches of rows -> one packed float64 block per batch (nulls become nan).

    Rows cross from the JVM as Arrow columns, never as one Python object per row."""
    import pyarrow as pa

    for batch in batches:
        if batch.num_rows == 0:
            continue
        columns = [np.asarray(column.to_numpy(zero_copy_only=False), dtype=np.float64) for column in batch.columns]
        block = np.ascontiguousarray(np.column_stack(columns))
        yield pa.RecordBatch.from_pydict({"rows": [block.shape[0]], "block": [block.tobytes()]})


def _unpack(packed, n_features: int, transform) -> _SparkChunk:
    raw = np.frombuffer(packed.block, dtype=np.float64).reshape(packed.rows, n_features).copy()
    return _SparkChunk(raw, transform)


def _add_chunk(answers: RunningAnswers, chunk: _SparkChunk) -> RunningAnswers:
    return answers.add(answers.of_chunk(chunk))


def _merge_answers(a: RunningAnswers, b: RunningAnswers) -> RunningAnswers:
    return a.merge(b)


class SparkOracle(CuratorOracle):
    """Answers queries over a Spark DataFrame's rows, aggregated by the executors (central model)."""

    def __init__(
        self,
        frame,
        accountant: PrivacyAccountant,
        noise: NoiseSource,
        transform: Callable[[np.ndarray], np.ndarray] | None = None,
    ):
        from pyspark import StorageLevel

        n_features = spark_features(frame)
        super().__init__(n_features, accountant, noise)
        transform = transform or _identity
        try:
            with warnings.catch_warnings():
                # The rows travel as Arrow batches into numpy, never through pandas: PySpark's notice
                # about its support of pandas >= 3 does not concern this path.
                warnings.filterwarnings("ignore", "PySpark does not yet fully support pandas", FutureWarning)
                packed = frame.mapInArrow(_packed_batches, "rows long, block binary")
            rdd = packed.rdd
        except Exception as exc:  # Spark Connect sessions have no RDD API
            raise ValueError(f"privclust needs a classic Spark session (DataFrame.rdd): {exc}") from None
        self._rdd = rdd.map(partial(_unpack, n_features=n_features, transform=transform))
        self._rdd = self._rdd.persist(StorageLevel.MEMORY_AND_DISK)
        # One pass that also fills the cache.  Refusing missing values is what the in-memory
        # path does too (check_data); the refusal releases nothing else and spends nothing.
        if not self._rdd.map(lambda chunk: chunk.finite).fold(True, lambda a, b: a and b):
            self.close()
            raise ValueError(
                "the Spark DataFrame has missing or non-finite values: drop or impute them first "
                "(e.g. df.na.drop()); privclust does not guess values for private rows"
            )

    def close(self) -> None:
        """Drop the cached chunks from the executors."""
        self._rdd.unpersist()

    def exact_sums(self, query: BucketSumQuery) -> np.ndarray:
        if query.structure is ROW_COUNT:
            return np.array([[float(self._rdd.map(lambda chunk: chunk.rows.shape[0]).sum())]])
        return self.exact_many([(query, None)])[0]

    def exact_sparse_sums(self, query: BucketSumQuery) -> tuple[np.ndarray, np.ndarray]:
        return self.exact_many([(query, 0.0)])[0]  # any delta marks the request sparse

    def exact_many(self, requests):
        """One Spark job for all the requests: every task folds its chunks into one running answer."""
        if any(q.structure is ROW_COUNT for q, _ in requests):
            return super().exact_many(requests)  # one by one; the count has its own job
        return self._rdd.treeAggregate(RunningAnswers(requests), _add_chunk, _merge_answers).result()

    def map_rows(self, fn):
        parts = [p for p in self._rdd.map(lambda chunk: fn(chunk.rows)).collect() if len(p)]
        return np.concatenate(parts) if parts else np.empty((0,))


def _identity(rows: np.ndarray) -> np.ndarray:
    return rows


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
    with warnings.catch_warnings():  # Arrow batches into numpy, never pandas (see SparkOracle)
        warnings.filterwarnings("ignore", "PySpark does not yet fully support pandas", FutureWarning)
        return frame.mapInArrow(partial(_label_batches, centers=np.asarray(centers, float), column=column), schema)


def _label_batches(batches, centers: np.ndarray, column: str):
    import pyarrow as pa

    from ..metrics import assign

    for batch in batches:
        labels = np.zeros(0, dtype=np.int32)
        if batch.num_rows:
            block = np.column_stack([np.asarray(c.to_numpy(zero_copy_only=False), np.float64) for c in batch.columns])
            labels = assign(block, centers)[0].astype(np.int32)
        yield batch.append_column(column, pa.array(labels, pa.int32()))

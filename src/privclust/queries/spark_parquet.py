"""A Spark DataFrame that is exactly a scan of local Parquet files, read by the Python workers themselves.

Spark hands a frame's rows to Python through the JVM, which decodes the
Parquet pages into its rows and encodes them again as Arrow batches; at
10^7 x 10 that first pass was most of a Spark fit, and the cache it filled
was read back at 1.7-2.6 s a pass (docs/benchmarks.md).  When the frame is
nothing but its files -- ``spark.read.parquet(path)``, perhaps with some of
its columns selected -- the workers read the row groups with pyarrow
instead, on every pass, and nothing is cached: the files are that copy
already, and decoding them is faster than reading a cache back.

:func:`parquet_pieces` decides by Spark's plan, its settings and the files'
footers: the optimised plan must be a Parquet relation without partition
columns under at most a selection of its columns (no filter, limit, cast,
alias or cache), every file must be on a ``file:`` path, and every file must
hold every selected column at top level under its exact name, once, stored in
a type that Spark reads unchanged (``STORED_AS``; Spark would wrap an int32
read as tinyint), with Spark not matching columns by field id.  ``SparkRows``
takes this path in local mode only, where the driver and the workers see one
file system.  Anything else returns None, and the rows go through the JVM as
before.  The footers' row-group sizes only spread the
work over tasks, inside the curator; nothing released depends on them.

The files are the private rows between passes, so they are checked, not
trusted: each piece carries its file's size, modification and change times,
inode and device as the driver saw them, and a task refuses a file that no
longer matches (or is gone) before it reads a row and again after -- a file
replaced during a fit would otherwise give the fit's releases different data
sets.  The driver reports that as :class:`InputChangedError`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from itertools import groupby
from operator import attrgetter
from urllib.parse import unquote, urlparse

import numpy as np

__all__ = ["ParquetPiece", "parquet_pieces", "read_pieces", "group_pieces", "InputChangedError", "CHANGED"]

# Each Spark type read here and the Arrow types a file may store it as, so that Spark reads the stored values
# unchanged (a file's int32 under a tinyint column would be wrapped by Spark, not by pyarrow: such a file is left
# to Spark); decimals and every other type are left to Spark too
STORED_AS = {
    "double": ("double",),
    "float": ("float",),
    "bigint": ("int64", "uint32"),
    "int": ("int32", "uint16"),
    "smallint": ("int16", "uint8"),
    "tinyint": ("int8",),
}
CHANGED = "changed while privclust was fitting"


class InputChangedError(RuntimeError):
    """A Parquet file read by the workers changed, or went, between two passes of a fit."""

    def __init__(self):
        super().__init__(
            "a Parquet input file changed or was removed while privclust was fitting it: the fit stopped before "
            "that pass released anything, and what it released before stays charged to its accountant. Leave the "
            "input files unchanged until a fit ends, and fit again"
        )


@dataclass(frozen=True)
class ParquetPiece:
    """One row group of one file, with what the driver saw of the file: its size, modification and change times,
    inode and device (a rewrite that restores the modification time still changes the change time)."""

    path: str
    row_group: int
    rows: int  # the row group's size: schedules the tasks inside the curator, never released
    stamp: tuple


def _stamp(seen: os.stat_result) -> tuple:
    return (seen.st_size, seen.st_mtime_ns, seen.st_ctime_ns, seen.st_ino, seen.st_dev)


def _local_path(uri: str) -> str | None:
    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme == "file" else None


def _class(node) -> str:
    return node.getClass().getSimpleName()


def _scanned_files(frame) -> list[str] | None:
    """The files Spark reads for ``frame``, each as often as it reads it (a path given twice is read twice), when
    its optimised plan is a Parquet relation without partition columns under at most a selection of its columns --
    no filter, limit, sample, cast or alias -- and no cached copy stands in for it; None otherwise.  The plan's
    classes are Spark's internals: anything unexpected, or a Spark that names them otherwise, answers None."""
    if getattr(frame, "is_cached", False):
        return None
    try:
        execution = frame._jdf.queryExecution()
        leaves = execution.withCachedData().collectLeaves()
        if any(_class(leaves.apply(i)) != "LogicalRelation" for i in range(leaves.size())):
            return None  # a cache (or anything else) holds these rows: read them where Spark would
        plan = execution.optimizedPlan()
        if _class(plan) == "Project":
            selected = plan.projectList()
            if any(_class(selected.apply(i)) != "AttributeReference" for i in range(selected.size())):
                return None
            plan = plan.child()
        if _class(plan) != "LogicalRelation":
            return None
        relation = plan.relation()
        if (
            _class(relation) != "HadoopFsRelation"
            or _class(relation.fileFormat()) != "ParquetFileFormat"
            or relation.partitionSchema().length() != 0
        ):
            return None
        return [str(uri) for uri in relation.location().inputFiles()]
    except Exception:
        return None


def parquet_pieces(frame) -> list[ParquetPiece] | None:
    """The row groups of the local Parquet files that ``frame`` is exactly a scan of; None when it is anything else
    (see the module docstring) -- the caller then reads the frame through the JVM."""
    import pyarrow.parquet as pq

    kinds = dict(frame.dtypes)
    if not all(kind in STORED_AS for kind in kinds.values()) or len(kinds) != len(frame.columns):
        return None
    conf = frame.sparkSession.conf
    if conf.get("spark.sql.parquet.fieldId.read.enabled", "false").lower() == "true":
        return None  # Spark then matches columns by their field ids, not by name
    case_sensitive = conf.get("spark.sql.caseSensitive", "false").lower() == "true"
    files = _scanned_files(frame)
    paths = [_local_path(uri) for uri in files or []]
    if not paths or None in paths:
        return None
    pieces = []
    for path in paths:
        try:
            seen = os.stat(path)
            with pq.ParquetFile(path) as source:
                schema, metadata = source.schema_arrow, source.metadata
        except (OSError, ValueError):
            return None
        if not _stores_as_spark_reads(schema, kinds, case_sensitive):
            return None
        pieces += [
            ParquetPiece(path, group, metadata.row_group(group).num_rows, _stamp(seen))
            for group in range(metadata.num_row_groups)
        ]
    return pieces


def _stores_as_spark_reads(schema, kinds: dict, case_sensitive: bool) -> bool:
    """Whether a file's top-level columns hold each of the frame's columns under its exact name, once (Spark would
    match a name of another case, and refuse one matched twice), in a type Spark reads unchanged (``STORED_AS``)."""
    names = schema.names
    for column, kind in kinds.items():
        same = [name for name in names if (name == column if case_sensitive else name.lower() == column.lower())]
        if same != [column] or str(schema.field(column).type) not in STORED_AS[kind]:
            return False
    return True


def group_pieces(pieces: list[ParquetPiece], tasks: int) -> list[list[ParquetPiece]]:
    """``pieces`` in at most ``tasks`` contiguous runs of about equal rows (each run one Spark partition)."""
    total = sum(piece.rows for piece in pieces)
    runs: list[list[ParquetPiece]] = [[] for _ in range(max(1, min(tasks, len(pieces))))]
    before = 0
    for piece in pieces:
        runs[min(len(runs) - 1, before * len(runs) // max(total, 1))].append(piece)
        before += piece.rows
    return [run for run in runs if run]


def _unchanged(piece: ParquetPiece) -> bool:
    try:
        return _stamp(os.stat(piece.path)) == piece.stamp
    except OSError:
        return False


def _changed(path: str) -> RuntimeError:
    return RuntimeError(f"{path} {CHANGED} it")  # the driver turns this into InputChangedError (spark._reading)


def read_pieces(runs, columns: list[str], rows_per_block: int):
    """A partition's runs of pieces -> float64 blocks of at most ``rows_per_block`` rows, columns in ``columns``'
    order (nulls become nan, which the caller refuses as missing values).  A file is checked unchanged before its
    first row is read and after its last (its pieces share one stamp: a stat a file)."""
    import pyarrow.parquet as pq

    for run in runs:
        for path, same_file in groupby(run, key=attrgetter("path")):
            pieces = list(same_file)
            if not _unchanged(pieces[0]):
                raise _changed(path)
            try:
                with pq.ParquetFile(path) as source:
                    groups = [piece.row_group for piece in pieces]
                    for batch in source.iter_batches(batch_size=rows_per_block, row_groups=groups, columns=columns):
                        # column-major: each column one contiguous copy (a pass 0.60 -> 0.33 s at 10^7 x 10)
                        block = np.empty((batch.num_rows, len(columns)), order="F")
                        for j, name in enumerate(columns):
                            block[:, j] = batch.column(name).to_numpy(zero_copy_only=False)
                        yield block
            except (OSError, ValueError):  # pyarrow's errors on a file truncated or rewritten under it
                if not _unchanged(pieces[0]):
                    raise _changed(path) from None
                raise
            if not _unchanged(pieces[0]):
                raise _changed(path)

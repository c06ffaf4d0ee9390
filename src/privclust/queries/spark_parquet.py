"""A Spark DataFrame that is exactly a scan of local Parquet files, read by the Python workers themselves.

Spark hands a frame's rows to Python through the JVM, which decodes the
Parquet pages into its rows and encodes them again as Arrow batches; at
10^7 x 10 that first pass was most of a Spark fit, and the cache it filled
was read back at 1.7-2.6 s a pass (docs/benchmarks.md).  When the frame is
nothing but its files -- ``spark.read.parquet(path)``, perhaps with some of
its columns selected -- the workers read the row groups with pyarrow
instead, on every pass, and nothing is cached: the files are that copy
already, and decoding them is faster than reading a cache back.

:func:`parquet_pieces` decides by Spark's plan and the files' footers: the
optimised plan must be a Parquet relation without partition columns under at
most a selection of its columns (no filter, limit, cast, alias or cache),
every file must be on a ``file:`` path, and every file must hold every
selected column by name.  Anything else returns None, and the rows go
through the JVM as before.  The footers' row-group sizes only spread the
work over tasks, inside the curator; nothing released depends on them.

The files are the private rows between passes, so they are checked, not
trusted: each piece carries its file's size and modification time as the
driver saw them, and a task refuses a file that no longer matches before it
reads a row and again after -- a file replaced during a fit would otherwise
give the fit's releases different data sets.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from itertools import groupby
from operator import attrgetter
from urllib.parse import unquote, urlparse

import numpy as np

__all__ = ["ParquetPiece", "parquet_pieces", "read_pieces", "group_pieces"]

# Spark types whose values a float64 holds as Spark's cast to double does (decimals are left to Spark)
DIRECT_TYPES = ("double", "float", "bigint", "int", "smallint", "tinyint")


@dataclass(frozen=True)
class ParquetPiece:
    """One row group of one file, with what the driver saw of the file."""

    path: str
    row_group: int
    rows: int  # the row group's size: schedules the tasks inside the curator, never released
    size: int
    mtime_ns: int


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

    if not all(kind in DIRECT_TYPES for _, kind in frame.dtypes) or len(set(frame.columns)) != len(frame.columns):
        return None
    files = _scanned_files(frame)
    paths = [_local_path(uri) for uri in files or []]
    if not paths or None in paths:
        return None
    pieces = []
    for path in paths:
        try:
            seen = os.stat(path)
            metadata = pq.ParquetFile(path).metadata
        except (OSError, ValueError):
            return None
        if not set(frame.columns) <= set(metadata.schema.names):
            return None  # Spark matched a column by another case, or filled one missing from this file with nulls
        pieces += [
            ParquetPiece(path, group, metadata.row_group(group).num_rows, seen.st_size, seen.st_mtime_ns)
            for group in range(metadata.num_row_groups)
        ]
    return pieces


def group_pieces(pieces: list[ParquetPiece], tasks: int) -> list[list[ParquetPiece]]:
    """``pieces`` in at most ``tasks`` contiguous runs of about equal rows (each run one Spark partition)."""
    total = sum(piece.rows for piece in pieces)
    runs: list[list[ParquetPiece]] = [[] for _ in range(max(1, min(tasks, len(pieces))))]
    before = 0
    for piece in pieces:
        runs[min(len(runs) - 1, before * len(runs) // max(total, 1))].append(piece)
        before += piece.rows
    return [run for run in runs if run]


def _check_unchanged(piece: ParquetPiece) -> None:
    seen = os.stat(piece.path)
    if (seen.st_size, seen.st_mtime_ns) != (piece.size, piece.mtime_ns):
        raise RuntimeError(
            f"{piece.path} changed while privclust was fitting it: a fit's releases must all read the same rows, "
            "so leave its input files unchanged until the fit ends, and fit again"
        )


def read_pieces(runs, columns: list[str], rows_per_block: int):
    """A partition's runs of pieces -> float64 blocks of at most ``rows_per_block`` rows, columns in ``columns``'
    order (nulls become nan, which the caller refuses as missing values)."""
    import pyarrow.parquet as pq

    for run in runs:
        for path, same_file in groupby(run, key=attrgetter("path")):
            pieces = list(same_file)
            for piece in pieces:
                _check_unchanged(piece)
            source = pq.ParquetFile(path, memory_map=True)
            groups = [piece.row_group for piece in pieces]
            for batch in source.iter_batches(batch_size=rows_per_block, row_groups=groups, columns=columns):
                block = np.empty((batch.num_rows, len(columns)), order="F")
                for j, name in enumerate(columns):
                    block[:, j] = batch.column(name).to_numpy(zero_copy_only=False)
                yield block
            _check_unchanged(pieces[-1])

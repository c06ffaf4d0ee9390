"""Reading tables of points (CSV, Parquet, .npy) and writing results so that no file is ever half-written.

Reading is in two steps, so that everything public is checked before a private row is read: the
*schema* (column names, from a header line, Parquet metadata or a ``.npy`` header) and then the rows
of the chosen columns.  Files without column names get ``x0, x1, ...`` by position.

No message raised here names a row, a row count or a value: a file that cannot be read gets a fixed
description of what is wrong with it (docs/privacy.md, threat model).

Writing goes through :class:`StagedFiles`: each output is written under a hidden temporary name in
its own folder and renamed into place (``os.replace``, atomic) only when every output is complete,
so an error or an interrupt leaves the old files or nothing, never a truncated one.
"""

from __future__ import annotations

import gzip
import os
import shutil
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from ._validation import check_data

__all__ = [
    "Table",
    "read_schema",
    "read_table",
    "read_frame",
    "read_points",
    "select_columns",
    "write_points",
    "StagedFiles",
    "check_output_path",
]

TEXT_SUFFIXES = (".csv", ".tsv", ".txt")
PARQUET_SUFFIXES = (".parquet", ".pq")
LABELS_CHUNK = 100_000  # labels written this many lines at a time (a few MB of text)


@dataclass(frozen=True)
class Table:
    """Rows of the feature columns (a memory map for ``.npy``) and their names."""

    X: np.ndarray
    columns: list[str]


def _looks_numeric(names) -> bool:
    try:
        [float(str(n)) for n in names]
        return True
    except ValueError:
        return False


def _kind(path: Path) -> str:
    name = path.name.lower()
    if name.endswith(".npy"):
        return "npy"
    if name.endswith(PARQUET_SUFFIXES):
        return "parquet"
    if name.endswith(TEXT_SUFFIXES) or name.endswith(tuple(s + ".gz" for s in TEXT_SUFFIXES)):
        return "text"
    raise ValueError(f"{path}: unsupported file type; use .csv, .csv.gz, .tsv, .txt, .parquet or .npy")


def _existing(path: str | Path) -> Path:
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no such file: {path}")
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a folder; give a CSV, Parquet or .npy file")
    return path


def _unreadable(path: Path, exc: BaseException) -> ValueError:
    """A fixed description of why ``path`` cannot be read: library messages may quote the file's
    bytes or a line number, and a line number is a row index."""
    if isinstance(exc, PermissionError):
        why = "permission denied"
    elif isinstance(exc, gzip.BadGzipFile):
        why = "its name ends in .gz but it is not gzip-compressed"
    elif isinstance(exc, (EOFError, zlib.error)):
        why = "it is truncated or corrupt (its compressed stream is damaged or ends early)"
    elif isinstance(exc, UnicodeDecodeError):
        why = "it is not UTF-8 text; save it as UTF-8"
    elif _kind(path) == "npy":
        why = "it is not a complete .npy array as numpy.save writes it (truncated, or another format)"
    elif _kind(path) == "parquet":
        why = "it is not a readable Parquet file (truncated, or another format)"
    else:
        why = "it is not a well-formed table: a line with more fields than the header, or an unclosed quote"
    return ValueError(f"cannot read {path}: {why}")


def _text_options(path: Path) -> dict:
    return {"sep": "\t" if ".tsv" in path.name.lower() else ","}


def _text_header(path: Path) -> tuple[list[str], bool]:
    """(column names, whether the first line is a header) of a CSV; reads the first line only."""
    import pandas as pd

    try:
        first = pd.read_csv(path, nrows=0, **_text_options(path))
    except pd.errors.EmptyDataError:
        raise ValueError(f"{path} is empty: no header line and no rows") from None
    except (OSError, EOFError, zlib.error, UnicodeDecodeError, pd.errors.ParserError) as exc:
        raise _unreadable(path, exc) from None
    if _looks_numeric(first.columns):  # no header line: the first line is data, the columns are unnamed
        return [f"x{j}" for j in range(len(first.columns))], False
    return [str(c) for c in first.columns], True


def _open_npy(path: Path) -> np.ndarray:
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        if "pickle" in str(exc).lower() or "object" in str(exc).lower():
            raise ValueError(f"{path} holds Python objects, not numbers: save a numeric array") from None
        raise _unreadable(path, exc) from None


def read_schema(path: str | Path) -> list[str]:
    """The column names of a table file, read from its header or metadata only: no row is read."""
    path = _existing(path)
    kind = _kind(path)
    if kind == "npy":
        arr = _open_npy(path)
        if arr.ndim != 2:
            check_data(arr, what=str(path))  # says what shape is needed
        return [f"x{j}" for j in range(arr.shape[1])]
    if kind == "parquet":
        import pyarrow.parquet as pq

        try:
            return [str(name) for name in pq.read_schema(path).names]
        except Exception as exc:  # pyarrow raises several types of its own for damaged files
            raise _unreadable(path, exc) from None
    return _text_header(path)[0]


def select_columns(names: Sequence[str], wanted: Sequence[str] | None) -> list[int]:
    """Positions of the ``wanted`` columns, each given by name or by 0-based position (all if None).

    A name wins over a position, so a column called "2" is that column, not the third one."""
    if wanted is None:
        return list(range(len(names)))
    positions = []
    for item in wanted:
        item = str(item).strip()
        if item in names:
            positions.append(list(names).index(item))
        elif item.isdigit() and int(item) < len(names):
            positions.append(int(item))
        else:
            raise ValueError(
                f"no column {item!r}: the columns are {list(names)} (by name, or by position 0 to {len(names) - 1})"
            )
    chosen = [names[p] for p in positions]
    repeated = sorted({c for c in chosen if chosen.count(c) > 1})
    if repeated:
        raise ValueError(f"columns {repeated} are chosen more than once")
    return positions


def _npy_columns(arr: np.ndarray, positions: list[int]) -> np.ndarray:
    """The chosen columns of a memory map: a view (still a map) when they are evenly spaced."""
    if positions == list(range(arr.shape[1])):
        return arr
    step = positions[1] - positions[0] if len(positions) > 1 else 1
    if step > 0 and positions == list(range(positions[0], positions[-1] + 1, step)):
        return arr[:, positions[0] : positions[-1] + 1 : step]
    return np.asarray(arr[:, positions])  # other selections are gathered into memory


def read_table(path: str | Path, columns: Sequence[str] | None = None) -> Table:
    """The checked rows of the chosen columns (all if None) of a CSV (header optional), Parquet or .npy file.

    ``.npy`` files are memory-mapped and returned as a map of their own dtype, so arrays larger than
    memory can be clustered: everything downstream reads them chunk by chunk.  A header-only CSV is a
    table with no rows, which is a legal data set (refusing it would reveal that it has none).
    """
    path = _existing(path)
    names = read_schema(path)
    positions = select_columns(names, columns)
    chosen = [names[p] for p in positions]
    kind = _kind(path)
    if kind == "npy":
        return Table(check_data(_npy_columns(_open_npy(path), positions), what=str(path)), chosen)
    import pandas as pd

    try:
        if kind == "parquet":
            frame = pd.read_parquet(path, columns=chosen)
        else:
            # Every column is parsed (not just the chosen ones), so that a malformed line is found.
            has_header = _text_header(path)[1]
            frame = pd.read_csv(path, header=0 if has_header else None, **_text_options(path))
            frame = frame.iloc[:, positions]
    except (FileNotFoundError, IsADirectoryError, MemoryError):
        raise
    except Exception as exc:  # pandas, pyarrow, gzip and zlib each raise their own types
        raise _unreadable(path, exc) from None
    frame.columns = chosen
    if frame.shape[0] == 0:  # no values to infer types from: the columns are numbers with no rows
        frame = frame.astype(np.float64)
    return Table(check_data(frame, what=str(path)), chosen)


def read_frame(path: str | Path):
    """Every column of a CSV (header optional) or Parquet file as a pandas frame, of any dtypes (an
    event log's operation column is text); unreadable files get the same fixed messages."""
    import pandas as pd

    path = _existing(path)
    kind = _kind(path)
    if kind == "npy":
        raise ValueError(f"{path}: give a CSV or Parquet table (an .npy array has no text columns)")
    try:
        if kind == "parquet":
            return pd.read_parquet(path)
        has_header = _text_header(path)[1]
        return pd.read_csv(path, header=0 if has_header else None, **_text_options(path))
    except (FileNotFoundError, IsADirectoryError, MemoryError):
        raise
    except Exception as exc:  # pandas, pyarrow, gzip and zlib each raise their own types
        raise _unreadable(path, exc) from None


def read_points(path: str | Path, columns: Sequence[str] | None = None) -> np.ndarray:
    """A finite (n, d) array of a file's rows: :func:`read_table` without the column names."""
    return read_table(path, columns).X


def read_spark_frame(path: str | Path, session):
    """A Spark DataFrame of the numeric feature columns of a Parquet file or folder, or a CSV file or folder.

    CSV: as :func:`read_points`, a first line of numbers is data, not a header.  Folders are what Spark
    itself writes (one part file per task), so a job's output can be clustered where it lies.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no such file or folder: {path}")
    name = "".join(path.suffixes[-2:]).lower()
    parts = [p.name.lower() for p in path.iterdir()] if path.is_dir() else [name]
    if any(p.endswith((".parquet", ".pq")) for p in parts) or name.endswith((".parquet", ".pq")):
        return session.read.parquet(str(path))
    if any(p.endswith((".csv", ".csv.gz", ".txt")) for p in parts):
        frame = session.read.csv(str(path), header=True, inferSchema=True)
        if _looks_numeric(frame.columns):
            frame = session.read.csv(str(path), header=False, inferSchema=True)
        return frame
    raise ValueError(f"{path}: the Spark engine reads Parquet or CSV files (or folders of them)")


# ---------------------------------------------------------------------------------------------- writing


def check_output_path(path: str | Path, what: str, formats: Sequence[str] | None = None) -> Path:
    """``path`` if a file can be created there: its folder exists, it is not a folder itself and (when
    ``formats`` is given) its suffix is one of them.  Whether the folder is writable is found out by
    :meth:`StagedFiles.reserve`, which creates the file's temporary twin there."""
    path = Path(path)
    folder = path.parent
    if not folder.is_dir():
        raise ValueError(f"{what} {path}: the folder {folder} does not exist")
    if path.is_dir():
        raise ValueError(f"{what} {path} is a folder; give a file name")
    if formats is not None and path.suffix.lower().lstrip(".") not in formats:
        raise ValueError(
            f"{what} {path}: cannot write {path.suffix or 'a file without a suffix'}; "
            f"use one of {', '.join('.' + f for f in formats)}"
        )
    return path


def _default_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


class StagedFiles:
    """Outputs written under temporary names and renamed into place together, or not at all.

    ``reserve(path)`` creates a hidden temporary file (or folder) next to ``path`` -- so a folder that
    does not exist or cannot be written is found before any work is done -- and returns its name,
    which ends like ``path`` (suffix-sniffing writers such as matplotlib and ``np.save`` work
    unchanged).  ``commit()`` syncs each one and ``os.replace``-s it over its target.  Leaving the
    ``with`` block without committing (an error, Ctrl-C) deletes every temporary and touches no target.
    """

    def __init__(self) -> None:
        self._staged: list[tuple[Path, Path]] = []  # (temporary, target)

    def __enter__(self) -> "StagedFiles":
        return self

    def __exit__(self, *exc) -> None:
        self.discard()

    def reserve(self, path: str | Path, what: str = "output", formats: Sequence[str] | None = None) -> Path:
        path = check_output_path(path, what, formats)
        if any(target.resolve() == path.resolve() for _, target in self._staged):
            raise ValueError(f"{what} {path} is already the name of another output")
        try:
            fd, name = tempfile.mkstemp(dir=path.parent, prefix=".privclust-", suffix="." + path.name)
        except OSError as exc:
            raise ValueError(f"{what} {path}: cannot write in {path.parent} ({exc.strerror})") from None
        os.close(fd)
        self._staged.append((Path(name), path))
        return Path(name)

    def reserve_folder(self, path: str | Path, what: str = "output") -> Path:
        """A temporary folder to be renamed to ``path`` (which must not exist) on commit."""
        path = Path(path)
        if path.exists():
            raise ValueError(f"{what} {path} exists: give the name of a new folder")
        check_output_path(path, what)
        try:
            name = tempfile.mkdtemp(dir=path.parent, prefix=".privclust-", suffix="." + path.name)
        except OSError as exc:
            raise ValueError(f"{what} {path}: cannot write in {path.parent} ({exc.strerror})") from None
        self._staged.append((Path(name), path))
        return Path(name)

    def commit(self) -> None:
        mode = _default_mode()
        for temporary, target in self._staged:
            if temporary.is_dir():
                continue
            with open(temporary, "rb") as written:
                os.fsync(written.fileno())  # the bytes are on disk before the name points at them
            os.chmod(temporary, target.stat().st_mode & 0o7777 if target.exists() else mode)
        for temporary, target in self._staged:
            os.replace(temporary, target)
        self._staged.clear()

    def discard(self) -> None:
        for temporary, _ in self._staged:
            if temporary.is_dir():
                shutil.rmtree(temporary, ignore_errors=True)
            else:
                temporary.unlink(missing_ok=True)
        self._staged.clear()


def write_points(path: str | Path, points: np.ndarray, header: list[str] | None = None, *, atomic: bool = True) -> None:
    """Write rows as CSV (or ``.npy`` by suffix); a 1-D array is one column (e.g. labels).

    ``atomic`` (default): written to a temporary name and renamed into place when complete, so the
    file is never seen half-written.  ``atomic=False`` writes ``path`` directly (for a name that
    :class:`StagedFiles` already reserved)."""
    if atomic:
        with StagedFiles() as staged:
            write_points(staged.reserve(path), points, header, atomic=False)
            staged.commit()
        return
    path = Path(path)
    if path.suffix.lower() == ".npy":
        with open(path, "wb") as out:  # a file object: np.save would append ".npy" to another name
            np.save(out, np.asarray(points))
        return
    if np.ndim(points) == 1 and np.asarray(points).dtype.kind in "iub":
        _write_integer_column(path, np.asarray(points), _csv_line((header or ["x0"])[:1]))
        return
    points = np.atleast_2d(points) if np.ndim(points) > 1 else np.asarray(points)[:, None]
    header = header or [f"x{j}" for j in range(points.shape[1])]
    np.savetxt(path, points, delimiter=",", header=_csv_line(header), comments="", fmt="%.10g")


def _csv_line(fields: list[str]) -> str:
    """One CSV line; a name holding a comma, a quote or a line break is quoted (Parquet names may)."""
    import csv
    import io

    line = io.StringIO()
    csv.writer(line, lineterminator="").writerow(fields)
    return line.getvalue()


def _write_integer_column(path: Path, values: np.ndarray, name: str) -> None:
    # Millions of labels: joined a chunk at a time, far faster than savetxt's line-by-line formatting.
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    with opener(path, "wt", newline="\n") as out:
        out.write(name + "\n")
        for start in range(0, len(values), LABELS_CHUNK):
            out.write(_labels_text(values[start : start + LABELS_CHUNK]))


def _labels_text(values: np.ndarray) -> str:
    return "".join(f"{v}\n" for v in values.tolist())

"""Reading tables of points (CSV, Parquet, .npy) and writing results so that no file is ever half-written.

Reading is in two steps, so that everything public is checked before a private row is read: the
*schema* (column names, from a header line, Parquet metadata or a ``.npy`` header) and then the rows
of the chosen columns.  Files without column names get ``x0, x1, ...`` by position.

A CSV's header is never guessed from values (a data row read as a header would be lost from the
fit and published as column names): the first line is a header when it holds names and no
numbers, data when it holds numbers (or missing values) and no names, and a line mixing both is
refused until ``header=True`` / ``header=False`` (``--header`` / ``--no-header``) says which.  A
missing value (an empty cell or one of :data:`MISSING`) in a chosen column is refused, naming the
column, unless ``dropna=True`` drops its row before anything is computed.

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

from ._validation import check_data, check_int, non_numeric_columns, non_numeric_refusal

__all__ = [
    "Table",
    "read_schema",
    "read_table",
    "read_table_and_ids",
    "read_frame",
    "read_points",
    "check_separator",
    "MISSING",
    "select_columns",
    "write_points",
    "StagedFiles",
    "check_output_path",
]

TEXT_SUFFIXES = (".csv", ".tsv", ".txt")
PARQUET_SUFFIXES = (".parquet", ".pq")
SPILL_CHUNK_BYTES = 4 * 2**20  # CSV and Parquet tables are read about this many bytes of numbers at a time
LABELS_CHUNK = 100_000  # labels written this many lines at a time (a few MB of text)


@dataclass(frozen=True)
class Table:
    """Rows of the feature columns (a memory map for ``.npy``) and their names."""

    X: np.ndarray
    columns: list[str]


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


# The cells read as a missing value (besides an empty one), exactly as written: a public rule.
MISSING = ("NA", "N/A", "n/a", "NaN", "nan", "-nan", "-NaN", "null", "NULL", "None", "#N/A", "<NA>")
_TABS = ("\t", "\\t", "tab", "TAB")  # a tab, typed literally or as \t or tab


def check_separator(sep: str | None) -> str | None:
    """``sep`` as one character (a tab may be given as ``\\t`` or ``tab``), None for the default: a
    ValueError for a separator that cannot be told from a number, a quote or a line break."""
    if sep is None:
        return None
    if sep in _TABS:
        return "\t"
    if len(sep) != 1 or sep.isalnum() or sep in ".\"'+-\r\n":
        raise ValueError(f"--sep must be one character such as ',' ';' '|' or a tab ('\\t'), got {sep!r}")
    return sep


def _text_options(path: Path, sep: str | None) -> dict:
    sep = check_separator(sep)
    if sep is None:
        sep = "\t" if ".tsv" in path.name.lower() else ","
    return {"sep": sep, "na_values": ["", *MISSING], "keep_default_na": False}


def _cell_kind(cell: str) -> str:
    """'number', 'missing' or 'name': what a cell of a CSV's first line says about it."""
    text = cell.strip()
    if not text or text in MISSING:
        return "missing"
    try:
        return "missing" if float(text) != float(text) else "number"  # float() takes nan, inf, 1e5, ' 3 '
    except ValueError:
        return "name"


def _text_header(path: Path, header: bool | None = None, sep: str | None = None) -> tuple[list[str], bool]:
    """(column names, whether the first line is a header) of a CSV; reads the first line only.

    Without ``header``: a line of names is a header, a line of numbers and missing values is data (so
    a data row is never taken for a header, whatever its values), and a line with both is refused
    without quoting it (it could be a private row)."""
    import pandas as pd

    options = _text_options(path, sep)
    try:
        first = pd.read_csv(path, header=None, nrows=1, dtype=str, na_filter=False, sep=options["sep"])
    except pd.errors.EmptyDataError:
        raise ValueError(f"{path} is empty: no header line and no rows") from None
    except (OSError, EOFError, zlib.error, UnicodeDecodeError, pd.errors.ParserError) as exc:
        raise _unreadable(path, exc) from None
    cells = [str(c) for c in first.iloc[0]] if len(first) else []
    if header is None:
        kinds = {_cell_kind(cell) for cell in cells}
        if {"name", "number"} <= kinds:
            raise ValueError(
                f"cannot tell whether the first line of {path} is a header: it holds both names and numbers; "
                "say which with --header or --no-header (header=True / header=False)"
            )
        header = "name" in kinds
    if not header:
        return [f"x{j}" for j in range(len(cells))], False
    try:  # pandas names the columns (an empty name becomes 'Unnamed: j', a repeated one 'a.1')
        named = pd.read_csv(path, nrows=0, sep=options["sep"])
    except (OSError, EOFError, zlib.error, UnicodeDecodeError, pd.errors.ParserError) as exc:
        raise _unreadable(path, exc) from None
    return [str(c) for c in named.columns], True


def _open_npy(path: Path) -> np.ndarray:
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        if "pickle" in str(exc).lower() or "object" in str(exc).lower():
            raise ValueError(f"{path} holds Python objects, not numbers: save a numeric array") from None
        raise _unreadable(path, exc) from None


def read_schema(path: str | Path, *, header: bool | None = None, sep: str | None = None) -> list[str]:
    """The column names of a table file, read from its header or metadata only: no row is read.

    ``header`` and ``sep`` are for CSV files (see the module's docstring); others ignore them."""
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
    return _text_header(path, header, sep)[0]


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


def read_table(
    path: str | Path,
    columns: Sequence[str] | None = None,
    *,
    header: bool | None = None,
    sep: str | None = None,
    dropna: bool = False,
    chunk_rows: int | None = None,
    scratch: str | Path | None = None,
) -> Table:
    """The checked rows of the chosen columns (all if None) of a CSV (header optional), Parquet or .npy file.

    ``.npy`` files are memory-mapped and returned as a map of their own dtype, so arrays larger than
    memory can be clustered: everything downstream reads them chunk by chunk (with ``dropna`` the
    chosen columns are read into memory, and rows holding a NaN dropped).  A header-only CSV is a
    table with no rows, which is a legal data set (refusing it would reveal that it has none).
    ``header``, ``sep`` and ``dropna``: see :func:`read_frame`.

    CSV and Parquet files are read ``chunk_rows`` rows at a time (default: about 4 MiB of numbers)
    into a float64 memory map of a temporary file in ``scratch`` (default: the system's temporary
    folder, ``TMPDIR``), so that they too may be larger than memory: see :func:`_spilled_rows`.
    """
    path = _existing(path)
    if _kind(path) == "npy":
        names = read_schema(path)
        positions = select_columns(names, columns)
        X = _npy_columns(_open_npy(path), positions)
        if dropna and X.dtype.kind == "f":
            X = np.asarray(X)
            X = X[~np.isnan(X).any(axis=1)]
        return Table(check_data(X, what=str(path)), [names[p] for p in positions])
    names, has_header, positions = _table_layout(path, columns, header, sep)
    chosen = [names[p] for p in positions]
    frames = _frames(path, names, has_header, positions, sep, _chunk_rows(chunk_rows, names))
    return Table(_spilled_rows(path, frames, chosen, dropna, scratch), chosen)


def _chunk_rows(chunk_rows: int | None, names: list[str]) -> int:
    """The rows read at a time: ``chunk_rows``, or about :data:`SPILL_CHUNK_BYTES` of numbers of the file's columns."""
    if chunk_rows is None:
        return max(1024, SPILL_CHUNK_BYTES // (8 * len(names)))
    return check_int("chunk_rows", chunk_rows)


def _table_layout(
    path: Path, columns: Sequence[str] | None, header: bool | None, sep: str | None
) -> tuple[list[str], bool | None, list[int]]:
    """(every column name, whether a CSV's first line is a header, the chosen positions): no row is read."""
    kind = _kind(path)
    if kind == "npy":
        raise ValueError(f"{path}: give a CSV or Parquet table (an .npy array has no text columns)")
    # the first line is read once: its names, and whether it is a header
    names, has_header = (read_schema(path), None) if kind == "parquet" else _text_header(path, header, sep)
    return names, has_header, select_columns(names, columns)


def _frames(
    path: Path,
    names: list[str],
    has_header: bool | None,
    positions: list[int],
    sep,
    chunk_rows,
    ids: bool = False,
):
    """The chosen columns of a CSV or Parquet file as pandas frames of ``chunk_rows`` rows (None: one frame).

    Every column of a CSV is parsed (not just the chosen ones), so that a malformed line is found; an
    unreadable file gets a fixed description (:func:`_unreadable`), from whichever chunk finds it.
    ``ids``: the last chosen column is a user-level fit's user ids, read without a guess at their type, which
    :func:`_typed_ids` makes once all are read: a CSV's as text, each cell as it is written (missing values
    aside), a Parquet file's with the column's own type (an integer column with a null stays integers: pandas
    would make a batch holding one floats, which cannot hold every integer beyond 2**53)."""
    import pandas as pd

    chosen = [names[p] for p in positions]
    try:
        if _kind(path) == "parquet":
            if chunk_rows is None:
                yield pd.read_parquet(path, columns=chosen)
                return
            import pyarrow.parquet as pq

            with pq.ParquetFile(path) as table:
                for batch in table.iter_batches(batch_size=chunk_rows, columns=chosen):
                    if not ids:
                        yield batch.to_pandas()
                        continue
                    frame = batch.select(range(len(chosen) - 1)).to_pandas()
                    frame[chosen[-1]] = batch.column(len(chosen) - 1).to_pandas(types_mapper=pd.ArrowDtype)
                    yield frame
            return
        options = {"header": 0 if has_header else None, **_text_options(path, sep)}
        if ids:  # pandas labels a headerless file's columns by position
            options["dtype"] = {names[positions[-1]] if has_header else positions[-1]: str}
        if chunk_rows is None:
            yield _chosen(pd.read_csv(path, **options), positions, chosen)
            return
        with pd.read_csv(path, chunksize=chunk_rows, **options) as reader:
            for frame in reader:
                yield _chosen(frame, positions, chosen)
    except (FileNotFoundError, IsADirectoryError, MemoryError):
        raise
    except Exception as exc:  # pandas, pyarrow, gzip and zlib each raise their own types
        raise _unreadable(path, exc) from None


def _chosen(frame, positions: list[int], names: list[str]):
    frame = frame.iloc[:, positions]
    frame.columns = names
    return frame


def _spilled_rows(path: Path, frames, names: list[str], dropna: bool, scratch, ids: list | None = None) -> np.ndarray:
    """The checked float64 rows of ``frames`` (whose columns are ``names``), written chunk by chunk to a
    temporary file and returned as a read-only memory map of it (an empty array when there are none).

    ``ids``: the frames' last column is a user-level fit's user ids, not a feature: it is checked for missing
    values with the others (and its rows dropped with theirs under ``dropna``), never as a number, and each
    chunk's ids are appended to ``ids`` (a numpy array per chunk, in row order).

    **Everything is checked before anything is returned.**  Every chunk is read, so a malformed line,
    a missing value, a non-numeric column or a non-finite value in the last chunk is refused as surely as
    one in the first, and before any row reaches a mechanism: the fit only starts on the returned map.
    The refusal is the one the whole file read at once would get (an unreadable file first, then missing
    values naming every column that holds one, then the non-numeric columns, then the values), and it
    names columns only, never a row, a value or a count.

    **The temporary file is private and never left behind.**  It is made by ``tempfile.TemporaryFile``:
    mode 0600, and without a name from the start (``O_TMPFILE``, or created and unlinked at once where
    the file system lacks it), so neither another user nor a crash, Ctrl-C or ``kill -9`` can leave the
    rows on disk under a name; the space is freed when the map is closed (the process ends, or the
    array is garbage-collected).  ``scratch`` should be a folder on a disk (not a RAM-backed tmpfs) with
    room for n x d x 8 bytes.

    A copy that cannot be written (a full disk) is refused with where and why, never how far it got
    (the row count is private).

    Memory: one chunk of parsed text at a time; the map's pages are the page cache's, read as the fit
    reads them and given back to it chunk by chunk after every pass (``privclust._pages``), so a table
    larger than memory fits where its file does and the fit's resident set holds only the chunks in flight."""
    missing: dict[str, None] = {}  # ordered sets of column names
    non_numeric: dict[str, None] = {}
    booleans: dict[str, set[bool]] = {}  # column -> whether a chunk read it as True/False, as numbers, or both
    refusal: ValueError | None = None
    rows = 0
    features = names if ids is None else names[:-1]
    with tempfile.TemporaryFile(dir=scratch, prefix=".privclust-rows-") as spill:
        for frame in frames:
            if not len(frame):  # a header-only CSV: no rows, and no values to infer the types from
                continue
            table = frame if ids is None else frame.iloc[:, :-1]  # the features
            non_numeric.update(dict.fromkeys(non_numeric_columns(table)))
            for column, dtype in zip(features, table.dtypes):
                booleans.setdefault(column, set()).add(dtype.kind == "b")
            # a column of True/False in one chunk and numbers in another is text read whole: refused the same way,
            # whatever the chunk boundaries
            non_numeric.update(dict.fromkeys(c for c in features if len(booleans[c]) == 2))
            if dropna:
                frame = frame.dropna()
            else:
                missing.update(dict.fromkeys(_missing_columns(frame)))
            if missing or non_numeric or refusal is not None or not len(frame):
                continue  # refused: the rest is read only to find what the whole file's refusal names
            if ids is not None:
                ids.append(_id_values(frame.iloc[:, -1]))
            try:
                block = check_data(frame if ids is None else frame.iloc[:, :-1], what=str(path))
            except ValueError as exc:
                refusal = exc
                continue
            try:
                spill.write(memoryview(np.ascontiguousarray(block, dtype=np.float64)).cast("B"))
            except OSError as exc:  # a full disk: no count or value in the message
                raise _no_room(path, scratch, exc) from None
            rows += block.shape[0]
        if missing:  # named in the table's order, as the whole file's refusal names them
            raise _missing_refusal([c for c in names if c in missing], path)
        if non_numeric:
            raise non_numeric_refusal([c for c in names if c in non_numeric], str(path))
        if refusal is not None:
            raise refusal
        if rows == 0:
            return np.zeros((0, len(features)))
        try:
            spill.flush()
        except OSError as exc:
            raise _no_room(path, scratch, exc) from None
        return np.memmap(spill, dtype=np.float64, mode="r", shape=(rows, len(features)))  # the map keeps the file open


def _no_room(path: Path, scratch, exc: OSError) -> ValueError:
    """The refusal of a table whose float64 copy cannot be written (a full disk, a quota): it says where,
    why (the system's words) and what to do; never how many rows were written."""
    folder = scratch if scratch is not None else tempfile.gettempdir()
    return ValueError(
        f"{path}: cannot write the temporary copy of its rows in {folder} ({exc.strerror or type(exc).__name__}): "
        "set TMPDIR to a folder on a disk with room for the table (8 bytes per number)"
    )


def read_table_and_ids(
    path: str | Path,
    columns: Sequence[str],
    id_column: str,
    *,
    header: bool | None = None,
    sep: str | None = None,
    dropna: bool = False,
    chunk_rows: int | None = None,
    scratch: str | Path | None = None,
) -> tuple[Table, np.ndarray]:
    """:func:`read_table` of the feature ``columns`` (names) and, row for row, the values of ``id_column``
    (a user-level fit's user ids: numbers or text), read together in chunks of a CSV or Parquet file: the
    features into the same temporary memory map as :func:`read_table`, the ids into memory (a user-level fit
    needs them all to choose each user's rows).  A missing id is a missing value like any other (refused
    naming the column, or its row dropped with ``dropna``), and every refusal is the one the whole file read
    at once gets, found before anything is returned (:func:`_spilled_rows`).

    The file is read once.  A Parquet file's ids have its column's type.  A CSV's are read as text and typed once
    all are read (:func:`_typed_ids`): integers when every id is one, exactly (never through floats); numbers
    when every id is one; text, each exactly as written, otherwise -- whatever the chunks, since no chunk's
    guess decides."""
    path = _existing(path)
    if _kind(path) == "npy":
        raise ValueError(f"{path}: user ids come from a column of a CSV or Parquet table, not an .npy array")
    names, has_header, positions = _table_layout(path, [*columns, id_column], header, sep)
    chosen = [names[p] for p in positions]
    frames = _frames(path, names, has_header, positions, sep, _chunk_rows(chunk_rows, names), ids=True)
    parts: list[np.ndarray] = []
    X = _spilled_rows(path, frames, chosen, dropna, scratch, parts)
    ids = np.concatenate(parts) if parts else np.zeros(0, dtype=object)
    del parts
    return Table(X, chosen[:-1]), _typed_ids(ids) if _kind(path) == "text" else ids


_TEXT = np.dtypes.StringDType()


def _id_values(column) -> np.ndarray:
    """A chunk's user ids as numpy values: text as numpy's variable-width strings (16 bytes an id, where a
    Python string takes some 50), anything else (a Parquet column's numbers) with its own dtype."""
    import pandas as pd

    return column.to_numpy(dtype=_TEXT) if pd.api.types.is_string_dtype(column.dtype) else column.to_numpy()


def _typed_ids(texts: np.ndarray) -> np.ndarray:
    """User ids read as text (``_TEXT``), typed as one column.

    Integers when every id is one (as Python's ``int`` reads it, spaces around allowed, ``_`` not): int64, or
    uint64 when they need it, read exactly; beyond 64 bits each is kept as its integer's decimal text, so that
    ``07`` and ``7`` stay one user there too.  Else numbers (float64) when every id is one (as ``float`` reads
    it, as a CSV's first line is read).  Else text, each id exactly as written.  The rule looks at every id
    and at nothing else, so the type does not depend on how the file was cut into chunks."""
    try:
        numbers = texts.astype(np.float64)
    except ValueError:
        return texts
    if texts.size and bool((np.strings.find(texts, "_") >= 0).any()):
        return texts  # Python reads 1_000 as a number; a table's reader does not
    for integers in (np.int64, np.uint64):
        try:
            return texts.astype(integers)
        except (ValueError, OverflowError):
            continue
    try:
        return np.array([str(int(text)) for text in texts], dtype=_TEXT)  # integers beyond 64 bits
    except ValueError:
        return numbers


def read_frame(
    path: str | Path,
    columns: Sequence[str] | None = None,
    *,
    header: bool | None = None,
    sep: str | None = None,
    dropna: bool = False,
):
    """The chosen columns (all if None) of a CSV or Parquet file as a pandas frame of any dtypes (an
    event log's operation column is text), read whole: the reader of every command's CSV and Parquet
    input that is not a table of points (those are read in chunks by :func:`read_table`).

    ``header`` (CSV): True, False, or None to decide from the first line (see the module's
    docstring).  ``sep`` (CSV): one character; default a tab for ``.tsv``, else a comma.  A missing
    value in a chosen column is refused, naming the column, unless ``dropna`` drops its row: a
    per-row rule, so neighbouring data sets stay neighbours (stability 1) and the drop costs nothing.
    Unreadable files get fixed messages that quote nothing from them.
    """
    path = _existing(path)
    names, has_header, positions = _table_layout(path, columns, header, sep)
    (frame,) = _frames(path, names, has_header, positions, sep, None)
    return _missing_values_handled(frame, path, dropna)


def _missing_values_handled(frame, path: Path, dropna: bool):
    """``frame`` without the rows holding a missing value (``dropna``), or a refusal naming the columns
    that hold one: never a value, a row or a count."""
    if dropna:
        return frame.dropna()
    holding = _missing_columns(frame)
    if holding:
        raise _missing_refusal(holding, path)
    return frame


def _missing_columns(frame) -> list[str]:
    return [str(c) for c, missing in frame.isna().any().items() if missing]


def _missing_refusal(holding: list[str], path: Path) -> ValueError:
    which = f"column {holding[0]!r} has" if len(holding) == 1 else f"columns {holding} have"
    return ValueError(
        f"{path}: {which} missing values (an empty cell, NA, NaN, ...): fill them in, or drop "
        "those rows with --dropna (dropna=True)"
    )


def read_points(
    path: str | Path,
    columns: Sequence[str] | None = None,
    *,
    header: bool | None = None,
    sep: str | None = None,
    dropna: bool = False,
) -> np.ndarray:
    """A finite (n, d) array of a file's rows: :func:`read_table` without the column names."""
    return read_table(path, columns, header=header, sep=sep, dropna=dropna).X


def read_spark_frame(path: str | Path, session, *, header: bool | None = None, sep: str | None = None):
    """A Spark DataFrame of the numeric feature columns of a Parquet file or folder, or a CSV file or folder.

    CSV: the header is decided as by :func:`read_frame`, from the first line of the first (non-empty)
    part file when ``header`` is None, and headerless columns are named ``x0, x1, ...``.  Folders are
    what Spark itself writes (one part file per task), so a job's output can be clustered where it lies.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no such file or folder: {path}")
    name = "".join(path.suffixes[-2:]).lower()
    parts = sorted(p for p in path.iterdir() if p.is_file()) if path.is_dir() else [path]
    if any(p.name.lower().endswith((".parquet", ".pq")) for p in parts) or name.endswith((".parquet", ".pq")):
        return session.read.parquet(str(path))
    texts = [p for p in parts if p.name.lower().endswith((".csv", ".csv.gz", ".txt"))]
    texts = [p for p in texts if p.stat().st_size > 0] or texts  # Spark writes empty part files
    if texts:
        names, has_header = _text_header(texts[0], header, sep)
        frame = session.read.csv(
            str(path), header=has_header, inferSchema=True, sep=_text_options(texts[0], sep)["sep"]
        )
        return frame if has_header else frame.toDF(*names)
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
        self._private: set[Path] = set()  # temporaries that stay readable by their owner only (mode 0600)

    def __enter__(self) -> "StagedFiles":
        return self

    def __exit__(self, *exc) -> None:
        self.discard()

    def reserve(
        self, path: str | Path, what: str = "output", formats: Sequence[str] | None = None, *, private: bool = False
    ) -> Path:
        """``private``: the file holds exact private values (a stream's state): mode 0600, whatever it replaces."""
        path = check_output_path(path, what, formats)
        if any(target.resolve() == path.resolve() for _, target in self._staged):
            raise ValueError(f"{what} {path} is already the name of another output")
        try:
            fd, name = tempfile.mkstemp(dir=path.parent, prefix=".privclust-", suffix="." + path.name)
        except OSError as exc:
            raise ValueError(f"{what} {path}: cannot write in {path.parent} ({exc.strerror})") from None
        os.close(fd)
        self._staged.append((Path(name), path))
        if private:
            self._private.add(Path(name))
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
            if temporary in self._private:
                os.chmod(temporary, 0o600)
            else:
                os.chmod(temporary, target.stat().st_mode & 0o7777 if target.exists() else mode)
        for temporary, target in self._staged:
            os.replace(temporary, target)
        self._staged.clear()
        self._private.clear()

    def discard(self) -> None:
        for temporary, _ in self._staged:
            if temporary.is_dir():
                shutil.rmtree(temporary, ignore_errors=True)
            else:
                temporary.unlink(missing_ok=True)
        self._staged.clear()
        self._private.clear()


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

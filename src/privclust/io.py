"""Reading tables of points: CSV, Parquet and .npy."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ._validation import check_data

__all__ = ["read_points", "read_table", "write_points"]


def _looks_numeric(names) -> bool:
    try:
        [float(str(n)) for n in names]
        return True
    except ValueError:
        return False


def read_points(path: str | Path) -> np.ndarray:
    """A finite float64 (n, d) array from a CSV (header optional), Parquet or .npy file.

    ``.npy`` files are memory-mapped, so arrays larger than memory can be
    clustered: the oracles read them chunk by chunk.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no such file: {path}")
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a folder; give a CSV, Parquet or .npy file")
    if path.suffix.lower() == ".npy":
        arr = np.load(path, mmap_mode="r", allow_pickle=False)
        if arr.dtype.kind not in "fiu":
            raise ValueError(f"{path}: array of dtype {arr.dtype} is not numeric")
        return check_data(arr, what=str(path))
    return check_data(read_table(path), what=str(path))


def read_table(path: str | Path):
    """A pandas frame from a CSV (header optional: a first line of numbers is data), TSV or Parquet file."""
    import pandas as pd

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no such file: {path}")
    suffixes = "".join(path.suffixes[-2:]).lower()
    if path.suffix.lower() in (".parquet", ".pq"):
        return pd.read_parquet(path)
    if suffixes.endswith((".csv", ".csv.gz", ".txt", ".tsv")):
        sep = "\t" if ".tsv" in suffixes else ","
        try:
            frame = pd.read_csv(path, sep=sep)
        except pd.errors.EmptyDataError:
            raise ValueError(f"{path} is empty") from None
        if _looks_numeric(frame.columns):  # no header line: the first row is data
            frame = pd.read_csv(path, sep=sep, header=None)
        return frame
    raise ValueError(f"{path}: unsupported file type; use .csv, .csv.gz, .tsv, .parquet or .npy")


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


def write_points(path: str | Path, points: np.ndarray, header: list[str] | None = None) -> None:
    """Write rows as CSV (or .npy by suffix)."""
    path = Path(path)
    if path.suffix.lower() == ".npy":
        np.save(path, points)
        return
    points = np.atleast_2d(points) if np.ndim(points) > 1 else np.asarray(points)[:, None]
    header = header or [f"x{j}" for j in range(points.shape[1])]
    np.savetxt(path, points, delimiter=",", header=",".join(header), comments="", fmt="%.10g")

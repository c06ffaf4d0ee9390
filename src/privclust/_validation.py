"""Input checks with messages that say what was wrong and what to do."""

from __future__ import annotations

import math
import numbers
from contextlib import contextmanager
from typing import Iterator

import numpy as np

from ._pages import drop_pages

__all__ = [
    "check_data",
    "refuse_non_numeric_columns",
    "non_numeric_columns",
    "non_numeric_refusal",
    "values_withheld",
    "check_n_clusters",
    "check_epsilon",
    "check_delta",
    "positive_finite",
    "check_int",
    "check_number",
    "check_shares",
]


def positive_finite(name: str, value) -> float:
    """``value`` as a float, or a ValueError naming ``name`` if it is not a positive finite number."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return float(value)


def check_int(name: str, value, low: int = 1, high: int | None = None, hint: str = "") -> int:
    """``value`` as an int in [low, high], or a ValueError naming ``name`` and the range."""
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Integral)
        or value < low
        or (high is not None and value > high)
    ):
        bound = f"between {low} and {high}" if high is not None else f">= {low}"
        raise ValueError(f"{name} must be an integer {bound}{hint}, got {value!r}")
    return int(value)


def check_number(
    name: str, value, low: float, high: float, *, open_low: bool = False, open_high: bool = False, hint: str = ""
) -> float:
    """``value`` as a float in the interval from ``low`` to ``high`` (each end open or closed)."""
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
    ok = ok and (value > low if open_low else value >= low) and (value < high if open_high else value <= high)
    if not ok:
        interval = f"{'(' if open_low else '['}{low:g}, {high:g}{')' if open_high else ']'}"
        raise ValueError(f"{name}{hint} must be a number in {interval}, got {value!r}")
    return float(value)


def check_shares(what: str, given: dict, required: tuple[str, ...], optional: tuple[str, ...] = ()) -> dict:
    """A budget split: positive shares for every ``required`` part, non-negative ``optional`` ones, sum 1."""
    if not isinstance(given, dict):
        raise TypeError(f"{what} must be a dict with keys from {required + optional}, got {type(given).__name__}")
    unknown = set(given) - set(required) - set(optional)
    if unknown:
        raise ValueError(f"{what} has unknown parts {sorted(unknown)}; use {required + optional}")
    missing = set(required) - set(given)
    if missing:
        raise ValueError(
            f"{what} needs exactly the parts {list(required)} (optional: {list(optional)}); missing {sorted(missing)}"
        )
    shares = {part: given.get(part, 0.0) for part in required + optional}
    for part, share in shares.items():
        if isinstance(share, bool) or not isinstance(share, numbers.Real) or not math.isfinite(share) or share < 0:
            raise ValueError(f"{what}[{part!r}] must be a non-negative number, got {share!r}")
        if part in required and share == 0:
            raise ValueError(f"{what}[{part!r}] must be positive: that step always runs")
    total = sum(shares.values())
    if abs(total - 1.0) > 1e-9:
        raise ValueError(f"{what} shares must sum to 1, got {total:.6g} from {given}")
    return {part: float(share) for part, share in shares.items()}


def check_data(X, what: str = "X") -> np.ndarray:
    """A finite float64 2-D array view of ``X`` (copied only if the dtype must change).

    A memory map (``np.memmap``, e.g. ``np.load(..., mmap_mode="r")``) of any real numeric dtype is
    checked block by block and returned as it is, neither converted nor copied: whoever reads it
    converts chunk by chunk (the oracles, ``metrics.assign``), so input larger than memory stays on disk.
    """
    if isinstance(X, np.memmap):
        return _check_memmap(X, what)
    if any(cls.__module__.startswith("pyspark.") for cls in type(X).__mro__):
        raise ValueError(
            f"{what} is a Spark object, which only KMeans.fit and KMeans.predict take (the rows stay in Spark); "
            "for this function, bring the rows into memory first (e.g. a numpy array)"
        )
    refuse_non_numeric_columns(X, what)
    with values_withheld(what):
        from sklearn.utils import check_array  # loaded on first use: the CLI starts without scikit-learn

        arr = check_array(X, dtype=np.float64, ensure_all_finite=False, ensure_min_samples=0, input_name=what)
    _check_shape_and_values(arr, what)
    return arr


def refuse_non_numeric_columns(X, what: str = "X") -> None:
    """A table's non-numeric columns, named (the schema is public) before any value is converted."""
    bad = non_numeric_columns(X)
    if bad:
        raise non_numeric_refusal(bad, what)


def non_numeric_columns(X) -> list[str]:
    """The names of a table's columns that pandas did not read as numbers (none for an array)."""
    columns = getattr(X, "columns", None)
    if columns is None or not hasattr(X, "dtypes"):
        return []
    from pandas.api.types import is_numeric_dtype

    return [str(c) for c, t in zip(columns, X.dtypes) if not is_numeric_dtype(t)]


def non_numeric_refusal(bad: list[str], what: str = "X") -> ValueError:
    """The refusal of a table whose columns ``bad`` are not numbers (a chunked reader gathers them first)."""
    return ValueError(f"{what} has non-numeric columns {bad}: drop or encode them before clustering")


# scikit-learn's input errors, by the start of their message: those that may quote the rows (the
# offending value, the whole array, the row count) get a fixed message; the others pass as they are.
_WITHHELD = {
    "Complex data not supported": "{what} is complex-valued (Complex data not supported): give real numbers",
    "could not convert": "{what} must be numeric: a value could not be converted to a number (not shown: it is private)",
    "Expected 2D array": "{what} must be 2-D (n_samples, n_features). Reshape your data: X.reshape(-1, 1) for a "
    "single feature, X.reshape(1, -1) for a single row",
    "Found array with 0 feature": "{what} has no features (columns)",
    "Found array with dim": "{what} must be 2-D (n_samples, n_features)",
}
_PASSED = ("X has ", "The feature names should match", "Feature names", "Sparse data")


@contextmanager
def values_withheld(what: str = "X") -> Iterator[None]:
    """Run scikit-learn's input checks without letting their messages quote private values."""
    try:
        yield
    except ValueError as exc:
        message = str(exc)
        for start, fixed in _WITHHELD.items():
            if message.startswith(start):
                raise ValueError(fixed.format(what=what)) from None
        if message.startswith(_PASSED):
            raise
        raise ValueError(f"{what} is not a numeric 2-D array (details withheld: they could quote the rows)") from None


def _check_memmap(X: np.memmap, what: str) -> np.memmap:
    if X.dtype.kind == "c":
        raise ValueError(f"{what} is complex-valued: give real numbers (e.g. split real and imaginary parts)")
    if X.dtype.kind not in "biuf":  # structured, string, datetime...: no numeric conversion to defer
        raise ValueError(f"{what} must be numeric, got a memory map of dtype {X.dtype}")
    _check_shape_and_values(X, what)
    return X


def _check_shape_and_values(arr: np.ndarray, what: str) -> None:
    # No message below names a row count or a row: the rows are private (see docs/privacy.md, threat model).
    if arr.ndim == 1:
        raise ValueError(
            f"{what} must be 2-D (n_samples, n_features), got a 1-D array. Reshape your data: X.reshape(-1, 1) "
            "for a single feature"
        )
    if arr.ndim != 2:
        raise ValueError(f"{what} must be 2-D (n_samples, n_features), got {arr.ndim} dimensions")
    if arr.shape[1] == 0:
        raise ValueError(f"{what} has no features (columns)")
    if arr.dtype.kind != "f":  # integers and booleans are always finite
        return
    # An empty data set is legal: under add/remove neighbours it neighbours every one-row data set,
    # so refusing it would reveal n = 0.  The algorithms release noise alone then.
    # In blocks of 2^21 values (16 MiB of float64, 2 MiB of flags), each block's pages of a memory map given
    # back once checked (``_pages``), so an array larger than memory is checked without loading it.
    step = max(1, 2**21 // arr.shape[1])
    for start in range(0, arr.shape[0], step):
        finite = np.isfinite(arr[start : start + step]).all()
        drop_pages(arr, slice(start, start + step))
        if not finite:
            raise ValueError(
                f"{what} contains NaN or infinite values: remove or impute them before clustering "
                "(privclust's data universe is finite real rows; it does not guess values for private rows)"
            )


MAX_CLUSTERS = 100_000  # a public cap: the centers are held in memory and k is never compared with n


def check_n_clusters(k, what: str = "n_clusters") -> int:
    """A positive integer k up to :data:`MAX_CLUSTERS`.

    k is never checked against the number of rows: that comparison would reveal the (private) row
    count; with more centers than rows some centers simply get noise-only updates."""
    return check_int(what, k, 1, MAX_CLUSTERS, hint=" (k is never compared with the private row count)")


def check_epsilon(epsilon) -> float:
    return positive_finite("epsilon", epsilon)


def check_delta(delta) -> float:
    if isinstance(delta, bool) or not isinstance(delta, numbers.Real) or not 0 <= delta < 1:
        raise ValueError(f"delta must lie in [0, 1), got {delta!r}; a common choice is well below 1/n")
    return float(delta)

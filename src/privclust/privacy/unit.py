"""The privacy unit: what one neighbouring step adds or removes -- a row, or every row of one user.

By default a fit protects rows: neighbouring data sets differ in one row.
Where one person owns many rows (telemetry, health, finance) that says little
about a person, so a fit may protect *users* instead
(``KMeans(privacy_unit="user", max_rows_per_user=m)`` with
``fit(X, user_ids=...)``): neighbouring data sets differ in all the rows of
one user.  Two steps make that guarantee hold:

1. **Bounding** (:class:`UserBound`): before anything is released, each user's
   rows are cut to at most ``m``, a uniformly random subset chosen by coins
   that are never released (``Randomness.secret``).  The choice reads the user
   ids and the coins only -- never a row's values -- so any values give the
   same selection.
2. **Scaling**: every release is calibrated for a change of ``m`` rows: a
   count's sensitivity is ``m``, a clipped sum's is ``m`` times a row's bound
   (in l2 for Gaussian noise, in l1 for Laplace noise: both norms obey the
   triangle inequality), and a sparse release's partition selection keeps a
   bucket only above the threshold that ``m`` buckets each holding the user's
   rows clear with probability ``delta / m`` each (so ``delta`` in all)
   (``queries.central``).  Mechanisms over exact rows (the exponential
   mechanism, NoisyAVG, the sparse vector, 1-cluster's stability steps) are
   priced for one row by each algorithm; their user-level cost is not simply
   ``m`` times it (group privacy multiplies delta by about m e^((m-1) eps)), so
   a user-level oracle refuses them (``Oracle.require``) rather than guess.

Privacy argument.  Let D and D' differ in one user u's rows.  Couple the
bounding coins of every other user (each user's subset is drawn from its own
rows' coins, and the coins of the rows are independent and identically
distributed): the bounded data sets then differ in u's kept rows only, at most
``m`` of them.  Every release is DP for data sets differing in ``m`` rows
(group sensitivity above), and a mixture over coupled coins keeps the same
(epsilon, delta) (the hockey-stick divergence is jointly convex), so the fit is
DP for user neighbours.  The coins must stay secret: fixed coins tied to row
positions would let u's rows shift which rows of the others are kept.

The number of users is private too: nothing released or shown depends on it
(no count of users or of kept rows is reported; the noisy row count that the
heuristics use is a count of the bounded rows, with sensitivity ``m``).

Spends carry the unit as their neighbour relation (:func:`user_relation`); a
ledger composes spends of one relation only, so user-level and row-level
spends are never added up as if they protected the same neighbours.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, replace

import numpy as np

from .._validation import check_int

__all__ = [
    "PrivacyUnit",
    "ROW",
    "UserBound",
    "user_relation",
    "rows_per_unit",
    "is_user_relation",
    "bounded_rows",
    "PRIVACY_UNITS",
    "EXACT_AT_USER_LEVEL",
    "check_privacy_unit",
    "missing_ids_refusal",
]

PRIVACY_UNITS = ("row", "user")
_USER = re.compile(r"^add/remove one user \(at most (\d+) rows?\)$")
EXACT_AT_USER_LEVEL = (
    "mechanisms over exact rows (the exponential mechanism, NoisyAVG, the sparse vector, 1-cluster's stability "
    "steps) are priced for one row's change by each algorithm, and their cost for a user's m rows is not simply "
    "m times that (group privacy multiplies delta by about m e^((m-1) epsilon))"
)


def user_relation(max_rows: int) -> str:
    """The neighbour relation of a user-level guarantee: one user's rows, at most ``max_rows`` of them."""
    return f"add/remove one user (at most {int(max_rows)} row{'s' if max_rows != 1 else ''})"


def is_user_relation(relation: str) -> bool:
    return _USER.match(relation) is not None


def rows_per_unit(relation: str) -> int:
    """How many rows one neighbouring step of ``relation`` may change (1 for the row relations)."""
    match = _USER.match(relation)
    return int(match.group(1)) if match else 1


@dataclass(frozen=True)
class PrivacyUnit:
    """What the guarantee protects: a row (``max_rows`` 1, ``user`` False) or a user owning up to ``max_rows``."""

    max_rows: int = 1
    user: bool = False

    @property
    def kind(self) -> str:
        return "user" if self.user else "row"

    def stated(self, spend):
        """``spend`` stated for this unit's neighbours (a row-level spend is returned as it is)."""
        return replace(spend, relation=user_relation(self.max_rows)) if self.user else spend

    def as_dict(self) -> dict:
        out = {"unit": self.kind}
        if self.user:
            out["max_rows_per_user"] = self.max_rows
        return out


ROW = PrivacyUnit()


def check_privacy_unit(unit, max_rows_per_user) -> PrivacyUnit:
    """The unit of ``privacy_unit`` and ``max_rows_per_user`` (public parameters), or a ValueError saying why."""
    if unit not in PRIVACY_UNITS:
        raise ValueError(f"privacy_unit must be one of {PRIVACY_UNITS}, got {unit!r}")
    if unit == "row":
        if max_rows_per_user is not None:
            raise ValueError("max_rows_per_user bounds each user's rows: give it with privacy_unit='user'")
        return ROW
    if max_rows_per_user is None:
        raise ValueError(
            "privacy_unit='user' needs max_rows_per_user: the public maximum of rows kept per user "
            "(each user's rows beyond it are dropped at random before anything is released)"
        )
    return PrivacyUnit(check_int("max_rows_per_user", max_rows_per_user, 1, 1 << 20), True)


def bounded_rows(inverse: np.ndarray, max_rows: int, rng: np.random.Generator) -> np.ndarray:
    """Sorted indices of the rows kept when each user (``inverse``: a user index per row) keeps at most
    ``max_rows`` rows, a uniformly random subset: the rows of each user with the smallest of i.i.d. uniform
    priorities drawn from ``rng``.  Reads user indices and coins only, never a row's values."""
    n = inverse.size
    priority = rng.random(n)
    order = np.lexsort((priority, inverse))  # by user, then by priority
    users = inverse[order]
    starts = np.ones(n, dtype=bool)
    starts[1:] = users[1:] != users[:-1]
    first = np.maximum.accumulate(np.where(starts, np.arange(n), 0)) if n else np.zeros(0, dtype=np.intp)
    rank = np.arange(n) - first  # each row's place among its user's rows, by priority
    return np.sort(order[rank < max_rows])


class UserBound:
    """Each user's rows bounded to ``unit.max_rows``: for rows in memory, ``user_ids`` (one per row); for a
    Spark DataFrame, the name of its user column.  The selection is made once, on the first read of the
    rows, with coins from ``rng`` (never released), and every release of the fit reads the same rows."""

    def __init__(self, user_ids, unit: PrivacyUnit, rng: np.random.Generator):
        if not unit.user:
            raise ValueError("a UserBound needs a user-level privacy unit")
        self.unit, self._rng = unit, rng
        self.column = user_ids if isinstance(user_ids, str) else None
        self._ids = None if self.column is not None else _checked_ids(user_ids)
        self._kept: np.ndarray | None = None
        self._lock = threading.Lock()

    @property
    def max_rows(self) -> int:
        return self.unit.max_rows

    def seed(self) -> int:
        """A secret seed for coins drawn where the rows live (Spark's ``rand``), never released."""
        return int(self._rng.integers(0, 2**62))

    def kept(self, n_rows: int) -> np.ndarray:
        """Sorted indices of the kept rows among ``n_rows`` (checked: one user id per row)."""
        with self._lock:
            if self._kept is None:
                if self._ids is None:
                    raise ValueError("user ids given as a column name are for a Spark DataFrame's column")
                if self._ids.size != n_rows:
                    raise ValueError(
                        "user_ids must give one user id per row of X, in the rows' order: their lengths differ"
                    )
                _, inverse = np.unique(self._ids, return_inverse=True)
                self._kept = bounded_rows(inverse.ravel(), self.max_rows, self._rng)
            return self._kept


def missing_ids_refusal(floating: bool = False) -> ValueError:
    """The refusal of user ids with a missing one (null, None, NaN; for float ids also an infinite one), wherever
    the rows live: a missing id is not a user, and counting the rows without one as one user would bound them
    together to ``max_rows``.  It names no row and no count."""
    if floating:
        return ValueError("user_ids has missing or non-finite ids: give every row a user id")
    return ValueError("user_ids has missing ids: give every row a user id")


def _checked_ids(user_ids) -> np.ndarray:
    """``user_ids`` as a 1-d array of comparable ids; refused (no id echoed) if it is not one."""
    ids = np.asarray(user_ids)
    if ids.ndim != 1:
        raise ValueError("user_ids must be one-dimensional: one user id per row of X")
    if ids.dtype.kind not in "biuUSfOT":  # T: numpy's variable-width strings (how a CSV's text ids are read)
        raise ValueError("user_ids must be integers or strings (one user id per row of X)")
    if ids.dtype.kind == "f":
        if not np.all(np.isfinite(ids)):
            raise missing_ids_refusal(floating=True)
    elif ids.dtype.kind == "T" and hasattr(ids.dtype, "na_object"):  # strings that may hold a missing value
        import pandas as pd

        if bool(pd.isna(ids.astype(object)).any()):
            raise missing_ids_refusal()
    elif ids.dtype.kind == "O":
        import pandas as pd

        if bool(pd.isna(ids).any()):  # None, NaN, pandas' NA
            raise missing_ids_refusal()
        kind = pd.api.types.infer_dtype(ids, skipna=False)  # one pass in C, not a loop over the rows
        if kind not in ("string", "integer", "empty"):
            raise ValueError("user_ids must be all integers or all strings (one user id per row of X)")
        ids = ids.astype(str) if kind == "string" else ids.astype(np.int64)
    return ids

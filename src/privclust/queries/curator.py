"""The central model's oracle for whatever holds the rows: an array (or memory map) or a Spark DataFrame.

Every entry point that clusters private rows in the central model
(``KMeans.fit``, ``elbow_curve``, ``one_cluster``) opens its oracle here, so
the checks on the input, the declared domain and the choice of where the rows
live are made once, the same way.  Only the input's public schema (its number
of columns) is read here; the rows themselves are checked and read when the
first release is computed -- after the algorithm's plan has been checked
against the budget -- except for ``bounds="data"``, which reads them at once
(and is charged as a non-private step first).
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Iterator

import numpy as np

from .._validation import check_data
from ..geometry.domain import Domain, make_domain
from ..privacy.budget import Budget, PrivacyAccountant, Spend
from ..privacy.noise import NoiseSource
from ..privacy.unit import ROW, UserBound
from .central import CentralOracle
from .plan import Oracle
from .rows import MemoryRows
from .spark import is_spark_frame

__all__ = ["Curated", "central_oracle", "fit_ledger", "input_features", "DATA_BOUNDS"]

# bounds="data" reads the domain off the rows: no DP guarantee survives that, so it is charged as a
# non-private step -- reported as epsilon = inf and refused by any finite shared budget, like "nonprivate-lloyd".
DATA_BOUNDS = Spend("bounds read off the data (not private)", epsilon=math.inf)


def reads_bounds_off_data(bounds) -> bool:
    return isinstance(bounds, str) and bounds == "data"


def fit_ledger(budget: Budget | None, bounds, parent: PrivacyAccountant | None) -> PrivacyAccountant:
    """The ledger of one fit: its own budget, under ``parent``.  With ``bounds="data"`` the fit is not
    private, so its ledger has no budget of its own (a finite ``parent`` still refuses it)."""
    return PrivacyAccountant(None if reads_bounds_off_data(bounds) else budget, parent=parent)


def input_features(X, what: str = "X") -> int:
    """The number of feature columns of ``X`` from its shape alone (public schema; no row is read)."""
    shape = getattr(X, "shape", None)
    if shape is None or len(shape) != 2:
        shape = check_data(X, what).shape  # lists and the like: already in memory; checks the shape
    if shape[1] == 0:
        raise ValueError(f"{what} has no features (columns)")
    return int(shape[1])


@dataclass(frozen=True)
class Curated:
    """What a privacy model's oracle factory opens (this module's for the central model; ``models``, the
    stream, a federated party and the local protocol have their own): the oracle, the domain, the number of
    features and the rows when they are in this process."""

    oracle: Oracle
    domain: Domain
    n_features: int
    rows: MemoryRows | None  # the rows when they are in this process; None on Spark, and where no rows are held

    def checked_rows(self) -> np.ndarray | None:
        """The checked training array, for what the data holder alone may see (labels_, inertia_)."""
        return None if self.rows is None else self.rows.data


@contextmanager
def central_oracle(
    X, bounds, budget: Budget | None, accountant: PrivacyAccountant, noise: NoiseSource, users: UserBound | None = None
) -> Iterator[Curated]:
    """Check the declared ``bounds`` against the input's schema and open the curator's oracle over the rows.

    ``users``: a user-level fit's bound (``privacy.unit``): the rows keep at most m per user where they
    live, and the oracle calibrates every release for m rows.

    Nothing here compares a parameter with the rows (k with n, say): every refusal is a function of
    the parameters and of the input's public schema, never of the private rows' values or count."""
    unit = ROW if users is None else users.unit
    if is_spark_frame(X):
        from .spark import SparkRows, spark_features

        if isinstance(bounds, str):
            raise ValueError("bounds='data' is not supported for Spark input: declare public bounds")
        domain = make_domain(bounds, spark_features(X, ignore=_user_column(users)))
        rows = SparkRows(X, transform=partial(_to_unit, domain), users=users)
        try:
            yield Curated(
                _attached(domain, CentralOracle(rows, budget, accountant, noise, unit)), domain, rows.n_features, None
            )
        finally:
            rows.close()
        return
    if users is not None and users.column is not None:
        raise ValueError("user ids given as a column name are for a Spark DataFrame: pass one user id per row")
    if reads_bounds_off_data(bounds):
        accountant.check([DATA_BOUNDS])  # refused by a finite budget before any row is read
        data = check_data(X)
        domain = make_domain(bounds, data.shape[1], data=data)
        accountant.spend(DATA_BOUNDS)
        X = data
    else:
        domain = make_domain(bounds, input_features(X))
    rows = MemoryRows(X, domain.n_features, transform=domain.to_unit, users=users)
    yield Curated(
        _attached(domain, CentralOracle(rows, budget, accountant, noise, unit)), domain, rows.n_features, rows
    )


def _to_unit(domain: Domain, rows: np.ndarray) -> np.ndarray:
    """``domain.to_unit``, shipped to Spark's executors with its domain pickled as a value: a private box
    (found on the driver before anything is shipped) travels as the plain box it found."""
    return domain.to_unit(rows)


def _attached(domain: Domain, oracle: CentralOracle) -> CentralOracle:
    """``oracle``, attached to ``domain``: a private box (``private_domain``) is found through the fit's
    own oracle -- the rows it owns, its noise, its ledger -- when the rows fix their transform on first read."""
    domain.attach(oracle)
    return oracle


def _user_column(users: UserBound | None) -> str | None:
    if users is None:
        return None
    if users.column is None:
        raise ValueError("for a Spark DataFrame, user_ids is the name of its user column (e.g. user_ids='user')")
    return users.column

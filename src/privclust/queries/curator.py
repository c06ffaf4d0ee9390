"""The central model's oracle for whatever holds the rows: an array (or memory map) or a Spark DataFrame.

Every entry point that clusters private rows in the central model
(``KMeans.fit``, ``elbow_curve``, ``one_cluster``) opens its oracle here, so
the checks on the input, the declared domain and the choice of engine are
made once, the same way, before anything is spent.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from .._validation import check_data
from ..geometry.domain import Domain, make_domain
from ..privacy.budget import Budget, PrivacyAccountant, Spend
from ..privacy.noise import NoiseSource
from .central import CentralOracle, CuratorOracle
from .spark import is_spark_frame

__all__ = ["Curated", "central_oracle", "fit_ledger", "DATA_BOUNDS"]

# bounds="data" reads the domain off the rows: no DP guarantee survives that, so it is charged as a
# non-private step -- reported as epsilon = inf and refused by any finite shared budget, like "lloyd".
DATA_BOUNDS = Spend("bounds read off the data (not private)", epsilon=math.inf)


def reads_bounds_off_data(bounds) -> bool:
    return isinstance(bounds, str) and bounds == "data"


def fit_ledger(budget: Budget | None, bounds, parent: PrivacyAccountant | None) -> PrivacyAccountant:
    """The ledger of one fit: its own budget, under ``parent``.  With ``bounds="data"`` the fit is not
    private, so its ledger has no budget of its own (a finite ``parent`` still refuses it)."""
    return PrivacyAccountant(None if reads_bounds_off_data(bounds) else budget, parent=parent)


@dataclass(frozen=True)
class Curated:
    oracle: CuratorOracle
    domain: Domain
    n_features: int
    rows: np.ndarray | None  # the checked rows when they are in this process; None on Spark


@contextmanager
def central_oracle(X, bounds, accountant: PrivacyAccountant, noise: NoiseSource) -> Iterator[Curated]:
    """Check ``X`` and the declared ``bounds``, and open the curator's oracle over the rows.

    Nothing here compares a parameter with the rows (k with n, say): every refusal is a function of
    the parameters and of the input's public schema, never of the private rows' values or count."""
    if is_spark_frame(X):
        from .spark import SparkOracle, spark_features

        if isinstance(bounds, str):
            raise ValueError("bounds='data' is not supported for Spark input: declare public bounds")
        n_features = spark_features(X)
        domain = make_domain(bounds, n_features)
        oracle = SparkOracle(X, accountant, noise, transform=domain.to_unit)
        try:
            yield Curated(oracle, domain, n_features, None)
        finally:
            oracle.close()
        return
    data_bounds = reads_bounds_off_data(bounds)
    if data_bounds:
        accountant.check([DATA_BOUNDS])  # refused by a finite budget before any row is read
    rows = check_data(X)
    domain = make_domain(bounds, rows.shape[1], data=rows)
    if data_bounds:
        accountant.spend(DATA_BOUNDS)
    yield Curated(CentralOracle(rows, accountant, noise, transform=domain.to_unit), domain, rows.shape[1], rows)

"""The central model's oracle for whatever holds the rows: an array (or memory map) or a Spark DataFrame.

Every entry point that clusters private rows in the central model
(``KMeans.fit``, ``elbow_curve``, ``one_cluster``) opens its oracle here, so
the checks on the input, the declared domain and the choice of engine are
made once, the same way, before anything is spent.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from .._validation import check_data, check_n_clusters
from ..geometry.domain import Domain, make_domain
from ..privacy.budget import PrivacyAccountant
from ..privacy.noise import NoiseSource
from .central import CentralOracle, CuratorOracle
from .spark import is_spark_frame

__all__ = ["Curated", "central_oracle"]


@dataclass(frozen=True)
class Curated:
    oracle: CuratorOracle
    domain: Domain
    n_features: int
    rows: np.ndarray | None  # the checked rows when they are in this process; None on Spark


@contextmanager
def central_oracle(
    X, bounds, accountant: PrivacyAccountant, noise: NoiseSource, n_clusters: int | None = None
) -> Iterator[Curated]:
    """Check ``X`` and the declared ``bounds``, and open the curator's oracle over the rows.

    ``n_clusters`` is checked against the number of rows where that number is at hand (in memory)."""
    if is_spark_frame(X):
        from .spark import SparkOracle, spark_features

        if isinstance(bounds, str):
            raise ValueError("bounds='data' is not supported for Spark input: declare public bounds")
        n_features = spark_features(X)
        if n_clusters is not None:
            check_n_clusters(n_clusters)
        domain = make_domain(bounds, n_features)
        oracle = SparkOracle(X, accountant, noise, transform=domain.to_unit)
        try:
            yield Curated(oracle, domain, n_features, None)
        finally:
            oracle.close()
        return
    rows = check_data(X)
    if n_clusters is not None:
        check_n_clusters(n_clusters, rows.shape[0])
    domain = make_domain(bounds, rows.shape[1], data=rows)
    yield Curated(CentralOracle(rows, accountant, noise, transform=domain.to_unit), domain, rows.shape[1], rows)

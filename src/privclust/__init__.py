"""privclust: differentially private clustering.

>>> from privclust import KMeans
>>> model = KMeans(n_clusters=3, epsilon=1.0, delta=1e-6, bounds=(-1, 1)).fit(X)  # doctest: +SKIP
>>> model.privacy_spent_  # doctest: +SKIP
"""

from . import datasets, metrics
from .elbow import ElbowCurve, elbow_curve
from .estimator import KMeans
from .geometry.domain import PrivacyLeakWarning
from .geometry.private_box import PrivateBox, private_bounds
from .locate import OneCluster, one_cluster, sample_and_aggregate
from .privacy.budget import Budget, BudgetExceededError, PrivacyAccountant, PrivacyReport
from .privacy.ledger import LedgerAccountant, LedgerError
from .queries.plan import CapabilityError
from .stream import ContinualKMeans, HorizonError
from .subsample import Subsampled

__version__ = "0.1.0"

__all__ = [
    "KMeans",
    "private_bounds",
    "PrivateBox",
    "ContinualKMeans",
    "Subsampled",
    "elbow_curve",
    "ElbowCurve",
    "one_cluster",
    "sample_and_aggregate",
    "OneCluster",
    "Budget",
    "BudgetExceededError",
    "PrivacyAccountant",
    "LedgerAccountant",
    "PrivacyReport",
    "PrivacyLeakWarning",
    "CapabilityError",
    "HorizonError",
    "LedgerError",
    "datasets",
    "metrics",
]

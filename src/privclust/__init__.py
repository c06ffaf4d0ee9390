"""privclust: differentially private clustering.

>>> from privclust import KMeans
>>> model = KMeans(n_clusters=3, epsilon=1.0, delta=1e-6, bounds=(-1, 1)).fit(X)  # doctest: +SKIP
>>> model.privacy_spent_  # doctest: +SKIP
"""

import importlib

# Where each public name lives.  They are imported on first use (PEP 562), so that ``import privclust`` --
# and the ``privclust`` command's start -- does not load scikit-learn, SciPy and pandas until needed.
_HOMES = {
    "KMeans": "estimator",
    "private_bounds": "private_domain",
    "PrivateBox": "geometry.private_box",
    "ContinualKMeans": "stream",
    "Subsampled": "subsample",
    "elbow_curve": "elbow",
    "ElbowCurve": "elbow",
    "one_cluster": "locate",
    "sample_and_aggregate": "locate",
    "OneCluster": "locate",
    "Budget": "privacy.budget",
    "BudgetExceededError": "privacy.budget",
    "PrivacyAccountant": "privacy.budget",
    "LedgerAccountant": "privacy.ledger",
    "PrivacyReport": "privacy.budget",
    "PrivacyLeakWarning": "privacy.leaks",
    "CompatibilityWarning": "compat",
    "CapabilityError": "queries.plan",
    "HorizonError": "stream",
    "LedgerError": "privacy.ledger",
}
_MODULES = ("datasets", "metrics")

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
    "CompatibilityWarning",
    "CapabilityError",
    "HorizonError",
    "LedgerError",
    "datasets",
    "metrics",
]


def __getattr__(name: str):
    if name in _MODULES:
        value = importlib.import_module(f".{name}", __name__)
    elif name in _HOMES:
        value = getattr(importlib.import_module(f".{_HOMES[name]}", __name__), name)
    else:
        raise AttributeError(f"module 'privclust' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

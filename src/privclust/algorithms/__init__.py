"""Clustering algorithms, written against the aggregate-query interface.

Importing this package registers every algorithm in :data:`ALGORITHMS`.
"""

from . import auto, evolve, greedy, lloyd, maxcover, onecluster  # noqa: F401  (registers the algorithms)
from .base import ALGORITHMS, FitContext, FitResult

__all__ = ["ALGORITHMS", "FitContext", "FitResult"]

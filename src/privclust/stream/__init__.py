"""Continual observation (Dupré la Tour, Henzinger & Saulpic 2024): private clustering of a data set that changes, one solution per step.

``ContinualKMeans`` (``stream.model``) publishes fresh centers after every
update; ``ContinualOracle`` (``stream.oracle``) is the privacy model on the
seam, answering declared queries with continual counters
(``stream.counters``: the binary tree, and the tree with the variance-optimal
estimator).  See docs/stream.md.
"""

from .counters import MECHANISMS, ContinualCounters, prefix_variance, tree_levels, tree_sensitivity
from .model import ContinualKMeans
from .oracle import ContinualOracle, HorizonError, StepNoise

__all__ = [
    "ContinualKMeans",
    "ContinualOracle",
    "ContinualCounters",
    "HorizonError",
    "StepNoise",
    "MECHANISMS",
    "prefix_variance",
    "tree_levels",
    "tree_sensitivity",
]

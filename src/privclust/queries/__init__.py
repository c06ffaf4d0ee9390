"""Aggregate queries, the rows they read, and the oracles (one per privacy model) that answer them."""

from .base import Block, Released, SumQuery, clip_blocks, count_query, voronoi_query
from .central import CentralOracle, ExactAccess, in_memory
from .plan import ADAPTIVE, DENSE, EXACT, LAPLACE, SPARSE, CapabilityError, Oracle, Part, Plan
from .rows import MemoryRows, Rows, bucket_sums

__all__ = [
    "Block",
    "SumQuery",
    "Released",
    "clip_blocks",
    "count_query",
    "voronoi_query",
    "CentralOracle",
    "ExactAccess",
    "in_memory",
    "Oracle",
    "Plan",
    "Part",
    "CapabilityError",
    "DENSE",
    "SPARSE",
    "ADAPTIVE",
    "EXACT",
    "LAPLACE",
    "Rows",
    "MemoryRows",
    "bucket_sums",
]

"""Aggregate queries and the oracles (one per privacy model) that answer them."""

from .base import AggregateOracle, BucketSumQuery, ValueBlock, clip_blocks, count_query
from .central import CentralOracle, bucket_sums

__all__ = [
    "AggregateOracle",
    "BucketSumQuery",
    "ValueBlock",
    "CentralOracle",
    "bucket_sums",
    "clip_blocks",
    "count_query",
]

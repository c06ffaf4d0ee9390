"""Releases reduced where they live: seed 000's merge-and-reduce (Section 5.2, Appendix F.2), for any oracle.

Some sparse releases are far larger than what an algorithm keeps of them: a
level of the greedy's balls on 10^8 rows has tens of millions of non-empty
balls, of which the greedy keeps a few dozen.  Such a release is asked for
together with a :class:`Reduction` -- public post-processing that keeps some
of a set of released buckets -- and only what the reduction keeps comes back
(``Plan.release_reduced``).  Where the rows live decides where it runs:

* **one machine** (in-memory rows, and any oracle that does not distribute):
  the whole release, then the reduction at the root;
* **a cluster** (``queries.spark.SparkRows``): the exact per-bucket sums are
  shuffled so that every bucket lives in exactly one of P partitions (a fixed
  public hash of its id, :func:`owner`); each partition draws the noise of its
  own buckets, applies the partition-selection threshold and the reduction
  (height 0); then groups of ``FAN_IN`` partitions merge their selections and
  reduce them again (height 1, 2, ...) until one partition holds the result,
  which alone reaches the driver.  A partition holds the partial sums of its
  own buckets (one per task that saw the bucket), a merge round ``FAN_IN``
  selections, and the driver one selection: its memory does not grow with the
  rows.

Privacy.  The release is the oracle's own sparse release, bucket for bucket:
every bucket is owned by exactly one partition, which draws that bucket's
noise once from the release's calibrated mechanism (``PartitionedNoise``:
independent sources per partition) and keeps it when the noisy first value
clears the release's threshold -- the same distribution, bucket by bucket and
jointly, as noising all of them on the driver.  The cost is charged before any
executor runs.  Everything after (the reductions, the merges, the tree's
shape) is post-processing of the release and costs nothing; what crosses
between machines before the noise is exact sums inside the trusted curator
(the cluster), as in every central-model release on Spark.  So a reduced
release keeps the guarantee of the release it reduces, whatever P.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from .base import Released

__all__ = [
    "FAN_IN",
    "Reduction",
    "owner",
    "tree_height",
    "concat",
    "split",
    "leaf_selections",
    "merged_selections",
    "merge_and_reduce",
]

FAN_IN = 8  # selections merged per machine and round: the tree over P partitions has ceil(log_8 P) rounds

# A fixed odd 64-bit multiplier (2^64 / golden ratio): ids that differ in low bits land far apart.
_HASH = np.uint64(0x9E3779B97F4A7C15)


class Reduction(ABC):
    """Public post-processing that keeps some of a set of released buckets; picklable (it runs on executors)."""

    @abstractmethod
    def select(self, released: Released, height: int, top: int) -> Released:
        """The buckets of ``released`` to keep, at ``height`` of a merge tree whose root is at ``top`` (leaves:
        0).  ``released`` lists its buckets by id; a dense release of the whole universe has ``ids`` None."""


def owner(ids: np.ndarray, partitions: int) -> np.ndarray:
    """The partition that owns each bucket id: a fixed public hash, the same on every machine."""
    mixed = np.asarray(ids, dtype=np.int64).astype(np.uint64) * _HASH
    return ((mixed >> np.uint64(32)) % np.uint64(partitions)).astype(np.int64)


def tree_height(partitions: int) -> int:
    """Rounds of merging until one of ``partitions`` selections is left."""
    height = 0
    while partitions > 1:
        partitions = -(-partitions // FAN_IN)
        height += 1
    return height


def split(ids: np.ndarray, sums: np.ndarray, partitions: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """A sparse answer's (ids, sums) cut into the parts each partition owns (ids stay sorted)."""
    where = owner(ids, partitions)
    # One stable sort by owner, not one scan per partition; numpy sorts 16-bit keys by radix, 8x faster than
    # 64-bit ones (600,000 ids: 93 -> 12 ms).
    keys = where.astype(np.uint16) if partitions <= 2**16 else where
    order = np.argsort(keys, kind="stable")
    ids, sums = ids[order], sums[order]
    cuts = np.concatenate(([0], np.cumsum(np.bincount(where, minlength=partitions))))
    return [(ids[a:b], sums[a:b]) for a, b in zip(cuts[:-1], cuts[1:])]


def concat(parts: list[Released]) -> Released:
    """The union of selections of disjoint bucket sets (one release's: the same error model)."""
    first = parts[0]
    names = list(first.values)
    values = {name: np.concatenate([p.values[name] for p in parts]) for name in names}
    ids = np.concatenate([p.ids for p in parts])
    return Released(values, dict(first.std), ids)


def leaf_selections(p: int, totals: list, noisers: list, reductions: list[Reduction], top: int) -> list[Released]:
    """Partition p at height 0: each release's exact sums of the buckets p owns, noised by ``noisers[i](p, ...)``
    and reduced."""
    return [r.select(noiser(p, total), 0, top) for noiser, r, total in zip(noisers, reductions, totals)]


def merged_selections(children: list[list[Released]], reductions: list[Reduction], height: int, top: int) -> list:
    """One machine of a merge round: its children's selections (in partition order) merged and reduced."""
    return [r.select(concat([child[i] for child in children]), height, top) for i, r in enumerate(reductions)]


def merge_and_reduce(leaves: list[list[Released]], reductions: list[Reduction]) -> list:
    """One machine's run of the tree: ``leaves[p]`` is partition p's :func:`leaf_selections` (made with
    ``top = tree_height(len(leaves))``); groups of ``FAN_IN`` consecutive partitions merge and reduce until
    one is left.  Spark runs the same rounds on its executors (``queries.spark``), grouping partition p with
    p // FAN_IN."""
    top = tree_height(len(leaves))
    level, height = leaves, 0
    while len(level) > 1:
        height += 1
        level = [
            merged_selections(level[s : s + FAN_IN], reductions, height, top) for s in range(0, len(level), FAN_IN)
        ]
    return level[0]

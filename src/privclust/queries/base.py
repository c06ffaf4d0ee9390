"""The aggregate-query interface: the only way algorithms touch private data.

A :class:`BucketSumQuery` asks, for each of ``n_buckets`` buckets (a Voronoi
cell, a grid cell, a ball, or the single bucket of a plain count), for the
noisy sum of a bounded vector function of the points in it -- the
"generalized bucketized vector summation" of seed 000; a histogram is the
special case where the value is 1.

The query names its *public* parameters only: a ``contribution`` function
that maps a chunk of points to one bucket id per point (``-1``: no bucket)
and one value row per point (a fresh array: oracles clip it in place), and, per block of value columns, the mechanism
that will noise that block's sums.  Where the function runs and who adds the
noise is the privacy model's business: an :class:`AggregateOracle`.  The
central oracle runs it over an in-memory array and adds the noise itself;
distributed, federated, local and continual oracles answer the same query
differently.

Privacy argument shared by every oracle: each point falls in at most one
bucket and its value row is clipped, block by block, to the norm bound the
block's mechanism assumes (l2 for Gaussian, l1 for Laplace).  Adding or
removing one point therefore changes one bucket's block sums by at most that
bound, so releasing all buckets' noisy block sums costs exactly one
application of each block's mechanism (parallel composition over buckets).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Callable, TypeVar

import numpy as np

from ..privacy.budget import PrivacyAccountant, Spend
from ..privacy.mechanisms import Mechanism
from ..privacy.noise import NoiseSource

__all__ = [
    "ValueBlock",
    "BucketSumQuery",
    "AggregateOracle",
    "ExactAccess",
    "sparse_threshold",
    "sparse_spends",
    "clip_blocks",
    "row_norms",
    "count_query",
    "voronoi_query",
    "ROW_COUNT",
]

T = TypeVar("T")
Contribution = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class ValueBlock:
    """A group of value columns released with one mechanism."""

    name: str
    width: int
    mechanism: Mechanism


@dataclass(frozen=True)
class BucketSumQuery:
    """Noisy per-bucket sums of a bounded vector function of the points."""

    label: str
    n_buckets: int
    blocks: tuple[ValueBlock, ...]
    contribution: Contribution
    # Optional description of the buckets (``VoronoiCells``, ``ROW_COUNT``) that
    # lets an oracle answer faster; ``contribution`` remains the definition.
    structure: object | None = None

    def __post_init__(self):
        if self.n_buckets < 1:
            raise ValueError("a query needs at least one bucket")
        names = [b.name for b in self.blocks]
        if len(set(names)) != len(names):
            raise ValueError(f"block names must be unique, got {names}")

    @property
    def width(self) -> int:
        return sum(b.width for b in self.blocks)

    def block_slices(self) -> list[tuple[ValueBlock, slice]]:
        out, start = [], 0
        for block in self.blocks:
            out.append((block, slice(start, start + block.width)))
            start += block.width
        return out

    def spends(self) -> list[Spend]:
        return [b.mechanism.spend(f"{self.label}/{b.name}") for b in self.blocks]


def row_norms(rows: np.ndarray, norm: str) -> np.ndarray:
    """The l1 or l2 norm of every row."""
    if norm == "l1":
        return np.abs(rows).sum(axis=1)
    return np.sqrt(np.einsum("ij,ij->i", rows, rows))


def clip_blocks(values: np.ndarray, query: BucketSumQuery) -> np.ndarray:
    """Scale each row's block down to its mechanism's norm bound (in place)."""
    for block, cols in query.block_slices():
        norm = block.mechanism.norm
        if norm is None:
            continue
        part = values[:, cols]
        size = row_norms(part, norm)
        bound = block.mechanism.sensitivity
        over = size > bound
        if np.any(over):
            values[over, cols] = part[over] * (bound / size[over])[:, None]
    return values


ROW_COUNT = "row count"  # structure marker: one bucket, every row contributes 1


def count_query(mechanism: Mechanism, label: str = "rows") -> BucketSumQuery:
    """The noisy number of rows: one bucket, value 1."""

    def contribution(chunk: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        m = chunk.shape[0]
        return np.zeros(m, dtype=np.intp), np.ones((m, 1))

    return BucketSumQuery(
        label=label,
        n_buckets=1,
        blocks=(ValueBlock("count", 1, mechanism),),
        contribution=contribution,
        structure=ROW_COUNT,
    )


def voronoi_query(label: str, cells, sum_mechanism: Mechanism, count_mechanism: Mechanism) -> BucketSumQuery:
    """Noisy per-cell sums ``[x - c or x]`` and counts over the Voronoi ``cells`` (see ``queries.voronoi``)."""
    d = cells.centers.shape[1]
    return BucketSumQuery(
        label=label,
        n_buckets=cells.n_cells,
        blocks=(ValueBlock("sum", d, sum_mechanism), ValueBlock("count", 1, count_mechanism)),
        contribution=cells.contribution,
        structure=cells,
    )


class AggregateOracle(ABC):
    """Answers bucket-sum queries over private data in one privacy model.

    Subclasses implement :meth:`release`; every release is checked against
    and recorded in ``accountant`` -- checked *before* data is read, so a
    refused query releases nothing.
    """

    def __init__(self, n_features: int, accountant: PrivacyAccountant, noise: NoiseSource):
        self.n_features = int(n_features)
        self.accountant = accountant
        self.noise = noise

    @abstractmethod
    def release(self, query: BucketSumQuery) -> dict[str, np.ndarray]:
        """Noisy sums, one ``(n_buckets, width)`` array per block name."""

    def release_sparse(self, query: BucketSumQuery, delta: float) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Noisy sums of the non-empty buckets whose noisy first column clears a threshold.

        For queries over huge bucket universes (every ball of a fine net):
        Gaussian partition selection.  Buckets holding rows get the block
        noise as in :meth:`release`; a bucket is kept when its noisy first
        value reaches ``sparse_threshold(mechanism, delta)``.  A bucket only
        one neighbour has holds one row, so its first value is at most the
        sensitivity and it is released with probability at most ``delta``:
        the release costs the blocks' spends plus (0, delta).  Returns
        (bucket ids, {block name: (kept, width) array}).
        """
        raise NotImplementedError(f"{type(self).__name__} has no sparse release")

    def release_many(self, requests: list[tuple[BucketSumQuery, float | None]]) -> list:
        """Several releases fixed in advance: ``(query, None)`` is :meth:`release`, ``(query, delta)``
        is :meth:`release_sparse`; the answers come in order.

        The answers, their noise and their spends are those of the calls one by one (none of the
        queries depends on another's answer, so nothing adaptive is lost); an oracle may compute
        the exact sums of all of them in one pass over its rows.  Every spend is checked before
        any row is read.
        """
        self.accountant.check([s for query, delta in requests for s in request_spends(query, delta)])
        return [self.release(q) if delta is None else self.release_sparse(q, delta) for q, delta in requests]

    def run_mechanism(self, spends: list[Spend], mechanism: Callable[["ExactAccess"], T]) -> T:
        """Run a mechanism that needs exact access to the rows (central model only).

        Some mechanisms are not noisy sums: the exponential mechanism over
        exact cover counts, NoisyAVG's noisy-size test.  A trusted curator can
        run them; ``spends`` (their proven cost) is checked before the rows
        are read and recorded after.  Other privacy models cannot.
        """
        raise NotImplementedError(
            f"{type(self).__name__} answers bucket-sum queries only; this algorithm needs exact access to the "
            "rows (the central model). Run it on the data holder's side, or choose an algorithm that uses "
            "noisy sums only (fastlloyd, glloyd, sulloyd)."
        )


def sparse_threshold(mechanism, delta: float) -> float:
    """The keep-threshold of :meth:`AggregateOracle.release_sparse` for a Gaussian first block."""
    from scipy.stats import norm

    if not 0 < delta < 1:
        raise ValueError(f"the sparse release's delta must lie in (0, 1), got {delta!r}")
    return float(mechanism.sensitivity + mechanism.std * norm.isf(delta))


def request_spends(query: BucketSumQuery, delta: float | None) -> list[Spend]:
    return query.spends() if delta is None else sparse_spends(query, delta)


def sparse_spends(query: BucketSumQuery, delta: float) -> list[Spend]:
    return [*query.spends(), Spend(f"{query.label}/threshold", delta=float(delta))]


class ExactAccess(ABC):
    """What a central-model mechanism may read: the transformed rows, chunk by chunk, or exact sums."""

    @abstractmethod
    def map_rows(self, fn: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """``fn`` applied to every chunk of rows (unit-box coordinates), results concatenated in row order."""

    @abstractmethod
    def sums(self, query: BucketSumQuery) -> np.ndarray:
        """The exact clipped per-bucket sums of ``query``, shape (n_buckets, width)."""

    @abstractmethod
    def sparse_sums(self, query: BucketSumQuery) -> tuple[np.ndarray, np.ndarray]:
        """(ids of the non-empty buckets, their exact clipped sums)."""

"""What a query declares about itself -- all of it public -- and what a release returns.

A :class:`SumQuery` asks, for each of ``n_buckets`` buckets (a Voronoi cell, a
grid cell, a ball, or the single bucket of a plain count), for the noisy sum of
a bounded vector function of the points in it -- the "generalized bucketized
vector summation" of Dupré la Tour, Henzinger & Saulpic (2024) (Cohen-Addad et al.); a histogram is the special
case where the value is 1.

The query declares only what is public: a ``contribution`` function that maps
a chunk of points to one bucket id per point (``-1``: no bucket) and one value
row per point (a fresh array: oracles clip it in place); per :class:`Block` of
value columns, its width, the norm bound every row's value is clipped to (the
block's sensitivity) and its *share* of the query's budget; and whether its
bucket universe is huge (``sparse``: only non-empty buckets can be listed).
It says nothing about noise.  Who evaluates the contribution and how the sums
are noised is the privacy model's business: an oracle (``queries.plan``),
which turns an algorithm's declared plan into noise and spends.

Privacy argument shared by every oracle: each point falls in at most one
bucket and its value row is clipped, block by block, to the block's norm
bound.  Adding or removing one point therefore changes one bucket's block sums
by at most that bound, so releasing all buckets' noisy block sums costs one
application of each block's mechanism (parallel composition over buckets).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

__all__ = [
    "significant_buckets",
    "Block",
    "SumQuery",
    "Released",
    "clip_blocks",
    "row_norms",
    "count_query",
    "voronoi_query",
    "ROW_COUNT",
    "NORMS",
]

Contribution = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]
NORMS = ("l2", "l1")


@dataclass(frozen=True)
class Block:
    """A group of value columns: every row's value here is clipped to ``bound`` in ``norm``.

    ``share`` is the block's relative share of its query's budget (shares of mu^2 for Gaussian
    noise, of epsilon for Laplace noise: the units that compose additively).  ``count`` says
    every row in a bucket contributes exactly 1 here (a public fact an oracle may use: the local
    model estimates counts from the bucket reports themselves).  ``coordinate_bound``, if given, says
    every coordinate of a value lies within +-it (rows in the unit box, say): an oracle that randomizes
    coordinates one at a time (the local model) scales by it instead of the norm bound."""

    name: str
    width: int
    bound: float
    norm: str = "l2"
    share: float = 1.0
    count: bool = False
    coordinate_bound: float | None = None

    def __post_init__(self):
        if not isinstance(self.width, int) or self.width < 1:
            raise ValueError(f"block {self.name!r} needs a positive width, got {self.width!r}")
        if not (math.isfinite(self.bound) and self.bound > 0):
            raise ValueError(f"block {self.name!r} needs a positive finite bound, got {self.bound!r}")
        if self.norm not in NORMS:
            raise ValueError(f"block {self.name!r}: norm must be one of {NORMS}, got {self.norm!r}")
        if not (math.isfinite(self.share) and self.share > 0):
            raise ValueError(f"block {self.name!r} needs a positive share, got {self.share!r}")

    def scale_to_bound(self, norms: np.ndarray, margin: float = 0.0) -> np.ndarray:
        """Per row, the factor that brings a value of norm ``norms`` within the bound (shrunk by a relative
        ``margin``): 1 where it already is.  Every clipping of a contribution goes through here."""
        bound = self.bound * (1.0 - margin)
        factors = np.ones(np.shape(norms))
        np.divide(bound, norms, out=factors, where=norms > bound)
        return factors

    @property
    def l2_bound(self) -> float:
        """The l2 sensitivity of the block's sums (an l1 bound B bounds the l2 norm by B too)."""
        return self.bound

    @property
    def l1_bound(self) -> float:
        """The l1 sensitivity of the block's sums (an l2 bound B bounds the l1 norm by B sqrt(width))."""
        return self.bound if self.norm == "l1" else self.bound * math.sqrt(self.width)


@dataclass(frozen=True)
class SumQuery:
    """Per-bucket sums of a bounded vector function of the points; see the module docstring."""

    label: str
    n_buckets: int
    blocks: tuple[Block, ...]
    contribution: Contribution
    # Optional description of the buckets (``VoronoiCells``, ``ROW_COUNT``) that lets rows be summed
    # faster; ``contribution`` remains the definition.
    structure: object | None = None
    sparse: bool = False  # a huge bucket universe: only the non-empty buckets are listed (and thresholded)
    # For a sparse query: a public map from the buckets kept by the query released just before it (a
    # coarser level) to this query's candidate buckets.  An oracle that cannot list the non-empty buckets of
    # a huge universe (the local model: it sees only reports) decodes these candidates only.
    narrows: Callable[[np.ndarray], np.ndarray] | None = None

    def __post_init__(self):
        if self.n_buckets < 1:
            raise ValueError("a query needs at least one bucket")
        names = [b.name for b in self.blocks]
        if not names or len(set(names)) != len(names):
            raise ValueError(f"a query needs blocks with unique names, got {names}")

    @property
    def width(self) -> int:
        return sum(b.width for b in self.blocks)

    def block_slices(self) -> list[tuple[Block, slice]]:
        out, start = [], 0
        for block in self.blocks:
            out.append((block, slice(start, start + block.width)))
            start += block.width
        return out

    def shares(self) -> list[float]:
        """Each block's share of the query's budget, normalised to sum to 1."""
        total = sum(b.share for b in self.blocks)
        return [b.share / total for b in self.blocks]


@dataclass
class Released:
    """What one release gives back: noisy per-block sums and their noise (the per-bucket error model).

    ``values[name]`` has one row per bucket (dense) or per kept bucket (sparse, ``ids`` lists them);
    ``std[name]`` is the standard deviation of the noise on each value of the block -- a number, or
    an array with one entry per row when the error differs by bucket (local model)."""

    values: dict[str, np.ndarray]
    std: dict[str, float | np.ndarray] = field(default_factory=dict)
    ids: np.ndarray | None = None

    def __getitem__(self, name: str) -> np.ndarray:
        return self.values[name]


SIGNIFICANCE = 0.05  # a coarser bucket narrows the next query's candidates when noise alone is this unlikely
MAX_NARROWING = 4096  # at most this many coarser buckets name the next query's candidates


def significant_buckets(released: Released, limit: int | None = MAX_NARROWING) -> np.ndarray:
    """The buckets whose first value clears what noise reaches over all the buckets released (Bonferroni),
    the ``limit`` largest of them at most (None: all): what names a sparse query's candidates through its
    ``narrows`` (post-processing of the release)."""
    from scipy.stats import norm

    first = next(iter(released.values))
    values = released.values[first][:, 0]
    ids = np.arange(values.size) if released.ids is None else released.ids
    if values.size == 0:
        return ids
    floor = float(np.max(released.std[first])) * float(norm.isf(SIGNIFICANCE / values.size))
    above = np.flatnonzero(values > floor)
    strongest = above if limit is None else above[np.argsort(-values[above], kind="stable")[:limit]]
    return ids[np.sort(strongest)]


def row_norms(rows: np.ndarray, norm: str) -> np.ndarray:
    """The l1 or l2 norm of every row."""
    if norm == "l1":
        return np.abs(rows).sum(axis=1)
    return np.sqrt(np.einsum("ij,ij->i", rows, rows))


def clip_blocks(values: np.ndarray, query: SumQuery) -> np.ndarray:
    """Scale each row's block down to the block's norm bound (in place).  A one-column block's norm is the
    value's size, in either norm; a block no row exceeds is left as it is (its factors would all be 1)."""
    for block, cols in query.block_slices():
        part = values[:, cols]
        norms = np.abs(part[:, 0]) if block.width == 1 else row_norms(part, block.norm)
        if np.any(norms > block.bound):
            part *= block.scale_to_bound(norms)[:, None]
    return values


ROW_COUNT = "row count"  # structure marker: one bucket, every row contributes 1


def count_query(label: str = "rows") -> SumQuery:
    """The number of rows: one bucket, value 1."""

    def contribution(chunk: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        m = chunk.shape[0]
        return np.zeros(m, dtype=np.intp), np.ones((m, 1))

    return SumQuery(label, 1, (Block("count", 1, 1.0, count=True),), contribution, structure=ROW_COUNT)


def voronoi_query(label: str, cells, sum_block: Block, count_share: float = 1.0) -> SumQuery:
    """Per-cell sums ``[x - c or x]`` (``sum_block``) and counts over the Voronoi ``cells`` (``queries.voronoi``)."""
    return SumQuery(
        label=label,
        n_buckets=cells.n_cells,
        blocks=(sum_block, Block("count", 1, 1.0, share=count_share, count=True)),
        contribution=cells.contribution,
        structure=cells,
    )

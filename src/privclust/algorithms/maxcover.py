"""Max-cover k-means (Nguyen, Chaturvedi & Xu 2021): JL projection, private greedy grid cover, noisy proxy, NoisyAVG.

The algorithm, in the unit box of the declared bounds:

1. Project with a public JL matrix into the unit ball of R^{d'}
   (``geometry.projection``; d' = log(n)/2 by default, lowered if one
   level's cover of n 2^{d'} keys would not fit in memory).
2. For grid sides t_i = 2 / growth^i down to 1/n (finest first), choose
   ``candidates_per_level`` grid points greedily, each by the *implicit*
   exponential mechanism over the whole grid G_i with score = the number of
   not-yet-covered points it covers, and remove the points it covers
   (Algorithm 2).  Covered points stay removed for the following levels, as
   in the seed (D' is passed by reference).
3. Proxy data set: each point moves to its nearest candidate; the candidate
   counts are released with Laplace(1/eps_L) noise.
4. Weighted k-means (scikit-learn, non-private) on the proxy gives k centers
   in R^{d'}; their Voronoi cells split the original points; each part is
   averaged in the original space -- the seed's NoisyAVG (eps_G, delta_G), or
   (default with the histogram cover) one Gaussian release of the parts' sums
   and sizes, below; optionally DP Lloyd rounds (FastLloyd's radius step)
   refine the centers.

**The cover function.** The seed's cover of a grid point g is every point
within r_i + t_i sqrt(d') of g; listing, for each point, the grid points in
that ball costs (r/t)^{d'} per point, exponential in d'.  We use instead:
a point covers the 2^{d'} corners of the (randomly shifted) grid cell that
contains it.  This is fixed before the data are seen, and a point belongs to
a fixed set of 2^{d'} covers, so every cover count still has sensitivity 1
and Lemma 17's set-cover argument applies unchanged (it holds for any public
set system).  What changes: g's cover is the cube [g - t, g + t]^{d'} (it
contains the ball of radius t about g and lies in the ball of radius
t sqrt(d')) instead of a ball, so the level with side t plays the role of the
seed's level of radius about t.

**Privacy (Theorem 16).**  All m * k' exponential-mechanism draws of the
cover, each eps_E-DP for a score of sensitivity 1, are together
(e eps_E ln(1/delta_E) / 2, delta_E)-DP (Lemma 17, after Gupta et al. 2010);
we choose eps_E so that this equals the cover's share of the budget.  The
proxy counts are one Laplace histogram (eps_L: a point changes one count by
one).  The NoisyAVGs run on disjoint parts, so together they cost one
(eps_G, delta_G) (parallel composition); the Gaussian average in their place
is a pooled Gaussian release (below).  The final Lloyd rounds are Gaussian
releases of mu-GDP, converted with the pool at its share of delta.  A noisy row
count (Laplace, ``count_fraction`` of epsilon) sizes d' and the levels unless
``public_n`` is given.  Basic composition of the parts gives the total that
``privacy_spent_`` reports, itemised.

**The histogram cover** (``algorithm_params={"cover": "histogram"}``; the
seed's draws above are ``cover="exponential"``).  Instead of k' sequential
exponential-mechanism draws per level, each level releases one noisy sparse
histogram and the greedy max cover runs on the released counts.  Level i's
query: each row *not covered at a finer level* adds 1 to the count of the one
cell of the level's shifted grid that contains its projection, and to nothing
else; so the query's l2 (and l1) sensitivity is 1, whatever d'.  The rows
covered at finer levels are named by the grid points chosen from the finer
levels' *released* histograms, so each query is fixed by earlier releases
(adaptive composition; a row's contribution still touches at most one cell).
The histogram is sparse (the grid has up to 2^62 cells; finer levels, which
could not be indexed, are skipped -- a public choice from n and d'): the
oracle adds Gaussian noise to the cells holding at least one row's count (the
listing floor) and keeps a cell only when its noisy count clears the
partition-selection threshold that a cell only one neighbour lists clears with
probability delta_i (``queries.central.sparse_threshold``, as the greedy's
histogram levels); the threshold costs delta_i.  The L levels
each draw 1/L of the plan's pooled part COVER: mu_i = mu_cover / sqrt(L),
delta_i = delta_cover / L, so together they are mu_cover-GDP plus delta_cover,
exactly (GDP composition).  Everything after is post-processing: a grid point's
score is the released count of the not-yet-covered cells it is a corner of (the
same set system as the exponential cover: a point covers the 2^{d'} corners
of its cell), the greedy takes the best up to k' times per level and stops
early when every kept cell is covered (no uniform draws into empty space); if
fewer than k points are chosen, public uniform points pad the candidates.

**The Gaussian average** (``algorithm_params={"average": "gaussian"}``, the
default with the histogram cover; ``"noisyavg"`` is the seed's step and the
default with the exponential cover).  In place of NoisyAVG, one Gaussian
release of every part's sum and size from the pool: the parts (the projected
Voronoi split) are disjoint, so a row changes one part's sum by at most
|x| <= sqrt(d) (rows in the unit box) and one size by 1; the two blocks split
the release's mu^2 as FastLloyd's eq. 7 does.  NoisyAVG's noise, 5 diam /
(4 eps m) sqrt(2 ln(3.5/delta)) per coordinate, is several times the Gaussian
release's at the same budget: on the 64-Gaussian mixture in R^100 (k = 64)
the cost per point drops from 6.5 to 4.5-4.7 (docs/benchmarks.md).
``lloyd_iterations`` (default 4) final FastLloyd rounds, each 1/T of the
round's share, with FastLloyd's two post-processing steps (``algorithms.lloyd``:
a center whose noisy cell is empty splits the largest cells, every noisy move
is shrunk by James-Stein): the cover in d' dimensions merges clusters, and the
rounds, in all d, split them again.  On the 64-Gaussian mixture (k = 64) one
plain round cost 4.4, three plain rounds 5.2, and four with the two steps
1.6 (FastLloyd 3.1; docs/benchmarks.md).  Both steps read only the rounds'
released sums and sizes, the noise's public std and public randomness:
post-processing.

The plan: the cover, the Gaussian average and the final Lloyd round share
one Gaussian pool (the budget left after the explicit parts: proxy, NoisyAVG,
row count) in the ratio of their ``budget_split`` shares; delta is split in
equal parts between the partition selection or Lemma 17, NoisyAVG (if used),
and the pool's (epsilon, delta) conversion.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..geometry.grid import dense_ids
from ..geometry.nets import Level
from ..geometry.projection import BallProjection, default_projection_dim
from ..privacy.mechanisms import ExponentialCandidates, NoisyAverage
from ..privacy.noise import NoiseSource
from ..queries.base import Block, SumQuery
from ..queries.plan import ADAPTIVE, EXACT, LAPLACE, Part, Spec
from ..queries.voronoi import count_values, projected_cells_query
from .base import ROW_COUNT_PART, FitContext, FitResult, algorithm_params, estimate_rows, register, weighted_kmeans
from .lloyd import LLOYD_PART, fastlloyd_eta, fastlloyd_shares, fastlloyd_step, run_lloyd
from .params import Boolean, Integer, Interval, OneOf, Param, Params, Shares, declare

__all__ = [
    "MaxCoverPlan",
    "CoverLevel",
    "corner_keys",
    "corner_offsets",
    "greedy_cover_of_counts",
    "greedy_grid_cover",
    "grid_sides",
    "histogram_grid_cover",
    "level_grid_size",
    "maxcover",
]

SPLIT_PARTS = ("cover", "proxy", "average", "lloyd")
# Per cover: the seed's split for the exponential cover; for the histogram cover, the split measured best on the
# 64-Gaussian mixture with NoisyAVG (docs/benchmarks.md): its cover needs less budget.  With the Gaussian average
# the splits tried were no better (docs/benchmarks.md, "the Gaussian average").
DEFAULT_SPLITS = {
    "exponential": {"cover": 0.4, "proxy": 0.1, "average": 0.25, "lloyd": 0.25},
    "histogram": {"cover": 0.2, "proxy": 0.05, "average": 0.5, "lloyd": 0.25},
}
MAX_PROJECTION_DIM = 12  # 2^{d'} corners per point: 4096 at d' = 12
MAX_CANDIDATES = 200_000
MAX_LLOYD_ITERATIONS = 20
LLOYD_ITERATIONS = 4  # the final rounds, with dead centers reseeded and moves shrunk (docs/benchmarks.md)
MAX_COVER_BYTES = 4 * 2**30  # refuse covers whose per-level keys would not fit in a few GiB
COVERS = ("histogram", "exponential")
AVERAGES = ("noisyavg", "gaussian")  # the seed's NoisyAVG, or one Gaussian release of sums and counts from the pool
# Per cover: the seed's NoisyAVG with the seed's cover; the Gaussian average, measured better, with the histogram's.
DEFAULT_AVERAGE = {"exponential": "noisyavg", "histogram": "gaussian"}
DEFAULT_COVER = "histogram"  # measured: docs/benchmarks.md, "Max cover: the histogram cover"
MAX_LOG_CELLS = math.log(2.0**62)  # a histogram level with more cells than this cannot be indexed: it is skipped
COVER, PROXY, AVERAGE = (
    "max cover: greedy grid cover (Lemma 17)",
    "max cover: proxy counts",
    "max cover: NoisyAVG per cluster",
)
COVER_LEVEL = "max cover: histogram of level {}"
GAUSSIAN_AVERAGE = "max cover: Gaussian average per cluster"
# maxcover's algorithm_params (algorithms.params); None: worked out in ``plan`` from the other values.
declare(
    Params(
        "maxcover",
        "maxcover",
        params={
            "projection_dim": Param(Integer(1, hint=" (the projected dimension d' >= 1)")),  # None: from n
            "budget_split": Param(Shares(SPLIT_PARTS[:3], ("lloyd",))),  # None: DEFAULT_SPLITS[cover]
            "growth": Param(
                Interval(1.0, 16.0, closed="right", hint=" (the ratio between consecutive grid sides)"), 2.0
            ),
            "candidates_per_level": Param(Integer()),  # None: k
            "final_lloyd": Param(Boolean(), True),
            "cover": Param(OneOf(COVERS), DEFAULT_COVER),
            "average": Param(OneOf(AVERAGES)),  # None: DEFAULT_AVERAGE[cover]
            "lloyd_iterations": Param(Integer(1, MAX_LLOYD_ITERATIONS)),  # None: LLOYD_ITERATIONS (needs a final round)
        },
    )
)


@dataclass(frozen=True)
class MaxCoverPlan:
    """The public plan: every parameter and every share of the budget, fixed before data are read."""

    eps_count: float | None
    eps_cover: float  # exponential: the cover's total, e * eps_E * ln(1/delta_E) / 2; histogram: its pool share
    delta_cover: float  # exponential: Lemma 17's delta; histogram: the partition-selection delta of all levels
    eps_proxy: float
    eps_average: float
    delta_average: float
    final_lloyd: bool  # the final FastLloyd round takes the rest of (epsilon, delta): a Gaussian pool
    growth: float
    candidates_per_level: int | None
    projection_dim: int | None
    cover: str = DEFAULT_COVER
    lloyd_share: float = 1.0  # the final round's share of the pool beside the histogram cover's ``eps_cover``
    average: str = DEFAULT_AVERAGE[DEFAULT_COVER]
    average_share: float = 0.0  # the Gaussian average's share of the pool (``average="gaussian"``)
    lloyd_iterations: int = 1

    @property
    def eps_draw(self) -> float:
        """eps_E of each exponential-mechanism draw (Lemma 17 solved for it)."""
        return 2.0 * self.eps_cover / (math.e * math.log(1.0 / self.delta_cover))

    def parts(self) -> list[Part]:
        """The plan's parts: explicit (epsilon, delta) for the exponential cover, the proxy counts (Laplace),
        NoisyAVG and the row count (Laplace); the rest of the budget is one Gaussian pool, shared by the
        histogram cover (with its partition-selection delta), the Gaussian average and the final Lloyd round,
        in the split's ratio (a part alone in the pool gets all of it, whatever its share)."""
        if self.cover == "histogram":
            cover = Part(COVER, share=self.eps_cover, delta=self.delta_cover)
        else:
            cover = Part(COVER, epsilon=self.eps_cover, delta=self.delta_cover)
        if self.average == "gaussian":
            average = Part(GAUSSIAN_AVERAGE, share=self.average_share)
        else:
            average = Part(AVERAGE, epsilon=self.eps_average, delta=self.delta_average)
        out = [cover, Part(PROXY, epsilon=self.eps_proxy), average]
        if self.final_lloyd:
            out.append(Part(LLOYD_PART, share=self.lloyd_share))
        if self.eps_count is not None:
            out.append(Part(ROW_COUNT_PART, epsilon=self.eps_count))
        return out


NEEDS = {EXACT, LAPLACE, ADAPTIVE}


def plan(ctx: FitContext) -> MaxCoverPlan:
    """Validate the options and split the budget (raises before any data is read)."""
    ctx.oracle.require(NEEDS, "maxcover")
    options = algorithm_params(ctx, "maxcover")  # checked against maxcover's table, defaults filled in
    cover, growth, dim, final = options["cover"], options["growth"], options["projection_dim"], options["final_lloyd"]
    split = dict(DEFAULT_SPLITS[cover]) if options["budget_split"] is None else options["budget_split"]
    if dim is not None and dim > MAX_PROJECTION_DIM:
        raise ValueError(
            f"projection_dim={dim} would give each point 2^{dim} grid corners to cover; "
            f"use at most {MAX_PROJECTION_DIM} (the seed uses log(n)/2)"
        )
    per_level = options["candidates_per_level"]
    average = DEFAULT_AVERAGE[cover] if options["average"] is None else options["average"]
    iterations = LLOYD_ITERATIONS if options["lloyd_iterations"] is None else options["lloyd_iterations"]
    if split["lloyd"] > 0 and not final:
        raise ValueError("budget_split gives the final Lloyd round a share but final_lloyd is False")
    if final and split["lloyd"] == 0:
        final = False
    if options["lloyd_iterations"] is not None and not final:
        raise ValueError("lloyd_iterations is the final round's number of steps, but there is no final round")

    eps, delta = ctx.budget.epsilon, ctx.budget.delta
    if delta <= 0:
        raise ValueError("maxcover needs delta > 0 (its cover and NoisyAVG are (epsilon, delta)-DP)")
    eps_count = None if ctx.public_n is not None else ctx.count_fraction * eps
    rest = eps - (eps_count or 0.0)
    # delta in equal parts: the cover (Lemma 17, or partition selection), NoisyAVG, and the Gaussian pool's
    # conversion (the final round; the histogram cover's releases and the Gaussian average are pooled too).
    pooled = final or cover == "histogram" or average == "gaussian"
    n_parts = 1 + (average == "noisyavg") + pooled
    part_delta = delta / n_parts
    if cover == "histogram" and split["cover"] <= 0:
        raise ValueError("the histogram cover needs a positive budget_split['cover']")
    result = MaxCoverPlan(
        eps_count=eps_count,
        eps_cover=split["cover"] if cover == "histogram" else split["cover"] * rest,
        delta_cover=part_delta,
        eps_proxy=split["proxy"] * rest,
        eps_average=split["average"] * rest if average == "noisyavg" else 0.0,
        delta_average=part_delta if average == "noisyavg" else 0.0,
        final_lloyd=final,
        growth=growth,
        candidates_per_level=None if per_level is None else int(per_level),
        projection_dim=None if dim is None else int(dim),
        cover=cover,
        lloyd_share=split["lloyd"],
        average=average,
        average_share=split["average"] if average == "gaussian" else 0.0,
        lloyd_iterations=iterations,
    )
    # The levels grow with log n; whatever n is, there is at least the levels of n = 1, so a
    # request over the limit even then is refused here, before the row count reads any data.
    _check_candidates(len(grid_sides(1.0, growth)), per_level or ctx.n_clusters)
    return result


def _cover_bytes(n: float, dim: int) -> float:
    """Memory of one level's cover: n 2^d' (row, corner) keys and their bookkeeping."""
    return n * 2**dim * (8 * dim + 40)


def _check_candidates(levels: int, per_level: int) -> None:
    if levels * per_level > MAX_CANDIDATES:
        raise ValueError(
            f"{levels} grid levels x {per_level} candidates is over {MAX_CANDIDATES} candidates; "
            "raise growth or lower candidates_per_level"
        )


def grid_sides(n_estimate: float, growth: float) -> list[float]:
    """Grid sides 2 / growth^i from the finest (about 1/n) to the coarsest (2), finest first."""
    finest = 1.0 / max(n_estimate, 1.0)
    count = max(1, int(math.floor(math.log(2.0 / finest, growth))) + 1)
    return [2.0 / growth**i for i in reversed(range(count))]


def greedy_grid_cover(
    points: np.ndarray,
    sides: list[float],
    picks_per_level: int,
    eps_draw: float,
    noise: NoiseSource,
    rng: np.random.Generator,
    callback=None,
) -> np.ndarray:
    """Algorithm 2 at every level: the chosen grid points, shape (len(sides) * picks, d').

    ``points`` lie in the unit ball.  Each draw is :func:`sample_exponential`
    over the level's whole grid: grid points covering nothing form the
    implicit part of the universe and are drawn uniformly when chosen.
    """
    n, dim = points.shape
    corners = corner_offsets(dim)
    alive = np.ones(n, dtype=bool)
    chosen = []
    for level, side in enumerate(sides):
        shift = rng.uniform(0.0, side, size=dim)  # public random offset of this level's grid
        low, radix = _grid_range(side, shift)
        log_grid = float(np.log(radix.astype(np.float64)).sum())
        rows = np.flatnonzero(alive)
        if rows.size == 0:  # everything is covered: every draw is uniform over the grid
            for _ in range(picks_per_level):
                chosen.append(shift + side * (_uniform_uncovering(radix, np.empty((0, dim), np.int64), noise) + low))
            continue
        cells = np.floor((points[rows] - shift) / side).astype(np.int64) - low
        key_of, key_index, order, starts = corner_keys(cells, corners, radix)
        counts = np.bincount(key_of.ravel(), minlength=key_index.shape[0])
        local_alive = np.ones(rows.size, dtype=bool)
        draws = None  # the scores change only when a pick covers points: group them once per change
        for _ in range(picks_per_level):
            if draws is None:
                listed = np.flatnonzero(counts > 0)
                draws = ExponentialCandidates(counts[listed], eps_draw, 1.0, _log_rest(log_grid, listed.size))
                taken = None
            pick = draws.draw(noise)
            if pick is None:
                if taken is None:
                    taken = key_index[listed]
                index = _uniform_uncovering(radix, taken, noise)
            else:
                key = listed[pick]
                index = key_index[key]
                members = order[starts[key] : starts[key + 1]] // key_of.shape[1]
                members = members[local_alive[members]]
                local_alive[members] = False
                np.subtract.at(counts, key_of[members].ravel(), 1)
                draws = None
            chosen.append(shift + side * (index + low))
        alive[rows[~local_alive]] = False
        if callback is not None:
            callback(level + 1, len(sides))
    return np.array(chosen)


def corner_offsets(dim: int) -> np.ndarray:
    """The 2^d' corners of the unit cube, shape (2^d', d'): a cell's corner grid points are cell + corner."""
    return np.array(np.meshgrid(*[[0, 1]] * dim, indexing="ij")).reshape(dim, -1).T


def corner_keys(cells: np.ndarray, corners: np.ndarray, radix: np.ndarray):
    """The cover's set system on the given cells (non-negative indices): every cell's corner grid points.

    Returns ``key_of`` (cells, 2^d') dense grid-point keys, ``key_index`` (keys, d') each key's grid index,
    and ``order``, ``starts``: the flat (cell, corner) entries sorted by key, and where each key's run starts
    (so ``order[starts[key]:starts[key + 1]] // 2^d'`` are the cells that ``key`` covers)."""
    dim = cells.shape[1]
    cover_index = (cells[:, None, :] + corners[None, :, :]).reshape(-1, dim)
    key_of = dense_ids(cover_index, radix).reshape(cells.shape[0], -1)
    n_keys = int(key_of.max()) + 1 if key_of.size else 0
    key_index = np.empty((n_keys, dim), dtype=np.int64)
    key_index[key_of.ravel()] = cover_index
    order = np.argsort(key_of.ravel(), kind="stable")
    starts = np.searchsorted(key_of.ravel()[order], np.arange(n_keys + 1))
    return key_of, key_index, order, starts


def greedy_cover_of_counts(cells: np.ndarray, counts: np.ndarray, radix: np.ndarray, picks: int) -> np.ndarray:
    """The greedy max cover of released cell counts (post-processing): up to ``picks`` grid indices, each the
    grid point whose not-yet-covered cells (the 2^d' cells it is a corner of) hold the most released count.

    ``cells`` (non-negative indices) are the kept cells of one level and ``counts`` their noisy counts (all
    positive: they cleared the partition-selection threshold).  Stops early when every cell is covered."""
    if cells.shape[0] == 0:
        return np.zeros((0, cells.shape[1]), dtype=np.int64)
    key_of, key_index, order, starts = corner_keys(cells, corner_offsets(cells.shape[1]), radix)
    width = key_of.shape[1]
    scores = np.bincount(key_of.ravel(), weights=np.repeat(counts, width), minlength=key_index.shape[0])
    alive = np.ones(cells.shape[0], dtype=bool)
    chosen = []
    for _ in range(picks):
        key = int(np.argmax(scores))
        if not alive.any() or scores[key] <= 0.0:
            break
        members = order[starts[key] : starts[key + 1]] // width
        members = members[alive[members]]
        alive[members] = False
        np.subtract.at(scores, key_of[members].ravel(), np.repeat(counts[members], width))
        chosen.append(key_index[key])
    return np.array(chosen, dtype=np.int64).reshape(-1, cells.shape[1])


@dataclass(frozen=True)
class CoverLevel:
    """One level of the histogram cover: a public shifted grid of side ``side``, its cells indexed like the
    balls of a net level (``geometry.nets.Level``, mixed-radix ids over the index box)."""

    grid: Level

    @classmethod
    def draw(cls, index: int, side: float, dim: int, rng: np.random.Generator) -> "CoverLevel":
        shift = rng.uniform(0.0, side, size=dim)  # public random offset, as in the exponential cover
        low, radix = _grid_range(side, shift)
        return cls(Level(index, side, shift, low, low + radix - 1, stride=1))

    @property
    def indexable(self) -> bool:
        return self.grid.log_size < MAX_LOG_CELLS

    def cells(self, points: np.ndarray) -> np.ndarray:
        """Each point's cell (absolute grid index of its lowest corner)."""
        return np.floor((points - self.grid.shift) / self.grid.radius).astype(np.int64)

    def covered_ids(self, picks: np.ndarray) -> np.ndarray:
        """Ids of the cells that the grid points ``picks`` (absolute indices) are a corner of."""
        dim = self.grid.dim
        cells = (picks[:, None, :] - corner_offsets(dim)[None, :, :]).reshape(-1, dim)
        inside = np.all((cells >= self.grid.low) & (cells <= self.grid.high), axis=1)
        return np.unique(self.grid.encode(cells[inside]))


def cover_query(level: CoverLevel, project, covered: list[tuple[CoverLevel, np.ndarray]]) -> SumQuery:
    """Level ``level``'s sparse histogram: each row not covered at a finer level adds 1 to the count of its
    cell (and to nothing else).  ``covered``: the finer levels and the ids of the cells their picks cover --
    public, released before this query is asked, so the query is fixed by earlier releases (adaptive)."""

    def contribution(chunk):
        points = project(chunk)
        ids = level.grid.encode(level.cells(points))
        free = np.ones(points.shape[0], dtype=bool)
        for finer, taken in covered:
            free &= ~np.isin(finer.grid.encode(finer.cells(points)), taken)
        return np.where(free, ids, -1), np.ones((points.shape[0], 1))

    size = int(np.prod(level.grid.radix.astype(float)))
    return SumQuery(
        COVER_LEVEL.format(level.grid.index), size, (Block("count", 1, 1.0, count=True),), contribution, sparse=True
    )


def histogram_grid_cover(plan, levels: list[CoverLevel], project, picks_per_level: int, callback=None) -> np.ndarray:
    """The histogram cover: per level (finest first) one noisy sparse histogram of the not-yet-covered rows'
    cells, each drawing 1/len(levels) of the plan's COVER part, then :func:`greedy_cover_of_counts` on it.
    Returns the chosen grid points (absolute coordinates), shape (picks, d')."""
    covered, chosen = [], []
    for number, level in enumerate(levels):
        released = plan.release(cover_query(level, project, covered), COVER, 1.0 / len(levels))
        cells = level.grid.decode(released.ids) - level.grid.low
        picks = greedy_cover_of_counts(cells, released["count"][:, 0], level.grid.radix, picks_per_level)
        picks = picks + level.grid.low
        if picks.shape[0]:
            covered.append((level, level.covered_ids(picks)))
            chosen.append(level.grid.centers(picks))
        if callback is not None:
            callback(number + 1, len(levels))
    dim = levels[0].grid.dim if levels else 1
    return np.vstack(chosen) if chosen else np.zeros((0, dim))


def _grid_range(side: float, shift: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The lowest grid index per axis and the number of indices whose cover can meet the unit ball."""
    low = np.floor((-1.0 - shift) / side).astype(np.int64)
    high = np.floor((1.0 - shift) / side).astype(np.int64) + 1
    return low, high - low + 1


def level_grid_size(side: float, dim: int) -> float:
    """ln |G_i|: the log of the number of grid points at side ``side`` in ``dim`` dimensions (mid shift)."""
    radix = _grid_range(side, np.full(dim, side / 2.0))[1]
    return float(np.log(radix.astype(np.float64)).sum())


def _log_rest(log_total: float, listed: int) -> float | None:
    """log(total - listed) for a total given by its log; None when nothing is left."""
    if listed == 0:
        return log_total
    fraction = math.exp(math.log(listed) - log_total)
    return None if fraction >= 1.0 else log_total + math.log1p(-fraction)


def _uniform_uncovering(radix: np.ndarray, taken: np.ndarray, noise: NoiseSource) -> np.ndarray:
    """A uniform grid index among those covering nothing (rejection from the whole grid; ``taken``: the
    indices that cover something)."""
    while True:
        index = np.array([noise.uniform_index(int(r)) for r in radix], dtype=np.int64)
        same_first = taken[taken[:, 0] == index[0]] if taken.size else taken
        if same_first.size == 0 or not np.any(np.all(same_first == index, axis=1)):
            return index


def _rows_and_one(chunk: np.ndarray) -> np.ndarray:
    return np.hstack([chunk, np.ones((chunk.shape[0], 1))])


def noisy_averages(budget, spec: MaxCoverPlan, project, projected_centers: np.ndarray, d: int) -> np.ndarray:
    """The seed's step: NoisyAVG of each part of the projected Voronoi split, in the original space."""
    average = NoisyAverage(epsilon=spec.eps_average, delta=spec.delta_average, diameter=2.0 * math.sqrt(d))
    # Exact sums of [x, 1] per part (rows in the unit box: |x| <= sqrt(d), so the bound clips nothing).
    split = projected_cells_query(
        AVERAGE, project, projected_centers, [Block("parts", d + 1, math.sqrt(d + 1.0))], _rows_and_one
    )

    def average_parts(rows):
        sums = rows.sums(split)
        return average.apply(sums[:, :d], sums[:, d], -np.ones(d), np.ones(d), rows.noise)

    return np.clip(budget.run_exact([AVERAGE], average_parts), -1.0, 1.0)


def gaussian_averages(budget, project, projected_centers: np.ndarray, d: int) -> np.ndarray:
    """``average="gaussian"``: one pooled Gaussian release of each part's sum and size (the parts are the
    projected Voronoi split, disjoint: a row changes one part's sum by at most |x| <= sqrt(d) and its size
    by 1), split between the two as in FastLloyd's eq. 7; then sum / size.  A part whose noisy size is
    below one row gets the box's center, public (the next Lloyd round assigns rows to it or not)."""
    sum_share, count_share = fastlloyd_shares(d)
    blocks = [Block("sum", d, math.sqrt(d), share=sum_share), Block("count", 1, 1.0, share=count_share, count=True)]
    query = projected_cells_query(GAUSSIAN_AVERAGE, project, projected_centers, blocks, _rows_and_one)
    released = budget.release(query, GAUSSIAN_AVERAGE)
    sums, counts = released["sum"], released["count"][:, 0]
    centers = np.zeros_like(sums)
    usable = counts >= 1.0
    centers[usable] = sums[usable] / counts[usable, None]
    return np.clip(centers, -1.0, 1.0)


def maxcover_spec(ctx: FitContext) -> Spec:
    """Max-cover's plan as a value: its parts (:meth:`MaxCoverPlan.parts`) and what it needs."""
    return _spec_of(plan(ctx))


def _spec_of(public: MaxCoverPlan) -> Spec:
    return Spec("maxcover", tuple(public.parts()), "gaussian", frozenset(NEEDS))


@register("maxcover", spec=maxcover_spec)
def maxcover(ctx: FitContext) -> FitResult:
    """Max-cover k-means (Nguyen, Chaturvedi & Xu 2021, Algorithm 1); see the module docstring for the privacy argument."""
    k, d = ctx.n_clusters, ctx.n_features
    spec = plan(ctx)  # the public parameters
    served = ctx.oracle.open(_spec_of(spec))
    n = estimate_rows(ctx, served)
    dim = spec.projection_dim
    if dim is None:  # the seed's ln(n)/2, lowered until one level's cover fits in memory
        dim = min(default_projection_dim(n), MAX_PROJECTION_DIM)
        while dim > 1 and _cover_bytes(n, dim) > MAX_COVER_BYTES:
            dim -= 1
    sides = grid_sides(n, spec.growth)
    per_level = spec.candidates_per_level or k
    _check_candidates(len(sides), per_level)
    cover_bytes = _cover_bytes(n, dim)
    if cover_bytes > MAX_COVER_BYTES:
        raise ValueError(
            f"the cover of about {n:,.0f} rows in {dim} projected dimensions needs ~{cover_bytes / 2**30:.0f} GiB "
            f"(each row covers 2^{dim} grid corners); pass a smaller projection_dim, or fit maxcover on a "
            "subsample with privclust.Subsampled (which also amplifies the privacy)"
        )
    rng = ctx.randomness.geometry()
    project = BallProjection.draw(d, dim, rng)

    info = {"cover": spec.cover, "average": spec.average, "projection_dim": dim}
    if spec.cover == "histogram":
        levels = [CoverLevel.draw(i, side, dim, rng) for i, side in enumerate(sides)]
        levels = [level for level in levels if level.indexable]  # public: depends on n and d' only
        candidates = histogram_grid_cover(served, levels, project, per_level, ctx.callback)
        info.update(levels=len(levels), cover_points=int(candidates.shape[0]))
        if candidates.shape[0] < k:  # too little released mass: pad with public uniform points (weight 0)
            pad = rng.normal(size=(k - candidates.shape[0], dim))
            pad *= (rng.uniform(size=(pad.shape[0], 1)) ** (1.0 / dim)) / np.linalg.norm(pad, axis=1, keepdims=True)
            candidates = np.vstack([candidates, pad])
    else:
        candidates = served.run_exact(
            [COVER],
            lambda rows: greedy_grid_cover(
                rows.map_rows(project), sides, per_level, spec.eps_draw, rows.noise, rng, ctx.callback
            ),
        )
        info.update(levels=len(sides), eps_draw=spec.eps_draw)
    proxy = projected_cells_query(PROXY, project, candidates, [Block("count", 1, 1.0, norm="l1")], count_values)
    counts = served.release(proxy, PROXY)["count"][:, 0]
    # Post-processing: a candidate whose noisy count is within the largest noise expected among
    # |C| empty ones carries no signal, and would only pull centers towards empty space.
    floor = math.log(max(candidates.shape[0], 2)) / spec.eps_proxy
    weights = np.where(counts > floor, counts, 0.0)
    projected_centers = weighted_kmeans(candidates, weights, k, rng)

    if spec.average == "gaussian":
        centers = gaussian_averages(served, project, projected_centers, d)
    else:
        centers = noisy_averages(served, spec, project, projected_centers, d)
    info["candidates"] = int(candidates.shape[0])
    n_iter = 0
    if spec.final_lloyd:
        steps = [fastlloyd_step(d, fastlloyd_eta(d, k))] * spec.lloyd_iterations
        centers, n_iter, info["sizes"] = run_lloyd(ctx, served, centers, steps, "fold", reseed=True, shrink=True)
    return FitResult(centers, n_iter, n, info)

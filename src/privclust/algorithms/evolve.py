"""``algorithm="evolve"``: private evolution guided by nearest-candidate votes (the idea of PE-means,
Humphries et al., 2026; written here from the idea, none of its code).

Every generation holds a public population of candidate centers.  Each row votes for its nearest
candidate, and the votes -- one count per candidate, a histogram over the candidates' Voronoi cells --
are released with Gaussian noise.  A row adds 1 to one count, so the release's sensitivity is 1
*whatever the size of the domain*: unlike a Lloyd step's noisy sums, whose noise grows with the box,
the votes' noise depends on the budget and the number of generations only.  Everything after a
release is post-processing of it and of public randomness:

* the candidates whose noisy vote is not above the noise floor (``floor_z`` noise standard deviations)
  are dropped, and a weighted k-means of the others (weights: their noisy votes less the floor, so a
  vote just above it weighs little) names k survivors;
* after a generation whose population was uniform in the search box (the first, at the start the
  unit box), the candidates whose votes clear a Bonferroni floor over the whole population
  (``queries.base.significant_buckets``) may point to a smaller box: their hull widened by the
  population's spacing, taken when they hold at least ``ZOOM_MASS`` of the votes and the widths'
  geometric mean shrinks to ``ZOOM_SHRINK`` or less.  Then the next population is the survivors and
  a fresh uniform draw in that box, and the mutation scale starts again from it -- declared bounds
  much looser than the data cost a generation, not the search (``fit_info_["zooms"]`` counts them);
* otherwise each survivor is kept and spawns mutants at a public scale that shrinks from generation
  to generation (``step`` times the search box's half-widths, halved every generation down to 1/32 of
  it, heavy-tailed: a Student t with ``tail_df`` degrees of freedom), clipped to the unit box; the
  survivors and their mutants are the next population.

The answer is the last generation's k survivors.  The population holds about ``n /
rows_per_candidate`` candidates (``n``: public or a noisy count; by default 5 rows per candidate, 10
from ``MANY_ROWS`` rows on), at least ``MIN_MUTANTS + 1`` per
center and, above that, at most ``max_population`` (every generation compares each row with each
candidate: the cap keeps a generation's time linear in n), and starts uniform in the unit box (``init="uniform"``) or as a Latin hypercube of stratum
centres (``init="latin"``: every axis cut into as many strata as candidates, one candidate in each,
the axes paired by random permutations -- in one dimension a fixed set of points).

Privacy: the plan is a noisy count (unless ``public_n``) and ``generations`` Gaussian releases of
the votes, each 1/``generations`` of the same pooled part, so they compose exactly in GDP to the
part's mu; the count and the votes share the pool as the Lloyd family's plans do.  The population
of every generation (and the search box) is a function of public randomness and of earlier releases only, so each release
is a histogram over public cells: adding or removing a row changes one count by 1 (an l2 and l1
sensitivity of 1).  Nothing else reads the rows.
"""

from __future__ import annotations

import math

import numpy as np

from ..queries.base import Block, SumQuery, significant_buckets
from ..queries.plan import ADAPTIVE, Part, Spec
from ..queries.voronoi import VoronoiCells, count_values
from .base import FitContext, FitResult, algorithm_params, count_part, estimate_rows, register, weighted_kmeans
from .params import Integer, Interval, OneOf, Param, Params, declare

__all__ = ["evolve", "evolve_spec", "vote_query", "VOTES_PART", "MIN_MUTANTS"]

VOTES_PART = "votes"
MIN_MUTANTS = 4  # mutants per survivor, at least
MIN_STEP = 1.0 / 32.0  # the mutation scale stops halving here (a fraction of the first)
ZOOM_SHRINK = 0.5  # a uniform population's votes narrow the search box when its widths shrink at least this much
ZOOM_MASS = 0.25  # ... and the candidates they name hold at least this share of all the votes
INITS = ("uniform", "latin")
MANY_ROWS = 10_000  # from this many rows (public or noisy) a candidate stands for 10 of them, below it for 5


def rows_per_candidate(n: float) -> float:
    """The default rows per candidate: 10 from ``MANY_ROWS`` rows on, 5 below (a function of the public or
    released n).  Measured on held-out 2-d mixtures (docs/algorithms.md, evolve): with 8,000 rows or more
    10 was lower on 19 of 22 (set, epsilon) cells, with fewer it lost up to 1.4x."""
    return 10.0 if n >= MANY_ROWS else 5.0


declare(
    Params(
        "evolve",
        "evolve",
        params={
            "generations": Param(Integer(1, 1000)),  # None: int(4 sqrt(d)), PE-means' rule
            "rows_per_candidate": Param(Interval(0.0, math.inf, closed="neither")),  # None: rows_per_candidate(n)
            "floor_z": Param(Interval(0.0, math.inf), 1.0),
            "step": Param(Interval(0.0, 2.0, closed="right"), 0.05),
            "tail_df": Param(Interval(0.0, math.inf, closed="neither"), 1.5),
            "init": Param(OneOf(INITS), "uniform"),
            "max_population": Param(Integer(1), 10_000),
        },
    )
)


def vote_query(candidates: np.ndarray, label: str) -> SumQuery:
    """One count per candidate: the rows whose nearest candidate it is (its Voronoi cell)."""
    cells = VoronoiCells(candidates)

    def contribution(chunk: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return cells.assign(chunk)[0], count_values(chunk)  # nearest_center blocks the rows x candidates work

    return SumQuery(label, cells.n_cells, (Block("count", 1, 1.0, count=True),), contribution)


def evolve_spec(ctx: FitContext) -> Spec:
    """The plan: a noisy row count unless ``public_n``, then the generations' votes in one pooled part."""
    count = count_part(ctx)
    votes = Part(VOTES_PART, share=1.0 - sum(p.share for p in count))
    return Spec("evolve", (*count, votes), "gaussian", frozenset({ADAPTIVE}))


def _first_population(size: int, d: int, init: str, rng: np.random.Generator) -> np.ndarray:
    """Public candidates in the unit box: uniform, or a Latin hypercube of stratum centres."""
    if init == "uniform":
        return rng.uniform(-1.0, 1.0, size=(size, d))
    strata = (np.arange(size) + 0.5) / size * 2.0 - 1.0
    return np.stack([rng.permutation(strata) for _ in range(d)], axis=1)


def _mutants(
    survivors: np.ndarray, per: int, scale: float | np.ndarray, df: float, rng: np.random.Generator
) -> np.ndarray:
    steps = rng.standard_t(df, size=(survivors.shape[0] * per, survivors.shape[1])) * scale
    return np.clip(np.repeat(survivors, per, axis=0) + steps, -1.0, 1.0)


def _zoomed(population: np.ndarray, released, box: np.ndarray) -> np.ndarray | None:
    """The smaller search box a uniform population's votes point to, or None to keep ``box``.

    The candidates whose votes clear what noise reaches over the whole population (``significant_buckets``:
    a Bonferroni floor, so an empty cell passes with probability at most 5% in all) hold the rows near
    them; their bounding box, widened on each side by the population's spacing in ``box`` (the reach of a
    candidate's cell), is the new box -- when they hold at least ``ZOOM_MASS`` of all the (noisy) votes (a
    real share of the rows behind the zoom, not a few lucky cells) and its widths' geometric mean is at most
    ``ZOOM_SHRINK`` of ``box``'s.
    Post-processing of the release and of the public population."""
    votes = released.values["count"][:, 0]
    significant = significant_buckets(released, limit=None)  # every one: the population may hold 10,000
    if significant.size == 0 or votes[significant].sum() < ZOOM_MASS * votes.sum():
        return None
    held = population[significant]
    width = box[1] - box[0]
    spacing = width * population.shape[0] ** (-1.0 / population.shape[1])
    zoom = np.clip(np.stack([held.min(axis=0) - spacing, held.max(axis=0) + spacing]), -1.0, 1.0)
    if np.exp(np.mean(np.log((zoom[1] - zoom[0]) / width))) > ZOOM_SHRINK:
        return None
    return zoom


@register("evolve", spec=evolve_spec)
def evolve(ctx: FitContext) -> FitResult:
    """Private evolution by nearest-candidate votes (see the module docstring)."""
    k, d = ctx.n_clusters, ctx.n_features
    params = algorithm_params(ctx, "evolve")
    plan = ctx.oracle.open(evolve_spec(ctx))
    n = estimate_rows(ctx, plan)
    generations = params["generations"] or max(1, int(4 * math.sqrt(d)))
    rows = params["rows_per_candidate"] or rows_per_candidate(n)
    per = max(min(int(n / (rows * k)), params["max_population"] // k - 1), MIN_MUTANTS)
    rng = ctx.randomness.geometry()
    population = _first_population(k * (per + 1), d, params["init"], rng)
    survivors = population[:k]
    kept_sizes, vote_std, zooms = [], 0.0, 0
    box, uniform, since = np.array([[-1.0] * d, [1.0] * d]), True, 0  # the search box; the population fills it
    for g in range(generations):
        released = plan.release(vote_query(population, f"generation {g + 1}"), VOTES_PART, 1.0 / generations)
        votes = released["count"][:, 0]
        vote_std = float(np.max(released.std["count"]))  # the release's public error model
        floor = params["floor_z"] * vote_std
        weights = np.maximum(votes - floor, 0.0)  # soft-thresholded: a vote just above the floor weighs little
        kept_sizes.append(int(np.count_nonzero(weights)))
        if np.any(weights > 0):
            survivors = weighted_kmeans(population, weights, k, rng)  # k rows: the population holds >= 5 k
        if ctx.callback is not None:
            ctx.callback(g + 1, generations)
        if g + 1 < generations:
            zoom = _zoomed(population, released, box) if uniform else None
            if zoom is not None:  # start again, uniform in the box the votes point to
                box, since, zooms = zoom, 0, zooms + 1
                fresh = rng.uniform(box[0], box[1], size=(k * per, d))
                population = np.vstack([survivors, fresh])
                continue
            uniform, half = False, (box[1] - box[0]) / 2.0
            scale = params["step"] * half * max(0.5**since, MIN_STEP)
            since += 1
            population = np.vstack([survivors, _mutants(survivors, per, scale, params["tail_df"], rng)])
    info = {
        "generations": generations,
        "population": k * (per + 1),
        "kept": kept_sizes,
        "vote_std": vote_std,
        "zooms": zooms,
    }
    return FitResult(np.asarray(survivors, dtype=float), generations, n, info)

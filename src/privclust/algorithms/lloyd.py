"""The DP-Lloyd family of Diaa, Humphries & Kerschbaum (2024): FastLloyd and its baselines.

All four share one loop (:func:`run_lloyd`): assign each point to its nearest
current center, release noisy per-cluster sums and counts through the
aggregate-query oracle, and post-process.  They differ only in their public
*plan* -- assignment radius, absolute or relative sums, noise, and
post-processing -- which is fixed before the first release.

Privacy arguments (add/remove neighbouring, data normalised to [-1, 1]^d):

Every member declares the same plan (``queries.plan``): a part for the noisy
row count (``count_fraction`` of the pool; none with ``public_n``) and a part
for the iterations (the rest); each of the T iterations draws 1/T of the
latter, and each iteration's two blocks (sums, counts) take the seed's shares
of it.  The oracle turns that into noise; in the central model:

``fastlloyd`` (FastLloyd, Diaa, Humphries & Kerschbaum (2024) Sec. 5).  Total budget (eps, delta) ->
mu = GDP mu for (eps, delta) (analytic Gaussian).  Without a declared public
row count, a share ``count_fraction`` of mu^2 releases a noisy count (one
Gaussian query, sensitivity 1); the rest, mu_L, goes to Lloyd with sigma =
1/mu_L.  Iteration t assigns a point only if it lies within radius r_t of its
nearest center (r_0 = beta/2 with the "step" strategy, else eta =
alpha*beta/(2 k^(1/d)), beta = 2 sqrt(d)), so its relative contribution
x - c has l2 norm < r_t (Theorem 5.1), and counts have sensitivity 1.
Noise: std sigma_R r_t sqrt(T) on relative sums, sigma_C sqrt(T) on counts,
with sigma_R = sigma sqrt(1+sqrt(4d)) / (4d)^(1/4), sigma_C = sigma
sqrt(1+sqrt(4d)) (eq. 7).  Per iteration that is (1/(sigma_R sqrt T))- and
(1/(sigma_C sqrt T))-GDP; over T iterations and both queries
sqrt(T/(sigma_R^2 T) + T/(sigma_C^2 T)) = 1/sigma = mu_L, whatever T is.
With the count: sqrt(mu_c^2 + mu_L^2) = mu, i.e. exactly (eps, delta).

``algorithm_params={"far_rows": "clip", "radii": "shrinking", "rounds": "log"}`` (what ``auto`` runs).
A row beyond round t's radius r_t is not left out but scaled onto it: its relative contribution is
r_t (x - c) / |x - c|, so it still has l2 norm <= r_t, and it is counted -- the sensitivities, the
noise and the argument above are unchanged (each row adds at most r_t to one cell's sum and 1 to its
count).  The radii fall geometrically from ``first_radius`` to ``final_radius`` of the unit box's
diagonal over the T rounds, and T = round(log2(n eps / k)) within ``LOG_ROUNDS`` (n public or the
noisy count): public values only.  Why: with few rows per cluster the sums' noise, proportional to the
radius, is what the centers' error is made of, and the paper's radius (about the box's half diagonal)
is several times a real cluster's spread; clipped rows still pull a far center towards them -- by at
most r_t a round, so the radii start large and the rounds grow with the signal -- and a cell's clipped
mean near its fixed point is its rows' robust center.  Measured in docs/benchmarks.md ("FastLloyd with
clipped rows and shrinking radii").  ``radii="per-cluster"`` divides both ends by sqrt(k) (k clusters share
the box: about the room each has), and ``rounds="few"`` runs ``FEW_ROUNDS``: what ``auto`` refines the
private greedy's centers with in the plane, where they already sit near their clusters.

``glloyd`` (GLloyd, Diaa, Humphries & Kerschbaum (2024) App. B.1).  As above but sums are absolute,
sensitivity sqrt(d) (the domain), no radius, split sigma_C =
sqrt(sqrt(d)/(2 rho)) sigma_S with 1/sigma_S^2 + 1/sigma_C^2 = 1/sigma^2.

``sulloyd`` (Su et al. 2016).  Laplace noise, pure eps-DP.  Per iteration
the budget eps_L/T is split as eps_S : eps_C = d : cbrt(4 d rho^2): each sum
coordinate gets eps_S/d (l1 sensitivity of the sum vector is d, so Laplace
scale d/eps_S), the count eps_C.  Basic composition: T (eps_S + eps_C) =
eps_L.  Giving the count's share to every coordinate instead -- as a widely
used implementation does -- spends T (d cbrt(4 d rho^2) + 1) / (d + cbrt(4 d
rho^2)) eps_L, more than eps_L whenever cbrt(4 d rho^2) > 1, i.e. d >= 5.

``nonprivate-lloyd``: non-private Lloyd with the same initialisation, reported as
epsilon = inf (named so that scikit-learn's ``algorithm="lloyd"`` cannot select it).

Initial centers.  By default every member starts from public sphere-packing
centers (``geometry.init``): data-independent, free.  Every member also takes the
user's own public centers (the estimator's ``init=<array>``, option ``start``):
declared, not read off the rows, so mapping them into the unit box through the
domain (clipped to it) and starting there costs nothing -- the map reads only the
domain, which is public or a released box.  FastLloyd's ``algorithm_params={"init":
"compact"}`` is public too: the sphere-packing centers pulled towards the unit box's
center by the factor ``COMPACT_SCALE`` (:func:`compact`), free for the same reason;
``init="auto"`` takes it where the public signal affords FastLloyd only its fewest
iterations (see :func:`compact`).  FastLloyd also takes a
private, data-dependent start, ``algorithm_params={"init": "greedy"}`` (issue
17): the private greedy (``algorithms.greedy``, its default options) in a public
share s = ``init_share`` of the budget, then FastLloyd from the greedy's k
centers in the rest.  Both are one plan, fixed before any row is read (neither
part's shape depends on a release): the greedy's parts at s times their shares
of the pool, FastLloyd's (its noisy count, if any, and its iterations) at
1 - s times theirs, and the greedy's partition-selection delta is half of
s delta times ``START_SELECTION_DELTA`` = 0.1 (a tenth of what the greedy
alone keeps for it: beside ``auto``'s other candidates -- whose union bounds its adaptive
choice -- a selection delta is taken from every candidate's Gaussian parts, and
a tenth cost the greedy start nothing measurable; docs/choosing.md).
``oracle.plan`` checks the whole plan against the capabilities and the
ledger, so a refused fit spends nothing.  Privacy: every pooled release is
Gaussian, so in the central model they compose in GDP to mu = GDP mu of
(eps, delta - delta_sel) -- the greedy's parts take s mu^2, FastLloyd's
(1 - s) mu^2 -- and with the selection's delta_sel by basic composition the fit
is (eps, delta)-DP, the argument each of the two has alone.  The greedy's k
centers (its lifted, boosted solution, already in the original space) are
post-processing of its releases, so starting FastLloyd there costs nothing
more; FastLloyd's iterations read the rows only through their own noisy sums.
(Two pools through ``Oracle.with_pool``, (s eps, s delta) and ((1 - s) eps,
(1 - s) delta), would also be (eps, delta)-DP by basic composition, but their
Gaussian parts are calibrated separately: at s = 0.3 the ledger then reports
about 0.75 eps spent -- the same guarantee with more noise.)  The split is
public and ``fit_info_["init"]`` records the start, s and each part's mu.

On many rows the greedy start reads a Poisson sample: with n (public or the
noisy count) above ``greedy.SAMPLE_SIGNAL`` k / eps, the greedy's releases are
answered on rows kept independently with probability q = SAMPLE_SIGNAL k /
(eps n), a public function of public values (``Plan.on_sample``; the coins are
secret and the sample's size is never released).  Each release costs what it
costs on all rows -- a DP mechanism run on a data-independent sample is DP for
the whole data set -- and no amplification is claimed.  The greedy start needs
the signal n eps / k to find the clusters (``auto`` uses it from 100 in 3-d
and 10,000 above), not more: at 20,000 the sample is well inside that range
and the start's time stops growing with n.  FastLloyd's iterations read all
rows.  On Spark the executors toss the coins on their cached chunks and cache
the sample (``SparkRows.poisson_sample``), so there too the start's levels read
only the kept rows.

Overclustered first rounds (``algorithm_params={"overcluster": m}``; ``auto`` runs m = 2 below
``MEAN_START_MIN_D`` dimensions, with k >= 3 and n eps / k >= 100: ``auto.OVERCLUSTERED``).  The
first rounds move m k centers (the start's shape with m k points), whose released cells are then
merged into k by weighted k-means on their centers, weighted by their noisy sizes
(:func:`merge_cells`), and the last third of the rounds (at least 2, and 1 of 2: :func:`merged_rounds`)
move those k.  Why: with rows clipped onto shrinking radii, k centers settle in a local optimum in
about a third of the fits on few, unequal clusters (two centers in one cluster, one between two
others, which both pull it equally); m k cells leave every cluster at least one center, and the
merge of a few dozen weighted points finds the k-clustering of the cells that Lloyd's steps could
not reach; the last rounds then move k centers with k cells' noise.  Privacy: every round releases
one Voronoi query, whatever its number of cells -- each row adds at most the radius to one cell's
sum and 1 to its count -- so the plan, the noise and the argument above are unchanged; the merge
reads only released sums, counts and public randomness (post-processing).
Measured in docs/benchmarks.md ("Overclustered first rounds").

Empty or tiny clusters: if a noisy count is at most ``min_count`` the center
stays where it was.  This reads only released values (post-processing), so
it leaks nothing.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from ..geometry.domain import fold
from ..geometry.init import sphere_packing
from ..privacy.budget import Budget
from ..queries.base import Block, SumQuery, voronoi_query
from ..queries.plan import ADAPTIVE, Part, Plan, Spec, shared_pool
from ..queries.voronoi import VoronoiCells
from .base import (
    BASELINE,
    NEARLY_EMPTY,
    FitContext,
    FitResult,
    algorithm_params,
    count_part,
    estimate_rows,
    register,
    weighted_kmeans,
)
from .greedy import GreedySpec, greedy_spec, run_greedy, sample_rate
from .params import (
    ALPHA,
    RADIUS_STRATEGY,
    START,
    Boolean,
    Centers,
    Integer,
    Interval,
    OneOf,
    Param,
    Params,
    declare,
    max_iter_param,
)
from .radius import fastlloyd_eta, fastlloyd_shares

__all__ = [
    "LloydStep",
    "run_lloyd",
    "fastlloyd_step",
    "fastlloyd_eta",
    "fastlloyd",
    "glloyd",
    "sulloyd",
    "lloyd",
    "LLOYD_PART",
    "sulloyd_split",
    "GreedyStart",
    "greedy_start",
    "lloyd_spec",
    "mean_start_spec",
    "INITS",
    "DEFAULT_INIT_SHARE",
    "START_SELECTION_DELTA",
    "AUTO_FASTLLOYD",
    "ROUNDS",
    "log_rounds",
    "LOG_ROUNDS",
    "FEW_ROUNDS",
    "PER_CLUSTER_RADII",
    "shrinking_radii",
    "FAR_ROWS",
    "RADII",
    "FIRST_RADIUS",
    "FINAL_RADIUS",
    "compact",
    "COMPACT_SCALE",
    "reseed_dead",
    "shrink_moves",
]

RHO = 0.225  # Su et al.'s approximation of the mean distance of a point to its center
MIN_ITERATIONS, MAX_ITERATIONS = 2, 7  # Su et al.: fewer is useless, more is never needed
ERROR_PER_ITERATION = 0.004  # Su et al.'s tolerated per-iteration MSE (times B, with B = 1)
POSTPROCESS = ("fold", "clip", "none")
LLOYD_PART = "Lloyd iterations"


@dataclass(frozen=True)
class LloydStep:
    """The public plan of one iteration: which rows count, what is summed, how the center moves."""

    sum_block: Block  # the sums' bound, norm and share of the iteration's budget
    count_share: float
    radius: float | None = None  # assign only points closer than this; None: all points
    relative: bool = False  # release sums of (x - center) instead of x
    clip_move: bool = False  # never move a center by more than ``move_bound`` (the radius by default)
    move_bound: float | None = None

    @property
    def longest_move(self) -> float | None:
        return self.move_bound if self.move_bound is not None else self.radius


def fastlloyd_step(d: int, radius: float, clip: bool = False) -> LloydStep:
    """One FastLloyd iteration at ``radius``: relative sums (l2 bound ``radius``), counts, moves clipped.

    ``clip``: a row beyond the radius is scaled onto it (its relative contribution x - c becomes
    radius (x - c) / |x - c|) instead of being left out, so every row of a cell pulls its center -- the far
    ones by the radius -- and is counted.  The sensitivity is the same: each row adds at most ``radius`` to
    one cell's sum and 1 to its count."""
    sum_share, count_share = fastlloyd_shares(d)
    block = Block("sum", d, radius, share=sum_share)
    return LloydStep(block, count_share, None if clip else radius, relative=True, clip_move=True, move_bound=radius)


def _step_query(centers: np.ndarray, step: LloydStep, iteration: int) -> SumQuery:
    cells = VoronoiCells(centers, radius=step.radius, relative=step.relative)
    return voronoi_query(f"iteration {iteration + 1}", cells, step.sum_block, step.count_share)


def _postprocess(centers: np.ndarray, how: str) -> np.ndarray:
    if how == "fold":
        return fold(centers)
    if how == "clip":
        return np.clip(centers, -1.0, 1.0)
    return centers


def run_lloyd(
    ctx: FitContext,
    plan: Plan,
    centers: np.ndarray,
    steps: list[LloydStep],
    postprocess: str,
    min_count: float = 1.0,
    stop_when_stable: bool = False,
    part: str = LLOYD_PART,
    reseed: bool = False,
    shrink: bool = False,
    merge_after: int | None = None,
) -> tuple[np.ndarray, int, np.ndarray | None]:
    """Run the planned iterations, each drawing 1/len(steps) of ``part``; returns the final centers
    (unit box), the iterations run and the last release's noisy cell sizes (``cluster_sizes_``).
    ``shrink``: :func:`shrink_moves` on every update; ``reseed``: :func:`reseed_dead` between iterations;
    ``merge_after``: after that many iterations the centers (more than k) are merged into k (:func:`merge_cells`)."""
    if merge_after is not None and stop_when_stable:
        raise ValueError("a fit that merges its cells runs every planned round: it cannot stop when stable")
    done, counts = 0, None
    for t, step in enumerate(steps):
        released = plan.release(_step_query(centers, step, t), part, 1.0 / len(steps))
        sums, counts = released["sum"], released["count"][:, 0]
        usable = counts > min_count
        new = centers.copy()
        if step.relative:
            new[usable] = centers[usable] + sums[usable] / counts[usable, None]
        else:
            new[usable] = sums[usable] / counts[usable, None]
        if shrink:
            new = shrink_moves(centers, new, usable, counts, released.std.get("sum", 0.0))
        if step.clip_move and step.longest_move is not None:
            move, bound = new - centers, step.longest_move
            length = np.linalg.norm(move, axis=1)
            long = length > bound
            new[long] = centers[long] + move[long] * (bound / length[long])[:, None]
        new = _postprocess(new, postprocess)
        if reseed and t + 1 < len(steps) and merge_after != t + 1:  # merged cells need no reseeding
            new = reseed_dead(new, counts, released.std.get("count", 0.0), step, ctx.randomness.geometry())
        if merge_after == t + 1:
            new = merge_cells(new, counts, ctx.n_clusters, ctx.randomness.geometry())
        done = t + 1
        if ctx.callback is not None:
            ctx.callback(done, len(steps))
        stable = stop_when_stable and np.allclose(new, centers, rtol=0.0, atol=1e-12)
        centers = new
        if stable:
            break
    return centers, done, counts


SHRINK_MIN_D = 4  # measured: in d = 3 the shrinkage cost House up to 6% (docs/algorithms.md); from d = 4 it gains


def shrink_moves(centers: np.ndarray, new: np.ndarray, usable: np.ndarray, counts: np.ndarray, sum_std) -> np.ndarray:
    """Each center's move, ``new - centers``, shrunk towards no move by the positive-part James-Stein factor.

    A usable center's move is its true move plus the sum's noise over the noisy count: about Gaussian with
    variance s^2 = (sum std / count)^2 per coordinate.  In d >= 3 the factor max(0, 1 - (d - 2) s^2 / |move|^2)
    lowers the expected squared error of every move whatever the true moves are (James & Stein 1961): a
    center whose move is mostly noise -- a small cell in many dimensions, which the noise would throw away
    from every row -- stays nearly where it was; a large cell's move is kept.  Used from ``SHRINK_MIN_D``
    dimensions.  Post-processing of the released sums and counts and of the noise's public std."""
    d = centers.shape[1]
    if d < SHRINK_MIN_D:
        return new
    move = new - centers
    std = np.broadcast_to(np.asarray(sum_std, dtype=np.float64), counts.shape)  # one, or one per cell (local)
    s2 = (std / np.maximum(counts, 1.0)) ** 2
    length2 = np.einsum("ij,ij->i", move, move)
    factor = np.ones(counts.shape)
    moved = usable & (length2 > 0.0)
    factor[moved] = np.clip(1.0 - (d - 2) * s2[moved] / length2[moved], 0.0, 1.0)
    return centers + factor[:, None] * move


DEAD_Z = 2.0  # a cell whose noisy size is below 2 noise stds (and under NEARLY_EMPTY of the rows) holds no row
DEAD_SHARE_OF_MEAN = 10.0  # ... and under a tenth of the mean cell (with more than 10 centers 1% of the rows is a cell)
SPLIT_Z = 8.0  # a cell is split only into pieces of at least 8 noise stds each (expected): none dies of noise
SPLIT_REACH = 1e-3  # the new centers' distance from the split cell's center, in units of the step's radius


def reseed_dead(centers: np.ndarray, counts: np.ndarray, count_std, step: LloydStep, rng) -> np.ndarray:
    """Split the largest cells with the dead centers: those whose noisy cell size is both within ``DEAD_Z``
    noise stds of nothing and under ``NEARLY_EMPTY`` of the released sizes' total -- and of a tenth of
    the mean cell (``DEAD_SHARE_OF_MEAN``) when k > 10 -- (on a few hundred rows the noise alone is more
    than a real cluster's size: a center on one is not dead).

    A center whose cell is empty gets a noise-only update and never moves back to the data.  Each dead
    center in turn goes to the live cell whose pieces would be the largest (noisy size / (pieces + 1)),
    as long as each piece keeps ``SPLIT_Z`` noise stds; a cell getting m of them has its own center and
    the m new ones placed at a tiny distance (``SPLIT_REACH`` radius) from its center in public random
    directions, so the next iteration cuts it by those directions into m + 1 pieces of comparable size
    -- the mean start's split, inside the cell (a center placed a whole step away is, in many dimensions,
    farther from the cell's rows than their own center, and catches none).  Dead centers left over stay.
    Post-processing of the released sizes, their public noise std and public randomness."""
    std = max(1.0, float(np.max(count_std)))
    total = float(np.sum(np.maximum(counts, 0.0)))
    dead = counts < min(DEAD_Z * std, NEARLY_EMPTY * total, total / (DEAD_SHARE_OF_MEAN * counts.size))
    dead, live = np.flatnonzero(dead), np.flatnonzero(~dead & (counts >= DEAD_Z * std))
    if dead.size == 0 or live.size == 0:
        return centers
    pieces = np.zeros(live.size, dtype=np.int64)  # new centers per live cell
    for _ in range(dead.size):
        size = counts[live] / (pieces + 2)
        best = int(np.argmax(size))
        if size[best] < SPLIT_Z * std:
            break
        pieces[best] += 1
    reach = SPLIT_REACH * (step.longest_move if step.longest_move is not None else 1.0)
    out, spare = centers.copy(), iter(dead)
    for cell, m in zip(live, pieces):
        if m == 0:
            continue
        direction = rng.normal(size=(m + 1, centers.shape[1]))
        direction /= np.linalg.norm(direction, axis=1, keepdims=True)
        moved = np.clip(centers[cell] + reach * direction, -1.0, 1.0)
        out[[cell, *(next(spare) for _ in range(m))]] = moved
    return out


# The rounds that move k centers after the overclustered ones are merged: a third of them, at least 2 (measured:
# with many rounds the merged centers need more than 2 of the last, short radii to settle; Adult, Breast)
MERGED_SHARE, MIN_MERGED_ROUNDS = 1.0 / 3.0, 2
MAX_OVERCLUSTER = 8  # overcluster's largest factor: centers per cluster in the first rounds
MERGE_STARTS = 10  # the merge's k-means++ starts: a few dozen weighted points, so many cost nothing


def merge_cells(centers: np.ndarray, sizes: np.ndarray, k: int, rng) -> np.ndarray:
    """k centers from more released cells: weighted k-means (``MERGE_STARTS`` k-means++ starts drawn from the
    public ``rng``, one thread, so that federated parties merge alike) on the cells' centers, each weighted by
    its noisy size (a cell whose size is at most zero weighs nothing; with at most k that weigh, the heaviest
    k).  Post-processing of released values and public randomness."""
    return np.clip(weighted_kmeans(centers, np.maximum(sizes, 0.0), k, rng, starts=MERGE_STARTS), -1.0, 1.0)


def shrinking_radii(d: int, T: int, first: float, final: float) -> list[float]:
    """T radii falling geometrically from ``first`` to ``final`` of the unit box's diagonal (one round: ``final``)."""
    diagonal = 2.0 * math.sqrt(d)
    if T == 1:
        return [final * diagonal]
    return [diagonal * final * (first / final) ** ((T - 1 - t) / (T - 1)) for t in range(T)]


def log_rounds(signal: float, greedy_start: bool = False) -> int:
    """Rounds by ``rounds="log"``: log2 of the public signal n eps / k, within ``LOG_ROUNDS`` (at most
    ``MAX_ITERATIONS`` after the greedy start, whose centers begin near the clusters: more rounds gained nothing
    there, docs/benchmarks.md).  With clipped rows and shrinking radii every round moves each center by at most
    its radius, so the centers need several rounds to travel, and with more rows per unit of epsilon each
    round's share of the budget still leaves its noise small: the rounds grow with the signal.  Every round
    draws 1/T of the same part, so T changes each release's noise, never the total."""
    low, high = LOG_ROUNDS
    if greedy_start:
        high = min(high, MAX_ITERATIONS)
    return int(min(max(round(math.log2(max(signal, 1.0))), low), high))


def _clamp_iterations(estimate: float) -> int:
    if not math.isfinite(estimate):
        return MAX_ITERATIONS
    return int(max(min(estimate, MAX_ITERATIONS), MIN_ITERATIONS))


def _checked_start(ctx: FitContext, params: dict) -> np.ndarray | None:
    """The public start (data units), if one is given, checked against k and d before anything is planned."""
    start = params[START]
    if start is not None and start.shape != (ctx.n_clusters, ctx.n_features):
        raise ValueError(
            f"init must hold one center per cluster, each with one value per feature: a {ctx.n_clusters} x "
            f"{ctx.n_features} array, got {start.shape[0]} x {start.shape[1]}"
        )
    return start


def _initial_centers(ctx: FitContext, start: np.ndarray | None = None, centers: int | None = None) -> np.ndarray:
    """The public start mapped into the unit box (clipped to it), else public sphere-packing centers (``centers``
    of them, k by default)."""
    if start is None:
        return sphere_packing(
            centers or ctx.n_clusters,
            ctx.n_features,
            ctx.randomness.geometry(),
            progress=ctx.stage("placing the starting centers"),
        )
    if ctx.domain is None:
        raise ValueError("a public start (init) needs the fit's domain to be mapped into the unit box")
    return np.clip(ctx.domain.to_unit(np.array(start, dtype=np.float64)), -1.0, 1.0)


def lloyd_spec(ctx: FitContext, family: str, what: str, counted: bool | None = None) -> Spec:
    """The Lloyd family's plan: a noisy row count (``counted``; by default unless ``public_n``) and the
    iterations, which share the rest of the pool; adaptive rounds (each iteration's cells are the last
    one's centers).  A value: nothing is checked or read."""
    count = count_part(ctx, counted=counted)
    iterations = Part(LLOYD_PART, share=1.0 - sum(p.share for p in count))
    return Spec(what, (*count, iterations), family, frozenset({ADAPTIVE}))


def lloyd_plan(ctx: FitContext, family: str, what: str) -> Plan:
    """The Lloyd family's plan (:func:`lloyd_spec`), checked and opened: refused before any row is read."""
    return ctx.oracle.open(lloyd_spec(ctx, family, what))


INITS = ("sphere", "greedy", "mean", "auto", "compact")  # sphere packing (public); the private greedy or the noisy
# mean in init_share; "compact": sphere packing pulled towards the box's center (public); "auto": the mean start,
# or the user's public start (init=<array>) where one is given
PUBLIC_INITS = ("sphere", "compact")  # starts that read nothing: no share of the budget
COMPACT_SCALE = 0.3  # the compact start's pull: measured on held-out mixtures, docs/benchmarks.md
MEAN_START_MIN_D = 32  # measured: docs/algorithms.md, "dead centers"
MEAN_START_PART = "start: the rows' mean"
DEFAULT_MEAN_SHARE = 0.05  # the mean start's share of the pool: one bucket, so little is enough
MEAN_START_RADIUS = 0.1  # the k centers' distance from the noisy mean (unit box): only their directions matter
# With the mean start and shrinkage at least this many steps (Su et al.'s count is 2 on MNIST): the centers start
# together at the mean and need steps to reach their clusters, and a move that is mostly noise is shrunk to nearly
# none, so a step costs little where the noise wins.  Measured: docs/algorithms.md, "dead centers"
MEAN_START_MIN_ITERATIONS = 6
DEFAULT_INIT_SHARE = 0.3  # the greedy start's share of (epsilon, delta): measured, docs/choosing.md
# ... of which the greedy's budget keeps this part of delta (half of it the partition selection's): beside auto's
# other candidates, whose union is its bound, the greedy's delta is taken from theirs (measured: docs/choosing.md)
START_SELECTION_DELTA = 0.1
INIT_SHARE_RANGE = (0.05, 0.95)


# The family's tables (algorithms.params): the baselines take max_iter and postprocess, FastLloyd its radius too.
_RESEED = {
    "reseed": Param(Boolean(), False),  # split the largest cells with the centers whose noisy cell is empty
    "shrink": Param(Boolean(), False),  # James-Stein shrinkage of every noisy move (from SHRINK_MIN_D dimensions)
}
# FastLloyd as ``auto`` runs it: the paper's algorithm (the defaults, which stand in for its code in the
# benchmarks) with far rows clipped onto radii that shrink over log2(n eps / k) rounds, the mean start in many
# dimensions, dead centers reseeded and moves shrunk (docs/algorithms.md)
AUTO_FASTLLOYD = {
    "init": "auto",
    "reseed": True,
    "shrink": True,
    "far_rows": "clip",
    "radii": "shrinking",
    "rounds": "log",
}
# FastLloyd's number of rounds: Su et al.'s estimate ("su", the paper's), log2 of the signal n eps / k ("log"), or
# FEW_ROUNDS ("few": refining a start that is already near the clusters)
ROUNDS = ("su", "log", "few")
LOG_ROUNDS = (4, 12)  # rounds="log"'s range (log_rounds)
FEW_ROUNDS = 3  # rounds="few" (measured: docs/benchmarks.md, "The greedy refined in the plane")
FAR_ROWS = ("drop", "clip")  # a row beyond the step's radius: left out (the paper) or scaled onto the radius
# the paper's radii (alpha, radius_strategy); a geometric descent (shrinking_radii) in units of the diagonal
# ("shrinking") or of the diagonal over sqrt(k) ("per-cluster")
RADII = ("paper", "shrinking", "per-cluster")
FIRST_RADIUS, FINAL_RADIUS = 0.2, 0.1  # the shrinking radii's ends, in units of the unit box's diagonal (measured)
PER_CLUSTER_RADII = (0.2, 0.05)  # radii="per-cluster"'s ends, in units of the diagonal over sqrt(k) (measured)
_START = Param(Centers())  # the user's public initial centers (init=<array>); None: the algorithm's own start
_POSTPROCESS = OneOf(POSTPROCESS)
declare(
    Params(
        "fastlloyd",
        "FastLloyd",
        options={
            "max_iter": max_iter_param(),
            "alpha": ALPHA,
            "radius_strategy": RADIUS_STRATEGY,
            "postprocess": Param(_POSTPROCESS, "fold"),
            START: _START,
        },
        params={
            **_RESEED,
            "init": Param(OneOf(INITS), "sphere"),
            "init_share": Param(Interval(*INIT_SHARE_RANGE)),
            "rounds": Param(OneOf(ROUNDS), "su"),
            "far_rows": Param(OneOf(FAR_ROWS), "drop"),
            "radii": Param(OneOf(RADII), "paper"),
            "first_radius": Param(Interval(1e-3, 1.0)),
            "final_radius": Param(Interval(1e-3, 1.0)),
            "overcluster": Param(Integer(2, MAX_OVERCLUSTER)),
        },
    )
)
for _name, _label in (("glloyd", "GLloyd"), ("sulloyd", "SuLloyd")):
    declare(
        Params(
            _name,
            _label,
            options={"max_iter": max_iter_param(), "postprocess": Param(_POSTPROCESS, "clip"), START: _START},
            params=_RESEED,
        )
    )
declare(Params(BASELINE, "non-private Lloyd", options={"max_iter": max_iter_param(100), START: _START}))


def _init_option(params: dict, d: int) -> tuple[str, float | None]:
    """FastLloyd's ``init`` (``"auto"`` resolved from d) and, for a private start, its ``init_share``."""
    init, share = params["init"], params["init_share"]
    if init == "auto":  # FastLloyd's own start by d -- unless the user gave one (init=<array>), which is public
        init = "sphere" if params[START] is not None else "mean"
        if init == "sphere" and share is not None:
            raise ValueError(
                "init_share is the mean start's share of the budget, and init='auto' uses no private start with a "
                "public init: drop init_share"
            )
    if params[START] is not None and init != "sphere":
        raise ValueError(
            f"init=<array> is a start of its own and algorithm_params init={init!r} another one: give one of them"
        )
    if init in PUBLIC_INITS:
        if share is not None:
            raise ValueError("init_share is a private start's share of the budget: it needs init='greedy' or 'mean'")
        return init, None
    if share is None:
        return init, DEFAULT_INIT_SHARE if init == "greedy" else DEFAULT_MEAN_SHARE
    return init, share


@dataclass(frozen=True)
class GreedyStart:
    """A greedy-started FastLloyd's one plan: the greedy's parts and FastLloyd's, sharing one pool."""

    share: float
    greedy_ctx: FitContext  # the greedy's own defaults, its delta the start's share of the fit's
    greedy: GreedySpec
    spec: Spec  # the whole plan: shared_pool((the greedy, share), (FastLloyd, 1 - share))

    def sample_rate(self, epsilon: float, k: int, n: float, plan: Plan) -> float:
        """The Poisson rate of the rows the greedy reads: below 1 when n eps / k is far above what the start
        needs (see the module docstring) and the plan's oracle can sample; a function of public values."""
        return sample_rate(epsilon, k, n, plan.oracle)

    def info(self, plan: Plan, sample_rate: float) -> dict:
        """The start and the split, from public parameters only (the plan's allotments and the rate)."""
        greedy = [p.name for p in self.greedy.parts]
        mu_greedy = math.sqrt(sum((plan.allotment(p).mu or 0.0) ** 2 for p in greedy))
        lloyd = [p.name for p in plan.parts if p.name not in greedy]
        mu_lloyd = math.sqrt(sum((plan.allotment(p).mu or 0.0) ** 2 for p in lloyd))
        return {
            "start": "greedy",
            "init_share": self.share,
            "mu": {"greedy": mu_greedy, "fastlloyd": mu_lloyd},
            "delta": {"greedy selection": sum(p.delta for p in self.greedy.parts)},
            "sample_rate": sample_rate,
        }

    def run(self, ctx: FitContext, plan: Plan, sample_rate: float) -> np.ndarray:
        """The greedy's k centers (unit box), its releases answered on a Poisson sample of ``sample_rate``."""
        if sample_rate < 1.0:
            plan = plan.on_sample(sample_rate, ctx.randomness.secret())
        return np.clip(run_greedy(self.greedy_ctx, self.greedy, plan).centers, -1.0, 1.0)  # post-processing


def greedy_start(ctx: FitContext, share: float, counted: bool | None = None) -> GreedyStart:
    """The greedy start and FastLloyd as one plan (see the module docstring), a value: nothing is checked."""
    if ctx.budget is None:
        raise ValueError("the greedy start is a private mechanism: it needs a budget")
    # The greedy with its own defaults (FastLloyd's parameters are not its, nor is its progress FastLloyd's);
    # its budget is the start's share of epsilon, and START_SELECTION_DELTA of that share of delta, which sets its
    # partition-selection delta (half of it); FastLloyd's Gaussian parts convert at the rest.
    start_budget = Budget(ctx.budget.epsilon * share, ctx.budget.delta * share * START_SELECTION_DELTA)
    greedy_ctx = dataclasses.replace(ctx, budget=start_budget, options={}, callback=None)
    greedy = greedy_spec(greedy_ctx)
    lloyd = lloyd_spec(ctx, "gaussian", "FastLloyd", counted)
    spec = shared_pool("FastLloyd (greedy start)", (greedy.plan_spec, share), (lloyd, 1.0 - share))
    return GreedyStart(share, greedy_ctx, greedy, spec)


def mean_start_spec(ctx: FitContext, share: float) -> Spec:
    """FastLloyd's plan with the mean start: its parts at 1 - s of the pool, the mean's release at s."""
    if ctx.budget is None:
        raise ValueError("the mean start is a private release: it needs a budget")
    mean = Spec("the rows' mean", (Part(MEAN_START_PART, share=1.0),), "gaussian")
    lloyd = lloyd_spec(ctx, "gaussian", "FastLloyd")
    return shared_pool("FastLloyd (mean start)", (lloyd, 1.0 - share), (mean, share))


def mean_start(ctx: FitContext, plan: Plan, centers: int | None = None) -> np.ndarray:
    """k (or ``centers``) centers about the rows' noisy mean, shrunk towards the box's center (``shrunk_mean``): below
    ``MEAN_START_MIN_D`` dimensions sphere packing pulled in by ``COMPACT_SCALE`` (:func:`compact`) and moved
    there; from it, at ``MEAN_START_RADIUS`` in public random directions.

    One release: the sum (l2 bound sqrt(d), the unit box's) and the size of all rows, split as FastLloyd's
    eq. 7.  Why the mean: real rows crowd a part of their box (a skewed feature, a corner), where the box's
    center -- the compact start's middle -- lies far from most of them (Yeast, Wine; docs/benchmarks.md).  Why
    directions in many dimensions: there the sphere packing's centers lie far from the data at different
    distances, so the first step hands nearly every row to the few nearest, and a center whose cell is small
    is moved by its noise away from every row for good (on MNIST 8 of 10 centers ended empty); centers at
    one distance from the mean split the rows by direction, (x - mean) . u_j: cells of comparable size."""
    d = ctx.n_features
    sum_share, count_share = fastlloyd_shares(d)
    whole = VoronoiCells(np.zeros((1, d)), radius=None, relative=False)
    released = plan.release(
        voronoi_query("the rows' mean", whole, Block("sum", d, math.sqrt(d), share=sum_share), count_share),
        MEAN_START_PART,
    )
    mean = shrunk_mean(released["sum"][0], float(released["count"][0, 0]), float(np.max(released.std["sum"])))
    rng, m = ctx.randomness.geometry(), centers or ctx.n_clusters
    if d < MEAN_START_MIN_D:
        return np.clip(mean + compact(sphere_packing(m, d, rng)), -1.0, 1.0)
    directions = rng.normal(size=(m, d))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    return np.clip(mean + MEAN_START_RADIUS * directions, -1.0, 1.0)


MEAN_STANDS_OUT = 0.99  # the noisy mean moves the start only if noise alone reaches its length this rarely


def shrunk_mean(noisy_sum: np.ndarray, noisy_count: float, sum_std: float) -> np.ndarray:
    """The rows' mean from its noisy sum and count, where it stands out of its noise; else the box's center.

    With tau the sum's noise std over the count, the mean moves the start only if its squared length exceeds
    what the noise alone reaches with probability 1 - ``MEAN_STANDS_OUT`` (tau^2 times that quantile of
    chi-square with d degrees of freedom: the box's center is then a likely truth), and in d >= 3 it is shrunk
    towards the box's center by the positive-part James-Stein factor max(0, 1 - (d - 2) tau^2 / |mean|^2),
    which lowers its expected squared error whatever the true mean is.  So a few hundred rows at a small
    epsilon start at the box's center, and rows crowding a corner of their box start there.  Post-processing of
    the release and its public noise std; clipped to the unit box."""
    from scipy.stats import chi2

    count = max(noisy_count, 1.0)
    mean = np.clip(noisy_sum / count, -1.0, 1.0)
    d, length2, tau2 = mean.size, float(mean @ mean), (sum_std / count) ** 2
    if length2 <= tau2 * float(chi2.ppf(MEAN_STANDS_OUT, d)):
        return np.zeros_like(mean)
    if d >= 3:
        mean = mean * max(0.0, 1.0 - (d - 2) * tau2 / length2)
    return mean


def compact(centers: np.ndarray) -> np.ndarray:
    """The sphere-packing ``centers`` pulled towards the unit box's center: ``COMPACT_SCALE`` times each.

    Where the budget is too small for FastLloyd's steps to move its centers far (the shrinkage keeps a move
    that is mostly noise near zero), the centers end about where they start, and sphere packing's far-apart
    points lie far from most data (on wine at epsilon 0.1 the default's NICV was 3.5, the rows' mean alone
    2.15).  Pulled in, they keep sphere packing's spread of directions -- the first step still cuts the rows
    into k cells -- at a fraction of the distance.  The mean start (``init="mean"``, auto's) places this shape
    about the rows' noisy mean below ``MEAN_START_MIN_D`` dimensions.  It reads only the public start, so it
    costs nothing.  Measured in docs/benchmarks.md ("FastLloyd in d >= 3")."""
    return COMPACT_SCALE * centers


def _radius_ends(params: dict, k: int = 1) -> tuple[float, float] | None:
    """The shrinking radii's (first, final) fractions of the diagonal for k clusters, checked; None with the
    paper's radii.  Public options only: refused before anything is planned or read."""
    first, final = params["first_radius"], params["final_radius"]
    if params["radii"] == "paper":
        if (first, final) != (None, None):
            raise ValueError(
                "first_radius and final_radius set the shrinking radii: they need radii='shrinking' or 'per-cluster'"
            )
        return None
    default_first, default_final = (FIRST_RADIUS, FINAL_RADIUS) if params["radii"] == "shrinking" else PER_CLUSTER_RADII
    first = default_first if first is None else first
    final = min(default_final, first) if final is None else final
    if final > first:
        raise ValueError(f"final_radius ({final:g}) must be at most first_radius ({first:g}): the radii shrink")
    per = math.sqrt(k) if params["radii"] == "per-cluster" else 1.0
    return first / per, final / per


def _radii(params: dict, d: int, k: int, T: int, first: float, eta: float) -> list[float]:
    """The T rounds' radii: the paper's (``first``, then eta), or ``shrinking_radii``.  Public values only."""
    ends = _radius_ends(params, k)
    return [first] + [eta] * (T - 1) if ends is None else shrinking_radii(d, T, *ends)


def _fastlloyd_start(ctx: FitContext, params: dict) -> tuple[str, float | None, GreedyStart | None, Spec]:
    """FastLloyd's start (``init``, its share, the greedy start if any) and its whole plan, a value."""
    _radius_ends(params)  # its options checked with the start's, before anything is planned
    init, share = _init_option(params, ctx.n_features)
    _check_overcluster(params, init)
    if init == "greedy":  # one plan for both: checked as a whole before either releases
        start = greedy_start(ctx, share)
        return init, share, start, start.spec
    if init == "mean":
        return init, share, None, mean_start_spec(ctx, share)
    return init, share, None, lloyd_spec(ctx, "gaussian", "FastLloyd")


def _check_overcluster(params: dict, init: str) -> None:
    """``overcluster`` needs a start with as many centers as it likes and rounds to merge before; public
    options only, refused before anything is planned."""
    if params["overcluster"] is None:
        return
    if params[START] is not None or init == "greedy":
        given = "a public start (init=<array>)" if params[START] is not None else "the greedy start"
        raise ValueError(
            f"overcluster starts from m k centers, and {given} gives k: use init 'sphere', 'compact', 'mean' or "
            "'auto' with it, or drop overcluster"
        )
    if params["max_iter"] == 1:
        raise ValueError("overcluster merges its cells after a round and moves the k centers after it: max_iter >= 2")


def overclustered(params: dict, k: int, T: int) -> tuple[int, int | None]:
    """(the centers of the first rounds, the round after which they are merged into k -- None: no merge):
    ``overcluster`` k centers for all but the last ``merged_rounds(T)`` rounds, and at least the first (of two
    rounds, one of each).  Public values."""
    if params["overcluster"] is None:
        return k, None
    return params["overcluster"] * k, max(T - merged_rounds(T), 1)


def merged_rounds(T: int) -> int:
    """The rounds of T that move the k merged centers: ``MERGED_SHARE`` of them, at least ``MIN_MERGED_ROUNDS``."""
    return max(MIN_MERGED_ROUNDS, round(T * MERGED_SHARE))


def fastlloyd_spec(ctx: FitContext) -> Spec:
    """FastLloyd's plan: from sphere packing, the noisy mean or the greedy's centers (``init``)."""
    return _fastlloyd_start(ctx, algorithm_params(ctx, "fastlloyd"))[3]


@register("fastlloyd", spec=fastlloyd_spec)
def fastlloyd(ctx: FitContext) -> FitResult:
    """FastLloyd: radius-constrained DP Lloyd with relative updates and GDP accounting."""
    k, d = ctx.n_clusters, ctx.n_features
    params = algorithm_params(ctx, "fastlloyd")
    alpha, strategy, postprocess = params["alpha"], params["radius_strategy"], params["postprocess"]
    init, share, start, spec = _fastlloyd_start(ctx, params)
    public_start = _checked_start(ctx, params)
    plan = ctx.oracle.open(spec)
    n = estimate_rows(ctx, plan)
    sigma = 1.0 / plan.allotment(LLOYD_PART).mu
    beta = 2.0 * math.sqrt(d)
    eta = fastlloyd_eta(d, k, alpha)
    spread = 1.0 + math.sqrt(4.0 * d)
    estimate = _clamp_iterations(4.0 * n**2 * ERROR_PER_ITERATION / (k**3 * eta**2 * spread**2 * sigma**2))
    if params["max_iter"]:
        T = params["max_iter"]
    elif params["rounds"] == "log":
        T = log_rounds(n * ctx.budget.epsilon / k, greedy_start=init == "greedy")
    elif params["rounds"] == "few":
        T = FEW_ROUNDS
    elif init == "mean" and params["shrink"] and d >= MEAN_START_MIN_D:  # measured there
        T = max(estimate, MEAN_START_MIN_ITERATIONS)
    else:
        T = estimate
    first_k, merge_after = overclustered(params, k, T)
    if init in PUBLIC_INITS:
        centers = _initial_centers(ctx, public_start, first_k)
    elif start is not None:
        sample_rate = start.sample_rate(ctx.budget.epsilon, k, n, plan)
        centers = start.run(ctx, plan, sample_rate)
    else:  # init == "mean"
        centers = mean_start(ctx, plan, first_k)
    if init == "compact":  # (a public start, init=<array>, is the user's and never moved: refused with it)
        centers = compact(centers)
    radii = _radii(params, d, k, T, eta if strategy == "constant" else beta / 2.0, eta)
    steps = [fastlloyd_step(d, r, clip=params["far_rows"] == "clip") for r in radii]
    centers, done, sizes = run_lloyd(
        ctx,
        plan,
        centers,
        steps,
        postprocess,
        reseed=params["reseed"],
        shrink=params["shrink"],
        merge_after=merge_after,
    )
    sigma_r = sigma * math.sqrt(spread) / (4.0 * d) ** 0.25
    sigma_c = sigma * math.sqrt(spread)
    info = {"eta": eta, "sigma": sigma, "sigma_R": sigma_r, "sigma_C": sigma_c, "sizes": sizes}
    if start is not None:
        info["init"] = start.info(plan, sample_rate)
    elif init == "mean":
        around = "compact sphere packing" if d < MEAN_START_MIN_D else "random directions"
        info["init"] = {
            "start": "noisy mean",
            "around": around,
            "init_share": share,
            "mu": plan.allotment(MEAN_START_PART).mu,
        }
    elif init == "compact":
        info["init"] = {"start": "compact sphere packing", "scale": COMPACT_SCALE}
    else:
        info["init"] = {"start": "sphere packing" if public_start is None else "public centers (init)"}
    if merge_after is not None:
        info["overcluster"] = {"centers": first_k, "merged after round": merge_after, "rounds": T}
    return FitResult(centers, done, n, info)


@register("glloyd", spec=lambda ctx: lloyd_spec(ctx, "gaussian", "GLloyd"))
def glloyd(ctx: FitContext) -> FitResult:
    """GLloyd: DP Lloyd with Gaussian noise at domain sensitivity and GDP accounting."""
    k, d = ctx.n_clusters, ctx.n_features
    params = algorithm_params(ctx, "glloyd")
    start = _checked_start(ctx, params)
    plan = lloyd_plan(ctx, "gaussian", "GLloyd")
    centers = _initial_centers(ctx, start)
    n = estimate_rows(ctx, plan)

    sigma = 1.0 / plan.allotment(LLOYD_PART).mu
    T = params["max_iter"] or _clamp_iterations(
        ERROR_PER_ITERATION * n**2 / (k**3 * d * (2.0 * RHO + math.sqrt(d)) ** 2 * sigma**2)
    )
    # sigma_S = sigma sqrt(1 + 2 rho / sqrt(d)), sigma_C = sigma_S sqrt(sqrt(d) / (2 rho)): shares of mu^2
    # 1 / (1 + a) and a / (1 + a) with a = 2 rho / sqrt(d).
    a = 2.0 * RHO / math.sqrt(d)
    step = LloydStep(Block("sum", d, math.sqrt(d), share=1.0 / (1.0 + a)), count_share=a / (1.0 + a))
    centers, done, sizes = run_lloyd(
        ctx, plan, centers, [step] * T, params["postprocess"], reseed=params["reseed"], shrink=params["shrink"]
    )
    sigma_s = sigma * math.sqrt(1.0 + a)
    info = {"sigma": sigma, "sigma_S": sigma_s, "sigma_C": sigma_s / math.sqrt(a), "sizes": sizes}
    return FitResult(centers, done, n, info)


def sulloyd_split(epsilon_per_iteration: float, d: int) -> tuple[float, float]:
    """(epsilon of the whole sum vector, epsilon of the count) for one iteration (Su et al.)."""
    count_weight = (4.0 * d * RHO**2) ** (1.0 / 3.0)
    unit = epsilon_per_iteration / (d + count_weight)
    return d * unit, count_weight * unit


@register("sulloyd", spec=lambda ctx: lloyd_spec(ctx, "laplace", "SuLloyd"))
def sulloyd(ctx: FitContext) -> FitResult:
    """SuLloyd: Su et al.'s DP Lloyd with Laplace noise (pure epsilon-DP)."""
    k, d = ctx.n_clusters, ctx.n_features
    params = algorithm_params(ctx, "sulloyd")
    start = _checked_start(ctx, params)
    plan = lloyd_plan(ctx, "laplace", "SuLloyd")
    centers = _initial_centers(ctx, start)
    n = estimate_rows(ctx, plan)

    eps_lloyd = plan.allotment(LLOYD_PART).epsilon
    count_weight = (4.0 * d * RHO**2) ** (1.0 / 3.0)
    eps_min = math.sqrt(500.0 * k**3 / n**2 * (d + count_weight) ** 3)
    T = params["max_iter"] or _clamp_iterations(eps_lloyd / eps_min)
    # Per iteration eps_L / T, split d : cbrt(4 d rho^2) between the sum vector (l1 bound d in the unit
    # box: Laplace scale d / eps_S per coordinate) and the count.
    step = LloydStep(Block("sum", d, float(d), norm="l1", share=d), count_share=count_weight)
    centers, done, sizes = run_lloyd(
        ctx, plan, centers, [step] * T, params["postprocess"], reseed=params["reseed"], shrink=params["shrink"]
    )
    eps_sum, eps_cnt = sulloyd_split(eps_lloyd / T, d)
    return FitResult(centers, done, n, {"epsilon_sum": eps_sum, "epsilon_count": eps_cnt, "sizes": sizes})


def _baseline_spec(ctx: FitContext) -> Spec:
    return Spec("Lloyd", (Part(LLOYD_PART, share=1.0),), "gaussian", frozenset({ADAPTIVE}))


@register(BASELINE, spec=_baseline_spec)
def lloyd(ctx: FitContext) -> FitResult:
    """Non-private Lloyd from the same sphere-packing start, or the public one (a baseline; epsilon = inf)."""
    d = ctx.n_features
    params = algorithm_params(ctx, BASELINE)
    max_iter, start = params["max_iter"], _checked_start(ctx, params)
    plan = ctx.oracle.open(_baseline_spec(ctx))
    step = LloydStep(Block("sum", d, math.sqrt(d)), count_share=1.0)  # the unit box's largest norm: no clipping
    centers, done, sizes = run_lloyd(
        ctx, plan, _initial_centers(ctx, start), [step] * max_iter, "none", min_count=0.0, stop_when_stable=True
    )
    return FitResult(centers, done, None, {"sizes": sizes})

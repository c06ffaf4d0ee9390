"""The 1-cluster problem (Nissim, Stemmer & Vadhan 2016): GoodRadius, GoodCenter, and k clusters by repetition.

Given t, find a ball holding about t points whose radius is within a
constant of the smallest such ball's.  Everything runs in the unit box of the
declared bounds, on the curator's side (``plan.run_exact``): the steps
are not noisy sums.

**GoodRadius.**  For a radius r let c_r(x) = min(t, #points within r of x)
and L(r) = (1/t) * (sum of the t largest c_r(x)).  Adding or removing a
point changes every capped count by at most 1 and the top-t set by at most
one member, so L has sensitivity 2.  L is non-decreasing in r; the sparse
vector technique (AboveThreshold, eps_R) walks a public geometric grid of
radii upwards and releases the first r whose noisy L clears t - slack, with
slack = 16 (ln J + ln(2/beta)) / eps_R its accuracy margin (Dwork & Roth
Thm 3.24 at sensitivity 2), but never below t/2 (a public floor: with too
little budget for t the search would otherwise stop at once).  Capped counts come from a KD-tree: ball counts
while they are cheap, and, once the balls get crowded, one t-nearest-
neighbour query whose t distances per point give c_r(x) for every remaining
radius -- so the work is at most O(n t log n), never quadratic.  Radii are
evaluated lazily: the ones after the crossing are never computed.  Above 16
dimensions, where KD-trees degrade to brute force, the counts are taken in a
public 16-dimensional JL image (distances kept up to a small factor; any
public map leaves the sensitivity at 2).

**GoodCenter.**  (1) A public JL map to d' = ceil(ln n) dimensions when
that is smaller than d, with n a public or noisy row count (``n_hint``:
``public_n``, the fit's noisy count, or a public stand-in of 20 t) -- never
the rows' own count, which would leak through the output's shape.  (2) Randomly shifted grids of boxes of side
5 r in the projected space; AboveThreshold (eps_S, sensitivity 1) over up
to ``shifts`` shifts stops at the first whose fullest box clears t - slack.
(3) The stability-based histogram (eps_B, delta_B) picks that shift's heavy
box (one point is in one box).  (4) A public random rotation; on each of the
d axes, report-noisy-max (eps_A / d, permute-and-flip) over the public,
finite set of intervals of length r covering [-sqrt(d), sqrt(d)] (where the
rotated unit box lies) picks a heavy interval, widened by 2r on each side --
it then contains the projection of any ball of radius r that it meets.  (5)
NoisyAVG (eps_G, delta_G) of the points inside the resulting (public) box,
its diagonal as the diameter -- the seed averages inside the box's bounding
ball, but in moderate d that ball holds a large share of any background --
then (6) NoisyAVG (eps_F, delta_F) of the points within 2r of that estimate,
diameter 4r, which removes most of the remaining background and noise.

Basic composition of the six parts gives the total; the steps are recorded
separately in ``privacy_spent_``.  A step that finds nothing (no crossing,
no box above the stability threshold) makes the output a uniform point of
the box: that reveals only the (private) failure.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
from scipy.spatial import cKDTree

from .._validation import check_int, check_shares
from ..geometry.grid import cell_ids
from ..privacy.mechanisms import NoisyAverage, first_above_threshold, stable_argmax
from ..privacy.noise import NoiseSource
from ..queries.plan import EXACT, LAPLACE, Part, Spec
from .base import ROW_COUNT_PART, FitContext, FitResult, algorithm_params, count_part, estimate_rows, register
from .params import Integer, Interval, Param, Params, Shares, declare

__all__ = ["OneClusterPlan", "CappedCounts", "good_radius", "good_center", "locate", "radius_grid"]

DEFAULT_SHIFTS = 30  # GoodCenter's random box shifts
DEFAULT_SPLIT = {"radius": 0.15, "shift": 0.05, "box": 0.05, "axes": 0.2, "average": 0.3, "refine": 0.25}
RADIUS_RATIO = math.sqrt(2.0)
RADIUS_RANGE = 2.0**-12  # the smallest radius, relative to the unit box's diameter
FAILURE_PROBABILITY = 0.05  # beta in the sparse-vector slack
KNN_SWITCH = 1.0  # ball counts until their total passes n t (then one t-NN query is cheaper)
RADIUS_DIM = 16  # above this dimension GoodRadius counts neighbours in a JL image of this dimension
REFINE_RADIUS = 2.0  # the second average is over the ball of radius 2r about the first estimate
BOX_SIDE = 5.0  # GoodCenter's boxes have side BOX_SIDE * r: big enough to catch a ball, small enough to be sparse


@dataclass(frozen=True)
class OneClusterPlan:
    """Every share of the budget, fixed before data are read."""

    epsilon: float
    delta: float
    split: dict
    shifts: int = DEFAULT_SHIFTS
    n_hint: float = 2.0  # a public or noisy row count: GoodCenter projects to ceil(ln n_hint) dimensions

    def part(self, name: str) -> float:
        return self.split[name] * self.epsilon

    @property
    def part_delta(self) -> float:
        return self.delta / 3.0  # the heavy box and the two averages share delta

    def parts(self, prefix: str = "1-cluster") -> list[Part]:
        """The six steps' explicit costs (basic composition), as parts of a plan (exact access)."""
        dd = self.part_delta
        return [
            Part(f"{prefix}: GoodRadius (sparse vector)", epsilon=self.part("radius")),
            Part(f"{prefix}: box shift (sparse vector)", epsilon=self.part("shift")),
            Part(f"{prefix}: heavy box (stability histogram)", epsilon=self.part("box"), delta=dd),
            Part(f"{prefix}: heavy interval per axis (noisy max)", epsilon=self.part("axes")),
            Part(f"{prefix}: NoisyAVG in the box", epsilon=self.part("average"), delta=dd),
            Part(f"{prefix}: NoisyAVG in the ball of radius r", epsilon=self.part("refine"), delta=dd),
        ]


MAX_SHIFTS = 10_000  # a public cap: each shift is one sparse-vector query over the data
BACKGROUND_FACTOR = 20  # without a row count, GoodCenter's JL assumes at most this many times t rows


def background_rows(t: int) -> float:
    """A public stand-in for n when no row count is at hand (never the rows' own count)."""
    return float(BACKGROUND_FACTOR * t)


def jl_dimension(n_hint: float, d: int) -> int:
    """GoodCenter's JL dimension: the seed's ceil(ln n), from a public or noisy n, at most d."""
    return min(d, max(1, math.ceil(math.log(max(n_hint, 2.0)))))


def make_plan(
    epsilon: float, delta: float, split: dict | None = None, shifts: int = DEFAULT_SHIFTS, n_hint: float = 2.0
) -> OneClusterPlan:
    if delta <= 0:
        raise ValueError("1-cluster needs delta > 0 (its stability histograms and NoisyAVG are (epsilon, delta)-DP)")
    shares = (
        dict(DEFAULT_SPLIT)
        if split is None
        else check_shares("the 1-cluster budget split", split, tuple(DEFAULT_SPLIT))
    )
    return OneClusterPlan(
        float(epsilon), float(delta), shares, check_int("shifts", shifts, 1, MAX_SHIFTS), float(n_hint)
    )


def radius_grid(d: int) -> np.ndarray:
    """The public radii, ascending: the unit box's diameter times RADIUS_RATIO^-j, down to 2^-12 of it."""
    diameter = 2.0 * math.sqrt(d)
    count = int(math.ceil(math.log(1.0 / RADIUS_RANGE, RADIUS_RATIO))) + 1
    return diameter * RADIUS_RATIO ** -np.arange(count)[::-1]


def _slack(sensitivity: float, queries: int, epsilon: float) -> float:
    return 8.0 * sensitivity * (math.log(queries) + math.log(2.0 / FAILURE_PROBABILITY)) / epsilon


class CappedCounts:
    """L(r) for increasing r: the mean of the t largest capped neighbour counts (sensitivity 2).

    Ball counts come from a KD-tree (scipy's, on every core); their cost
    grows with the counts, so once a radius's counts total more than n t, one
    t-nearest-neighbour query (O(n t log n)) serves every larger radius.
    Points already at the cap stay there and are not recounted.
    """

    def __init__(self, points: np.ndarray, t: int):
        self.points = points
        self.t = int(t)
        self.tree = cKDTree(points) if len(points) else None
        self._counts = np.zeros(len(points), dtype=np.int64)
        self._knn: np.ndarray | None = None  # sorted distances to the t nearest points, per point

    def capped(self, r: float) -> np.ndarray:
        n = len(self.points)
        if n == 0:
            return np.zeros(0)
        if self._knn is not None:
            return (self._knn <= r).sum(axis=1)
        if self._counts.sum() > KNN_SWITCH * n * self.t:
            self._knn = self.tree.query(self.points, k=min(self.t, n), workers=-1)[0].reshape(n, -1)
            return (self._knn <= r).sum(axis=1)
        open_ = np.flatnonzero(self._counts < self.t)
        found = self.tree.query_ball_point(self.points[open_], r, return_length=True, workers=-1)
        self._counts[open_] = np.minimum(found, self.t)
        return self._counts.copy()

    def L(self, r: float) -> float:
        counts = self.capped(r)
        top = counts if counts.size <= self.t else np.partition(counts, counts.size - self.t)[-self.t :]
        return float(top.sum()) / self.t


def good_radius(points: np.ndarray, t: int, epsilon: float, noise: NoiseSource, radii: np.ndarray) -> float | None:
    """The first radius of ``radii`` whose noisy L(r) clears t - slack (epsilon-DP); None if none does."""
    stats = CappedCounts(points, t)
    threshold = max(t - _slack(2.0, len(radii), epsilon), t / 2.0)
    index = first_above_threshold((stats.L(r) for r in radii), threshold, epsilon, 2.0, noise)
    return None if index is None else float(radii[index])


def good_center(
    points: np.ndarray, r: float, t: int, plan: OneClusterPlan, noise: NoiseSource, rng: np.random.Generator
) -> np.ndarray | None:
    """GoodCenter (see the module docstring); None when a step finds nothing."""
    n, d = points.shape
    dim = jl_dimension(plan.n_hint, d)  # from a public or noisy count: the rows' own n is private
    projected = points if dim == d else points @ (rng.standard_normal((d, dim)) / math.sqrt(dim))
    side = BOX_SIDE * r
    shifts = [rng.uniform(0.0, side, size=dim) for _ in range(plan.shifts)]

    def fullest_box(shift):
        return np.bincount(cell_ids(projected, side, shift)[0]).max() if n else 0

    threshold = max(t - _slack(1.0, plan.shifts, plan.part("shift")), t / 2.0)
    chosen = first_above_threshold((fullest_box(s) for s in shifts), threshold, plan.part("shift"), 1.0, noise)
    if chosen is None:
        return None
    box_of, _ = cell_ids(projected, side, shifts[chosen])
    box = stable_argmax(np.bincount(box_of), plan.part("box"), plan.part_delta, noise)
    if box is None:
        return None
    inside = points[box_of == box]

    rotation, _ = np.linalg.qr(rng.standard_normal((d, d)))
    rotated = inside @ rotation
    low, high = np.empty(d), np.empty(d)
    # The rotated unit box lies in [-sqrt(d), sqrt(d)] on every axis: a public, finite set of intervals.
    reach = math.sqrt(d)
    eps_axis = plan.part("axes") / d
    for axis in range(d):
        offset = -reach - rng.uniform(0.0, r)
        n_cells = int(math.ceil((2.0 * reach - offset - reach) / r)) + 1
        cells = np.clip(np.floor((rotated[:, axis] - offset) / r).astype(np.int64), 0, n_cells - 1)
        heavy = noise.noisy_argmax(np.bincount(cells, minlength=n_cells).astype(np.float64), 2.0 / eps_axis)
        low[axis] = offset + heavy * r - 2.0 * r
        high[axis] = offset + (heavy + 1) * r + 2.0 * r
    # The box is public (released geometry): average every point of the data set inside it, then
    # once more inside the ball of radius 2r about that first estimate (far less background there).
    in_box = np.all(((points @ rotation) >= low) & ((points @ rotation) <= high), axis=1)
    center_box = ((low + high) / 2.0) @ rotation.T
    half = float(np.linalg.norm(high - low)) / 2.0
    first = NoisyAverage(epsilon=plan.part("average"), delta=plan.part_delta, diameter=2.0 * half)
    center = first.apply(points[in_box].sum(axis=0), in_box.sum(), center_box - half, center_box + half, noise)[0]
    reach = REFINE_RADIUS * r
    near = np.einsum("ij,ij->i", points - center, points - center) <= reach * reach
    second = NoisyAverage(epsilon=plan.part("refine"), delta=plan.part_delta, diameter=2.0 * reach)
    return second.apply(points[near].sum(axis=0), near.sum(), center - reach, center + reach, noise)[0]


def locate(
    points: np.ndarray, t: int, plan: OneClusterPlan, noise: NoiseSource, rng: np.random.Generator
) -> tuple[np.ndarray, float, bool]:
    """(center, radius, found) of one private 1-cluster on unit-box ``points``; costs ``plan.parts()``."""
    d = points.shape[1]
    radii = radius_grid(d)
    # KD-trees degrade to brute force in high dimension: count neighbours in a public JL image instead
    # (distances kept up to a small factor; L has sensitivity 2 under any public map).
    counted = points if d <= RADIUS_DIM else points @ (rng.standard_normal((d, RADIUS_DIM)) / math.sqrt(RADIUS_DIM))
    r = good_radius(counted, t, plan.part("radius"), noise, radii)
    if r is not None:
        center = good_center(points, r, t, plan, noise, rng)
        if center is not None:
            return np.clip(center, -1.0, 1.0), r, True
    return noise.uniform(-np.ones(d), np.ones(d)), float(radii[-1]), False


# onecluster's algorithm_params (algorithms.params); None: worked out from the row count.
declare(
    Params(
        "onecluster",
        "onecluster",
        params={
            "t": Param(Integer()),  # None: n / (2k) from the public or noisy row count
            "budget_split": Param(
                Shares(tuple(DEFAULT_SPLIT), what="the 1-cluster budget split")
            ),  # None: DEFAULT_SPLIT
            "shifts": Param(Integer(1, MAX_SHIFTS), DEFAULT_SHIFTS),
            "cover_factor": Param(Interval(0.0, math.inf, closed="neither"), 2.0),
        },
    )
)


def _onecluster_plan(ctx: FitContext):
    """(options, the rounds' 1-cluster plan, the whole fit's plan as a value): k rounds at 1/k of the budget
    each, and the noisy count unless ``public_n``."""
    ctx.oracle.require({EXACT, LAPLACE}, "1-cluster")
    options = algorithm_params(ctx, "onecluster")  # checked against onecluster's table, defaults filled in
    eps, delta = ctx.budget.epsilon, ctx.budget.delta
    eps_count = None if ctx.public_n is not None else ctx.count_fraction * eps
    rest = eps - (eps_count or 0.0)
    rounds = make_plan(rest / ctx.n_clusters, delta / ctx.n_clusters, options["budget_split"], options["shifts"])
    parts = [part for i in range(ctx.n_clusters) for part in rounds.parts(f"1-cluster round {i + 1}")]
    parts += count_part(ctx, epsilon=eps_count)
    return options, rounds, Spec("1-cluster", tuple(parts), "gaussian", frozenset({EXACT, LAPLACE}))


@register("onecluster", spec=lambda ctx: _onecluster_plan(ctx)[2])
def onecluster(ctx: FitContext) -> FitResult:
    """k clusters by k rounds of 1-cluster, removing each found ball's points (Nissim, Stemmer & Vadhan 2016, Observation 3.5).

    Each round gets 1/k of the budget (basic composition).  ``t`` defaults to
    n / (2k) from the (public or noisy) row count, so a ball of radius r holds
    about half a typical cluster; each round's ball is reported, and its
    points removed, at ``cover_factor`` (default 2) times r, which then covers
    most of it.  Post-processing: no extra privacy cost.
    """
    k = ctx.n_clusters
    options, rounds, spec = _onecluster_plan(ctx)
    t_given, factor = options["t"], options["cover_factor"]
    plan = ctx.oracle.open(spec)
    n = estimate_rows(ctx, plan)
    t = int(t_given) if t_given is not None else max(1, int(n / (2 * k)))
    rounds = dataclasses.replace(rounds, n_hint=n)  # the public or noisy count, never the rows' own
    rng = ctx.randomness.geometry()

    def rounds_of_one_cluster(rows):
        points = rows.map_rows(lambda chunk: np.array(chunk, dtype=np.float64))
        centers, radii, found = [], [], []
        remaining = points
        for i in range(k):
            center, radius, ok = locate(remaining, t, rounds, rows.noise, rng)
            radius *= factor
            centers.append(center)
            radii.append(radius)
            found.append(ok)
            remaining = remaining[np.einsum("ij,ij->i", remaining - center, remaining - center) > radius * radius]
            if ctx.callback is not None:
                ctx.callback(i + 1, k)
        return np.array(centers), np.array(radii), found

    round_parts = [part.name for part in spec.parts if part.name != ROW_COUNT_PART]
    centers, radii, found = plan.run_exact(round_parts, rounds_of_one_cluster)
    return FitResult(centers, k, n, {"radii": radii, "found": found, "t": t})

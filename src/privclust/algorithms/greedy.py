"""The private Mettu-Plaxton greedy (Dupré la Tour, Henzinger & Saulpic 2024, Algorithm 1) with JL lifting, boosting and the elbow curve.

Public geometry (``geometry.nets``): levels of balls of radius r_i = top 2^-i
on shifted grids.  The value of a ball B(x, r) is sum over its points of
(r - |p - x|)^z (z = 2: k-means, z = 1: k-median); we keep it in units of
r^z, so one point adds at most 1 to a ball of its level.  ``values="all"``
is that value; ``values="nearest"`` credits each point to the nearest ball
of each level only, so a ball sums the points of the cube of side r centred
on it (every point within r/2 of its center, none beyond r).

The greedy, k times: take an (approximately) maximal-value *available* ball
(over all levels, values weighted by r^z), then descend to its best
available child (a ball of the next level whose center is within r of it)
until the finest level or until no child is left; the last ball's center is
the next center.  A ball B(x, r) is *forbidden* by a chosen center c when
|x - c| <= ``forbid`` * r.  The first j centers solve j-clustering for every
j <= k at once.  When every listed ball is forbidden before all centers are
chosen (boosting asks for 4k), ``forbid`` is halved, down to ``min_forbid``,
so the remaining centers go where the mass is -- e.g. into two clusters that
the JL map brought close together -- and only then to a uniform random point.

Two ways to choose, both private:

* ``selection="histogram"`` (any privacy model): per level, one release of
  the balls' values per sub-lattice (``values="nearest"``, the default: one;
  ``"all"``: 2^d', a point lies in at most one ball of each), all asked at
  once (``release_many``: one pass over the rows -- and, in the local model,
  the one round every user answers): every ball of a small level, or the
  non-empty balls of a large one above the partition-selection threshold (a
  ``sparse`` query) -- among the candidates that the coarser level's significant
  balls name (cubes meeting theirs, grown by ``CENTRAL_NARROW_MARGIN`` cells in
  the central model), so a level under one that kept nothing draws no noise.  Cost: level i's S releases draw 1/S of its part each,
  so a level costs its part whatever S (GDP composition), plus the
  partition-selection delta.  Everything after is post-processing of the
  released histograms: the greedy, and the *noise floor* -- a released value
  counts only when it clears std Phi^-1(1 - ``floor`` / N) for a level of N
  balls (std: the release's own error model).  Every ball of a whole-level
  release gets noise, and an empty one shows pure noise, up to about
  std sqrt(2 ln N); weighted by r^z it outweighs the real balls of finer
  levels, which put centers in empty space above d = 2 (issue 17).  With the
  floor about ``floor`` empty balls per level get through.
* ``selection="exponential"`` (central model): every choice is an
  exponential-mechanism draw on the exact values, the head over every
  available ball of every level -- the empty ones implicitly -- and each
  descent over the explicitly listed children.  Accounting: the seed proves
  a per-level bound (Lemma F.2) whose constants are not legible in our copy
  of the paper, so we charge a bound we can prove: each draw with parameter
  eps' is eps'^2/8-zCDP (the exponential mechanism is bounded-range; Cesar &
  Rogers 2021), at most k * levels draws compose to rho = k L eps'^2 / 8,
  converted to (eps_sel, delta_sel); eps' is solved from the selection's
  share.  This charges per choice; it is valid, and looser than the seed's.

Then (Lemma 2.2) *lifting*: the Voronoi cells of the centers in the projected
space split the original rows; one Gaussian release of every cell's sum,
sum of squared norms and size (l2 sensitivities sqrt(d), d and 1 in the unit
box) gives the centers in the original space and, by Lemma 2.5, each cell's
cost: sum |x|^2 - 2 <sum, m> + size |m|^2 for a center m.  A cell's mean
divides its noisy sum by max(noisy size, 3 std of the size's noise), so a
cell whose size is noise stays near its anchor (post-processing).  Boosting
the approximation (Lemma C.1): solve for ``boost`` * k centers, then cluster
their lifted means weighted by the noisy sizes that are significant
(post-processing).  Boosting the
success probability (Corollary 2.6): ``restarts`` independent runs, each with
1/restarts of every part (of mu^2, composed exactly in GDP; of the selection
delta), keep the one with the lowest estimated cost.  The elbow curve: the
prefix solutions' costs estimated from one run's release.

Seed 000's MPC greedy (``mpc``; by default where the rows are distributed, i.e. on
Spark): each level is released once (no narrowing: levels are independent) and used
only through :class:`LevelSelection`, the per-level selection of Lemma 5.1, run where
the balls live by merge-and-reduce (``Plan.release_reduced``, ``queries.reduce``), so
at most ``boost`` k balls per level reach the driver; the greedy above then runs on
that summary, and the lifting is unchanged.  Same parts, same cost: the selection is
post-processing of the levels' releases.

The plan (``greedy_spec``): per run and level a share of the oracle's pool
(``selection_share`` split over the levels by ``level_growth``), each of the
level's sub-lattice releases drawing an equal fraction of it; half of delta reserved
for the sparse levels' partition selection; the rest of the pool for the
lifting.  The exponential variant declares its zCDP bound as an explicit
(epsilon, delta) part and needs exact access (the central model).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

import numpy as np

from ..geometry.nets import Level, make_levels
from ..geometry.projection import BallProjection, ChunkMemo
from ..privacy.mechanisms import sample_exponential
from ..privacy.noise import NoiseSource
from ..queries.base import Block, SumQuery
from ..queries.plan import (
    ADAPTIVE,
    DENSE,
    DISTRIBUTED,
    EXACT,
    SAMPLED,
    SPARSE,
    CapabilityError,
    Oracle,
    Part,
    Plan,
    Spec,
)
from ..queries.reduce import Reduction
from ..queries.voronoi import moment_values, nearest_center, projected_cells_query
from .base import FitContext, FitResult, algorithm_params, register, weighted_kmeans
from .params import Boolean, Integer, Interval, OneOf, Param, Params, declare
from .radius import fastlloyd_eta

__all__ = [
    "GreedySpec",
    "LevelValues",
    "greedy_spec",
    "greedy_levels",
    "uniform_fallback",
    "level_requests",
    "level_tables",
    "histogram_centers",
    "GreedyRound",
    "greedy_round",
    "greedy_centers",
    "LiftGrid",
    "projection_for",
    "select_and_lift",
    "lift",
    "solution_cost",
    "monotone_costs",
    "settled_elbow",
    "solution_cost_and_std",
    "greedy",
    "run_greedy",
]

SELECTIONS = ("histogram", "exponential")
VALUES = {"nearest": 1, "all": 2}  # how a point's value reaches a level's balls -> the sub-lattice stride
PROJECTION_DIM = 4  # d' of the JL map when d > d' (with 3, the map merged clusters that are apart in R^d)
MEAN_FLOOR = 3.0  # a lifted cell's mean divides by at least this many count noise stds (see Lifted.means)
DENSE_BALLS = 2**17  # a sub-lattice with at most this many balls is released whole: no threshold, no delta
# ... except, in the central model and three or more working dimensions, a level below the top with more than
# this many: it is narrowed to the candidates near the coarser level's kept balls, and listing only the
# non-empty ones draws far less secure noise (the 4-d projection's level 2: 20,736 balls, ~150 non-empty
# candidates at 1e6 rows; the default's start drew 41,000 values, now 16,000).  In the plane a level is a few
# balls per cluster and the whole-level release costs no delta: S1 and LSun were 5-8% worse listed sparse.
NARROWED_DENSE_BALLS = 2**14
NARROWED_MIN_DIM = 3
# A sparse level's candidates are the balls whose cubes meet the cubes of the coarser level's kept balls, grown
# by this many cells on every side when the oracle lists the non-empty balls itself (the central model): a
# candidate there costs noise only if non-empty, and with no margin a cluster whose coarse mass is split
# between cubes lost its fine balls (8 blobs in 10-d: 15x the cost instead of 1.1x).  The local model decodes
# every candidate, so it keeps the tight set.
CENTRAL_NARROW_MARGIN = 1
# The MPC greedy's per-level selection keeps balls more than MPC_APART * r apart at the root of its merge tree.
# With the sequential greedy's forbid (4) a level of the 4-d projection kept 1-2 balls wherever 4r spans the
# clusters, and the greedy run on that summary missed clusters (8 blobs in 10-d: NICV 0.23 against 0.075);
# with 1, every cube that is not a neighbour's may be kept, and the summary costs what the full tables do
# (0.032; S1, Birch2, Adult within a few percent; docs/algorithms.md).
MPC_APART = 1.0
FALSE_ALARMS = 0.05  # chance that noise alone passes a significance floor anywhere among the values tested
DEFAULT_LEVELS = 8  # fewer where a level could not be released whole and the oracle has no sparse release
# The greedy's algorithm_params (algorithms.params); None: worked out in greedy_spec from the other values.
declare(
    Params(
        "greedy",
        "greedy",
        params={
            "z": Param(Integer(1, 2), 2),
            "levels": Param(Integer(2, 30)),  # None: DEFAULT_LEVELS, or fewer (see greedy_spec)
            "forbid": Param(Interval(1.0, 64.0), 4.0),
            "selection": Param(OneOf(SELECTIONS), "histogram"),
            "projection_dim": Param(Integer(1, 8)),  # None: PROJECTION_DIM when d > PROJECTION_DIM
            "boost": Param(Integer(1, 10), 4),
            "restarts": Param(Integer(1, 20), 1),
            "selection_share": Param(Interval(0.0, 1.0, closed="neither"), 0.6),
            "level_growth": Param(Interval(1.0, 16.0), 1.0),
            "values": Param(OneOf(tuple(VALUES))),  # None: "nearest" for the histogram, "all" for the exponential
            "floor": Param(Interval(0.0, 1e6), 1.0),
            "min_forbid": Param(Interval(0.125, 64.0), 1.0),
            "mpc": Param(Boolean()),  # None: where the rows are distributed (see _mpc_option)
        },
    )
)


def _sublattice_bound(radius: float, dim: int, stride: int) -> float:
    """An upper bound on a sub-lattice's ball count at this radius over [-1, 1]^dim (any shift)."""
    return (math.ceil((2.0 + 2.0 * radius) / radius + 2.0) / stride + 1.0) ** dim


@dataclass(frozen=True)
class GreedySpec:
    """Every public parameter of a greedy fit and the parts of its budget, fixed before data are read."""

    k: int  # centers the greedy computes (boost * n_clusters)
    z: int
    levels: int
    forbid: float
    min_forbid: float  # when no listed ball is available, forbid is halved while it stays >= this
    selection: str
    projection_dim: int | None  # None: no projection (d small)
    stride: int  # sub-lattice stride: 1 (a point adds to its nearest ball per level), 2 (to every ball)
    floor: float  # histogram: an empty ball's noisy value clears its level's floor with probability floor / balls
    restarts: int
    share: float  # the selection's share of the budget (the rest lifts)
    growth: float
    dense: tuple[bool, ...]  # histogram: levels small enough to release every ball (no threshold)
    eps_draw: float | None  # exponential: eps' of each draw
    parts: tuple[Part, ...]
    adaptive_lifting: bool = True  # lift the chosen centers' cells (a second round), or a public grid's cells
    narrow_margin: int = 0  # a sparse level's candidates: cubes meeting the coarser kept balls grown by this
    mpc: bool = False  # seed 000's MPC greedy: levels selected independently, by merge-and-reduce

    @property
    def needs(self) -> set[str]:
        if self.selection == "exponential":
            return {EXACT, ADAPTIVE}
        sparse = {SPARSE} if not all(self.dense) else set()
        return sparse | ({ADAPTIVE} if self.adaptive_lifting else {DENSE})

    def level_part(self, run: int, level: int) -> str:
        return _part_name(self.restarts, run, f"level {level}")

    def lift_part(self, run: int) -> str:
        return _part_name(self.restarts, run, "lifting")

    def selection_part(self, run: int) -> str:
        return _part_name(self.restarts, run, "exponential-mechanism choices (zCDP)")

    @property
    def plan_spec(self) -> Spec:
        """The greedy's plan as a value (its parts and needs), to check or combine without running it."""
        return Spec(f"the greedy ({self.selection} selection)", self.parts, "gaussian", frozenset(self.needs))

    def open(self, oracle: Oracle) -> Plan:
        """The oracle's plan for these parts: refused before any row is read if it cannot be served."""
        return oracle.open(self.plan_spec)


def _part_name(restarts: int, run: int, what: str) -> str:
    return f"greedy{f' run {run + 1}' if restarts > 1 else ''}: {what}"


def greedy_spec(ctx: FitContext, n_clusters: int | None = None) -> GreedySpec:
    """Validate the options and lay out the budget's parts; raises before any data is read.

    The greedy computes ``boost`` times the fit's k centers, or exactly ``n_clusters`` when given
    (the elbow curve needs the greedy's own prefixes).

    Parts (histogram selection): per run and level, a share of the pool proportional to
    ``level_growth``^i of the selection's share (each of the level's 3^d' sub-lattice releases
    draws 1/3^d' of it), with half of delta reserved for the sparse levels' partition selection;
    per run, the lifting's share.  Runs (``restarts``) split everything equally.  Exponential
    selection: per run an explicit (epsilon, delta) for all its draws (zCDP, see the module doc), the
    rest of the budget for the lifting.
    """
    o = algorithm_params(ctx, "greedy")  # checked against the greedy's table, defaults filled in
    k = n_clusters or ctx.n_clusters
    z, forbid, min_forbid, selection, floor = o["z"], o["forbid"], o["min_forbid"], o["selection"], o["floor"]
    levels = DEFAULT_LEVELS if o["levels"] is None else o["levels"]
    boost = o["boost"] if n_clusters is None else 1
    restarts, share, growth = o["restarts"], o["selection_share"], o["level_growth"]
    # The histogram pays for every sub-lattice (stride^d' releases per level), so by default each point adds
    # its value to its nearest ball only (one release per level); the exponential variant reads exact
    # values, where full values cost nothing more.
    values = o["values"] or ("nearest" if selection == "histogram" else "all")
    stride = VALUES[values]
    d = ctx.n_features
    dim = o["projection_dim"]
    if dim is None and d > PROJECTION_DIM:
        dim = PROJECTION_DIM
    if dim is not None and dim >= d:
        dim = None

    work_dim = dim or d
    top = 1.0 if dim else math.sqrt(d)
    capabilities = ctx.oracle.capabilities
    mpc = _mpc_option(o["mpc"], capabilities, selection, stride, n_clusters is None)
    # Sparse levels listed near the coarser level's kept balls, where most of a whole level is empty balls.
    narrowed = EXACT in capabilities and stride == 1 and not mpc and work_dim >= NARROWED_MIN_DIM
    dense = tuple(
        _sublattice_bound(top * 2.0**-i, work_dim, stride) <= (NARROWED_DENSE_BALLS if narrowed and i else DENSE_BALLS)
        for i in range(levels)
    )
    if SPARSE not in capabilities and o["levels"] is None and not all(dense):
        # No sparse release (the local model): the default levels stop where a sub-lattice gets too big
        # to release whole.  Levels asked for explicitly are kept, and the plan is refused instead.
        levels = max(2, dense.index(False))
        dense = dense[:levels]
    parts: list[Part] = []
    eps_draw = None
    if selection == "histogram":
        # Level i gets a share of mu^2 proportional to growth^i: fine levels hold small values and need
        # the least noise; coarse balls hold many points and stand out anyway.
        weights = np.array([growth**i for i in range(levels)]) / sum(growth**i for i in range(levels))
        sparse_parts = restarts * sum(not x for x in dense)
        selection_delta = ctx.budget.delta / 2.0 / sparse_parts if sparse_parts and ctx.budget else 0.0
        for run in range(restarts):
            for i in range(levels):
                part_delta = 0.0 if dense[i] else selection_delta
                parts.append(
                    Part(_part_name(restarts, run, f"level {i}"), share * weights[i] / restarts, 0.0, part_delta)
                )
            parts.append(Part(_part_name(restarts, run, "lifting"), share=(1.0 - share) / restarts))
    else:
        ctx.oracle.require({EXACT, ADAPTIVE}, "the greedy (exponential selection)")
        if ctx.budget is None:
            raise ValueError("the exponential selection is a private mechanism: it needs a budget")
        eps_sel, delta_sel = share * ctx.budget.epsilon / restarts, ctx.budget.delta / restarts / 2.0
        log_inv = math.log(1.0 / delta_sel)
        rho = (math.sqrt(log_inv + eps_sel) - math.sqrt(log_inv)) ** 2  # eps = rho + 2 sqrt(rho ln(1/delta))
        eps_draw = math.sqrt(8.0 * rho / (boost * k * levels))
        for run in range(restarts):
            parts.append(
                Part(
                    _part_name(restarts, run, "exponential-mechanism choices (zCDP)"), epsilon=eps_sel, delta=delta_sel
                )
            )
            parts.append(Part(_part_name(restarts, run, "lifting"), share=1.0 / restarts))
    return GreedySpec(
        mpc=mpc,
        adaptive_lifting=ADAPTIVE in capabilities,
        narrow_margin=CENTRAL_NARROW_MARGIN if EXACT in capabilities else 0,
        k=boost * k,
        z=z,
        levels=levels,
        forbid=float(forbid),
        min_forbid=float(min_forbid),
        selection=selection,
        projection_dim=dim,
        stride=stride,
        floor=float(floor),
        restarts=restarts,
        share=share,
        growth=growth,
        dense=dense,
        eps_draw=eps_draw,
        parts=tuple(parts),
    )


def _mpc_option(value, capabilities, selection: str, stride: int, fit: bool) -> bool:
    """Whether to run seed 000's MPC greedy: by default where the rows are distributed (Spark), for a fit
    (the elbow curve needs the sequential greedy's prefixes); ``mpc=True`` runs it anywhere."""
    if value is None:
        return (
            fit
            and DISTRIBUTED in capabilities
            and selection == "histogram"
            and stride == 1
            and ADAPTIVE in capabilities
        )
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"mpc must be True, False or None, got {value!r}")
    if value and (selection != "histogram" or stride != 1):
        raise ValueError('the MPC greedy needs selection="histogram" and values="nearest" (one release per level)')
    if value and ADAPTIVE not in capabilities:
        raise CapabilityError(
            "the MPC greedy lifts its centers in a second round, which this privacy model does not offer"
        )
    if value and not fit:
        raise ValueError("the elbow curve needs the sequential greedy's prefixes: leave mpc unset")
    return bool(value)


def _lift_blocks(d: int, reach: float | None = None) -> tuple[Block, ...]:
    """[sum, sum of squared norms, size] blocks, equal shares: bounds sqrt(d), d, 1 for unit-box rows (every
    coordinate within +-1), or reach, reach^2, 1 for rows within ``reach`` of their center."""
    if reach is None:
        summed = Block("sum", d, math.sqrt(d), coordinate_bound=1.0)
        return (summed, Block("sumsq", 1, float(d)), Block("count", 1, 1.0, count=True))
    return (Block("sum", d, reach), Block("sumsq", 1, reach * reach), Block("count", 1, 1.0, count=True))


def _level_query(
    label: str,
    level: Level,
    residue: np.ndarray,
    project,
    z: int,
    dense=False,
    parent: Level | None = None,
    margin: int = 0,
) -> SumQuery:
    """Per-ball values of one sub-lattice: by dense bucket over all its balls, or by ball id (sparse).

    A sparse query of a one-release level (stride 1) names its candidates from the balls kept at the
    coarser ``parent`` level: the balls whose cube (a point is credited to its nearest ball, so a ball
    holds the cube of side r about its center) meets a kept parent's cube grown by ``margin`` cells."""
    size = int(np.prod(level.sublattice_box(residue)[1])) if dense else int(np.prod(level.radix.astype(float)))

    def contribution(chunk):
        ids, value = level.ball_ids(project(chunk), residue, z, dense)
        return ids, value[:, None]

    narrows = None
    if not dense and parent is not None and level.stride == 1:

        def narrows(kept: np.ndarray) -> np.ndarray:
            return level.cubes_meeting(parent, parent.around(np.asarray(kept, dtype=np.int64), margin))

    return SumQuery(label, max(size, 1), (Block("value", 1, 1.0),), contribution, sparse=not dense, narrows=narrows)


@dataclass
class LevelValues:
    """One level's ball values (exact, or noisy and released), by sorted ball id; values in units of r^z."""

    level: Level
    ids: np.ndarray
    values: np.ndarray

    def lookup(self, ids: np.ndarray) -> np.ndarray:
        at = np.searchsorted(self.ids, ids)
        at = np.minimum(at, max(self.ids.size - 1, 0))
        found = (self.ids.size > 0) & (self.ids[at] == ids) if self.ids.size else np.zeros(ids.shape, bool)
        return np.where(found, self.values[at] if self.ids.size else 0.0, 0.0)


def _merge(level: Level, parts: list[tuple[np.ndarray, np.ndarray]]) -> LevelValues:
    ids = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, dtype=np.int64)
    values = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0)
    order = np.argsort(ids)
    return LevelValues(level, ids[order], values[order])


def significant(std: float, tested: int, level: float = FALSE_ALARMS) -> float:
    """The value that noise of standard deviation ``std`` exceeds with probability ``level`` over ``tested``
    values at once (a Bonferroni bound on the Gaussian tail): above it a released value is signal."""
    if std <= 0 or tested < 1:
        return 0.0
    return float(std * _gaussian_isf(level / tested))


@lru_cache(maxsize=256)
def _gaussian_isf(p: float) -> float:
    """The standard Gaussian's upper p-quantile, -ndtri(p) (what SciPy's ``norm.isf`` computes).  Remembered: the
    MPC greedy asks the same few on every machine of its tree.  From ``scipy.special``, which every Spark worker
    has loaded with privclust's queries, not ``scipy.stats``, whose import took a worker about a second."""
    from scipy.special import ndtri

    return float(-ndtri(p))


def level_requests(levels: list[Level], project, spec: GreedySpec, run: int) -> tuple[list, list]:
    """The histogram selection's queries, fixed before any answer: per level and sub-lattice one query, of
    every ball (small levels) or of the non-empty balls (sparse levels).  Returns the (query, part,
    fraction) requests and, for :func:`level_tables`, which level and sub-lattice each one reads."""
    requests, owners = [], []
    for level in levels:
        dense = spec.dense[level.index]
        residues = level.sublattices()
        parent = levels[level.index - 1] if level.index > 0 else None
        for residue in residues:
            label = f"greedy level {level.index}"
            query = _level_query(label, level, residue, project, spec.z, dense, parent, spec.narrow_margin)
            requests.append((query, spec.level_part(run, level.index), 1.0 / len(residues)))
            owners.append((level, residue, dense))
    return requests, owners


def level_tables(levels: list[Level], owners: list, answers: list, spec: GreedySpec) -> list[LevelValues]:
    """Each level's released ball values above its noise floor (post-processing of the answers to
    :func:`level_requests`, in its order)."""
    parts = {level.index: [] for level in levels}
    stds = {level.index: 0.0 for level in levels}
    for (level, residue, dense), answer in zip(owners, answers):
        ids = level.encode(level.sublattice_balls(residue)) if dense else answer.ids
        parts[level.index].append((ids, answer["value"][:, 0]))
        stds[level.index] = max(stds[level.index], float(np.max(answer.std.get("value", 0.0))))
    tables = []
    for level in levels:
        table = _merge(level, parts[level.index])
        keep = table.values >= noise_floor(level, stds[level.index], spec.floor)
        tables.append(LevelValues(level, table.ids[keep], table.values[keep]))
    return tables


def noise_floor(level: Level, std: float, floor: float) -> float:
    """The released value below which a ball of ``level`` counts as empty (post-processing).

    A whole-level release lists every ball, and an empty one shows pure noise N(0, std^2); over a level
    of N balls the largest is about std sqrt(2 ln N), and weighted by r^z it would beat the real balls of
    finer levels.  An empty ball clears this floor with probability ``floor`` / N: about ``floor`` empty
    balls per level get through.  ``floor`` = 0, or exact values (std 0): no floor."""
    if floor <= 0.0 or std <= 0.0:
        return 0.0
    log_p = math.log(floor) - level.log_size
    return std * _gaussian_isf(math.exp(min(log_p, math.log(0.5))))


def exact_values(access, levels: list[Level], project, z: int) -> list[LevelValues]:
    """Exact ball values (inside a central mechanism only)."""
    tables = []
    for level in levels:
        parts = []
        for residue in level.sublattices():
            ids, sums = access.sums(_level_query("exact", level, residue, project, z))
            parts.append((ids, sums[:, 0]))
        tables.append(_merge(level, parts))
    return tables


class _Greedy:
    """Algorithm 1 over value tables, with a pluggable choice rule."""

    def __init__(self, tables: list[LevelValues], forbid: float, z: int, min_forbid: float | None = None):
        self.tables, self.forbid, self.z = tables, forbid, z
        self.min_forbid = forbid if min_forbid is None else min_forbid
        self.chosen: list[np.ndarray] = []
        self._alive = [np.ones(t.ids.size, dtype=bool) for t in tables]  # listed balls not yet forbidden
        self._index = [t.level.decode(t.ids) for t in tables]
        self._centers = [t.level.centers(m) for t, m in zip(tables, self._index)]  # of the listed balls

    def relax(self) -> bool:
        """Halve the forbidding factor, if that keeps it at least ``min_forbid``, and recompute which
        listed balls are available; False when it cannot be halved."""
        if self.forbid / 2.0 < self.min_forbid:
            return False
        self.forbid /= 2.0
        chosen, self.chosen = self.chosen, []
        self._alive = [np.ones(t.ids.size, dtype=bool) for t in self.tables]
        for center in chosen:
            self.choose(center)
        return True

    def available(self, level: Level, centers: np.ndarray) -> np.ndarray:
        ok = np.ones(centers.shape[0], dtype=bool)
        for c in self.chosen:
            ok &= np.linalg.norm(centers - c, axis=1) > self.forbid * level.radius
        return ok

    def choose(self, center: np.ndarray) -> None:
        """Add a center and forbid, on every level, the listed balls within forbid * r of it (the listed balls
        are tested, not every ball of the net within reach: a fine level's net holds thousands there)."""
        self.chosen.append(center)
        for table, alive, centers in zip(self.tables, self._alive, self._centers):
            alive[np.linalg.norm(centers - center, axis=1) <= self.forbid * table.level.radius] = False

    def listed_available(self, i: int):
        keep = self._alive[i] & (self.tables[i].values > 0)
        return self._index[i][keep], self.tables[i].values[keep]

    def children(self, i: int, m: np.ndarray):
        """The available balls of level i + 1 within r_i of ball m of level i, and their values (0 unlisted)."""
        parent = self.tables[i].level
        child = self.tables[i + 1]
        cm = child.level.near(parent.centers(m[None])[0], parent.radius)
        cm = cm[self.available(child.level, child.level.centers(cm))]
        return cm, child.lookup(child.level.encode(cm))

    def listed_children(self, i: int, m: np.ndarray):
        """:meth:`children` whose value is positive -- the only ones the argmax rule can pick, and it picks the
        same one (the first of the largest, in id order) -- found among the listed balls, not the net: the
        same distance tests, without enumerating the thousands of balls within reach."""
        center = self.tables[i].level.centers(m[None])[0]
        near = np.linalg.norm(self._centers[i + 1] - center, axis=1) <= self.tables[i].level.radius
        keep = near & self._alive[i + 1] & (self.tables[i + 1].values > 0)
        return self._index[i + 1][keep], self.tables[i + 1].values[keep]

    def run(self, k: int, head, child, fallback, listed: bool = False) -> np.ndarray:
        """``k`` centers, each from ``head``'s ball descended by ``child``'s picks; ``listed``: ``child`` picks
        only children of positive value (the argmax rule), so they are looked for among the listed balls."""
        children = self.listed_children if listed else self.children
        for _ in range(k):
            start = head(self)
            while start is None and self.relax():  # every listed ball is forbidden: pack the centers closer
                start = head(self)
            if start is None:
                self.choose(fallback())
                continue
            i, m = start
            while i + 1 < len(self.tables):
                cm, values = children(i, m)
                pick = child(cm, values)
                if pick is None:
                    break
                i, m = i + 1, cm[pick]
            self.choose(self.tables[i].level.centers(m[None])[0])
        return np.array(self.chosen)


def _argmax_head(greedy: _Greedy):
    best = None
    for i in range(len(greedy.tables)):
        m, values = greedy.listed_available(i)
        if values.size:
            j = int(np.argmax(values))
            score = values[j] * greedy.tables[i].level.radius ** greedy.z
            if best is None or score > best[0]:
                best = (score, i, m[j])
    return None if best is None else best[1:]


def _argmax_child(cm: np.ndarray, values: np.ndarray):
    return int(np.argmax(values)) if values.size and values.max() > 0 else None


def _exponential_rules(eps_draw: float, noise: NoiseSource):
    def head(greedy: _Greedy):
        top = greedy.tables[0].level.radius
        scores, where, log_empty = [], [], []
        for i, table in enumerate(greedy.tables):
            m, values = greedy.listed_available(i)
            scores.append(values * (table.level.radius / top) ** greedy.z)
            where += [(i, row) for row in m]
            log_empty.append(_log_available_empty(greedy, i))
        log_empty = np.array(log_empty)
        finite = log_empty[np.isfinite(log_empty)]
        log_implicit = float(np.logaddexp.reduce(finite)) if finite.size else None
        pick = sample_exponential(np.concatenate(scores), eps_draw, 1.0, noise, log_implicit)
        if pick is not None:
            return where[pick]
        # An empty ball was drawn: its level in proportion to the level's empty balls (a Gumbel-max
        # draw on their logs, OpenDP's in secure mode), then a uniform one of them.
        levels_with = np.flatnonzero(np.isfinite(log_empty))
        i = int(levels_with[noise.gumbel_argmax(log_empty[levels_with], 1.0)])
        return i, _uniform_empty(greedy, i, noise)

    def child(cm: np.ndarray, values: np.ndarray):
        if values.size == 0:
            return None
        return sample_exponential(values, eps_draw, 1.0, noise)

    return head, child


def _forbidden_ids(greedy: _Greedy, i: int) -> np.ndarray:
    level = greedy.tables[i].level
    parts = [level.encode(level.near(c, greedy.forbid * level.radius)) for c in greedy.chosen]
    return np.unique(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.int64)


def _log_available_empty(greedy: _Greedy, i: int) -> float:
    table = greedy.tables[i]
    taken = np.union1d(table.ids[table.values > 0], _forbidden_ids(greedy, i)).size
    total = table.level.log_size
    if taken == 0:
        return total
    fraction = math.exp(math.log(taken) - total)
    return -math.inf if fraction >= 1.0 else total + math.log1p(-fraction)


def _uniform_empty(greedy: _Greedy, i: int, noise: NoiseSource) -> np.ndarray:
    """A uniform available ball of level i with value 0 (rejection; the selection already happened)."""
    table = greedy.tables[i]
    level = table.level
    taken = set(np.union1d(table.ids[table.values > 0], _forbidden_ids(greedy, i)).tolist())
    while True:
        m = level.low + np.array([noise.uniform_index(int(r)) for r in level.radix], dtype=np.int64)
        if int(level.encode(m[None])[0]) not in taken:
            return m


@dataclass(frozen=True)
class LevelSelection(Reduction):
    """Seed 000's per-level selection (Lemma 5.1) as a reduction: up to ``k`` of a level's released balls,
    each the largest value still available, a ball being unavailable within ``apart`` * 2^(top - height)
    * r of one already kept.  The leaves (height 0) keep balls farthest apart and each merge round halves
    the distance, down to ``apart`` * r at the root, so a ball kept by a parent forbids at most one of a
    child's (Claim F.3).  Values below the level's noise floor (``noise_floor``) are never kept.

    Post-processing of the level's release; picklable, it runs on Spark's executors."""

    level: Level
    k: int
    apart: float
    floor: float

    def select(self, released, height: int, top: int):
        values = released["value"][:, 0]
        ids = released.ids
        if ids is None:  # a dense level: every ball of its one sub-lattice, in bucket order
            ids = self.level.encode(self.level.sublattice_balls(self.level.sublattices()[0]))
        std = float(np.max(released.std.get("value", 0.0)))
        # As the sequential greedy's tables: at or above the floor (level_tables), and positive (listed_available).
        keep = np.flatnonzero((values >= noise_floor(self.level, std, self.floor)) & (values > 0))
        centers = self.level.centers(self.level.decode(ids[keep]))
        apart = self.apart * 2.0 ** (top - height) * self.level.radius
        open_values = values[keep].copy()
        chosen = []
        while len(chosen) < self.k and open_values.size and np.isfinite(open_values.max()):
            j = int(np.argmax(open_values))
            chosen.append(j)
            near = np.einsum("ij,ij->i", centers - centers[j], centers - centers[j]) <= apart * apart
            open_values[near] = -np.inf
        chosen = keep[np.array(chosen, dtype=np.int64)]
        return type(released)({"value": values[chosen][:, None]}, dict(released.std), ids[chosen])


def mpc_tables(plan: Plan, levels: list[Level], project, spec: GreedySpec, run: int) -> list[LevelValues]:
    """Seed 000's MPC greedy (Section 5.2): every level's balls released once (a sparse level: its non-empty
    balls, by partition selection) and reduced by :class:`LevelSelection` where they live -- merge-and-reduce
    on Spark -- so at most ``spec.k`` balls per level reach the driver.  Returns them as value tables: a
    summary of at most k levels balls, on which the sequential greedy runs (post-processing).  Costs the
    same parts as the sequential greedy's histogram selection."""
    requests = []
    for level in levels:
        dense = spec.dense[level.index]
        query = _level_query(f"greedy level {level.index}", level, level.sublattices()[0], project, spec.z, dense)
        selection = LevelSelection(level, spec.k, MPC_APART, spec.floor)
        requests.append((query, spec.level_part(run, level.index), 1.0, selection))
    kept = plan.release_reduced(requests)
    return [_merge(level, [(r.ids, r["value"][:, 0])]) for level, r in zip(levels, kept)]


def greedy_levels(spec: GreedySpec, d: int, rng: np.random.Generator) -> list[Level]:
    """The public nets of balls the greedy searches, in the (projected) working space."""
    dim = spec.projection_dim or d
    top = 1.0 if spec.projection_dim else math.sqrt(dim)
    return make_levels(top, spec.levels, dim, rng, spec.stride)


def uniform_fallback(spec: GreedySpec, d: int, rng: np.random.Generator):
    """The data-independent center used when no listed ball is left: uniform over the working box."""
    dim = spec.projection_dim or d

    def fallback():
        return rng.uniform(-1.0, 1.0, size=dim) / (math.sqrt(dim) if spec.projection_dim else 1.0)

    return fallback


def histogram_centers(spec: GreedySpec, tables: list[LevelValues], fallback) -> np.ndarray:
    """The greedy's ``spec.k`` centers chosen by argmax over released value tables (post-processing)."""
    greedy = _Greedy(tables, spec.forbid, spec.z, spec.min_forbid)
    return greedy.run(spec.k, _argmax_head, _argmax_child, fallback, listed=True)


@dataclass
class GreedyRound:
    """One histogram greedy run's public geometry and its queries, fixed before any answer (:func:`greedy_round`).

    ``requests`` -- (query, part, fraction) -- are every level's sub-lattice releases (``owners`` says which
    level and sub-lattice each reads) and, without adaptive rounds, the lifting over the public ``grid``: all
    asked at once, one pass over the rows; in the local model the one round every user answers, under
    continual observation the queries the counters answer at every step."""

    spec: GreedySpec
    n_features: int
    project: Callable
    levels: list[Level]
    owners: list
    requests: list
    grid: LiftGrid | None


def greedy_round(spec: GreedySpec, d: int, rng: np.random.Generator, run: int = 0) -> GreedyRound:
    """The run's public geometry drawn from ``rng`` (its projection, then its levels) and its queries.  The
    exponential and MPC selections ask their own (``select_and_lift``): their rounds list none."""
    project = projection_for(spec, d, rng)
    levels = greedy_levels(spec, d, rng)
    if spec.selection != "histogram" or spec.mpc:
        return GreedyRound(spec, d, project, levels, [], [], None)
    requests, owners = level_requests(levels, project, spec, run)
    grid = None
    if not spec.adaptive_lifting:
        grid = LiftGrid.for_dim(spec.projection_dim or d)
        requests.append((grid.query(project, d, spec.projection_dim is not None), spec.lift_part(run), 1.0))
    return GreedyRound(spec, d, project, levels, owners, requests, grid)


def greedy_centers(round_: GreedyRound, answers: list, rng: np.random.Generator) -> tuple[np.ndarray, "Lifted | None"]:
    """Post-processing of the answers to ``round_.requests`` (in their order): the greedy's ``spec.k`` centers
    in the working space, and their lifting when the round asked it (else None: lift them, :func:`lift`).
    ``rng`` draws the uniform fallback center, when no listed ball is left."""
    spec = round_.spec
    tables = level_tables(round_.levels, round_.owners, answers[: len(round_.owners)], spec)
    centers = histogram_centers(spec, tables, uniform_fallback(spec, round_.n_features, rng))
    if round_.grid is None:
        return centers, None
    return centers, round_.grid.lifted(answers[len(round_.owners)], centers, spec.projection_dim is not None)


def select_and_lift(
    ctx: FitContext,
    plan: Plan,
    spec: GreedySpec,
    rng: np.random.Generator,
    run: int,
    reach: float,
    levels: Plan | None = None,
) -> tuple[np.ndarray, "Lifted"]:
    """One private greedy run through ``plan``: its centers (in the projected space) and their lifting; the
    levels' histograms through ``levels`` where given (the plan on a sample), the lifting through ``plan``.

    With adaptive rounds the lifting is a second release over the chosen centers' cells; without (the
    local model) it is asked in the selection's round, over the cells of a public grid, and the chosen
    centers' cells are put together from them afterwards (post-processing)."""
    d = ctx.n_features
    round_ = greedy_round(spec, d, rng, run)
    if spec.selection == "exponential":
        fallback = uniform_fallback(spec, d, rng)

        def mechanism(access):
            head, child = _exponential_rules(spec.eps_draw, access.noise)
            tables = exact_values(access, round_.levels, round_.project, spec.z)
            return _Greedy(tables, spec.forbid, spec.z, spec.min_forbid).run(spec.k, head, child, fallback)

        centers, lifted = plan.run_exact([spec.selection_part(run)], mechanism), None
    elif spec.mpc:
        tables = mpc_tables(levels or plan, round_.levels, round_.project, spec, run)
        centers, lifted = histogram_centers(spec, tables, uniform_fallback(spec, d, rng)), None
    else:  # (without adaptive rounds the requests hold the lifting too: no sampled ``levels`` is given then)
        centers, lifted = greedy_centers(round_, (levels or plan).release_many(round_.requests), rng)
    if lifted is None:
        lifted = lift(plan, spec.lift_part(run), round_.project, centers, spec, d, reach)
    return centers, lifted


# A lifting fixed in advance (the local model) sums a public grid's cells into the chosen centers' regions.
# A frequency oracle's noise per cell does not shrink with the cell, so large cells beat small ones
# (measured on 2-d blobs at eps = 2: 16 cells per axis gave a median NICV 0.026 x one center, 64 per
# axis 0.13) -- but the cells must still tell clusters apart, so the resolution per axis is kept in every
# dimension (4 per axis in 4-d put all the data in one cell).  A cell takes part when its noisy size is
# CELL_Z standard deviations above zero.
LIFT_PER_AXIS = 16
LIFT_MAX_CELLS = 2**20
CELL_Z = 3.0


@dataclass(frozen=True)
class LiftGrid:
    """A public grid over the working space's box [-1, 1]^dim: the buckets of a lifting fixed in advance."""

    dim: int
    per_axis: int

    @classmethod
    def for_dim(cls, dim: int) -> "LiftGrid":
        return cls(dim, max(2, min(LIFT_PER_AXIS, int(math.floor(LIFT_MAX_CELLS ** (1.0 / dim) + 1e-9)))))

    @property
    def side(self) -> float:
        return 2.0 / self.per_axis

    def cell_of(self, points: np.ndarray) -> np.ndarray:
        index = np.clip(np.floor((points + 1.0) / self.side).astype(np.int64), 0, self.per_axis - 1)
        return np.ravel_multi_index(tuple(index.T), (self.per_axis,) * self.dim)

    def centers(self) -> np.ndarray:
        axis = -1.0 + self.side * (np.arange(self.per_axis) + 0.5)
        return np.stack(np.meshgrid(*[axis] * self.dim, indexing="ij"), -1).reshape(-1, self.dim)

    def query(self, project, d: int, projected: bool) -> SumQuery:
        """Per cell of the (projected) points: [x, |x|^2, size] in the original space when projected; else
        the size alone (the cell's center stands for its rows, within half a cell)."""
        if projected:
            return SumQuery(
                "greedy: lifting (grid)",
                self.per_axis**self.dim,
                _lift_blocks(d),
                lambda chunk: (self.cell_of(project(chunk)), moment_values(chunk)),
            )
        return SumQuery(
            "greedy: lifting (grid)",
            self.per_axis**self.dim,
            (Block("count", 1, 1.0, count=True),),
            lambda chunk: (self.cell_of(chunk), np.ones((chunk.shape[0], 1))),
        )

    def lifted(self, released, centers: np.ndarray, projected: bool) -> "Lifted":
        """The chosen centers' cells' moments, put together from the grid cells nearest each (post-processing).

        Only cells whose noisy size clears ``CELL_Z`` times its noise (the release's error model) take part:
        an empty cell's estimate is pure noise, and a center's region holds many of them."""
        cells = self.centers()
        counts = released["count"][:, 0]
        count_std = float(np.max(released.std.get("count", 0.0)))
        keep = counts > CELL_Z * count_std
        if projected:
            sums, sumsq = released["sum"], released["sumsq"][:, 0]
        else:  # a cell's rows, stood for by its center: their spread within the cell is side^2 / 12 per axis
            sums = counts[:, None] * cells
            sumsq = counts * ((cells * cells).sum(1) + self.dim * self.side**2 / 12.0)
        owner, _ = nearest_center(cells[keep], centers)
        k = centers.shape[0]
        sums, sumsq, counts = sums[keep], sumsq[keep], counts[keep]
        per = np.stack([np.bincount(owner, weights=sums[:, j], minlength=k) for j in range(sums.shape[1])], 1)
        cells_per = np.bincount(owner, minlength=k)
        return Lifted(
            per,
            np.bincount(owner, weights=sumsq, minlength=k),
            np.bincount(owner, weights=counts, minlength=k),
            count_std * np.sqrt(cells_per),  # a region's size: the sum of its cells' independent noises
            # the sums' noise when released (projected); else the sizes' noise is all there is (an estimate)
            sum_std=float(np.max(released.std.get("sum", 0.0))) * np.sqrt(cells_per) if projected else 0.0,
            sumsq_std=float(np.max(released.std.get("sumsq", 0.0))) * np.sqrt(cells_per) if projected else 0.0,
        )


@dataclass
class Lifted:
    """One Gaussian release over the cells of projected centers: per-cell noisy sum, sum of squares, size
    (and the noise of each size, from the release's error model)."""

    sums: np.ndarray
    sumsq: np.ndarray
    counts: np.ndarray
    count_std: np.ndarray | float = 0.0
    anchors: np.ndarray | None = None  # per cell, where its mean stays when its size is noise (None: the origin)
    sum_std: np.ndarray | float = 0.0  # the noise of each coordinate of (sum - size anchor), per cell or for all
    sumsq_std: np.ndarray | float = 0.0  # the noise of (sumsq - 2 anchor.sum + size |anchor|^2), the spread

    @property
    def weights(self) -> np.ndarray:
        """The sizes that are significant (above what their noise reaches over all the cells), else 0."""
        floor = significant(1.0, self.counts.size) * np.asarray(self.count_std)
        return np.where(self.counts > floor, self.counts, 0.0)

    @property
    def means(self) -> np.ndarray:
        """Each cell's mean, anchor + (sum - size anchor) / max(size, 3 count_std), clipped to the box.

        A cell whose noisy size is within the noise (an empty cell, or a few rows) would otherwise divide
        a noisy sum by a number near 1 and land on the box's edge; with the floor on the divisor it stays
        near its anchor.  Cells well above the noise get their plain mean (post-processing either way)."""
        anchors = np.zeros_like(self.sums) if self.anchors is None else self.anchors
        floor = np.maximum(1.0, MEAN_FLOOR * np.asarray(self.count_std, dtype=np.float64))
        divisor = np.maximum(self.counts, floor)
        means = anchors + (self.sums - self.counts[:, None] * anchors) / divisor[:, None]
        return np.clip(means, -1.0, 1.0)

    def sizes_at(self, centers: np.ndarray) -> np.ndarray:
        """Noisy cluster sizes of ``centers``: every cell's noisy size credited to its nearest center."""
        nearest, _ = nearest_center(self.means, centers)
        return np.bincount(nearest, weights=self.counts, minlength=centers.shape[0])

    def cost(self, assigned: np.ndarray, significant: bool = False) -> float:
        """Estimated cost when every cell's rows go to ``assigned[c]`` (Lemma 2.5; cells of size <= 0 skipped,
        and with ``significant`` the cells whose size is within its noise, :attr:`weights`, too)."""
        use = self._used(significant)
        m = assigned[use]
        terms = self.sumsq[use] - 2.0 * np.einsum("ij,ij->i", self.sums[use], m) + self.counts[use] * (m * m).sum(1)
        return float(np.sum(terms))

    def _used(self, significant: bool) -> np.ndarray:
        return self.weights > 0 if significant else self.counts > 0

    def cost_std(self, assigned: np.ndarray, significant: bool = False) -> float:
        """The standard deviation of :meth:`cost`'s noise, from the release's error model (public).

        A cell's term is spread + 2 (sum - size a).(a - m) + size |a - m|^2 about its anchor a (the origin
        without one), so its noise has variance std_spread^2 + 4 std_sum^2 |a - m|^2 + std_size^2 |a - m|^4;
        the cells' noises are independent.  The terms every k shares (the spread) shift the whole curve."""
        use = self._used(significant)
        anchors = np.zeros_like(self.sums) if self.anchors is None else self.anchors
        gap = ((anchors[use] - assigned[use]) ** 2).sum(1)

        def per_cell(std):
            std = np.asarray(std, dtype=np.float64)
            return std[use] if std.ndim else np.full(gap.shape, float(std))

        var = per_cell(self.sumsq_std) ** 2 + 4.0 * per_cell(self.sum_std) ** 2 * gap
        var = var + per_cell(self.count_std) ** 2 * gap**2
        return float(np.sqrt(np.sum(var)))


def lift(plan: Plan, part: str, project, centers: np.ndarray, spec: GreedySpec, d: int, reach: float) -> Lifted:
    """The cells' noisy sums, sums of squared norms and sizes, in the original space (all of ``part``).

    With a projection: the projected Voronoi cells of ``centers``, values [x, |x|^2, 1] at bounds
    sqrt(d), d, 1.  Without one, the centers already live in the original space, and the rows within
    ``reach`` of their nearest center give [x - c, |x - c|^2, 1] at bounds reach, reach^2, 1 (a
    FastLloyd-style local step: far less noise); the sums are turned back into the same moments.
    """
    if spec.projection_dim is not None:
        query = projected_cells_query("greedy: lifting", project, centers, _lift_blocks(d), moment_values)
        out = plan.release(query, part)
        std = out.std
        return Lifted(
            out["sum"],
            out["sumsq"][:, 0],
            out["count"][:, 0],
            std.get("count", 0.0),
            sum_std=std.get("sum", 0.0),
            sumsq_std=std.get("sumsq", 0.0),
        )

    def contribution(chunk):
        nearest, sq = nearest_center(chunk, centers)
        values = np.empty((chunk.shape[0], d + 2))
        values[:, :d] = chunk - centers[nearest]
        values[:, d] = sq
        values[:, d + 1] = 1.0
        return np.where(sq < reach * reach, nearest, -1), values

    query = SumQuery("greedy: local lifting", centers.shape[0], _lift_blocks(d, reach), contribution)
    out = plan.release(query, part)
    counts, relative, spread = out["count"][:, 0], out["sum"], out["sumsq"][:, 0]
    sums = relative + counts[:, None] * centers  # sum of x = sum of (x - c) + size c
    sumsq = spread + 2.0 * np.einsum("ij,ij->i", centers, relative) + counts * (centers * centers).sum(1)
    std = out.std
    return Lifted(
        sums,
        sumsq,
        counts,
        std.get("count", 0.0),
        centers,
        sum_std=std.get("sum", 0.0),
        sumsq_std=std.get("sumsq", 0.0),
    )


# The elbow (elbow_curve): the smallest k after which no larger k improves the (monotone) curve by more than
# ELBOW_Z noise standard deviations of the cost estimate, or than ELBOW_SHARE of the whole curve's fall.
# Measured on held-out seeds (docs/algorithms.md, "The elbow curve"); tuned on others.
ELBOW_Z = 3.0
ELBOW_SHARE = 0.01


def monotone_costs(costs: np.ndarray) -> np.ndarray:
    """The released costs made a valid k-means cost curve: the closest (least squares) curve that is
    non-negative and non-increasing in k (isotonic regression).  Post-processing only.

    A true k-means cost is >= 0 and never grows with k (k + 1 optimal centers do at least as well as k);
    the noisy estimates need neither, and their dips below zero say nothing about the data."""
    from sklearn.isotonic import IsotonicRegression

    costs = np.asarray(costs, dtype=np.float64)
    if costs.size == 0:
        return costs.copy()
    fit = IsotonicRegression(increasing=False, y_min=0.0)
    return fit.fit_transform(np.arange(costs.size, dtype=np.float64), costs)


def settled_elbow(curve: np.ndarray, stds, z: float = ELBOW_Z, share: float = ELBOW_SHARE) -> int:
    """The k (1-based) after which the curve has settled: the smallest k whose cost is within
    max(``z`` std_k, ``share`` x (cost_1 - cost_k_max)) of the last cost.  ``curve`` is a valid cost curve,
    non-negative and non-increasing: the estimates' :func:`monotone_costs`, made once by the caller.

    ``stds`` is each cost's noise standard deviation (public: the release's error model); a fall past k
    that the noise could make, or that is a sliver of the curve's whole fall, does not move the elbow.
    Shifts of the whole curve (a noise every k shares) do not move it either, unlike a kink on a log scale.
    """
    y = np.asarray(curve, dtype=np.float64)
    if y.size == 0:
        return 0
    if np.any(y < 0) or np.any(np.diff(y) > 0):
        raise ValueError("settled_elbow reads a valid cost curve: pass monotone_costs(estimates), not the estimates")
    stds = np.broadcast_to(np.asarray(stds, dtype=np.float64), y.shape)
    tail = y[-1]
    margin = np.maximum(z * stds, share * (y[0] - tail))
    return int(np.flatnonzero(y - tail <= margin)[0]) + 1


def _solution(lifted: Lifted, k: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(k centers, each cell's center): the lifted means clustered into k, weighted by their noisy sizes
    (Lemma C.1), each cell sent whole to its nearest center (Lemma 2.5).  Post-processing only."""
    means = lifted.means
    centers = means if means.shape[0] == k else weighted_kmeans(means, lifted.weights, k, rng)
    nearest, _ = nearest_center(means, centers)
    return centers, centers[nearest]


def solution_cost(
    lifted: Lifted, k: int, rng: np.random.Generator, significant: bool = False
) -> tuple[np.ndarray, float]:
    """(k centers, their estimated cost) of :func:`_solution`.  With ``significant`` the cost counts only the
    cells whose size clears its noise (those the centers are fit to)."""
    centers, assigned = _solution(lifted, k, rng)
    return centers, lifted.cost(assigned, significant)


def solution_cost_and_std(
    lifted: Lifted, k: int, rng: np.random.Generator, significant: bool = False
) -> tuple[np.ndarray, float, float]:
    """:func:`solution_cost` and its estimate's noise standard deviation (public), from one assignment."""
    centers, assigned = _solution(lifted, k, rng)
    return centers, lifted.cost(assigned, significant), lifted.cost_std(assigned, significant)


def projection_for(spec: GreedySpec, d: int, rng: np.random.Generator):
    if spec.projection_dim is None:
        return lambda rows: rows
    return ChunkMemo(BallProjection.draw(d, spec.projection_dim, rng))  # one projection per chunk for all levels


SAMPLE_SIGNAL = 20_000.0  # n eps / k of the rows the greedy's levels read: more rows are sampled down to it


def sample_rate(epsilon: float, k: int, n: float | None, oracle: Oracle) -> float:
    """The Poisson rate of the rows the greedy's levels read: ``SAMPLE_SIGNAL`` k / (epsilon n) where that is below
    1, n is known (public or a noisy count) and ``oracle`` can sample; else 1.  A function of public values.

    Why: the levels find the clusters, which takes a signal n epsilon / k, not more (``auto`` uses the greedy
    from 100 in the plane and its start from 10,000 above); beyond it more rows cost time and, where the
    rows are distributed, a shuffle of the non-empty balls that grows with n.  Each release on the sample
    costs what it costs on all rows (``Plan.on_sample``: no amplification is claimed)."""
    if n is None:
        return 1.0
    rate = SAMPLE_SIGNAL * k / (epsilon * n)
    return rate if rate < 1.0 and SAMPLED in oracle.capabilities else 1.0


@register("greedy", spec=lambda ctx: greedy_spec(ctx).plan_spec)
def greedy(ctx: FitContext) -> FitResult:
    """The private greedy; see the module docstring for the steps and the privacy argument.  With a public n its
    levels read a Poisson sample of the rows (:func:`sample_rate`); the lifting reads them all."""
    spec = greedy_spec(ctx)
    plan = spec.open(ctx.oracle)
    rate = 1.0
    if ctx.budget is not None and spec.selection == "histogram" and spec.adaptive_lifting:
        rate = sample_rate(ctx.budget.epsilon, ctx.n_clusters, ctx.public_n, plan.oracle)
    levels = plan.on_sample(rate, ctx.randomness.secret()) if rate < 1.0 else plan
    result = run_greedy(ctx, spec, plan, levels)
    result.info["levels_sample_rate"] = rate
    return result


def run_greedy(ctx: FitContext, spec: GreedySpec, plan: Plan, levels: Plan | None = None) -> FitResult:
    """The greedy's releases through an already opened ``plan`` (``spec.open``), and its k centers in the unit box;
    ``levels``: the same plan answered on a sample (``Plan.on_sample``) for the levels' releases, the lifting's
    through ``plan``.

    For callers that must check this plan together with others against the ledger before anything is
    released (FastLloyd's greedy start)."""
    d = ctx.n_features
    rng = ctx.randomness.geometry()
    best, best_cost, sizes, estimates = None, math.inf, None, []
    for run in range(spec.restarts):
        _, lifted = select_and_lift(ctx, plan, spec, rng, run, fastlloyd_eta(d, ctx.n_clusters), levels or plan)
        final, cost = solution_cost(lifted, ctx.n_clusters, rng)
        estimates.append(cost)
        if best is None or cost < best_cost:
            best, best_cost, sizes = final, cost, lifted.sizes_at(final)
        if ctx.callback is not None:
            ctx.callback(run + 1, spec.restarts)
    info = {"estimated_costs": estimates, "selection": spec.selection, "sizes": sizes, "mpc": spec.mpc}
    return FitResult(best, spec.restarts, None, info)

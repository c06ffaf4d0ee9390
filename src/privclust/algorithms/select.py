"""Private selection among candidate algorithms: run each in its share of one pool, release their noisy
costs, keep the cheapest -- ``auto``'s ``algorithm_params={"selection": "private"}``.

The plan (one :class:`~privclust.queries.plan.Spec`, a value fixed before any row is read): the T
candidates' own plans, each renamed (``Spec.prefixed``) and at ``(1 - s) / T`` of the pool, and the
selection's one part at ``s`` = ``SELECTION_SHARE``, joined by ``shared_pool``.  It is checked against the
capabilities and the ledger as a whole -- ``auto`` checks it with its count stage before the count is
released -- and opened once; each candidate then runs unmodified through a
:class:`~privclust.queries.plan.Portion` of it, drawing only from its own parts.

The selection (Lemma 2.5 of Dupré la Tour, Henzinger & Saulpic 2024 estimates a partition's cost from noisy
sums; here the cost of each candidate's centers is released directly): one release of one bucket, the sum
over the rows of the vector

    u(x) = (c_1(x), ..., c_T(x)) - mean_t c_t(x),   c_t(x) = min(||x - C_t||^2, R^2),

with C_t the candidate's centers (in the unit box) and R^2 = ``CLIP_PER_FEATURE`` d.  Each c_t lies in
[0, R^2], and a vector with coordinates in an interval of length R^2 deviates from its mean by at most
sqrt(T) R^2 / 2 in l2 (the spread is largest with half of them at each end), so adding or removing a row
moves the released sum by at most sqrt(T) R^2 / 2: the oracle clips to that bound and adds Gaussian noise
at the selection part's mu.  Centering keeps the differences c_t - c_u, which is all the choice needs, at
half the sensitivity of the costs themselves.  The choice -- the smallest noisy value -- is post-processing,
and the chosen candidate's centers are post-processing of its own releases.

Privacy: every release is Gaussian and the parts share one pool, so in GDP the whole is mu-GDP with mu the
pool's -- the candidates' parts take (1 - s) of mu^2, the selection s -- and with any candidate's
partition-selection delta (none for today's candidates, FastLloyd's two starts) by basic composition the fit
is (epsilon, delta)-DP, exactly what one candidate alone would spend.  The candidates' releases are all charged (they
were all made); the ledger lists them under the candidate's name.

Each candidate plans with a nominal budget that its public heuristics read (FastLloyd's sample rate, the
greedy start's split of delta): the (epsilon, delta w) its share w of the pool's mu is worth; its noise is
what the opened plan allotted its parts.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ..privacy.budget import Budget
from ..privacy.gdp import gdp_epsilon, gdp_mu
from ..queries.base import Block, SumQuery
from ..queries.plan import Part, Portion, Spec, shared_pool
from ..queries.voronoi import nearest_center
from .base import ALGORITHMS, FitContext, FitResult, algorithm_spec

__all__ = [
    "SELECTION_SHARE",
    "CLIP_PER_FEATURE",
    "SELECTION_PART",
    "SELECTION_NOISE",
    "selection_query",
    "comparison_noise",
    "Selection",
]

SELECTION_SHARE = 0.1  # the selection's share of the pool's mu^2 (measured: docs/choosing.md)
CLIP_PER_FEATURE = 1.0  # a row's squared distance counts up to this times d (unit box: at most 4 d)
SELECTION_PART = "selection: the candidates' costs"
SELECTION_NOISE = 0.01  # the comparison's noise (per row, per feature) below which it is worth its shares: measured


def comparison_noise(n: float, mu: float, candidates: int) -> float:
    """The standard deviation of the comparison's noise on one candidate's centred cost, per row and per
    feature, sqrt(T) R^2 / 2 / (sqrt(s) mu) / (n d), from public values (n public or already released, the
    pool's mu); a difference of two carries sqrt(2) times it.  ``SELECTION_NOISE`` was measured on this value."""
    return math.sqrt(candidates) * CLIP_PER_FEATURE / 2.0 / (math.sqrt(SELECTION_SHARE) * mu * n)


def selection_query(centers: list[np.ndarray], clip: float) -> SumQuery:
    """One bucket: the sum over the rows of each candidate's clipped cost minus the row's mean over the
    candidates (see the module docstring); l2 bound sqrt(T) clip / 2."""
    stacked = [np.asarray(c, dtype=float) for c in centers]
    bound = math.sqrt(len(stacked)) * clip / 2.0

    def contribution(chunk: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        sq_norms = np.einsum("ij,ij->i", chunk, chunk)
        costs = np.stack([np.minimum(nearest_center(chunk, c, sq_norms)[1], clip) for c in stacked], axis=1)
        return np.zeros(chunk.shape[0], dtype=np.intp), costs - costs.mean(axis=1, keepdims=True)

    return SumQuery("selection", 1, (Block("cost", len(stacked), bound),), contribution)


@dataclasses.dataclass(frozen=True)
class Selection:
    """The candidates (name -> (algorithm, algorithm_params)) and their one plan, a value from public
    parameters: ``contexts`` are what each candidate plans and runs with, ``spec`` the whole."""

    names: tuple[str, ...]
    algorithms: tuple[tuple[str, dict | None], ...]
    contexts: tuple[FitContext, ...]
    specs: tuple[Spec, ...]
    spec: Spec

    @classmethod
    def of(cls, ctx: FitContext, candidates: dict[str, tuple[str, dict | None]]) -> "Selection":
        """The plan of selecting among ``candidates`` in ``ctx``'s pool; ``ctx`` must know n (a public or an
        already released count: a candidate counts no rows of its own)."""
        if ctx.budget is None or ctx.public_n is None:
            raise ValueError("a private selection needs a budget and a known row count")
        if ctx.budget.delta <= 0:
            raise ValueError(
                "a private choice runs Gaussian candidates in one pool, which needs delta > 0; use a pure "
                "epsilon-DP algorithm (e.g. algorithm='sulloyd') for delta = 0"
            )
        w = (1.0 - SELECTION_SHARE) / len(candidates)
        budget = ctx.budget
        nominal = Budget(
            gdp_epsilon(math.sqrt(w) * gdp_mu(budget.epsilon, budget.delta), budget.delta * w), budget.delta * w
        )
        contexts, specs = [], []
        for algorithm, params in candidates.values():
            own = dataclasses.replace(ctx, budget=nominal, options={**ctx.options, "params": params}, callback=None)
            contexts.append(own)
            specs.append(algorithm_spec(algorithm, own))
        selection = Spec("the selection", (Part(SELECTION_PART, share=1.0),))
        spec = shared_pool(
            "auto (private selection)",
            *((s.prefixed(_prefix(name)), w) for name, s in zip(candidates, specs)),
            (selection, SELECTION_SHARE),
        )
        return cls(tuple(candidates), tuple(candidates.values()), tuple(contexts), tuple(specs), spec)

    def run(self, ctx: FitContext) -> tuple[str, FitResult, dict]:
        """Open the plan (refused before any row is read), run every candidate in its portion, release the
        noisy costs and return (the chosen name, its result, what the choice was and cost)."""
        plan = ctx.oracle.open(self.spec)
        results = []
        for name, (algorithm, _), own, spec in zip(self.names, self.algorithms, self.contexts, self.specs):
            portion = Portion(plan, _prefix(name), spec, own.budget)
            results.append(ALGORITHMS[algorithm](dataclasses.replace(own, oracle=portion)))
        clip = CLIP_PER_FEATURE * ctx.n_features
        released = plan.release(selection_query([r.centers for r in results], clip), SELECTION_PART)
        noisy = released["cost"][0]
        best = int(np.argmin(noisy))  # post-processing of the release
        info = {
            "candidates": list(self.names),
            "noisy_costs": {name: float(v) for name, v in zip(self.names, noisy)},
            "noise_std": float(np.max(released.std["cost"])),
            "clip": clip,
            "share": SELECTION_SHARE,
            "candidate_share": (1.0 - SELECTION_SHARE) / len(self.names),
            "mu": plan.allotment(SELECTION_PART).mu,
            "comparison_noise": comparison_noise(
                ctx.public_n, gdp_mu(ctx.budget.epsilon, ctx.budget.delta), len(self.names)
            ),
        }
        return self.names[best], results[best], info


def _prefix(name: str) -> str:
    return f"{name}: "

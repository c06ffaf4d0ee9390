"""``algorithm="auto"``: the default, which picks the algorithm from public parameters only.

The choice reads n (``public_n`` when it is declared, else a noisy count bought with
``count_fraction`` of the budget), d, k, epsilon and what the privacy model can do -- never the
rows themselves -- so it is post-processing of public values and releases:

* a model that answers one round only (local, shuffle): the greedy, the only algorithm that
  asks all its questions at once;
* d <= 2, k >= ``EVOLVE_MIN_K``, n >= ``EVOLVE_MIN_N`` and n epsilon / k < ``EVOLVE_SIGNAL``:
  ``evolve`` (private evolution by votes whose sensitivity does not grow with the domain, after
  PE-means).  With its soft-thresholded weights and its zoom (algorithms.evolve) it beat FastLloyd
  on most held-out 2-d cells below 100 from k = 4 (docs/choosing.md, "evolve in the plane"); from
  100 on the refined greedy below beat it on 6 of 8 cells with n epsilon / k from 100 to 240
  (docs/benchmarks.md, "The greedy refined in the plane"; it had beaten the plain greedy up to
  300).  At k <= 3, and with 150 rows or fewer, it lost by up to 1.7x, so the greedy or FastLloyd
  stays there;
* d <= 2 and k < ``EVOLVE_MIN_K``: FastLloyd at every signal -- with its rows clipped onto shrinking
  radii it was level with the greedy or ahead of it on every held-out 2-d set with k <= 3;
* d <= 2 and n epsilon / k >= ``GREEDY_SIGNAL`` otherwise: the private greedy, which puts a center on
  every cluster it can see, in ``REFINED_GREEDY_SHARE`` of the budget, its centers then refined by
  ``lloyd.FEW_ROUNDS`` clipped FastLloyd rounds whose radii fall from 0.2 to 0.05 of the diagonal
  over sqrt(k) (``PLANE_REFINED``: the greedy's cells are about a cluster wide, so a few short
  moves are what its centers lack; Birch2 at epsilon 1: 1.10x -> 1.06x k-means++ on the reporting
  seeds);
* d = 3 and n epsilon / k >= ``GREEDY_SIGNAL``: FastLloyd from the greedy's centers
  (``algorithm_params={**AUTO_FASTLLOYD, "init": "greedy"}``, the greedy in ``DEFAULT_INIT_SHARE`` of the
  budget): the greedy finds the clusters, FastLloyd's steps refine them;
* d >= 4 and n epsilon / k >= ``GREEDY_START_SIGNAL``: the same greedy start -- in more
  dimensions the greedy needs far more rows per cluster before its centers are a better start
  than the sphere packing;
* otherwise FastLloyd, which wins on small or high-dimensional data -- below ``MEAN_START_MIN_D``
  dimensions, with k >= ``OVERCLUSTER_MIN_K`` and from n epsilon / k >= ``OVERCLUSTER_SIGNAL``, with
  overclustered first rounds (``OVERCLUSTERED``: ``OVERCLUSTER`` k centers, their cells merged into k
  before the last third of the rounds, ``lloyd.merged_rounds``).  With few, unequal clusters k clipped
  centers settle in a local optimum in about a third of the fits (LSun at epsilon 1: 1.18x k-means++ ->
  1.05x on tuning seeds); below that signal it was mixed (it won on most held-out mixtures from 50 and
  cost House 3% at 61; below 50 the cells are too small for their noise), from d = 32 mixed too, and
  with two clusters there is no such optimum to leave: it was level (docs/benchmarks.md,
  "Overclustered first rounds").

FastLloyd always runs as ``lloyd.AUTO_FASTLLOYD``: rows beyond the radius clipped onto it, radii shrinking
over log2(n epsilon / k) rounds, the start about the rows' noisy mean (algorithms.lloyd).

The rule is fitted on ``privclust bench utility`` (ten data sets, epsilon 0.1 to 1; the tables are
in docs/choosing.md): the greedy's NICV is below FastLloyd's on S1 and Birch2 from n epsilon / k
of about 60-170 on, and above it on every set with d >= 3 but adult, where both are within 10%.
The greedy start wins on House (d = 3) and on every held-out 3-d Gaussian mixture once n epsilon / k
>= 100 (below it, it loses).  In d >= 4 it is at most FastLloyd's NICV on every held-out mixture
(d = 4 to 20, k = 2 to 10, n = 3*10^4 to 10^5) once n epsilon / k >= 10,000, and on Adult; below
that it wins on some sets and loses on others by up to 1.9x, so FastLloyd stays there.
``fit_info_["auto"]`` says which was chosen and why.

A private choice (issue 27; ``algorithm_params={"choice": ...}``).  Where the rule cannot tell the
candidates apart (``selects``: several rounds, d >= 4, n epsilon / k < ``GREEDY_START_SIGNAL``),
``"private"`` runs each of ``SELECTION_CANDIDATES`` (FastLloyd from sphere packing and from the noisy
mean) in its share of one pool and keeps the one with the lowest noisy cost (``algorithms.select``);
``"precise"`` does so only where that comparison's noise, a public function of n and the pool's mu,
is at most ``SELECTION_NOISE`` (``precise``), and keeps the rule elsewhere; ``"rule"`` never does.
The selection's plan is one of the last stage's options, so it is checked with the count before the
count is released.  Measured in docs/choosing.md ("A private choice"), which says why the default is
``DEFAULT_CHOICE``.

Privacy: with a private n, the count is released from its own part of the pool (epsilon f,
delta f with f = ``count_fraction``) and the chosen algorithm runs in the rest (epsilon (1 - f),
delta (1 - f)): a :class:`~privclust.queries.plan.Staged` plan, whose stages each plan in a pool of
their own (``Oracle.stage``).  The whole -- the count with each candidate the rule can reach at these d, k
and epsilon (:func:`reachable`), and their union cover, since the choice is made on the count -- is checked
against the ledger as a value before the count is released, and the rest's stage opens no other plan; it
records the choice at that union (``Oracle.open``: a step "chosen among N plans" tops the chosen plan's cost up
to it), since the chosen plan's own cost is a function of the count and only the union bounds the run whatever
the count.  The shared ledger composes the two stages' spends, which is (epsilon, delta)-DP by basic
composition and reported exactly in GDP.

A public start (the estimator's ``init=<array>``, option ``start``) is a public parameter too:
given one, ``auto`` runs FastLloyd from it (the greedy takes no start), and refuses it where only
the greedy can run (one round of reports).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable

from ..privacy.budget import Budget, composes_within, largest_epsilon
from ..privacy.gdp import gdp_mu
from ..queries.base import count_query
from ..queries.plan import ADAPTIVE, Part, Spec, Stage, Staged
from .base import ALGORITHMS, MAX_ROW_ESTIMATE, ROW_COUNT_PART, FitContext, FitResult, algorithm_params, register
from .evolve import evolve_spec
from .greedy import greedy_spec
from .lloyd import AUTO_FASTLLOYD, DEFAULT_INIT_SHARE, MEAN_START_MIN_D, fastlloyd_spec, greedy_start
from .params import START, OneOf, Param, Params, declare, table
from .select import SELECTION_NOISE, Selection, comparison_noise

__all__ = [
    "auto",
    "choose",
    "selects",
    "GREEDY_SIGNAL",
    "GREEDY_START_SIGNAL",
    "EVOLVE_SIGNAL",
    "EVOLVE_MIN_K",
    "EVOLVE_MIN_N",
    "GREEDY_START",
    "PLANE_REFINED",
    "OVERCLUSTERED",
    "OVERCLUSTER",
    "OVERCLUSTER_SIGNAL",
    "OVERCLUSTER_MIN_K",
    "REFINED_GREEDY_SHARE",
    "CHOICES",
    "MEAN_START",
    "SELECTION_CANDIDATES",
    "selection_candidates",
    "CHOICE_MODES",
    "DEFAULT_CHOICE",
    "precise",
]

GREEDY_SIGNAL = 100.0  # n epsilon / k from which the greedy beats FastLloyd in the plane (and starts it in 3-d)
EVOLVE_SIGNAL = 100.0  # n epsilon / k below which evolve beats the refined greedy and FastLloyd in the plane
EVOLVE_MIN_K = 4  # ... with at least this many clusters (at k <= 3 it lost by up to 1.7x on held-out mixtures)
EVOLVE_MIN_N = 300  # ... and this many rows (n: public or the noisy count): fewer leave its population too coarse
GREEDY_START_SIGNAL = 10_000.0  # n epsilon / k from which the greedy's centers start FastLloyd best in d >= 4
OVERCLUSTER_SIGNAL = 100.0  # n epsilon / k from which FastLloyd's first rounds are overclustered (below: mixed)
OVERCLUSTER_MIN_K = 3  # ... with at least this many clusters (the local optimum it mends needs three)
OVERCLUSTER = 2  # ... with this many centers per cluster
GREEDY_START = "fastlloyd-greedy-start"
OVERCLUSTERED = "fastlloyd-overclustered"
PLANE_REFINED = "greedy-refined"
REFINED_GREEDY_SHARE = 0.8  # the greedy's share of the budget in PLANE_REFINED; FastLloyd's rounds the rest
# PLANE_REFINED's FastLloyd: the greedy's centers, FEW_ROUNDS rounds, radii by the room a cluster has
REFINED = {
    **AUTO_FASTLLOYD,
    "init": "greedy",
    "init_share": REFINED_GREEDY_SHARE,
    "rounds": "few",
    "radii": "per-cluster",
}
# What ``choose`` may name -> (the algorithm, its algorithm_params)
CHOICES = {
    "greedy": ("greedy", None),
    "fastlloyd": ("fastlloyd", AUTO_FASTLLOYD),
    OVERCLUSTERED: ("fastlloyd", {**AUTO_FASTLLOYD, "overcluster": OVERCLUSTER}),
    GREEDY_START: ("fastlloyd", {**AUTO_FASTLLOYD, "init": "greedy"}),
    PLANE_REFINED: ("fastlloyd", REFINED),
    "evolve": ("evolve", None),
}
MEAN_START = "fastlloyd-mean-start"
PRIVATE_SELECTION = "private selection"  # the plan of the private choice among SELECTION_CANDIDATES
# What a private selection runs where the rule cannot tell them apart (``selects``), each in its share of one pool.
# Not the greedy start: below its signal it is rarely the best (1.11x FastLloyd's NICV on the bundled d >= 4 sets,
# 1.28x on held-out mixtures, at the full budget), and a third share cost the two others more than it brought
# (bench utility, noise seeds 700-707: 1.17x the rule on the bundled sets with it, 1.10x without; docs/choosing.md).
# The rule's start is the mean start (from d = 3); the other candidate starts, free, from sphere packing: pulled in
# about the box's center below d = 32 (where it was level with the mean start on held-out sets, better on some, worse
# on others: docs/benchmarks.md), as it is from d = 32 (``selection_candidates``).
SELECTION_CANDIDATES = {
    "fastlloyd": ("fastlloyd", {**AUTO_FASTLLOYD, "init": "sphere"}),
    MEAN_START: ("fastlloyd", {**AUTO_FASTLLOYD, "init": "mean"}),
}
# auto's "choice": the public rule everywhere; a private selection where the rule cannot tell (``selects``) and the
# comparison is precise enough (``precise``); or a private selection wherever the rule cannot tell
CHOICE_MODES = ("rule", "precise", "private")
DEFAULT_CHOICE = "rule"

# auto's table (algorithms.params): its "choice", only the options every algorithm it may choose takes, and a
# public start, which makes it choose FastLloyd.
_CANDIDATES = tuple(dict.fromkeys(algorithm for algorithm, _ in CHOICES.values()))
_SHARED = {
    key: p for key, p in table(_CANDIDATES[0]).options.items() if all(key in table(c).options for c in _CANDIDATES)
}
declare(
    Params(
        "auto",
        "auto",
        options={**_SHARED, START: table("fastlloyd").options[START]},
        params={"choice": Param(OneOf(CHOICE_MODES), DEFAULT_CHOICE)},
        candidates=_CANDIDATES,
    )
)
FROM_START = "a public start was given (init): FastLloyd from it (the greedy takes no start)"


def _has_start(ctx: FitContext) -> bool:
    return algorithm_params(ctx, "auto")[START] is not None


def choose(n: float | None, d: int, k: int, epsilon: float, adaptive: bool) -> tuple[str, str]:
    """(one of ``CHOICES``, why) from public parameters: :func:`_algorithm`'s choice, FastLloyd overclustered
    first where the signal affords it."""
    chosen, why = _algorithm(n, d, k, epsilon, adaptive)
    if chosen != "fastlloyd":  # (FastLloyd runs in several rounds only: n is then known)
        return chosen, why
    signal = n * epsilon / k
    if d < MEAN_START_MIN_D and k >= OVERCLUSTER_MIN_K and signal >= OVERCLUSTER_SIGNAL:
        return OVERCLUSTERED, (
            f"{why}; with k = {k} >= {OVERCLUSTER_MIN_K} and n epsilon / k = {signal:.3g} >= {OVERCLUSTER_SIGNAL:g} "
            f"its first rounds move {OVERCLUSTER} k centers, merged into k before the last rounds: fewer fits end in "
            "a local optimum"
        )
    return chosen, why


def _algorithm(n: float | None, d: int, k: int, epsilon: float, adaptive: bool) -> tuple[str, str]:
    """The algorithm ``choose`` runs, and why."""
    if not adaptive:
        return "greedy", "this privacy model answers one round of queries: the greedy asks all of its at once"
    signal = n * epsilon / k
    if d <= 2 and signal < EVOLVE_SIGNAL and k >= EVOLVE_MIN_K and n >= EVOLVE_MIN_N:
        return "evolve", (
            f"d = {d} <= 2, k = {k} >= {EVOLVE_MIN_K}, n = {n:.0f} >= {EVOLVE_MIN_N} and n epsilon / k = {signal:.3g} "
            f"< {EVOLVE_SIGNAL:g}: evolve's votes, whose noise does not grow with the domain, beat the greedy's "
            "and FastLloyd's releases with this few rows per cluster"
        )
    if d <= 2 and k < EVOLVE_MIN_K:
        return "fastlloyd", (
            f"d = {d} <= 2 and k = {k} < {EVOLVE_MIN_K}: FastLloyd with clipped rows is the more accurate with this "
            "few clusters at every signal"
        )
    if d <= 2 and signal >= GREEDY_SIGNAL:
        return PLANE_REFINED, (
            f"d = {d} <= 2 and n epsilon / k = {signal:.3g} >= {GREEDY_SIGNAL:g}: the private greedy's centers, "
            "refined by a few clipped FastLloyd rounds"
        )
    if d == 3 and signal >= GREEDY_SIGNAL:
        return GREEDY_START, (
            f"d = 3 and n epsilon / k = {signal:.3g} >= {GREEDY_SIGNAL:g}: FastLloyd from the private greedy's centers"
        )
    if d >= 4 and signal >= GREEDY_START_SIGNAL:
        return GREEDY_START, (
            f"d = {d} >= 4 and n epsilon / k = {signal:.3g} >= {GREEDY_START_SIGNAL:g}: "
            "FastLloyd from the private greedy's centers"
        )
    if d > 2:
        return "fastlloyd", f"d = {d} > 2 and n epsilon / k = {signal:.3g}: FastLloyd is the more accurate there"
    return "fastlloyd", (
        f"n epsilon / k = {signal:.3g} < {GREEDY_SIGNAL:g}: too few rows per cluster for the greedy, and "
        f"n = {n:.0f} < {EVOLVE_MIN_N} for evolve"
    )


def selects(n: float | None, d: int, k: int, epsilon: float, adaptive: bool) -> bool:
    """Whether the public rule cannot tell the candidates apart, so that a private choice (``choice``
    "private", or "precise" where ``precise``) decides: several rounds, d >= 4 and n epsilon / k below
    ``GREEDY_START_SIGNAL`` (the greedy start wins on some such sets and loses by up to 1.9x on others; the
    mean start likewise)."""
    return adaptive and d >= 4 and n * epsilon / k < GREEDY_START_SIGNAL


def precise(n: float, budget: Budget) -> bool:
    """Whether a private selection in ``budget`` can tell its candidates apart on n rows: its comparison's
    noise (``algorithms.select.comparison_noise``, a function of n and the pool's mu) at most
    ``SELECTION_NOISE``.  Public values only."""
    if budget.delta <= 0:  # the candidates are Gaussian: no pool without a delta (they refuse it themselves)
        return False
    mu = gdp_mu(budget.epsilon, budget.delta)
    return comparison_noise(n, mu, len(SELECTION_CANDIDATES)) <= SELECTION_NOISE


def reachable(d: int, k: int, epsilon: float, adaptive: bool) -> tuple[str, ...]:
    """Every one of ``CHOICES`` that :func:`choose` makes for some n in [1, ``MAX_ROW_ESTIMATE``] (the range of
    the noisy count) with these public d, k, epsilon: ``choose`` is constant in n between the n at which its
    thresholds fall, so it is asked at each of those and between each two.  Public values only."""
    if not adaptive:
        return ("greedy",)
    signals = (EVOLVE_SIGNAL, GREEDY_SIGNAL, GREEDY_START_SIGNAL, OVERCLUSTER_SIGNAL)
    cuts = sorted({1.0, MAX_ROW_ESTIMATE, float(EVOLVE_MIN_N), *(s * k / epsilon for s in signals)})
    cuts = [n for n in cuts if 1.0 <= n <= MAX_ROW_ESTIMATE]
    asked = cuts + [math.sqrt(low * high) for low, high in zip(cuts, cuts[1:])]
    made = {choose(n, d, k, epsilon, adaptive)[0] for n in asked}
    return tuple(name for name in CHOICES if name in made)


def choices(ctx: FitContext, epsilon: float) -> tuple[str, ...]:
    """What ``auto`` may run in ``ctx`` for some n (:func:`decide`'s reach): with a public start FastLloyd only;
    else :func:`reachable` at the fit's ``epsilon``, and the private selection where a private choice
    (``choice`` other than "rule") may take it (d >= 4, wherever the count falls below the signal)."""
    if _has_start(ctx):
        return ("fastlloyd",)
    adaptive = ADAPTIVE in ctx.oracle.capabilities
    names = reachable(ctx.n_features, ctx.n_clusters, epsilon, adaptive)
    if algorithm_params(ctx, "auto")["choice"] != "rule" and ctx.n_features >= 4:
        names += (PRIVATE_SELECTION,)
    return names


def candidate_specs(ctx: FitContext, names: tuple[str, ...]) -> dict[str, Spec]:
    """The plan of each of ``names`` (``choices``, or the one ``decide`` made) as ``auto`` runs it, ``ctx`` planning
    in what is left for the algorithm, with n known (``auto`` counts first): values, computed from public
    parameters; nothing is checked or read.  A staged plan holds only what the rule can reach: an adaptive
    choice is bounded by the union of its options' covers (``privacy.budget.Cover.of_any``), so a plan that can
    never run -- the greedy's half of delta for its partition selection, in several rounds -- would cost the
    others."""
    ctx = _without_params(ctx)  # each candidate with its own defaults
    # the plan's shape does not depend on n's value, only on n being known (a count made before it)
    known = ctx if ctx.public_n is not None else dataclasses.replace(ctx, public_n=1)
    plans: dict[str, Callable[[], Spec]] = {
        "greedy": lambda: greedy_spec(ctx).plan_spec,
        # as auto runs it: its start by d (the mean start's plan from d = 32)
        "fastlloyd": lambda: _as_run(known, "fastlloyd"),
        OVERCLUSTERED: lambda: dataclasses.replace(
            _as_run(known, OVERCLUSTERED), what="FastLloyd (mean start, overclustered)"
        ),
        GREEDY_START: lambda: greedy_start(ctx, DEFAULT_INIT_SHARE, counted=False).spec,
        PLANE_REFINED: lambda: dataclasses.replace(
            greedy_start(ctx, REFINED_GREEDY_SHARE, counted=False).spec, what="FastLloyd (greedy start, in the plane)"
        ),
        "evolve": lambda: evolve_spec(known),
        PRIVATE_SELECTION: lambda: _selection(known).spec,
    }
    return {name: plans[name]() for name in names}


def _as_run(ctx: FitContext, name: str) -> Spec:
    """FastLloyd's plan with the parameters ``CHOICES[name]`` runs it with."""
    return fastlloyd_spec(dataclasses.replace(ctx, options={**ctx.options, "params": CHOICES[name][1]}))


def selection_candidates(d: int) -> dict:
    """What the private selection compares in ``d`` features: ``SELECTION_CANDIDATES``, whose sphere-packing start
    is pulled in about the box's center below d = 32 (``init="compact"``)."""
    if d < MEAN_START_MIN_D:
        return {**SELECTION_CANDIDATES, "fastlloyd": ("fastlloyd", {**AUTO_FASTLLOYD, "init": "compact"})}
    return SELECTION_CANDIDATES


def _selection(ctx: FitContext) -> Selection:
    """The private selection among ``selection_candidates``, each with its defaults (``auto``'s options only)."""
    return Selection.of(_without_params(ctx), selection_candidates(ctx.n_features))


def _without_params(ctx: FitContext) -> FitContext:
    """``ctx`` without auto's own ``algorithm_params``: what every candidate shares."""
    return dataclasses.replace(ctx, options={k: v for k, v in ctx.options.items() if k != "params"})


def staged_spec(ctx: FitContext) -> Staged:
    """``auto`` with a private n: the count in ``count_fraction`` of (epsilon, delta), then the chosen
    algorithm in all that the count leaves once composed -- a plan whose second stage is one of the
    candidates' plans.  The rest of delta is ``1 - count_fraction`` of it; its epsilon the largest at which
    the count and every candidate compose within the budget (``privacy.budget.largest_epsilon``): in GDP
    the whole budget, where 95% of (epsilon, delta) left about 5% of epsilon unspent (0.949 of it at
    (1, 1e-6) and 5% for the count)."""
    f, budget = ctx.count_fraction, ctx.budget
    counting = Spec("the row count", (Part(ROW_COUNT_PART, share=1.0),))
    count = Stage(f, (counting,))
    counted = ctx.oracle.stage(count).spends(counting)[0]
    rest_delta = budget.delta * (1.0 - f)

    def rest(epsilon: float) -> FitContext:
        within = Budget(epsilon, rest_delta)  # the candidates plan within it
        return dataclasses.replace(ctx, oracle=ctx.oracle.with_pool(within), budget=within)

    def beside_the_count(options: tuple[Spec, ...]) -> Callable[[float], list[list]]:
        """The count's spends with each of ``options`` (plans by shares of their pool) in a pool of epsilon."""
        return lambda epsilon: [counted + rest(epsilon).oracle.spends(option)[0] for option in options]

    # the candidates' plans made once, at basic composition's split, and priced at each epsilon the bisection
    # tries (at its smaller share of delta the rest may take a little more than the whole epsilon); then made
    # at the epsilon found, and kept only if they fit there too -- else the split
    low, names = budget.epsilon * (1.0 - f), choices(ctx, budget.epsilon)
    first = tuple(candidate_specs(rest(low), names).values())
    epsilon = largest_epsilon(budget, low, beside_the_count(first), high=2.0 * budget.epsilon)
    options = tuple(candidate_specs(rest(epsilon), names).values())
    if not composes_within(budget, beside_the_count(options)(epsilon)):
        epsilon, options = low, first
    return Staged("auto", (count, Stage(1.0 - f, options, epsilon_fraction=epsilon / budget.epsilon)))


def _noisy_rows(ctx: FitContext) -> tuple[float, FitContext]:
    """A noisy n from ``count_fraction`` of the pool, and the context for the rest of it.

    Nothing is released before the whole fit is known to fit the ledger: the staged plan -- the count,
    then each algorithm ``auto`` may choose -- is checked first (``Oracle.check``, on values), so a refused
    fit spends nothing, not even the count."""
    staged = staged_spec(ctx)
    ctx.oracle.check(staged)
    count_stage, rest_stage = staged.stages
    count_plan = ctx.oracle.stage(count_stage).open(count_stage.options[0])
    n = min(max(float(count_plan.release(count_query(), ROW_COUNT_PART)["count"][0, 0]), 1.0), MAX_ROW_ESTIMATE)
    rest = ctx.oracle.stage(rest_stage)
    return n, dataclasses.replace(ctx, oracle=rest, budget=rest.budget, public_n=int(round(n)))


def auto_spec(ctx: FitContext) -> Spec | Staged:
    """``auto``'s plan as a value: with a private n and several rounds, the count then one candidate
    (:func:`staged_spec`); with a public n, one candidate (any of them); in one round, the greedy's."""
    if ADAPTIVE not in ctx.oracle.capabilities:
        _one_round_takes_no_start(ctx)
        return greedy_spec(_without_params(ctx)).plan_spec  # as auto runs it: with the greedy's own defaults
    if ctx.public_n is None:
        return staged_spec(ctx)
    # a public n: the choice is a public function of the parameters, so the plan is the one that runs
    chosen, _ = decide(ctx, float(ctx.public_n), ctx.budget)
    return Staged("auto", (Stage(1.0, (candidate_specs(ctx, (chosen,))[chosen],)),))


def _one_round_takes_no_start(ctx: FitContext) -> None:
    if _has_start(ctx):
        raise ValueError(
            "init: this privacy model answers one round of queries, which only the greedy can use, and it takes "
            "no start: leave init at its default (None)"
        )


@register("auto", spec=auto_spec)
def auto(ctx: FitContext) -> FitResult:
    """Choose among privclust's algorithms from public parameters, or by a private comparison where they
    cannot tell (``choice``; see the module docstring), and run it."""
    if ctx.non_private:
        raise ValueError(
            "algorithm='auto' chooses among the private algorithms; use 'nonprivate-lloyd' for the baseline"
        )
    algorithm_params(ctx, "auto")  # checks the options every candidate takes, and a start
    adaptive = ADAPTIVE in ctx.oracle.capabilities
    if not adaptive:
        _one_round_takes_no_start(ctx)
    if ctx.public_n is not None:
        n, run_ctx = float(ctx.public_n), ctx
    elif adaptive:
        n, run_ctx = _noisy_rows(ctx)
    else:
        n, run_ctx = None, ctx  # one round only: the choice needs no n
    chosen, why = decide(ctx, n, run_ctx.budget)
    if chosen == PRIVATE_SELECTION:
        return _select_privately(run_ctx, n)
    algorithm, params = CHOICES[chosen]
    result = ALGORITHMS[algorithm](dataclasses.replace(run_ctx, options={**run_ctx.options, "params": params}))
    result.info["auto"] = {"chose": chosen, "because": why, "algorithm": algorithm, "algorithm_params": params}
    if result.n_estimate is None:
        result.n_estimate = n
    return result


def decide(ctx: FitContext, n: float | None, budget: Budget) -> tuple[str, str]:
    """What ``auto`` runs for ``n`` (public, or the noisy count) and ``budget`` (what is left for it): one of
    ``CHOICES``, or ``PRIVATE_SELECTION`` where the rule cannot tell (``selects``) and the comparison is
    precise enough or asked for -- and why.  Public values only: with a public n, :func:`auto_spec` plans
    exactly this."""
    mode = algorithm_params(ctx, "auto")["choice"]
    adaptive = ADAPTIVE in ctx.oracle.capabilities
    start = _has_start(ctx)
    undecided = (
        not start and mode != "rule" and selects(n, ctx.n_features, ctx.n_clusters, ctx.budget.epsilon, adaptive)
    )
    if undecided and (mode == "private" or precise(n, budget)):
        return PRIVATE_SELECTION, "a private selection among the candidates"
    if start:
        return "fastlloyd", FROM_START
    chosen, why = choose(n, ctx.n_features, ctx.n_clusters, ctx.budget.epsilon, adaptive)
    if undecided:
        why += f"; a private choice on these n and budget could not tell the candidates apart (its noise > {SELECTION_NOISE:g})"
    return chosen, why


def _select_privately(ctx: FitContext, n: float) -> FitResult:
    """Run every selection candidate in its share of the pool and keep the one with the lowest noisy cost
    (``algorithms.select``); ``fit_info_["auto"]`` says which, what the others cost (noisy) and the split."""
    chosen, result, info = _selection(ctx).run(ctx)
    algorithm, params = selection_candidates(ctx.n_features)[chosen]
    signal = n * ctx.budget.epsilon / ctx.n_clusters
    why = (
        f"d = {ctx.n_features} >= 4 and n epsilon / k = {signal:.3g} < {GREEDY_START_SIGNAL:g}: the public rule cannot "
        f"tell the candidates apart, so each ran in {info['candidate_share']:.3g} of the pool and the lowest noisy "
        f"cost (in {info['share']:g} of it) chose"
    )
    result.info["auto"] = {
        "chose": chosen,
        "because": why,
        "algorithm": algorithm,
        "algorithm_params": params,
        "selection": info,
    }
    if result.n_estimate is None:
        result.n_estimate = n
    return result

"""``algorithm="auto"``: the default, which picks the algorithm from public parameters only.

The choice reads n (``public_n`` when it is declared, else a noisy count bought with
``count_fraction`` of the budget), d, k, epsilon and what the privacy model can do -- never the
rows themselves -- so it is post-processing of public values and releases:

* a model that answers one round only (local, shuffle): the greedy, the only algorithm that
  asks all its questions at once;
* d <= 2 and n epsilon / k >= ``GREEDY_SIGNAL``: the private greedy, which puts a center on every
  cluster it can see and is within a few percent of k-means++ once each cluster holds enough
  rows for its budget;
* otherwise FastLloyd, which wins on small or high-dimensional data.

The rule is fitted on ``privclust bench utility`` (ten data sets, epsilon 0.1 to 1; the table is
in docs/choosing.md): the greedy's NICV is below FastLloyd's on S1 and Birch2 from n epsilon / k
of about 60-170 on, and above it on every set with d >= 3 but adult, where both are within 10%.
``fit_info_["auto"]`` says which was chosen and why.

Privacy: with a private n, the count is released from its own part of the pool (epsilon f,
delta f with f = ``count_fraction``) and the chosen algorithm runs in the rest (epsilon (1 - f),
delta (1 - f)) through :meth:`Oracle.with_pool`; the shared ledger composes the two, which is
(epsilon, delta)-DP by basic composition and reported exactly in GDP.
"""

from __future__ import annotations

import dataclasses

from ..privacy.budget import Budget
from ..queries.base import count_query
from ..queries.plan import ADAPTIVE, Part
from .base import MAX_ROW_ESTIMATE, ROW_COUNT_PART, FitContext, FitResult, algorithm_params, register

__all__ = ["auto", "choose", "GREEDY_SIGNAL"]

GREEDY_SIGNAL = 100.0  # n epsilon / k from which the greedy beats FastLloyd in the plane


def choose(n: float | None, d: int, k: int, epsilon: float, adaptive: bool) -> tuple[str, str]:
    """(algorithm, why) from public parameters."""
    if not adaptive:
        return "greedy", "this privacy model answers one round of queries: the greedy asks all of its at once"
    signal = n * epsilon / k
    if d <= 2 and signal >= GREEDY_SIGNAL:
        return "greedy", f"d = {d} <= 2 and n epsilon / k = {signal:.3g} >= {GREEDY_SIGNAL:g}"
    if d > 2:
        return "fastlloyd", f"d = {d} > 2: FastLloyd is the more accurate there"
    return "fastlloyd", f"n epsilon / k = {signal:.3g} < {GREEDY_SIGNAL:g}: too few rows per cluster for the greedy"


def _noisy_rows(ctx: FitContext) -> tuple[float, FitContext]:
    """A noisy n from ``count_fraction`` of the pool, and the context for the rest of it.

    Nothing is released before the whole fit is known to fit the ledger: the count's plan together
    with the plan of each algorithm ``auto`` may choose (they do not depend on n) is checked first,
    so a refused fit spends nothing, not even the count."""
    from .greedy import greedy_spec
    from .lloyd import lloyd_plan

    budget, f = ctx.budget, ctx.count_fraction
    counting = ctx.oracle.with_pool(Budget(budget.epsilon * f, budget.delta * f))
    count_plan = counting.plan([Part(ROW_COUNT_PART, share=1.0)], what="the row count")
    rest = ctx.oracle.with_pool(Budget(budget.epsilon * (1.0 - f), budget.delta * (1.0 - f)))
    probe = dataclasses.replace(ctx, oracle=rest, public_n=1)  # any public n: neither plan depends on it
    for plan in (greedy_spec(probe).open(rest), lloyd_plan(probe, "gaussian", "FastLloyd")):
        ctx.oracle.accountant.check(count_plan.reserved() + plan.reserved())
    n = min(max(float(count_plan.release(count_query(), ROW_COUNT_PART)["count"][0, 0]), 1.0), MAX_ROW_ESTIMATE)
    return n, dataclasses.replace(ctx, oracle=rest, public_n=int(round(n)))


@register("auto")
def auto(ctx: FitContext) -> FitResult:
    """Choose among privclust's algorithms from public parameters (see the module docstring) and run it."""
    from . import ALGORITHMS

    if ctx.non_private:
        raise ValueError("algorithm='auto' chooses among the private algorithms; use 'lloyd' for the baseline")
    algorithm_params(ctx, "auto", ())  # it takes none: the chosen algorithm runs with its defaults
    adaptive = ADAPTIVE in ctx.oracle.capabilities
    if ctx.public_n is not None:
        n, run_ctx = float(ctx.public_n), ctx
    elif adaptive:
        n, run_ctx = _noisy_rows(ctx)
    else:
        n, run_ctx = None, ctx  # one round only: the choice needs no n
    chosen, why = choose(n, ctx.n_features, ctx.n_clusters, ctx.budget.epsilon, adaptive)
    result = ALGORITHMS[chosen](run_ctx)
    result.info["auto"] = {"chose": chosen, "because": why}
    if result.n_estimate is None:
        result.n_estimate = n
    return result

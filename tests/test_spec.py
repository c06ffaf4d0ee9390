"""A plan is a value: specs are checked and combined without running anything (issue 26)."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import numpy as np
import pytest

from privclust import Budget, BudgetExceededError, KMeans, PrivacyAccountant
from privclust.algorithms import auto as auto_module
from privclust.algorithms.base import FitContext
from privclust.algorithms.greedy import greedy_spec
from privclust.algorithms.lloyd import DEFAULT_INIT_SHARE, greedy_start, lloyd_spec
from privclust.privacy.budget import Cover, Spend
from privclust.privacy.gdp import gdp_mu
from privclust.privacy.noise import Randomness
from privclust.queries import MemoryRows
from privclust.queries.central import CentralOracle
from privclust.queries.plan import ADAPTIVE, Part, Spec, Stage, Staged, shared_pool

ALGORITHMS = Path(__file__).parents[1] / "src" / "privclust" / "algorithms"


class Untouchable(MemoryRows):
    """Rows that refuse to be read: checking a plan must not read any."""

    def sums(self, queries):
        raise AssertionError("a row was read")


def _ctx(budget=Budget(1.0, 1e-6), accountant=None, public_n=None):
    rows = Untouchable(np.zeros((10, 2)), 2)
    accountant = accountant or PrivacyAccountant(budget)
    oracle = CentralOracle(rows, budget, accountant, Randomness(0).noise)
    return FitContext(oracle, 3, budget, Randomness(0), public_n=public_n)


def test_a_spec_is_a_checked_value():
    with pytest.raises(ValueError, match="unique names"):
        Spec("x", (Part("a", share=0.5), Part("a", share=0.5)))
    with pytest.raises(ValueError, match="family"):
        Spec("x", (Part("a", share=1.0),), family="cauchy")
    assert "pure epsilon-DP" in " ".join(Spec("x", (Part("a", share=1.0),), family="laplace").needs)
    half = Spec("x", (Part("a", share=1.0), Part("b", epsilon=0.1))).scaled(0.5)
    assert [p.share for p in half.parts] == [0.5, 0.0] and half.parts[1].epsilon == 0.1


def test_shared_pool_scales_each_stage_and_composes_in_one_gdp_mechanism():
    ctx = _ctx()
    greedy = greedy_spec(ctx).plan_spec
    lloyd = lloyd_spec(ctx, "gaussian", "FastLloyd", counted=False)
    both = shared_pool("start", (greedy, 0.3), (lloyd, 0.7))
    assert [p.name for p in both.parts] == [p.name for p in greedy.parts] + [p.name for p in lloyd.parts]
    assert sum(p.share for p in both.parts) == pytest.approx(0.3 * sum(p.share for p in greedy.parts) + 0.7)
    assert both.needs == greedy.needs | {ADAPTIVE}
    # one pool: the Gaussian parts' mu add up (in mu^2) to the pool's mu at what the selection leaves of delta
    plan = ctx.oracle.open(both)
    delta_left = 1e-6 - sum(p.delta for p in both.parts)
    mu2 = sum(plan.allotment(p.name).mu ** 2 for p in both.parts)
    assert mu2 == pytest.approx(gdp_mu(1.0, delta_left) ** 2)
    with pytest.raises(ValueError, match="more than the pool"):
        shared_pool("x", (greedy, 0.6), (lloyd, 0.6))
    with pytest.raises(ValueError, match="one noise family"):
        shared_pool("x", (lloyd, 0.5), (lloyd_spec(ctx, "laplace", "SuLloyd"), 0.5))


def test_the_greedy_start_is_the_shared_pool_of_the_greedy_and_fastlloyd():
    ctx = _ctx()
    start = greedy_start(ctx, DEFAULT_INIT_SHARE)
    expected = shared_pool(
        "FastLloyd (greedy start)",
        (start.greedy.plan_spec, DEFAULT_INIT_SHARE),
        (lloyd_spec(ctx, "gaussian", "FastLloyd"), 1 - DEFAULT_INIT_SHARE),
    )
    assert start.spec == expected


def test_a_staged_plan_is_checked_for_every_choice_without_reading_a_row():
    ledger = PrivacyAccountant(Budget(1.0, 1e-6))
    ctx = _ctx(accountant=ledger)
    count = Stage(0.05, (Spec("count", (Part("count", share=1.0),)),))
    cheap = Spec("cheap", (Part("a", share=1.0),))
    ctx.oracle.check(Staged("fits", (count, Stage(0.95, (cheap,)))))
    assert ledger.spends == []  # checked, not spent
    ledger.spend_gdp("an earlier release", 0.15)
    # each option alone fits the pool it plans in, but not beside what the ledger holds: refused, nothing spent
    with pytest.raises(BudgetExceededError):
        ctx.oracle.check(Staged("fits", (count, Stage(0.95, (cheap,)))))
    assert [s.label for s in ledger.spends] == ["an earlier release"]
    with pytest.raises(ValueError, match="more than the budget"):
        Staged("x", (Stage(0.5, (cheap,)), Stage(0.6, (cheap,))))


def test_a_staged_plan_with_an_unaffordable_option_is_refused_though_the_others_fit():
    ctx = _ctx()
    fits = Spec("fits", (Part("a", share=1.0),))
    too_dear = Spec("too dear", (Part("b", epsilon=0.99),))  # an explicit price above its stage's 0.95 epsilon
    count = Stage(0.05, (Spec("count", (Part("count", share=1.0),)),))
    ctx.oracle.check(Staged("one", (count, Stage(0.95, (fits,)))))
    with pytest.raises(ValueError):
        ctx.oracle.check(Staged("either", (count, Stage(0.95, (fits, too_dear)))))


def test_autos_staged_plan_holds_the_count_and_every_candidate():
    ctx = _ctx()
    staged = auto_module.staged_spec(ctx)
    count, rest = staged.stages
    assert count.fraction == ctx.count_fraction and rest.fraction == pytest.approx(1 - ctx.count_fraction)
    # the rest's epsilon: all that the count leaves once composed, not 95% of it -- and no more: the ledger
    # refuses the plan with 1% more
    assert rest.epsilon_fraction > 1 - ctx.count_fraction
    ctx.oracle.check(staged)
    greedier = Stage(rest.fraction, rest.options, epsilon_fraction=rest.epsilon_fraction * 1.01)
    with pytest.raises(BudgetExceededError):
        ctx.oracle.check(Staged("auto", (count, greedier)))


def test_a_stage_beyond_basic_compositions_split_is_held_to_the_union_of_its_options():
    """Each combination of count and option may fit while their union does not (a selection delta beside another
    option's larger mu): the check refuses that, since the choice is made on the count."""
    from privclust.privacy.budget import composes_within, largest_epsilon

    budget = Budget(1.0, 1e-6)
    oracle = CentralOracle(Untouchable(np.zeros((10, 3)), 3), budget, PrivacyAccountant(budget), Randomness(0).noise)
    count = Stage(0.05, (Spec("the row count", (Part("row count", share=1.0),)),))
    gaussian = Spec("all Gaussian", (Part("sums", share=1.0),))
    selecting = Spec("a selection", (Part("sums", share=0.5), Part("levels", share=0.5, delta=budget.delta / 2)))

    def combinations(fraction):
        staged = Staged("two", (count, Stage(0.95, (gaussian, selecting), epsilon_fraction=fraction)))
        return staged, oracle.spends(staged)

    union = largest_epsilon(budget, 0.95, lambda fraction: combinations(fraction)[1], high=2.0)
    oracle.check(combinations(union)[0])
    # the largest fraction at which each combination alone fits, found by bisection on the ledger's own check
    low, high = union, 2.0
    for _ in range(40):
        middle = (low + high) / 2
        fits = all(composes_within(budget, [plan]) for plan in combinations(middle)[1])
        low, high = (middle, high) if fits else (low, middle)
    assert low > union * 1.01  # each alone leaves room beyond the union's fraction
    staged, plans = combinations((low + union) / 2)
    assert all(composes_within(budget, [plan]) for plan in plans)
    with pytest.raises(BudgetExceededError):
        oracle.check(staged)


@pytest.mark.parametrize(
    "d, k, expected",
    [
        (3, 3, ["FastLloyd (mean start)", "FastLloyd (greedy start)"]),  # d = 3: the greedy start from the signal
        (8, 3, ["FastLloyd (mean start)", "FastLloyd (mean start, overclustered)", "FastLloyd (greedy start)"]),
        # k < EVOLVE_MIN_K in the plane: FastLloyd at every n (two clusters: never overclustered)
        (2, 2, ["FastLloyd (mean start)"]),
        (2, 5, ["FastLloyd (mean start)", "FastLloyd (greedy start, in the plane)", "evolve"]),
    ],
)
def test_autos_staged_plan_holds_only_what_its_rule_can_choose(d, k, expected):
    """The union of the options bounds an adaptive choice, so an option the rule never takes in several rounds --
    the greedy, whose partition selection holds half of delta -- would cost the others their delta."""
    budget = Budget(1.0, 1e-6)
    oracle = CentralOracle(Untouchable(np.zeros((10, d)), d), budget, PrivacyAccountant(budget), Randomness(0).noise)
    _, rest = auto_module.staged_spec(FitContext(oracle, k, budget, Randomness(0))).stages
    assert [s.what for s in rest.options] == expected
    assert all(not any(p.name == "row count" for p in s.parts) for s in rest.options)  # n is known by then


@pytest.mark.parametrize("d", [1, 2, 3, 4, 9])
@pytest.mark.parametrize("k", [2, 3, 4, 10, 64])
@pytest.mark.parametrize("epsilon", [0.01, 0.1, 1.0, 8.0])
def test_reachable_names_every_choice_the_rule_makes_at_some_n(d, k, epsilon):
    grid = np.unique(np.concatenate([np.geomspace(1, 2.0**53, 4000), np.arange(1, 3000)]))
    for adaptive in (True, False):
        made = {auto_module.choose(float(n), d, k, epsilon, adaptive)[0] for n in grid}
        assert set(auto_module.reachable(d, k, epsilon, adaptive)) == made


def test_a_refused_auto_fit_spends_nothing_not_even_the_count():
    shared = PrivacyAccountant(Budget(1.0, 1e-6))
    shared.spend_gdp("earlier", gdp_mu(0.9, 1e-6))
    X = np.random.default_rng(0).uniform(-1, 1, (500, 4))
    with pytest.raises(BudgetExceededError):
        KMeans(3, bounds=(-1, 1), accountant=shared).fit(X)
    assert [s.label for s in shared.spends] == ["earlier"]


def test_no_algorithm_sees_an_accountant():
    """The seam's rule: algorithms declare plans; oracles check them against the ledger and charge it."""
    for path in sorted(ALGORITHMS.glob("*.py")):
        names = {node.attr for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Attribute)}
        assert "accountant" not in names, path.name


def test_the_spec_functions_are_pure_values():
    ctx = _ctx(public_n=100)
    assert lloyd_spec(ctx, "gaussian", "FastLloyd") == lloyd_spec(ctx, "gaussian", "FastLloyd")
    counted = lloyd_spec(dataclasses.replace(ctx, public_n=None), "gaussian", "FastLloyd")
    assert [p.name for p in counted.parts] == ["row count", "Lloyd iterations"]
    assert lloyd_spec(ctx, "gaussian", "FastLloyd", counted=True) == counted


def test_autos_plan_in_a_one_round_model_is_the_greedys_with_its_own_defaults():
    # auto runs the greedy there without auto's own algorithm_params: its plan must be made the same way
    from privclust.queries.plan import DENSE, PlanningOracle

    budget = Budget(1.0, 1e-6)
    one_round = PlanningOracle(2, budget, {DENSE}, "the local model")
    ctx = FitContext(one_round, 3, budget, Randomness(0), options={"params": {"choice": "rule"}})
    assert auto_module.auto_spec(ctx) == greedy_spec(dataclasses.replace(ctx, options={})).plan_spec


def test_planned_spends_takes_declared_per_feature_bounds():
    # a dict of per-feature bounds is declared, not a private-domain request: the plan is a value without rows
    per_feature = KMeans(3, bounds={"lower": [-1.0, -2.0], "upper": [1.0, 2.0]}, algorithm="fastlloyd")
    assert per_feature.planned_spends(2) == KMeans(3, bounds=(-1, 1), algorithm="fastlloyd").planned_spends(2)
    with pytest.raises(ValueError, match="needs declared bounds"):
        KMeans(3, bounds={"outer": (-5, 5)}).planned_spends(2)


def test_a_stage_opens_only_plans_within_the_union_it_was_checked_with():
    """The guarantee of a staged run is checked, on values, before its first stage releases; a later stage that
    opened a plan outside its options' union (a bug: a choice the plan did not hold) would run under a bound
    nobody checked, and the ledger alone would not see it (the stage's epsilon is beyond basic composition's)."""
    budget = Budget(1.0, 1e-6)
    oracle = CentralOracle(Untouchable(np.zeros((10, 3)), 3), budget, PrivacyAccountant(budget), Randomness(0).noise)
    gaussian = Spec("all Gaussian", (Part("sums", share=1.0),))
    selecting = Spec("a selection", (Part("sums", share=0.5), Part("levels", share=0.5, delta=budget.delta / 2)))
    stage = Stage(0.95, (gaussian,), epsilon_fraction=0.99)
    view = oracle.stage(stage)
    view.open(Spec("the same plan, renamed", gaussian.parts))  # within the union: opened
    with pytest.raises(RuntimeError, match="not one of the plans this stage was checked with"):
        view.open(selecting)  # its selection delta is outside the union of the stage's one option
    assert oracle.accountant.spends == []


def test_auto_runs_only_what_its_staged_plan_holds(monkeypatch):
    rng = np.random.default_rng(0)
    X = np.clip(np.repeat([[-0.5, -0.5, 0.0], [0.5, 0.5, 0.0]], 1000, axis=0) + rng.normal(0, 0.05, (2000, 3)), -1, 1)
    KMeans(2, epsilon=1.0, delta=1e-6, bounds=(-1, 1), random_state=0).fit(X)  # the greedy start, as planned
    monkeypatch.setattr(auto_module, "reachable", lambda *args: ("fastlloyd",))  # a reach that misses it
    with pytest.raises(RuntimeError, match="not one of the plans this stage was checked with"):
        KMeans(2, epsilon=1.0, delta=1e-6, bounds=(-1, 1), random_state=0).fit(X)


def test_autos_plan_with_a_public_n_beyond_the_counts_range_is_the_one_it_runs():
    plans = KMeans(1000, epsilon=1e-9, delta=1e-6, bounds=(-1, 1), public_n=2 * 10**16).planned_spends(4)
    assert len(plans) == 1 and any(s.label.endswith("(selection)") for s in plans[0])  # the greedy start's


def test_a_staged_plan_at_basic_compositions_split_is_held_to_the_union_beside_what_the_ledger_holds():
    """Each stage within basic composition's split: every combination alone fits beside an earlier release, yet a
    choice made on the count can pair the one option's mu with the other's delta; the check refused nothing
    there (it held the union only to a stage beyond the split), though a user-level fit planned exactly so."""
    budget = Budget(1.0, 1e-6)
    count = Stage(0.05, (Spec("the row count", (Part("row count", share=1.0),)),))
    gaussian = Spec("all Gaussian", (Part("sums", share=1.0),))
    selecting = Spec("a selection", (Part("sums", share=0.5), Part("levels", share=0.5, delta=budget.delta / 2)))
    staged = Staged("two", (count, Stage(0.95, (gaussian, selecting))))

    def oracle(earlier_mu):
        accountant = PrivacyAccountant(budget)
        accountant.spend_gdp("an earlier release", earlier_mu)
        return CentralOracle(Untouchable(np.zeros((10, 3)), 3), budget, accountant, Randomness(0).noise)

    def largest(fits):  # the largest earlier mu at which ``fits`` holds, by bisection
        low, high = 0.0, gdp_mu(1.0, 1e-6)
        for _ in range(50):
            middle = (low + high) / 2
            low, high = (middle, high) if fits(middle) else (low, middle)
        return low

    def each_fits(mu):
        view = oracle(mu)
        try:
            for plan in view.spends(staged):
                view.accountant.check(plan)
        except BudgetExceededError:
            return False
        return True

    def union_fits(mu):
        view = oracle(mu)
        try:
            view.accountant.check(Cover.of_any(view.spends(staged)).spends("the union"))
        except BudgetExceededError:
            return False
        return True

    each, union = largest(each_fits), largest(union_fits)
    assert each > union * 1.001  # between them every combination fits and their union does not
    between = oracle((each + union) / 2)
    with pytest.raises(BudgetExceededError):
        between.check(staged)
    assert [s.label for s in between.accountant.spends] == ["an earlier release"]


def test_a_fit_with_a_private_n_records_the_union_of_the_plans_it_chose_among():
    """auto chooses on the noisy count, so its guarantee rests on the union cover of what it could choose; a
    fit whose chosen plan selects nothing (FastLloyd) while another option does (the greedy start's delta)
    recorded only its own plan's cost: privacy_spent_ under the guarantee, a ledger settled short of it."""
    X = np.random.default_rng(0).uniform(-1, 1, (2000, 5))
    model = KMeans(5, epsilon=0.5, delta=1e-6, bounds=(-1, 1), random_state=0).fit(X)
    assert model.fit_info_["auto"]["chose"] == "fastlloyd-overclustered"
    union = Cover.of_any(model.planned_spends(5))
    spent = Cover.of(model.privacy_spent_.steps)
    assert union.delta > 0  # the greedy start's selection delta: an option not chosen
    assert (spent.mu, spent.epsilon, spent.delta) == pytest.approx((union.mu, union.epsilon, union.delta), rel=1e-12)
    assert model.privacy_spent_.epsilon == pytest.approx(0.5, rel=1e-6)
    choice = [s for s in model.privacy_spent_.steps if "chosen among" in s.label]
    assert choice and all(s.delta > 0 or s.mu > 0 for s in choice)
    # a public n: the rule's one plan runs, and nothing is added to it
    public = KMeans(5, epsilon=0.5, delta=1e-6, bounds=(-1, 1), random_state=0, public_n=2000).fit(X)
    assert not [s for s in public.privacy_spent_.steps if "chosen among" in s.label]
    assert Cover.of(public.privacy_spent_.steps) == Cover.of(public.planned_spends(5)[0])


def test_a_stage_records_its_choice_at_the_union_of_its_options_and_nothing_for_one_option():
    budget = Budget(1.0, 1e-6)
    oracle = CentralOracle(Untouchable(np.zeros((10, 3)), 3), budget, PrivacyAccountant(budget), Randomness(0).noise)
    gaussian = Spec("all Gaussian", (Part("sums", share=1.0),))
    selecting = Spec("a selection", (Part("sums", share=0.5), Part("levels", share=0.5, delta=budget.delta / 4)))
    oracle.stage(Stage(0.5, (gaussian,))).open(gaussian)
    assert oracle.accountant.spends == []  # opening records nothing of a plan with no choice
    oracle.stage(Stage(0.5, (gaussian, selecting))).open(gaussian)
    (lift,) = oracle.accountant.spends  # the selection's delta, which the choice could have spent
    assert lift.delta == pytest.approx(budget.delta / 4) and lift.epsilon == 0 and not lift.is_gdp


def test_a_stage_opens_one_plan_in_any_of_its_views_priced_in_the_stages_own_pool():
    """Two plans opened in one stage would each be held to the union alone (their sum to nothing); a copy of the
    stage's view in a smaller pool (with_pool, within) prices the options in the stage's pool, not its own."""
    budget = Budget(1.0, 1e-6)
    oracle = CentralOracle(Untouchable(np.zeros((10, 3)), 3), budget, PrivacyAccountant(budget), Randomness(0).noise)
    gaussian = Spec("all Gaussian", (Part("sums", share=1.0),))
    selecting = Spec("a selection", (Part("sums", share=0.5), Part("levels", share=0.5, delta=budget.delta / 4)))
    view = oracle.stage(Stage(0.5, (gaussian, selecting)))
    view.open(gaussian)
    with pytest.raises(RuntimeError, match="opened its plan already"):
        view.open(gaussian)
    with pytest.raises(RuntimeError, match="opened its plan already"):
        view.with_pool(Budget(0.25, 2.5e-7)).open(Spec("smaller", (Part("sums", share=0.25),)))
    assert [s.delta for s in oracle.accountant.spends] == [pytest.approx(budget.delta / 4)]  # one lift, once
    # a copy in a smaller pool opens within the stage's union, and is lifted to it (not to its own pool's)
    fresh = CentralOracle(Untouchable(np.zeros((10, 3)), 3), budget, PrivacyAccountant(budget), Randomness(0).noise)
    stage = fresh.stage(Stage(0.5, (gaussian, selecting)))
    smaller = stage.with_pool(Budget(0.25, 2.5e-7))
    plan = smaller.open(Spec("smaller", (Part("sums", share=1.0),)))
    union = Cover.of_any([stage.reserved(stage._unchecked(gaussian)), stage.reserved(stage._unchecked(selecting))])
    recorded = Cover.of(fresh.accountant.spends + smaller.reserved(plan))  # the lift, and what the plan will spend
    assert (recorded.mu, recorded.delta) == pytest.approx((union.mu, union.delta), rel=1e-12)


def test_options_equal_but_for_rounding_record_no_choice():
    budget = Budget(1.0, 1e-6)
    oracle = CentralOracle(Untouchable(np.zeros((10, 3)), 3), budget, PrivacyAccountant(budget), Randomness(0).noise)
    whole = Spec("whole", (Part("sums", share=1.0),))
    split = Spec("split", (Part("a", share=0.1), Part("b", share=0.9)))  # the same mu, but for its last bit
    oracle.stage(Stage(0.5, (whole, split))).open(split)
    assert oracle.accountant.spends == []


def test_a_choice_is_lifted_to_a_union_in_another_relation_spend_by_spend():
    """Converting a chosen plan's summed delta to replace-one at once overstates it ((1 + e^0.5) 2e-7 beside
    (1 + e^1) 2e-7); a lift taken from that sum would record less than the union. The cover refuses to lift a
    cover of another relation, and a stage converts each spend first, as the accountant does."""
    from privclust.privacy.budget import REPLACE_ONE

    chosen = [Spend("a", epsilon=0.5, delta=1e-7), Spend("b", epsilon=0.5, delta=1e-7)]
    union = Cover.of_any([chosen, [Spend("c", epsilon=2.0, delta=1e-6, relation=REPLACE_ONE)]])
    with pytest.raises(ValueError, match="own relation"):
        union.beyond(Cover.of(chosen), "the choice")
    lift = union.beyond(Cover.of([s.under(REPLACE_ONE) for s in chosen]), "the choice")
    recorded = Cover.of(chosen + lift)
    assert (recorded.epsilon, recorded.delta) == pytest.approx((union.epsilon, union.delta), rel=1e-12)

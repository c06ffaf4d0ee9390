"""The accountant: composition arithmetic, refusal before release, labels."""

import copy
import math

import numpy as np
import pytest

from privclust.privacy.budget import Budget, BudgetExceededError, PrivacyAccountant, Spend
from privclust.privacy.gdp import gdp_epsilon, gdp_mu


def test_budget_validation():
    with pytest.raises(ValueError, match="epsilon"):
        Budget(0.0)
    with pytest.raises(ValueError, match="epsilon"):
        Budget(math.inf)
    with pytest.raises(ValueError, match="delta"):
        Budget(1.0, 1.0)
    with pytest.raises(ValueError, match="delta"):
        Budget(1.0, -1e-9)
    assert Budget(1, 0).epsilon == 1.0


def test_basic_composition_of_pure_spends():
    acc = PrivacyAccountant()
    acc.spend_dp("a", 0.25)
    acc.spend_dp("b", 0.5, 1e-7)
    assert acc.guarantee() == (pytest.approx(0.75), pytest.approx(1e-7))


def test_gdp_spends_compose_in_quadrature_then_convert():
    acc = PrivacyAccountant()
    acc.spend_gdp("x", 0.3)
    acc.spend_gdp("y", 0.4)
    eps, delta = acc.guarantee(1e-6)
    assert delta == 1e-6
    assert eps == pytest.approx(gdp_epsilon(0.5, 1e-6))


def test_mixed_spends_split_delta():
    acc = PrivacyAccountant()
    acc.spend_dp("laplace", 0.1)
    acc.spend_dp("approx", 0.1, 4e-7)
    acc.spend_gdp("gauss", 0.5)
    eps, delta = acc.guarantee(1e-6)
    assert delta == 1e-6
    assert eps == pytest.approx(0.2 + gdp_epsilon(0.5, 6e-7))


def test_refuses_overspend_and_records_nothing():
    acc = PrivacyAccountant(Budget(1.0, 1e-6))
    acc.spend_dp("first", 0.6)
    with pytest.raises(BudgetExceededError, match="over the budget"):
        acc.spend_dp("second", 0.5)
    assert [s.label for s in acc.spends] == ["first"]
    acc.spend_dp("fits", 0.4)  # exactly up to the budget is fine
    assert acc.guarantee()[0] == pytest.approx(1.0)


def test_gdp_spend_up_to_exact_budget():
    eps, delta = 1.0, 1e-6
    acc = PrivacyAccountant(Budget(eps, delta))
    mu = gdp_mu(eps, delta)
    acc.spend_gdp("half", mu / math.sqrt(2))
    acc.spend_gdp("other half", mu / math.sqrt(2))
    with pytest.raises(BudgetExceededError):
        acc.spend_gdp("one more", 1e-3)


def test_parent_is_checked_and_charged():
    shared = PrivacyAccountant(Budget(1.0))
    fit1 = PrivacyAccountant(Budget(0.6), parent=shared)
    fit1.spend_dp("a", 0.6)
    fit2 = PrivacyAccountant(Budget(0.6), parent=shared)
    with pytest.raises(BudgetExceededError):
        fit2.spend_dp("b", 0.6)  # within fit2's own budget, not the shared one
    assert len(fit2.spends) == 0 and len(shared.spends) == 1


def test_non_private_spend_is_infinite_and_refused_by_budgets():
    ledger = PrivacyAccountant()
    ledger.spend(Spend("exact", epsilon=math.inf))
    assert ledger.guarantee()[0] == math.inf
    with pytest.raises(BudgetExceededError, match="non-private"):
        PrivacyAccountant(Budget(10.0)).spend(Spend("exact", epsilon=math.inf))


def test_report_lists_every_labelled_step():
    acc = PrivacyAccountant(Budget(2.0, 1e-6))
    acc.spend_gdp("g", 0.2)
    acc.spend_dp("l", 0.5)
    report = acc.report()
    assert [s["label"] for s in report.as_dict()["steps"]] == ["g", "l"]
    assert report.mu == pytest.approx(0.2)
    assert "epsilon=" in str(report)


def test_deepcopy_shares_the_ledger():
    acc = PrivacyAccountant(Budget(1.0))
    assert copy.deepcopy(acc) is acc


def _random_spends(rng) -> list[Spend]:
    spends = []
    for i in range(int(rng.integers(1, 8))):
        relation = "replace-one" if rng.random() < 0.15 else "add/remove"
        if rng.random() < 0.6:
            spends.append(Spend(f"g{i}", mu=float(rng.uniform(0.0, 1.5)), relation=relation))
        else:
            delta = float(rng.choice([0.0, rng.uniform(0.0, 1e-6)]))
            spends.append(Spend(f"p{i}", epsilon=float(rng.uniform(0.0, 0.8)), delta=delta, relation=relation))
    return spends


def test_the_check_without_a_root_search_decides_as_the_composed_epsilon_does():
    # The accountant checks a release by the GDP part's delta at the epsilon left (one evaluation) instead of
    # solving for the composed epsilon; away from the root search's tolerance both decide alike.
    from privclust.privacy.budget import _guarantee, _within

    rng = np.random.default_rng(7)
    compared = 0
    for _ in range(3000):
        spends = _random_spends(rng)
        delta = float(rng.choice([1e-8, 1e-6, 1e-3]))
        limit = float(rng.uniform(0.05, 6.0))
        epsilon, total_delta = _guarantee(spends, delta)
        if abs(epsilon - limit) <= 1e-9 * limit:
            continue
        assert _within(spends, delta, limit, delta) == (epsilon <= limit and total_delta <= delta)
        compared += 1
    assert compared > 2900


def test_a_gdp_budget_admits_its_own_mu_exactly_and_nothing_more():
    budget = Budget(1.0, 1e-6)
    mu = gdp_mu(1.0, 1e-6)
    acc = PrivacyAccountant(budget)
    acc.check([Spend("all", mu=mu)])  # gdp_mu is the largest mu within (1, 1e-6): admitted
    with pytest.raises(BudgetExceededError):
        acc.check([Spend("more", mu=mu * (1 + 1e-6))])
    acc.spend_dp("pure", 0.5)  # half the epsilon gone: the same mu no longer fits, a mu that fits in 0.5 does
    with pytest.raises(BudgetExceededError):
        acc.check([Spend("all", mu=mu)])
    acc.check([Spend("half", mu=gdp_mu(0.5, 1e-6))])


def test_a_cover_is_stated_in_its_spends_relation_converted_as_the_accountant_converts_them():
    from privclust.privacy.budget import REPLACE_ONE, Cover

    mixed = [
        Spend("a", mu=0.3),
        Spend("b", epsilon=0.2, delta=1e-7),
        Spend("b2", epsilon=0.3, delta=1e-7),
        Spend("c", mu=0.1, relation=REPLACE_ONE),
    ]
    cover = Cover.of(mixed)
    assert cover.relation == REPLACE_ONE and cover.mu == pytest.approx(math.hypot(0.6, 0.1))
    # each spend converted on its own ((1 + e^eps) delta apiece), as the accountant converts them, not their sum
    expected_delta = (1 + math.exp(0.2)) * 1e-7 + (1 + math.exp(0.3)) * 1e-7
    assert cover.epsilon == pytest.approx(1.0) and cover.delta == pytest.approx(expected_delta, rel=1e-12)
    # the cover costs what the spends cost, in the relation the accountant composes them in
    assert PrivacyAccountant().guarantee(1e-5, cover.spends("x")) == pytest.approx(
        PrivacyAccountant().guarantee(1e-5, mixed)
    )
    # a union with an add/remove cover states that one for replace-one neighbours first (mu 0.5 -> 1.0)
    union = Cover.of([Spend("d", mu=0.5)]).union(cover)
    assert union.relation == REPLACE_ONE and union.mu == pytest.approx(1.0) and union.epsilon == pytest.approx(1.0)
    assert Cover.of([Spend("d", mu=0.5)]).within(union) and not union.within(Cover.of([Spend("d", mu=0.5)]))


def test_plans_of_pure_spends_compose_within_a_budget_only_with_their_deltas_within_it():
    from privclust.privacy.budget import composes_within

    budget = Budget(1.0, 1e-6)
    assert composes_within(budget, [[Spend("a", epsilon=0.5, delta=5e-7)], [Spend("b", epsilon=0.9)]])
    assert not composes_within(budget, [[Spend("a", epsilon=0.5, delta=2e-6)]])  # delta beyond the budget's


def test_a_check_from_running_totals_decides_as_composing_every_spend_does():
    """The accountant keeps running totals of what it recorded, so a check costs the planned spends only; they
    must equal the composition of the whole list bit for bit, whatever the relations (a replace-one spend restates
    every other) and after the list is replaced (a ledger rereading its file)."""
    import random

    from privclust.privacy.budget import REPLACE_ONE, _composition

    rng = random.Random(0)
    for _ in range(50):
        accountant = PrivacyAccountant(Budget(50.0, 1e-3))
        for step in range(40):
            relation = REPLACE_ONE if rng.random() < 0.05 else "add/remove"
            spend = (
                Spend("g", mu=rng.uniform(0.01, 0.3), relation=relation)
                if rng.random() < 0.6
                else Spend("p", epsilon=rng.uniform(0, 0.2), delta=rng.uniform(0, 1e-6), relation=relation)
            )
            planned = [spend, Spend("x", mu=0.05)][: rng.randint(1, 2)]
            assert accountant._composed(planned) == _composition([*accountant.spends, *planned])
            accountant.spend(spend)
            if step == 20:  # the list replaced, as a ledger's reread replaces it: summed anew
                accountant._spends = list(accountant._spends[:10])

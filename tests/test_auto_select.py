"""auto's private selection (issue 27): one plan for every candidate and the comparison, checked before any
row is read; a comparison whose noise matches its sensitivity; the choice and its cost in the fit's record."""

import math

import numpy as np
import pytest

from privclust import Budget, BudgetExceededError, KMeans, PrivacyAccountant
from privclust.algorithms.auto import GREEDY_START_SIGNAL, SELECTION_CANDIDATES, selection_candidates, selects
from privclust.algorithms.select import CLIP_PER_FEATURE, SELECTION_SHARE, selection_query
from privclust.privacy.gdp import gdp_mu
from privclust.queries.plan import Part, PlanningOracle, Portion, Spec, shared_pool

PRIVATE = {"choice": "private"}


def blobs(n, d, k, seed=0):
    rng = np.random.default_rng(seed)
    centers = rng.uniform(-0.7, 0.7, (k, d))
    return centers[rng.integers(0, k, n)] + rng.normal(0, 0.05, (n, d))


def test_private_selection_applies_only_where_the_rule_cannot_tell():
    n = GREEDY_START_SIGNAL * 3 / 0.5
    assert selects(n * 0.99, 6, 3, 0.5, adaptive=True)
    assert not selects(n, 6, 3, 0.5, adaptive=True)  # the greedy start's own signal: the rule decides
    assert not selects(1_000, 3, 3, 0.5, adaptive=True)  # d = 3: the rule decides
    assert not selects(1_000, 6, 3, 0.5, adaptive=False)  # one round: the greedy, nothing to compare


def test_portions_of_one_pool_draw_their_own_parts_and_nothing_more():
    oracle = PlanningOracle(2, Budget(1.0, 1e-6), [], "a planning model")
    own = Spec("a run", (Part("iterations", share=1.0),))
    whole = shared_pool("two runs", (own.prefixed("a: "), 0.5), (own.prefixed("b: "), 0.5))
    plan = oracle.open(whole)
    a, b = Portion(plan, "a: ", own, oracle.budget), Portion(plan, "b: ", own, oracle.budget)
    view_a, view_b = a.open(own), b.open(own)
    mu = gdp_mu(1.0, 1e-6)
    # each half of the pool: mu / sqrt(2), under the name the algorithm knows
    assert view_a.allotment("iterations").mu == pytest.approx(mu / math.sqrt(2))
    assert [s.label for s in view_b.reserved()] == ["b: iterations"]
    view_a._draw("iterations", 1.0)
    with pytest.raises(RuntimeError, match="overdrawn"):
        view_a._draw("iterations", 0.5)
    view_b._draw("iterations", 1.0)  # b's part is its own
    with pytest.raises(RuntimeError, match="planned for a run"):
        a.open(Spec("another run", (Part("iterations", share=1.0),)))


def test_the_comparison_is_centered_and_bounded_by_its_declared_sensitivity():
    rng = np.random.default_rng(0)
    d, clip = 5, CLIP_PER_FEATURE * 5
    candidates = [rng.uniform(-1, 1, (3, d)) for _ in range(4)]
    query = selection_query(candidates, clip)
    (block,) = query.blocks
    assert block.width == 4 and block.bound == pytest.approx(math.sqrt(4) * clip / 2)
    rows = np.vstack([rng.uniform(-1, 1, (500, d)), candidates[0][:1], candidates[1][:1]])  # some on a center
    buckets, values = query.contribution(rows)
    assert np.all(buckets == 0)
    np.testing.assert_allclose(values.sum(axis=1), 0.0, atol=1e-9)  # centered over the candidates
    assert np.linalg.norm(values, axis=1).max() <= block.bound + 1e-9
    # the worst row: zero cost for half the candidates, clipped cost for the other half, meets the bound
    far = [np.zeros((1, d)), np.zeros((1, d)), np.full((1, d), 1.0), np.full((1, d), 1.0)]
    _, worst = selection_query(far, 1.0).contribution(np.zeros((1, d)))
    assert np.linalg.norm(worst) == pytest.approx(math.sqrt(4) * 1.0 / 2)


def test_auto_chooses_privately_says_what_and_spends_one_budget():
    X = blobs(3_000, 5, 3)
    model = KMeans(3, bounds=(-1, 1), public_n=3_000, random_state=0, algorithm_params=PRIVATE).fit(X)
    auto = model.fit_info_["auto"]
    selection = auto["selection"]
    assert auto["chose"] in SELECTION_CANDIDATES and selection["candidates"] == list(SELECTION_CANDIDATES)
    costs = selection["noisy_costs"]
    assert auto["chose"] == min(costs, key=costs.get)
    assert (auto["algorithm"], auto["algorithm_params"]) == selection_candidates(5)[auto["chose"]]
    # the rule's own FastLloyd (the mean start) is one candidate; below d = 32 the other starts compact, for free
    assert selection_candidates(5)["fastlloyd-mean-start"][1]["init"] == "mean"  # auto's init="auto" from d = 3
    assert selection_candidates(5)["fastlloyd"][1]["init"] == "compact"
    # the comparison's noise is its sensitivity, sqrt(T) R^2 / 2, over the selection's mu (a share of the pool's)
    mu = gdp_mu(1.0, model.delta)  # the pool's (the two FastLloyd starts spend no partition-selection delta)
    assert selection["mu"] == pytest.approx(mu * math.sqrt(SELECTION_SHARE), rel=0.01)
    T = len(SELECTION_CANDIDATES)
    assert selection["noise_std"] == pytest.approx(math.sqrt(T) * CLIP_PER_FEATURE * 5 / 2 / selection["mu"])
    # every candidate's releases and the comparison are charged, under their names, and compose to the budget
    labels = {s.label.split(":")[0] for s in model.privacy_spent_.steps}
    assert labels == {*SELECTION_CANDIDATES, "selection/cost"}
    assert model.privacy_spent_.epsilon == pytest.approx(1.0, rel=1e-6)
    assert model.privacy_spent_.delta <= 1e-6 * (1 + 1e-9)


def test_the_default_keeps_the_public_rule():
    X = blobs(3_000, 5, 3)
    model = KMeans(3, bounds=(-1, 1), public_n=3_000, random_state=0).fit(X)
    assert model.fit_info_["auto"]["algorithm"] == "fastlloyd" and "selection" not in model.fit_info_["auto"]


def test_with_a_private_n_the_count_then_the_selection_fit_the_budget():
    X = blobs(3_000, 5, 3)
    model = KMeans(3, bounds=(-1, 1), epsilon=0.5, delta=1e-6, random_state=1, algorithm_params=PRIVATE).fit(X)
    labels = [s.label for s in model.privacy_spent_.steps]
    assert labels.count("rows/count") == 1 and "selection/cost" in labels
    assert model.privacy_spent_.epsilon <= 0.5 + 1e-9 and model.privacy_spent_.delta <= 1e-6


def test_a_selection_the_ledger_cannot_afford_is_refused_before_the_count():
    X = blobs(3_000, 5, 3)
    shared = PrivacyAccountant(Budget(1.2, 1e-6))
    KMeans(3, bounds=(-1, 1), epsilon=1.0, delta=5e-7, accountant=shared, random_state=0).fit(X)
    before = list(shared.spends)
    with pytest.raises(BudgetExceededError):
        KMeans(
            3, bounds=(-1, 1), epsilon=1.0, delta=5e-7, accountant=shared, random_state=1, algorithm_params=PRIVATE
        ).fit(X)
    assert shared.spends == before  # not even the count


def test_choice_is_checked_before_anything_runs():
    with pytest.raises(ValueError, match="choice must be one of"):
        KMeans(2, bounds=(-1, 1), algorithm_params={"choice": "best"}).fit(np.zeros((10, 4)))


def test_the_opendp_map_covers_the_selection_plan_at_no_more_than_the_rule():
    from privclust.opendp import make_private_kmeans

    for public_n in (None, 3_000):
        chooser = KMeans(3, bounds=(-1, 1), public_n=public_n, algorithm_params=PRIVATE)
        labels = {s.label for spends in chooser.planned_spends(5) for s in spends}
        assert "selection: the candidates' costs" in labels  # the selection's plan is in the map's union
        rule = make_private_kmeans(KMeans(3, bounds=(-1, 1), public_n=public_n), n_features=5)
        private = make_private_kmeans(chooser, n_features=5)
        assert private.map(1) == pytest.approx(rule.map(1))  # one pool, whichever way auto chooses


def test_precise_selects_privately_only_where_the_comparison_can_tell():
    from privclust.algorithms.auto import precise
    from privclust.algorithms.select import SELECTION_NOISE, comparison_noise

    budget = Budget(1.0, 1e-6)
    mu = gdp_mu(1.0, 1e-6)
    T = len(SELECTION_CANDIDATES)
    edge = math.sqrt(T) * CLIP_PER_FEATURE / 2 / (math.sqrt(SELECTION_SHARE) * mu * SELECTION_NOISE)  # noise = 0.01
    assert comparison_noise(edge, mu, T) == pytest.approx(SELECTION_NOISE)
    assert precise(edge * 1.01, budget) and not precise(edge * 0.99, budget)
    assert not precise(1e9, Budget(1.0, 0.0))  # no Gaussian pool without a delta

    few = KMeans(3, bounds=(-1, 1), public_n=300, random_state=0, algorithm_params={"choice": "precise"})
    few.fit(blobs(300, 5, 3))
    assert few.fit_info_["auto"]["algorithm"] == "fastlloyd" and "could not tell" in few.fit_info_["auto"]["because"]
    assert "selection/cost" not in {s.label for s in few.privacy_spent_.steps}
    many = KMeans(3, bounds=(-1, 1), public_n=20_000, random_state=0, algorithm_params={"choice": "precise"})
    many.fit(blobs(20_000, 5, 3))  # n epsilon / k = 6,667: below the greedy start's signal, and precise
    assert many.fit_info_["auto"]["selection"]["comparison_noise"] <= SELECTION_NOISE


@pytest.mark.parametrize("public_n", [None, 500])
def test_a_private_choice_without_delta_is_refused_with_the_way_out(public_n):
    shared = PrivacyAccountant()
    model = KMeans(3, bounds=(-1, 1), delta=0.0, public_n=public_n, accountant=shared, algorithm_params=PRIVATE)
    with pytest.raises(ValueError, match="delta > 0.*sulloyd"):
        model.fit(blobs(500, 5, 3))
    assert shared.spends == []

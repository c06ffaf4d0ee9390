"""Max-cover k-means (Nguyen, Chaturvedi & Xu 2021): the implicit exponential mechanism, the cover, accounting, errors."""

import math

import numpy as np
import pytest
from scipy import stats

from privclust import KMeans
from privclust.algorithms.maxcover import greedy_cover_of_counts, greedy_grid_cover, grid_sides
from privclust.geometry.grid import dense_ids
from privclust.geometry.projection import BallProjection, default_projection_dim
from privclust.privacy import NoisyAverage, PrivacyAccountant, sample_exponential
from privclust.privacy.budget import Budget
from privclust.privacy.gdp import gdp_mu
from privclust.privacy.noise import SecureNoise, SeededNoise


def _em_probabilities(scores, eps, log_implicit=None):
    weights = list(np.exp(eps * np.asarray(scores, float) / 2.0))
    if log_implicit is not None:
        weights.append(math.exp(log_implicit))
    weights = np.array(weights)
    return weights / weights.sum()


@pytest.mark.parametrize("noise", [SeededNoise(np.random.SeedSequence(3)), SecureNoise()], ids=["seeded", "secure"])
def test_sample_exponential_draws_the_exponential_mechanism_distribution(noise):
    scores = np.array([0.0, 3.0, 3.0, 1.0, 5.0])
    eps, log_implicit, draws = 1.0, math.log(4.0), 4000
    outcomes = [sample_exponential(scores, eps, 1.0, noise, log_implicit) for _ in range(draws)]
    observed = np.bincount([len(scores) if o is None else o for o in outcomes], minlength=len(scores) + 1)
    expected = _em_probabilities(scores, eps, log_implicit) * draws
    assert stats.chisquare(observed, expected).pvalue > 1e-4


def test_grouped_candidates_draw_as_sample_exponential_does():
    from privclust.privacy.mechanisms import ExponentialCandidates

    scores = np.array([0.0, 3.0, 3.0, 1.0, 5.0])
    candidates = ExponentialCandidates(scores, 1.0, 1.0, math.log(4.0))
    a, b = SeededNoise(np.random.SeedSequence(8)), SeededNoise(np.random.SeedSequence(8))
    repeated = [candidates.draw(a) for _ in range(3000)]
    one_by_one = [sample_exponential(scores, 1.0, 1.0, b, math.log(4.0)) for _ in range(3000)]
    assert repeated == one_by_one  # the same noise calls, in the same order
    observed = np.bincount([len(scores) if o is None else o for o in repeated], minlength=len(scores) + 1)
    assert stats.chisquare(observed, _em_probabilities(scores, 1.0, math.log(4.0)) * 3000).pvalue > 1e-4


def test_sample_exponential_without_implicit_part_never_returns_none():
    noise = SeededNoise(np.random.SeedSequence(0))
    assert all(sample_exponential(np.array([1.0, 2.0]), 1.0, 1.0, noise) is not None for _ in range(200))


def test_sample_exponential_sensitivity_scales_the_temperature():
    noise = SeededNoise(np.random.SeedSequence(1))
    scores = np.array([0.0, 4.0])
    picks = [sample_exponential(scores, 1.0, 2.0, noise) for _ in range(4000)]
    expected = _em_probabilities(scores / 2.0, 1.0)[1]
    assert abs(np.mean(picks) - expected) < 0.03


def test_noisy_average_of_disjoint_sets_costs_one_release():
    mechanism = NoisyAverage(epsilon=1.0, delta=1e-6, diameter=2.0)
    totals = np.array([[500.0, 0.0], [0.0, -900.0]])
    out = mechanism.apply(
        totals, np.array([1000.0, 1000.0]), -np.ones(2), np.ones(2), SeededNoise(np.random.SeedSequence(2))
    )
    assert np.allclose(out, [[0.5, 0.0], [0.0, -0.9]], atol=0.1)
    assert mechanism.spend("x").epsilon == 1.0 and mechanism.spend("x").delta == 1e-6


def test_dense_ids_are_exact_even_when_the_radix_product_overflows():
    rng = np.random.default_rng(0)
    rows = rng.integers(0, 3, size=(2000, 6)) * 10**6
    ids = dense_ids(rows, np.full(6, 4 * 10**6))
    _, reference = np.unique(rows, axis=0, return_inverse=True)
    # the same partition of the rows into equal keys
    assert len(set(zip(ids, reference.ravel()))) == len(set(ids)) == len(set(reference.ravel()))


def test_grid_sides_run_from_about_one_over_n_to_two():
    sides = grid_sides(1000, 2.0)
    assert sides[-1] == 2.0 and sides[0] <= 2.0 / 1000 * 2 and sides[0] >= 1.0 / 1000
    assert np.allclose(np.diff(np.log(sides)), math.log(2.0))


def test_projection_maps_the_box_into_the_unit_ball():
    rng = np.random.default_rng(0)
    project = BallProjection.draw(50, 4, rng)
    corners = rng.choice([-1.0, 1.0], size=(5000, 50))
    assert np.all(np.linalg.norm(project(corners), axis=1) <= 1.0 + 1e-12)
    assert default_projection_dim(50_000) == 5 and default_projection_dim(1) == 1


def test_greedy_cover_finds_the_dense_spots_when_the_budget_is_large():
    rng = np.random.default_rng(1)
    spots = np.array([[0.3, 0.3], [-0.4, 0.1]])
    points = spots[rng.integers(0, 2, 4000)] + rng.normal(0, 0.01, (4000, 2))
    chosen = greedy_grid_cover(points, [0.05, 0.1], 2, 1.0, SeededNoise(np.random.SeedSequence(0)), rng)
    assert chosen.shape == (4, 2)
    for spot in spots:
        assert np.min(np.linalg.norm(chosen - spot, axis=1)) < 0.15


def test_greedy_cover_is_uniform_over_the_grid_when_the_budget_is_tiny():
    rng = np.random.default_rng(2)
    points = np.zeros((50, 2))
    chosen = greedy_grid_cover(points, [0.01], 200, 1e-6, SeededNoise(np.random.SeedSequence(0)), rng)
    # 50 covered grid points among ~40,000: a uniform draw almost never lands near the data
    assert np.mean(np.linalg.norm(chosen, axis=1) < 0.05) < 0.05
    assert np.all(np.abs(chosen) <= 1.0 + 0.01)


def test_greedy_cover_of_counts_takes_the_heaviest_corner_first_and_stops_when_all_is_covered():
    # 1-d: cells 0..3, grid point g is a corner of cells g - 1 and g
    cells = np.array([[0], [1], [3]])
    counts = np.array([5.0, 7.0, 2.0])
    picks = greedy_cover_of_counts(cells, counts, np.array([5]), 10)
    assert picks[0, 0] == 1  # covers cells 0 and 1: 12
    assert picks[1, 0] in (3, 4)  # then cell 3 (either of its corners)
    assert picks.shape == (2, 1)  # nothing is left to cover
    assert greedy_cover_of_counts(np.zeros((0, 3), np.int64), np.zeros(0), np.array([4, 4, 4]), 5).shape == (0, 3)


def _fits(cover):
    """Three seeded fits on four tight clusters in R^8."""
    rng = np.random.default_rng(5)
    centers = rng.uniform(-0.6, 0.6, (4, 8))
    X = np.clip(centers[rng.integers(0, 4, 4000)] + rng.normal(0, 0.03, (4000, 8)), -1, 1)
    params = {"cover": cover}
    models = [
        KMeans(
            4, epsilon=2.0, delta=1e-6, bounds=(-1, 1), algorithm="maxcover", random_state=seed, algorithm_params=params
        ).fit(X)
        for seed in range(3)
    ]
    return models, X, centers


@pytest.fixture(scope="module")
def fitted():
    return _fits("exponential")


@pytest.fixture(scope="module")
def fitted_histogram():
    return _fits("histogram")


def test_the_default_cover_is_the_histogram_cover():
    X = np.random.default_rng(0).uniform(-1, 1, (1000, 3))
    model = KMeans(2, epsilon=1.0, delta=1e-6, bounds=(-1, 1), algorithm="maxcover", random_state=0, public_n=1000)
    assert model.fit(X).fit_info_["cover"] == "histogram"


def test_histogram_cover_spends_what_its_plan_claims(fitted_histogram):
    model = fitted_histogram[0][0]
    steps = model.privacy_spent_.steps
    levels = [s for s in steps if s.label.startswith("max cover: histogram of level") and s.label.endswith("/count")]
    selection = [s for s in steps if s.label.endswith("/threshold")]
    assert len(levels) == len(selection) == model.fit_info_["levels"] > 0
    assert not any("Lemma 17" in s.label for s in steps)
    by = {s.label.split("/")[0]: s for s in steps}
    rest = 2.0 * (1 - 0.05)
    assert by["rows"].epsilon == pytest.approx(0.1)
    assert by["max cover: proxy counts"].epsilon == pytest.approx(0.05 * rest)
    assert model.fit_info_["average"] == "gaussian"
    # one Gaussian pool for the cover's levels, the averages and the final round, shared 0.2 : 0.5 : 0.25 (shares
    # of mu^2), converted at the delta left after the partition selection (1/2)
    mu = gdp_mu(0.95 * rest, 1e-6 / 2)
    assert sum(s.mu**2 for s in levels) == pytest.approx(mu**2 * 0.2 / 0.95)
    assert not any(s.label.startswith("max cover: NoisyAVG") for s in steps)
    averages = [s for s in steps if s.label.startswith("max cover: Gaussian average")]
    assert [s.label.split("/")[1] for s in averages] == ["sum", "count"]
    assert sum(s.mu**2 for s in averages) == pytest.approx(mu**2 * 0.5 / 0.95)
    lloyd = [s for s in steps if s.label.startswith("iteration")]
    assert sum(s.mu**2 for s in lloyd) == pytest.approx(mu**2 * 0.25 / 0.95)
    assert sum(s.delta for s in selection) == pytest.approx(1e-6 / 2)
    assert model.privacy_spent_.epsilon == pytest.approx(2.0, rel=1e-6)
    assert model.privacy_spent_.delta == pytest.approx(1e-6)


def test_histogram_cover_without_final_round_keeps_the_pool_for_its_levels():
    X = np.random.default_rng(0).uniform(-1, 1, (2000, 3))
    split = {"cover": 0.5, "proxy": 0.2, "average": 0.3}
    params = {"cover": "histogram", "final_lloyd": False, "budget_split": split}
    model = KMeans(
        3,
        epsilon=1.0,
        delta=1e-6,
        bounds=(-1, 1),
        algorithm="maxcover",
        algorithm_params=params,
        random_state=0,
        public_n=2000,
    ).fit(X)
    assert model.privacy_spent_.epsilon == pytest.approx(1.0, rel=1e-6)
    assert model.privacy_spent_.delta == pytest.approx(1e-6)
    assert model.cluster_centers_.shape == (3, 3)


def test_maxcover_accounting_is_theorem_16(fitted):
    model = fitted[0][0]
    steps = {s.label.split("/")[0]: s for s in model.privacy_spent_.steps}
    cover = steps["max cover: greedy grid cover (Lemma 17)"]
    eps_draw = model.fit_info_["eps_draw"]
    # Lemma 17: the draws together cost e * eps_E * ln(1/delta_E) / 2 -- computed here independently
    assert cover.epsilon == pytest.approx(math.e * eps_draw * math.log(1.0 / cover.delta) / 2.0)
    proxy = steps["max cover: proxy counts"]
    average = steps["max cover: NoisyAVG per cluster"]
    count = steps["rows"]
    rest = 2.0 * (1 - 0.05)
    assert count.epsilon == pytest.approx(0.1)
    assert (cover.epsilon, proxy.epsilon, average.epsilon) == pytest.approx((0.4 * rest, 0.1 * rest, 0.25 * rest))
    assert cover.delta + average.delta == pytest.approx(2e-6 / 3)
    # the total: Theorem 16's parts, plus the Lloyd round's GDP converted at the delta left over
    assert model.privacy_spent_.epsilon == pytest.approx(2.0, rel=1e-6)
    assert model.privacy_spent_.delta == pytest.approx(1e-6)


@pytest.mark.parametrize("which", ["fitted", "fitted_histogram"])
def test_maxcover_finds_well_separated_clusters(which, request):
    models, X, centers = request.getfixturevalue(which)
    errors = []
    for model in models:
        assert model.cluster_centers_.shape == (4, 8) and np.all(np.isfinite(model.cluster_centers_))
        dist = np.linalg.norm(model.cluster_centers_[:, None] - centers[None], axis=2)
        errors.append(dist.min(axis=1).mean())
    # cluster radius ~0.085, centers ~1.4 apart: most runs place every center on a cluster
    assert sorted(errors)[1] < 0.2


@pytest.mark.parametrize(
    "params, message",
    [
        ({"budget_split": {"cover": 0.5, "proxy": 0.2, "average": 0.2, "lloyd": 0.2}}, "sum to 1"),
        ({"budget_split": {"cover": 0.5, "proxy": 0.5, "average": 0.0}}, "must be positive"),
        ({"budget_split": {"cover": 1.0, "nonsense": 0.0}}, "unknown parts"),
        ({"projection_dim": 0}, "d' >= 1"),
        ({"projection_dim": 40}, r"2\^40"),
        ({"growth": 1.0}, "growth"),
        ({"candidates_per_level": 10**6}, "candidates"),
        ({"nonsense": 1}, "unknown maxcover parameters"),
        ({"final_lloyd": False}, "final_lloyd is False"),
        ({"cover": "argmax"}, "cover must be one of"),
        ({"average": "median"}, "average must be one of"),
        ({"lloyd_iterations": 0}, "lloyd_iterations must be an integer between 1 and 20"),
        ({"lloyd_iterations": 2.5}, "lloyd_iterations"),
        (
            {"lloyd_iterations": 2, "final_lloyd": False, "budget_split": {"cover": 0.5, "proxy": 0.2, "average": 0.3}},
            "no final round",
        ),
        ({"cover": "histogram", "budget_split": {"cover": 0.0, "proxy": 0.5, "average": 0.5}}, "must be positive"),
    ],
)
def test_bad_parameters_are_refused_before_any_data_is_read(params, message):
    ledger = PrivacyAccountant(Budget(1.0, 1e-6))
    X = np.random.default_rng(0).uniform(-1, 1, (500, 3))
    with pytest.raises(ValueError, match=message):
        KMeans(3, bounds=(-1, 1), algorithm="maxcover", algorithm_params=params, accountant=ledger, public_n=500).fit(X)
    assert ledger.spends == []


@pytest.mark.parametrize("params", [{"candidates_per_level": 10**6}, {"growth": 1.00001}])
def test_candidate_limits_are_checked_before_a_private_row_count(params):
    ledger = PrivacyAccountant(Budget(1.0, 1e-6))
    X = np.random.default_rng(0).uniform(-1, 1, (500, 3))
    with pytest.raises(ValueError, match="candidates"):
        KMeans(3, bounds=(-1, 1), algorithm="maxcover", algorithm_params=params, accountant=ledger).fit(X)
    assert ledger.spends == []  # not even the row count


def test_maxcover_refuses_pure_dp_budgets():
    with pytest.raises(ValueError, match="delta > 0"):
        KMeans(2, delta=0.0, bounds=(-1, 1), algorithm="maxcover").fit(np.zeros((10, 2)))


def test_covers_too_big_for_memory_are_refused_before_the_cover_reads_rows():
    ledger = PrivacyAccountant(Budget(1.0, 1e-6))
    X = np.random.default_rng(0).uniform(-1, 1, (1_000, 3))
    model = KMeans(
        2,
        bounds=(-1, 1),
        algorithm="maxcover",
        public_n=10**9,
        accountant=ledger,
        algorithm_params={"projection_dim": 12},
    )
    with pytest.raises(ValueError, match="GiB"):
        model.fit(X)
    assert ledger.spends == []


def test_level_grid_size_counts_the_grid_points_that_can_meet_the_ball():
    from privclust.algorithms.maxcover import level_grid_size

    side, dim = 0.3, 2
    shift = side / 2.0
    # independent count: integers i with the cover [g - side, g + side] of g = shift + side * i meeting [-1, 1]
    per_axis = sum(1 for i in range(-20, 21) if shift + side * i + side >= -1.0 and shift + side * i - side <= 1.0)
    assert math.isclose(level_grid_size(side, dim), dim * math.log(per_axis))


def test_ablation_partition_with_exact_cover_recovers_separated_clusters():
    from privclust.bench.maxcover import maxcover_partition

    rng = np.random.default_rng(4)
    truth = np.array([[-0.6] * 6, [0.6] * 6, [-0.6] * 3 + [0.6] * 3, [0.6] * 3 + [-0.6] * 3])
    X = np.clip(truth[rng.integers(0, 4, 4000)] + rng.normal(0, 0.02, (4000, 6)), -1, 1)
    exact = maxcover_partition(X, (-1.0, 1.0), 4, 0, private_cover=False)
    within = float(((X - truth[np.argmin(((X[:, None] - truth) ** 2).sum(-1), axis=1)]) ** 2).sum(1).mean())
    cost = float(((X[:, None] - exact) ** 2).sum(-1).min(1).mean())
    assert cost < 1.5 * within  # exact means of a partition that separates the four clusters


def test_the_default_projection_shrinks_to_a_cover_that_fits_in_memory():
    X = np.random.default_rng(0).uniform(-1, 1, (2_000, 3))
    # ln(10^6)/2 rounds to 7: a level's cover of 10^6 rows would need ~11 GiB, so d' drops to 5 (2.4 GiB)
    model = KMeans(2, bounds=(-1, 1), algorithm="maxcover", public_n=10**6, random_state=0).fit(X)
    assert model.fit_info_["projection_dim"] == 5
    small = KMeans(2, bounds=(-1, 1), algorithm="maxcover", public_n=10**5, random_state=0).fit(X)
    assert small.fit_info_["projection_dim"] == 6  # the seed's round(ln(10^5)/2) fits (0.5 GiB): untouched


def test_the_final_rounds_reseed_dead_centers_and_shrink_moves(monkeypatch):
    """Issue 27: the final FastLloyd rounds split the cells the projected cover merged (reseeding) and shrink
    their noisy moves, LLOYD_ITERATIONS of them by default."""
    from privclust.algorithms import maxcover as module

    seen = {}
    real = module.run_lloyd

    def spy(ctx, plan, centers, steps, postprocess, **options):
        seen.update(options, steps=len(steps))
        return real(ctx, plan, centers, steps, postprocess, **options)

    monkeypatch.setattr(module, "run_lloyd", spy)
    X = np.random.default_rng(0).uniform(-1.0, 1.0, size=(400, 3))
    model = KMeans(3, bounds=(-1, 1), algorithm="maxcover", public_n=400, random_state=0).fit(X)
    assert seen == {"reseed": True, "shrink": True, "steps": module.LLOYD_ITERATIONS} and module.LLOYD_ITERATIONS > 1
    assert model.n_iter_ == module.LLOYD_ITERATIONS

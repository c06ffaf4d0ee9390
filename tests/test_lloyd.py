"""The DP-Lloyd family: accounting, calibration, constraints, and utility."""

import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting.pld import pld_privacy_accountant

from privclust import KMeans
from privclust.algorithms.lloyd import RHO, sulloyd_split
from privclust.geometry.domain import fold
from privclust.geometry.init import sphere_packing
from privclust.privacy.gdp import gdp_mu
from privclust.queries.central import CentralOracle, block_mechanisms


class Seen:
    """One release as the central oracle served it: the query and its blocks' calibrated mechanisms."""

    def __init__(self, query, allotment):
        self.query, self.structure = query, query.structure
        self.mechanisms = block_mechanisms(query, allotment)


@pytest.fixture
def spy(monkeypatch):
    """Record every release the central oracle serves."""
    seen = []
    original = CentralOracle.answer

    def answer(self, requests):
        seen.extend(Seen(q, a) for q, a in requests)
        return original(self, requests)

    monkeypatch.setattr(CentralOracle, "answer", answer)
    return seen


def pld_epsilon_of(releases, delta):
    """Independent check: compose every Gaussian block release in Google's PLD accountant."""
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    for release in releases:
        for m in release.mechanisms:
            acc.compose(dp_accounting.GaussianDpEvent(m.std / m.sensitivity))
    return acc.get_epsilon(delta)


@pytest.mark.parametrize("public_n", [None, 3000])
@pytest.mark.parametrize("algorithm", ["fastlloyd", "glloyd"])
def test_gaussian_algorithms_spend_exactly_the_budget(blobs, spy, algorithm, public_n):
    X, _ = blobs
    eps, delta = 0.7, 1e-6
    m = KMeans(3, epsilon=eps, delta=delta, bounds=(-1, 1), algorithm=algorithm, public_n=public_n, random_state=0)
    m.fit(X)
    assert m.privacy_spent_.epsilon == pytest.approx(eps, rel=1e-6)
    assert m.privacy_spent_.epsilon <= eps * (1 + 1e-9)
    assert m.privacy_spent_.mu == pytest.approx(gdp_mu(eps, delta), rel=1e-9)
    n_releases = 2 * m.n_iter_ + (public_n is None)
    assert len(m.privacy_spent_.steps) == n_releases == sum(len(r.mechanisms) for r in spy)
    # The noise actually added is enough, by an accountant that shares no code with ours.
    assert pld_epsilon_of(spy, delta) == pytest.approx(eps, rel=0.02)


def test_fastlloyd_noise_follows_the_seeds_split(blobs, spy):
    X, _ = blobs
    d, k, eps, delta = 2, 3, 1.0, 1e-6
    m = KMeans(k, epsilon=eps, delta=delta, bounds=(-1, 1), algorithm="fastlloyd", public_n=len(X), random_state=1).fit(
        X
    )
    T = m.n_iter_
    sigma = 1 / gdp_mu(eps, delta)
    sigma_r = sigma * math.sqrt(1 + math.sqrt(4 * d)) / (4 * d) ** 0.25
    sigma_c = sigma * math.sqrt(1 + math.sqrt(4 * d))
    beta = 2 * math.sqrt(d)
    eta = 0.8 * beta / (2 * k ** (1 / d))
    for t, q in enumerate(spy):
        radius = beta / 2 if t == 0 else eta  # the "step" strategy
        s, c = q.mechanisms
        assert s.sensitivity == pytest.approx(radius) and q.structure.radius == pytest.approx(radius)
        assert s.std == pytest.approx(sigma_r * radius * math.sqrt(T))
        assert c.std == pytest.approx(sigma_c * math.sqrt(T))
        assert q.structure.relative


@pytest.mark.parametrize("d", [1, 2, 4, 5, 8, 30])
def test_sulloyd_split_spends_exactly_per_iteration(d):
    eps_iter = 0.2
    eps_sum, eps_count = sulloyd_split(eps_iter, d)
    assert eps_sum + eps_count == pytest.approx(eps_iter)
    assert eps_sum / eps_count == pytest.approx(d / (4 * d * RHO**2) ** (1 / 3))
    # The swapped split (count's share given to every coordinate) overspends exactly when d >= 5.
    unit = eps_iter / (d + (4 * d * RHO**2) ** (1 / 3))
    swapped = d * (4 * d * RHO**2) ** (1 / 3) * unit + unit
    assert (swapped > eps_iter * (1 + 1e-12)) == (d >= 5)


@pytest.mark.parametrize("d", [3, 9])
def test_sulloyd_total_is_epsilon_and_pure(spy, d):
    X = np.random.default_rng(0).uniform(-1, 1, (2000, d))
    m = KMeans(4, epsilon=0.9, bounds=(-1, 1), algorithm="sulloyd", random_state=0).fit(X)
    assert m.privacy_spent_.epsilon == pytest.approx(0.9)
    assert m.privacy_spent_.delta == 0.0
    total = sum(m.epsilon for r in spy for m in r.mechanisms)
    assert total == pytest.approx(0.9)
    # Per-coordinate Laplace scale is d / eps_sum: the l1 sensitivity of a sum of points in [-1, 1]^d is d.
    s = spy[-1].mechanisms[0]
    assert s.sensitivity == d and s.norm == "l1"
    eps_sum, eps_count = sulloyd_split(0.9 * 0.95 / m.n_iter_, d)
    assert s.epsilon == pytest.approx(eps_sum) and spy[-1].mechanisms[1].epsilon == pytest.approx(eps_count)


def test_radius_constraint_drops_far_points():
    from privclust.queries.voronoi import VoronoiCells

    cells = VoronoiCells(np.array([[0.0, 0.0]]), radius=0.5, relative=True)
    ids, _ = cells.assign(np.array([[0.1, 0.1], [0.6, 0.0], [0.0, -0.49]]))
    assert ids.tolist() == [0, -1, 0]


def test_fold_reflects_into_the_box():
    x = np.array([-3.2, -1.5, -1.0, 0.3, 1.0, 1.25, 2.9, 5.0])
    y = fold(x)
    assert np.all((y >= -1) & (y <= 1))
    np.testing.assert_allclose(y, [0.8, -0.5, -1.0, 0.3, 1.0, 0.75, -0.9, 1.0], atol=1e-12)


@pytest.mark.parametrize("k,d", [(1, 2), (5, 2), (15, 2), (10, 50)])
def test_sphere_packing_spreads_centers_in_the_box(k, d):
    c = sphere_packing(k, d, np.random.default_rng(0))
    assert c.shape == (k, d) and np.all(np.abs(c) <= 1)
    if k > 1:
        dist = np.linalg.norm(c[:, None] - c[None], axis=-1) + np.eye(k) * 9
        assert dist.min() > 0.2
    assert np.array_equal(c, sphere_packing(k, d, np.random.default_rng(0)))


def _plain_packing_pass(k, d, a, rng, tries=100):
    """The rejection sampler without a grid: every candidate against every placed point."""
    centers = []
    for _ in range(k):
        for batch in (1, tries - 1):
            cand = rng.uniform(-1.0 + a, 1.0 - a, size=(batch, d))
            placed = np.array(centers).reshape(-1, d)
            far = [i for i in range(batch) if np.all(((placed - cand[i]) ** 2).sum(1) >= (2.0 * a) ** 2)]
            if far:
                centers.append(cand[far[0]])
                break
        else:
            return None
    return np.array(centers)


@pytest.mark.parametrize("k,d,a", [(400, 2, 0.04), (400, 2, 0.07), (200, 3, 0.1), (150, 6, 0.3), (60, 10, 0.45)])
def test_the_packing_grid_keeps_exactly_the_points_the_plain_sampler_keeps(k, d, a):
    from privclust.geometry.init import _place

    fast = _place(k, d, a, np.random.default_rng(7), 100)
    plain = _plain_packing_pass(k, d, a, np.random.default_rng(7))
    assert (fast is None) == (plain is None)
    if plain is not None:
        np.testing.assert_array_equal(fast, plain)


def test_sphere_packing_reports_its_progress_as_it_goes():
    seen = []
    centers = sphere_packing(600, 2, np.random.default_rng(0), progress=seen.append)
    assert len(seen) > 16 and seen == sorted(seen) and 0.0 <= seen[0] < 0.1 and seen[-1] == 1.0
    assert np.array_equal(centers, sphere_packing(600, 2, np.random.default_rng(0)))  # listening changes nothing


def test_tiny_noisy_clusters_keep_their_previous_center(blobs):
    X, _ = blobs
    # Extremely small epsilon: counts are pure noise, yet centers stay finite and in the box.
    m = KMeans(5, epsilon=1e-3, delta=1e-6, bounds=(-1, 1), random_state=3).fit(X)
    assert np.all(np.isfinite(m.cluster_centers_)) and np.all(np.abs(m.cluster_centers_) <= 1)


@pytest.mark.parametrize("algorithm", ["fastlloyd", "glloyd", "sulloyd"])
def test_private_algorithms_find_well_separated_clusters(algorithm):
    rng = np.random.default_rng(11)
    centers = np.array([[-0.6, -0.5], [0.55, -0.4], [0.0, 0.6]])
    X = np.clip(centers[rng.integers(0, 3, 30_000)] + rng.normal(0, 0.06, (30_000, 2)), -1, 1)
    floor = KMeans(3, bounds=(-1, 1), algorithm="nonprivate-lloyd", random_state=0).fit(X).inertia_
    costs = [
        KMeans(3, epsilon=1.0, delta=1e-6, bounds=(-1, 1), algorithm=algorithm, random_state=s).fit(X).inertia_
        for s in range(5)
    ]
    assert np.median(costs) < 1.5 * floor


def test_fastlloyd_beats_baselines_in_high_dimension():
    """Diaa et al.'s headline: the radius constraint pays off as d grows."""
    rng = np.random.default_rng(5)
    d, k, n = 20, 4, 4000
    centers = rng.uniform(-0.6, 0.6, (k, d))
    X = np.clip(centers[rng.integers(0, k, n)] + rng.normal(0, 0.05, (n, d)), -1, 1)

    def median_cost(alg):
        return np.median(
            [
                KMeans(k, epsilon=0.5, delta=1e-6, bounds=(-1, 1), algorithm=alg, public_n=n, random_state=s)
                .fit(X)
                .inertia_
                for s in range(6)
            ]
        )

    fast = median_cost("fastlloyd")
    assert fast < median_cost("sulloyd")
    assert fast < median_cost("glloyd")


def test_lloyd_baseline_is_non_private_and_converges(blobs):
    X, centers = blobs
    m = KMeans(3, bounds=(-1, 1), algorithm="nonprivate-lloyd", random_state=0).fit(X)
    assert m.privacy_spent_.epsilon == math.inf
    assert m.n_iter_ < 100
    found = np.sort(m.cluster_centers_[:, 0])
    np.testing.assert_allclose(found, np.sort(centers[:, 0]), atol=0.02)


def test_dead_centers_split_the_largest_cells_into_pieces_above_the_noise():
    from privclust.algorithms.lloyd import SPLIT_REACH, LloydStep, reseed_dead
    from privclust.queries.base import Block

    centers = np.array([[0.0, 0.0], [0.5, 0.5], [-0.9, 0.9], [0.9, -0.9], [0.9, 0.9]])
    counts = np.array([600.0, 350.0, 0.4, -2.0, 1.0])  # the last three are noise (std 10)
    step = LloydStep(Block("sum", 2, 1.0), count_share=0.5, radius=0.2)
    moved = reseed_dead(centers, counts, 10.0, step, np.random.default_rng(0))
    reach = SPLIT_REACH * 0.2
    # the largest cell takes two (pieces of 200 rows), the second one (175 rows each): all above 8 stds
    near_first = np.isclose(np.linalg.norm(moved - centers[0], axis=1), reach)
    near_second = np.isclose(np.linalg.norm(moved - centers[1], axis=1), reach)
    assert near_first.sum() == 3 and near_second.sum() == 2  # the cells' own centers move by the reach too
    # with a noise std of 100, no piece would clear 8 stds: nothing moves
    np.testing.assert_array_equal(reseed_dead(centers, counts, 100.0, step, np.random.default_rng(0)), centers)
    alive = np.array([500.0, 300.0, 50.0, 40.0, 30.0])
    np.testing.assert_array_equal(reseed_dead(centers, alive, 1.0, step, np.random.default_rng(0)), centers)
    # within 2 noise stds of nothing but over 1% of the rows: a small cluster's center, not a dead one
    small = np.array([600.0, 350.0, 15.0, 12.0, 11.0])
    np.testing.assert_array_equal(reseed_dead(centers, small, 10.0, step, np.random.default_rng(0)), centers)
    # with k = 20 a cell of 1% of the rows is a fifth of the mean cell: dead only under a tenth of it (50)
    many = np.r_[np.full(19, 10_000.0 / 19), 60.0]  # 60: within 2 stds (31) and under 1%, over a tenth (50)
    spread = np.random.default_rng(1).uniform(-1.0, 1.0, size=(20, 2))
    np.testing.assert_array_equal(reseed_dead(spread, many, 31.0, step, np.random.default_rng(0)), spread)
    many[-1] = 30.0
    assert not np.array_equal(reseed_dead(spread, many, 31.0, step, np.random.default_rng(0))[-1], spread[-1])


def test_shrinkage_keeps_a_noisy_move_and_drops_a_pure_noise_one():
    from privclust.algorithms.lloyd import SHRINK_MIN_D, shrink_moves

    d = 50
    rng = np.random.default_rng(1)
    centers = np.zeros((2, d))
    signal = np.full(d, 0.5)  # a large cell's true move, far above its noise
    noise = rng.normal(0.0, 1.0, size=(2, d))  # sum std 100 over counts 1,000 and 100: 0.1 and 1 per coordinate
    counts = np.array([1000.0, 100.0])
    new = np.vstack([signal + 0.1 * noise[0], 1.0 * noise[1]])
    shrunk = shrink_moves(centers, new, np.array([True, True]), counts, 100.0)
    assert np.linalg.norm(shrunk[0] - signal) < np.linalg.norm(new[0] - signal)  # closer to the true move
    assert np.linalg.norm(shrunk[0]) > 0.9 * np.linalg.norm(new[0])  # and most of it kept
    assert np.linalg.norm(shrunk[1]) < 0.2 * np.linalg.norm(new[1])  # pure noise: (nearly) no move
    low = np.zeros((2, SHRINK_MIN_D - 1))
    np.testing.assert_array_equal(shrink_moves(low, low + 1.0, np.array([True, True]), counts, 100.0), low + 1.0)


def test_auto_init_takes_the_mean_start_with_its_shape_by_dimension():
    from privclust.algorithms.lloyd import AUTO_FASTLLOYD, MEAN_START_MIN_D

    rng = np.random.default_rng(2)
    # the mean start: compact sphere packing about the mean below MEAN_START_MIN_D, random directions from it
    for d, around in ((MEAN_START_MIN_D - 1, "compact sphere packing"), (MEAN_START_MIN_D, "random directions")):
        X = rng.uniform(-1.0, 1.0, size=(500, d))
        model = KMeans(3, bounds=(-1, 1), algorithm="fastlloyd", algorithm_params=AUTO_FASTLLOYD, public_n=500)
        info = model.fit(X).fit_info_["init"]
        assert info["start"] == "noisy mean" and info["around"] == around
    with pytest.raises(ValueError, match="init_share is the mean start's share"):
        KMeans(  # a public start: no mean start, no share to take
            3,
            bounds=(-1, 1),
            init=np.zeros((3, 2)),
            algorithm="fastlloyd",
            algorithm_params={"init": "auto", "init_share": 0.1},
        ).fit(rng.uniform(-1.0, 1.0, size=(50, 2)))


def test_auto_init_keeps_a_public_start_in_many_dimensions():
    """init=<array> is the user's public start: auto's FastLloyd (init='auto') starts there, not at the noisy mean."""
    from privclust.algorithms.lloyd import MEAN_START_MIN_D

    X = np.random.default_rng(4).uniform(-1.0, 1.0, size=(300, MEAN_START_MIN_D))
    model = KMeans(3, bounds=(-1, 1), init=X[:3].copy(), public_n=300, random_state=0).fit(X)
    assert model.fit_info_["auto"]["chose"] == "fastlloyd"
    assert model.fit_info_["init"]["start"] == "public centers (init)"


def test_auto_fit_on_mnist_leaves_few_centers_nearly_empty():
    """Issue 27: ``auto`` on MNIST at epsilon = 1 left 6-8 of 10 centers under 1% of the rows (noisy sizes)."""
    from privclust import datasets

    ds = datasets.load("mnist")
    empty = [
        KMeans(10, bounds=ds.bounds, epsilon=1.0, random_state=seed).fit(ds.X).fit_info_["nearly_empty_centers"]
        for seed in range(3)
    ]
    assert max(empty) <= 2


def test_reseeding_is_an_option_of_the_private_lloyd_family(blobs):
    X, _ = blobs
    for algorithm in ("fastlloyd", "glloyd", "sulloyd"):
        KMeans(3, bounds=(-1, 1), algorithm=algorithm, algorithm_params={"reseed": True, "shrink": True}).fit(X)
    with pytest.raises(ValueError, match="reseed must be True or False"):
        KMeans(3, bounds=(-1, 1), algorithm="fastlloyd", algorithm_params={"reseed": "yes"}).fit(X)
    with pytest.raises(ValueError, match="shrink must be True or False"):
        KMeans(3, bounds=(-1, 1), algorithm="glloyd", algorithm_params={"shrink": 1}).fit(X)


def test_the_mean_start_with_shrinkage_takes_at_least_its_minimum_of_steps():
    from privclust.algorithms.lloyd import MEAN_START_MIN_ITERATIONS, MIN_ITERATIONS

    rng = np.random.default_rng(4)
    X = np.clip(rng.normal(0, 0.3, (600, 40)), -1, 1)  # few rows in many dimensions: eq. 21 asks for its minimum

    def steps(max_iter=None, **params):
        model = KMeans(
            4, bounds=(-1, 1), algorithm="fastlloyd", algorithm_params=params, max_iter=max_iter, random_state=0
        )
        return model.fit(X).n_iter_

    assert steps(init="mean") == MIN_ITERATIONS  # without shrinkage: eq. 21's count
    assert steps(init="mean", shrink=True) == MEAN_START_MIN_ITERATIONS
    assert steps(init="sphere", shrink=True) == MIN_ITERATIONS
    assert steps(3, init="mean", shrink=True) == 3  # the user's max_iter wins


def _one_center_fit(X, far_rows, epsilon=1e9):
    """FastLloyd with one center started at the origin, one round at the final radius, nothing but the step."""
    params = {"far_rows": far_rows, "radii": "shrinking", "first_radius": 0.1, "final_radius": 0.1}
    return KMeans(
        1,
        epsilon=epsilon,
        delta=1e-6,
        bounds=(-1, 1),
        algorithm="fastlloyd",
        algorithm_params=params,
        init=np.zeros((1, X.shape[1])),
        max_iter=1,
        public_n=len(X),
        random_state=0,
    ).fit(X)


def test_far_rows_clipped_pull_their_center_by_the_radius_and_are_counted(spy):
    """far_rows='clip': a row beyond the radius adds radius times its direction to its cell's sum and 1 to its
    count; far_rows='drop' (the paper) leaves it out.  The sums' sensitivity is the radius either way."""
    d = 2
    radius = 0.1 * 2 * math.sqrt(d)  # the final radius, in units of the unit box's diagonal
    X = np.zeros((100, d))
    X[:10] = [0.9, 0.0]  # ten rows far beyond the radius, along the first axis
    clipped = _one_center_fit(X, "clip")
    s, c = spy[-1].mechanisms
    assert s.sensitivity == pytest.approx(radius) and c.sensitivity == pytest.approx(1.0)
    assert spy[-1].structure.radius is None  # every row is in its cell
    # the center moves by the clipped rows' sum over all 100 rows (noise at epsilon 1e9 is negligible)
    np.testing.assert_allclose(clipped.cluster_centers_[0], [10 * radius / 100, 0.0], atol=1e-6)
    assert clipped.cluster_sizes_[0] == pytest.approx(100, abs=1e-3)
    dropped = _one_center_fit(X, "drop")
    assert spy[-1].structure.radius == pytest.approx(radius)
    np.testing.assert_allclose(dropped.cluster_centers_[0], [0.0, 0.0], atol=1e-6)
    assert dropped.cluster_sizes_[0] == pytest.approx(90, abs=1e-3)


def test_shrinking_radii_fall_geometrically_and_set_each_rounds_sensitivity(blobs, spy):
    from privclust.algorithms.lloyd import shrinking_radii

    X, _ = blobs
    d, T = X.shape[1], 5
    params = {"far_rows": "clip", "radii": "shrinking", "first_radius": 0.4, "final_radius": 0.05}
    KMeans(3, bounds=(-1, 1), algorithm="fastlloyd", algorithm_params=params, max_iter=T, random_state=0).fit(X)
    radii = shrinking_radii(d, T, 0.4, 0.05)
    diagonal = 2 * math.sqrt(d)
    assert radii[0] == pytest.approx(0.4 * diagonal) and radii[-1] == pytest.approx(0.05 * diagonal)
    ratios = np.array(radii[1:]) / np.array(radii[:-1])
    np.testing.assert_allclose(ratios, ratios[0], rtol=1e-12)  # geometric
    rounds = [r for r in spy if r.query.label.startswith("iteration")]
    assert [r.mechanisms[0].sensitivity for r in rounds] == pytest.approx(radii)
    # the noise per unit of sensitivity is the same in every round: only the radius scales it
    assert len({round(r.mechanisms[0].std / r.mechanisms[0].sensitivity, 12) for r in rounds}) == 1


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"first_radius": 0.3}, "need radii='shrinking'"),
        ({"radii": "shrinking", "first_radius": 0.1, "final_radius": 0.2}, "must be at most first_radius"),
        ({"radii": "shrinking", "final_radius": 2.0}, "final_radius"),
    ],
)
def test_radii_options_are_checked_before_any_row_is_read(blobs, spy, params, message):
    with pytest.raises(ValueError, match=message):
        KMeans(3, bounds=(-1, 1), algorithm="fastlloyd", algorithm_params=params, random_state=0).fit(blobs[0])
    assert spy == []


def test_overclustered_rounds_release_m_k_cells_then_k_at_the_same_noise(blobs, spy):
    from privclust.algorithms.lloyd import AUTO_FASTLLOYD, merged_rounds

    X, _ = blobs
    plain_params, over_params = AUTO_FASTLLOYD, {**AUTO_FASTLLOYD, "overcluster": 2}
    fits = {}
    for name, params in (("plain", plain_params), ("over", over_params)):
        spy.clear()
        model = KMeans(3, epsilon=0.7, bounds=(-1, 1), algorithm="fastlloyd", algorithm_params=params, max_iter=5)
        fits[name] = (model.fit(X), [r for r in spy if r.query.label.startswith("iteration")])
    over, rounds = fits["over"]
    assert [r.query.n_buckets for r in rounds] == [6, 6, 6, 3, 3]  # the last third of the rounds, at least 2
    assert over.fit_info_["overcluster"] == {"centers": 6, "merged after round": 3, "rounds": 5}
    assert [merged_rounds(T) for T in (2, 4, 6, 7, 8, 11, 12)] == [2, 2, 2, 2, 3, 4, 4]
    assert over.cluster_centers_.shape == (3, X.shape[1]) and over.cluster_sizes_.shape == (3,)
    # the cells' number changes no release's sensitivity or noise, so the spend is the plain fit's
    plain, plain_rounds = fits["plain"]
    stds = [[(m.sensitivity, m.std) for m in r.mechanisms] for r in rounds]
    assert stds == [[(m.sensitivity, m.std) for m in r.mechanisms] for r in plain_rounds]
    assert over.privacy_spent_.epsilon == pytest.approx(plain.privacy_spent_.epsilon, rel=1e-12)


def test_merging_cells_is_weighted_k_means_of_their_centers():
    from privclust.algorithms.lloyd import merge_cells

    centers = np.array([[-0.6, 0.0], [-0.4, 0.0], [0.5, 0.5], [0.5, 0.7], [0.9, -0.9], [0.0, 0.0]])
    sizes = np.array([100.0, 300.0, 50.0, 150.0, 80.0, -4.0])  # the last cell's noisy size is below zero: empty
    merged = merge_cells(centers, sizes, 3, np.random.default_rng(0))
    expected = [[-0.45, 0.0], [0.5, 0.65], [0.9, -0.9]]  # the weighted means; the empty cell pulls nothing
    np.testing.assert_allclose(merged[np.argsort(merged[:, 0])], expected, atol=1e-6)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"init": "greedy", "overcluster": 2}, "the greedy start gives k"),
        ({"overcluster": 2, "max_iter": 1}, "max_iter >= 2"),
        ({"overcluster": 1}, "overcluster must be an integer between 2 and 8"),
    ],
)
def test_overcluster_options_are_checked_before_any_row_is_read(blobs, spy, params, message):
    params = dict(params)
    max_iter = params.pop("max_iter", None)
    with pytest.raises(ValueError, match=message):
        KMeans(3, bounds=(-1, 1), algorithm="fastlloyd", algorithm_params=params, max_iter=max_iter).fit(blobs[0])
    assert spy == []


def test_overcluster_refuses_a_public_start_before_any_row_is_read(blobs, spy):
    with pytest.raises(ValueError, match="a public start"):
        KMeans(3, bounds=(-1, 1), algorithm="fastlloyd", algorithm_params={"overcluster": 2}, init=blobs[0][:3]).fit(
            blobs[0]
        )
    assert spy == []

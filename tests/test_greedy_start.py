"""FastLloyd's private greedy start: the split is charged as documented, a refusal spends nothing, the start is used."""

import math

import numpy as np
import pytest
from test_lloyd import pld_epsilon_of, spy  # noqa: F401  (the fixture)

from privclust import Budget, BudgetExceededError, KMeans, PrivacyAccountant
from privclust.algorithms import greedy as greedy_module
from privclust.algorithms import lloyd as lloyd_module
from privclust.algorithms.lloyd import DEFAULT_INIT_SHARE, START_SELECTION_DELTA
from privclust.local.oracle import LocalOracle
from privclust.privacy.gdp import compose_mu, gdp_epsilon, gdp_mu
from privclust.privacy.noise import SecureNoise
from privclust.queries import MemoryRows, count_query
from privclust.queries.central import CentralOracle
from privclust.queries.plan import SAMPLED, CapabilityError, Part


def greedy_start(k=3, share=None, **kwargs):
    params = {"init": "greedy"} | ({} if share is None else {"init_share": share})
    return KMeans(k, bounds=(-1, 1), algorithm="fastlloyd", algorithm_params=params, **kwargs)


@pytest.mark.parametrize("share", [None, 0.2, 0.4])
@pytest.mark.parametrize("public_n", [None, 3000])
def test_the_split_is_charged_exactly_as_documented(blobs, spy, share, public_n):  # noqa: F811
    X, _ = blobs
    eps, delta = 0.7, 1e-6
    m = greedy_start(share=share, epsilon=eps, delta=delta, public_n=public_n, random_state=0).fit(X)
    s = DEFAULT_INIT_SHARE if share is None else share
    steps = m.privacy_spent_.steps
    selection = sum(st.delta for st in steps if not st.is_gdp)
    mu = gdp_mu(eps, delta - selection)
    mu_greedy = compose_mu(*[st.mu for st in steps if st.is_gdp and st.label.startswith("greedy")])
    mu_lloyd = compose_mu(*[st.mu for st in steps if st.is_gdp and not st.label.startswith("greedy")])
    assert mu_greedy**2 == pytest.approx(s * mu**2, rel=1e-9)
    assert mu_lloyd**2 == pytest.approx((1 - s) * mu**2, rel=1e-9)
    assert ("rows/count" in [st.label for st in steps]) == (public_n is None)  # FastLloyd's count, in its part
    assert m.privacy_spent_.epsilon == pytest.approx(eps, rel=1e-6)
    assert m.privacy_spent_.epsilon <= eps * (1 + 1e-9)
    # fit_info_ says what was done, from the plan alone
    info = m.fit_info_["init"]
    assert info["start"] == "greedy" and info["init_share"] == s
    assert info["mu"]["greedy"] == pytest.approx(mu_greedy) and info["mu"]["fastlloyd"] == pytest.approx(mu_lloyd)
    # d = 2: every greedy level is released whole, so no selection delta, and the noise actually added is
    # enough by an accountant that shares no code with ours
    assert selection == 0.0
    assert pld_epsilon_of(spy, delta) == pytest.approx(eps, rel=0.02)


def test_the_greedys_selection_delta_is_half_its_part_of_delta():
    rng = np.random.default_rng(1)
    X = rng.uniform(-1, 1, (2000, 9))
    m = greedy_start(share=0.4, epsilon=1.0, delta=1e-6, public_n=2000, random_state=0).fit(X)
    selection = sum(st.delta for st in m.privacy_spent_.steps if not st.is_gdp)
    assert selection == pytest.approx(0.4 * START_SELECTION_DELTA * 1e-6 / 2)
    assert m.fit_info_["init"]["delta"]["greedy selection"] == pytest.approx(selection)
    assert m.privacy_spent_.epsilon == pytest.approx(1.0, rel=1e-6)
    assert m.privacy_spent_.delta <= 1e-6


def test_a_refused_fit_spends_nothing(blobs):
    X, _ = blobs
    shared = PrivacyAccountant(Budget(1.2, 1e-6))
    KMeans(3, epsilon=1.0, delta=5e-7, bounds=(-1, 1), algorithm="fastlloyd", accountant=shared, random_state=0).fit(X)
    before = len(shared.spends)
    # The greedy's part alone (0.3 of the budget) would fit in what is left; the whole fit does not.
    with pytest.raises(BudgetExceededError):
        greedy_start(epsilon=1.0, delta=4e-7, accountant=shared, random_state=1).fit(X)
    assert len(shared.spends) == before
    # A fresh ledger that affords the greedy's part of the plan alone, not the whole: nothing is spent.
    mu = gdp_mu(1.0, 1e-6)
    greedy_alone = gdp_epsilon(math.sqrt(DEFAULT_INIT_SHARE) * mu, 1e-6)
    tight = PrivacyAccountant(Budget((greedy_alone + 1.0) / 2, 1e-6))
    with pytest.raises(BudgetExceededError):
        greedy_start(epsilon=1.0, delta=1e-6, accountant=tight, public_n=3000, random_state=1).fit(X)
    assert tight.spends == []
    # A model that cannot run FastLloyd's rounds refuses before the greedy's single round is spent.
    with pytest.raises(CapabilityError):
        greedy_start(epsilon=1.0, privacy_model="local", accountant=shared, random_state=2).fit(X)
    assert len(shared.spends) == before


def test_fastlloyd_starts_from_the_greedys_centers(blobs, monkeypatch):
    X, _ = blobs
    seen = {}
    run_greedy, run_lloyd = greedy_module.run_greedy, lloyd_module.run_lloyd

    def record_greedy(*args, **kwargs):
        seen["greedy"] = run_greedy(*args, **kwargs).centers
        return type("R", (), {"centers": seen["greedy"]})()

    def record_lloyd(ctx, plan, centers, *args, **kwargs):
        seen["start"] = centers.copy()
        return run_lloyd(ctx, plan, centers, *args, **kwargs)

    monkeypatch.setattr(lloyd_module, "run_greedy", record_greedy)  # where the greedy start calls it
    monkeypatch.setattr(lloyd_module, "run_lloyd", record_lloyd)
    greedy_start(epsilon=1.0, random_state=3).fit(X)
    np.testing.assert_array_equal(seen["start"], seen["greedy"])
    KMeans(3, bounds=(-1, 1), algorithm="fastlloyd", random_state=3).fit(X)  # the default: sphere packing
    assert not np.allclose(seen["start"], seen["greedy"])


def test_a_crowded_corner_is_found_from_the_greedy_start_and_lost_from_sphere_packing():
    """Three tight clusters in one corner: sphere packing's centers start far away and FastLloyd's few
    clipped steps do not bring them all there; the greedy puts a center on each."""
    rng = np.random.default_rng(4)
    centers = np.array([[0.6, 0.6], [0.85, 0.6], [0.6, 0.85]])
    X = centers[rng.integers(0, 3, 20_000)] + rng.normal(0, 0.02, (20_000, 2))
    cost = {}
    for init in ("sphere", "greedy"):
        runs = [
            KMeans(3, epsilon=1.0, bounds=(-1, 1), algorithm="fastlloyd", algorithm_params={"init": init},
                   public_n=20_000, random_state=seed).fit(X).inertia_
            for seed in range(5)
        ]  # fmt: skip
        cost[init] = np.median(runs)
    assert cost["greedy"] < 0.5 * cost["sphere"]


def test_the_default_start_is_sphere_packing_and_says_so(blobs):
    m = KMeans(3, bounds=(-1, 1), algorithm="fastlloyd", random_state=0).fit(blobs[0])
    assert m.fit_info_["init"] == {"start": "sphere packing"}
    assert not any(st.label.startswith("greedy") for st in m.privacy_spent_.steps)


@pytest.mark.parametrize(
    "algorithm, params, message",
    [
        ("fastlloyd", {"init": "kmeans++"}, "init must be one of"),
        ("fastlloyd", {"init_share": 0.3}, "needs init='greedy' or 'mean'"),
        ("fastlloyd", {"init": "compact", "init_share": 0.3}, "needs init='greedy' or 'mean'"),
        ("fastlloyd", {"init": "mean", "init_share": 0.01}, "init_share must be a number"),
        ("fastlloyd", {"init": "greedy", "init_share": 0.99}, "init_share must be a number"),
        ("fastlloyd", {"init": "greedy", "init_share": True}, "init_share must be a number"),
        ("glloyd", {"init": "greedy"}, "unknown GLloyd parameters"),
    ],
)
def test_bad_start_parameters_are_refused_before_anything_is_spent(blobs, algorithm, params, message):
    shared = PrivacyAccountant(Budget(5.0, 1e-5))
    with pytest.raises(ValueError, match=message):
        KMeans(3, bounds=(-1, 1), algorithm=algorithm, algorithm_params=params, accountant=shared).fit(blobs[0])
    assert shared.spends == []


def test_on_many_rows_the_greedy_reads_a_poisson_sample_at_the_same_price(blobs, monkeypatch):
    X, _ = blobs  # 3,000 rows, k = 3: n eps / k = 1000 at eps = 1
    read = []
    original = greedy_module.run_greedy

    def run_greedy(ctx, spec, plan):
        read.append(plan.oracle.rows)
        return original(ctx, spec, plan)

    monkeypatch.setattr(lloyd_module, "run_greedy", run_greedy)  # where the greedy start calls it
    fits = {}
    for signal in (math.inf, 100.0):  # 100: the greedy reads rows kept with probability 100 * 3 / 3000 = 0.1
        monkeypatch.setattr(greedy_module, "SAMPLE_SIGNAL", signal)
        fits[signal] = greedy_start(epsilon=1.0, delta=1e-6, public_n=3000, random_state=3).fit(X)
    everything, sample = read
    assert everything.count() == 3000 and fits[math.inf].fit_info_["init"]["sample_rate"] == 1.0
    assert fits[100.0].fit_info_["init"]["sample_rate"] == pytest.approx(0.1)
    assert 300 - 5 * 16 < sample.count() < 300 + 5 * 16  # Binomial(3000, 0.1): sd 16.4
    kept = sample.data
    assert {tuple(row) for row in kept} <= {tuple(row) for row in X} and len({tuple(row) for row in kept}) == len(kept)
    # the same price: a DP release on a data-independent sample costs what it costs on all rows
    steps = [[(st.label, st.mu, st.epsilon, st.delta) for st in fits[s].privacy_spent_.steps] for s in fits]
    assert steps[0] == steps[1]
    # FastLloyd still reads every row: its last noisy cell sizes add up to about n, not a tenth of it
    assert abs(fits[100.0].cluster_sizes_.sum() - 3000) < 300


def test_a_poisson_sample_keeps_each_row_with_the_rate():
    rows = MemoryRows(np.arange(1000.0).reshape(-1, 1), 1)
    rng = np.random.default_rng(0)
    sizes = [rows.poisson_sample(0.3, rng).count() for _ in range(400)]
    assert np.mean(sizes) == pytest.approx(300, abs=4 * np.sqrt(1000 * 0.3 * 0.7 / 400))
    assert np.std(sizes) == pytest.approx(np.sqrt(1000 * 0.3 * 0.7), rel=0.15)
    hits = np.zeros(1000)
    for _ in range(400):
        hits[rows.poisson_sample(0.3, rng).data[:, 0].astype(int)] += 1
    assert np.all(hits > 0) and abs(hits[:500].mean() - hits[500:].mean()) < 4 * np.sqrt(400 * 0.21 / 500)


def test_a_poisson_samples_coins_are_drawn_block_by_block_and_keep_every_block_at_the_rate(monkeypatch):
    from privclust.queries import rows as rows_module

    monkeypatch.setattr(rows_module, "COIN_BLOCK", 64)  # 1000 rows: 16 blocks, the last one short
    rng = np.random.default_rng(1)
    hits = np.zeros(1000)
    for _ in range(300):
        kept = rows_module.poisson_indices(1000, 0.25, rng)
        assert np.all(np.diff(kept) > 0) and kept.min() >= 0 and kept.max() < 1000  # sorted, distinct rows
        hits[kept] += 1
    per_block = hits[: 15 * 64].reshape(15, 64).mean(axis=1) / 300
    assert np.all(np.abs(per_block - 0.25) < 4 * np.sqrt(0.25 * 0.75 / (64 * 300)))
    assert abs(hits[15 * 64 :].mean() / 300 - 0.25) < 4 * np.sqrt(0.25 * 0.75 / (40 * 300))
    assert rows_module.poisson_indices(0, 0.5, rng).size == 0


def test_a_sampled_plan_shares_its_parts_and_only_the_curator_in_memory_samples():
    ledger = PrivacyAccountant(Budget(1.0, 1e-6))
    oracle = CentralOracle(MemoryRows(np.zeros((50, 2)), 2), Budget(1.0, 1e-6), ledger, SecureNoise())
    assert SAMPLED in oracle.capabilities
    plan = oracle.plan([Part("p", share=1.0)], family="gaussian", what="test")
    sampled = plan.on_sample(0.5, np.random.default_rng(0))
    sampled.release(count_query(), "p", 0.75)
    with pytest.raises(RuntimeError, match="overdrawn"):
        plan.release(count_query(), "p", 0.5)  # 0.75 of the part was drawn through the sampled plan
    local = LocalOracle(MemoryRows(np.zeros((50, 2)), 2), 1.0, PrivacyAccountant(), np.random.default_rng(0), 0)
    assert SAMPLED not in local.capabilities
    with pytest.raises(CapabilityError, match="cannot answer on a sample"):
        local.sampled(0.5, np.random.default_rng(0))


@pytest.mark.parametrize("public_n", [None, 3000])
def test_the_mean_start_is_charged_as_its_share_and_starts_at_the_mean(blobs, public_n):
    X, _ = blobs
    eps, delta = 0.8, 1e-6
    m = KMeans(
        3,
        bounds=(-1, 1),
        epsilon=eps,
        delta=delta,
        algorithm="fastlloyd",
        algorithm_params={"init": "mean"},
        public_n=public_n,
        random_state=0,
    ).fit(X)
    steps = m.privacy_spent_.steps
    mu = gdp_mu(eps, delta)
    mu_mean = compose_mu(*[st.mu for st in steps if st.label.startswith("the rows' mean")])
    mu_rest = compose_mu(*[st.mu for st in steps if not st.label.startswith("the rows' mean")])
    assert mu_mean**2 == pytest.approx(lloyd_module.DEFAULT_MEAN_SHARE * mu**2, rel=1e-9)
    assert mu_rest**2 == pytest.approx((1 - lloyd_module.DEFAULT_MEAN_SHARE) * mu**2, rel=1e-9)
    assert m.privacy_spent_.epsilon == pytest.approx(eps, rel=1e-6)
    assert m.fit_info_["init"]["start"] == "noisy mean" and m.fit_info_["init"]["init_share"] == 0.05


def test_the_mean_start_puts_the_centers_around_the_mean(monkeypatch):
    """Below MEAN_START_MIN_D dimensions: compact sphere packing moved to the rows' mean; from it, centers at
    MEAN_START_RADIUS from the mean in random directions.  (Noise negligible at epsilon 1e6: the James-Stein
    factor is 1.)"""
    rng = np.random.default_rng(7)
    for d in (6, lloyd_module.MEAN_START_MIN_D):
        X = rng.normal(0.3, 0.1, size=(2_000, d))
        mean = _start_of(monkeypatch, X, epsilon=1e6, algorithm_params={"init": "mean"})
        if d < lloyd_module.MEAN_START_MIN_D:
            sphere = _start_of(monkeypatch, X, epsilon=1e6, algorithm_params={"init": "compact"})
            np.testing.assert_allclose(mean, X.mean(axis=0) + sphere, atol=1e-3)
        else:
            distances = np.linalg.norm(mean - X.mean(axis=0), axis=1)
            np.testing.assert_allclose(distances, lloyd_module.MEAN_START_RADIUS, rtol=1e-3)


def test_the_noisy_mean_moves_the_start_where_it_stands_out_and_is_shrunk_by_its_noise():
    """shrunk_mean: the box's center unless the mean's squared length exceeds tau^2 times chi-square's
    MEAN_STANDS_OUT quantile (tau = the noise std over the count); then shrunk by the positive-part James-Stein
    factor 1 - (d - 2) tau^2 / |mean|^2 (d >= 3)."""
    from scipy.stats import chi2

    from privclust.algorithms.lloyd import MEAN_STANDS_OUT, shrunk_mean

    mean = np.full(8, 0.5)
    np.testing.assert_allclose(shrunk_mean(mean * 100, 100.0, 1e-9), mean)
    tau2 = (10.0 / 100.0) ** 2
    assert 8 * 0.25 > tau2 * chi2.ppf(MEAN_STANDS_OUT, 8)  # stands out
    np.testing.assert_allclose(shrunk_mean(mean * 100, 100.0, 10.0), mean * (1 - 6 * tau2 / (8 * 0.25)))
    just_under = np.sqrt(tau2 * chi2.ppf(MEAN_STANDS_OUT, 8) / 8) * 0.999
    np.testing.assert_array_equal(shrunk_mean(np.full(8, just_under * 100), 100.0, 10.0), np.zeros(8))
    np.testing.assert_allclose(shrunk_mean(np.array([50.0, 0.0]), 100.0, 1.0), [0.5, 0.0])  # d < 3: not shrunk


def _start_of(monkeypatch, X, **kwargs) -> np.ndarray:
    """The centers FastLloyd's steps start from (its run_lloyd replaced by a recorder)."""
    seen = []
    monkeypatch.setattr(
        lloyd_module, "run_lloyd", lambda ctx, plan, centers, *a, **k: seen.append(centers) or (centers, 0, None)
    )
    KMeans(3, bounds=(-1, 1), algorithm="fastlloyd", random_state=0, **kwargs).fit(X)
    return seen[0]


def test_the_compact_start_is_sphere_packing_pulled_to_the_box_center(blobs, monkeypatch):
    X = blobs[0]
    sphere = _start_of(monkeypatch, X, epsilon=1e6, algorithm_params={"init": "sphere"})
    pulled = _start_of(monkeypatch, X, epsilon=1e6, algorithm_params={"init": "compact"})
    np.testing.assert_allclose(pulled, lloyd_module.COMPACT_SCALE * sphere, rtol=1e-12)


def test_auto_init_is_the_mean_start_in_every_dimension(monkeypatch):
    """init='auto' (auto's FastLloyd): the mean start, in the plane too (where the noisy mean is not shrunk, only
    kept where it stands out of its noise)."""
    from privclust.algorithms.lloyd import AUTO_FASTLLOYD

    X = np.random.default_rng(3).normal(0.5, 0.05, size=(2_000, 6))
    for d in (1, 2, 6):
        model = KMeans(3, bounds=(-1, 1), algorithm="fastlloyd", algorithm_params=AUTO_FASTLLOYD, public_n=2_000)
        assert model.fit(X[:, :d]).fit_info_["init"]["start"] == "noisy mean"
    plane = _start_of(monkeypatch, X[:, :2], epsilon=1e6, public_n=2_000, algorithm_params=AUTO_FASTLLOYD)
    pulled = _start_of(monkeypatch, X[:, :2], epsilon=1e6, public_n=2_000, algorithm_params={"init": "compact"})
    np.testing.assert_allclose(plane, X[:, :2].mean(axis=0) + pulled, atol=1e-3)


@pytest.mark.parametrize("public_n", [None, 3000])
def test_the_compact_start_is_free_and_the_steps_noise_is_sphere_packings(blobs, spy, public_n):  # noqa: F811
    """The compact start reads nothing: the fit spends exactly (epsilon, delta), all on the count and the
    steps, and every release is calibrated as from sphere packing (same parts, same noise stds)."""
    eps, delta = 0.7, 1e-6

    def fit(init):
        spy.clear()
        m = KMeans(
            3,
            bounds=(-1, 1),
            epsilon=eps,
            delta=delta,
            algorithm="fastlloyd",
            algorithm_params={"init": init},
            public_n=public_n,
            random_state=0,
        ).fit(blobs[0])
        return m, [mech.std for r in spy for mech in r.mechanisms]

    pulled, pulled_noise = fit("compact")
    sphere, sphere_noise = fit("sphere")
    assert pulled.fit_info_["init"]["start"] == "compact sphere packing"
    assert pulled.privacy_spent_.epsilon == pytest.approx(eps, rel=1e-6)
    assert pulled.privacy_spent_.delta == pytest.approx(delta, rel=1e-9)
    assert compose_mu(*[st.mu for st in pulled.privacy_spent_.steps]) == pytest.approx(gdp_mu(eps, delta), rel=1e-9)
    assert [st.label for st in pulled.privacy_spent_.steps] == [st.label for st in sphere.privacy_spent_.steps]
    assert pulled_noise == pytest.approx(sphere_noise, rel=1e-12)


def test_the_compact_start_and_a_public_start_are_not_both_taken(blobs):
    with pytest.raises(ValueError, match="init=<array> is a start of its own"):
        KMeans(3, bounds=(-1, 1), init=blobs[1], algorithm="fastlloyd", algorithm_params={"init": "compact"}).fit(
            blobs[0]
        )


def test_log_rounds_grow_with_the_signal_and_keep_the_total_noise(spy):  # noqa: F811
    """rounds='log' (auto's FastLloyd): round(log2(n eps / k)) rounds within LOG_ROUNDS (at most MAX_ITERATIONS
    after the greedy start), each release drawing 1/T of the same part -- its noise std sqrt(T) times the whole
    part's -- and the fit spending exactly (epsilon, delta), by our accountant and by Google's."""
    from privclust.algorithms.lloyd import LOG_ROUNDS, MAX_ITERATIONS, log_rounds

    X = np.random.default_rng(5).uniform(-1.0, 1.0, size=(1_000, 6))
    delta = 1e-6

    def fit(epsilon, **params):
        spy.clear()
        m = KMeans(
            3,
            bounds=(-1, 1),
            epsilon=epsilon,
            delta=delta,
            algorithm="fastlloyd",
            algorithm_params={"rounds": "log", **params},
            public_n=1_000,
            random_state=0,
        ).fit(X)
        return m, [[mech.std / mech.sensitivity for mech in r.mechanisms] for r in spy]

    low, high = LOG_ROUNDS
    for epsilon in (0.01, 0.5, 1_000.0):
        m, noise = fit(epsilon)
        expected = int(min(max(round(math.log2(1_000 * epsilon / 3)), low), high))
        assert m.n_iter_ == expected == log_rounds(1_000 * epsilon / 3)
        # every round draws 1/T of one part: each release's noise per unit of sensitivity is the same
        assert all(np.allclose(r, noise[0], rtol=1e-12) for r in noise)
        assert m.privacy_spent_.epsilon == pytest.approx(epsilon, rel=1e-6)
        assert compose_mu(*[st.mu for st in m.privacy_spent_.steps]) == pytest.approx(gdp_mu(epsilon, delta), rel=1e-9)
    one_round = fit(0.5, **{"rounds": "su"})[1]
    T = log_rounds(1_000 * 0.5 / 3)
    # Su et al.'s estimate is 2 here: T rounds' noise is sqrt(T / 2) times its
    np.testing.assert_allclose(fit(0.5)[1][0], np.array(one_round[0]) * math.sqrt(T / 2), rtol=1e-9)
    assert log_rounds(1e9) == high and log_rounds(1.0) == low
    assert log_rounds(1e9, greedy_start=True) == min(high, MAX_ITERATIONS)
    assert pld_epsilon_of(spy, delta) == pytest.approx(0.5, rel=0.02)

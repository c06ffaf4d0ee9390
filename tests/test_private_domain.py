"""The private domain (geometry.private_box, privclust.private_domain): a box holding nearly all rows, found from noisy histograms."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from typer.testing import CliRunner

from privclust import KMeans
from privclust import private_domain as stage
from privclust.cli import app
from privclust.geometry import private_box as pb
from privclust.geometry.private_box import DOMAIN_LABELS, NoScaleFound
from privclust.privacy.budget import Budget, BudgetExceededError, PrivacyAccountant
from privclust.privacy.gdp import gdp_mu
from privclust.privacy.noise import NoiseSource
from privclust.private_domain import private_bounds
from privclust.queries.histogram import histogram_counts
from privclust.queries.rows import MemoryRows

pytestmark = pytest.mark.filterwarnings("ignore::privclust.privacy.leaks.PrivacyLeakWarning")  # seeded runs


class ZeroNoise(NoiseSource):
    """Adds nothing: what the box is as a function of the exact counts alone."""

    def add_gaussian(self, values, std):
        return np.asarray(values, dtype=np.float64).copy()

    def add_laplace(self, values, scale):
        return np.asarray(values, dtype=np.float64).copy()


def blobs(seed=0, n=20_000):
    rng = np.random.default_rng(seed)
    return np.column_stack([rng.normal(50, 5, n), rng.uniform(-3e-3, 7e-3, n), rng.normal(-2e6, 1e5, n)])


def outside(X, box):
    return np.mean(np.any((X < box.lower) | (X > box.upper), axis=1))


@pytest.mark.parametrize("seed", range(8))
def test_box_holds_nearly_all_rows_and_is_not_far_looser_than_the_data(seed):
    X = blobs(seed)
    box = private_bounds(X, 0.5, 1e-6, random_state=seed)
    assert outside(X, box) <= 0.02
    # the scale is found to within one bucket (16x) of the largest magnitude; the width follows it
    assert np.all(box.upper - box.lower <= 2 * 16 * np.abs(X).max(0))
    assert np.all(box.upper - box.lower > 0)
    assert np.all(np.isfinite(box.lower)) and np.all(np.isfinite(box.upper))


def test_secure_noise_box_clips_about_clip_share_a_side():
    """OpenDP's samplers cannot be seeded, so the bound must hold for every draw, not one.  An edge moves past
    outer bins only while their noisy count plus EDGE_Z deviations stays within CLIP_SHARE of the total, so a
    side clips more than twice CLIP_SHARE only if the noise of the bins passed falls short by CLIP_SHARE of the
    rows plus those deviations: here 200 rows plus 2 sigma at sigma ~21 a bin, five deviations or more.  (The
    whole box may clip up to 2 d CLIP_SHARE by design: 1 in 200 draws clipped over 2% of these rows.)"""
    X = blobs(1)
    box = private_bounds(X, 0.5, 1e-6)
    per_side = np.concatenate([np.mean(X < box.lower, axis=0), np.mean(X > box.upper, axis=0)])
    assert np.all(per_side <= 2 * pb.CLIP_SHARE), per_side
    assert outside(X, box) <= 2 * X.shape[1] * pb.CLIP_SHARE


@pytest.mark.parametrize("seed", range(4))
def test_the_octave_release_brings_the_scale_within_one_octave(seed):
    """Data in [-3, 3]: the magnitude buckets (4 octaves) say (1, 16]; the octaves say (2, 4]."""
    X = np.random.default_rng(seed).uniform(-3, 3, (20_000, 2))
    box = private_bounds(X, 1.0, 1e-6, random_state=seed)
    assert np.all(box.upper <= 4.0) and np.all(box.lower >= -4.0)
    assert outside(X, box) <= 0.02


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_the_signed_octaves_drop_an_empty_side_of_zero(sign):
    """Data in [100, 110] (or [-110, -100]): the magnitudes say (16, 256]; the signed octaves say (64, 128] on
    the data's side, not [-128, 128] -- a box a quarter as wide."""
    X = sign * np.random.default_rng(3).uniform(100, 110, (20_000, 2))
    box = private_bounds(X, 1.0, 1e-6, random_state=3)
    lo, hi = (64.0, 128.0) if sign > 0 else (-128.0, -64.0)
    assert np.all(box.lower >= lo) and np.all(box.upper <= hi)
    assert outside(X, box) <= 0.02


def test_a_signed_bucket_holds_its_rows_and_the_buckets_tile_the_line():
    """Each row's signed octave bucket has the row between its edges, and a bucket's upper edge is the next
    one's lower edge."""
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(-300, 300, 2000), rng.normal(0, 1e-3, 100), [0.0, 256.0, -256.0, 1.0]])
    top = 8
    buckets = pb.signed_octave_buckets(x[:, None], np.array([-np.inf]), np.array([np.inf]), np.array([top]))[:, 0]
    lower = np.array([pb._signed_edge(int(b), top, -1) for b in range(pb.SIGNED)])
    upper = np.array([pb._signed_edge(int(b), top, 1) for b in range(pb.SIGNED)])
    np.testing.assert_array_equal(upper[:-1], lower[1:])
    inside = np.abs(x) <= 2.0**top
    assert np.all(lower[buckets[inside]] <= x[inside]) and np.all(x[inside] <= upper[buckets[inside]])


def test_spends_are_recorded_with_labels_and_fit_the_budget():
    X = blobs(2)
    accountant = PrivacyAccountant()
    box = private_bounds(X, 0.3, 1e-6, random_state=0, accountant=accountant)
    assert [s.label for s in accountant.spends] == list(DOMAIN_LABELS)
    mu = math.sqrt(sum(s.mu**2 for s in accountant.spends))
    assert mu == pytest.approx(gdp_mu(0.3, 1e-6), rel=1e-9)  # the two releases compose to the budget exactly
    assert box.epsilon <= 0.3 * (1 + 1e-9) and box.delta <= 1e-6
    assert box.as_dict()["steps"][0]["label"] == DOMAIN_LABELS[0]


def test_pure_epsilon_box_uses_laplace():
    accountant = PrivacyAccountant()
    private_bounds(blobs(3), 1.0, 0.0, random_state=0, accountant=accountant)
    assert sum(s.epsilon for s in accountant.spends) == pytest.approx(1.0)
    assert all(not s.is_gdp for s in accountant.spends)


def test_refused_budget_reads_no_row():
    X = blobs(0)
    X[0, 0] = np.nan  # would be refused as non-finite if any row were read
    accountant = PrivacyAccountant(Budget(0.1, 1e-6))
    with pytest.raises(BudgetExceededError):
        private_bounds(X, 0.5, 1e-6, random_state=0, accountant=accountant)
    assert accountant.spends == []


def test_non_finite_input_is_refused_before_any_spend():
    X = blobs(0)
    X[5, 1] = np.inf
    accountant = PrivacyAccountant()
    with pytest.raises(ValueError, match="infinity|NaN|finite") as err:
        private_bounds(X, 0.5, 1e-6, random_state=0, accountant=accountant)
    assert "\n" not in str(err.value).strip()
    assert accountant.spends == []


@pytest.mark.filterwarnings("error::RuntimeWarning")  # no overflow anywhere
def test_extreme_constant_and_heavy_tailed_features_give_finite_boxes():
    rng = np.random.default_rng(0)
    n = 20_000
    X = np.column_stack(
        [
            rng.uniform(-1, 1, n) * 1e300,  # near the top of the doubles
            np.full(n, 3.0),  # constant
            np.zeros(n),  # constant zero
            rng.standard_cauchy(n),  # heavy tails
            rng.uniform(-1, 1, n) * 1.7e308,  # beyond the cap: clipped, never overflowing
        ]
    )
    for seed in range(3):
        box = private_bounds(X, 1.0, 1e-6, random_state=seed)
        width = box.upper - box.lower
        assert np.all(np.isfinite(box.lower)) and np.all(np.isfinite(box.upper))
        assert np.all(width > 0) and np.all(np.isfinite(width))
        assert box.lower[1] <= 3.0 <= box.upper[1] and box.lower[2] <= 0.0 <= box.upper[2]
        assert box.upper[0] >= 1e300 * 0.9
        model = KMeans(3, bounds=None, public_n=n, random_state=seed).fit(X[:, :4])
        assert np.all(np.isfinite(model.cluster_centers_))


def test_box_is_post_processing_of_the_counts(monkeypatch):
    """With the noise set to zero, data sets with the same bucket counts give the same box."""
    X = blobs(4, n=5000)
    Y = X[::-1].copy()  # the same rows, another order
    # one value moved within its magnitude bucket and its linear bin: the same counts
    a = private_bounds(X, 1.0, 1e-6, noise=ZeroNoise())
    lo, hi = a.lower.copy(), a.upper.copy()
    j = int(np.argmin(np.abs(Y[:, 0] - np.median(Y[:, 0]))))
    Y[j, 0] = np.nextafter(Y[j, 0], np.inf)
    b = private_bounds(Y, 1.0, 1e-6, noise=ZeroNoise())
    np.testing.assert_array_equal(lo, b.lower)
    np.testing.assert_array_equal(hi, b.upper)
    # and the box is computed from the counts alone: the rows reach it only through the oracle's three histograms
    seen = []
    real = MemoryRows.histograms

    def spy(rows, queries):
        counts = real(rows, queries)
        seen.extend(counts)
        return counts

    monkeypatch.setattr(MemoryRows, "histograms", spy)
    private_bounds(X, 1.0, 1e-6, noise=ZeroNoise())
    assert [c.shape for c in seen] == [(3, pb.N_BUCKETS), (3, pb.SIGNED), (3, pb.LINEAR_BINS)]


@pytest.mark.parametrize("seed", range(5))
def test_neighbouring_counts_differ_by_the_stated_sensitivity(seed):
    """Adding one row changes each feature's histogram by one count: l2 sqrt(d), l1 d -- the mechanisms'
    calibration -- for any row, the extreme ones included."""
    rng = np.random.default_rng(seed)
    X = rng.standard_cauchy((300, 4)) * 10.0 ** rng.integers(-300, 300, (300, 4))
    row = np.array([[1e308, -5e-324, 0.0, rng.normal()]])
    Y = np.vstack([X, row])
    lo, hi = np.full(4, -1e3), np.full(4, 1e3)
    for query in (
        stage.magnitude_query(4, np.full(4, np.inf)),
        stage.octave_query(4, np.full(4, -np.inf), np.full(4, np.inf), np.array([10, -5, 0, 3])),
        stage.edge_query(4, lo, hi),
    ):
        diff = histogram_counts(query, Y) - histogram_counts(query, X)
        assert np.abs(diff).sum() == 4 and np.all(diff.sum(1) == 1) and np.all(diff >= 0)
        assert (query.l2_bound, query.l1_bound) == (2.0, 4.0)  # what the oracle calibrates the noise for


def test_no_scale_found_is_a_clear_refusal_with_the_spend_recorded():
    X = np.random.default_rng(0).normal(size=(30, 8))  # far too few rows for this budget
    accountant = PrivacyAccountant()
    with pytest.raises(NoScaleFound, match="no scale for feature"):
        private_bounds(X, 0.01, 1e-8, random_state=0, accountant=accountant)
    assert [s.label for s in accountant.spends] == [DOMAIN_LABELS[0]]  # honest: the first release was made


def test_outer_limit_caps_and_tightens():
    X = blobs(5)[:, :1] / 10.0  # in about [2, 8]
    box = private_bounds(X, 1.0, 1e-6, outer=(-1000, 6), random_state=0)
    assert box.upper[0] <= 6 and box.lower[0] >= -1000
    assert box.lower[0] >= -16  # the scale found, not the outer limit
    assert box.outer is not None and box.as_dict()["outer"]["upper"] == [6.0]


def test_kmeans_without_bounds_reports_the_box_and_its_cost():
    X = blobs(6)
    model = KMeans(3, epsilon=1.0, delta=1e-6, public_n=len(X), random_state=0).fit(X)
    labels = [s.label for s in model.privacy_spent_.steps]
    assert labels[:3] == list(DOMAIN_LABELS)
    domain = model.fit_info_["domain"]
    # the box has what the fit's Gaussian releases at 90% of the budget leave in GDP: more than 10% of epsilon
    assert domain["epsilon"] > 0.2 and domain["delta"] <= 1e-7 * (1 + 1e-9)
    assert model.privacy_spent_.epsilon <= 1.0 * (1 + 1e-9)
    np.testing.assert_array_equal(model.domain_.lower, domain["lower"])
    assert model.n_rows_clipped_ <= 0.02 * len(X)
    outer = KMeans(3, bounds={"outer": (-1e7, 1e7), "share": 0.2}, public_n=len(X), random_state=0).fit(X)
    assert outer.privacy_spent_.epsilon <= 1.0 * (1 + 1e-9)
    assert np.all(np.isfinite(outer.cluster_centers_))


@pytest.mark.parametrize(
    "bounds,message",
    [({"outer": (-1, 1), "shares": 0.1}, "no other keys"), ({"share": 1.5}, "share"), ({"outer": "data"}, "outer")],
)
def test_bad_private_domain_requests_are_refused_before_any_spend(bounds, message):
    accountant = PrivacyAccountant()
    with pytest.raises(ValueError, match=message):
        KMeans(3, bounds=bounds, random_state=0, accountant=accountant).fit(blobs(0, 200))
    assert accountant.spends == []


def test_local_model_and_baseline_need_declared_bounds():
    with pytest.raises(ValueError, match="public bounds"):
        KMeans(3, privacy_model="local", random_state=0).fit(blobs(0, 200))


def test_cli_fit_without_bounds_prints_the_private_box(tmp_path):
    csv = tmp_path / "pts.csv"
    np.savetxt(csv, blobs(7, 3000), delimiter=",", header="a,b,c", comments="")
    out = CliRunner().invoke(
        app, ["fit", str(csv), "--k", "3", "--public-n", "3000", "--seed", "0", "-o", str(tmp_path / "c.csv")]
    )
    assert out.exit_code == 0, out.output
    assert "bounds found privately" in out.output
    out = CliRunner().invoke(app, ["fit", str(csv), "--k", "3", "--seed", "0", "--json", "-o", str(tmp_path / "d.csv")])
    assert out.exit_code == 0, out.output
    release = json.loads(out.output)["release"]
    labels = [s["label"] for s in release["privacy_spent"]["steps"]]
    # the box's releases come first, on the first read of the rows (a file read into a memory map too)
    assert labels[:3] == list(DOMAIN_LABELS) and not any(label.startswith("domain:") for label in labels[3:])
    assert len(release["private_box"]["lower"]) == 3


def test_cli_outer_bounds_find_the_box_inside_declared_limits(tmp_path):
    csv = tmp_path / "pts.csv"
    np.savetxt(csv, blobs(7, 3000), delimiter=",", header="a,b,c", comments="")
    common = ["fit", str(csv), "--k", "3", "--seed", "0", "--json", "-o", str(tmp_path / "c.csv")]
    out = CliRunner().invoke(app, [*common, "--bounds", "-10,10", "--outer-bounds"])
    assert out.exit_code == 0, out.output
    box = json.loads(out.output)["release"]["private_box"]
    assert box["outer"] == {"lower": [-10.0] * 3, "upper": [10.0] * 3}
    assert box["upper"][1] < 1 and box["lower"][1] > -1  # the small feature's box tightened inside the limit
    for refused in ([], ["--bounds", "data"], ["--bounds", "-10,10", "-a", "nonprivate-lloyd"]):
        out = CliRunner().invoke(app, [*common, *refused, "--outer-bounds"])
        assert out.exit_code == 2 and "--outer-bounds" in out.output, out.output


def test_a_fit_refused_for_its_parameters_spends_nothing_on_the_box():
    """The box is found on the fit's first read of the rows: after the algorithm checked its parameters."""
    accountant = PrivacyAccountant()
    with pytest.raises(ValueError, match="unknown"):
        KMeans(3, algorithm_params={"bogus": 1}, random_state=0, accountant=accountant).fit(blobs(0, 500))
    assert accountant.spends == []


def test_outer_limit_holds_where_no_scale_is_found():
    X = np.random.default_rng(0).normal(size=(30, 8))  # too few rows: no scale stands out of the noise
    box = private_bounds(X, 0.01, 1e-8, outer=(-5, 5), random_state=0)
    assert np.all(box.lower >= -5) and np.all(box.upper <= 5) and np.all(box.upper > box.lower)


def test_fitted_model_keeps_a_plain_box_and_pickles():
    import pickle

    from privclust.geometry.domain import BoxDomain

    model = KMeans(3, public_n=20_000, random_state=0).fit(blobs(8))
    assert type(model.domain_) is BoxDomain
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(model)).predict(blobs(8, 50)), model.predict(blobs(8, 50)))


def test_cli_refusal_when_no_scale_is_found_is_one_clean_line(tmp_path):
    csv = tmp_path / "few.csv"
    np.savetxt(
        csv, np.random.default_rng(0).normal(size=(30, 8)), delimiter=",", header=",".join("abcdefgh"), comments=""
    )
    out = CliRunner().invoke(
        app, ["fit", str(csv), "--k", "2", "-e", "0.1", "--seed", "0", "-o", str(tmp_path / "c.csv")]
    )
    assert out.exit_code == 2
    assert "no scale for feature" in out.output and "Traceback" not in out.output
    assert not (tmp_path / "c.csv").exists()


def test_memory_mapped_rows_are_read_chunk_by_chunk(tmp_path):
    X = blobs(9)
    path = tmp_path / "rows.npy"
    np.save(path, X)
    mapped = np.load(path, mmap_mode="r")
    a = private_bounds(mapped, 1.0, 1e-6, noise=ZeroNoise())
    b = private_bounds(X, 1.0, 1e-6, noise=ZeroNoise())
    np.testing.assert_array_equal(a.lower, b.lower)
    np.testing.assert_array_equal(a.upper, b.upper)
    assert np.all(np.isfinite(KMeans(3, public_n=len(X), random_state=0).fit(mapped).cluster_centers_))


def test_a_fit_without_bounds_is_checked_as_its_box_and_plan_so_it_runs_beside_earlier_gaussian_spends(tmp_path):
    """The up-front check is the box's releases with the algorithm's plan (values), not a whole (epsilon, delta)
    spend, which would leave a ledger's earlier Gaussian spends no delta (epsilon = inf) and refuse the fit."""
    from privclust import LedgerAccountant
    from privclust.privacy.budget import Budget
    from privclust.privacy.gdp import gdp_mu

    ledger = LedgerAccountant.create(tmp_path / "l.json", Budget(3.0, 1e-6))
    ledger.spend_gdp("an elbow curve", gdp_mu(0.5, 1e-6))
    X = np.random.default_rng(0).normal(0, 0.3, (4000, 2))
    with ledger.run(1.0, 1e-6) as accountant:
        model = KMeans(3, bounds=None, algorithm="fastlloyd", public_n=4000, accountant=accountant).fit(X)
    assert "domain" in model.fit_info_
    assert ledger.guarantee()[0] <= 3.0


def test_a_box_that_is_refused_is_released_once_however_many_chunks_read_the_rows():
    """The rows are mapped chunk by chunk on several threads: a refused box (NoScaleFound) must not be found
    again -- and charged again -- by the chunks queued behind the one that failed."""
    from privclust import PrivacyAccountant

    shared = PrivacyAccountant()
    X = np.random.default_rng(0).normal(0, 1, (200_000, 2))
    with pytest.raises(NoScaleFound):
        KMeans(3, epsilon=2e-4, delta=1e-9, bounds=None, algorithm="fastlloyd", accountant=shared).fit(X)
    assert [s.label for s in shared.spends].count(DOMAIN_LABELS[0]) == 1


class RecordingNoise(ZeroNoise):
    """Adds nothing, and records the scale of every release."""

    def __init__(self):
        self.gaussian, self.laplace = [], []

    def add_gaussian(self, values, std):
        self.gaussian.append(float(std))
        return super().add_gaussian(values, std)

    def add_laplace(self, values, scale):
        self.laplace.append(float(scale))
        return super().add_laplace(values, scale)


def test_each_release_is_noised_at_the_scale_of_its_share_and_its_sensitivity():
    """One row moves one bucket per feature: l2 sensitivity sqrt(d) (Gaussian) or l1 d (Laplace), over all
    features' histograms together; stage i takes share s_i of mu^2 (or of epsilon).  A wrong sensitivity or
    split changes the scales drawn here."""
    X, d = blobs(), 3
    gaussian = RecordingNoise()
    box = private_bounds(X, 1.0, 1e-6, noise=gaussian)
    mu = gdp_mu(1.0, 1e-6)
    expected = [math.sqrt(d) / (mu * math.sqrt(s)) for s in pb.STAGE_SHARES]
    np.testing.assert_allclose(gaussian.gaussian, expected, rtol=1e-12)
    np.testing.assert_allclose([s.mu for s in box.steps], [math.sqrt(d) / std for std in expected], rtol=1e-12)
    laplace = RecordingNoise()
    private_bounds(X, 1.0, 0.0, noise=laplace)
    np.testing.assert_allclose(laplace.laplace, [d / (1.0 * s) for s in pb.STAGE_SHARES], rtol=1e-12)


def test_a_user_level_box_reads_the_kept_rows_a_chunk_at_a_time_never_a_copy_of_them(tmp_path, monkeypatch):
    """The box's histograms are counted by the rows' own oracle, which reads a memory map's kept rows a chunk at a
    time: memory stays a few chunks' worth, far below one copy of the kept rows."""
    import tracemalloc

    from privclust.privacy.unit import PrivacyUnit, UserBound
    from privclust.queries import rows as rows_module

    n, d = 200_000, 16
    np.save(tmp_path / "rows.npy", np.random.default_rng(0).normal(3, 1, (n, d)))
    mapped = np.load(tmp_path / "rows.npy", mmap_mode="r")
    bound = UserBound(np.arange(n) // 4, PrivacyUnit(2, True), np.random.default_rng(1))
    kept_bytes = bound.kept(n).size * d * 8  # chosen from ids and coins before measuring: half the rows
    monkeypatch.setattr(rows_module, "chunk_rows_for", lambda features: 1024)
    private_bounds(blobs(0, 2000), 1.0, 1e-6, random_state=0)  # whatever a first call imports, imported
    tracemalloc.start()
    try:
        box = private_bounds(mapped, 1.0, 1e-6, random_state=0, users=bound)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert np.all(box.upper > 3) and np.all(box.lower < 3)
    # (checking the map for non-finite values takes a byte per value: a quarter of the kept rows here)
    assert peak < kept_bytes / 2, (peak, kept_bytes)


def test_a_fit_without_bounds_checks_its_rows_once(monkeypatch):
    """One path to the rows: the box's releases and the fit's read the same checked rows."""
    from privclust import _validation
    from privclust.queries import rows as rows_module

    calls = []

    def counting(X, what="X"):
        calls.append(what)
        return _validation.check_data(X, what)

    monkeypatch.setattr(rows_module, "check_data", counting)
    monkeypatch.setattr(pb, "check_data", counting, raising=False)
    monkeypatch.setattr(stage, "check_data", counting, raising=False)
    KMeans(3, epsilon=1.0, delta=1e-6, algorithm="fastlloyd", public_n=20_000, random_state=0).fit(blobs(1))
    assert len(calls) == 1


@pytest.mark.parametrize("mapped", [False, True])
def test_the_box_is_released_first_whether_the_rows_are_in_memory_or_memory_mapped(tmp_path, mapped):
    """Without public_n the fit buys a noisy row count, which needs no mapped row: the box still comes first."""
    X = blobs(10, 5000)
    if mapped:
        np.save(tmp_path / "rows.npy", X)
        X = np.load(tmp_path / "rows.npy", mmap_mode="r")
    model = KMeans(3, epsilon=1.0, delta=1e-6, algorithm="fastlloyd", random_state=0).fit(X)
    labels = [s.label for s in model.privacy_spent_.steps]
    assert labels[:3] == list(DOMAIN_LABELS) and len(labels) > 3


def test_only_an_oracle_that_counts_histograms_of_its_input_serves_the_box():
    """The box's plan needs HISTOGRAMS: the central curator offers it; a model that does not is refused before
    anything is read or spent."""
    from privclust.queries.plan import HISTOGRAMS, CapabilityError, PlanningOracle

    budget = Budget(1.0, 1e-6)
    central = PlanningOracle(3, budget, stage.CentralOracle.capabilities, "the central model")
    assert [s.label for s in central.spends(stage.box_spec(budget))[0]] == list(DOMAIN_LABELS)
    devices = PlanningOracle(3, budget, stage.CentralOracle.capabilities - {HISTOGRAMS}, "the local model")
    with pytest.raises(CapabilityError, match="histograms"):
        devices.spends(stage.box_spec(budget))


def test_a_histogram_is_its_own_kind_of_release_and_only_a_histogram_oracle_answers_it():
    """A HistogramQuery is not a SumQuery (no blocks, no sparse listing, no narrowing): a plan releases either,
    refuses a histogram at an oracle without HISTOGRAMS before drawing or reading anything, and never reduces
    one; at the central curator it is counted and noised as before."""
    from privclust.privacy.noise import SeededNoise
    from privclust.queries.base import SumQuery
    from privclust.queries.histogram import HistogramQuery
    from privclust.queries.plan import HISTOGRAMS, CapabilityError, Part

    query = HistogramQuery("h", 2, 4, lambda rows: np.clip((rows + 1) * 2, 0, 3).astype(np.int64))
    assert not isinstance(query, SumQuery) and not hasattr(query, "sparse") and not hasattr(query, "narrows")
    X = np.random.default_rng(0).uniform(-1, 1, (40, 2))

    def oracle(capabilities=None):
        central = stage.CentralOracle(
            MemoryRows(X, 2), Budget(1.0), PrivacyAccountant(Budget(1.0)), SeededNoise(np.random.SeedSequence(1))
        )
        if capabilities is not None:
            central.capabilities = capabilities
        return central

    without = oracle(stage.CentralOracle.capabilities - {HISTOGRAMS})
    plan = without.plan([Part("h", epsilon=1.0)], family="laplace")
    with pytest.raises(CapabilityError, match="no histograms"):
        plan.release(query, "h")
    assert without.accountant.spends == [] and plan._used == {"h": 0.0}
    central = oracle()
    plan = central.plan([Part("h", epsilon=1.0)], family="laplace")
    with pytest.raises(ValueError, match="histograms are released whole"):
        plan.release_reduced([(query, "h", 1.0, None)])
    released = plan.release(query, "h")
    assert released[stage.COUNTS].shape == (2, 4) and released.std[stage.COUNTS] == pytest.approx(2 * math.sqrt(2))
    assert [s.label for s in central.accountant.spends] == ["h"]


def test_a_bucket_function_out_of_range_is_refused_without_naming_a_value():
    from privclust.queries.histogram import HistogramQuery

    secret = 123.456
    query = HistogramQuery("q", 1, 4, lambda rows: (rows * 10).astype(np.int64))
    with pytest.raises(ValueError, match="out of range") as err:
        histogram_counts(query, np.array([[secret]]))
    assert "123" not in str(err.value)


@pytest.mark.parametrize("delta,algorithm", [(1e-6, "fastlloyd"), (0.0, "sulloyd")])
def test_the_box_takes_what_the_algorithms_plan_leaves_of_the_budget(delta, algorithm):
    """In GDP the box has more than ``share`` of epsilon (and the fit's plan with it stays within the budget,
    not a hair under it); with pure epsilon (basic composition) exactly ``share``."""
    budget, share, d = Budget(1.0, delta), 0.1, 3
    model = KMeans(4, epsilon=budget.epsilon, delta=delta, bounds=None, algorithm=algorithm, public_n=5000)
    rest = Budget(budget.epsilon * (1 - share), budget.delta * (1 - share))
    plans = model._planned(model._check_params()[1], rest, d)
    box = stage.box_budget_beside(budget, share, plans, d)
    composed = max(
        PrivacyAccountant(budget).guarantee(budget.delta, stage.box_spends(box, d) + plan)[0] for plan in plans
    )
    assert composed <= budget.epsilon * (1 + 1e-9)
    if delta > 0:
        assert box.epsilon > 2 * share * budget.epsilon and composed > budget.epsilon * (1 - 1e-6)
        wider = stage.box_spends(Budget(box.epsilon * 1.01, box.delta), d)
        assert (
            max(PrivacyAccountant(budget).guarantee(budget.delta, wider + plan)[0] for plan in plans) > budget.epsilon
        )
    else:
        assert box.epsilon == pytest.approx(share * budget.epsilon)


def test_the_box_beside_autos_plans_fits_their_union_not_each_alone():
    """With a private n, auto chooses its plan from a noisy count -- adaptively -- and such a choice can pair one
    plan's Gaussian mu with another's selection delta: the box must fit beside the union of the plans' covers.
    Checked against each plan alone, the box let that union reach epsilon 1.026 at (1, 1e-6) in d = 3."""
    from privclust.privacy.budget import Cover

    budget, share, d = Budget(1.0, 1e-6), 0.1, 3
    model = KMeans(4, epsilon=1.0, delta=1e-6, bounds=None)  # auto, n private
    rest = Budget(budget.epsilon * (1 - share), budget.delta * (1 - share))
    plans = model._planned(model._check_params()[1], rest, d)
    assert len(plans) > 1 and len({Cover.of(p) for p in plans}) > 1  # plans of different shapes
    box = stage.box_spends(stage.box_budget_beside(budget, share, plans, d), d)
    union = PrivacyAccountant(budget).guarantee(budget.delta, box + Cover.of_any(plans).spends("any"))[0]
    assert union == pytest.approx(budget.epsilon, rel=1e-6)
    each = max(PrivacyAccountant(budget).guarantee(budget.delta, box + plan)[0] for plan in plans)
    assert each < (1 - 1e-4) * budget.epsilon  # each alone would have left room: the per-plan check overspends


def test_a_box_beside_a_choice_is_checked_with_the_union_before_anything_is_released():
    """The box is found on the first read, after auto's staged check; the box with each plan alone could fit beside
    an earlier spend while the box with their union (what the chosen plan is recorded at) does not: the fit then
    released the box and the count and was refused at the choice. It is refused before either now."""
    from privclust.privacy.budget import Cover

    d, k, share, fit = 5, 5, 0.1, Budget(1.0, 1e-6)
    model = KMeans(k, epsilon=fit.epsilon, delta=fit.delta, bounds=None, random_state=0)
    _, options, _ = model._check_params()
    plans = model._planned(options, Budget(fit.epsilon * (1 - share), fit.delta * (1 - share)), d)
    box = stage.box_spends(stage.box_budget_beside(fit, share, plans, d), d)

    def largest_earlier(spend_lists):  # the largest earlier mu beside which every list fits a (2, 2e-6) ledger
        low, high = 0.0, 2.0
        for _ in range(60):
            middle, ledger = (low + high) / 2, PrivacyAccountant(Budget(2.0, 2e-6))
            try:
                ledger.spend_gdp("earlier", middle)
                for spends in spend_lists:
                    ledger.check(spends)
                low = middle
            except BudgetExceededError:
                high = middle
        return low

    each = largest_earlier([box + plan for plan in plans])
    union = largest_earlier([box + Cover.of_any(plans).spends("union")])
    assert each > union
    ledger = PrivacyAccountant(Budget(2.0, 2e-6))
    ledger.spend_gdp("earlier", (each + union) / 2)
    model.set_params(accountant=ledger)
    with pytest.raises(BudgetExceededError):
        model.fit(np.random.default_rng(0).uniform(-1, 1, (2000, d)))
    assert [s.label for s in ledger.spends] == ["earlier"]

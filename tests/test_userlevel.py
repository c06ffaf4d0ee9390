"""User-level privacy (issue 29): each user's rows bounded to m without reading them, every release calibrated
for m rows, refusals where the scaling is not linear, and the unit in the ledger."""

import math

import numpy as np
import pytest
from scipy.stats import norm

from privclust import KMeans
from privclust.geometry import private_box as pb
from privclust.privacy.budget import Budget, BudgetExceededError, PrivacyAccountant, Spend
from privclust.privacy.gdp import gdp_mu
from privclust.privacy.mechanisms import GaussianMechanism, LaplaceMechanism
from privclust.privacy.noise import NoiseSource
from privclust.privacy.unit import PrivacyUnit, UserBound, bounded_rows, user_relation
from privclust.private_domain import private_bounds
from privclust.queries import Block, MemoryRows, SumQuery, count_query, voronoi_query
from privclust.queries.central import CentralOracle, release_spends, sparse_threshold
from privclust.queries.plan import CapabilityError, Part
from privclust.queries.voronoi import VoronoiCells

pytestmark = pytest.mark.filterwarnings("ignore::privclust.privacy.leaks.PrivacyLeakWarning")  # seeded runs


class RecordingNoise(NoiseSource):
    """Adds nothing, and records the scale of every release."""

    def __init__(self):
        self.gaussian, self.laplace = [], []

    def add_gaussian(self, values, std):
        self.gaussian.append(float(std))
        return np.asarray(values, dtype=np.float64).copy()

    def add_laplace(self, values, scale):
        self.laplace.append(float(scale))
        return np.asarray(values, dtype=np.float64).copy()


def _users(ids, m, seed=0):
    return UserBound(ids, PrivacyUnit(m, True), np.random.default_rng(seed))


def _mixture(seed=0, n=3000):
    rng = np.random.default_rng(seed)
    centers = np.array([[-0.5, -0.5], [0.5, 0.5], [0.5, -0.5]])
    return np.clip(centers[rng.integers(0, 3, n)] + rng.normal(0, 0.08, (n, 2)), -1, 1)


# ------------------------------------------------------------------------------------------- the bounding


def test_each_user_keeps_at_most_m_rows_and_users_with_fewer_keep_all():
    rng = np.random.default_rng(1)
    ids = rng.integers(0, 50, 2000)
    ids[:3] = 999  # a user with 3 rows
    kept = _users(ids, 4).kept(ids.size)
    per_user = np.bincount(np.unique(ids, return_inverse=True)[1][kept])
    assert per_user.max() == 4
    assert set(np.flatnonzero(ids == 999)) <= set(kept.tolist())  # 3 <= m: every row kept
    assert np.all(np.diff(kept) > 0)


def test_the_subset_is_random_not_the_first_rows():
    ids = np.repeat(np.arange(20), 30)
    picks = [_users(ids, 3, seed).kept(ids.size) for seed in range(5)]
    assert len({tuple(p) for p in picks}) == 5  # other coins, other rows
    first_rows = np.concatenate([np.flatnonzero(ids == u)[:3] for u in range(20)])
    assert not np.array_equal(np.sort(first_rows), picks[0])


def test_the_rows_released_are_chosen_without_reading_their_values():
    """The same ids and coins keep the same rows whatever their values: the rows the releases read are the
    same positions of two data sets that share only their user ids (column 0 carries the row's index)."""
    rng = np.random.default_rng(2)
    n = 1500
    ids = rng.integers(0, 200, n)
    index = np.arange(n, dtype=float)[:, None]
    read = []
    for values in (rng.normal(0, 1, (n, 2)), rng.uniform(-100, 100, (n, 2))):
        rows = MemoryRows(np.hstack([index, values]), 3, users=_users(ids, 2, seed=7))
        read.append(rows.map_rows(lambda chunk: chunk[:, 0]))
    np.testing.assert_array_equal(read[0], read[1])
    assert read[0].size < n and np.bincount(ids[read[0].astype(int)]).max() <= 2


def test_user_ids_in_any_form_that_names_the_same_users_keep_the_same_rows():
    ids = np.random.default_rng(3).integers(0, 40, 500)
    as_text = np.array([f"user-{i}" for i in ids], dtype=object)
    a = _users(ids, 2, seed=4).kept(500)
    b = _users(list(as_text), 2, seed=4).kept(500)
    c = bounded_rows(np.unique(ids, return_inverse=True)[1], 2, np.random.default_rng(4))
    d = _users(as_text.astype(np.dtypes.StringDType()), 2, seed=4).kept(500)  # how a CSV's text ids are read
    np.testing.assert_array_equal(a, c)
    np.testing.assert_array_equal(a, b)  # the ids' order or spelling does not matter, only who owns which row
    np.testing.assert_array_equal(a, d)


# ------------------------------------------------------------------------------------------- the scaling


def _oracle(X, m, budget, noise):
    unit = PrivacyUnit(m, True) if m > 1 else PrivacyUnit()
    users = _users(np.arange(len(X)) // 3, m) if m > 1 else None
    rows = MemoryRows(X, X.shape[1], users=users)
    return CentralOracle(rows, budget, PrivacyAccountant(budget), noise, unit)


@pytest.mark.parametrize("m", [2, 5])
def test_gaussian_sums_and_counts_are_noised_for_m_rows(m):
    X = _mixture()
    cells = VoronoiCells(np.array([[-0.5, -0.5], [0.5, 0.5]]))
    queries = [count_query(), voronoi_query("step", cells, Block("sum", 2, math.sqrt(2.0)))]
    scales = {}
    for group in (1, m):
        noise = RecordingNoise()
        plan = _oracle(X, group, Budget(1.0, 1e-6), noise).plan([Part("count", share=1.0), Part("step", share=1.0)])
        plan.release_many([(queries[0], "count", 1.0), (queries[1], "step", 1.0)])
        scales[group] = np.array(noise.gaussian)
    mu = gdp_mu(1.0, 1e-6) / math.sqrt(2.0)
    np.testing.assert_allclose(scales[1][0], 1.0 / mu, rtol=1e-12)
    np.testing.assert_allclose(scales[m], m * scales[1], rtol=1e-12)


def test_laplace_sums_are_noised_for_m_rows_in_l1():
    X, m = _mixture(), 4
    query = SumQuery("sums", 1, (Block("v", 2, 1.0),), lambda c: (np.zeros(len(c), np.intp), c.copy()))
    scales = []
    for group in (1, m):
        noise = RecordingNoise()
        plan = _oracle(X, group, Budget(0.5), noise).plan([Part("p", epsilon=0.5)])
        plan.release(query, "p")
        scales.append(noise.laplace[0])
    assert scales[0] == pytest.approx(math.sqrt(2.0) / 0.5)  # an l2 bound of 1 bounds l1 by sqrt(2)
    assert scales[1] == pytest.approx(m * scales[0])


def test_a_sparse_release_keeps_a_bucket_only_above_the_threshold_for_m_new_buckets():
    """A user may add m buckets, each holding at most m rows: each, listed by one neighbour only (under the
    listing floor m plus m), clears the threshold with probability delta / m, checked against scipy's
    normal and the Laplace tail."""
    m, delta = 5, 1e-6
    gauss = GaussianMechanism(m * 1.0, 3.0)
    assert sparse_threshold(gauss, delta, m) == pytest.approx(2 * m + 3.0 * norm.isf(delta / m))
    assert 1 - norm.cdf((sparse_threshold(gauss, delta, m) - 2 * m) / 3.0) == pytest.approx(delta / m, rel=1e-6)
    lap = LaplaceMechanism(m * 1.0, 2.0)
    assert 0.5 * math.exp(-(sparse_threshold(lap, delta, m) - 2 * m) / 2.0) == pytest.approx(delta / m, rel=1e-9)
    query = SumQuery("cells", 10**6, (Block("v", 1, 1.0),), lambda c: (np.zeros(len(c), np.intp), c), sparse=True)
    from privclust.queries.plan import Allotment

    allotment = Allotment(mu=1.0, delta=delta)
    from privclust.queries.central import block_mechanisms

    unit = PrivacyUnit(m, True)
    spends, threshold = release_spends(query, block_mechanisms(query, allotment, m), allotment, unit)
    assert threshold == pytest.approx(2 * m + m * norm.isf(delta / m))  # floor m, plus m, plus std z; std = m / mu
    assert {s.relation for s in spends} == {user_relation(m)}


def test_the_private_box_counts_kept_rows_with_m_times_the_sensitivity():
    X = np.random.default_rng(5).normal(3, 1, (6000, 3))
    d, m = 3, 4
    ids = np.arange(len(X)) // 6
    noise = [RecordingNoise(), RecordingNoise()]
    private_bounds(X, 1.0, 1e-6, noise=noise[0])
    box = private_bounds(X, 1.0, 1e-6, noise=noise[1], users=_users(ids, m))
    np.testing.assert_allclose(noise[1].gaussian, m * np.array(noise[0].gaussian), rtol=1e-12)
    mu = gdp_mu(1.0, 1e-6)
    np.testing.assert_allclose(noise[0].gaussian, [math.sqrt(d) / (mu * math.sqrt(s)) for s in pb.STAGE_SHARES])
    assert {s.relation for s in box.steps} == {user_relation(m)}


def test_a_fit_states_its_unit_and_its_noise_scales_with_m():
    X = _mixture(n=6000)
    ids = np.arange(len(X)) // 5
    fits = {}
    for m in (1, 5):
        model = KMeans(3, epsilon=1.0, bounds=(-1, 1), algorithm="fastlloyd", public_n=1000, random_state=0)
        model.set_params(privacy_unit="user", max_rows_per_user=m)
        fits[m] = model.fit(X, user_ids=ids)
    report = fits[5].privacy_spent_
    assert report.privacy_unit == {"unit": "user", "max_rows_per_user": 5}
    assert report.as_dict()["privacy_unit"] == {"unit": "user", "max_rows_per_user": 5}
    assert "one user (at most 5 rows)" in str(report)
    assert fits[5].fit_info_["privacy_unit"] == {"unit": "user", "max_rows_per_user": 5}
    assert report.epsilon == pytest.approx(1.0)  # the same budget, spent on m-row sensitivities
    assert fits[5].fit_info_["n_estimate"] == 1000  # public_n: a public stand-in, never a user count
    assert "n_users" not in fits[5].fit_info_
    assert fits[1].labels_.shape == (len(X),)  # the data holder's labels cover every row, kept or not
    assert fits[5].labels_.shape == (len(X),)


# ------------------------------------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    "algorithm, params",
    [("maxcover", None), ("onecluster", None), ("greedy", {"selection": "exponential"})],
)
def test_mechanisms_over_exact_rows_are_refused_at_user_level_before_anything_is_spent(algorithm, params):
    shared = PrivacyAccountant()
    model = KMeans(
        3,
        epsilon=1.0,
        bounds=(-1, 1),
        algorithm=algorithm,
        algorithm_params=params,
        accountant=shared,
        privacy_unit="user",
        max_rows_per_user=3,
    )
    with pytest.raises(CapabilityError, match="user-level fit .* priced for one row"):
        model.fit(_mixture(), user_ids=np.arange(3000) // 4)
    assert shared.spends == []


@pytest.mark.parametrize(
    "params, fit_kwargs, message",
    [
        ({"privacy_unit": "user"}, {"user_ids": [0] * 10}, "needs max_rows_per_user"),
        ({"privacy_unit": "person", "max_rows_per_user": 2}, {}, "privacy_unit must be one of"),
        ({"max_rows_per_user": 2}, {}, "give it with privacy_unit='user'"),
        ({"privacy_unit": "user", "max_rows_per_user": 0}, {"user_ids": [0] * 10}, "max_rows_per_user must be"),
        ({"privacy_unit": "user", "max_rows_per_user": 2}, {}, r"needs fit\(X, user_ids=...\)"),
        ({}, {"user_ids": [0] * 10}, "user_ids are for a user-level fit"),
        (
            {"privacy_unit": "user", "max_rows_per_user": 2, "privacy_model": "local"},
            {"user_ids": [0] * 10},
            "central model",
        ),
    ],
)
def test_bad_user_level_parameters_are_refused_before_any_row_is_read(params, fit_kwargs, message):
    class Unreadable:
        shape = (10, 2)

        def __array__(self, *args, **kwargs):
            raise AssertionError("a row was read")

    with pytest.raises(ValueError, match=message):
        KMeans(2, epsilon=1.0, bounds=(-1, 1), algorithm="fastlloyd", **params).fit(Unreadable(), **fit_kwargs)


@pytest.mark.parametrize(
    "ids, message",
    [
        (np.array([0.0, np.nan, 1.0, 2.0]), "missing"),
        ([0, None, 1, 2], "missing"),
        (np.array(["a", None, "b", "c"], dtype=np.dtypes.StringDType(na_object=None)), "missing"),
        (np.zeros((4, 2)), "one-dimensional"),
        ([0, 1, 2], "one user id per row of X"),
    ],
)
def test_malformed_user_ids_are_refused_without_naming_an_id(ids, message):
    X = np.array([[0.1, 0.2], [0.3, 0.4], [-0.5, 0.6], [0.7, -0.8]])
    model = KMeans(2, epsilon=1.0, bounds=(-1, 1), algorithm="fastlloyd", privacy_unit="user", max_rows_per_user=2)
    with pytest.raises(ValueError, match=message) as caught:
        model.fit(X, user_ids=ids)
    assert "0.1" not in str(caught.value) and "nan" not in str(caught.value).lower()


def test_user_ids_of_another_length_are_refused_before_the_plan_meets_the_budget():
    spent = PrivacyAccountant(Budget(1.0, 1e-6))
    spent.spend(Spend("earlier", epsilon=1.0))  # nothing left: a checked plan would be refused for its budget
    model = KMeans(2, bounds=(-1, 1), algorithm="fastlloyd", privacy_unit="user", max_rows_per_user=2, accountant=spent)
    with pytest.raises(ValueError, match="their lengths differ"):
        model.fit(np.zeros((4, 2)), user_ids=[0, 1, 2])
    assert [s.label for s in spent.spends] == ["earlier"]


def test_a_user_column_name_for_rows_in_memory_is_refused_before_bounds_are_read_off_them():
    import warnings

    shared = PrivacyAccountant()
    model = KMeans(2, bounds="data", algorithm="fastlloyd", privacy_unit="user", max_rows_per_user=2, accountant=shared)
    with warnings.catch_warnings(), pytest.raises(ValueError, match="column name are for a Spark DataFrame"):
        warnings.simplefilter("ignore")
        model.fit(np.zeros((4, 2)), user_ids="user")
    assert shared.spends == []


def test_user_level_spends_never_compose_with_row_level_ones():
    shared = PrivacyAccountant(Budget(10.0, 1e-5))
    shared.spend(Spend("a row-level count", epsilon=0.5))
    model = KMeans(
        3,
        epsilon=1.0,
        bounds=(-1, 1),
        algorithm="fastlloyd",
        accountant=shared,
        privacy_unit="user",
        max_rows_per_user=2,
    )
    with pytest.raises(ValueError, match="different privacy units do not compose"):
        model.fit(_mixture(), user_ids=np.arange(3000) // 4)
    assert [s.label for s in shared.spends] == ["a row-level count"]


def test_a_ledger_file_run_refuses_user_level_releases(tmp_path):
    from privclust.privacy.ledger import LedgerAccountant

    ledger = LedgerAccountant.create(tmp_path / "ledger.json", Budget(5.0, 1e-5))
    with ledger.run(1.0, 1e-6, {"command": "test"}) as run:
        model = KMeans(
            3,
            epsilon=1.0,
            bounds=(-1, 1),
            algorithm="fastlloyd",
            accountant=run,
            privacy_unit="user",
            max_rows_per_user=2,
        )
        with pytest.raises(BudgetExceededError, match="one user's rows"):
            model.fit(_mixture(), user_ids=np.arange(3000) // 4)


# ------------------------------------------------------------------------------------------- the CLI


def _user_table(path, n=2400, users=400):
    rng = np.random.default_rng(6)
    X = _mixture(n=n)
    owners = rng.integers(0, users, n)
    lines = ["a,user,b"] + [f"{a},u{u},{b}" for (a, b), u in zip(X, owners)]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_cli_fit_with_a_user_column_protects_users_and_never_takes_it_as_a_feature(tmp_path):
    import json

    from typer.testing import CliRunner

    from privclust.cli import app

    table, centers = _user_table(tmp_path / "events.csv"), tmp_path / "centers.csv"
    args = ["fit", str(table), "-k", "3", "--bounds", "-1,1", "-a", "fastlloyd", "-o", str(centers), "--seed", "1"]
    out = CliRunner().invoke(app, [*args, "--user-column", "user", "--max-rows-per-user", "3", "--json"])
    assert out.exit_code == 0, out.output
    release = json.loads(out.stdout)["release"]
    assert release["columns"] == ["a", "b"]
    assert release["privacy_spent"]["privacy_unit"] == {"unit": "user", "max_rows_per_user": 3}
    assert centers.read_text().splitlines()[0] == "a,b"
    text = CliRunner().invoke(app, [*args, "--user-column", "1", "--max-rows-per-user", "3"])
    assert text.exit_code == 0 and "privacy unit: a user" in text.output  # the column by position, too


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--user-column", "user"], "go together"),
        (["--max-rows-per-user", "3"], "go together"),
        (["--user-column", "user", "--max-rows-per-user", "0"], "max_rows_per_user must be"),
        (["--user-column", "owner", "--max-rows-per-user", "3"], "no column 'owner'"),
        (["--user-column", "user", "--max-rows-per-user", "3", "--columns", "a,user"], "not a feature"),
    ],
)
def test_cli_user_level_flags_are_checked_before_any_row_is_read(tmp_path, extra, message):
    from typer.testing import CliRunner

    from privclust.cli import app

    table = _user_table(tmp_path / "events.csv", n=10, users=3)
    out = CliRunner().invoke(
        app, ["fit", str(table), "-k", "2", "--bounds", "-1,1", "-o", str(tmp_path / "c.csv"), *extra]
    )
    assert out.exit_code != 0
    assert message in " ".join(out.output.split())
    assert not (tmp_path / "c.csv").exists()


# ------------------------------------------------------------------------------------------- the benchmark


def test_synthetic_users_hold_the_rows_per_user_asked_for():
    from privclust.bench.userlevel import synthetic_users

    exact = np.bincount(synthetic_users(1000, 5, "exact", 0))
    assert exact.size == 200 and set(exact) == {5}
    drawn = np.bincount(synthetic_users(1000, 5, "random", 0), minlength=200)
    assert drawn.size == 200 and drawn.max() > 5 and drawn.mean() == 5


def test_bench_userlevel_writes_its_json_report_and_plot_with_both_units(tmp_path):
    import json

    from typer.testing import CliRunner

    from privclust.cli import app

    out = tmp_path / "ul"
    args = ["bench", "userlevel", "--dataset", "iris", "--algorithms", "fastlloyd", "--epsilons", "0.5,1"]
    result = CliRunner().invoke(app, [*args, "--runs", "2", "--assignment", "random", "--out", str(out)])
    assert result.exit_code == 0, result.output
    record = json.loads((out / "userlevel.json").read_text())
    units = {(r["unit"], json.dumps(r["privacy_unit"], sort_keys=True)) for r in record["runs"]}
    assert units == {("row", '{"unit": "row"}'), ("user", '{"max_rows_per_user": 5, "unit": "user"}')}
    assert len(record["runs"]) == 2 * 2 * 2 and 0 < record["setup"]["kept_share"] < 1
    assert {(s["algorithm"], s["unit"]) for s in record["summary"]} == {("fastlloyd", "row"), ("fastlloyd", "user")}
    assert "user level (m = 5)" in (out / "userlevel.md").read_text()
    assert (out / "userlevel.png").stat().st_size > 0


def test_bench_userlevel_draws_bench_utilitys_floor():
    from privclust.bench import userlevel, utility

    result = userlevel.run("iris", ["fastlloyd"], [1.0], [3], 5, 5, "exact")
    assert result["floor"] == utility.floor_nicv("iris")  # one floor for both benchmarks, whatever the seeds


def test_subsampling_and_the_opendp_measurement_refuse_a_user_level_model():
    """Both are stated for rows: Poisson sampling of rows does not amplify a user-level guarantee, and the
    OpenDP measurement's input metric is the symmetric distance over rows."""
    from privclust import Subsampled
    from privclust.opendp import make_private_kmeans

    model = KMeans(3, epsilon=1.0, bounds=(-1, 1), algorithm="fastlloyd", privacy_unit="user", max_rows_per_user=2)
    shared = PrivacyAccountant()
    with pytest.raises(ValueError, match="amplifies row-level fits only"):
        Subsampled(model.set_params(accountant=shared), rate=0.5).fit(_mixture(), user_ids=np.arange(3000))
    assert shared.spends == []
    with pytest.raises(ValueError, match="symmetric distance over rows"):
        make_private_kmeans(model.set_params(accountant=None), n_features=2)


def test_a_ledger_file_keeps_the_user_level_relation_of_every_spend(tmp_path):
    from privclust.privacy.ledger import LedgerAccountant

    ledger = LedgerAccountant.create(tmp_path / "ledger.json", Budget(5.0, 1e-5))
    model = KMeans(
        3,
        epsilon=1.0,
        bounds=(-1, 1),
        algorithm="fastlloyd",
        accountant=ledger,
        privacy_unit="user",
        max_rows_per_user=2,
    )
    model.fit(_mixture(), user_ids=np.arange(3000) // 4)
    reread = LedgerAccountant.open(tmp_path / "ledger.json")
    assert reread.spends and {s.relation for s in reread.spends} == {user_relation(2)}
    assert reread.report().privacy_unit == {"unit": "user", "max_rows_per_user": 2}


def test_the_private_box_of_a_user_level_fit_reads_kept_rows_and_states_the_unit():
    X = _mixture(n=30_000)
    model = KMeans(3, epsilon=4.0, algorithm="fastlloyd", privacy_unit="user", max_rows_per_user=2, random_state=0)
    model.fit(X * 3.0, user_ids=np.arange(len(X)) // 3)
    labels = [s.label for s in model.privacy_spent_.steps]
    assert {"domain: magnitudes", "domain: octaves", "domain: edges"} <= set(labels)
    assert {s.relation for s in model.privacy_spent_.steps} == {user_relation(2)}
    assert np.all(np.array(model.fit_info_["domain"]["upper"]) <= 4.0)


def test_a_memory_mapped_input_keeps_the_same_rows_as_the_array(tmp_path):
    """A memory map is read chunk by chunk at the kept positions: the seeded fit is the in-memory fit."""
    X = _mixture(n=4000)
    np.save(tmp_path / "X.npy", X)
    ids = np.random.default_rng(8).integers(0, 500, len(X))
    fits = []
    for data in (X, np.load(tmp_path / "X.npy", mmap_mode="r")):
        model = KMeans(3, epsilon=1.0, bounds=(-1, 1), algorithm="fastlloyd", random_state=3)
        fits.append(model.set_params(privacy_unit="user", max_rows_per_user=2).fit(data, user_ids=ids))
    np.testing.assert_allclose(fits[0].cluster_centers_, fits[1].cluster_centers_, rtol=1e-9, atol=1e-12)
    assert fits[1].labels_.shape == (len(X),)


def test_a_user_level_fit_with_a_private_n_composes_its_stages_in_gdp_as_a_row_level_one_does():
    """Covers are stated in the spends' relation, so the union of auto's plans composes at user level too: the
    fit's second stage takes all the count leaves (its record was 0.949 of epsilon, basic composition's split)
    and the record is that union, for the user relation."""
    from privclust.privacy.budget import Cover, composes_within

    rng = np.random.default_rng(0)
    X, users = rng.uniform(-1, 1, (6000, 3)), np.repeat(np.arange(2000), 3)
    model = KMeans(4, epsilon=1.0, delta=1e-6, bounds=(-1, 1), privacy_unit="user", max_rows_per_user=3)
    model.fit(X, user_ids=users)
    assert model.privacy_spent_.relation == user_relation(3)
    assert model.privacy_spent_.epsilon == pytest.approx(1.0, rel=1e-6)
    union, spent = Cover.of_any(model.planned_spends(3)), Cover.of(model.privacy_spent_.steps)
    assert union.relation == spent.relation == user_relation(3)
    assert (spent.mu, spent.epsilon, spent.delta) == pytest.approx((union.mu, union.epsilon, union.delta), rel=1e-12)
    budget, small = Budget(1.0, 1e-6), [Spend("a", mu=0.1, relation=user_relation(3))]
    assert composes_within(budget, [small]) and not composes_within(
        budget, [[Spend("a", mu=5.0, relation=user_relation(3))]]
    )
    # two user levels do not compose: no plan mixing them is admitted
    assert not composes_within(budget, [small, [Spend("b", mu=0.1, relation=user_relation(4))]])

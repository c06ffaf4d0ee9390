"""The Spark engine: the executors' exact sums equal the in-memory oracle's, and a fit is the same fit."""

import os
import sys

import goldens
import numpy as np
import pytest

from privclust import KMeans
from privclust.geometry.private_box import DOMAIN_LABELS
from privclust.privacy import PrivacyAccountant
from privclust.privacy.budget import Budget
from privclust.queries import Block, MemoryRows, SumQuery, count_query, voronoi_query
from privclust.queries.spark import (
    SparkRows,
    is_local_master,
    is_spark_frame,
    parquet_read_by_workers,
    spark_session,
)
from privclust.queries.voronoi import VoronoiCells

# createDataFrame in these tests goes through PySpark's pandas checks; privclust's own path does not.
pytestmark = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")


@pytest.fixture(scope="module")
def spark():
    # Executors import privclust: they must run this environment's Python, not whatever python3 is first on PATH.
    previous = os.environ.get("PYSPARK_PYTHON")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    session = spark_session("local[2]", driver_memory="1g")
    session.conf.set("spark.sql.shuffle.partitions", "4")
    yield session
    session.stop()
    if previous is None:
        os.environ.pop("PYSPARK_PYTHON", None)
    else:
        os.environ["PYSPARK_PYTHON"] = previous


def test_local_session_jvm_collects_without_adaptive_sizing(spark):
    # The options reach the JVM the session started (not only its conf): its collectors are the parallel ones,
    # and adaptive sizing, which grew the heap with the rows passing through, is off.
    jvm = spark.sparkContext._jvm
    collectors = {bean.getName() for bean in jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()}
    assert collectors == {"PS Scavenge", "PS MarkSweep"}
    arguments = list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert "-XX:-UseAdaptiveSizePolicy" in arguments
    assert is_local_master("local[2]") and is_local_master("local") and not is_local_master("local-cluster[2,1,1024]")


def _frame(spark, X, partitions=3):
    return spark.createDataFrame(
        [tuple(map(float, row)) for row in X], [f"x{j}" for j in range(X.shape[1])]
    ).repartition(partitions)


def _rows(spark, X):
    clip = lambda rows: np.clip(rows, -1.0, 1.0)  # noqa: E731
    return (
        MemoryRows(X, X.shape[1], transform=clip, chunk_rows=50),
        SparkRows(_frame(spark, X, partitions=6), transform=clip),
    )


def test_spark_sums_equal_the_in_memory_sums(spark):
    X = np.random.default_rng(0).uniform(-1.2, 1.2, (700, 3))
    central, distributed = _rows(spark, X)
    cells = VoronoiCells(np.array([[0.5, 0.5, 0.0], [-0.5, -0.5, 0.0]]), radius=0.8, relative=True)
    voronoi = voronoi_query("step", cells, Block("sum", 3, 0.8))

    def grid(rows):
        return np.floor((rows[:, 0] + 1.0) * 4).astype(np.int64) * 1000, np.hstack([rows, np.ones((len(rows), 1))])

    sparse = SumQuery("cells", 10_000, (Block("sums", 4, 2.0),), grid, sparse=True)
    queries = [voronoi, count_query(), sparse]
    (v_a, n_a, (ids_a, sums_a)), (v_b, n_b, (ids_b, sums_b)) = central.sums(queries), distributed.sums(queries)
    assert np.allclose(v_a, v_b) and n_a[0, 0] == n_b[0, 0] == 700
    assert np.array_equal(ids_a, ids_b) and np.allclose(sums_a, sums_b)
    mapped_a, mapped_b = central.map_rows(lambda r: r[:, 0] * 2), distributed.map_rows(lambda r: r[:, 0] * 2)
    assert np.allclose(np.sort(mapped_a), np.sort(mapped_b))  # the same rows, in partition order
    distributed.close()


@pytest.mark.parametrize(
    "algorithm, options",
    # few levels: one Spark job per query; the sequential greedy on Spark (its default there is the MPC greedy)
    [("fastlloyd", None), ("greedy", {"levels": 4, "mpc": False}), ("maxcover", None)],
)
def test_a_seeded_fit_on_spark_is_the_in_memory_fit(spark, algorithm, options):
    rng = np.random.default_rng(1)
    truth = np.array([[-0.6, -0.6], [0.6, 0.6], [-0.6, 0.6]])
    X = np.clip(truth[rng.integers(0, 3, 3000)] + rng.normal(0, 0.05, (3000, 2)), -1, 1)
    params = dict(epsilon=2.0, delta=1e-6, bounds=(-1, 1), algorithm=algorithm, random_state=7, public_n=3000)
    params["algorithm_params"] = options
    local = KMeans(3, **params).fit(X)
    distributed = KMeans(3, **params).fit(_frame(spark, X))
    order = lambda c: c[np.lexsort(c.T)]  # noqa: E731
    assert np.allclose(order(local.cluster_centers_), order(distributed.cluster_centers_), atol=1e-6)
    assert distributed.privacy_spent_.epsilon == pytest.approx(local.privacy_spent_.epsilon)
    assert not hasattr(distributed, "labels_")  # training-row labels are not gathered from the cluster


def test_the_mpc_greedy_on_spark_is_pinned(spark):
    """The golden ledger and seeded centers of the MPC greedy over 3 partitions (see test_golden.py)."""
    X = goldens.blobs(4000)
    fit = KMeans(3, **goldens.central_params("greedy-mpc")).fit(_frame(spark, X, partitions=3))
    goldens.check("spark-greedy-mpc", goldens.record(fit))


def test_spark_input_is_checked_before_anything_is_spent(spark):
    ledger = PrivacyAccountant(Budget(1.0, 1e-6))
    text = spark.createDataFrame([(1.0, "a"), (2.0, "b")], ["x", "label"])
    with pytest.raises(ValueError, match="non-numeric columns"):
        KMeans(2, bounds=(0, 3), accountant=ledger).fit(text)
    missing = spark.createDataFrame([(1.0, 2.0), (None, 1.0), (0.5, 0.5)], "x double, y double")
    with pytest.raises(ValueError, match="missing or non-finite"):
        KMeans(2, bounds=(0, 3), accountant=ledger).fit(missing)
    with pytest.raises(ValueError, match="declare public bounds"):
        KMeans(2, bounds="data").fit(_frame(spark, np.zeros((4, 2))))
    assert ledger.spends == []


def test_rows_reach_the_executors_the_same_through_the_jvms_arrow_batches_and_through_map_in_arrow(spark, monkeypatch):
    """Columns of any name and numeric type, by position: the JVM's Arrow batches (the default path) and
    mapInArrow (where the JVM lacks toArrowBatchRdd) hand the executors the same rows, in memory's sums."""
    X = np.random.default_rng(3).uniform(-1.2, 1.2, (500, 3))
    X[:, 1] = np.round(X[:, 1] * 10)  # whole numbers, for the int column
    frame = spark.createDataFrame(
        [(float(a), int(b), float(c)) for a, b, c in X], "`a.b` double, `c d` int, e double"
    ).selectExpr("`a.b`", "`c d`", "cast(e as decimal(20, 10)) as `e`")
    X[:, 2] = np.round(X[:, 2], 10)
    queries = [count_query(), SumQuery("all", 1, (Block("sums", 3, 20.0),), lambda r: (np.zeros(len(r), int), r))]
    expected = MemoryRows(X, 3).sums(queries)
    arrow = SparkRows(frame)
    assert arrow._arrow_rdd() is not None  # this Spark has the JVM's Arrow batches
    answers = [arrow.sums(queries)]
    monkeypatch.setattr(SparkRows, "_arrow_rdd", lambda self: None)
    answers.append(SparkRows(frame).sums(queries))
    for (count, sums), ((want_count, want_sums)) in zip(answers, [expected] * 2):
        assert count[0, 0] == want_count[0, 0] == 500
        assert np.allclose(sums, want_sums)


def test_only_spark_frames_take_the_spark_path(spark):
    frame = _frame(spark, np.zeros((2, 2)))
    assert is_spark_frame(frame) and not is_spark_frame(np.zeros((2, 2)))
    with pytest.raises(ValueError, match="only KMeans.fit and KMeans.predict take"):
        KMeans(2, bounds=(-1, 1)).fit(np.zeros((2, 2))).transform(frame)
    with pytest.raises(ValueError, match="call fit, then predict"):
        KMeans(2, bounds=(-1, 1)).fit_predict(frame)


def test_the_cli_runs_the_same_job_on_spark(spark, tmp_path):
    import json

    from typer.testing import CliRunner

    from privclust.cli import app

    rng = np.random.default_rng(2)
    truth = np.array([[-0.6, -0.6], [0.6, 0.6], [-0.6, 0.6]])
    X = np.clip(truth[rng.integers(0, 3, 2000)] + rng.normal(0, 0.05, (2000, 2)), -1, 1)
    np.savetxt(tmp_path / "rows.csv", X, delimiter=",", header="a,b", comments="")
    common = ["--bounds=-1,1", "-k", "3", "--seed", "5", "--public-n", "2000", "--json"]
    local = CliRunner().invoke(app, ["fit", str(tmp_path / "rows.csv"), "-o", str(tmp_path / "local.csv"), *common])
    on_spark = CliRunner().invoke(
        app,
        ["fit", str(tmp_path / "rows.csv"), "--engine", "spark", "-o", str(tmp_path / "spark.csv"), *common],
    )
    assert local.exit_code == 0 and on_spark.exit_code == 0, on_spark.output
    a, b = (
        np.loadtxt(tmp_path / "local.csv", delimiter=",", skiprows=1),
        np.loadtxt(tmp_path / "spark.csv", delimiter=",", skiprows=1),
    )
    assert np.allclose(a, b, atol=1e-6)
    assert json.loads(on_spark.output)["release"]["privacy_spent"]["epsilon"] == pytest.approx(1.0)
    labelled = CliRunner().invoke(
        app,
        ["fit", str(tmp_path / "rows.csv"), "--engine", "spark", "--labels", str(tmp_path / "labelled"), *common],
    )
    assert labelled.exit_code == 0, labelled.output
    written = spark.read.parquet(str(tmp_path / "labelled"))
    assert written.columns == ["a", "b", "cluster"] and written.count() == 2000
    again = CliRunner().invoke(
        app, ["fit", str(tmp_path / "rows.csv"), "--engine", "spark", "--labels", str(tmp_path / "labelled"), *common]
    )
    assert again.exit_code == 2 and "exists" in again.output


def test_the_cli_reads_a_parquet_file_on_spark_by_the_workers_and_fits_as_in_memory(spark, tmp_path):
    """What the CLI reads from a Parquet file is a plain scan, so the workers read it (docs/spark.md), and the job is
    the in-memory job."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq
    from typer.testing import CliRunner

    from privclust.cli import app
    from privclust.io import read_spark_frame

    rng = np.random.default_rng(8)
    truth = np.array([[-0.6, -0.6], [0.6, 0.6], [-0.6, 0.6]])
    X = np.clip(truth[rng.integers(0, 3, 2000)] + rng.normal(0, 0.05, (2000, 2)), -1, 1)
    pq.write_table(pa.table({"a": X[:, 0], "b": X[:, 1]}), tmp_path / "rows.parquet", row_group_size=300)
    assert parquet_read_by_workers(read_spark_frame(tmp_path / "rows.parquet", spark)) is not None
    np.save(tmp_path / "rows.npy", X)
    common = ["--bounds=-1,1", "-k", "3", "--seed", "5", "--public-n", "2000", "--json"]
    local = CliRunner().invoke(app, ["fit", str(tmp_path / "rows.npy"), "-o", str(tmp_path / "local.csv"), *common])
    on_spark = CliRunner().invoke(
        app, ["fit", str(tmp_path / "rows.parquet"), "--engine", "spark", "-o", str(tmp_path / "spark.csv"), *common]
    )
    assert local.exit_code == 0 and on_spark.exit_code == 0, on_spark.output
    a, b = (np.loadtxt(tmp_path / f"{name}.csv", delimiter=",", skiprows=1) for name in ("local", "spark"))
    assert np.allclose(a, b, atol=1e-6)
    assert json.loads(on_spark.output)["release"]["privacy_spent"]["epsilon"] == pytest.approx(1.0)


def test_subsampled_fits_a_poisson_sample_that_stays_in_spark(spark):
    from privclust import Subsampled

    rng = np.random.default_rng(3)
    truth = np.array([[-0.6, -0.6], [0.6, 0.6], [-0.6, 0.6]])
    X = np.clip(truth[rng.integers(0, 3, 6000)] + rng.normal(0, 0.05, (6000, 2)), -1, 1)
    base = KMeans(3, epsilon=1.0, delta=1e-6, bounds=(-1, 1), public_n=6000, random_state=0)
    model = Subsampled(base, rate=0.5, random_state=1).fit(_frame(spark, X))
    assert model.privacy_spent_.epsilon < base.epsilon  # amplified (Theorem 1)
    assert np.linalg.norm(model.cluster_centers_[:, None] - truth[None], axis=-1).min(1).max() < 0.15


def test_the_elbow_curve_and_one_cluster_run_on_spark_as_in_memory(spark):
    from privclust import one_cluster
    from privclust.elbow import elbow_curve

    rng = np.random.default_rng(5)
    truth = np.array([[-0.6, -0.6], [0.6, 0.6], [-0.6, 0.6], [0.6, -0.6]])
    X = np.clip(truth[rng.integers(0, 4, 4000)] + rng.normal(0, 0.04, (4000, 2)), -1, 1)
    frame = _frame(spark, X)
    options = {"levels": 4}
    local = elbow_curve(X, 6, bounds=(-1, 1), random_state=3, algorithm_params=options)
    distributed = elbow_curve(frame, 6, bounds=(-1, 1), random_state=3, algorithm_params=options)
    assert np.allclose(local.costs, distributed.costs) and local.elbow == distributed.elbow
    ball = one_cluster(frame, 900, epsilon=2.0, delta=1e-6, bounds=(-1, 1), random_state=4)
    assert ball.found and np.linalg.norm(truth - ball.center, axis=1).min() < 0.1


def test_bench_spark_reports_both_engines_and_their_agreement(spark, tmp_path):
    from privclust.bench import spark as bench

    engines = ("memory", "spark", "spark-jvm")
    rows = bench.run([2000], 3, 2, "fastlloyd", 1, "local[2]", tmp_path / "data", "1g", engines=engines, noise="seeded")
    assert [r["engine"] for r in rows] == list(engines)
    assert [r["reader"] for r in rows] == [None, "workers", "jvm"]  # the plain scan, and the renamed columns
    assert all(r["max_center_gap"] < 1e-9 for r in rows)  # the same seeded fit on every engine
    spark_row = next(r for r in rows if r["engine"] == "spark")
    assert spark_row["jvm_peak_mib"] > 100 and spark_row["driver_peak_mib"] > spark_row["python_peak_mib"]
    report = bench.write_report(rows, tmp_path, "test machine").read_text()
    assert "| 2,000 |" in report and (tmp_path / "spark_seconds.png").exists()


def test_predict_labels_a_spark_frame_where_its_rows_are(spark):
    rng = np.random.default_rng(6)
    X = rng.uniform(-1, 1, (1500, 3))
    model = KMeans(4, bounds=(-1, 1), random_state=0).fit(X)
    frame = _frame(spark, X, partitions=4)
    labelled = model.predict(frame)
    rows = np.array(labelled.collect(), dtype=float)  # the features and the new column, in some order
    assert labelled.columns[-1] == "cluster"
    assert np.array_equal(rows[:, -1].astype(int), model.predict(rows[:, :-1]))
    with pytest.raises(ValueError, match="already has a column"):
        model.predict(frame.withColumnRenamed("x2", "cluster"))  # a feature named like the new column


def test_a_seeded_greedy_above_four_dimensions_on_spark_is_the_in_memory_fit(spark):
    """A JL projection (shipped to the executors without its per-chunk memory) and sparse levels narrowed by
    the coarser ones: the same releases, so the same centers."""
    rng = np.random.default_rng(2)
    truth = rng.uniform(-0.6, 0.6, (3, 6))
    X = np.clip(truth[rng.integers(0, 3, 4000)] + rng.normal(0, 0.05, (4000, 6)), -1, 1)
    params = dict(epsilon=2.0, delta=1e-6, bounds=(-1, 1), algorithm="greedy", random_state=3, public_n=4000)
    params["algorithm_params"] = {"levels": 5, "mpc": False}  # levels 3 and 4 are sparse after the 4-d projection
    local = KMeans(3, **params).fit(X)
    distributed = KMeans(3, **params).fit(_frame(spark, X))
    order = lambda c: c[np.lexsort(c.T)]  # noqa: E731
    assert np.allclose(order(local.cluster_centers_), order(distributed.cluster_centers_), atol=1e-6)


def _greedy_job(seed: int, random_state: int):
    """4,000 rows of four clusters in 6-d, and a seeded greedy fit's parameters (the MPC tree's tests)."""
    rng = np.random.default_rng(seed)
    truth = rng.uniform(-0.6, 0.6, (4, 6))
    X = np.clip(truth[rng.integers(0, 4, 4000)] + rng.normal(0, 0.05, (4000, 6)), -1, 1)
    params = dict(epsilon=2.0, delta=1e-6, bounds=(-1, 1), algorithm="greedy", random_state=random_state, public_n=4000)
    return X, params


def test_the_mpc_greedy_on_spark_is_the_in_memory_merge_tree_and_never_gathers_the_balls(spark, monkeypatch):
    """On Spark the greedy is seed 000's MPC greedy by default: the sparse levels are noised and reduced by the
    executors, so no sparse answer reaches the driver; with as many partitions as Spark's shuffle (4) the
    in-memory merge tree gives the same centers for the same seed."""
    from privclust.queries.spark import SparkRows

    X, params = _greedy_job(seed=5, random_state=11)
    gathered = []
    plain_sums = SparkRows.sums
    monkeypatch.setattr(
        SparkRows, "sums", lambda self, qs: gathered.extend(q.sparse for q in qs) or plain_sums(self, qs)
    )
    distributed = KMeans(4, algorithm_params={"levels": 6}, **params).fit(_frame(spark, X))
    assert distributed.fit_info_["mpc"] and gathered and not any(gathered)
    monkeypatch.setattr(MemoryRows, "partitions", property(lambda self: 4))
    local = KMeans(4, algorithm_params={"levels": 6, "mpc": True}, **params).fit(X)
    order = lambda c: c[np.lexsort(c.T)]  # noqa: E731
    assert np.allclose(order(local.cluster_centers_), order(distributed.cluster_centers_), atol=1e-6)
    assert distributed.privacy_spent_.epsilon == pytest.approx(local.privacy_spent_.epsilon)


def test_the_merge_trees_machines_run_in_fewer_tasks_and_give_the_same_tree(spark, monkeypatch):
    """Spark runs the MPC tree's machines (Spark's shuffle partitions) in a few tasks, each a run of machines in
    order: with 20 machines on 2 cores (4 tasks), a seeded fit is still the in-memory tree of 20 machines."""
    from privclust.queries.spark import SparkRows

    X, params = _greedy_job(seed=6, random_state=13)
    tasks = []
    plain = SparkRows._tasks
    monkeypatch.setattr(SparkRows, "_tasks", lambda self, machines: tasks.append(plain(self, machines)) or tasks[-1])
    spark.conf.set("spark.sql.shuffle.partitions", "20")
    try:
        distributed = KMeans(4, algorithm_params={"levels": 6}, **params).fit(_frame(spark, X))
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", "4")
    assert distributed.fit_info_["mpc"] and tasks and max(tasks) < 20
    monkeypatch.setattr(MemoryRows, "partitions", property(lambda self: 20))
    local = KMeans(4, algorithm_params={"levels": 6, "mpc": True}, **params).fit(X)
    order = lambda c: c[np.lexsort(c.T)]  # noqa: E731
    assert np.allclose(order(local.cluster_centers_), order(distributed.cluster_centers_), atol=1e-6)


def test_a_user_level_fit_on_spark_bounds_each_users_rows_where_they_live(spark):
    """The user column is not a feature; the executors keep at most m rows per user, chosen by secret coins
    (a row's values play no part: column x0 carries its index, and the kept indices are a per-user subset);
    the fit's spends state the unit, and a missing user column is refused before any row is read."""
    from privclust.privacy.unit import PrivacyUnit, UserBound

    rng = np.random.default_rng(4)
    n, m = 600, 2
    owners = rng.integers(0, 120, n)
    X = np.column_stack([np.arange(n) / n, rng.uniform(-1, 1, n)])
    frame = spark.createDataFrame(
        [(float(a), float(b), f"u{u}") for (a, b), u in zip(X, owners)], ["x0", "x1", "user"]
    ).repartition(3)
    bound = UserBound("user", PrivacyUnit(m, True), np.random.default_rng(1))
    rows = SparkRows(frame, users=bound)
    assert rows.n_features == 2
    kept = np.rint(rows.map_rows(lambda chunk: chunk[:, 0]) * n).astype(int)
    assert np.bincount(owners[kept]).max() == m and kept.size == sum(min(m, c) for c in np.bincount(owners))
    rows.close()

    model = KMeans(2, epsilon=1.0, bounds=(-1, 1), algorithm="fastlloyd", privacy_unit="user", max_rows_per_user=m)
    model.fit(frame, user_ids="user")
    assert model.privacy_spent_.privacy_unit == {"unit": "user", "max_rows_per_user": m}
    assert model.cluster_centers_.shape == (2, 2)
    with pytest.raises(ValueError, match="no user column 'owner'"):
        KMeans(2, bounds=(-1, 1), privacy_unit="user", max_rows_per_user=m).fit(frame, user_ids="owner")


def test_a_poisson_sample_of_spark_rows_is_kept_by_the_executors_and_stays_the_same_sample(spark):
    X = np.random.default_rng(5).uniform(-1, 1, (4000, 2))
    rows = SparkRows(_frame(spark, X, partitions=4))
    sample = rows.poisson_sample(0.25, np.random.default_rng(0))
    (first,), (again,) = sample.sums([count_query()]), sample.sums([count_query()])
    assert first[0, 0] == again[0, 0]  # every pass reads the same kept rows
    assert 800 < first[0, 0] < 1200  # Binomial(4000, 0.25): 1000 +- 27
    kept = sample.map_rows(lambda r: r)
    assert {tuple(r) for r in kept} <= {tuple(r) for r in X}  # rows of X, none altered
    other = rows.poisson_sample(0.25, np.random.default_rng(1)).map_rows(lambda r: r)
    assert {tuple(r) for r in kept} != {tuple(r) for r in other}  # the coins come from the secret seed
    rows.close()
    assert not sample._rdd.is_cached  # the sample's cache is dropped with the rows


def test_the_default_start_reads_a_poisson_sample_on_spark_as_in_memory(spark):
    rng = np.random.default_rng(4)
    truth = np.array([[-0.6, -0.6, 0.0], [0.6, 0.6, 0.0]])  # d = 3: auto's FastLloyd from the greedy start
    X = np.clip(truth[rng.integers(0, 2, 20_000)] + rng.normal(0, 0.05, (20_000, 3)), -1, 1)
    params = dict(epsilon=4.0, delta=1e-6, bounds=(-1, 1), public_n=20_000, random_state=2)
    local = KMeans(2, **params).fit(X)
    distributed = KMeans(2, **params).fit(_frame(spark, X, partitions=4))
    rate = local.fit_info_["init"]["sample_rate"]
    assert rate < 1.0 and distributed.fit_info_["init"]["sample_rate"] == rate  # a public rate, the same plan
    spent, planned = distributed.privacy_spent_, local.privacy_spent_  # the start is the MPC greedy there
    assert (spent.epsilon, spent.delta) == pytest.approx((planned.epsilon, planned.delta))
    assert np.linalg.norm(distributed.cluster_centers_[:, None] - truth[None], axis=-1).min(1).max() < 0.05


def test_the_mpc_greedys_levels_read_a_poisson_sample_on_spark_as_in_memory(spark, monkeypatch):
    from privclust.algorithms import greedy as greedy_module

    monkeypatch.setattr(greedy_module, "SAMPLE_SIGNAL", 2_000.0)  # the levels read a fifth of 20,000 rows at k = 2
    rng = np.random.default_rng(4)
    truth = np.array([[-0.6, -0.6, 0.0], [0.6, 0.6, 0.0]])
    X = np.clip(truth[rng.integers(0, 2, 20_000)] + rng.normal(0, 0.05, (20_000, 3)), -1, 1)
    params = dict(epsilon=1.0, delta=1e-6, bounds=(-1, 1), public_n=20_000, algorithm="greedy", random_state=2)
    local = KMeans(2, **params).fit(X)
    distributed = KMeans(2, **params).fit(_frame(spark, X, partitions=4))
    assert distributed.fit_info_["mpc"] and distributed.fit_info_["levels_sample_rate"] == pytest.approx(0.2)
    assert local.fit_info_["levels_sample_rate"] == pytest.approx(0.2)
    spent, planned = distributed.privacy_spent_, local.privacy_spent_
    assert (spent.epsilon, spent.delta) == pytest.approx((planned.epsilon, planned.delta))
    assert np.linalg.norm(distributed.cluster_centers_[:, None] - truth[None], axis=-1).min(1).max() < 0.05
    assert abs(distributed.cluster_sizes_.sum() - 20_000) < 2_000  # the lifting reads every row


@pytest.mark.parametrize("kind", ["text", "float"])
def test_a_missing_user_id_on_spark_is_refused_as_in_memory_before_anything_is_spent(spark, kind):
    """Null ids were one "user" bounded to m rows on Spark, where the in-memory fit refuses them."""
    rng = np.random.default_rng(6)
    X = rng.uniform(-1, 1, (40, 2))
    owners = [f"u{i % 7}" if kind == "text" else float(i % 7) for i in range(40)]
    owners[23] = None
    frame = spark.createDataFrame([(float(a), float(b), u) for (a, b), u in zip(X, owners)], ["x0", "x1", "user"])
    fit = dict(epsilon=1.0, bounds=(-1, 1), algorithm="fastlloyd", privacy_unit="user", max_rows_per_user=3)
    accountant = PrivacyAccountant()
    with pytest.raises(ValueError) as on_spark:
        KMeans(2, accountant=accountant, **fit).fit(frame, user_ids="user")
    ids = np.array(owners, dtype=object if kind == "text" else float)  # None is NaN among float ids
    with pytest.raises(ValueError) as in_memory:
        KMeans(2, **fit).fit(X, user_ids=ids)
    assert str(on_spark.value) == str(in_memory.value)
    assert accountant.spends == []  # refused before any release


def test_a_private_box_on_spark_is_the_in_memory_box_and_fit(spark):
    """bounds=None on Spark: the box's three histograms are counted by the executors and noised by the driver's
    oracle, so a seeded fit finds the in-memory box exactly (counts are integers) and then the same fit; an outer
    limit works the same way, and every release is charged as in memory."""
    rng = np.random.default_rng(2)
    truth = np.array([[40.0, -3.0], [55.0, 2.0], [48.0, 9.0]])
    X = truth[rng.integers(0, 3, 3000)] + rng.normal(0, 1.0, (3000, 2))
    frame = _frame(spark, X)
    for bounds in (None, {"outer": (-1000, 1000)}):
        params = dict(epsilon=2.0, delta=1e-6, bounds=bounds, algorithm="fastlloyd", random_state=5, public_n=3000)
        local = KMeans(3, **params).fit(X)
        distributed = KMeans(3, **params).fit(frame)
        assert distributed.fit_info_["domain"]["lower"] == local.fit_info_["domain"]["lower"]
        assert distributed.fit_info_["domain"]["upper"] == local.fit_info_["domain"]["upper"]
        assert np.all(np.array(local.fit_info_["domain"]["upper"]) < 100)  # a box found from the rows' histograms
        labels = [s.label for s in distributed.privacy_spent_.steps]
        assert labels == [s.label for s in local.privacy_spent_.steps] and labels[:3] == list(DOMAIN_LABELS)
        order = lambda c: c[np.lexsort(c.T)]  # noqa: E731
        assert np.allclose(order(local.cluster_centers_), order(distributed.cluster_centers_), atol=1e-6)


def test_the_cli_finds_the_private_box_on_spark_as_in_memory(spark, tmp_path):
    """`privclust fit --engine spark` without --bounds (and with --outer-bounds) finds the box the in-memory
    job finds and prints it; both were refused before the box's releases went through the oracle."""
    import json

    from typer.testing import CliRunner

    from privclust.cli import app

    rng = np.random.default_rng(3)
    X = np.column_stack([rng.normal(40, 4, 2000), rng.normal(-3, 0.5, 2000)])
    np.savetxt(tmp_path / "rows.csv", X, delimiter=",", header="a,b", comments="")
    for extra in ([], ["--bounds=-100,100", "--outer-bounds"]):
        common = ["-k", "3", "--seed", "5", "--public-n", "2000", "--json", *extra]
        local = CliRunner().invoke(app, ["fit", str(tmp_path / "rows.csv"), "-o", str(tmp_path / "l.csv"), *common])
        on_spark = CliRunner().invoke(
            app, ["fit", str(tmp_path / "rows.csv"), "--engine", "spark", "-o", str(tmp_path / "s.csv"), *common]
        )
        assert local.exit_code == 0 and on_spark.exit_code == 0, on_spark.output
        box_local = json.loads(local.output)["release"]["private_box"]
        box_spark = json.loads(on_spark.output)["release"]["private_box"]
        assert (box_spark["lower"], box_spark["upper"]) == (box_local["lower"], box_local["upper"])


def test_a_user_level_fit_on_spark_finds_its_box_from_the_rows_its_executors_keep(spark):
    """The box's histograms count the rows the executors kept (at most m per user), noised for m rows, and the
    fit reads those same cached rows: every spend, the box's first, is stated for user neighbours."""
    from privclust.privacy.unit import user_relation

    rng = np.random.default_rng(6)
    n, m = 900, 2
    X = np.column_stack([rng.normal(30, 2, n), rng.normal(-5, 1, n)])
    frame = spark.createDataFrame(
        [(float(a), float(b), int(u)) for (a, b), u in zip(X, rng.integers(0, 300, n))], ["x0", "x1", "user"]
    ).repartition(3)
    model = KMeans(2, epsilon=4.0, delta=1e-6, algorithm="fastlloyd", privacy_unit="user", max_rows_per_user=m)
    model.fit(frame, user_ids="user")
    steps = model.privacy_spent_.steps
    assert [s.label for s in steps[:3]] == list(DOMAIN_LABELS)
    assert {s.relation for s in steps} == {user_relation(m)}
    lower, upper = np.array(model.fit_info_["domain"]["lower"]), np.array(model.fit_info_["domain"]["upper"])
    # a box about the kept rows (at this budget and ~600 kept rows its scale is found within a few octaves)
    assert np.all(lower < X.min(0) + 5) and np.all(upper > X.max(0) - 5) and np.all(upper - lower < 2.0**12)


def _sum_all(d):
    return SumQuery("all", 1, (Block("sums", d, 1e4),), lambda r: (np.zeros(len(r), int), r))


def _parquet_files(folder, X, files=2, row_group=150):
    """X's rows split over ``files`` Parquet files of small row groups: columns a (double), b (bigint), c (float)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir()
    for i, part in enumerate(np.array_split(X, files)):
        table = pa.table(
            {
                "a": part[:, 0],
                "b": part[:, 1].astype(np.int64),
                "c": part[:, 2].astype(np.float32),
            }
        )
        pq.write_table(table, folder / f"part-{i}.parquet", row_group_size=row_group)
    return folder


def test_a_plain_parquet_scan_is_read_by_the_workers_with_the_rows_the_jvm_gives(spark, tmp_path, monkeypatch):
    """A frame that is only its files (here a folder, two of its three columns reordered) is read by the Python
    workers row group by row group, no cache in local mode: the same sums as the JVM's path and as memory."""
    from privclust.queries import spark_parquet

    rng = np.random.default_rng(4)
    X = np.column_stack([rng.uniform(-1.2, 1.2, 1000), np.round(rng.uniform(-3, 3, 1000)), rng.uniform(-1, 1, 1000)])
    X[:, 2] = X[:, 2].astype(np.float32)
    frame = spark.read.parquet(str(_parquet_files(tmp_path / "rows", X))).select("c", "a", "b")
    pieces = spark_parquet.parquet_pieces(frame)
    assert pieces is not None and len(pieces) == 8  # 500 rows a file in row groups of 150
    queries = [count_query(), _sum_all(3)]
    expected = MemoryRows(X[:, [2, 0, 1]], 3).sums(queries)
    direct = SparkRows(frame)
    answers = [direct.sums(queries)]
    assert direct._rereadable and not direct._rdd.is_cached  # the files are reread, not copied to a cache
    monkeypatch.setattr("privclust.queries.spark.parquet_pieces", lambda frame: None)
    through_jvm = SparkRows(frame)
    answers.append(through_jvm.sums(queries))
    assert not through_jvm._rereadable and through_jvm._rdd.is_cached
    for count, sums in answers:
        assert count[0, 0] == expected[0][0, 0] == 1000
        assert np.allclose(sums, expected[1], rtol=0, atol=1e-9)


def test_a_seeded_fit_of_parquet_files_read_by_the_workers_is_the_in_memory_fit(spark, tmp_path):
    rng = np.random.default_rng(5)
    truth = np.array([[-0.6, -0.6, 0.0], [0.6, 0.6, 0.0], [-0.6, 0.6, 0.0]])
    X = truth[rng.integers(0, 3, 3000)] + rng.normal(0, 0.05, (3000, 3))
    X[:, 1] = np.round(X[:, 1])  # bigint column b
    X[:, 2] = X[:, 2].astype(np.float32)
    frame = spark.read.parquet(str(_parquet_files(tmp_path / "rows", X, files=3, row_group=400)))
    assert parquet_read_by_workers(frame) is not None
    params = dict(epsilon=2.0, delta=1e-6, bounds=(-1, 1), algorithm="fastlloyd", random_state=7, public_n=3000)
    local, distributed = KMeans(3, **params).fit(X), KMeans(3, **params).fit(frame)
    order = lambda c: c[np.lexsort(c.T)]  # noqa: E731
    assert np.allclose(order(local.cluster_centers_), order(distributed.cluster_centers_), atol=1e-6)


def test_frames_that_are_more_than_their_files_are_read_through_the_jvm(spark, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from privclust.queries.spark_parquet import parquet_pieces

    X = np.random.default_rng(6).uniform(-1, 1, (300, 3))
    folder = str(_parquet_files(tmp_path / "rows", X))
    plain = spark.read.parquet(folder)
    assert parquet_pieces(plain) is not None and parquet_pieces(plain.select("b")) is not None
    for name, frame in {
        "filter": plain.filter("a > 0"),
        "limit": plain.limit(10),
        "sample": plain.sample(0.5, seed=1),
        "cast": plain.select(plain.a.cast("float")),
        "renamed": plain.toDF("x", "y", "z"),
        "union": plain.union(plain),
        "rows from Python": _frame(spark, X),
    }.items():
        assert parquet_pieces(frame) is None, name
    cached = spark.read.parquet(folder).cache()
    assert parquet_pieces(cached) is None and parquet_pieces(cached.select("a")) is None
    cached.unpersist()
    (tmp_path / "parts" / "g=1").mkdir(parents=True)
    pq.write_table(pa.table({"a": X[:, 0]}), tmp_path / "parts" / "g=1" / "f.parquet")
    partitioned = spark.read.parquet(str(tmp_path / "parts"))
    assert parquet_pieces(partitioned) is None and parquet_pieces(partitioned.select("a")) is None
    # A path given twice is read twice by Spark, and so by the workers: the same rows either way
    twice = spark.read.parquet(folder, folder)
    assert len(parquet_pieces(twice)) == 2 * len(parquet_pieces(plain))
    assert SparkRows(twice).count() == twice.count() == 600


def test_a_parquet_file_changed_during_a_fit_is_refused_before_its_rows_are_read(spark, tmp_path):
    """Rewritten (even to the same size, its modification time put back) or removed between two passes: the next
    pass stops with InputChangedError, a driver-side error that names no row."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from privclust.queries.histogram import HistogramQuery
    from privclust.queries.spark_parquet import InputChangedError

    X = np.random.default_rng(7).uniform(-1, 1, (300, 3))

    def rewrite_keeping_size_and_mtime(target):
        before = target.stat()
        table = pq.read_table(target)
        pq.write_table(table.set_column(0, "a", pa.array(-table.column("a").to_numpy())), target, row_group_size=150)
        assert target.stat().st_size == before.st_size
        os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))

    def truncate(target):
        with open(target, "r+b") as file:
            file.truncate(target.stat().st_size // 2)

    def unlink(target):
        target.unlink()

    # the files are planned and stamped once a fit: a later kind of pass (histograms after sums) reads them as
    # they were then, not as a new plan would find them
    histogram = HistogramQuery("h", 3, 4, lambda rows: np.clip((rows + 1) * 2, 0, 3).astype(np.int64))
    for change in (rewrite_keeping_size_and_mtime, truncate, unlink):
        folder = _parquet_files(tmp_path / f"rows-{change.__name__}", X)
        rows = SparkRows(spark.read.parquet(str(folder)))
        assert rows.count() == 300
        change(folder / "part-0.parquet")
        with pytest.raises(InputChangedError, match="changed or was removed while privclust was fitting"):
            rows.histograms([histogram])


def test_parquet_files_that_spark_would_read_otherwise_are_read_through_the_jvm(spark, tmp_path):
    """A file's stored type must be the one Spark reads unchanged, its column matched by exact name once, with no
    field ids: Spark wraps an int32 300 read as tinyint to 44, and pyarrow would not."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from privclust.queries.spark_parquet import parquet_pieces

    def folder(name, *tables):
        (tmp_path / name).mkdir()
        for i, table in enumerate(tables):
            pq.write_table(table, tmp_path / name / f"f{i}.parquet")
        return str(tmp_path / name)

    ints = folder("ints", pa.table({"x": pa.array([300, 1], pa.int32())}))
    assert parquet_pieces(spark.read.parquet(ints)) is not None
    narrowed = spark.read.schema("x tinyint").parquet(ints)
    assert parquet_pieces(narrowed) is None
    assert (
        SparkRows(narrowed).sums([count_query(), _sum_all(1)])[1][0, 0] == narrowed.groupBy().sum("x").first()[0] == 45
    )
    mixed = folder("mixed", pa.table({"x": pa.array([1], pa.int64())}), pa.table({"x": pa.array([0.5])}))
    assert parquet_pieces(spark.read.schema("x bigint").parquet(mixed)) is None
    cases = folder("cases", pa.table({"x": [1.0], "X": [2.0]}))
    assert parquet_pieces(spark.read.schema("x double").parquet(cases)) is None
    nested = folder("nested", pa.table({"s": pa.array([{"x": 1.0}])}))
    assert parquet_pieces(spark.read.schema("x double").parquet(nested)) is None
    spark.conf.set("spark.sql.parquet.fieldId.read.enabled", "true")
    try:
        assert parquet_pieces(spark.read.parquet(ints)) is None
    finally:
        spark.conf.unset("spark.sql.parquet.fieldId.read.enabled")


def test_missing_values_in_parquet_files_read_by_the_workers_are_refused_before_anything_is_spent(spark, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from privclust.queries.spark_parquet import parquet_pieces

    (tmp_path / "rows").mkdir()
    pq.write_table(
        pa.table({"a": [0.1, None, 0.3], "b": pa.array([1, 2, None], pa.int64())}), tmp_path / "rows" / "f.parquet"
    )
    frame = spark.read.parquet(str(tmp_path / "rows"))
    assert parquet_pieces(frame) is not None
    ledger = PrivacyAccountant(Budget(1.0, 1e-6))
    for columns, options in (
        (["a", "b"], {}),
        (["b"], {}),
        (["a", "b"], {"algorithm": "greedy", "public_n": 3}),
        (["a", "b"], {"bounds": None}),  # the private box's histograms: a nan has no bucket, and is kept from them
    ):
        with pytest.raises(ValueError, match="missing or non-finite"):
            KMeans(2, **{"bounds": (0, 3), **options}, accountant=ledger).fit(frame.select(*columns))
    assert ledger.spends == []
    # A reduced release is charged before its pass, so its rows are read and refused before the charge: here it
    # is the first pass over the rows
    from privclust.privacy.noise import SecureNoise
    from privclust.queries.central import CentralOracle
    from privclust.queries.plan import Part

    class KeepAll:
        def select(self, released, height, top):
            return released

    sparse = SumQuery("ids", 4, (Block("v", 1, 1.0),), lambda r: (np.zeros(len(r), np.int64), r[:, :1]), sparse=True)
    oracle = CentralOracle(SparkRows(frame), Budget(1.0, 1e-6), ledger, SecureNoise())
    with pytest.raises(ValueError, match="missing or non-finite"):
        oracle.plan([Part("p", share=1.0, delta=1e-7)]).release_reduced([(sparse, "p", 1.0, KeepAll())])
    assert ledger.spends == []

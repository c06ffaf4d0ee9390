"""The benchmark harness: data generators, summaries, reproducibility, peers. No benchmark numbers."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from privclust.bench import peers, synthetic
from privclust.bench.scaling import scaling_plan
from privclust.bench.utility import (
    UtilityJob,
    excess_ratios,
    plan_jobs,
    run_job,
    run_utility,
    split_datasets,
    summarise,
    write_utility_report,
)
from privclust.cli import app


def test_separated_clusters_follow_the_recipe():
    ds = synthetic.separated(k=4, d=3, seed=1)
    inliers = ds.labels >= 0
    sizes = np.bincount(ds.labels[inliers])
    np.testing.assert_allclose(sizes / sizes[0], [1, 2, 3, 4], rtol=0.01)
    assert inliers.sum() == 10_000 and 0 <= (~inliers).sum() <= 100
    assert ds.X.min() == pytest.approx(-1) and ds.X.max() == pytest.approx(1)
    assert ds.name == "synth:k=4,d=3,seed=1"
    np.testing.assert_array_equal(synthetic.from_spec(ds.name).X, ds.X)
    big = synthetic.separated(k=2, d=3, seed=1, n=20_000)
    assert big.name == "synth:k=2,d=3,seed=1,n=20000" and (big.labels >= 0).sum() == 20_000
    np.testing.assert_array_equal(synthetic.from_spec(big.name).X, big.X)


def test_separation_index_is_the_requested_one():
    ds = synthetic.separated(k=3, d=2, seed=0, n=60_000, separation=0.2)
    X, y = ds.X, ds.labels
    means = np.array([X[y == j].mean(0) for j in range(3)])
    gaps = np.linalg.norm(means[:, None] - means[None], axis=-1) + np.eye(3) * 9
    a, b = np.unravel_index(np.argmin(gaps), gaps.shape)
    axis = (means[b] - means[a]) / np.linalg.norm(means[b] - means[a])
    pa, pb = sorted([X[y == a] @ axis, X[y == b] @ axis], key=np.mean)
    L1, U1 = np.quantile(pa, [0.025, 0.975])
    L2, U2 = np.quantile(pb, [0.025, 0.975])
    assert (L2 - U1) / (U2 - L1) == pytest.approx(0.2, abs=0.02)


def test_g2_like_sets():
    ds = synthetic.g2(d=8)
    assert ds.X.shape == (2048, 8) and ds.k == 2 and np.bincount(ds.labels).tolist() == [1024, 1024]
    with pytest.raises(ValueError):
        synthetic.from_spec("blobs:k=2")


def test_skewed_mixtures_crowd_a_corner_and_scikit_learns_sets_load_scaled():
    base, skew = synthetic.separated(k=3, d=4, seed=2, n=500), synthetic.from_spec("skew:k=3,d=4,seed=2,n=500")
    assert skew.name == "skew:k=3,d=4,seed=2,n=500" and skew.X.shape == base.X.shape
    assert skew.X.min() == pytest.approx(-1) and skew.X.max() == pytest.approx(1)
    assert np.all(np.median(skew.X, axis=0) < np.median(base.X, axis=0))  # most rows pushed towards -1
    np.testing.assert_array_equal(skew.labels, base.labels)
    digits = synthetic.from_spec("sklearn:digits,k=10")
    assert digits.name == "sklearn:digits,k=10" and digits.X.shape == (1797, 64) and digits.k == 10
    assert digits.X.min() == pytest.approx(-1) and digits.X.max() <= 1.0
    with pytest.raises(ValueError, match="unknown scikit-learn data set"):
        synthetic.from_spec("sklearn:mnist,k=10")


def test_runs_are_reproducible_from_the_seed():
    job = UtilityJob("iris", "fastlloyd", 0.5, seed=3)
    a, b = run_job(job), run_job(job)
    for key in ("nicv", "silhouette", "davies_bouldin", "centroid_mse", "iterations", "privacy_spent"):
        assert a[key] == b[key]
    assert run_job(UtilityJob("iris", "fastlloyd", 0.5, seed=4))["nicv"] != a["nicv"]


def test_summary_by_hand():
    rows = [
        {"dataset": "x", "method": "m", "epsilon": e, "seed": s, "nicv": v}
        for s, vals in enumerate([[4.0, 2.0, 1.0], [2.0, 2.0, 3.0]])
        for e, v in zip([0.1, 0.5, 1.0], vals)
    ] + [{"dataset": "x", "method": "floor", "epsilon": None, "seed": s, "nicv": 1.0} for s in range(2)]
    out = summarise(rows, [0.1, 0.5, 1.0])
    mean, lo, hi = out["x"]["m"]["nicv"][0.1]
    assert mean == 3.0 and lo < 3.0 < hi
    # AUC per seed: seed 0: 0.4*3 + 0.5*1.5 = 1.95; seed 1: 0.4*2 + 0.5*2.5 = 2.05
    assert out["x"]["m"]["auc"][0] == pytest.approx(2.0)
    assert out["x"]["floor"]["auc"][0] == pytest.approx(0.9)  # non-private rows count at every epsilon


def test_dataset_lists_keep_the_commas_of_spec_strings():
    assert split_datasets("iris, synth:k=8,d=16,seed=7,g2:d=32,seed=7,s1") == [
        "iris",
        "synth:k=8,d=16,seed=7",
        "g2:d=32,seed=7",
        "s1",
    ]


def test_excess_ratio_by_hand(tmp_path):
    auc = {"kmeans++": 0.2, "auto": 0.3, "fastlloyd": 0.42, "diffprivlib": 0.5, "one-center": 1.0}
    rows = [
        {"dataset": "x", "method": m, "epsilon": None if m in ("kmeans++", "one-center") else e, "seed": 0, "nicv": v}
        for m, v in auc.items()
        for e in (0.5, 1.0)
    ]
    summary = summarise(rows, [0.5, 1.0])  # AUC over [0.5, 1] is half the constant NICV
    # floor 0.9 * 0.1 = 0.09; excess: auto 0.06, best peer (fastlloyd) 0.12
    r = excess_ratios(summary)["x"]
    assert r["best"] == "fastlloyd" and r["floor"] == pytest.approx(0.09)
    assert r["ratio"] == pytest.approx(0.5)
    report = write_utility_report(rows, [0.5, 1.0], tmp_path).read_text()
    assert "Ratio <= 0.5 on 1 of 1 sets" in report and "| 0.500 | yes |" in report
    assert json.loads((tmp_path / "excess_ratios.json").read_text())["x"]["best"] == "fastlloyd"
    assert excess_ratios(summarise([r for r in rows if r["method"] != "kmeans++"], [0.5, 1.0])) == {}


def test_a_peer_off_the_package_index_needs_a_local_source(tmp_path, monkeypatch):
    monkeypatch.setenv("PRIVCLUST_PEERS_DIR", str(tmp_path))
    with pytest.raises(ValueError, match="--source"):
        peers.install("google-lsh")
    with pytest.raises(ValueError, match="takes no --source"):
        peers.install("diffprivlib", source=tmp_path)
    assert not any(tmp_path.iterdir())  # refused before any environment was made


def test_missing_peer_is_reported_not_dropped(tmp_path, monkeypatch):
    monkeypatch.setenv("PRIVCLUST_PEERS_DIR", str(tmp_path / "none"))
    jobs = plan_jobs(["iris"], ["fastlloyd", "diffprivlib"], [1.0], range(2))
    result = run_utility(jobs, workers=1)
    assert "privclust bench peers install diffprivlib" in result.missing["diffprivlib"]
    assert {r["method"] for r in result.rows} == {"fastlloyd"}
    report = write_utility_report(result.rows, [1.0], tmp_path / "out", missing=result.missing).read_text()
    assert "Peer missing: diffprivlib" in report


def test_broken_peer_environment_is_reported(tmp_path, monkeypatch):
    import sys

    monkeypatch.setenv("PRIVCLUST_PEERS_DIR", str(tmp_path))
    (tmp_path / "diffprivlib" / "bin").mkdir(parents=True)
    # An interpreter without diffprivlib: the runner fails and the peer is reported as failing.
    (tmp_path / "diffprivlib" / "bin" / "python").symlink_to(sys.executable)
    with pytest.raises(peers.PeerMissing, match="failed"):
        peers.run_batch(
            "diffprivlib", np.zeros((10, 2)), [{"k": 2, "epsilon": 1.0, "seed": 0, "lower": -1, "upper": 1}]
        )


def test_scaling_plan_covers_the_seeds_grid():
    jobs, parts = scaling_plan(["fastlloyd"], [1.0], sets=3, runs=1)
    assert sorted(d for _, d in parts["dims"]) == [2**i for i in range(1, 11)]
    assert sorted(k for k, _ in parts["ks"]) == [2**i for i in range(1, 8)]
    assert len(parts["grid"]) == 45 and all(len(v) == 3 for v in parts["grid"].values())
    assert len(jobs) == len({n for p in parts.values() for v in p.values() for n in v})


def test_scaling_command_quick(tmp_path):
    out = CliRunner().invoke(
        app,
        [
            "bench",
            "scaling",
            "--quick",
            "--methods",
            "fastlloyd,sulloyd",
            "--epsilons",
            "0.5,1",
            "--workers",
            "1",
            "--out",
            str(tmp_path),
        ],
    )
    assert out.exit_code == 0, out.output
    report = (tmp_path / "scaling.md").read_text()
    assert "AUC vs d" in report and "AUC vs k" in report and "reduction over SuLloyd" in report
    for png in ("scaling_dims.png", "scaling_ks.png", "scaling_grid.png"):
        assert (tmp_path / png).exists()
    rows = [json.loads(line) for line in (tmp_path / "scaling.jsonl").read_text().splitlines()]
    assert {r["method"] for r in rows} == {"fastlloyd", "sulloyd"}


def test_subsample_bench_command(tmp_path):
    out = CliRunner().invoke(
        app, ["bench", "subsample", "--n", "20000", "--rate", "0.1", "--repeats", "1", "--out", str(tmp_path)]
    )
    assert out.exit_code == 0, out.output
    result = json.loads((tmp_path / "subsample.json").read_text())
    assert set(result["rows"]) == {"all rows", "Subsampled rate 0.1"}
    assert result["rows"]["Subsampled rate 0.1"]["epsilon"] < result["rows"]["all rows"]["epsilon"]


def test_maxcover_report_marks_the_ablation_and_lists_the_cover_thresholds(tmp_path):
    from privclust.bench.maxcover import write_report

    rows = [
        {"dataset": "mixture64", "method": m, "k": k, "seed": 0, "cost": c, "seconds": 1.0}
        for m, c in (("maxcover", 7.0), ("cover-exact", 0.5), ("cover-private", 5.0))
        for k in (16, 64)
    ]
    levels = [{"side": 0.5, "log_grid": 9.0, "points_needed": 1055.0, "eps_draw": 0.017}]
    report = write_report(rows, tmp_path, "test machine", {}, {"mixture64": levels}).read_text()
    assert "NOT private" in report and "| 0.5 | 9.0 | 1,055 |" in report
    saved = json.loads((tmp_path / "maxcover.json").read_text())
    assert len(saved["runs"]) == 6 and saved["thresholds"]["mixture64"][0]["points_needed"] == 1055.0


def test_local_bench_command_writes_its_records_report_and_plot(tmp_path):
    import math

    args = ["bench", "local", "--users", "1000,3000", "--runs", "1", "--local-epsilons", "2"]
    args += ["--protocol-users", "3000", "--workers", "1", "--out", str(tmp_path)]
    out = CliRunner().invoke(app, args)
    assert out.exit_code == 0, out.output
    saved = json.loads((tmp_path / "local.json").read_text())
    assert {r["method"] for r in saved["runs"]} == {
        "local",
        "shuffle",
        "central greedy",
        "central auto",
        "naive local",
        "kmeans++",
        "one-center",
    }
    assert {r["users"] for r in saved["runs"]} == {1000, 3000}
    for entry in saved["summary"]:
        for key in ("nicv", "vs_kmeans++", "vs_one_center"):
            assert all(math.isfinite(x) for x in entry[key]), (entry["label"], key)
    shuffle = [r for r in saved["runs"] if r["method"] == "shuffle"]
    assert all(r["local_epsilon"] > 1 and r["privacy_spent"]["delta"] == 1e-6 for r in shuffle)
    assert [p["model"] for p in saved["protocol"]] == ["local", "shuffle"]
    for p in saved["protocol"]:
        assert p["bytes_per_device"] == 40 and p["bytes_per_report_in_batch"] == 27  # report format 2 (a nonce)
        assert p["tally_seconds"] >= 0 and p["release_seconds"] > 0
    # The targets are stated, and left unmeasured when the run lacks their setting (2e5 users, 1e6 reports).
    assert len(saved["targets"]) == 5 and all(t["met"] is None for t in saved["targets"])
    report = (tmp_path / "local.md").read_text()
    assert "## blobs: NICV / one-center" in report and "Shuffle epsilon_0 used" in report
    assert (tmp_path / "local_nicv_blobs.png").exists()


def test_local_bench_ratios_and_targets_by_hand():
    from privclust.bench.local import summarise, targets

    def row(method, nicv, seed, epsilon=None, delta=None):
        return dict(dataset="blobs", users=200_000, seed=seed, method=method, epsilon=epsilon, delta=delta, nicv=nicv)

    rows = [row("kmeans++", 0.01, s) for s in range(3)] + [row("one-center", 0.5, s) for s in range(3)]
    rows += [row("local", v, s, 2.0) for s, v in enumerate([0.02, 0.04, 0.2])]
    rows += [row("shuffle", v, s, 1.0, 1e-6) for s, v in enumerate([0.03, 0.01, 0.05])]
    summary = {s["label"]: s for s in summarise(rows)}
    assert summary["local eps=2"]["vs_one_center"] == pytest.approx((0.08, 0.04, 0.4))
    assert summary["shuffle (1, 1e-06)"]["vs_kmeans++"] == pytest.approx((3.0, 1.0, 5.0))
    protocol = [{"model": "local", "users": 1_000_000, "aggregate_seconds": 3.0}]
    met = [t["met"] for t in targets(list(summary.values()), protocol)]
    assert met == [True, False, None, True]  # the naive baseline was not run


def test_the_one_center_baseline_is_the_cost_of_the_mean():
    from privclust import datasets, metrics
    from privclust.bench.utility import ONE_CENTER, UtilityJob, run_job

    X = datasets.load("iris").X
    record = run_job(UtilityJob("iris", ONE_CENTER, None, 0))
    assert record["nicv"] == pytest.approx(metrics.nicv(X, X.mean(axis=0, keepdims=True)))
    assert record["privacy_spent"] is None


def test_spark_bench_writes_parquet_in_chunks_and_measures_each_fit_in_its_own_process(tmp_path, monkeypatch):
    """The inputs are written chunk by chunk (the same rows whatever the chunk), and the in-memory engine's
    fit runs in a driver process of its own that reports its seconds and peak memory; the report and both
    plots are written."""
    import pyarrow.parquet as pq

    from privclust.bench import spark as bench

    monkeypatch.setattr(bench, "CHUNK_ROWS", 700)
    path = bench.write_blobs(tmp_path / "blobs.parquet", 2000, 3, 4)
    table = pq.read_table(path)
    assert table.num_rows == 2000 and table.column_names == ["x0", "x1", "x2"]
    assert not list(tmp_path.glob("*.partial"))
    X = np.column_stack([c.to_numpy() for c in table.columns])
    assert X.min() >= -1 and X.max() <= 1 and not np.array_equal(X[:700], X[700:1400])  # chunks differ
    rows = bench.run([2000], 3, 4, "fastlloyd", 1, "local[1]", tmp_path, engines=("memory",), noise="seeded")
    (row,) = rows
    assert row["rows"] == 2000 and row["engine"] == "memory" and row["seconds"] > 0
    assert row["driver_peak_mib"] >= row["python_peak_mib"] > 10 and row["jvm_peak_mib"] == 0
    report = bench.write_report(rows, tmp_path / "out", "test machine")
    assert "| 2,000 | memory |" in report.read_text()
    assert (tmp_path / "out" / "spark_seconds.png").exists() and (tmp_path / "out" / "spark_memory.png").exists()
    assert json.loads((tmp_path / "out" / "spark.json").read_text())[0]["rows"] == 2000


def test_spark_bench_refuses_bad_options_before_writing_anything(tmp_path):
    result = CliRunner().invoke(app, ["bench", "spark", "--engines", "gpu", "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "--engines" in result.output
    assert not (tmp_path / "o").exists()


def _source_tree(root, marker):
    (root / marker).parent.mkdir(parents=True, exist_ok=True)
    (root / marker).write_text("")
    return root


def test_pe_means_needs_both_of_its_sources_in_order(tmp_path, monkeypatch):
    monkeypatch.setenv("PRIVCLUST_PEERS_DIR", str(tmp_path / "peers"))
    checkout = _source_tree(tmp_path / "PE-means", "src/pe_means_main.py")
    learning = _source_tree(tmp_path / "learning", "clustering/clustering_params.py")
    with pytest.raises(ValueError, match="need 2, in that order"):
        peers.install("pe-means", source=[checkout])
    with pytest.raises(ValueError, match="is not a PE-means checkout"):
        peers.install("pe-means", source=[learning, checkout])  # swapped
    assert not (tmp_path / "peers").exists()  # refused before any environment was made


def test_a_bare_checkout_goes_on_the_peer_path_and_a_package_is_pip_installed(tmp_path, monkeypatch):
    import subprocess

    monkeypatch.setenv("PRIVCLUST_PEERS_DIR", str(tmp_path / "peers"))
    checkout = _source_tree(tmp_path / "PE-means", "src/pe_means_main.py")
    learning = _source_tree(tmp_path / "learning", "clustering/clustering_params.py")
    (learning / "setup.py").write_text("")
    site = tmp_path / "site"
    site.mkdir()
    calls = []

    def fake_run(cmd, **kwargs):  # no environment, no package index: record what install asks for
        calls.append([str(c) for c in cmd])
        return subprocess.CompletedProcess(cmd, 0, stdout=f"{site}\n", stderr="")

    monkeypatch.setattr(peers.subprocess, "run", fake_run)
    peers.install("pe-means", source=[checkout, learning])
    pip = next(c for c in calls if "pip" in c)
    assert str(learning.resolve()) in pip and str(checkout.resolve()) not in pip
    assert all(r in pip for r in peers.PEERS["pe-means"].requirements)
    (pth,) = site.glob("*.pth")
    assert pth.read_text().split() == [str(checkout.resolve())]


def test_runner_helpers_map_the_box_to_a_ball_and_pad_to_k():
    import importlib.util
    from pathlib import Path

    path = Path(peers.__file__).parent / "peer_runners" / "_batch.py"
    spec = importlib.util.spec_from_file_location("peer_batch", path)
    batch = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(batch)
    middle, radius = batch.ball_of_box({"lower": [0.0, -2.0], "upper": [2.0, 2.0]}, 2)
    np.testing.assert_allclose(middle, [1.0, 0.0])
    assert radius == pytest.approx(np.sqrt(1 + 4))
    centers, returned = batch.pad_to_k([[0.0, 1.0], [1.0, 1.0]], 4, middle)
    assert returned == 2
    np.testing.assert_allclose(centers, [[1, 1], [2, 1], [2, 1], [2, 1]])
    empty, none = batch.pad_to_k(np.zeros((0, 2)), 2, middle)
    assert none == 0 and np.allclose(empty, [middle, middle])


STUB_PE_MEANS = """
import json, os
import numpy as np

def pack_in_sphere(num_points, dims, container_radius, max_retries=100, seed=None):
    return {"seed": seed}  # the peer draws its start from np.random.RandomState(seed): None is OS entropy

def _record(entry, k, data, config, privacy):
    start = pack_in_sphere(num_points=k, dims=data.datapoints.shape[1], container_radius=data.radius)
    with open(os.environ["PE_STUB_LOG"], "a") as fh:
        fh.write(json.dumps({"entry": entry, "k": k, "radius": data.radius, "mean": data.datapoints.mean(0).tolist(),
                             "config": config, "epsilon": privacy.epsilon, "delta": privacy.delta,
                             "start_seed": start["seed"]}) + "\\n")
    print("noise the runner must keep off its stdout")
    return 0.0, np.zeros((k - 1, data.datapoints.shape[1])), None

def pe_means(k, data, config, privacy, visualize=True):
    return _record("pe_means", k, data, config, privacy)

def hdpe_means(k, data, config, privacy, visualize=True):
    return _record("hdpe_means", k, data, config, privacy)
"""

STUB_CLUSTERING = """
class Data:
    def __init__(self, datapoints, radius):
        self.datapoints, self.radius = datapoints, radius

class DifferentialPrivacyParam:
    def __init__(self, epsilon, delta):
        self.epsilon, self.delta = epsilon, delta
"""


@pytest.mark.parametrize("d, entry", [(3, "pe_means"), (40, "hdpe_means")])
def test_pe_means_runner_passes_the_job_privacy_and_domain(tmp_path, monkeypatch, d, entry):
    """The runner against stand-ins for the peer's modules (the peer itself is not needed): the job's
    epsilon and delta reach the peer unchanged, the data are centred on the box, and the answer is k centers
    shifted back, on a clean stdout."""
    import sys

    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "__init__.py").write_text("")
    (tmp_path / "src" / "helpers.py").write_text("PE_PARAMS = {'L': 20, 'num_gen': 10, 'var_scale': 0.01}\n")
    (tmp_path / "src" / "pe_means_main.py").write_text(STUB_PE_MEANS)
    (tmp_path / "clustering").mkdir()
    (tmp_path / "clustering" / "__init__.py").write_text("")
    (tmp_path / "clustering" / "clustering_params.py").write_text(STUB_CLUSTERING)
    monkeypatch.setenv("PRIVCLUST_PEERS_DIR", str(tmp_path / "peers"))
    (tmp_path / "peers" / "pe-means" / "bin").mkdir(parents=True)
    (tmp_path / "peers" / "pe-means" / "bin" / "python").symlink_to(sys.executable)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setenv("PE_STUB_LOG", str(tmp_path / "log.jsonl"))
    X = np.random.default_rng(0).uniform(2.0, 4.0, size=(500, d))
    job = {"k": 5, "epsilon": 0.5, "delta": 1e-5, "seed": 7, "lower": 2.0, "upper": 4.0}
    out, _, _ = peers.run_batch("pe-means", X, [job, {**job, "seed": 8}, job])
    seen, other, again = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    # the sphere-packing start is seeded from the job's seed (the peer would draw it from OS entropy)
    assert isinstance(seen["start_seed"], int) and seen["start_seed"] == again["start_seed"] != other["start_seed"]
    assert seen["start_seed"] != job["seed"]  # a stream apart from run_id's, which seeds numpy's global generator
    assert seen["entry"] == entry and seen["k"] == 5
    assert seen["epsilon"] == 0.5 and seen["delta"] == 1e-5
    assert seen["radius"] == pytest.approx(np.sqrt(d))  # half the diagonal of [2, 4]^d
    assert np.allclose(seen["mean"], X.mean(0) - 3.0)
    assert seen["config"]["run_id"] == 7 and seen["config"]["L"] == 20  # max(500 / 25, 4)
    assert seen["config"]["num_gen"] == int(4 * np.sqrt(d)) and seen["config"]["var_scale"] == 0.01
    assert out["returned"] == 4 and np.allclose(out["centers"], np.full((5, d), 3.0))
    assert peers.PEERS["pe-means"].takes_delta


def _said(result) -> str:
    """A CLI result's output as one line of words (the error panel wraps and frames its text)."""
    return " ".join(result.output.translate({ord(c): " " for c in "│╭╮╰╯─"}).split())


def test_peers_cli_lists_the_sources_and_takes_repeated_sources(tmp_path, monkeypatch):
    monkeypatch.setenv("PRIVCLUST_PEERS_DIR", str(tmp_path / "peers"))
    listed = CliRunner().invoke(app, ["bench", "peers", "list"])
    assert listed.exit_code == 0 and "--source 2: the learning/ folder" in _said(listed)
    checkout = _source_tree(tmp_path / "PE-means", "src/pe_means_main.py")
    one = CliRunner().invoke(app, ["bench", "peers", "install", "pe-means", "--source", str(checkout)])
    assert one.exit_code != 0 and "need 2" in _said(one)
    swapped = CliRunner().invoke(
        app, ["bench", "peers", "install", "pe-means", "--source", str(tmp_path), "--source", str(checkout)]
    )
    assert swapped.exit_code != 0 and "is not a PE-means checkout" in _said(swapped)
    assert not (tmp_path / "peers").exists()


def test_memory_bench_measures_each_command_in_its_own_process(tmp_path):
    out = CliRunner().invoke(
        app, ["bench", "memory", "--rows", "3000", "--dims", "3", "--users", "2000", "--out", str(tmp_path)]
    )
    assert out.exit_code == 0, out.output
    rows = json.loads((tmp_path / "memory.json").read_text())["rows"]
    assert [r["command"].split(",")[0] for r in rows] == [
        "interpreter with the imports",
        "fit",
        "local shuffle",
        "local aggregate",  # on the shuffler's output: what a shuffle protocol's server takes
    ]
    assert rows[1]["array_bytes"] == 3000 * 3 * 8 and rows[2]["input_bytes"] == 13 + 27 * 2000
    assert all(r["peak_rss"] >= r["peak_anon"] > 0 and r["above_base"] >= 0 for r in rows)
    assert "| local shuffle, 2,000 reports |" in (tmp_path / "memory.md").read_text()
    out = CliRunner().invoke(app, ["bench", "memory", "--source", str(tmp_path), "--out", str(tmp_path / "x")])
    assert out.exit_code == 2 and "not a privclust src folder" in out.output


def test_memory_bench_also_measures_a_user_level_fit(tmp_path):
    args = ["bench", "memory", "--rows", "3000", "--dims", "3", "--users", "0", "--user-level", "--out", str(tmp_path)]
    out = CliRunner().invoke(app, args)
    assert out.exit_code == 0, out.output
    rows = json.loads((tmp_path / "memory.json").read_text())["rows"]
    assert [r["command"].split(",")[0] for r in rows] == ["interpreter with the imports", "fit", "fit --user-column"]
    assert rows[2]["array_bytes"] == 3000 * 3 * 8 and rows[2]["input_bytes"] > rows[1]["input_bytes"]  # + the ids
    assert rows[2]["peak_rss"] >= rows[2]["peak_anon"] > 0


def test_memory_bench_interrupts_each_command_and_looks_for_leftovers(tmp_path):
    out = CliRunner().invoke(
        app, ["bench", "memory", "--rows", "0", "--users", "2000", "--interrupts", "1", "--out", str(tmp_path)]
    )
    assert out.exit_code == 0, out.output
    rows = json.loads((tmp_path / "memory.json").read_text())["rows"]
    assert [len(r["interrupts"]) for r in rows] == [0, 1, 1]
    for r in rows[1:]:
        (sent,) = r["interrupts"]
        assert 0 < sent["after"] < r["seconds"] and sent["left"] == []
        if sent["exit_code"] == 130:  # stopped in the command: it said so, and wrote nothing
            assert sent["message"].startswith("interrupted") and sent["said"] is not None and not sent["output"]
    assert "Ctrl-C (SIGINT)" in (tmp_path / "memory.md").read_text()

"""The command line, as a user types it."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from privclust.cli import app

runner = CliRunner()


def run(*args):
    return runner.invoke(app, list(args))


def test_help_lists_commands():
    out = run("--help")
    assert out.exit_code == 0
    for word in ("fit", "datasets", "bench"):
        assert word in out.output
    for sub in (("fit", "--help"), ("bench", "--help"), ("bench", "utility", "--help"), ("bench", "speed", "--help")):
        assert run(*sub).exit_code == 0


def test_fit_on_bundled_default_writes_centers_and_plot(tmp_path):
    centers, plot, labels = tmp_path / "c.csv", tmp_path / "p.png", tmp_path / "l.csv"
    out = run("fit", "--seed", "1", "-o", str(centers), "--plot", str(plot), "--labels", str(labels), "--steps")
    assert out.exit_code == 0, out.output
    assert "fastlloyd" in out.output and "epsilon spent" in out.output
    assert np.loadtxt(centers, delimiter=",", skiprows=1).shape == (15, 2)
    assert len(np.loadtxt(labels, skiprows=1)) == 5000
    assert plot.read_bytes()[:4] == b"\x89PNG"


def test_fit_json_reports_privacy(tmp_path):
    out = run("fit", "iris", "--json", "--seed", "0", "-e", "0.5", "-a", "glloyd", "-o", str(tmp_path / "c.csv"))
    assert out.exit_code == 0, out.output
    summary = json.loads(out.stdout)
    release = summary["release"]
    assert release["privacy_spent"]["epsilon"] == pytest.approx(0.5)
    assert release["k"] == 3 and release["algorithm"] == "glloyd"
    assert np.array(release["centers"]).shape == (3, 4)
    assert len(release["privacy_spent"]["steps"]) == 2 * release["iterations"] + 1
    # What was computed on the raw rows is kept apart and marked.
    assert set(summary["not_private"]) >= {"nicv", "data", "note"}
    assert "not differentially private" in summary["not_private"]["note"]


def test_fit_json_keeps_the_row_count_out_of_the_release(tmp_path):
    csv = tmp_path / "rows.csv"
    np.savetxt(csv, np.random.default_rng(1).uniform(0, 1, (1234, 2)), delimiter=",", header="a,b", comments="")
    out = run("fit", str(csv), "--k", "2", "--bounds", "0,1", "--json", "--seed", "0", "-o", str(tmp_path / "c.csv"))
    assert out.exit_code == 0, out.output
    summary = json.loads(out.stdout)
    assert "1234" not in json.dumps(summary["release"])
    assert "1234" in summary["not_private"]["data"]


def test_fit_with_data_bounds_reports_infinite_epsilon(tmp_path):
    out = run("fit", "iris", "--bounds", "data", "--json", "--seed", "0", "-o", str(tmp_path / "c.csv"))
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["release"]["privacy_spent"]["epsilon"] == "inf"


@pytest.mark.parametrize("suffix", [".csv", ".npy", ".parquet"])
def test_fit_reads_files_with_declared_bounds(tmp_path, suffix):
    X = np.random.default_rng(0).uniform(0, 10, (600, 3))
    path = tmp_path / f"data{suffix}"
    if suffix == ".csv":
        np.savetxt(path, X, delimiter=",", header="a,b,c", comments="")
    elif suffix == ".npy":
        np.save(path, X)
    else:
        import pandas as pd

        pd.DataFrame(X, columns=["a", "b", "c"]).to_parquet(path)
    out = run(
        "fit",
        str(path),
        "--k",
        "4",
        "--bounds",
        "0,10",
        "--seed",
        "0",
        "-o",
        str(tmp_path / "c.csv"),
        "--plot",
        str(tmp_path / "p.png"),
    )
    assert out.exit_code == 0, out.output
    centers = np.loadtxt(tmp_path / "c.csv", delimiter=",", skiprows=1)
    assert centers.shape == (4, 3) and np.all((centers >= 0) & (centers <= 10))


def test_headerless_csv(tmp_path):
    path = tmp_path / "raw.csv"
    np.savetxt(path, np.random.default_rng(0).uniform(-1, 1, (100, 2)), delimiter=",")
    out = run("fit", str(path), "--k", "2", "--radius", "1.5", "--seed", "0", "-o", str(tmp_path / "c.csv"))
    assert out.exit_code == 0, out.output


@pytest.mark.parametrize(
    "args,message",
    [
        (("fit", "missing.csv", "--k", "2", "--bounds", "0,1"), "no such file"),
        (("fit", "{csv}", "--k", "2"), "needs public bounds"),
        (("fit", "{csv}", "--bounds", "0,1"), "--k"),
        (("fit", "{csv}", "--k", "2", "--bounds", "zero,one"), "LOWER,UPPER"),
        (("fit", "{csv}", "--k", "2", "--bounds", "0,1", "--radius", "2"), "not both"),
        (("fit", "{csv}", "--k", "2", "--bounds", "0,1", "-e", "0"), "epsilon"),
        (("fit", "{csv}", "--k", "1000000000", "--bounds", "0,1"), "between 1 and 100000"),
        (("fit", "{bad}", "--k", "2", "--bounds", "0,1"), "non-numeric columns"),
        (("fit", "{nan}", "--k", "2", "--bounds", "0,1"), "NaN"),
        (("fit", "{csv}", "--k", "2", "--bounds", "0,1", "-a", "magic"), "unknown algorithm"),
    ],
)
def test_bad_input_exits_cleanly(tmp_path, args, message):
    csv = tmp_path / "ok.csv"
    np.savetxt(csv, np.random.default_rng(0).uniform(0, 1, (20, 2)), delimiter=",", header="a,b", comments="")
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,x\n2,y\n3,z\n")
    nan = tmp_path / "nan.csv"
    nan.write_text("a,b\n1,2\n3,\n4,5\n")
    args = [a.format(csv=csv, bad=bad, nan=nan) for a in args]
    out = run(*args, "-o", str(tmp_path / "c.csv"))
    assert out.exit_code == 2
    assert message in out.output
    assert "Traceback" not in out.output
    assert not (tmp_path / "c.csv").exists()  # nothing half-released


def test_datasets_command():
    out = run("datasets")
    assert out.exit_code == 0 and "birch2" in out.output


def test_bench_utility_small(tmp_path):
    out = run(
        "bench",
        "utility",
        "--datasets",
        "iris,lsun",
        "--methods",
        "fastlloyd,sulloyd,kmeans++",
        "--epsilons",
        "0.5,1.0",
        "--runs",
        "2",
        "--workers",
        "1",
        "--out",
        str(tmp_path),
    )
    assert out.exit_code == 0, out.output
    rows = [json.loads(line) for line in (tmp_path / "utility.jsonl").read_text().splitlines()]
    assert len(rows) == 2 * (2 * 2 + 2 * 2 + 2)
    assert {"nicv", "silhouette", "davies_bouldin", "centroid_mse", "seconds", "privacy_spent"} <= set(rows[0])
    report = (tmp_path / "utility.md").read_text()
    assert "## iris" in report and "AUC" in report
    assert (tmp_path / "nicv_iris.png").exists()


def test_bench_speed_small(tmp_path):
    out = run(
        "bench",
        "speed",
        "--n",
        "2000,4000",
        "--methods",
        "fastlloyd,sklearn-kmeans",
        "--repeats",
        "1",
        "--noise-draws",
        "2000",
        "--out",
        str(tmp_path),
    )
    assert out.exit_code == 0, out.output
    assert "| secure | gaussian | 2,000 |" in (tmp_path / "speed.md").read_text()
    rows = json.loads((tmp_path / "speed.json").read_text())
    assert len(rows) == 4 and all(r["seconds"] > 0 and r["peak_bytes"] > 0 for r in rows)
    assert "time / sklearn" in (tmp_path / "speed.md").read_text()
    assert (tmp_path / "speed_d10_k10.png").exists()


def test_bench_rejects_unknown_names(tmp_path):
    assert run("bench", "utility", "--datasets", "nope", "--out", str(tmp_path)).exit_code != 0
    assert run("bench", "speed", "--methods", "nope", "--out", str(tmp_path)).exit_code != 0


def test_elbow_command_prints_the_curve_and_saves_the_plot(tmp_path):
    out = run("elbow", "--k-max", "6", "--seed", "0", "--plot", str(tmp_path / "elbow.png"), "--json")
    assert out.exit_code == 0, out.output
    summary = json.loads(out.output.strip().splitlines()[-1])
    assert summary["ks"] == [1, 2, 3, 4, 5, 6] and len(summary["costs"]) == 6
    assert 1 <= summary["elbow"] <= 6 and summary["privacy_spent"]["epsilon"] <= 1.0 + 1e-9
    assert (tmp_path / "elbow.png").stat().st_size > 0


def test_elbow_command_refuses_files_without_bounds(tmp_path):
    path = tmp_path / "x.csv"
    path.write_text("a,b\n1,2\n3,4\n5,6\n")
    out = run("elbow", str(path), "--k-max", "2")
    assert out.exit_code == 2 and "bounds" in out.output


def test_bench_onecluster_small(tmp_path):
    out = run("bench", "onecluster", "--runs", "2", "--n", "4000", "--d", "3", "--t", "400", "--out", str(tmp_path))
    assert out.exit_code == 0, out.output
    report = json.loads((tmp_path / "onecluster.json").read_text())
    assert len(report["runs"]) == 2 and (tmp_path / "onecluster.md").exists() and (tmp_path / "onecluster.png").exists()


def test_fit_runs_every_registered_algorithm(tmp_path):
    for algorithm in ("maxcover", "onecluster", "greedy"):
        out = run("fit", "--algorithm", algorithm, "--seed", "0", "--output", str(tmp_path / f"{algorithm}.csv"))
        assert out.exit_code == 0, out.output
        assert (tmp_path / f"{algorithm}.csv").exists()


def test_bench_utility_at_a_single_epsilon_scores_by_nicv(tmp_path):
    out = run(
        "bench",
        "utility",
        "--datasets",
        "iris",
        "--methods",
        "fastlloyd,glloyd,kmeans++",
        "--epsilons",
        "1.0",
        "--runs",
        "2",
        "--workers",
        "1",
        "--out",
        str(tmp_path),
    )
    assert out.exit_code == 0, out.output
    report = (tmp_path / "utility.md").read_text()
    assert "| NICV | vs best other |" in report


def test_bench_elbow_small(tmp_path):
    out = run("bench", "elbow", "--runs", "2", "--k-max", "20", "--out", str(tmp_path))
    assert out.exit_code == 0, out.output
    rows = json.loads((tmp_path / "elbow.json").read_text())
    assert len(rows) == 2 and all(1 <= r["elbow"] <= 20 for r in rows)
    assert "reference k = 15" in (tmp_path / "elbow.md").read_text()


def test_bench_aggregate_small(tmp_path):
    out = run("bench", "aggregate", "--runs", "2", "--n", "20000", "--n-subsets", "2000", "--out", str(tmp_path))
    assert out.exit_code == 0, out.output
    report = json.loads((tmp_path / "aggregate.json").read_text())
    assert len(report["runs"]) == 2 and (tmp_path / "aggregate.md").exists()

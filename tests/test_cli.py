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
    assert "auto: greedy" in out.output and "epsilon spent" in out.output  # S1 at epsilon 1: the greedy
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
        (("fit", "{csv}", "--k", "2", "-a", "nonprivate-lloyd"), "needs public bounds"),  # private fits find a box
        (("fit", "{csv}", "--bounds", "0,1"), "--k"),
        (("fit", "{csv}", "--k", "2", "--bounds", "zero,one"), "LOWER,UPPER"),
        (("fit", "{csv}", "--k", "2", "--bounds", "0,1", "--radius", "2"), "not both"),
        (("fit", "{csv}", "--k", "2", "--bounds", "0,1", "-e", "0"), "epsilon"),
        (("fit", "{csv}", "--k", "1000000000", "--bounds", "0,1"), "between 1 and 100000"),
        (("fit", "{bad}", "--k", "2", "--bounds", "0,1"), "non-numeric columns"),
        (("fit", "{nan}", "--k", "2", "--bounds", "0,1"), "NaN"),
        (("fit", "{csv}", "--k", "2", "--bounds", "0,1", "-a", "magic"), "unknown algorithm"),
        # scikit-learn's name for its non-private Lloyd: refused, naming the private and the non-private choice
        (("fit", "{csv}", "--k", "2", "--bounds", "0,1", "-a", "lloyd"), "fastlloyd for private Lloyd, or nonprivate"),
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
    checks = json.loads((tmp_path / "accountant.json").read_text())
    assert [r["recorded"] for r in checks] == [20, 200, 2000] and all(r["microseconds"] > 0 for r in checks)
    assert "| 2,000 | 500 |" in (tmp_path / "speed.md").read_text()
    assert (tmp_path / "accountant_checks.png").exists()


def test_bench_speed_reports_issue_28s_rows_as_alternating_pairs_against_scikit_learn(tmp_path):
    args = ["bench", "speed", "--targets", "default,greedy,large-k", "--n", "3000", "--repeats", "2"]
    out = run(*args, "--large-k", "20,40", "--out", str(tmp_path))
    assert out.exit_code == 0, out.output
    rows = json.loads((tmp_path / "targets.json").read_text())
    assert [r["target"] for r in rows] == ["default", "greedy", "large-k", "large-k"]
    for r in rows[:2]:
        assert len(r["seconds"]) == len(r["sklearn_seconds"]) == 2
        assert r["ratios"] == [a / b for a, b in zip(r["seconds"], r["sklearn_seconds"])]
        assert len(r["cpu_ratios"]) == 2 and all(x > 0 for x in r["cpu_ratios"])
    assert [r["what"].rsplit("k = ", 1)[1] for r in rows[2:]] == ["20", "40"]
    report = (tmp_path / "speed.md").read_text()
    assert (
        "| median ratio | median CPU-time ratio |" in report
        and "3,000 x 10" in report
        and "<= 2x scikit-learn" in report
    )
    assert run("bench", "speed", "--targets", "nope", "--out", str(tmp_path)).exit_code != 0


def test_bench_rejects_unknown_names(tmp_path):
    assert run("bench", "utility", "--datasets", "nope", "--out", str(tmp_path)).exit_code != 0
    assert run("bench", "utility", "--datasets", "iris,synth:k=2,seed=1", "--out", str(tmp_path)).exit_code != 0
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


def test_elbow_reads_its_file_as_fit_does(tmp_path):
    path = tmp_path / "x.csv"
    path.write_text("a;b\n" + "".join(f"{i % 5};{(i * 7) % 5}\n" for i in range(60)) + "1;\n")
    common = ("elbow", str(path), "--k-max", "3", "--bounds", "0,5", "--sep", ";", "--seed", "0")
    out = run(*common, "--plot", str(tmp_path / "e.png"))
    assert out.exit_code == 2 and "column 'b'" in out.output and not (tmp_path / "e.png").exists()
    out = run(*common, "--dropna", "--plot", str(tmp_path / "e.png"), "--json")
    assert out.exit_code == 0, out.output
    assert json.loads(out.output.strip().splitlines()[-1])["columns"] == ["a", "b"]


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


def test_bench_utility_takes_synthetic_specs_in_the_data_set_list(tmp_path):
    out = run(
        "bench",
        "utility",
        "--datasets",
        "iris,g2:d=3,seed=1",
        "--methods",
        "fastlloyd,kmeans++",
        "--epsilons",
        "1.0",
        "--runs",
        "1",
        "--workers",
        "1",
        "--out",
        str(tmp_path),
    )
    assert out.exit_code == 0, out.output
    rows = [json.loads(line) for line in (tmp_path / "utility.jsonl").read_text().splitlines()]
    assert {r["dataset"] for r in rows} == {"iris", "g2:d=3,seed=1"}


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


# ------------------------------------------------------------------ a newcomer's session (#18, #19)


def flat(text):
    """``text`` with rich's table borders and line wrapping undone."""
    return " ".join(text.replace("│", " ").split())


def no_leftovers(folder):
    return [p.name for p in folder.iterdir() if p.name.startswith(".privclust-")] == []


@pytest.fixture
def people(tmp_path):
    """A CSV with a string id column and three numeric features of different ranges."""
    rng = np.random.default_rng(4)
    n = 400
    frame = {
        "id": [f"user{i}" for i in range(n)],
        "age": rng.integers(18, 90, n),
        "income": rng.uniform(0, 200_000, n).round(2),
        "score": rng.uniform(0, 1, n).round(4),
    }
    path = tmp_path / "people.csv"
    import pandas as pd

    pd.DataFrame(frame).to_csv(path, index=False)
    return path


def test_version():
    from privclust import __version__

    out = run("--version")
    assert out.exit_code == 0 and out.output.strip() == f"privclust {__version__}"


def test_help_shows_flags_as_flags_says_what_a_feature_is_and_cites_papers():
    for sub in (("fit",), ("elbow",), ("ledger", "init"), ("bench", "greedy"), ("bench", "maxcover")):
        text = run(*sub, "--help").output
        assert "<bool>" not in text and "seed 00" not in text, sub
    fit_help = flat(run("fit", "--help").output)
    assert "--json " in fit_help and "EVERY column is a feature" in fit_help
    assert "Diaa, Humphries & Kerschbaum" in fit_help and "Dupré la Tour" in " ".join(
        run("elbow", "--help").output.split()
    )
    assert "seed 00" not in run("bench", "--help").output


def test_columns_by_name_or_position_and_centers_keep_the_names(people, tmp_path):
    common = ["--k", "2", "--seed", "0", "--json"]
    by_name = run(
        "fit",
        str(people),
        "--columns",
        "income,age",
        "-b",
        "0,200000",
        "-b",
        "0,100",
        "-o",
        str(tmp_path / "c.csv"),
        *common,
    )
    assert by_name.exit_code == 0, by_name.output
    release = json.loads(by_name.stdout)["release"]
    assert release["columns"] == ["income", "age"] and np.array(release["centers"]).shape == (2, 2)
    assert (tmp_path / "c.csv").read_text().splitlines()[0] == "income,age"
    by_position = run(
        "fit", str(people), "--columns", "2,1", "-b", "0,200000", "-b", "0,100", "-o", str(tmp_path / "p.csv"), *common
    )
    assert by_position.exit_code == 0, by_position.output
    assert json.loads(by_position.stdout)["release"]["centers"] == release["centers"]  # same seed, same columns


def test_without_columns_a_string_id_is_named_and_columns_suggested(people, tmp_path):
    out = run("fit", str(people), "--k", "2", "--bounds", "0,1", "-o", str(tmp_path / "c.csv"))
    assert out.exit_code == 2 and "['id']" in out.output and "--columns" in out.output
    unknown = run("fit", str(people), "--columns", "age,salary", "--k", "2", "--bounds", "0,1")
    assert unknown.exit_code == 2 and "no column 'salary'" in unknown.output and "income" in unknown.output


def test_per_feature_bounds_repeated_or_from_a_file(people, tmp_path):
    cols = ["--columns", "age,income,score", "--k", "2", "--seed", "0", "--json", "-o", str(tmp_path / "c.csv")]
    repeated = run("fit", str(people), "-b", "0,100", "-b", "0,200000", "-b", "0,1", *cols)
    assert repeated.exit_code == 0, repeated.output
    centers = np.array(json.loads(repeated.stdout)["release"]["centers"])
    assert np.all(centers >= 0) and np.all(centers <= [100, 200_000, 1]) and centers[:, 1].max() > 100
    as_json = tmp_path / "bounds.json"
    as_json.write_text(json.dumps({"score": [0, 1], "income": [0, 200000], "age": [0, 100], "id": [0, 1]}))
    as_csv = tmp_path / "bounds.csv"
    as_csv.write_text("column,lower,upper\nage,0,100\nincome,0,200000\nscore,0,1\n")
    for bounds_file in (as_json, as_csv):
        out = run("fit", str(people), "--bounds-file", str(bounds_file), *cols)
        assert out.exit_code == 0, out.output
        assert json.loads(out.stdout)["release"]["centers"] == centers.tolist()  # same domain, same seed
    wrong_count = run("fit", str(people), "-b", "0,100", "-b", "0,1", *cols)
    assert wrong_count.exit_code == 2 and "given 2 times for 3 features" in wrong_count.output
    as_csv.write_text("age,0,100\nincome,0,200000\n")
    missing = run("fit", str(people), "--bounds-file", str(as_csv), *cols)
    assert missing.exit_code == 2 and "no bounds for the feature columns ['score']" in flat(missing.output)
    as_csv.write_text("age,0,100\nincome,5,5\nscore,0,1\n")
    empty = run("fit", str(people), "--bounds-file", str(as_csv), *cols)
    assert empty.exit_code == 2 and "'income'" in empty.output and "below the upper" in empty.output
    both = run("fit", str(people), "-b", "0,1", "--bounds-file", str(as_csv), *cols)
    assert both.exit_code == 2 and "not both" in both.output


def _spent(ledger):
    from privclust.privacy.ledger import LedgerAccountant

    return LedgerAccountant(ledger).guarantee()[0]


@pytest.mark.parametrize(
    "bad,message",
    [
        (("-o", "{tmp}/missing/c.csv"), "--output {tmp}/missing/c.csv: the folder {tmp}/missing does not exist"),
        (("--labels", "{tmp}/missing/l.csv"), "--labels"),
        (("--plot", "{tmp}/p.xyz"), "cannot write .xyz"),
        (("--plot", "{tmp}"), "is a folder"),
        (("--labels", "{tmp}/c.csv"), "already the name of another output"),
    ],
)
def test_bad_outputs_fail_before_anything_is_read_or_spent(tmp_path, bad, message):
    csv = tmp_path / "rows.csv"
    np.savetxt(csv, np.random.default_rng(0).uniform(0, 1, (50, 2)), delimiter=",", header="a,b", comments="")
    ledger = tmp_path / "ledger.json"
    assert run("ledger", "init", str(ledger), "-e", "1", "-d", "1e-6").exit_code == 0
    bad = [b.format(tmp=tmp_path) for b in bad]
    out = run(
        "fit",
        str(csv),
        "--k",
        "2",
        "--bounds",
        "0,1",
        "--ledger",
        str(ledger),
        *(["-o", str(tmp_path / "c.csv")] if "-o" not in bad else []),
        *bad,
    )
    assert out.exit_code == 2, out.output
    assert flat(message.format(tmp=tmp_path)) in flat(out.output)
    assert "Traceback" not in out.output
    assert not (tmp_path / "c.csv").exists() and _spent(ledger) == 0 and no_leftovers(tmp_path)


@pytest.mark.parametrize(
    "name,content,message",
    [
        ("cut.csv.gz", "truncated", "truncated or corrupt"),
        ("plain.csv.gz", b"a,b\n1,2\n", "not gzip-compressed"),
        ("ragged.csv", b"a,b\n1,2\n3,4,5\n", "not a well-formed table"),
    ],
)
def test_broken_input_is_a_clear_error_and_nothing_is_spent(tmp_path, name, content, message):
    import gzip

    if content == "truncated":
        packed = gzip.compress(("a,b\n" + "0.5,0.25\n" * 20000).encode())
        content = packed[: len(packed) // 2]
    (tmp_path / name).write_bytes(content)
    (tmp_path / "c.csv").write_text("the previous centers\n")
    ledger = tmp_path / "ledger.json"
    out = run(
        "fit",
        str(tmp_path / name),
        "--k",
        "2",
        "--bounds",
        "0,1",
        "-o",
        str(tmp_path / "c.csv"),
        "--ledger",
        str(ledger),
        "--ledger-budget",
        "1,1e-6",
    )
    assert out.exit_code == 2 and message in flat(out.output) and "Traceback" not in out.output
    assert "Aborted" not in out.output and (tmp_path / "c.csv").read_text() == "the previous centers\n"
    assert _spent(ledger) == 0 and no_leftovers(tmp_path)


def test_a_header_only_csv_is_fitted_like_any_data_set(tmp_path):
    # Refusing it would say "this data set is empty": n is private, and an empty data set is legal.
    (tmp_path / "h.csv").write_text("a,b\n")
    out = run("fit", str(tmp_path / "h.csv"), "--k", "2", "--bounds", "0,1", "--json", "-o", str(tmp_path / "c.csv"))
    assert out.exit_code == 0, out.output
    summary = json.loads(out.stdout)
    assert np.array(summary["release"]["centers"]).shape == (2, 2) and summary["release"]["columns"] == ["a", "b"]
    assert "(0 x 2)" in summary["not_private"]["data"]


def test_an_interrupt_while_writing_labels_leaves_the_old_files(tmp_path, monkeypatch):
    import privclust.io as io

    (tmp_path / "c.csv").write_text("old centers\n")
    (tmp_path / "l.csv").write_text("old labels\n")
    ledger = tmp_path / "ledger.json"

    def interrupted(values):
        raise KeyboardInterrupt

    monkeypatch.setattr(io, "_labels_text", interrupted)
    out = run(
        "fit",
        "--seed",
        "0",
        "-o",
        str(tmp_path / "c.csv"),
        "--labels",
        str(tmp_path / "l.csv"),
        "--plot",
        str(tmp_path / "p.png"),
        "--ledger",
        str(ledger),
        "--ledger-budget",
        "2,1e-5",
    )
    assert out.exit_code == 130 and "interrupted: no output file was written or changed" in flat(out.output)
    assert (tmp_path / "c.csv").read_text() == "old centers\n" and (tmp_path / "l.csv").read_text() == "old labels\n"
    assert not (tmp_path / "p.png").exists() and no_leftovers(tmp_path)
    assert _spent(ledger) > 0  # the fit ran: its spends are recorded though its outputs were abandoned


def test_the_ledger_records_runs_and_refuses_one_over_budget_before_reading(tmp_path):
    ledger = tmp_path / "ledger.json"
    init = run("ledger", "init", str(ledger), "--epsilon", "1.5", "--delta", "1e-5")
    assert init.exit_code == 0, init.output
    first = run(
        "fit", "iris", "-e", "1", "--seed", "0", "--ledger", str(ledger), "--json", "-o", str(tmp_path / "c.csv")
    )
    assert first.exit_code == 0, first.output
    recorded = json.loads(first.stdout)["release"]["ledger"]
    assert 0 < recorded["spent"]["epsilon"] <= 1 and recorded["budget"] == {"epsilon": 1.5, "delta": 1e-5}
    (tmp_path / "unreadable.csv.gz").write_bytes(b"not gzip at all")
    # Over budget: refused for that reason, before the (unreadable) file is opened.
    second = run(
        "fit",
        str(tmp_path / "unreadable.csv.gz"),
        "-k",
        "2",
        "-b",
        "0,1",
        "-e",
        "1.5",
        "--ledger",
        str(ledger),
        "-o",
        str(tmp_path / "d.csv"),
    )
    assert second.exit_code == 2 and "budget" in second.output and "gzip" not in second.output
    assert not (tmp_path / "d.csv").exists() and no_leftovers(tmp_path)
    elbow = run(
        "elbow",
        "--k-max",
        "4",
        "-e",
        "0.3",
        "--seed",
        "0",
        "--ledger",
        str(ledger),
        "--json",
        "--plot",
        str(tmp_path / "e.png"),
    )
    assert elbow.exit_code == 0, elbow.output
    non_private = run("fit", "iris", "-a", "nonprivate-lloyd", "--ledger", str(ledger), "-o", str(tmp_path / "d.csv"))
    assert non_private.exit_code == 2 and "non-private" in non_private.output
    shown = run("ledger", "show", str(ledger), "--json")
    assert shown.exit_code == 0, shown.output
    entries = json.loads(shown.stdout)["entries"]
    assert [e["about"]["command"] for e in entries] == ["fit", "elbow"]
    assert "iris" in run("ledger", "show", str(ledger)).output
    changed = run("fit", "iris", "--ledger", str(ledger), "--ledger-budget", "5,1e-5", "-o", str(tmp_path / "d.csv"))
    assert changed.exit_code == 2 and "fixed when it is created" in changed.output
    missing = run("fit", "iris", "--ledger", str(tmp_path / "none.json"), "-o", str(tmp_path / "d.csv"))
    assert missing.exit_code == 2 and "ledger init" in missing.output


def test_the_progress_bar_says_planning_until_it_knows_the_total():
    from rich.progress import Progress

    from privclust.cli import IterationsColumn

    progress = Progress()
    task_id = progress.add_task("fit", total=None)
    assert IterationsColumn().render(progress.tasks[task_id]).plain == "planning"
    progress.update(task_id, completed=0.35, total=1.0, stage="placing the starting centers")
    assert IterationsColumn().render(progress.tasks[task_id]).plain == "placing the starting centers 35%"
    progress.update(task_id, completed=2, total=7, stage=None)
    assert IterationsColumn().render(progress.tasks[task_id]).plain == "2/7 iterations"


def test_the_fit_command_reports_the_starting_centers_as_they_are_placed(tmp_path, monkeypatch):
    from privclust.estimator import KMeans

    seen = []
    real_fit = KMeans.fit

    def spy(self, X, y=None, *, callback=None, progress=None):
        def listen(what, fraction):
            seen.append((what, fraction))
            progress(what, fraction)

        return real_fit(self, X, callback=callback, progress=listen)

    monkeypatch.setattr(KMeans, "fit", spy)
    args = ["fit", "iris", "--k", "300", "--algorithm", "fastlloyd", "--seed", "0", "-o", str(tmp_path / "c.csv")]
    out = run(*args)
    assert out.exit_code == 0, out.output
    fractions = [f for what, f in seen if what == "placing the starting centers"]
    assert len(fractions) > 10 and fractions == sorted(fractions) and fractions[-1] == 1.0


def test_the_plot_is_captioned_as_raw_data(tmp_path, monkeypatch):
    import privclust.plotting as plotting

    seen = {}
    real_save = plotting._save

    def spy(fig, path):
        seen["title"] = fig.axes[0].get_title()
        seen["caption"] = [t.get_text() for t in fig.texts]
        real_save(fig, path)

    monkeypatch.setattr(plotting, "_save", spy)
    out = run("fit", "iris", "--seed", "0", "-o", str(tmp_path / "c.csv"), "--plot", str(tmp_path / "p.pdf"))
    assert out.exit_code == 0, out.output
    assert seen["caption"] == ["points: your raw data, not private; crosses: the private centers"]
    assert seen["title"].startswith("private centers") and (tmp_path / "p.pdf").read_bytes()[:4] == b"%PDF"


def test_a_memory_mapped_integer_npy_through_the_cli(tmp_path):
    X = np.random.default_rng(1).integers(0, 256, (3000, 3)).astype(np.uint8)
    np.save(tmp_path / "pixels.npy", X)
    out = run(
        "fit",
        str(tmp_path / "pixels.npy"),
        "--columns",
        "0,2",
        "-k",
        "3",
        "-b",
        "0,255",
        "--seed",
        "0",
        "--json",
        "-o",
        str(tmp_path / "c.csv"),
        "--labels",
        str(tmp_path / "l.csv"),
        "--plot",
        str(tmp_path / "p.png"),
    )
    assert out.exit_code == 0, out.output
    summary = json.loads(out.stdout)
    assert summary["release"]["columns"] == ["x0", "x2"] and 0 < summary["not_private"]["nicv"] < 8
    assert len((tmp_path / "l.csv").read_text().splitlines()) == 3001

"""The privacy report as the command line prints it: one set of figures, nothing non-private called private."""

import io
import json
import os
import subprocess
import sys
from pathlib import Path

from rich.console import Console
from typer.testing import CliRunner

import privclust.cli as cli
from privclust.cli import app

runner = CliRunner()
SRC = str(Path(cli.__file__).resolve().parents[2])


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_fit_json_and_ledger_show_report_the_same_figures_and_say_why_the_total_differs(tmp_path):
    ledger = tmp_path / "runs.ledger"
    out = run(
        "fit", "s1", "--seed", "1", "--json", "-o", tmp_path / "c.csv", "--ledger", ledger, "--ledger-budget", "3,1e-5"
    )
    assert out.exit_code == 0, out.output
    fit = json.loads(out.stdout)["release"]
    shown = run("ledger", "show", ledger, "--json")
    assert shown.exit_code == 0, shown.output
    entries = json.loads(shown.stdout)["entries"]
    assert len(entries) == 1
    assert entries[0]["spent"] == {k: fit["privacy_spent"][k] for k in ("epsilon", "delta")}
    # the totals are composed at the ledger's delta, so differ: each place that shows one says why
    assert fit["ledger"]["spent"]["epsilon"] != fit["privacy_spent"]["epsilon"]
    assert "composes" in fit["ledger"]["note"] and "composes" in json.loads(shown.stdout)["ledger"]["note"]
    text = run("ledger", "show", ledger)
    assert f"{fit['privacy_spent']['epsilon']:.4g}" in text.output and "composes" in text.output


def test_fit_text_with_a_ledger_explains_its_total(tmp_path):
    ledger = tmp_path / "runs.ledger"
    out = run("fit", "s1", "--seed", "1", "-o", tmp_path / "c.csv", "--ledger", ledger, "--ledger-budget", "3,1e-5")
    assert out.exit_code == 0, out.output
    assert "composes every run's releases" in out.output


def test_steps_print_a_delta_only_release_as_such(tmp_path):
    out = run("fit", "s1", "-a", "maxcover", "--seed", "1", "--steps", "-o", tmp_path / "c.csv")
    assert out.exit_code == 0, out.output
    threshold_rows = [line for line in out.output.splitlines() if "/threshold" in line]
    assert threshold_rows  # maxcover's histograms spend delta alone on their thresholds
    for line in threshold_rows:
        assert "epsilon=0" not in line and "delta only" in line


def test_bounds_data_run_labels_nothing_private(tmp_path):
    out = run("fit", "s1", "--bounds", "data", "--seed", "1", "-o", tmp_path / "c.csv")
    assert out.exit_code == 0, out.output
    assert "(private)" not in out.output
    assert "NOT private" in out.output
    summary = json.loads(run("fit", "s1", "--bounds", "data", "--seed", "1", "--json", "-o", tmp_path / "c.csv").stdout)
    assert summary["release"]["private"] is False


def test_private_run_says_so_in_json(tmp_path):
    summary = json.loads(run("fit", "iris", "--seed", "1", "--json", "-o", tmp_path / "c.csv").stdout)
    assert summary["release"]["private"] is True


def test_progress_line_labels_the_exact_row_count(tmp_path, monkeypatch):
    shown = io.StringIO()
    monkeypatch.setattr(cli, "err_console", Console(file=shown, force_terminal=True, width=400))
    out = run("fit", "s1", "--seed", "1", "-o", tmp_path / "c.csv")
    assert out.exit_code == 0, out.output
    out = run("elbow", "s1", "--k-max", "5", "--seed", "1", "--plot", tmp_path / "e.png")
    assert out.exit_code == 0, out.output
    text = shown.getvalue()
    assert text.count("5,000 rows") >= 2  # the fit's progress bar and the elbow's spinner
    assert text.count("5,000 rows") == text.count("5,000 rows (exact, for you only: not private)")


def test_cli_warnings_name_the_command_not_typer(tmp_path):
    env = {**os.environ, "PYTHONPATH": SRC, "PYTHONWARNINGS": "default"}
    done = subprocess.run(
        [sys.executable, "-m", "privclust", "fit", "iris", "--seed", "1", "--json", "-o", str(tmp_path / "c.csv")],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "privclust: warning: a seeded random_state" in done.stderr
    assert "typer" not in done.stderr and ".py:" not in done.stderr


def test_elbow_with_bounds_from_the_data_labels_nothing_private(tmp_path, monkeypatch):
    import privclust.plotting

    titles = []
    monkeypatch.setattr(privclust.plotting, "plot_cost_curves", lambda *args: titles.append(args[-1]))
    out = run("elbow", "s1", "--k-max", "4", "--bounds", "data", "--seed", "1", "--plot", tmp_path / "e.png")
    assert out.exit_code == 0, out.output
    assert "private elbow" not in out.output and "NOT private" in out.output
    assert titles and all("NOT private" in t and "private elbow" not in t for t in titles)
    summary = json.loads(
        run(
            "elbow", "s1", "--k-max", "4", "--bounds", "data", "--seed", "1", "--json", "--plot", tmp_path / "e.png"
        ).stdout
    )
    assert summary["private"] is False

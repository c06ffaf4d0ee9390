"""``privclust bench audit``: its report, its JSON, and an exit status that can fail."""

import json

import numpy as np
from typer.testing import CliRunner

from privclust.cli import app
from privclust.privacy.noise import SecureNoise

runner = CliRunner()
LAPLACE = "Laplace mechanism"
LAPLACE_HALVED = "Laplace mechanism: noise / 2 (broken on purpose)"


def bench_audit(tmp_path, *args):
    return runner.invoke(app, ["bench", "audit", "--out", str(tmp_path), *args])


def test_a_passing_run_writes_json_and_markdown(tmp_path):
    # At 0.99999 the real mechanism is flagged by chance with probability 1e-5; the control is still caught.
    result = bench_audit(
        tmp_path, "--only", f"{LAPLACE},{LAPLACE_HALVED}", "--draws", "4000", "--confidence", "0.99999"
    )
    assert result.exit_code == 0, result.output
    entries = json.loads((tmp_path / "audit.json").read_text())
    assert [e["name"] for e in entries] == [LAPLACE, LAPLACE_HALVED]
    for e in entries:
        assert {"name", "claimed_epsilon", "empirical_epsilon", "violated", "broken_on_purpose", "caught"} <= set(e)
        assert e["claimed_epsilon"] == 1.0 and e["draws"] == 4000 and e["confidence"] == 0.99999
    real, control = entries
    assert not real["violated"] and real["caught"] is None and not real["broken_on_purpose"]
    assert control["broken_on_purpose"] and control["violated"] and control["caught"]
    assert control["empirical_epsilon"] > 1.0 >= real["empirical_epsilon"]
    report = (tmp_path / "audit.md").read_text()
    assert "broken on purpose" in report and "| caught |" in report and "| ok |" in report


def test_an_uncaught_control_fails_the_run(tmp_path):
    # 20 held-out draws per side cannot show an epsilon above ln(0.684 / 0.316) = 0.77 (all hits on one
    # side, none on the other, at 99.9%): the control goes uncaught.
    result = bench_audit(tmp_path, "--only", LAPLACE_HALVED, "--draws", "40")
    assert result.exit_code == 1
    assert "not caught" in result.output
    assert json.loads((tmp_path / "audit.json").read_text())[0]["caught"] is False


def test_a_mechanism_above_its_claim_fails_the_run(tmp_path, monkeypatch):
    monkeypatch.setattr(SecureNoise, "add_laplace", lambda self, values, scale: np.asarray(values, dtype=float))
    result = bench_audit(tmp_path, "--only", LAPLACE, "--draws", "2000")
    assert result.exit_code == 1
    assert "above its claim" in result.output
    assert json.loads((tmp_path / "audit.json").read_text())[0]["violated"] is True


def test_unknown_audits_are_refused(tmp_path):
    result = bench_audit(tmp_path, "--only", "no such mechanism")
    assert result.exit_code != 0 and "unknown audits" in result.output

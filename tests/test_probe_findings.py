"""Findings of a privacy review of the recent code: each is a neighbouring-data or half-release probe."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from privclust import KMeans
from privclust.cli import app
from privclust.privacy.budget import Budget, PrivacyAccountant

runner = CliRunner()


@pytest.mark.parametrize("alpha", [-1.0, 0.0, float("nan"), float("inf"), "x"])
def test_auto_refuses_a_bad_alpha_before_spending_the_noisy_count(alpha):
    # auto bought its noisy row count, then FastLloyd refused alpha: a refused fit had spent budget.
    accountant = PrivacyAccountant(Budget(5.0, 1e-5))
    X = np.random.default_rng(0).random((200, 3))
    with pytest.raises(ValueError, match="alpha"):
        KMeans(3, bounds=(0, 1), alpha=alpha, accountant=accountant).fit(X)
    assert accountant.spends == []


def test_fit_json_keeps_the_baselines_exact_cluster_sizes_out_of_the_release(tmp_path):
    # algorithm=lloyd: its cell sizes are exact counts (they sum to n) and were printed under "release"
    # and as "noisy cluster sizes (private)".
    csv = tmp_path / "rows.csv"
    np.savetxt(csv, np.random.default_rng(1).uniform(0, 1, (1234, 2)), delimiter=",", header="a,b", comments="")
    args = ["fit", str(csv), "--k", "2", "--bounds", "0,1", "-a", "nonprivate-lloyd", "-o", str(tmp_path / "c.csv")]
    out = runner.invoke(app, [*args, "--json"])
    assert out.exit_code == 0, out.output
    summary = json.loads(out.stdout)
    assert "cluster_sizes" not in summary["release"]
    assert sum(summary["not_private"]["cluster_sizes"]) == 1234
    text = runner.invoke(app, args)
    assert text.exit_code == 0, text.output
    assert "noisy cluster sizes (private)" not in text.output

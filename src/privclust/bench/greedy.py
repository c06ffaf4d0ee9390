"""``privclust bench greedy``: the greedy's constants, one at a time, against k-means++ (Dupré la Tour, Henzinger & Saulpic 2024).

The seed fixes its constants "for convenience"; ours are parameters, and this
sweep is how their defaults were chosen.  Each setting changes one parameter
from the defaults; a point is the mean over seeds of the greedy's k-means cost
divided by scikit-learn k-means++'s (mean of the same seeds), at epsilon = 1,
delta = 1/(n ln n), on the bundled data sets.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from .. import datasets, metrics
from ..estimator import KMeans

__all__ = ["SWEEP", "run", "write_report"]

SWEEP = {
    "forbid": [2.0, 3.0, 4.0, 6.0, 8.0],
    "levels": [6, 7, 8, 9, 10],
    "boost": [1, 2, 3, 4],
    "selection_share": [0.4, 0.5, 0.6, 0.7, 0.8],
}


def _floor(name: str, runs: int) -> float:
    from sklearn.cluster import KMeans as SkKMeans

    ds = datasets.load(name)
    costs = [
        metrics.assign(ds.X, SkKMeans(ds.k, n_init=1, random_state=s).fit(ds.X).cluster_centers_)[1].sum()
        for s in range(runs)
    ]
    return float(np.mean(costs))


def run(names, runs: int, on_done=None) -> list[dict]:
    rows = []
    for name in names:
        ds = datasets.load(name)
        n = len(ds.X)
        floor = _floor(name, runs)
        for parameter, values in SWEEP.items():
            for value in values:
                ratios = []
                for seed in range(runs):
                    model = KMeans(
                        ds.k,
                        epsilon=1.0,
                        delta=1.0 / (n * math.log(n)),
                        bounds=ds.bounds,
                        algorithm="greedy",
                        random_state=seed,
                        public_n=n,
                        algorithm_params={parameter: value},
                    ).fit(ds.X)
                    ratios.append(metrics.assign(ds.X, model.cluster_centers_)[1].sum() / floor)
                rows.append(
                    {
                        "dataset": name,
                        "parameter": parameter,
                        "value": value,
                        "ratio": float(np.mean(ratios)),
                        "ratios": [float(r) for r in ratios],
                    }
                )
                if on_done:
                    on_done(rows[-1])
    return rows


def write_report(rows: list[dict], out_dir: Path, machine: str) -> Path:
    from ..plotting import plot_panels

    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "greedy.json").write_text(json.dumps(rows, indent=1))
    lines = [
        f"# The greedy's constants ({machine})",
        "",
        "Cost / k-means++ cost at epsilon = 1 (mean over seeds); one parameter changed at a time.",
        "",
    ]
    panels = {}
    for parameter in SWEEP:
        sub = [r for r in rows if r["parameter"] == parameter]
        values = list(dict.fromkeys(r["value"] for r in sub))
        names = list(dict.fromkeys(r["dataset"] for r in sub))
        lines += [
            f"## {parameter}",
            "",
            "| data set | " + " | ".join(str(v) for v in values) + " |",
            "|---|" + "---|" * len(values),
        ]
        curves = {}
        for name in names:
            ratios = [next(r["ratio"] for r in sub if r["dataset"] == name and r["value"] == v) for v in values]
            lines.append(f"| {name} | " + " | ".join(f"{x:.2f}" for x in ratios) + " |")
            curves[name] = ([float(v) for v in values], ratios, ratios, ratios)
        lines.append("")
        panels[parameter] = curves
    png = out_dir / "greedy_constants.png"
    plot_panels(png, panels, "value", "cost / k-means++", columns=len(panels))
    lines += [f"![constants]({png.name})"]
    report = out_dir / "greedy.md"
    report.write_text("\n".join(lines) + "\n")
    return report

"""``privclust bench scaling``: how utility scales with d and k (Diaa, Humphries & Kerschbaum 2024, Figures 3 and 4).

Three parts, each on synthetic data generated in-project (``bench.synthetic``):

* ``dims``: G2-like sets, k = 2, d = 2 ... 1024 (Figure 3a);
* ``ks``: Synth sets at d = 2, k = 2 ... 128 (Figure 3b);
* ``grid``: Synth sets over k in {2 ... 32} x d in {2 ... 512} (Figure 4): AUC heat
  maps per method and FastLloyd's AUC reduction over SuLloyd in percent.

Each (k, d) point uses ``--sets`` independently generated data sets and
``--runs`` seeds per set; the AUC of a point is the mean over sets of the mean
over seeds.  The same run machinery as ``bench utility`` is used, so rows have
the same fields.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .synthetic import spec
from .utility import DEFAULT_EPSILONS, plan_jobs, summarise

__all__ = ["scaling_plan", "write_scaling_report", "POWERS"]

POWERS = {
    "dims": [2**i for i in range(1, 11)],
    "ks": [2**i for i in range(1, 8)],
    "grid_k": [2**i for i in range(1, 6)],
    "grid_d": [2**i for i in range(1, 10)],
}
QUICK = {"dims": [2, 16, 128, 1024], "ks": [2, 8, 32, 128], "grid_k": [2, 8, 32], "grid_d": [2, 16, 128]}


def scaling_plan(methods, epsilons=DEFAULT_EPSILONS, sets: int = 3, runs: int = 3, quick: bool = False):
    """(jobs, {part: {(k, d): [data set specs]}})."""
    grid = QUICK if quick else POWERS
    parts: dict[str, dict[tuple[int, int], list[str]]] = {"dims": {}, "ks": {}, "grid": {}}
    for d in grid["dims"]:
        parts["dims"][(2, d)] = [spec("g2", d=d, seed=s) for s in range(sets)]
    for k in grid["ks"]:
        parts["ks"][(k, 2)] = [spec("synth", k=k, d=2, seed=s) for s in range(sets)]
    for k in grid["grid_k"]:
        for d in grid["grid_d"]:
            parts["grid"][(k, d)] = [spec("synth", k=k, d=d, seed=s) for s in range(sets)]
    names = sorted({name for part in parts.values() for names in part.values() for name in names})
    return plan_jobs(names, methods, epsilons, range(runs)), parts


def _point_auc(summary: dict, names: list[str], method: str) -> float:
    values = [summary[n][method]["auc"][0] for n in names if n in summary and method in summary[n]]
    return float(np.mean(values)) if values else float("nan")


def write_scaling_report(rows: list[dict], parts: dict, epsilons, out_dir: Path, machine: str) -> Path:
    from ..plotting import plot_curves, plot_heatmaps

    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / "scaling.jsonl", "w") as fh:
        for r in rows:
            fh.write(json.dumps(r, default=float) + "\n")
    summary = summarise(rows, epsilons)
    methods = list(dict.fromkeys(r["method"] for r in rows))
    lines = ["# Scaling benchmark", "", f"Machine: {machine}", "", "AUC of NICV over epsilon (lower is better).", ""]

    for part, axis, label in (("dims", 1, "d (G2, k = 2)"), ("ks", 0, "k (Synth, d = 2)")):
        points = sorted(parts[part])
        xs = [p[axis] for p in points]
        table = {m: [_point_auc(summary, parts[part][p], m) for p in points] for m in methods}
        lines += [f"## AUC vs {label}", "", "| method | " + " | ".join(map(str, xs)) + " |", "|---|" + "---|" * len(xs)]
        lines += [f"| {m} | " + " | ".join(f"{v:.4g}" for v in vals) + " |" for m, vals in table.items()]
        png = out_dir / f"scaling_{part}.png"
        plot_curves(
            png,
            {m: (xs, v, v, v) for m, v in table.items()},
            f"AUC vs {label}",
            label.split()[0],
            "AUC",
            logx=True,
            logy=True,
        )
        lines += ["", f"![AUC vs {label}]({png.name})", ""]

    ks = sorted({k for k, _ in parts["grid"]})
    ds = sorted({d for _, d in parts["grid"]})
    grids = {m: np.array([[_point_auc(summary, parts["grid"][(k, d)], m) for d in ds] for k in ks]) for m in methods}
    panels = dict(grids)
    if "fastlloyd" in grids and "sulloyd" in grids:
        panels["FastLloyd AUC reduction over SuLloyd (%)"] = 100.0 * (1.0 - grids["fastlloyd"] / grids["sulloyd"])
    lines += ["## AUC over (k, d)", ""]
    for name, grid in panels.items():
        lines += [f"### {name}", "", "| k \\ d | " + " | ".join(map(str, ds)) + " |", "|---|" + "---|" * len(ds)]
        lines += [f"| {k} | " + " | ".join(f"{v:.4g}" for v in row) + " |" for k, row in zip(ks, grid)]
        lines.append("")
    plot_heatmaps(out_dir / "scaling_grid.png", panels, ks, ds, "d", "k")
    lines += ["![AUC heat maps](scaling_grid.png)", ""]
    report = out_dir / "scaling.md"
    report.write_text("\n".join(lines))
    return report

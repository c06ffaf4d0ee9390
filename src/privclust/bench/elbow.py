"""``privclust bench elbow``: how often the private elbow finds a data set's k (Dupré la Tour, Henzinger & Saulpic 2024, Appendix A.3).

Each run draws a fresh private elbow curve (one greedy run, seeded noise) on
a bundled data set and records where its knee is; the report gives the
distribution of the found k against the data set's reference k and plots
the curves.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np

from .. import datasets
from ..elbow import elbow_curve

__all__ = ["run", "write_report"]


def run(name: str, k_max: int, runs: int, epsilon: float, on_done=None) -> list[dict]:
    ds = datasets.load(name)
    n = len(ds.X)
    rows = []
    for seed in range(runs):
        start = time.perf_counter()
        curve = elbow_curve(ds.X, k_max, epsilon, 1.0 / (n * math.log(n)), ds.bounds, random_state=seed)
        rows.append(
            {
                "dataset": name,
                "k": ds.k,
                "seed": seed,
                "elbow": curve.elbow,
                "costs": curve.costs.tolist(),
                "seconds": time.perf_counter() - start,
                "epsilon_spent": curve.privacy_spent.epsilon,
            }
        )
        if on_done:
            on_done(rows[-1])
    return rows


def write_report(rows: list[dict], out_dir: Path, machine: str, tolerance: int = 2) -> Path:
    from ..plotting import plot_cost_curves

    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "elbow.json").write_text(json.dumps(rows, indent=1))
    k, name = rows[0]["k"], rows[0]["dataset"]
    found = np.array([r["elbow"] for r in rows])
    hits = int(np.sum(np.abs(found - k) <= tolerance))
    lines = [
        f"# Private elbow on {name} ({machine})",
        "",
        f"{len(rows)} runs, epsilon = {rows[0]['epsilon_spent']:.3g} each, k_max = {len(rows[0]['costs'])}; "
        f"reference k = {k}.",
        "",
        f"Elbow within {k} +- {tolerance}: **{hits} of {len(rows)}** runs; found k: {sorted(found.tolist())}; "
        f"median seconds per curve {np.median([r['seconds'] for r in rows]):.2f}.",
    ]
    png = out_dir / "elbow.png"
    plot_cost_curves(png, [r["costs"] for r in rows], k, f"reference k = {k}")
    lines += ["", f"![elbow curves]({png.name})"]
    report = out_dir / "elbow.md"
    report.write_text("\n".join(lines) + "\n")
    return report

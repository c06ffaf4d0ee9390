"""``privclust bench onecluster``: the planted-cluster benchmark of issue #5 (Nissim, Stemmer & Vadhan 2016).

n points uniform in [-1, 1]^d, of which t are replaced by a ball of radius
``radius`` (uniform inside it) about a random center in [-0.5, 0.5]^d.
``one_cluster`` runs at epsilon = 1, delta = 1e-6 with that t; a run
succeeds when the released ball holds at least t/2 of the points and its
radius is at most 4x the planted one.  Every run draws new data and noise.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from ..locate import one_cluster

__all__ = ["planted", "run", "write_report"]


def planted(n: int, d: int, t: int, radius: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(data, planted center): a uniform background with a ball of t points."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.0, 1.0, (n, d))
    center = rng.uniform(-0.5, 0.5, d)
    directions = rng.normal(size=(t, d))
    directions /= np.linalg.norm(directions, axis=1)[:, None]
    X[:t] = center + directions * radius * rng.uniform(0.0, 1.0, (t, 1)) ** (1.0 / d)
    return X, center


def run(runs: int, n: int, d: int, t: int, radius: float, epsilon: float, on_done=None) -> list[dict]:
    rows = []
    for seed in range(runs):
        X, center = planted(n, d, t, radius, seed)
        start = time.perf_counter()
        found = one_cluster(X, t, epsilon=epsilon, delta=1e-6, bounds=(-1, 1), random_state=seed)
        seconds = time.perf_counter() - start
        inside = int(found.contains(X).sum())
        rows.append(
            {
                "seed": seed,
                "found": bool(found.found),
                "radius_ratio": found.radius / radius,
                "center_error": float(np.linalg.norm(found.center - center)),
                "inside": inside,
                "success": bool(inside >= t / 2 and found.radius <= 4 * radius),
                "seconds": seconds,
                "epsilon_spent": found.privacy_spent.epsilon,
            }
        )
        if on_done:
            on_done(rows[-1])
    return rows


def write_report(rows: list[dict], setup: dict, out_dir: Path, machine: str) -> Path:
    from ..plotting import plot_histograms

    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "onecluster.json").write_text(json.dumps({"setup": setup, "runs": rows}, indent=1))
    rate = np.mean([r["success"] for r in rows])
    ratios = np.array([r["radius_ratio"] for r in rows])
    inside = np.array([r["inside"] for r in rows])
    lines = [
        f"# Planted 1-cluster ({machine})",
        "",
        f"n = {setup['n']:,}, d = {setup['d']}, t = {setup['t']:,}, planted radius {setup['radius']}, "
        f"epsilon = {setup['epsilon']}, delta = 1e-6, {len(rows)} runs.",
        "",
        "| success rate | radius / planted (median, max) | points inside (min, median) | "
        "center error (median) | seconds per run (median) |",
        "|---|---|---|---|---|",
        f"| {rate:.0%} | {np.median(ratios):.2f}, {ratios.max():.2f} | {inside.min():,}, {int(np.median(inside)):,} | "
        f"{np.median([r['center_error'] for r in rows]):.4f} | {np.median([r['seconds'] for r in rows]):.2f} |",
    ]
    png = out_dir / "onecluster.png"
    plot_histograms(
        png, [(ratios, 4.0, "released radius / planted radius"), (inside / setup["t"], 0.5, "points inside / t")]
    )
    lines += ["", f"![planted runs]({png.name})"]
    report = out_dir / "onecluster.md"
    report.write_text("\n".join(lines) + "\n")
    return report

"""``privclust bench aggregate``: sample-and-aggregate as a private robust mean (Nissim, Stemmer & Vadhan 2016, Section 6).

Data: n draws from N(mu, 1) plus a fraction of wild values uniform in
[-1000, 1000].  The analysis f is the median of a subset; sample_and_aggregate
runs it on ``n_subsets`` random parts and privately returns a point most of
the medians are close to.  Reported per run: the private answer's error, the
error of the (non-private) plain mean and median, and the time.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from ..locate import sample_and_aggregate

__all__ = ["contaminated", "run", "write_report"]


def contaminated(n: int, mu: float, outliers: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    wild = int(outliers * n)
    return np.concatenate([rng.normal(mu, 1.0, n - wild), rng.uniform(-1000.0, 1000.0, wild)])[:, None]


def run(
    runs: int, n: int, n_subsets: int, epsilon: float, mu: float = 3.0, outliers: float = 0.02, on_done=None
) -> list[dict]:
    rows = []
    for seed in range(runs):
        data = contaminated(n, mu, outliers, seed)
        start = time.perf_counter()
        result = sample_and_aggregate(
            np.median,
            data,
            n_subsets,
            output_bounds=(-10, 10),
            output_dim=1,
            epsilon=epsilon,
            delta=1e-6,
            random_state=seed,
        )
        rows.append(
            {
                "seed": seed,
                "found": bool(result.found),
                "private_error": float(abs(result.center[0] - mu)),
                "mean_error": float(abs(data.mean() - mu)),
                "median_error": float(abs(np.median(data) - mu)),
                "seconds": time.perf_counter() - start,
            }
        )
        if on_done:
            on_done(rows[-1])
    return rows


def write_report(rows: list[dict], setup: dict, out_dir: Path, machine: str) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "aggregate.json").write_text(json.dumps({"setup": setup, "runs": rows}, indent=1))
    med = {key: float(np.median([r[key] for r in rows])) for key in ("private_error", "mean_error", "median_error")}
    lines = [
        f"# Sample and aggregate: private robust mean ({machine})",
        "",
        f"n = {setup['n']:,} (2% wild values), {setup['n_subsets']:,} subsets, f = median, "
        f"epsilon = {setup['epsilon']}, delta = 1e-6, {len(rows)} runs.",
        "",
        "| median error: private (sample and aggregate) | plain mean (not private) | plain median (not private) "
        "| found | seconds per run |",
        "|---|---|---|---|---|",
        f"| {med['private_error']:.4f} | {med['mean_error']:.4f} | {med['median_error']:.4f} | "
        f"{sum(r['found'] for r in rows)}/{len(rows)} | {np.median([r['seconds'] for r in rows]):.2f} |",
    ]
    report = out_dir / "aggregate.md"
    report.write_text("\n".join(lines) + "\n")
    return report

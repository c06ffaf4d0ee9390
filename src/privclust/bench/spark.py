"""``privclust bench spark``: the same fit in memory and on Spark, time per fit as n grows.

For each n: ``synthetic_blobs(n, d, k)`` written once to Parquet; the
in-memory engine fits the array, the Spark engine reads the Parquet file
(the rows stay in Spark).  Reported per engine: the best wall time of
``repeats`` seeded FastLloyd fits (Spark's includes loading and caching the
rows, which every Spark fit does), and the largest difference between the
two engines' centers for the same seed (summation order only).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from ..estimator import KMeans
from .speed import synthetic_blobs

__all__ = ["run", "write_report"]


def _timed_fit(data, n: int, k: int, algorithm: str, seed: int) -> tuple[float, np.ndarray]:
    start = time.perf_counter()
    model = KMeans(
        k, epsilon=1.0, delta=1e-6, bounds=(-1.0, 1.0), algorithm=algorithm, random_state=seed, public_n=n
    ).fit(data)
    return time.perf_counter() - start, model.cluster_centers_


def run(
    ns, d: int, k: int, algorithm: str, repeats: int, master: str, workdir: Path, memory: str = "4g", on_done=None
) -> list[dict]:
    import pandas as pd

    from ..queries.spark import spark_session

    session = spark_session(master, driver_memory=memory)
    workdir.mkdir(parents=True, exist_ok=True)
    rows = []
    for n in ns:
        X = synthetic_blobs(n, d, k)
        path = workdir / f"blobs_{n}x{d}.parquet"
        pd.DataFrame(X, columns=[f"x{j}" for j in range(d)]).to_parquet(path)
        frame = session.read.parquet(str(path))
        timings = {"memory": [], "spark": []}
        gaps = []
        for seed in range(repeats):
            seconds, local = _timed_fit(X, n, k, algorithm, seed)
            timings["memory"].append(seconds)
            seconds, distributed = _timed_fit(frame, n, k, algorithm, seed)
            timings["spark"].append(seconds)
            gaps.append(float(np.abs(local - distributed).max()))
        for engine, times in timings.items():
            rows.append(
                {
                    "n": n,
                    "d": d,
                    "k": k,
                    "algorithm": algorithm,
                    "engine": engine,
                    "master": master if engine == "spark" else None,
                    "best_seconds": min(times),
                    "seconds": times,
                    "max_center_gap": max(gaps),
                }
            )
        on_done and on_done(n)
    return rows


def write_report(rows: list[dict], out_dir: Path, machine: str) -> Path:
    from ..plotting import plot_curves

    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "spark.json").write_text(json.dumps(rows, indent=1))
    first = rows[0]
    lines = [
        f"# {first['algorithm']} in memory and on Spark ({machine})",
        "",
        f"d = {first['d']}, k = {first['k']}; best of {len(first['seconds'])} seeded fits; Spark master "
        f"`{next(r['master'] for r in rows if r['engine'] == 'spark')}`, rows read from Parquet and cached by "
        "each fit.",
        "",
        "| n | in memory (s) | Spark (s) | Spark / memory | largest center difference |",
        "|---|---|---|---|---|",
    ]
    ns = sorted({r["n"] for r in rows})
    best = {(r["n"], r["engine"]): r for r in rows}
    for n in ns:
        memory, spark = best[(n, "memory")], best[(n, "spark")]
        lines.append(
            f"| {n:,} | {memory['best_seconds']:.2f} | {spark['best_seconds']:.2f} | "
            f"{spark['best_seconds'] / memory['best_seconds']:.1f}x | {spark['max_center_gap']:.1e} |"
        )
    curves = {}
    for engine in ("memory", "spark"):
        times = [best[(n, engine)]["seconds"] for n in ns]
        curves[engine] = (ns, [float(np.median(t)) for t in times], [min(t) for t in times], [max(t) for t in times])
    png = out_dir / "spark_seconds.png"
    plot_curves(png, curves, f"{first['algorithm']}: seconds per fit (median, min-max)", "n", "seconds", True, True)
    lines += ["", f"![seconds per fit]({png.name})"]
    report = out_dir / "spark.md"
    report.write_text("\n".join(lines) + "\n")
    return report

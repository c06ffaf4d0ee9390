"""``privclust bench spark``: the same fit in memory and on Spark as n grows -- seconds and the driver's memory.

For each n the blobs of :func:`privclust.bench.speed.synthetic_blobs` (k Gaussian blobs
in [-1, 1]^d) are written once to Parquet, ``CHUNK_ROWS`` rows at a time, so a
10^8-row file is never whole in memory.  Every fit runs in a driver process of its
own (``python -m privclust.bench.spark``), so what it measures is that fit alone:

* ``seconds``: the fit (Spark's includes reading and caching the rows, which every
  Spark fit does; the in-memory engine's excludes reading the array);
* ``driver_peak_mib``: the driver's peak resident memory, Python's (``VmHWM``)
  plus, on Spark, the JVM's (``VmHWM`` of the driver's ``java`` child).  In
  ``local`` mode the JVM also runs the executors, so this is an upper bound.

Noise is the default secure noise unless ``noise="seeded"``; seeded fits of both
engines also report the largest difference between their centers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

__all__ = ["run", "write_blobs", "write_report", "CHUNK_ROWS"]

CHUNK_ROWS = 1_000_000  # rows generated and written per Parquet write
ROW_GROUP = 250_000  # rows per Parquet row group (Spark's unit of parallel reading)
SPREAD = 0.4  # synthetic_blobs' default spread
# Spark reading the Parquet file as users' plain scans are read (its Python workers), and as any other frame is
# (through the JVM's Arrow batches and a disk cache): spark_parquet's module docstring
SPARK_ENGINES = ("spark", "spark-jvm")


def write_blobs(path: Path, n: int, d: int, k: int, seed: int = 0) -> Path:
    """n rows of k blobs in [-1, 1]^d as Parquet, written chunk by chunk (whole or not at all)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if path.exists():
        return path
    rng = np.random.default_rng(seed)
    centers = rng.uniform(-0.8, 0.8, size=(k, d))
    names = [f"x{j}" for j in range(d)]
    partial = path.with_name(path.name + ".partial")
    with pq.ParquetWriter(partial, pa.schema([(name, pa.float64()) for name in names])) as writer:
        for start in range(0, n, CHUNK_ROWS):
            rows = min(CHUNK_ROWS, n - start)
            X = rng.normal(0.0, SPREAD, size=(rows, d)) + centers[rng.integers(0, k, size=rows)]
            np.clip(X, -1.0, 1.0, out=X)
            writer.write_table(pa.table({name: X[:, j] for j, name in enumerate(names)}), row_group_size=ROW_GROUP)
    partial.rename(path)
    return path


def _peak_mib(pid: int | str = "self") -> float:
    """The kernel's high-water mark of a process's resident memory (``VmHWM``), in MiB.  Not ``ru_maxrss``,
    which Linux carries over from the parent through ``fork`` and ``exec``: this driver would report the size
    of the benchmark that wrote the input (it did: 489 MiB at 10^7 rows for a driver that stays flat)."""
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM")) / 1024.0


def _jvm_peak_mib() -> float:
    """Peak resident memory of this process's ``java`` children (the Spark driver's JVM), 0 if none."""
    me, total = os.getpid(), 0.0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            if int(fields[1]) != me:
                continue
            total += _peak_mib(entry)
        except (OSError, StopIteration, ValueError, IndexError):
            continue
    return total


def drive(job: dict) -> dict:
    """One fit in this process (see the module docstring): its seconds, peak memory and centers."""
    import warnings

    from ..estimator import KMeans

    reader = None
    if job["engine"] in SPARK_ENGINES:
        from ..queries.spark import parquet_read_by_workers, spark_session

        session = spark_session(job["master"], driver_memory=job["memory"])
        data = session.read.parquet(job["path"])
        if job["engine"] == "spark-jvm":  # renamed columns: no longer a plain scan, so read through the JVM
            data = data.toDF(*(f"{name}_" for name in data.columns))
        reader = "workers" if parquet_read_by_workers(data) is not None else "jvm"
    else:
        import pyarrow.parquet as pq

        table = pq.read_table(job["path"])
        data = np.column_stack([column.to_numpy() for column in table.columns])
    seed = job["seed"]
    model = KMeans(
        job["k"],
        epsilon=1.0,
        delta=1e-6,
        bounds=(-1.0, 1.0),
        algorithm=job["algorithm"],
        random_state=seed,
        public_n=job["n"],
    )
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the seeded-noise notice: the benchmark asks for it knowingly
        model.fit(data)
    seconds = time.perf_counter() - start
    python = _peak_mib()
    jvm = _jvm_peak_mib()
    return {
        "seconds": seconds,
        "python_peak_mib": python,
        "jvm_peak_mib": jvm,
        "driver_peak_mib": python + jvm,
        "centers": model.cluster_centers_.tolist(),
        "mpc": bool(model.fit_info_.get("mpc", False)),
        "reader": reader,
    }


def _fit_in_own_process(job: dict) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "privclust.bench.spark", json.dumps(job)], capture_output=True, text=True
    )
    if done.returncode != 0:
        raise RuntimeError(f"the {job['engine']} fit of {job['n']:,} rows failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run(
    ns,
    d: int,
    k: int,
    algorithm: str,
    repeats: int,
    master: str,
    workdir: Path,
    memory: str = "4g",
    on_done=None,
    engines=("memory", "spark"),
    noise: str = "secure",
) -> list[dict]:
    workdir.mkdir(parents=True, exist_ok=True)
    rows = []
    for n in ns:
        path = write_blobs(workdir / f"blobs_{n}x{d}_k{k}_seed0.parquet", n, d, k)
        fits = {}
        for engine in engines:
            fits[engine] = [
                _fit_in_own_process(
                    {
                        "engine": engine,
                        "path": str(path),
                        "n": n,
                        "k": k,
                        "algorithm": algorithm,
                        "seed": seed if noise == "seeded" else None,
                        "master": master,
                        "memory": memory,
                    }
                )
                for seed in range(repeats)
            ]
        gap = None
        same_fit = not any(
            r["mpc"] for results in fits.values() for r in results
        )  # the MPC tree's noise is per partition
        if noise == "seeded" and len(fits) > 1 and same_fit:  # every engine's fits against the first engine's
            first, *others = fits.values()
            pairs = [(a, b) for results in others for a, b in zip(first, results)]
            gap = max(float(np.abs(np.sort(a["centers"], 0) - np.sort(b["centers"], 0)).max()) for a, b in pairs)
        for engine, results in fits.items():
            rows.append(
                {
                    "rows": n,
                    "d": d,
                    "k": k,
                    "algorithm": algorithm,
                    "engine": engine,
                    "master": master if engine in SPARK_ENGINES else None,
                    "reader": results[0]["reader"],
                    "noise": noise,
                    "mpc": results[0]["mpc"],
                    "seconds": min(r["seconds"] for r in results),
                    "all_seconds": [r["seconds"] for r in results],
                    "driver_peak_mib": max(r["driver_peak_mib"] for r in results),
                    "python_peak_mib": max(r["python_peak_mib"] for r in results),
                    "jvm_peak_mib": max(r["jvm_peak_mib"] for r in results),
                    "max_center_gap": gap,
                }
            )
        on_done and on_done(n)
    return rows


def write_report(rows: list[dict], out_dir: Path, machine: str) -> Path:
    from ..plotting import plot_curves

    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "spark.json").write_text(json.dumps(rows, indent=1))
    first = rows[0]
    engines = list(dict.fromkeys(r["engine"] for r in rows))
    masters = [r["master"] for r in rows if r["engine"] in SPARK_ENGINES]
    lines = [
        f"# {first['algorithm']} in memory and on Spark ({machine})",
        "",
        f"d = {first['d']}, k = {first['k']}, {first['noise']} noise; best of {len(first['all_seconds'])} fits, "
        "each in a driver process of its own"
        + (f"; Spark master `{masters[0]}`, rows read from Parquet" if masters else "")
        + ". Driver peak: Python's peak RSS plus the driver JVM's (local mode: the JVM runs the executors too). "
        "Reader: who read the Spark fit's rows (`workers`: Spark's Python workers, from the file on every pass; "
        "`jvm`: the JVM's Arrow batches, into a cache).",
        "",
        "| rows | engine | reader | seconds | driver peak (MiB) | Python (MiB) | JVM (MiB) | MPC greedy | center gap |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        gap = "" if r["max_center_gap"] is None else f"{r['max_center_gap']:.1e}"
        lines.append(
            f"| {r['rows']:,} | {r['engine']} | {r['reader'] or ''} | {r['seconds']:.2f} | {r['driver_peak_mib']:.0f} | "
            f"{r['python_peak_mib']:.0f} | {r['jvm_peak_mib']:.0f} | {'yes' if r['mpc'] else 'no'} | {gap} |"
        )
    ns = sorted({r["rows"] for r in rows})
    by = {(r["rows"], r["engine"]): r for r in rows}
    for engine in engines:
        have = [n for n in ns if (n, engine) in by]
        if len(have) > 1:
            a, b = by[(have[0], engine)], by[(have[-1], engine)]
            lines.append(
                f"\n{engine}, {have[0]:,} -> {have[-1]:,} rows: time x{b['seconds'] / a['seconds']:.2f}, "
                f"driver peak x{b['driver_peak_mib'] / a['driver_peak_mib']:.2f}."
            )
    for key, label, png in (
        ("seconds", "seconds per fit", "spark_seconds.png"),
        ("driver_peak_mib", "driver peak memory (MiB)", "spark_memory.png"),
    ):
        curves = {}
        for engine in engines:
            have = [n for n in ns if (n, engine) in by]
            values = [by[(n, engine)][key] for n in have]
            curves[engine] = (have, values, values, values)
        plot_curves(out_dir / png, curves, f"{first['algorithm']}: {label}", "rows", label, True, True)
        lines += ["", f"![{label}]({png})"]
    report = out_dir / "spark.md"
    report.write_text("\n".join(lines) + "\n")
    return report


if __name__ == "__main__":  # one fit in a driver process of its own (see ``run``)
    print(json.dumps(drive(json.loads(sys.argv[1]))))

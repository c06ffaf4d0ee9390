"""``privclust bench speed``: wall time and peak memory of ``fit`` as n grows.

Each privclust algorithm runs in its production configuration (secure
OpenDP noise), next to scikit-learn's ``KMeans(n_init=1, max_iter=7)``, the
non-private yardstick.  Time is the best of ``repeats`` runs; peak memory is
the tracemalloc peak of one further run (numpy and Python allocations; memory
a C extension allocates outside numpy is not seen).  The input array is made
before measuring and is not counted.
"""

from __future__ import annotations

import gc
import json
import time
import tracemalloc
from itertools import product
from pathlib import Path
from typing import Callable

import numpy as np

from ..estimator import KMeans
from . import peers
from .stats import loglog_slope

__all__ = [
    "synthetic_blobs",
    "run_speed",
    "write_speed_report",
    "noise_rates",
    "SKLEARN",
    "TARGETS",
    "run_targets",
    "accountant_checks",
    "targets_table",
]

SKLEARN = "sklearn-kmeans"


def synthetic_blobs(n: int, d: int, k: int, seed: int = 0, spread: float = 0.4) -> np.ndarray:
    """n points from k Gaussian blobs with centers uniform in [-0.8, 0.8]^d, clipped to [-1, 1].

    The default spread makes the blobs overlap, so Lloyd's algorithm does not
    converge early and every method runs its full iteration count.
    """
    rng = np.random.default_rng(seed)
    centers = rng.uniform(-0.8, 0.8, size=(k, d))
    X = rng.normal(0.0, spread, size=(n, d))
    X += centers[rng.integers(0, k, size=n)]
    np.clip(X, -1.0, 1.0, out=X)
    return X


def _fit(method: str, X: np.ndarray, k: int) -> int:
    """Fit once; returns the iterations run."""
    if method == SKLEARN:
        from sklearn.cluster import KMeans as SkKMeans

        return int(SkKMeans(n_clusters=k, n_init=1, max_iter=7, random_state=0).fit(X).n_iter_)
    return KMeans(k, epsilon=1.0, delta=1e-6, bounds=(-1, 1), algorithm=method).fit(X).n_iter_


def measure_peer(method: str, X: np.ndarray, k: int, repeats: int) -> dict:
    """A peer in its own environment; its runner times ``fit`` and traces memory itself."""
    job = {"k": k, "epsilon": 1.0, "seed": 0, "lower": -1.0, "upper": 1.0}
    timed = peers.run_batch(method, X, [job] * repeats)
    traced = peers.run_batch(method, X, [job], memory=True)[0]
    return {
        "seconds": min(r["seconds"] for r in timed),
        "iterations": timed[0]["iterations"],
        "peak_bytes": traced["peak_bytes"],
        "input_bytes": int(X.nbytes),
        "memory_ratio": traced["peak_bytes"] / X.nbytes,
    }


def measure(method: str, X: np.ndarray, k: int, repeats: int) -> dict:
    if method in peers.PEERS:
        return measure_peer(method, X, k, repeats)
    best = float("inf")
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        n_iter = _fit(method, X, k)
        best = min(best, time.perf_counter() - start)
    gc.collect()
    tracemalloc.start()
    _fit(method, X, k)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {
        "seconds": best,
        "iterations": n_iter,
        "peak_bytes": int(peak),
        "input_bytes": int(X.nbytes),
        "memory_ratio": peak / X.nbytes,
    }


# Issue 28's rows this benchmark measures: (label, what privclust fits, the target).  Each fit is timed next to
# scikit-learn's KMeans(n_init=1, max_iter=7) on the same array in the same process, the two alternating, so a
# busy machine slows both alike and the ratio of each pair is the figure; the large-k rows time the default's fit
# on 900 rows alone (their target is a time), sphere packing placing most of its k starting centers.
TARGETS = {
    "default": ("the default KMeans(10, epsilon=1, delta=1e-6, bounds=(-1, 1))", "auto", "<= 1x scikit-learn"),
    "greedy": ('algorithm="greedy", secure noise', "greedy", "<= 2x scikit-learn"),
    "large-k": ("the default on 900 x 2 rows", "auto", "k = 5000 under 30 s"),
}
LARGE_K_ROWS, LARGE_K_DIM = 900, 2
WARM_UP_ROWS = 200_000


def _pair(method: str, X: np.ndarray, k: int) -> tuple[float, float, float, float]:
    """(privclust's fit, scikit-learn's fit) in wall seconds, then in CPU seconds of the process (every
    thread's), timed back to back.  On a machine other jobs load, the wall times stretch with the cores they
    take; the CPU seconds are the work each fit did."""
    wall, cpu = [], []
    for which in (method, SKLEARN):
        gc.collect()
        start, start_cpu = time.perf_counter(), time.process_time()
        _fit(which, X, k)
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return wall[0], wall[1], cpu[0], cpu[1]


def run_targets(
    targets,
    n: int = 1_000_000,
    d: int = 10,
    k: int = 10,
    large_ks=(1000, 3000, 5000),
    repeats: int = 3,
    on_done: Callable[[dict], None] | None = None,
) -> list[dict]:
    """Issue 28's rows (``TARGETS``): per pair of alternating runs the two times and their ratio."""
    rows = []
    for target in targets:
        label, method, goal = TARGETS[target]
        if target == "large-k":
            X = synthetic_blobs(LARGE_K_ROWS, LARGE_K_DIM, 10)
            for big_k in large_ks:
                start = time.perf_counter()
                _fit(method, X, int(big_k))
                seconds = time.perf_counter() - start
                rows.append({"target": target, "what": f"{label}, k = {big_k:,}", "goal": goal, "seconds": [seconds]})
                if on_done:
                    on_done(rows[-1])
            continue
        X = synthetic_blobs(n, d, k)
        # Load the samplers and libraries outside the timing, both fits': on enough rows that the default takes
        # the path it takes on all of them (auto picks by n epsilon / k; on 20,000 rows the greedy start, and
        # the scikit-learn it imports, were first loaded inside the first timed pair).
        _fit(method, X[: min(n, WARM_UP_ROWS)], k)
        _fit(SKLEARN, X[:20_000], k)
        pairs = [_pair(method, X, k) for _ in range(repeats)]
        rows.append(
            {
                "target": target,
                "what": f"{label}, {n:,} x {d}, k = {k}",
                "goal": goal,
                "seconds": [p[0] for p in pairs],
                "sklearn_seconds": [p[1] for p in pairs],
                "ratios": [p[0] / p[1] for p in pairs],
                "cpu_ratios": [p[2] / p[3] for p in pairs],
            }
        )
        if on_done:
            on_done(rows[-1])
    return rows


def targets_table(rows: list[dict]) -> list[str]:
    """Markdown lines: one row per target, every pair's ratio and their median (wall time; CPU time too)."""
    lines = [
        "| issue 28 row | target | privclust seconds | scikit-learn seconds | ratio per pair | median ratio "
        "| median CPU-time ratio |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ours = ", ".join(f"{s:.2f}" for s in r["seconds"])
        if "ratios" in r:
            theirs = ", ".join(f"{s:.2f}" for s in r["sklearn_seconds"])
            ratios = ", ".join(f"{x:.2f}" for x in r["ratios"])
            median = f"**{float(np.median(r['ratios'])):.2f}**"
            cpu = f"{float(np.median(r['cpu_ratios'])):.2f}"
        else:
            theirs = ratios = median = cpu = "-"
        lines.append(f"| {r['what']} | {r['goal']} | {ours} | {theirs} | {ratios} | {median} | {cpu} |")
    return lines


def noise_rates(secure_draws: int = 100_000, scale: float = 16.0) -> list[dict]:
    """Noise values added per second by each source to one vector, as a release adds them (secure: in pieces on
    the worker threads, none over ``NOISE_CALL_VALUES``; ``privacy.noise.vector_pieces``): the
    secure OpenDP samplers on ``secure_draws`` values, seeded numpy on ten times as many."""
    from ..privacy.noise import SecureNoise, SeededNoise

    rows = []
    for source, noise, draws in (
        ("seeded", SeededNoise(np.random.SeedSequence(0)), 10 * secure_draws),
        ("secure", SecureNoise(), secure_draws),
    ):
        values = np.linspace(0.0, 100.0, draws)
        for kind in ("gaussian", "laplace"):
            add = getattr(noise, f"add_{kind}")
            add(values[:10], scale)  # load the sampler outside the timing
            start = time.perf_counter()
            add(values, scale)
            seconds = time.perf_counter() - start
            rows.append({"source": source, "noise": kind, "draws": draws, "per_second": draws / seconds})
    return rows


def accountant_checks(recorded=(20, 200, 2_000), checks: int = 500) -> list[dict]:
    """Microseconds per ``PrivacyAccountant.check`` of two planned spends (a Gaussian one and a pure one) beside
    ``recorded`` spends already on the accountant, half Gaussian and half pure, as a ledger of many fits holds:
    what every release's check costs as the ledger grows (it composes running totals, not the whole list)."""
    from ..privacy import PrivacyAccountant
    from ..privacy.budget import Budget, Spend

    planned = [Spend("planned Gaussian", mu=0.05), Spend("planned pure", epsilon=0.1)]
    rows = []
    for count in recorded:
        accountant = PrivacyAccountant(Budget(1e9, 0.5))
        for i in range(count):
            accountant.spend(Spend("Gaussian", mu=0.01) if i % 2 else Spend("pure", epsilon=0.01, delta=1e-12))
        accountant.check(planned)  # outside the timing: the first check sums what is recorded
        start = time.perf_counter()
        for _ in range(checks):
            accountant.check(planned)
        rows.append({"recorded": count, "checks": checks, "microseconds": (time.perf_counter() - start) / checks * 1e6})
    return rows


def run_speed(
    ns,
    ds,
    ks,
    methods,
    repeats: int = 3,
    on_done: Callable[[dict], None] | None = None,
    max_input_bytes: int = 2 * 2**30,
    peer_max_n: int = 1_000_000,
) -> tuple[list[dict], dict[str, str]]:
    """(rows, what was not measured and why): inputs over ``max_input_bytes``, peers above ``peer_max_n`` rows."""
    rows, missing = [], {}
    for n, d, k in product(ns, ds, ks):
        if int(n) * int(d) * 8 > max_input_bytes:
            missing[f"n={n:,} d={d} k={k}"] = f"skipped: input over {max_input_bytes / 2**30:g} GiB (--max-gib)"
            if on_done:
                for _ in methods:
                    on_done({})
            continue
        X = synthetic_blobs(int(n), int(d), int(k))
        for method in methods:
            if method in peers.PEERS and int(n) > peer_max_n:
                missing[f"{method} at n={int(n):,}"] = f"skipped: peers run up to --peer-max-n={peer_max_n:,} rows"
            elif method not in missing:
                try:
                    row = {
                        "method": method,
                        "n": int(n),
                        "d": int(d),
                        "k": int(k),
                        **measure(method, X, int(k), repeats),
                    }
                    rows.append(row)
                except peers.PeerMissing as exc:
                    missing[method] = str(exc)
            if on_done:
                on_done({})
        del X
    return rows, missing


def write_speed_report(
    rows: list[dict],
    out_dir: Path,
    machine: str,
    missing: dict | None = None,
    noise: list[dict] | None = None,
    targets: list[dict] | None = None,
    checks: list[dict] | None = None,
) -> Path:
    from ..plotting import plot_curves

    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "speed.json").write_text(json.dumps(rows, indent=1))
    ref = {(r["n"], r["d"], r["k"]): r for r in rows if r["method"] == SKLEARN}
    lines = ["# Speed benchmark", "", f"Machine: {machine}", ""]
    if targets:
        (out_dir / "targets.json").write_text(json.dumps(targets, indent=1))
        lines += ["Issue 28's rows (each privclust fit next to scikit-learn's, alternating):", ""]
        lines += [*targets_table(targets), ""]
    for what, why in (missing or {}).items():
        lines += [f"**Not measured: {what}** — {why}.", ""]
    if rows:
        lines += [
            "| method | n | d | k | iterations | seconds | time / sklearn | peak MiB | peak / input |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
    for r in rows:
        base = ref.get((r["n"], r["d"], r["k"]))
        ratio = f"{r['seconds'] / base['seconds']:.2f}" if base else "-"
        lines.append(
            f"| {r['method']} | {r['n']:,} | {r['d']} | {r['k']} | {r['iterations']} | {r['seconds']:.3f} | {ratio} | "
            f"{r['peak_bytes'] / 2**20:.1f} | {r['memory_ratio']:.2f} |"
        )
    if noise:
        lines += ["", "Noise draws per second (one vector, as a release adds them):", ""]
        lines += ["| source | noise | draws | per second |", "|---|---|---|---|"]
        lines += [f"| {r['source']} | {r['noise']} | {r['draws']:,} | {r['per_second']:,.0f} |" for r in noise]
    if checks:
        (out_dir / "accountant.json").write_text(json.dumps(checks, indent=1))
        lines += ["", "An accountant's check of two planned spends, by the spends it has recorded:", ""]
        lines += ["| spends recorded | checks timed | microseconds per check |", "|---|---|---|"]
        lines += [f"| {r['recorded']:,} | {r['checks']:,} | {r['microseconds']:.1f} |" for r in checks]
        xs, ys = [r["recorded"] for r in checks], [r["microseconds"] for r in checks]
        png = out_dir / "accountant_checks.png"
        plot_curves(
            png,
            {"check": (xs, ys, ys, ys)},
            "accountant check",
            "spends recorded",
            "microseconds",
            True,
            from_zero=True,
        )
        lines += ["", f"![accountant checks]({png.name})"]
    if rows:
        lines += ["", "Growth exponent b in time ~ n^b (least squares over n, per d and k):", ""]
        lines += ["| method | d | k | b |", "|---|---|---|---|"]
    for d, k in sorted({(r["d"], r["k"]) for r in rows}):
        curves = {}
        for method in dict.fromkeys(r["method"] for r in rows):
            sel = sorted(
                (r for r in rows if r["method"] == method and r["d"] == d and r["k"] == k), key=lambda r: r["n"]
            )
            if len(sel) >= 2:
                lines.append(
                    f"| {method} | {d} | {k} | {loglog_slope([r['n'] for r in sel], [r['seconds'] for r in sel]):.2f} |"
                )
                xs, ys = [r["n"] for r in sel], [r["seconds"] for r in sel]
                curves[method] = (xs, ys, ys, ys)
        if curves:
            png = out_dir / f"speed_d{d}_k{k}.png"
            plot_curves(png, curves, f"fit time, d={d}, k={k}", "n", "seconds", logx=True, logy=True)
            lines += ["", f"![speed d={d} k={k}]({png.name})", ""]
    report = out_dir / "speed.md"
    report.write_text("\n".join(lines) + "\n")
    return report

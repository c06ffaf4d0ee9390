"""``privclust bench stream``: continual observation against k-means++ and the naive per-step baseline.

The stream is a sliding window over drifting clusters: at step 1 the window
fills with ``window`` points; at every later data step a batch of new points
drawn around the clusters' current centers is inserted and the oldest batch
deleted, while every cluster center drifts along its own direction (reflected
at the edge of [-0.8, 0.8]^d).  Per evaluated step, NICV (k-means cost / n on
the current window) of

* the continual release (``ContinualKMeans``, one budget for the whole horizon);
* non-private k-means++ (scikit-learn, one init) on the current window -- the floor;
* the naive baseline: the central private greedy re-run at the step with the
  budget split over the T steps by GDP composition (each step mu / sqrt(T)).

A second experiment spreads the same number of data steps over longer horizons
T (empty steps between them: published, but with no update) and compares the
two private releases at the last data steps; it also times a counter update of
one data step and the per-step post-processing, and reads the counters' memory.
Those two experiments use seeded noise (reproducible, and fast enough to run
10^4 steps); a third times the first steps of the docs' example (T = 8760) with
the default **secure** noise (OpenDP's samplers), the noise a real release uses.
"""

from __future__ import annotations

import json
import math
import resource
import time
from collections import deque
from pathlib import Path

import numpy as np

from ..metrics import nicv

__all__ = ["DriftingWindow", "run_window", "run_horizons", "run_secure_steps", "write_report"]


class DriftingWindow:
    """A sliding window over ``clusters`` drifting Gaussian clusters in [-1, 1]^dim (see the module doc)."""

    def __init__(self, seed: int, clusters=8, dim=2, window=25_000, batch=1_250, drift=0.004, spread=0.04):
        self.rng = np.random.default_rng(seed)
        self.centers = self.rng.uniform(-0.7, 0.7, size=(clusters, dim))
        direction = self.rng.normal(size=(clusters, dim))
        self.velocity = drift * direction / np.linalg.norm(direction, axis=1, keepdims=True)
        self.batch, self.spread = batch, spread
        self.batches = deque(self._draw(batch) for _ in range(window // batch))

    def _draw(self, m: int) -> np.ndarray:
        labels = self.rng.integers(0, self.centers.shape[0], m)
        return np.clip(self.centers[labels] + self.rng.normal(0.0, self.spread, (m, self.centers.shape[1])), -1, 1)

    def current(self) -> np.ndarray:
        return np.vstack(self.batches)

    def advance(self) -> tuple[np.ndarray, np.ndarray]:
        """(inserted, deleted) of the next data step, after the clusters drift."""
        self.centers += self.velocity
        out = np.abs(self.centers) > 0.8
        self.velocity[out] *= -1.0
        self.centers = np.clip(self.centers, -0.8, 0.8)
        new = self._draw(self.batch)
        self.batches.append(new)
        return new, self.batches.popleft()


def _kmeanspp(X: np.ndarray, k: int, seed: int) -> float:
    from sklearn.cluster import KMeans as SkKMeans

    return nicv(X, SkKMeans(k, n_init=1, random_state=seed).fit(X).cluster_centers_)


def _naive(X: np.ndarray, k: int, epsilon: float, delta: float, horizon: int, seed: int) -> float:
    """The central greedy with the step's share of the budget: mu / sqrt(T) of GDP (T steps compose to mu)."""
    from ..estimator import KMeans
    from ..privacy.gdp import gdp_epsilon, gdp_mu

    step_epsilon = gdp_epsilon(gdp_mu(epsilon, delta) / math.sqrt(horizon), delta)
    model = KMeans(k, epsilon=step_epsilon, delta=delta, bounds=(-1, 1), algorithm="greedy", random_state=seed)
    return nicv(X, model.fit(X).cluster_centers_)


def run_window(steps=200, k=8, epsilon=1.0, delta=1e-6, seed=0, window=25_000, batch=1_250, on_done=None) -> dict:
    """The 200-step sliding window: NICV per step of the three methods."""
    from ..stream import ContinualKMeans

    data = DriftingWindow(seed, clusters=k, window=window, batch=batch)
    model = ContinualKMeans(k, epsilon, delta, (-1, 1), horizon=steps, random_state=seed)
    rows = []
    for t in range(1, steps + 1):
        if t == 1:
            inserted, deleted = data.current(), None
        else:
            inserted, deleted = data.advance()
        centers = model.update(insert=inserted, delete=deleted)
        X = data.current()
        rows.append(
            {
                "step": t,
                "continual": nicv(X, centers),
                "kmeans++": _kmeanspp(X, k, seed + t),
                "naive": _naive(X, k, epsilon, delta, steps, seed + t),
            }
        )
        if on_done:
            on_done(rows[-1])
    last = rows[steps // 2 :]
    summary = {name: float(np.median([r[name] for r in last])) for name in ("continual", "kmeans++", "naive")}
    return {"steps": rows, "median_last_half": summary, "spent": str(model.privacy_spent_)}


def run_horizons(
    horizons=(100, 1_000, 10_000), data_steps=100, evaluated=10, k=8, epsilon=1.0, delta=1e-6, seed=0, on_done=None
) -> list[dict]:
    """The same window stream spread over horizon T (a data step every T / data_steps steps)."""
    from ..stream import ContinualKMeans

    rows = []
    for horizon in horizons:
        data = DriftingWindow(seed, clusters=k)
        model = ContinualKMeans(k, epsilon, delta, (-1, 1), horizon=horizon, random_state=seed)
        every = max(1, horizon // data_steps)
        data_at = set(range(1, horizon + 1, every))
        evaluate = sorted(data_at)[-evaluated:]
        continual, naive, update_s, centers_s = [], [], [], []
        for t in range(1, horizon + 1):
            if t == 1:
                inserted, deleted = data.current(), None
            elif t in data_at:
                inserted, deleted = data.advance()
            else:
                inserted = deleted = None
            start = time.perf_counter()
            model.update(insert=inserted, delete=deleted, publish=False)
            if t in data_at and t > 1:
                update_s.append(time.perf_counter() - start)
            if t in evaluate:
                start = time.perf_counter()
                centers = model.publish()
                centers_s.append(time.perf_counter() - start)
                X = data.current()
                continual.append(nicv(X, centers))
                naive.append(_naive(X, k, epsilon, delta, horizon, seed + t))
        rows.append(
            {
                "horizon": horizon,
                "continual": float(np.median(continual)),
                "naive": float(np.median(naive)),
                "ratio": float(np.median(continual) / np.median(naive)),
                "update_ms": 1e3 * float(np.median(update_s)),
                "update_rows": 2 * data.batch,
                "centers_ms": 1e3 * float(np.median(centers_s)),
                "counter_mb": model.oracle_.nbytes / 2**20,  # synthetic data: a measurement, not a release
                "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            }
        )
        if on_done:
            on_done(rows[-1])
    return rows


def run_secure_steps(
    horizon=8760, steps=8, k=8, epsilon=1.0, delta=1e-6, seed=0, window=25_000, batch=1_250, on_done=None
) -> dict:
    """The first ``steps`` steps of the sliding window over horizon T with secure noise (``random_state=None``):
    the time of each counter update (the step's noise: every node that closes) and of each step's centers.
    Steps 1..8 close 1, 2, 1, 3, 1, 2, 1, 4 levels: their mean (1.875) is close to the long-run 2."""
    from ..stream import ContinualKMeans

    data = DriftingWindow(seed, clusters=k, window=window, batch=batch)
    model = ContinualKMeans(k, epsilon, delta, (-1, 1), horizon=horizon, random_state=None)
    update_s, centers_s = [], []
    for t in range(1, steps + 1):
        inserted, deleted = (data.current(), None) if t == 1 else data.advance()
        start = time.perf_counter()
        model.update(insert=inserted, delete=deleted, publish=False)
        update_s.append(time.perf_counter() - start)
        start = time.perf_counter()
        model.publish()
        centers_s.append(time.perf_counter() - start)
        if on_done:
            on_done(t)
    values = sum(c.ids.size * c.width for c in model.oracle_.counters)  # synthetic data: a measurement
    return {
        "horizon": horizon,
        "steps": steps,
        "secure": True,
        "update_s": update_s,
        "centers_s": centers_s,
        "mean_step_s": float(np.mean(np.add(update_s, centers_s))),
        "noised_values_per_level": int(values),
    }


def write_report(window: dict, horizons: list[dict], out_dir: Path, machine: str, secure: dict | None = None) -> Path:
    from ..plotting import plot_curves

    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "stream.json").write_text(
        json.dumps({"window": window, "horizons": horizons, "secure": secure}, indent=1)
    )
    steps = window["steps"]
    x = [r["step"] for r in steps]
    curves = {
        name: (x, [r[name] for r in steps], [r[name] for r in steps], [r[name] for r in steps])
        for name in ("continual", "kmeans++", "naive")
    }
    plot_curves(out_dir / "stream_window.png", curves, "sliding window, 8 drifting clusters", "step", "NICV", logy=True)
    hx = [r["horizon"] for r in horizons]
    hcurves = {
        name: (hx, [r[name] for r in horizons], [r[name] for r in horizons], [r[name] for r in horizons])
        for name in ("continual", "naive")
    }
    plot_curves(out_dir / "stream_horizon.png", hcurves, "NICV against the horizon", "T", "NICV", logx=True, logy=True)
    m = window["median_last_half"]
    lines = [
        f"# Continual observation ({machine})",
        "",
        f"Sliding window, {len(steps)} steps, epsilon = 1 for the whole horizon ({window['spent']}).",
        "Median NICV over the last half of the steps:",
        "",
        "| continual | k-means++ | naive per-step greedy | continual / k-means++ |",
        "|---|---|---|---|",
        f"| {m['continual']:.5f} | {m['kmeans++']:.5f} | {m['naive']:.5f} | {m['continual'] / m['kmeans++']:.2f} |",
        "",
        "![window](stream_window.png)",
        "",
        "| T | continual NICV | naive NICV | ratio | update (ms) | rows per update | centers (ms) | counters (MiB) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in horizons:
        lines.append(
            f"| {r['horizon']} | {r['continual']:.5f} | {r['naive']:.5f} | {r['ratio']:.3f} | {r['update_ms']:.1f} "
            f"| {r['update_rows']} | {r['centers_ms']:.0f} | {r['counter_mb']:.1f} |"
        )
    lines += ["", "![horizon](stream_horizon.png)"]
    if secure is not None:
        per_step = np.add(secure["update_s"], secure["centers_s"])
        lines += [
            "",
            f"Secure noise (OpenDP), T = {secure['horizon']}, steps 1..{secure['steps']} of the window: "
            f"{secure['noised_values_per_level']:,} noised values per closing level.",
            "",
            "| step | counter update (s) | centers (s) | whole step (s) |",
            "|---|---|---|---|",
        ]
        for t, (u, c, w) in enumerate(zip(secure["update_s"], secure["centers_s"], per_step), start=1):
            lines.append(f"| {t} | {u:.2f} | {c:.2f} | {w:.2f} |")
        lines.append(f"| mean | | | **{secure['mean_step_s']:.2f}** |")
    report = out_dir / "stream.md"
    report.write_text("\n".join(lines) + "\n")
    return report

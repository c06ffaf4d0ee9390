"""``privclust bench maxcover``: k-means cost versus k at epsilon = 1 (Nguyen, Chaturvedi & Xu 2021, Figure 1).

Two data sets, as in the seed: a mixture of 64 Gaussians in R^100
(n = 50,000; generated here, see :func:`gaussian_mixture`) and MNIST's
60,000 x 784 training images (pixels / 255, bounds [0, 1]; read from an
``.npz`` file because the package bundles only the 10k test set).  Methods:
maxcover (its default cover), maxcover-hist and maxcover-exp (the histogram and
the seed's exponential cover by name), fastlloyd, diffprivlib (its own
environment, if installed) and non-private Lloyd (scikit-learn, k-means++).  epsilon = 1, delta = n^-1.5,
the row count public, seeded noise; cost = mean squared distance to the
nearest center.  Each run also records its wall time and peak resident
memory growth.

**The ablation** (``--ablation``) asks which of maxcover's private steps limits
its cost.  Two *non-private diagnostics* rebuild maxcover's partition with the
same public geometry (JL projection, grid levels) and exact cluster means:
``cover-exact`` picks each cover point by exact argmax (what the seed's
published code does: its sampled index is overwritten by the argmax), and
``cover-private`` draws it by the implicit exponential mechanism at the
eps_E that private maxcover uses.  Private maxcover minus ``cover-private`` is
what NoisyAVG and the final round cost; ``cover-private`` minus
``cover-exact`` is what the private cover costs.  The report also lists, per
grid level, how many points a grid point must cover before the exponential
mechanism prefers it to the empty rest of the grid (2 ln|G_i| / eps_E).
"""

from __future__ import annotations

import json
import os
import resource
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from .. import metrics
from ..algorithms.base import weighted_kmeans
from ..algorithms.maxcover import greedy_grid_cover, grid_sides, level_grid_size
from ..estimator import KMeans
from ..geometry.domain import make_domain
from ..geometry.projection import BallProjection
from ..privacy.noise import SeededNoise
from . import peers
from .stats import mean_ci

__all__ = ["gaussian_mixture", "CostJob", "plan", "run", "write_report", "DEFAULT_KS", "find_mnist"]

DEFAULT_KS = (2, 4, 8, 16, 32, 64)
METHODS = ("maxcover", "maxcover-hist", "maxcover-noisyavg", "maxcover-exp", "fastlloyd", "diffprivlib", "lloyd")
# maxcover at its default cover, and at each cover by name (``algorithm_params={"cover": ...}``)
# Variants of maxcover -> their algorithm_params
COVER_METHODS = {
    "maxcover-hist": {"cover": "histogram"},
    "maxcover-noisyavg": {"cover": "histogram", "average": "noisyavg"},  # the histogram cover with the seed's NoisyAVG
    "maxcover-exp": {"cover": "exponential"},
}
ABLATION = ("cover-exact", "cover-private")  # non-private diagnostics of maxcover's partition
EXACT_SELECTION = 1e6  # an eps_E at which the exponential mechanism is an argmax


def gaussian_mixture(n: int = 50_000, d: int = 100, components: int = 64, spread: float = 0.05, seed: int = 0):
    """Nguyen et al.'s synthetic set: ``components`` Gaussians in R^d with centers uniform in [-0.5, 0.5]^d
    and per-coordinate standard deviation ``spread``, clipped to the declared bounds [-1, 1]^d."""
    rng = np.random.default_rng(seed)
    centers = rng.uniform(-0.5, 0.5, size=(components, d))
    labels = rng.integers(0, components, size=n)
    return np.clip(centers[labels] + rng.normal(0.0, spread, size=(n, d)), -1.0, 1.0)


def find_mnist(explicit: Path | None = None) -> Path | None:
    """The MNIST 60k file: ``explicit``, ``$PRIVCLUST_MNIST60K``, or ../shared/datasets beside the checkout."""
    candidates = [explicit, os.environ.get("PRIVCLUST_MNIST60K")]
    here = Path(__file__).resolve()
    candidates += [parent / "shared" / "datasets" / "mnist_train60k.npz" for parent in here.parents]
    for path in candidates:
        if path and Path(path).is_file():
            return Path(path)
    return None


@lru_cache(maxsize=2)
def load(name: str, mnist_path: str | None = None) -> tuple[np.ndarray, tuple[float, float]]:
    if name == "mixture64":
        return gaussian_mixture(), (-1.0, 1.0)
    if name == "mnist60k":
        with np.load(mnist_path) as archive:
            return archive["X"].astype(np.float64) / 255.0, (0.0, 1.0)
    raise ValueError(f"unknown data set {name!r}; use mixture64 or mnist60k")


@dataclass(frozen=True)
class CostJob:
    dataset: str
    method: str
    k: int
    seed: int
    mnist_path: str | None = None


def plan(datasets, methods, ks, runs: int, mnist_path: Path | None) -> list[CostJob]:
    path = str(mnist_path) if mnist_path else None
    return [CostJob(name, m, k, s, path) for name in datasets for m in methods for k in ks for s in range(runs)]


def _peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def run_job(job: CostJob) -> dict:
    X, (lo, hi) = load(job.dataset, job.mnist_path)
    before = _peak_rss_bytes()
    start = time.perf_counter()
    if job.method in ABLATION:
        centers, spent = maxcover_partition(X, (lo, hi), job.k, job.seed, job.method == "cover-private"), None
    elif job.method == "lloyd":
        from sklearn.cluster import KMeans as SkKMeans

        centers = SkKMeans(job.k, n_init=1, max_iter=10, random_state=job.seed).fit(X).cluster_centers_
        spent = None
    else:
        model = _private_fit(X, (lo, hi), job.method, job.k, job.seed)
        centers = model.cluster_centers_
        spent = {"epsilon": model.privacy_spent_.epsilon, "delta": model.privacy_spent_.delta}
    seconds = time.perf_counter() - start
    return {
        **asdict(job),
        "cost": float(metrics.assign(X, centers)[1].mean()),
        "seconds": seconds,
        "peak_rss_growth_bytes": max(0, _peak_rss_bytes() - before),
        "privacy_spent": spent,
    }


def _private_fit(X: np.ndarray, bounds, method: str, k: int, seed: int) -> KMeans:
    """The seed's setting: epsilon = 1, delta = n^-1.5, the row count public, seeded noise."""
    n = X.shape[0]
    algorithm, params = method, None
    if method in COVER_METHODS:
        algorithm, params = "maxcover", COVER_METHODS[method]
    return KMeans(
        k,
        epsilon=1.0,
        delta=n**-1.5,
        bounds=bounds,
        algorithm=algorithm,
        algorithm_params=params,
        random_state=seed,
        public_n=n,
    ).fit(X)


def maxcover_partition(X: np.ndarray, bounds, k: int, seed: int, private_cover: bool) -> np.ndarray:
    """A NON-PRIVATE diagnostic: maxcover's partition, each part replaced by its exact mean.

    The projection dimension, the grid levels and eps_E are those of private
    maxcover at epsilon = 1 (read from a private fit's ``fit_info_``); the
    cover is drawn at eps_E (``private_cover``) or by exact argmax, the proxy
    counts are exact, and each projected Voronoi cell's mean is exact.
    """
    info = _private_fit(X, bounds, "maxcover-exp", k, seed).fit_info_
    rng = np.random.default_rng(seed)
    unit = make_domain(bounds, X.shape[1]).to_unit(X.copy())
    project = BallProjection.draw(X.shape[1], info["projection_dim"], rng)
    points = project(unit)
    sides = grid_sides(X.shape[0], 2.0)
    eps = info["eps_draw"] if private_cover else EXACT_SELECTION
    noise = SeededNoise(np.random.SeedSequence(seed))
    candidates = greedy_grid_cover(points, sides, k, eps, noise, rng)
    counts = np.bincount(metrics.assign(points, candidates)[0], minlength=candidates.shape[0])
    labels = metrics.assign(points, weighted_kmeans(candidates, counts.astype(np.float64), k, rng))[0]
    return np.array([X[labels == j].mean(axis=0) for j in np.unique(labels)])


def cover_thresholds(dataset: str, k: int, mnist_path: str | None = None) -> list[dict]:
    """Per grid level of private maxcover (seed 0): |G_i| and the points a grid point must cover
    to outweigh the whole empty grid in the exponential mechanism, 2 ln|G_i| / eps_E."""
    X, bounds = load(dataset, mnist_path)
    info = _private_fit(X, bounds, "maxcover-exp", k, 0).fit_info_
    dim, eps = info["projection_dim"], info["eps_draw"]
    rows = []
    for side in grid_sides(X.shape[0], 2.0):
        log_size = level_grid_size(side, dim)
        rows.append({"side": side, "log_grid": log_size, "points_needed": 2.0 * log_size / eps, "eps_draw": eps})
    return rows


def _peer_rows(jobs: list[CostJob]) -> list[dict]:
    X, (lo, hi) = load(jobs[0].dataset, jobs[0].mnist_path)
    specs = [{"k": j.k, "epsilon": 1.0, "seed": j.seed, "lower": lo, "upper": hi} for j in jobs]
    results = peers.run_batch("diffprivlib", X, specs)
    return [
        {
            **asdict(j),
            "cost": float(metrics.assign(X, np.asarray(r["centers"]))[1].mean()),
            "seconds": r["seconds"],
            "privacy_spent": {"epsilon": 1.0, "claimed": True},
        }
        for j, r in zip(jobs, results)
    ]


def run(jobs: list[CostJob], workers: int = 1, on_done=None) -> tuple[list[dict], dict[str, str]]:
    """Every job; peers in their own environment, the rest on ``workers`` processes."""
    rows, missing = [], {}
    local = [j for j in jobs if j.method not in peers.PEERS]
    by_peer: dict[str, list[CostJob]] = {}
    for j in jobs:
        if j.method in peers.PEERS:
            by_peer.setdefault(j.dataset, []).append(j)
    if workers > 1:
        with ProcessPoolExecutor(workers) as pool:
            for row in pool.map(run_job, local):
                rows.append(row)
                on_done and on_done(row)
    else:
        for job in local:
            rows.append(run_job(job))
            on_done and on_done(rows[-1])
    for batch in by_peer.values():
        if not peers.is_installed("diffprivlib"):
            missing["diffprivlib"] = "diffprivlib is not installed: privclust bench peers install diffprivlib"
            for _ in batch:
                on_done and on_done({})
            continue
        for row in _peer_rows(batch):
            rows.append(row)
            on_done and on_done(row)
    return rows, missing


def write_report(
    rows: list[dict], out_dir: Path, machine: str, missing: dict[str, str], thresholds: dict | None = None
) -> Path:
    from ..plotting import plot_panels

    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "maxcover.json").write_text(
        json.dumps({"runs": rows, "thresholds": thresholds}, indent=1, default=float)
    )
    lines = [f"# Cost versus k at epsilon = 1, delta = n^-1.5 (Nguyen, Chaturvedi & Xu 2021, Figure 1; {machine})", ""]
    panels = {}
    for name in dict.fromkeys(r["dataset"] for r in rows):
        sub = [r for r in rows if r["dataset"] == name]
        ks = sorted({r["k"] for r in sub})
        methods = list(dict.fromkeys(r["method"] for r in sub))
        lines += [
            f"## {name}: mean cost per point (95% CI half-width)",
            "",
            "| method | " + " | ".join(f"k = {k}" for k in ks) + " |",
            "|---|" + "---|" * len(ks),
        ]
        curves = {}
        for m in methods:
            stats = [mean_ci([r["cost"] for r in sub if r["method"] == m and r["k"] == k]) for k in ks]
            curves[m] = (ks, [s[0] for s in stats], [s[1] for s in stats], [s[2] for s in stats])
            lines.append(f"| {m} | " + " | ".join(f"{s[0]:.4g} (±{(s[2] - s[1]) / 2:.2g})" for s in stats) + " |")
        times = {m: np.median([r["seconds"] for r in sub if r["method"] == m]) for m in methods}
        lines += ["", "Median seconds per fit: " + ", ".join(f"{m} {t:.2f}" for m, t in times.items()), ""]
        mc = [r for r in sub if r["method"].startswith("maxcover") and "peak_rss_growth_bytes" in r]
        if mc:
            peak = max(r["peak_rss_growth_bytes"] for r in mc) / 2**30
            lines += [
                f"maxcover: slowest fit {max(r['seconds'] for r in mc):.1f} s, "
                f"peak resident-memory growth {peak:.2f} GiB.",
                "",
            ]
        panels[name] = curves
        if any(m in ABLATION for m in methods):
            lines += [
                "cover-exact and cover-private are NOT private: maxcover's partition with exact cluster means, "
                "the cover drawn by exact argmax or by the exponential mechanism at maxcover's eps_E.",
                "",
            ]
        if thresholds and name in thresholds:
            lines += _threshold_table(thresholds[name])
    lines += [f"Missing peer: {why}" for why in missing.values()]
    png = out_dir / "maxcover_cost_vs_k.png"
    plot_panels(png, panels, "k", "cost per point", columns=max(1, len(panels)))
    lines += ["", f"![cost vs k]({png.name})"]
    report = out_dir / "maxcover.md"
    report.write_text("\n".join(lines) + "\n")
    return report


def _threshold_table(levels: list[dict]) -> list[str]:
    eps = levels[0]["eps_draw"]
    lines = [
        f"Cover levels (eps_E = {eps:.4g} per draw): a grid point is preferred to the empty rest of the grid "
        "only once it covers about 2 ln|G_i| / eps_E points.",
        "",
        "| grid side | ln abs(G_i) | points needed |",
        "|---|---|---|",
    ]
    lines += [f"| {r['side']:.3g} | {r['log_grid']:.1f} | {r['points_needed']:,.0f} |" for r in levels]
    return lines + [""]

"""``privclust bench local``: the local and shuffle models as the number of users grows (issue 14).

Data: 8 Gaussian blobs in 2-d (``speed.synthetic_blobs`` with spread 0.05, the data of
docs/local.md's figures), new data and new noise for every seed, at each number of
users; optionally bundled data sets, each at its own size.  Every row is one user.

Methods, on the same data per (users, seed):

* ``local``: the private greedy in the local model, each report epsilon-LDP;
* ``shuffle``: the same round at the largest epsilon_0 whose shuffled reports are
  (epsilon, delta)-DP centrally (the epsilon_0 used is recorded);
* ``central greedy`` and the default central algorithm at the same central
  (epsilon, delta), the number of users public as in the local models;
* ``naive local``: each user clips its point to the box and adds Laplace noise to
  every coordinate (epsilon split evenly over the d coordinates, sensitivity the box's
  width, so scale d (hi - lo) / epsilon); the server runs k-means++ on the noisy
  points and clips the centers to the box;
* ``kmeans++`` (scikit-learn, one start): the non-private floor;
* ``one-center``: the mean of all points, the cost the NICV ratios are normalised by.

Each run's NICV is divided by k-means++'s and by the one-center NICV of the same data
and seed; the report gives the median (and range) of these ratios over seeds.

The deployed protocol (``privclust.local.Protocol``, ``Randomizer``, ``Aggregator``) is
measured apart, in this process: the bytes of one device's report and per report in a
batch, and the seconds to tally and release ``protocol_users`` reports.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable

import numpy as np

from .. import datasets, metrics
from ..estimator import KMeans
from ..local.protocol import HEADER_BYTES
from .speed import synthetic_blobs
from .stats import median_range
from .utility import FLOOR, ONE_CENTER, map_jobs

__all__ = [
    "BLOBS",
    "LocalJob",
    "plan",
    "run_job",
    "run",
    "naive_local",
    "measure_protocol",
    "summarise",
    "targets",
    "write_report",
]

BLOBS = "blobs"  # 8 Gaussian clusters in 2-d, std 0.05
BLOBS_K, BLOBS_D, BLOBS_SPREAD = 8, 2, 0.05
DEFAULT_USERS = (10_000, 30_000, 100_000, 200_000)
DEFAULT_LOCAL_EPSILONS = (1.0, 2.0, 4.0)
DEFAULT_CENTRAL_EPSILONS = (1.0,)
DEFAULT_DELTA = 1e-6

LOCAL, SHUFFLE, NAIVE = "local", "shuffle", "naive local"
GREEDY = "central greedy"
CENTRAL_DEFAULT = f"central {KMeans().algorithm}"
KPP = FLOOR
ORDER = (KPP, ONE_CENTER, GREEDY, CENTRAL_DEFAULT, SHUFFLE, LOCAL, NAIVE)  # of the report's rows
LOCAL_METHODS = (LOCAL, NAIVE)  # epsilon is each user's local guarantee
CENTRAL_METHODS = (SHUFFLE, GREEDY, CENTRAL_DEFAULT)  # (epsilon, delta) is the central guarantee


@dataclass(frozen=True)
class LocalJob:
    dataset: str
    users: int
    seed: int
    method: str
    epsilon: float | None = None  # None: non-private
    delta: float | None = None


def plan(names, users, seeds, local_epsilons, central_epsilons, delta: float = DEFAULT_DELTA) -> list[LocalJob]:
    """Every (data set, users, seed, method, epsilon); a bundled data set runs at its own size only."""
    jobs = []
    for name in names:
        for n in users if name == BLOBS else [len(datasets.load(name).X)]:
            for seed in seeds:
                jobs += [LocalJob(name, n, seed, KPP), LocalJob(name, n, seed, ONE_CENTER)]
                jobs += [LocalJob(name, n, seed, m, float(e)) for e in local_epsilons for m in LOCAL_METHODS]
                jobs += [LocalJob(name, n, seed, m, float(e), delta) for e in central_epsilons for m in CENTRAL_METHODS]
    return jobs


@lru_cache(maxsize=2)
def load_data(name: str, users: int, seed: int) -> tuple[np.ndarray, int, tuple[float, float]]:
    """(rows, k, bounds): the blobs of ``seed`` at ``users`` rows, or a bundled data set."""
    if name == BLOBS:
        return synthetic_blobs(users, BLOBS_D, BLOBS_K, seed=seed, spread=BLOBS_SPREAD), BLOBS_K, (-1.0, 1.0)
    ds = datasets.load(name)
    return ds.X, ds.k, ds.bounds


def _kmeans_pp(X: np.ndarray, k: int, seed: int) -> np.ndarray:
    from sklearn.cluster import KMeans as SkKMeans

    return SkKMeans(k, n_init=1, random_state=seed).fit(X).cluster_centers_


def naive_local(X: np.ndarray, k: int, bounds, epsilon: float, seed: int) -> np.ndarray:
    """Each user's clipped point plus Laplace noise (epsilon-LDP); k-means++ on the noisy points, clipped."""
    lo, hi = bounds
    rng = np.random.default_rng([seed, len(X)])
    scale = X.shape[1] * (hi - lo) / epsilon  # L1 sensitivity of a point in the box, over epsilon
    noisy = np.clip(X, lo, hi) + rng.laplace(0.0, scale, X.shape)
    return np.clip(_kmeans_pp(noisy, k, seed), lo, hi)


def _private_fit(job: LocalJob, X: np.ndarray, k: int, bounds) -> tuple[np.ndarray, dict]:
    model, algorithm = {
        LOCAL: ("local", "greedy"),
        SHUFFLE: ("shuffle", "greedy"),
        GREEDY: ("central", "greedy"),
        CENTRAL_DEFAULT: ("central", KMeans().algorithm),
    }[job.method]
    fitted = KMeans(
        k,
        epsilon=job.epsilon,
        delta=job.delta if job.delta is not None else DEFAULT_DELTA,
        bounds=bounds,
        algorithm=algorithm,
        privacy_model=model,
        random_state=job.seed,
        public_n=len(X) if model == "central" else None,  # public in the local models too
    ).fit(X)
    spent = fitted.privacy_spent_
    info = {"privacy_spent": {"epsilon": spent.epsilon, "delta": spent.delta}}
    if "local_epsilon" in fitted.fit_info_:
        info["local_epsilon"] = float(fitted.fit_info_["local_epsilon"])
    return fitted.cluster_centers_, info


def run_job(job: LocalJob) -> dict:
    X, k, bounds = load_data(job.dataset, job.users, job.seed)
    start = time.perf_counter()
    info: dict = {}
    if job.method == KPP:
        centers = _kmeans_pp(X, k, job.seed)
    elif job.method == ONE_CENTER:
        centers = X.mean(axis=0, keepdims=True)
    elif job.method == NAIVE:
        centers = naive_local(X, k, bounds, job.epsilon, job.seed)
        info["privacy_spent"] = {"epsilon": job.epsilon, "delta": 0.0}
    else:
        centers, info = _private_fit(job, X, k, bounds)
    seconds = time.perf_counter() - start
    return {**asdict(job), "k": k, "nicv": metrics.nicv(X, centers), "seconds": seconds, **info}


def run(jobs: list[LocalJob], workers: int | None = None, on_done: Callable[[dict], None] | None = None) -> list[dict]:
    rows: list[dict] = []

    def done(row: dict) -> None:
        rows.append(row)
        if on_done:
            on_done(row)

    map_jobs(run_job, jobs, workers, done)
    return rows


def measure_protocol(users: int, local_epsilon: float, central: tuple[float, float], seed: int = 0) -> list[dict]:
    """Bytes and aggregation seconds of the deployed protocol, local and shuffle, for ``users`` reports."""
    from ..local import Aggregator, Protocol, Randomizer, ShufflerKey
    from ..shuffle import Shuffler

    X = synthetic_blobs(users, BLOBS_D, BLOBS_K, seed=seed, spread=BLOBS_SPREAD)
    one_center = metrics.nicv(X, X.mean(axis=0, keepdims=True))
    public = {"n_clusters": BLOBS_K, "n_features": BLOBS_D, "bounds": [-1.0, 1.0], "users": users, "seed": seed}
    key = ShufflerKey.generate()
    protocols = {
        LOCAL: Protocol(epsilon=local_epsilon, **public),
        SHUFFLE: Protocol.for_shuffle(*central, shuffler_key=key.public_hex, **public),
    }
    rows = []
    for model, protocol in protocols.items():
        randomizer = Randomizer(protocol, np.random.default_rng(seed))
        start = time.perf_counter()
        batch = randomizer.reports(X)
        randomize = time.perf_counter() - start
        per_report = (len(batch) - HEADER_BYTES) / users  # what the devices send (the shuffler's signature aside)
        if protocol.shuffle is not None:  # its server takes the shuffler's output
            batch = Shuffler().shuffle_batch(protocol, batch, key)
        aggregator = Aggregator(protocol)
        start = time.perf_counter()
        aggregator.add(batch)
        tally = time.perf_counter() - start
        start = time.perf_counter()
        result = aggregator.release()
        release = time.perf_counter() - start
        rows.append(
            {
                "model": model,
                "users": users,
                "local_epsilon": protocol.epsilon,
                "central": list(protocol.shuffle) if protocol.shuffle else None,
                "bytes_per_device": len(randomizer.report(X[0])),
                "bytes_per_report_in_batch": per_report,
                "randomize_seconds": randomize,
                "tally_seconds": tally,
                "release_seconds": release,
                "aggregate_seconds": tally + release,
                "tally_seconds_per_million": tally * 1e6 / users,
                "nicv_over_one_center": metrics.nicv(X, result.centers) / one_center,
            }
        )
    return rows


def label(method: str, epsilon: float | None, delta: float | None) -> str:
    if epsilon is None:
        return method
    if delta is None:
        return f"{method} eps={epsilon:g}"
    return f"{method} ({epsilon:g}, {delta:g})"


def summarise(rows: list[dict]) -> list[dict]:
    """Per (data set, users, method, epsilon): median [min, max] over seeds of NICV and its two ratios."""
    reference = {
        (r["dataset"], r["users"], r["seed"], r["method"]): r["nicv"] for r in rows if r["method"] in (KPP, ONE_CENTER)
    }
    names = list(dict.fromkeys(r["dataset"] for r in rows))
    groups: dict[tuple, list[dict]] = {}
    for r in sorted(
        rows,
        key=lambda r: (names.index(r["dataset"]), ORDER.index(r["method"]), r["epsilon"] or 0, r["users"], r["seed"]),
    ):
        groups.setdefault((r["dataset"], r["users"], r["method"], r["epsilon"], r["delta"]), []).append(r)

    def ratios(runs: list[dict], floor: str) -> tuple[float, float, float]:
        bases = [reference.get((r["dataset"], r["users"], r["seed"], floor), math.nan) for r in runs]
        return median_range([r["nicv"] / b if b > 0 else math.nan for r, b in zip(runs, bases)])

    out = []
    for (name, users, method, epsilon, delta), runs in groups.items():
        local_epsilons = [r["local_epsilon"] for r in runs if r.get("local_epsilon") is not None]
        out.append(
            {
                "dataset": name,
                "users": users,
                "method": method,
                "epsilon": epsilon,
                "delta": delta,
                "label": label(method, epsilon, delta),
                "seeds": len(runs),
                "nicv": median_range([r["nicv"] for r in runs]),
                "vs_kmeans++": ratios(runs, KPP),
                "vs_one_center": ratios(runs, ONE_CENTER),
                "local_epsilon": float(np.median(local_epsilons)) if local_epsilons else None,
            }
        )
    return out


TARGET_USERS = 200_000


def targets(summary: list[dict], protocol: list[dict]) -> list[dict]:
    """Issue 14's targets, each with the figure measured here (None when this run did not measure it)."""

    def find(method, epsilon, delta):
        return next(
            (
                s
                for s in summary
                if (s["dataset"], s["users"], s["method"], s["epsilon"], s["delta"])
                == (BLOBS, TARGET_USERS, method, epsilon, delta)
            ),
            None,
        )

    def check(name, entry, key, limit, above=False):
        if entry is None:
            return {"target": name, "measured": None, "limit": limit, "met": None}
        median, low, high = entry[key]
        return {
            "target": name,
            "measured": median,
            "range": [low, high],
            "limit": limit,
            "met": bool(median > limit if above else median <= limit),
        }

    where = f"{TARGET_USERS:,} users, 8 blobs in 2-d"
    out = [
        check(f"local eps=2, {where}: NICV / one-center <= 0.1", find(LOCAL, 2.0, None), "vs_one_center", 0.1),
        check(f"shuffle (1, 1e-6), {where}: NICV / k-means++ <= 2", find(SHUFFLE, 1.0, 1e-6), "vs_kmeans++", 2.0),
        check(
            f"naive local eps=2, {where}: worse than one center (NICV / one-center > 1)",
            find(NAIVE, 2.0, None),
            "vs_one_center",
            1.0,
            above=True,
        ),
    ]
    for p in protocol:  # the release's cost does not scale with the reports: measured at 1e6 or more only
        seconds = p["aggregate_seconds"] if p["users"] >= 1_000_000 else None
        out.append(
            {
                "target": f"{p['model']} protocol: aggregation (tally + release) of 1e6 reports < 10 s",
                "measured": seconds,
                "limit": 10.0,
                "met": None if seconds is None else bool(seconds < 10.0),
            }
        )
    return out


def _cell(triple, digits=3) -> str:
    median, low, high = triple
    if not math.isfinite(median):
        return "-"
    return f"{median:.{digits}g} [{low:.{digits}g}, {high:.{digits}g}]"


def write_report(rows: list[dict], protocol: list[dict], setup: dict, out_dir: Path, machine: str) -> Path:
    from ..plotting import plot_curves

    out_dir.mkdir(parents=True, exist_ok=True)
    summary = summarise(rows)
    checks = targets(summary, protocol)
    (out_dir / "local.json").write_text(
        json.dumps(
            {"setup": setup, "runs": rows, "summary": summary, "protocol": protocol, "targets": checks}, indent=1
        )
    )
    lines = [
        f"# Local and shuffle models ({machine})",
        "",
        f"{len(rows)} runs, {setup['seeds']} seeds; cells are the median over seeds [min, max]. "
        "Local epsilons are each user's guarantee; the shuffle model and the central algorithms run at the "
        "central (epsilon, delta) given. NICV = k-means cost / users on the original data.",
        "",
        "## Targets (issue 14)",
        "",
        "| target | measured | met |",
        "|---|---|---|",
    ]
    for c in checks:
        measured = "not measured" if c["measured"] is None else f"{c['measured']:.3g}"
        if c.get("range"):
            measured += f" [{c['range'][0]:.3g}, {c['range'][1]:.3g}]"
        met = "-" if c["met"] is None else ("yes" if c["met"] else "**no**")
        lines.append(f"| {c['target']} | {measured} | {met} |")
    for name in dict.fromkeys(s["dataset"] for s in summary):
        part = [s for s in summary if s["dataset"] == name]
        sizes = sorted({s["users"] for s in part})
        labels = list(dict.fromkeys(s["label"] for s in part))
        by = {(s["label"], s["users"]): s for s in part}
        for key, title in (
            ("vs_one_center", "NICV / one-center"),
            ("vs_kmeans++", "NICV / k-means++"),
            ("nicv", "NICV"),
        ):
            lines += ["", f"## {name}: {title}", "", "| method | " + " | ".join(f"{n:,} users" for n in sizes) + " |"]
            lines.append("|---|" + "---|" * len(sizes))
            for lab in labels:
                cells = [_cell(by[(lab, n)][key]) if (lab, n) in by else "-" for n in sizes]
                lines.append(f"| {lab} | " + " | ".join(cells) + " |")
        local_epsilons = {s["users"]: s["local_epsilon"] for s in part if s["method"] == SHUFFLE}
        if local_epsilons:
            lines += [
                "",
                "Shuffle epsilon_0 used: " + ", ".join(f"{e:.2f} at {n:,} users" for n, e in local_epsilons.items()),
            ]
        curves = {}
        for lab in labels:
            measured = [n for n in sizes if (lab, n) in by]
            median, low, high = zip(*(by[(lab, n)]["nicv"] for n in measured))
            curves[lab] = (measured, list(median), list(low), list(high))
        png = out_dir / f"local_nicv_{name}.png"
        plot_curves(png, curves, f"{name}: NICV vs users", "users", "NICV", logx=True, logy=True)
        lines += ["", f"![NICV vs users]({png.name})"]
    if protocol:
        lines += [
            "",
            "## The deployed protocol (Randomizer -> Aggregator)",
            "",
            "| model | users | epsilon_0 | central | bytes / device report | bytes / report in a batch "
            "| randomize (s) | tally (s) | release (s) | aggregate (s) | tally (s) per 1e6 reports | NICV / one-center |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for p in protocol:
            central = f"({p['central'][0]:g}, {p['central'][1]:g})" if p["central"] else "-"
            lines.append(
                f"| {p['model']} | {p['users']:,} | {p['local_epsilon']:.2f} | {central} | {p['bytes_per_device']} "
                f"| {p['bytes_per_report_in_batch']:.1f} | {p['randomize_seconds']:.2f} | {p['tally_seconds']:.2f} "
                f"| {p['release_seconds']:.2f} | {p['aggregate_seconds']:.2f} | {p['tally_seconds_per_million']:.2f} "
                f"| {p['nicv_over_one_center']:.3g} |"
            )
    report = out_dir / "local.md"
    report.write_text("\n".join(lines) + "\n")
    return report

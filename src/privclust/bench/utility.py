"""``privclust bench utility``: NICV versus epsilon on the seed papers' data sets.

Protocol (Diaa, Humphries & Kerschbaum 2024, Sec. 6): data scaled to [-1, 1]^d, the paper's k,
delta = 1/(n ln n), runs over seeds, mean with 95% CI, and the trapezoid AUC
over epsilon.  Benchmark data sets are public, so their row count is passed
as ``public_n`` (as the paper's implementation does); ``--private-n`` makes
every run spend budget on a noisy count instead.  Runs use seeded noise so
results are reproducible from the seed list.
"""

from __future__ import annotations

import json
import math
import os
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable

import numpy as np

from .. import datasets, metrics
from .._parallel import use_single_thread
from ..algorithms import ALGORITHMS
from ..algorithms.base import BASELINE
from ..algorithms.lloyd import AUTO_FASTLLOYD
from ..estimator import KMeans
from . import peers, synthetic
from .stats import mean_ci

__all__ = [
    "UtilityJob",
    "UtilityRun",
    "plan_jobs",
    "run_job",
    "run_utility",
    "summarise",
    "excess_ratios",
    "write_utility_report",
    "split_datasets",
    "load_data",
    "NON_PRIVATE_METHODS",
    "map_jobs",
    "VARIANTS",
]

FLOOR = "kmeans++"  # scikit-learn KMeans: the non-private floor
ONE_CENTER = "one-center"  # every row's cost to the mean: what a clustering must beat to say anything
NON_PRIVATE_METHODS = (FLOOR, ONE_CENTER, BASELINE)
DEFAULT_EPSILONS = (0.1, 0.25, 0.5, 0.75, 1.0)
# Methods that are an algorithm with non-default parameters: name -> (algorithm, algorithm_params)
VARIANTS = {
    "fastlloyd-greedy-start": ("fastlloyd", {"init": "greedy"}),
    "fastlloyd-mean-start": ("fastlloyd", {"init": "mean"}),
    "fastlloyd-auto": ("fastlloyd", AUTO_FASTLLOYD),  # FastLloyd as auto runs it (dead centers, shrinkage)
    # ... with the paper's steps instead (rows beyond the radius dropped, its two radii, Su et al.'s rounds), and
    # from the compact start about the box's center instead of the mean start: what each part of it brings
    "fastlloyd-auto-paper-steps": (
        "fastlloyd",
        {**AUTO_FASTLLOYD, "far_rows": "drop", "radii": "paper", "rounds": "su"},
    ),
    "fastlloyd-auto-compact": ("fastlloyd", {**AUTO_FASTLLOYD, "init": "compact"}),
    # auto's choice (its algorithm_params["choice"]): the public rule; a private selection where the rule cannot
    # tell and the comparison is precise; or wherever the rule cannot tell
    "auto-rule": ("auto", {"choice": "rule"}),
    "auto-precise-choice": ("auto", {"choice": "precise"}),
    "auto-private-choice": ("auto", {"choice": "private"}),
}
# Issue 17's target: the default's AUC excess over FLOOR_SHARE x the floor's AUC, against the best peer's.
# privclust's fastlloyd stands in for FastLloyd's paper code (it matches it within a few percent).
DEFAULT_METHOD = "auto"
FLOOR_SHARE = 0.9
TARGET_RATIO = 0.5
RIVALS = ("fastlloyd", *peers.PEERS)


@dataclass(frozen=True)
class UtilityJob:
    dataset: str
    method: str
    epsilon: float | None  # None for non-private methods: run once per seed
    seed: int
    private_n: bool = False


def plan_jobs(names, methods, epsilons, seeds, private_n=False) -> list[UtilityJob]:
    jobs = []
    for name in names:
        for method in methods:
            for seed in seeds:
                if method in NON_PRIVATE_METHODS:
                    jobs.append(UtilityJob(name, method, None, seed, private_n))
                else:
                    jobs.extend(UtilityJob(name, method, float(e), seed, private_n) for e in epsilons)
    return jobs


def split_datasets(text: str) -> list[str]:
    """Comma-separated data set names, where a spec string's own commas stay inside it: a part of the form
    ``key=value`` (no ``:``) continues the spec before it (``iris,g2:d=8,seed=1`` -> iris, g2:d=8,seed=1)."""
    names: list[str] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        if "=" in part and ":" not in part and names and ":" in names[-1]:
            names[-1] += "," + part
        else:
            names.append(part)
    return names


@lru_cache(maxsize=None)
def load_data(name: str):
    """A bundled data set by name, or a synthetic one by spec string (``bench.synthetic``)."""
    if ":" in name:
        return synthetic.from_spec(name)
    return datasets.load(name)


@lru_cache(maxsize=None)
def floor_centers(name: str) -> np.ndarray:
    """The non-private reference on a data set: scikit-learn's k-means++ with 10 starts (seed 0), fitted once
    per process -- the centers ``centroid_mse`` compares with, and the floor of :func:`floor_nicv`."""
    from sklearn.cluster import KMeans as SkKMeans

    ds = load_data(name)
    return SkKMeans(ds.k, n_init=10, random_state=0).fit(ds.X).cluster_centers_


def floor_nicv(name: str) -> float:
    """The non-private floor's NICV on a data set (:func:`floor_centers`): what ``bench userlevel`` draws
    beside its fits."""
    return metrics.nicv(load_data(name).X, floor_centers(name))


def bench_delta(n: int) -> float:
    """The benchmarks' delta for n rows: 1 / (n ln n), below 1/n."""
    return 1.0 / (n * math.log(n))


def evaluate(job: UtilityJob, centers: np.ndarray, n_iter: int, seconds: float, spent: dict | None) -> dict:
    ds = load_data(job.dataset)
    return {
        **asdict(job),
        "nicv": metrics.nicv(ds.X, centers),
        "silhouette": metrics.silhouette(ds.X, centers, sample_size=1000, random_state=job.seed),
        "davies_bouldin": metrics.davies_bouldin(ds.X, centers),
        "centroid_mse": metrics.centroid_mse(centers, floor_centers(job.dataset)),
        "iterations": n_iter,
        "seconds": seconds,
        "privacy_spent": spent,
    }


def run_job(job: UtilityJob) -> dict:
    ds = load_data(job.dataset)
    n = len(ds.X)
    start = time.perf_counter()
    if job.method == FLOOR:
        from sklearn.cluster import KMeans as SkKMeans

        model = SkKMeans(ds.k, n_init=1, random_state=job.seed).fit(ds.X)
        centers, n_iter, spent = model.cluster_centers_, int(model.n_iter_), None
    elif job.method == ONE_CENTER:
        centers, n_iter, spent = np.repeat(ds.X.mean(axis=0, keepdims=True), ds.k, axis=0), 0, None  # k copies
    else:
        algorithm, params = VARIANTS.get(job.method, (job.method, None))
        model = KMeans(
            ds.k,
            epsilon=job.epsilon if job.epsilon is not None else 1.0,
            delta=bench_delta(n),
            bounds=ds.bounds,
            algorithm=algorithm,
            algorithm_params=params,
            random_state=job.seed,
            public_n=None if job.private_n else n,
        ).fit(ds.X)
        centers, n_iter = model.cluster_centers_, model.n_iter_
        spent = (
            None
            if job.method in NON_PRIVATE_METHODS
            else {
                "epsilon": model.privacy_spent_.epsilon,
                "delta": model.privacy_spent_.delta,
            }
        )
    return evaluate(job, centers, n_iter, time.perf_counter() - start, spent)


def run_peer_jobs(jobs: list[UtilityJob]) -> list[dict]:
    """Jobs of one peer on one data set, in one call to the peer's own interpreter."""
    ds = load_data(jobs[0].dataset)
    lo, hi = ds.bounds
    delta = bench_delta(len(ds.X)) if peers.PEERS[jobs[0].method].takes_delta else 0.0  # privclust's runs get the same
    specs = [{"k": ds.k, "epsilon": j.epsilon, "delta": delta, "seed": j.seed, "lower": lo, "upper": hi} for j in jobs]
    results = peers.run_batch(jobs[0].method, ds.X, specs)
    return [
        evaluate(
            j,
            np.asarray(r["centers"]),
            r["iterations"],
            r["seconds"],
            {"epsilon": j.epsilon, "delta": delta, "claimed": True},
        )
        for j, r in zip(jobs, results)
    ]


def map_jobs(run: Callable, jobs: list, workers: int | None, on_done: Callable[[dict], None]) -> None:
    """``on_done(run(job))`` for every job, on ``workers`` processes (one BLAS thread each), in any order."""
    workers = workers or os.cpu_count() or 1
    if workers == 1:
        for job in jobs:
            on_done(run(job))
        return
    with ProcessPoolExecutor(max_workers=workers, initializer=use_single_thread) as pool:
        for future in as_completed([pool.submit(run, job) for job in jobs]):
            on_done(future.result())


@dataclass
class UtilityRun:
    rows: list[dict]
    missing: dict[str, str]  # peer -> why it did not run


def run_utility(
    jobs: list[UtilityJob], workers: int | None = None, on_done: Callable[[dict], None] | None = None
) -> UtilityRun:
    """Run every job: privclust's in parallel over the cores, each peer in its own environment."""
    rows: list[dict] = []

    def done(row: dict) -> None:
        rows.append(row)
        if on_done:
            on_done(row)

    map_jobs(run_job, [j for j in jobs if j.method not in peers.PEERS], workers, done)
    missing: dict[str, str] = {}
    batches: dict[tuple[str, str], list[UtilityJob]] = {}
    for job in jobs:
        if job.method in peers.PEERS:
            batches.setdefault((job.method, job.dataset), []).append(job)
    for (peer, _), batch in batches.items():
        if peer in missing:
            continue
        try:
            for row in run_peer_jobs(batch):
                done(row)
        except peers.PeerMissing as exc:
            missing[peer] = str(exc)
    return UtilityRun(rows, missing)


def _expand_non_private(rows: list[dict], epsilons) -> list[dict]:
    """A non-private run does not depend on epsilon: place it at every epsilon."""
    out = []
    for r in rows:
        if r["epsilon"] is None:
            out.extend({**r, "epsilon": float(e)} for e in epsilons)
        else:
            out.append(r)
    return out


def summarise(rows: list[dict], epsilons) -> dict:
    """{dataset: {method: {"nicv": {eps: (mean, lo, hi)}, "auc": (mean, lo, hi)}}}"""
    rows = _expand_non_private(rows, epsilons)
    eps_sorted = sorted(float(e) for e in epsilons)
    out: dict = {}
    for name in dict.fromkeys(r["dataset"] for r in rows):
        out[name] = {}
        for method in dict.fromkeys(r["method"] for r in rows if r["dataset"] == name):
            sel = [r for r in rows if r["dataset"] == name and r["method"] == method]
            per_eps = {e: mean_ci([r["nicv"] for r in sel if r["epsilon"] == e]) for e in eps_sorted}
            # AUC per seed, then its mean and CI over seeds
            seeds = sorted({r["seed"] for r in sel})
            aucs = []
            for s in seeds:
                by_eps = {r["epsilon"]: r["nicv"] for r in sel if r["seed"] == s}
                if not all(e in by_eps for e in eps_sorted):
                    continue
                if len(eps_sorted) == 1:  # no area under one point: the score is the NICV itself
                    aucs.append(by_eps[eps_sorted[0]])
                else:
                    aucs.append(metrics.auc_over_epsilon(eps_sorted, [by_eps[e] for e in eps_sorted]))
            out[name][method] = {"nicv": per_eps, "auc": mean_ci(aucs)}
    return out


def excess_ratios(summary: dict, method: str = DEFAULT_METHOD, rivals=RIVALS) -> dict:
    """Per data set: ``method``'s AUC excess over FLOOR_SHARE x the floor's AUC, divided by the best rival's.

    {dataset: {"floor", "excess", "best", "best_excess", "ratio"}}, for the sets that have ``method``, the
    floor and at least one rival; ``ratio`` is inf when no rival is above the floor."""
    out = {}
    for name, methods in summary.items():
        present = [r for r in rivals if r in methods]
        if method not in methods or FLOOR not in methods or not present:
            continue
        floor = FLOOR_SHARE * methods[FLOOR]["auc"][0]
        best = min(present, key=lambda r: methods[r]["auc"][0])
        excess, best_excess = methods[method]["auc"][0] - floor, methods[best]["auc"][0] - floor
        ratio = excess / best_excess if best_excess > 0 else math.inf
        out[name] = {"floor": floor, "excess": excess, "best": best, "best_excess": best_excess, "ratio": ratio}
    return out


def _excess_section(summary: dict) -> list[str]:
    ratios = excess_ratios(summary)
    if not ratios:
        return []
    rivals = [r for r in RIVALS if any(r in summary[name] for name in ratios)]
    met = sum(r["ratio"] <= TARGET_RATIO for r in ratios.values())
    lines = [
        f"## The default against the peers: excess AUC over {FLOOR_SHARE:g} x {FLOOR}",
        "",
        f"ratio = ({DEFAULT_METHOD} AUC - floor) / (best peer's AUC - floor), floor = {FLOOR_SHARE:g} x the "
        f"{FLOOR} AUC; peers: {', '.join(rivals)} (fastlloyd is privclust's, standing in for FastLloyd's paper "
        f"code). **Ratio <= {TARGET_RATIO:g} on {met} of {len(ratios)} sets.**",
        "",
        f"| data set | {DEFAULT_METHOD} | " + " | ".join(rivals) + f" | {FLOOR} | floor | best peer | ratio | met |",
        "|" + "---|" * (len(rivals) + 7),
    ]
    for name, r in ratios.items():
        methods = summary[name]
        cells = [f"{methods[m]['auc'][0]:.4f}" if m in methods else "-" for m in (DEFAULT_METHOD, *rivals, FLOOR)]
        lines.append(
            f"| {name} | "
            + " | ".join(cells)
            + f" | {r['floor']:.4f} | {r['best']} | {r['ratio']:.3f} | {'yes' if r['ratio'] <= TARGET_RATIO else 'no'} |"
        )
    return lines + [""]


def write_utility_report(
    rows: list[dict], epsilons, out_dir: Path, title: str = "Utility benchmark", missing: dict | None = None
) -> Path:
    from ..plotting import plot_curves, plot_panels

    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / "utility.jsonl", "w") as fh:
        for r in rows:
            fh.write(json.dumps(r, default=float) + "\n")
    summary = summarise(rows, epsilons)
    eps_sorted = sorted(float(e) for e in epsilons)
    lines = [f"# {title}", ""]
    n_seeds = len({r["seed"] for r in rows})
    lines.append(
        f"{len(rows)} runs, {n_seeds} seeds; cells are mean NICV with 95% CI half-width; "
        "AUC is the trapezoid area under NICV over epsilon; 'vs best other' is this method's AUC "
        "divided by the best AUC among the other private methods, peers included (below 1: better)."
    )
    for peer, why in (missing or {}).items():
        lines += ["", f"**Peer missing: {peer}** — {why}. Its rows are absent from every table below."]
    for peer in {r["method"] for r in rows} & set(peers.PEERS):
        lines += ["", f"Peer {peer}: {peers.PEERS[peer].note}"]
    lines += ["", "![NICV vs epsilon](nicv_all.png)", ""]
    lines += _excess_section(summary)
    panels = {}
    for name, methods in summary.items():
        lines.append(f"## {name}")
        lines.append("")
        score = "AUC" if len(eps_sorted) > 1 else "NICV"
        header = "| method | " + " | ".join(f"eps={e:g}" for e in eps_sorted) + f" | {score} | vs best other |"
        lines += [header, "|" + "---|" * (len(eps_sorted) + 3)]
        private = [m for m in methods if m not in NON_PRIVATE_METHODS]
        for method, res in methods.items():
            cells = [f"{m:.4f} ± {(hi - m):.4f}" for (m, lo, hi) in (res["nicv"][e] for e in eps_sorted)]
            auc = res["auc"][0]
            others = [methods[o]["auc"][0] for o in private if o != method]
            rel = f"{auc / min(others):.3f}" if method in private and others and min(others) > 0 else "-"
            lines.append(f"| {method} | " + " | ".join(cells) + f" | {auc:.4f} | {rel} |")
        lines.append("")
        curves = {
            method: (
                eps_sorted,
                [res["nicv"][e][0] for e in eps_sorted],
                [res["nicv"][e][1] for e in eps_sorted],
                [res["nicv"][e][2] for e in eps_sorted],
            )
            for method, res in methods.items()
        }
        panels[name] = curves
        plot_curves(out_dir / f"nicv_{name}.png", curves, f"{name}: NICV vs epsilon", "epsilon", "NICV", logy=True)
    plot_panels(out_dir / "nicv_all.png", panels, "epsilon", "NICV", logy=True)
    report = out_dir / "utility.md"
    report.write_text("\n".join(lines))
    with open(out_dir / "utility_summary.json", "w") as fh:
        json.dump(
            {
                n: {m: {"auc": r["auc"], "nicv": {str(e): v for e, v in r["nicv"].items()}} for m, r in ms.items()}
                for n, ms in summary.items()
            },
            fh,
            indent=1,
        )
    ratios = excess_ratios(summary)
    if ratios:
        (out_dir / "excess_ratios.json").write_text(json.dumps(ratios, indent=1))
    return report


SEED_003_METHODS = (BASELINE, "fastlloyd", "glloyd", "sulloyd")  # the FastLloyd paper's comparison


def default_methods() -> list[str]:
    """The utility benchmark's default: the baselines, the default algorithm, the FastLloyd paper's
    methods and the peers (others via --methods)."""
    return [FLOOR, ONE_CENTER, "auto", *SEED_003_METHODS, *peers.PEERS]


def available_methods() -> list[str]:
    return [FLOOR, ONE_CENTER, *ALGORITHMS, *VARIANTS, *peers.PEERS]

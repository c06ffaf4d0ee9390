"""``privclust bench userlevel``: NICV versus epsilon at user level beside the row-level fit (issue 29).

A bundled data set (Adult by default) has no users, so its rows are given to
synthetic users at random: a random permutation cut into users of
``rows_per_user`` rows each (``assignment="exact"``), or every row to a
uniformly random one of n / ``rows_per_user`` users (``"random"``: Poisson
many rows per user, some above the maximum).  Each algorithm then fits at
every epsilon twice per seed: protecting rows, and protecting users with
``max_rows_per_user`` (``KMeans(privacy_unit="user")``).  NICV is measured on
every row (data scaled to [-1, 1]^d), as in ``bench utility``; both fits get
the data set's public row count as ``public_n`` (a public benchmark), and
seeded noise, so the runs are reproducible.  The non-private floor is
``bench utility``'s (``utility.floor_nicv``: scikit-learn's k-means++ with 10
starts).

What to expect: at user level every release is noised for ``m`` rows, so a
user-level fit at epsilon behaves like a row-level fit at about epsilon / m
(for the Gaussian releases in GDP, mu scales by 1 / m); with random
assignment, the rows beyond each user's ``m`` are dropped too.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from .. import datasets, metrics
from ..estimator import KMeans
from .stats import mean_ci
from .utility import bench_delta, floor_nicv

__all__ = ["synthetic_users", "run", "summarise", "write_report", "ASSIGNMENTS"]

ASSIGNMENTS = ("exact", "random")
UNITS = ("row", "user")


def synthetic_users(n: int, rows_per_user: int, assignment: str, seed: int) -> np.ndarray:
    """A user id for each of ``n`` rows (see the module docstring); public: drawn without the data."""
    rng = np.random.default_rng(seed)
    users = max(1, n // rows_per_user)
    if assignment == "exact":
        return rng.permutation(n) % users
    if assignment == "random":
        return rng.integers(0, users, n)
    raise ValueError(f"assignment must be one of {ASSIGNMENTS}, got {assignment!r}")


def run(
    dataset: str,
    algorithms: list[str],
    epsilons: list[float],
    seeds: list[int],
    rows_per_user: int,
    max_rows_per_user: int,
    assignment: str,
    on_done=None,
) -> dict:
    """Every (algorithm, unit, epsilon, seed) fit's NICV, and the non-private floor's."""
    ds = datasets.load(dataset)
    X, n = ds.X, ds.X.shape[0]
    delta = bench_delta(n)
    rows = []
    for seed in seeds:
        ids = synthetic_users(n, rows_per_user, assignment, seed)
        for algorithm in algorithms:
            for epsilon in epsilons:
                for unit in UNITS:
                    options = {"privacy_unit": "user", "max_rows_per_user": max_rows_per_user} if unit == "user" else {}
                    model = KMeans(
                        ds.k,
                        epsilon=epsilon,
                        delta=delta,
                        bounds=(-1, 1),
                        algorithm=algorithm,
                        public_n=n,
                        random_state=seed,
                        **options,
                    )
                    start = time.perf_counter()
                    model.fit(X, **({"user_ids": ids} if unit == "user" else {}))
                    rows.append(
                        {
                            "algorithm": algorithm,
                            "unit": unit,
                            "epsilon": epsilon,
                            "seed": seed,
                            "nicv": metrics.nicv(X, model.cluster_centers_),
                            "seconds": time.perf_counter() - start,
                            "epsilon_spent": model.privacy_spent_.epsilon,
                            "privacy_unit": model.privacy_spent_.privacy_unit,
                        }
                    )
                    if on_done:
                        on_done(rows[-1])
    kept = _kept_share(n, rows_per_user, max_rows_per_user, assignment, seeds)
    setup = {
        "dataset": dataset,
        "n": n,
        "k": ds.k,
        "delta": delta,
        "rows_per_user": rows_per_user,
        "max_rows_per_user": max_rows_per_user,
        "assignment": assignment,
        "kept_share": kept,
        "seeds": list(seeds),
        "epsilons": list(epsilons),
        "algorithms": list(algorithms),
    }
    return {"setup": setup, "runs": rows, "floor": floor_nicv(dataset)}


def _kept_share(n: int, rows_per_user: int, m: int, assignment: str, seeds) -> float:
    """The share of rows the bounding keeps for the synthetic users (a property of the public assignment)."""
    shares = []
    for seed in seeds:
        counts = np.bincount(synthetic_users(n, rows_per_user, assignment, seed))
        shares.append(float(np.minimum(counts, m).sum() / n))
    return float(np.mean(shares))


def summarise(result: dict) -> dict:
    """Per (algorithm, unit): the epsilon grid, mean NICV with 95% CI, and the AUC over epsilon."""
    out = {}
    runs, epsilons = result["runs"], result["setup"]["epsilons"]
    for algorithm in result["setup"]["algorithms"]:
        for unit in UNITS:
            stats = [
                mean_ci(
                    [
                        r["nicv"]
                        for r in runs
                        if r["algorithm"] == algorithm and r["unit"] == unit and r["epsilon"] == eps
                    ]
                )
                for eps in epsilons
            ]
            means = [s[0] for s in stats]
            out[(algorithm, unit)] = {
                "epsilons": epsilons,
                "mean": means,
                "low": [s[1] for s in stats],
                "high": [s[2] for s in stats],
                "auc": metrics.auc_over_epsilon(epsilons, means),
            }
    return out


def write_report(result: dict, out_dir: Path, machine: str) -> Path:
    from ..plotting import plot_curves

    out_dir.mkdir(parents=True, exist_ok=True)
    summary = summarise(result)
    setup = result["setup"]
    floor = float(result["floor"])
    (out_dir / "userlevel.json").write_text(
        json.dumps(
            {
                **result,
                "summary": [{"algorithm": a, "unit": u, **s} for (a, u), s in summary.items()],
                "floor_nicv": floor,
            },
            indent=1,
        )
    )
    unit_name = {"row": "row level", "user": f"user level (m = {setup['max_rows_per_user']})"}
    lines = [
        f"# User-level privacy on {setup['dataset']} ({machine})",
        "",
        f"n = {setup['n']:,}, k = {setup['k']}, delta = {setup['delta']:.3g}, {len(setup['seeds'])} seeds; "
        f"synthetic users of {setup['rows_per_user']} rows ({setup['assignment']} assignment), "
        f"max_rows_per_user = {setup['max_rows_per_user']}: the bounding keeps {setup['kept_share']:.1%} of the rows. "
        f"NICV on all rows (mean, 95% CI); non-private k-means++ floor {floor:.4f}.",
        "",
        "| algorithm | unit | " + " | ".join(f"eps {e:g}" for e in setup["epsilons"]) + " | AUC |",
        "|---|---|" + "---|" * len(setup["epsilons"]) + "---|",
    ]
    for (algorithm, unit), s in summary.items():
        cells = [f"{m:.4f} [{lo:.4f}, {hi:.4f}]" for m, lo, hi in zip(s["mean"], s["low"], s["high"])]
        lines.append(f"| {algorithm} | {unit_name[unit]} | " + " | ".join(cells) + f" | {s['auc']:.4f} |")
    png = out_dir / "userlevel.png"
    curves = {
        f"{algorithm}, {unit_name[unit]}": (s["epsilons"], s["mean"], s["low"], s["high"])
        for (algorithm, unit), s in summary.items()
    }
    eps = setup["epsilons"]
    curves["k-means++ (non-private)"] = (eps, [floor] * len(eps), [floor] * len(eps), [floor] * len(eps))
    plot_curves(png, curves, f"{setup['dataset']}: row vs user level", "epsilon", "NICV", logy=True)
    lines += ["", f"![NICV vs epsilon]({png.name})"]
    report = out_dir / "userlevel.md"
    report.write_text("\n".join(lines) + "\n")
    return report

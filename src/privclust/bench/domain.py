"""``privclust bench domain``: what declared, loose and privately found bounds cost the default fit (issue 27).

For each bundled data set (scaled to [-1, 1]^d) the default ``KMeans`` runs at
epsilon = 1 with public n over several seeds, with (a) the tight box (-1, 1),
(b) the 10x looser box (-10, 10) declared, (c) no bounds -- the private box of
``geometry.private_box`` -- and (d) (-10, 10) as an outer limit the private box
tightens.  The report gives the mean NICV of each and its ratio to (a).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from .. import datasets
from ..estimator import KMeans
from ..privacy.leaks import PrivacyLeakWarning

__all__ = ["SETTINGS", "run", "write_report"]

SETTINGS = {
    "tight (-1, 1)": (-1.0, 1.0),
    "declared (-10, 10)": (-10.0, 10.0),
    "private (no bounds)": None,
    "outer (-10, 10), tightened": {"outer": (-10.0, 10.0)},
}


def run(names: list[str], seeds: int, epsilon: float, on_done=None) -> list[dict]:
    import warnings

    rows = []
    for name in names:
        ds = datasets.load(name)
        n = len(ds.X)
        for setting, bounds in SETTINGS.items():
            for seed in range(seeds):
                start = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", PrivacyLeakWarning)  # seeded: an experiment
                    model = KMeans(ds.k, epsilon=epsilon, bounds=bounds, public_n=n, random_state=seed).fit(ds.X)
                domain = model.fit_info_.get("domain")
                rows.append(
                    {
                        "dataset": name,
                        "setting": setting,
                        "seed": seed,
                        "nicv": float(model.inertia_) / n,
                        "epsilon_spent": model.privacy_spent_.epsilon,
                        "box_width": None
                        if domain is None
                        else float(np.mean(np.subtract(domain["upper"], domain["lower"]))),
                        "rows_clipped": int(model.n_rows_clipped_),
                        "seconds": time.perf_counter() - start,
                    }
                )
                if on_done:
                    on_done(rows[-1])
    return rows


def write_report(rows: list[dict], out_dir: Path, machine: str, command: str) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "domain.json").write_text(json.dumps(rows, indent=1))
    names = list(dict.fromkeys(r["dataset"] for r in rows))
    seeds = len({r["seed"] for r in rows})
    lines = [
        f"# Declared, loose and private bounds ({machine})",
        "",
        f"`{command}`: default KMeans, epsilon = {rows[0]['epsilon_spent']:.3g} per fit, public n, mean of "
        f"{seeds} seeds; NICV (ratio to the tight box). The private box spends 10% of the budget; "
        "'box width' is its mean per-feature width (the data's is 2), 'clipped' the mean share of rows outside it.",
        "",
        "| data set | " + " | ".join(SETTINGS) + " | box width (private) | clipped (private) |",
        "|---" * (len(SETTINGS) + 3) + "|",
    ]
    for name in names:
        mine = [r for r in rows if r["dataset"] == name]
        means = {s: float(np.mean([r["nicv"] for r in mine if r["setting"] == s])) for s in SETTINGS}
        tight = means["tight (-1, 1)"]
        cells = [f"{means[s]:.4g} ({means[s] / tight:.2f}x)" for s in SETTINGS]
        private = [r for r in mine if r["setting"] == "private (no bounds)"]
        n = len(datasets.load(name).X)
        width = np.mean([r["box_width"] for r in private])
        clipped = np.mean([r["rows_clipped"] for r in private]) / n
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {width:.3g} | {clipped:.2%} |")
    path = out_dir / "domain.md"
    path.write_text("\n".join(lines) + "\n")
    return path

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
from ..geometry.private_box import NoScaleFound
from ..privacy.leaks import PrivacyLeakWarning

__all__ = ["SETTINGS", "run", "write_report"]

SETTINGS = {  # for the data in [-1, 1]^d; scaled with them (run's ``scale``)
    "tight (-1, 1)": (-1.0, 1.0),
    "declared (-10, 10)": (-10.0, 10.0),
    "private (no bounds)": None,
    "outer (-10, 10), tightened": {"outer": (-10.0, 10.0)},
}


def _scaled(bounds, scale: float):
    if bounds is None:
        return None
    if isinstance(bounds, dict):
        return {"outer": _scaled(bounds["outer"], scale)}
    return (bounds[0] * scale, bounds[1] * scale)


def run(names: list[str], seeds: int, epsilon: float, on_done=None, scale: float = 1.0) -> list[dict]:
    """``scale`` multiplies the data and every declared box (the data then fill [-scale, scale]^d)."""
    import warnings

    rows = []
    for name in names:
        ds = datasets.load(name)
        X, n = ds.X * scale, len(ds.X)
        for setting, bounds in SETTINGS.items():
            bounds = _scaled(bounds, scale)
            for seed in range(seeds):
                start = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", PrivacyLeakWarning)  # seeded: an experiment
                    try:
                        model = KMeans(ds.k, epsilon=epsilon, bounds=bounds, public_n=n, random_state=seed).fit(X)
                    except NoScaleFound:  # the private box's refusal: counted in the report
                        rows.append(
                            {"dataset": name, "setting": setting, "scale": scale, "seed": seed, "refused": True}
                        )
                        continue
                domain = model.fit_info_.get("domain")
                rows.append(
                    {
                        "dataset": name,
                        "setting": setting,
                        "scale": scale,
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


def goodradius(
    names: list[str], seeds: int, epsilon: float, share: float = 0.1, on_done=None, scale: float = 1.0
) -> list[dict]:
    """Seed 001's GoodRadius / GoodCenter as the outer-limit mode's box: ``share`` of the budget finds a ball
    holding 0.95 n rows inside (-10, 10) (``privclust.one_cluster``), the fit runs in the rest in the box
    around it; NICV and the box as for :func:`run` (setting ``"goodradius in (-10, 10)"``; ``scale`` as
    there: the data and the outer box scaled alike)."""
    import warnings

    from ..locate import one_cluster

    rows = []
    for name in names:
        ds = datasets.load(name)
        X, n, delta = ds.X * scale, len(ds.X), 1e-6
        outer = _scaled((-10.0, 10.0), scale)
        for seed in range(seeds):
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", PrivacyLeakWarning)
                ball = one_cluster(
                    X, int(0.95 * n), epsilon * share, delta * share, outer, public_n=n, random_state=seed
                )
                center, radius = np.asarray(ball.center), float(ball.radius)
                lower, upper = np.maximum(center - radius, outer[0]), np.minimum(center + radius, outer[1])
                model = KMeans(
                    ds.k,
                    epsilon=epsilon * (1 - share),
                    delta=delta * (1 - share),
                    bounds={"lower": lower, "upper": upper},
                    public_n=n,
                    random_state=seed,
                ).fit(X)
            rows.append(
                {
                    "dataset": name,
                    "setting": "goodradius in (-10, 10)",
                    "seed": seed,
                    "found": bool(ball.found),
                    "nicv": float(model.inertia_) / n,
                    "box_width": float(np.mean(upper - lower)),
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
    scale = rows[0].get("scale", 1.0)
    seeds = len({r["seed"] for r in rows if r["setting"] in SETTINGS})
    fitted = [r for r in rows if not r.get("refused") and r["setting"] in SETTINGS]
    lines = [
        f"# Declared, loose and private bounds ({machine})",
        "",
        f"`{command}`: default KMeans, epsilon = {fitted[0]['epsilon_spent']:.3g} per fit, public n, "
        f"{seeds} seeds, the data scaled to [-{scale:g}, {scale:g}]^d and every declared box with them; mean NICV "
        "(ratio to the tight box; refusals of the private box, if any, in brackets). The private box spends "
        "10% of the budget; its mean per-feature width is relative to the data's, 'clipped' is the mean "
        "share of rows outside it.",
        "",
        "| data set | " + " | ".join(SETTINGS) + " | box width (private) | clipped (private) |",
        "|---" * (len(SETTINGS) + 3) + "|",
    ]
    for name in names:
        mine = [r for r in fitted if r["dataset"] == name]
        means = {s: float(np.mean([r["nicv"] for r in mine if r["setting"] == s])) for s in SETTINGS}
        refused = {
            s: sum(1 for r in rows if r["dataset"] == name and r["setting"] == s and r.get("refused")) for s in SETTINGS
        }
        tight = means["tight (-1, 1)"]
        cells = [
            f"{means[s]:.4g} ({means[s] / tight:.2f}x)" + (f" [{refused[s]} refused]" if refused[s] else "")
            for s in SETTINGS
        ]
        private = [r for r in mine if r["setting"] == "private (no bounds)"]
        n = len(datasets.load(name).X)
        width = np.mean([r["box_width"] for r in private]) / (2.0 * scale)  # the data span 2 scale
        clipped = np.mean([r["rows_clipped"] for r in private]) / n
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {width:.3g}x | {clipped:.2%} |")
    balls = [r for r in rows if r.get("setting") == "goodradius in (-10, 10)"]
    if balls:
        within = f"({-10 * scale:g}, {10 * scale:g})"
        lines += ["", f"Seed 001's GoodRadius / GoodCenter ball (10% of the budget, t = 0.95 n) within {within}:", ""]
        lines += ["| data set | NICV (ratio to tight) | balls found | box width | clipped | seconds per fit |"]
        lines += ["|---|---|---|---|---|---|"]
        for name in names:
            mine = [r for r in balls if r["dataset"] == name]
            tight = np.mean([r["nicv"] for r in fitted if r["dataset"] == name and r["setting"] == "tight (-1, 1)"])
            nicv = np.mean([r["nicv"] for r in mine])
            lines.append(
                f"| {name} | {nicv:.4g} ({nicv / tight:.2f}x) | {sum(r['found'] for r in mine)} of {len(mine)} | "
                f"{np.mean([r['box_width'] for r in mine]) / (2.0 * scale):.3g}x | "
                f"{np.mean([r['rows_clipped'] for r in mine]) / len(datasets.load(name).X):.2%} | "
                f"{np.mean([r['seconds'] for r in mine]):.1f} |"
            )
    path = out_dir / "domain.md"
    path.write_text("\n".join(lines) + "\n")
    return path

"""``privclust bench domain``: what declared, loose and privately found bounds cost the default fit (issue 27).

Each data set is *placed* somewhere first (``PLACEMENTS``): ``unit`` as bundled (each feature in [-1, 1]),
``x<s>`` scaled to [-s, s] (``x3``, ``x1000``), ``offset`` each feature in [100, 110], ``raw`` each
feature at its published scale (``datasets.load_raw``; for a synthetic set, a seeded random affine map
per feature).  In each placement the default ``KMeans`` runs at epsilon (delta 1e-6) with public n over
several seeds with (a) the tight box -- each feature's [min, max] --, (b) the box 10 times as wide on
every feature (same center) declared, (c) no bounds -- the private box of ``geometry.private_box`` --
and (d) that 10x box as an outer limit the private box tightens.

NICV is measured in the tight box's coordinates (each feature mapped onto [-1, 1]), so that a placement's
figures compare with another's (the tight fit is the same fit in every placement).  The report gives each
setting's mean NICV and its ratio to (a), and for (c) and (d) the box's mean per-feature width relative
to the data's, the share of rows clipped and the refusals.
"""

from __future__ import annotations

import json
import time
import warnings
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import datasets
from ..estimator import KMeans
from ..geometry.private_box import NoScaleFound
from ..metrics import labels_and_cost
from ..privacy.leaks import PrivacyLeakWarning
from .utility import load_data

__all__ = ["SETTINGS", "Placed", "place", "run", "goodradius", "write_report"]

SETTINGS = ("tight", "declared 10x", "private (no bounds)", "outer 10x")
PRIVATE = SETTINGS[2:]  # the settings whose box is found privately
OFFSET = (100.0, 110.0)  # the ``offset`` placement's interval, per feature
LOOSE = 10.0  # the declared and outer boxes are this many times as wide as the data's, on every feature


@dataclass(frozen=True)
class Placed:
    """A data set where a placement puts it: rows, each feature's [min, max], the clusters and the rows' count."""

    X: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    k: int

    def loose(self, factor: float = LOOSE) -> tuple[np.ndarray, np.ndarray]:
        """Each feature's interval ``factor`` times as wide, about the same center."""
        mid, half = (self.lower + self.upper) / 2.0, (self.upper - self.lower) / 2.0
        return mid - factor * half, mid + factor * half

    def in_tight_box(self, points: np.ndarray) -> np.ndarray:
        """Points in the tight box's coordinates: each feature's [min, max] onto [-1, 1]."""
        return 2.0 * (points - self.lower) / (self.upper - self.lower) - 1.0


def _affine(name: str, d: int) -> tuple[np.ndarray, np.ndarray]:
    """A synthetic set's ``raw`` placement: per feature a scale 10^-2 .. 10^5 and a center up to 10 scales off 0."""
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    scale = 10.0 ** rng.uniform(-2.0, 5.0, d)
    return scale * rng.uniform(-10.0, 10.0, d), scale


def place(name: str, placement: str) -> Placed:
    """Data set ``name`` (bundled, or a ``bench.synthetic`` spec) in ``placement``."""
    ds = load_data(name)
    unit = ds.X  # each feature in [-1, 1]
    d = unit.shape[1]
    if placement == "raw":
        if ":" in name:
            center, half = _affine(name, d)
            X = center + half * unit
        else:
            X = datasets.load_raw(name)
    elif placement == "unit":
        X = unit.copy()
    elif placement == "offset":
        X = (OFFSET[0] + OFFSET[1]) / 2.0 + (OFFSET[1] - OFFSET[0]) / 2.0 * unit
    elif placement.startswith("x"):
        X = float(placement[1:]) * unit
    else:
        raise ValueError(f"unknown placement {placement!r}: unit, x<scale> (x3), offset or raw")
    lower, upper = X.min(axis=0), X.max(axis=0)
    upper = np.where(upper > lower, upper, lower + 1.0)  # a constant feature: any interval about it
    return Placed(X, lower, upper, ds.k)


def check_placement(placement: str) -> str:
    """``placement`` if it names one (refused otherwise, before anything runs)."""
    if placement in ("unit", "offset", "raw"):
        return placement
    try:
        if placement.startswith("x") and float(placement[1:]) > 0:
            return placement
    except ValueError:
        pass
    raise ValueError(f"unknown placement {placement!r}: unit, x<scale> (x3, x1000), offset or raw")


def _bounds(setting: str, data: Placed):
    if setting == "tight":
        return {"lower": data.lower, "upper": data.upper}
    lower, upper = data.loose()
    if setting == "declared 10x":
        return {"lower": lower, "upper": upper}
    if setting == "outer 10x":
        return {"outer": {"lower": lower, "upper": upper}}
    return None


def fit_once(data: Placed, bounds, epsilon: float, seed: int, delta: float = 1e-6):
    """The default KMeans on ``data`` with ``bounds``; None where the private box refuses (no scale found)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)  # seeded: an experiment
        try:
            return KMeans(
                data.k, epsilon=epsilon, delta=delta, bounds=bounds, public_n=len(data.X), random_state=seed
            ).fit(data.X)
        except NoScaleFound:
            return None


def _row(name: str, placement: str, setting: str, seed: int, data: Placed, model, seconds: float) -> dict:
    row = {"dataset": name, "placement": placement, "setting": setting, "seed": seed}
    if model is None:
        return {**row, "refused": True}
    n = len(data.X)
    centers = data.in_tight_box(model.cluster_centers_)
    row["nicv"] = float(labels_and_cost(data.in_tight_box(data.X), centers)[1]) / n
    row["epsilon_spent"] = model.privacy_spent_.epsilon
    row["rows_clipped"] = int(model.n_rows_clipped_) / n
    box = model.fit_info_.get("domain")
    if box is not None:  # each feature's width relative to the data's
        width = (np.subtract(box["upper"], box["lower"])) / (data.upper - data.lower)
        row["box_width"] = width.tolist()
    row["seconds"] = seconds
    return row


def run(
    names: list[str],
    seeds: int,
    epsilon: float,
    on_done=None,
    placements: tuple[str, ...] = ("unit",),
    first_seed: int = 0,
    settings: tuple[str, ...] = SETTINGS,
) -> list[dict]:
    """One row per data set, placement, setting and seed (see the module docstring)."""
    rows = []
    for name in names:
        for placement in placements:
            data = place(name, placement)
            for setting in settings:
                for seed in range(first_seed, first_seed + seeds):
                    start = time.process_time()
                    model = fit_once(data, _bounds(setting, data), epsilon, seed)
                    rows.append(_row(name, placement, setting, seed, data, model, time.process_time() - start))
                    if on_done:
                        on_done(rows[-1])
    return rows


def goodradius(
    names: list[str],
    seeds: int,
    epsilon: float,
    share: float = 0.1,
    on_done=None,
    placements: tuple[str, ...] = ("unit",),
    first_seed: int = 0,
) -> list[dict]:
    """Seed 001's GoodRadius / GoodCenter as the outer-limit mode's box: ``share`` of the budget finds a ball
    holding 0.95 n rows inside the 10x box (``privclust.one_cluster``), the fit runs in the rest in the box
    around it; NICV and the box as for :func:`run` (setting ``"goodradius in 10x"``)."""
    from ..locate import one_cluster

    rows, delta = [], 1e-6
    for name in names:
        for placement in placements:
            data = place(name, placement)
            n = len(data.X)
            outer = data.loose()
            for seed in range(first_seed, first_seed + seeds):
                start = time.process_time()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", PrivacyLeakWarning)
                    ball = one_cluster(
                        data.X,
                        int(0.95 * n),
                        epsilon * share,
                        delta * share,
                        {"lower": outer[0], "upper": outer[1]},
                        public_n=n,
                        random_state=seed,
                    )
                    center, radius = np.asarray(ball.center), float(ball.radius)
                    lower, upper = np.maximum(center - radius, outer[0]), np.minimum(center + radius, outer[1])
                    model = KMeans(
                        data.k,
                        epsilon=epsilon * (1 - share),
                        delta=delta * (1 - share),
                        bounds={"lower": lower, "upper": upper},
                        public_n=n,
                        random_state=seed,
                    ).fit(data.X)
                row = _row(name, placement, "goodradius in 10x", seed, data, model, time.process_time() - start)
                row["box_width"] = ((upper - lower) / (data.upper - data.lower)).tolist()
                row["found"] = bool(ball.found)
                rows.append(row)
                if on_done:
                    on_done(rows[-1])
    return rows


def summary(rows: list[dict]) -> list[dict]:
    """Per data set and placement: each setting's mean NICV, its ratio to the tight box's, and for the private
    settings the box's mean width relative to the data's (mean over features and seeds; the widest feature's
    mean too), the mean share of rows clipped and the refusals."""
    out = []
    keys = list(dict.fromkeys((r["dataset"], r["placement"]) for r in rows))
    for name, placement in keys:
        mine = [r for r in rows if r["dataset"] == name and r["placement"] == placement]
        entry = {"dataset": name, "placement": placement}
        tight = [r["nicv"] for r in mine if r["setting"] == "tight" and "nicv" in r]
        for setting in dict.fromkeys(r["setting"] for r in mine):
            fitted = [r for r in mine if r["setting"] == setting and "nicv" in r]
            refused = sum(1 for r in mine if r["setting"] == setting and r.get("refused"))
            stats = {"refused": refused, "fits": len(fitted)}
            if fitted:
                nicv = float(np.mean([r["nicv"] for r in fitted]))
                stats.update(nicv=nicv, ratio=nicv / float(np.mean(tight)) if tight else None)
                stats["clipped"] = float(np.mean([r["rows_clipped"] for r in fitted]))
                widths = [r["box_width"] for r in fitted if "box_width" in r]
                if widths:
                    stats["width"] = float(np.mean(widths))
                    stats["widest"] = float(np.mean(np.max(widths, axis=1)))
            entry[setting] = stats
        out.append(entry)
    return out


def _cell(stats: dict | None) -> str:
    if stats is None or not stats["fits"]:
        return "all refused" if stats else ""
    cell = f"{stats['nicv']:.4g} ({stats['ratio']:.2f}x)"
    return cell + (f" [{stats['refused']} refused]" if stats["refused"] else "")


def _box(stats: dict | None) -> str:
    if stats is None or "width" not in stats:
        return " | "
    return f"{stats['width']:.2f}x ({stats['widest']:.2f}x) | {stats['clipped']:.2%}"


def write_report(rows: list[dict], out_dir: Path, machine: str, command: str) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "domain.json").write_text(json.dumps(rows, indent=1))
    table = summary(rows)
    (out_dir / "domain-summary.json").write_text(json.dumps(table, indent=1))
    seeds = len({r["seed"] for r in rows})
    spent = next((r["epsilon_spent"] for r in rows if r["setting"] == "tight" and "epsilon_spent" in r), None)
    lines = [
        f"# Declared, loose and private bounds ({machine})",
        "",
        f"`{command}`: default KMeans, epsilon = {spent if spent is None else f'{spent:.3g}'} per fit, delta 1e-6, "
        f"public n, {seeds} seeds. Placements: unit = as bundled (each feature in [-1, 1]), x<s> = in [-s, s], "
        f"offset = each feature in [{OFFSET[0]:g}, {OFFSET[1]:g}], raw = each feature at its published scale. "
        "Mean NICV in the tight box's coordinates (ratio to the tight box; refusals of the private box in "
        "brackets); 10x = each feature's interval 10 times as wide, same center. 'width' is the private box's "
        "mean per-feature width relative to the data's (its widest feature's in brackets), 'clipped' the mean "
        "share of rows outside it.",
        "",
        "| data set | placement | tight | declared 10x | private (no bounds) | width | clipped "
        "| outer 10x | width | clipped |",
        "|---" * 10 + "|",
    ]
    for entry in table:
        private, outer = entry.get(PRIVATE[0]), entry.get(PRIVATE[1])
        lines.append(
            f"| {entry['dataset']} | {entry['placement']} | {_cell(entry.get('tight'))} | "
            f"{_cell(entry.get('declared 10x'))} | {_cell(private)} | {_box(private)} | {_cell(outer)} | {_box(outer)} |"
        )
    balls = [e for e in table if "goodradius in 10x" in e]
    if balls:
        lines += ["", "Seed 001's GoodRadius / GoodCenter ball (10% of the budget, t = 0.95 n) within the 10x box:", ""]
        lines += [
            "| data set | placement | NICV (ratio to tight) | balls found | box width | clipped | CPU s per fit |"
        ]
        lines += ["|---|---|---|---|---|---|---|"]
        for entry in balls:
            mine = [
                r
                for r in rows
                if r["setting"] == "goodradius in 10x"
                and (r["dataset"], r["placement"]) == (entry["dataset"], entry["placement"])
            ]
            stats = entry["goodradius in 10x"]
            lines.append(
                f"| {entry['dataset']} | {entry['placement']} | {_cell(stats)} | "
                f"{sum(r['found'] for r in mine)} of {len(mine)} | {_box(stats)} | "
                f"{np.mean([r['seconds'] for r in mine]):.1f} |"
            )
    path = out_dir / "domain.md"
    path.write_text("\n".join(lines) + "\n")
    return path

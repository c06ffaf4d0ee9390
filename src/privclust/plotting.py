"""Pictures: cluster scatter plots, NICV-versus-epsilon curves, elbow curves and benchmark histograms."""

from __future__ import annotations

from pathlib import Path

import numpy as np

__all__ = [
    "plot_clusters",
    "plot_curves",
    "plot_panels",
    "plot_heatmaps",
    "plot_cost_curves",
    "plot_histograms",
    "plot_formats",
    "sample_rows",
    "RAW_DATA_CAPTION",
]


RAW_DATA_CAPTION = "points: your raw data, not private; crosses: the private centers"


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_formats() -> list[str]:
    """The file suffixes (without the dot) that matplotlib can write."""
    from matplotlib.backend_bases import FigureCanvasBase

    return sorted(FigureCanvasBase.get_supported_filetypes())


def _save(fig, path) -> None:
    """Save ``fig`` to ``path``: under a temporary name first, renamed into place when complete."""
    from .io import StagedFiles

    path = Path(path)
    suffix = path.suffix.lower().lstrip(".")
    fmt = suffix if suffix in plot_formats() else None  # None: matplotlib's default format (png)
    with StagedFiles() as staged:
        fig.savefig(staged.reserve(path, "plot"), format=fmt or fig.canvas.get_default_filetype())
        staged.commit()


def sample_rows(X: np.ndarray, size: int, seed: int = 0) -> np.ndarray:
    """The positions of ``min(len(X), size)`` rows drawn without replacement, in increasing order.

    Drawing is O(size), and the rows are then read in file order: from a memory map, only those rows."""
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(len(X), size=min(len(X), size), replace=False))


def plot_clusters(
    path: str | Path,
    X: np.ndarray,
    labels: np.ndarray,
    centers: np.ndarray,
    title: str,
    max_points: int = 20_000,
    seed: int = 0,
    columns: list[str] | None = None,
    caption: str = RAW_DATA_CAPTION,
) -> None:
    """Scatter of (a sample of at most ``max_points`` of) the points coloured by cluster, centers marked.

    For d > 2 the picture is the plane of the two leading principal axes of
    the *released centers* (so the projection itself reveals nothing new).
    The points drawn are the holder's own data: the picture is for the data
    holder, not for publication, and ``caption`` says so under it.  ``X`` may
    be a memory map: only the sampled rows are read.
    """
    plt = _pyplot()
    centers = np.asarray(centers, dtype=np.float64)
    idx = sample_rows(X, max_points, seed)
    pts, lab = np.asarray(X[idx], dtype=np.float64), np.asarray(labels)[idx]
    names = columns or [f"x{j}" for j in range(centers.shape[1])]
    rng = np.random.default_rng(seed)
    if centers.shape[1] > 2:
        mean = centers.mean(axis=0)
        _, _, vt = np.linalg.svd(centers - mean, full_matrices=False)
        axes = vt[:2] if vt.shape[0] >= 2 else np.eye(centers.shape[1])[:2]
        pts, shown = (pts - mean) @ axes.T, (centers - mean) @ axes.T
        xlabel, ylabel = "center axis 1", "center axis 2"
    elif centers.shape[1] == 2:
        shown, xlabel, ylabel = centers, names[0], names[1]
    else:
        pts = np.column_stack([pts[:, 0], rng.uniform(-0.5, 0.5, len(pts))])
        shown = np.column_stack([centers[:, 0], np.zeros(len(centers))])
        xlabel, ylabel = names[0], "jitter"
    fig, ax = plt.subplots(figsize=(7, 6.4), dpi=110)
    ax.scatter(pts[:, 0], pts[:, 1], c=lab, cmap="tab20", s=4, alpha=0.5, linewidths=0)
    ax.scatter(shown[:, 0], shown[:, 1], marker="X", s=120, c="black", edgecolors="white", linewidths=1.2)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    fig.text(0.5, 0.01, caption, ha="center", va="bottom", fontsize=9, style="italic")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    _save(fig, path)
    plt.close(fig)


def _draw_curves(ax, curves: dict[str, tuple], title: str, xlabel: str, ylabel: str, logx=False, logy=False):
    if len(curves) > 10:  # the default cycle has 10 colours: no two curves alike
        from matplotlib import colormaps

        ax.set_prop_cycle(color=colormaps["tab20"].colors)
    for name, (x, mean, low, high) in curves.items():
        line = ax.plot(x, mean, marker="o", ms=3, label=name)[0]
        ax.fill_between(x, low, high, color=line.get_color(), alpha=0.2, linewidth=0)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)


def plot_curves(
    path: str | Path,
    curves: dict[str, tuple],
    title: str,
    xlabel: str,
    ylabel: str,
    logx=False,
    logy=False,
    from_zero=False,
) -> None:
    """Lines with confidence bands: ``curves[name] = (x, mean, low, high)``; ``from_zero``: the y axis starts at 0
    (so that a flat curve looks flat, not its noise magnified)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4.5), dpi=110)
    _draw_curves(ax, curves, title, xlabel, ylabel, logx, logy)
    if from_zero:
        ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)


def plot_panels(path: str | Path, panels: dict[str, dict[str, tuple]], xlabel: str, ylabel: str, logy=False, columns=5):
    """One small-multiples figure: a panel of curves per entry of ``panels``, one shared legend."""
    plt = _pyplot()
    rows = -(-len(panels) // columns)
    width = max(3.2 * columns, 6.0)  # room for the legend under a single panel
    handles_per_row = max(2, int(width // 1.4))
    fig, axes = plt.subplots(rows, columns, figsize=(width, 2.8 * rows + 0.4), dpi=100, squeeze=False)
    for ax, (title, curves) in zip(axes.flat, panels.items()):
        _draw_curves(ax, curves, title, xlabel, ylabel, logy=logy)
    for ax in list(axes.flat)[len(panels) :]:
        ax.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    ncol = min(len(labels), handles_per_row)
    legend_rows = -(-len(labels) // ncol)
    fig.legend(handles, labels, loc="lower center", ncol=ncol, fontsize=9)
    fig.tight_layout(rect=(0, 0.3 * legend_rows / fig.get_figheight(), 1, 1))
    _save(fig, path)
    plt.close(fig)


def plot_heatmaps(path: str | Path, grids: dict[str, np.ndarray], row_labels, col_labels, xlabel: str, ylabel: str):
    """One annotated heat map per entry (rows: ``row_labels``, columns: ``col_labels``)."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(grids), figsize=(4.2 * len(grids), 3.6), dpi=100, squeeze=False)
    for ax, (title, grid) in zip(axes.flat, grids.items()):
        image = ax.imshow(
            grid, origin="lower", cmap="viridis_r" if "reduction" not in title else "RdYlGn", aspect="auto"
        )
        ax.set_xticks(range(len(col_labels)), [str(c) for c in col_labels], fontsize=7)
        ax.set_yticks(range(len(row_labels)), [str(r) for r in row_labels], fontsize=7)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=9)
        low, high = np.nanmin(grid), np.nanmax(grid)
        for (i, j), value in np.ndenumerate(grid):
            dark = "reduction" not in title and high > low and (value - low) / (high - low) > 0.5
            ax.text(j, i, f"{value:.2g}", ha="center", va="center", fontsize=6, color="white" if dark else "black")
        fig.colorbar(image, ax=ax, fraction=0.046)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)


def plot_cost_curves(path: str | Path, curves: list, mark: int, mark_label: str, title: str | None = None) -> None:
    """Cost against k = 1, 2, ... for one or more curves (log scale), with a vertical line at k = ``mark``."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5, 3.2), dpi=100)
    for costs in curves:
        ax.plot(
            range(1, len(costs) + 1),
            costs,
            marker="o" if len(curves) == 1 else None,
            markersize=3,
            alpha=1.0 if len(curves) == 1 else 0.4,
        )
    ax.axvline(mark, color="red", linestyle="--", label=mark_label)
    values = np.concatenate([np.asarray(c, dtype=np.float64).ravel() for c in curves]) if curves else np.ones(1)
    positive = values[values > 0]
    if positive.size == values.size:
        ax.set_yscale("log")
    else:  # a cost of 0 (or below) has no place on a log scale: linear near 0, logarithmic above
        ax.set_yscale("symlog", linthresh=float(positive.min()) if positive.size else 1.0)
    n = max((len(c) for c in curves), default=1)
    ax.set_xlim(0.5, n + 0.5)
    ax.set_xticks(range(1, n + 1))  # every k, labelled (smaller type when there are many)
    ax.tick_params(axis="x", labelsize=8 if n <= 20 else 5)
    ax.set_xlabel("k")
    ax.set_ylabel("estimated cost (unit box)")
    if title:
        ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)


def plot_histograms(path: str | Path, panels: list[tuple[np.ndarray, float, str]]) -> None:
    """One histogram per (values, threshold marked in red, x label)."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 3), dpi=100, squeeze=False)
    for ax, (values, threshold, label) in zip(axes.flat, panels):
        ax.hist(values, bins=20)
        ax.axvline(threshold, color="red", linestyle="--")
        ax.set_xlabel(label)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)

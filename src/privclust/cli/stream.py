"""``privclust stream EVENTS``: fresh private centers after every step of a stream of insertions and deletions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import numpy as np
import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from .common import DROPNA_OPTION, HEADER_OPTION, SEP_OPTION, bounds_pair, check_output, fail, write_whole

console = Console(stderr=True)
INSERT, DELETE = ("insert", "+", "1", "add"), ("delete", "-", "-1", "remove")


def read_events(
    path: Path, header: Optional[bool] = None, sep: Optional[str] = None, dropna: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(step, +1 insert / -1 delete, features) of every event of a CSV or Parquet file whose first two
    columns are the step and the operation; read as every command reads a table (:func:`privclust.io.read_frame`)."""
    from .._validation import check_data
    from ..io import read_frame

    frame = read_frame(path, header=header, sep=sep, dropna=dropna)
    if frame.shape[1] < 3:
        raise ValueError(f"{path} needs columns (step, op, feature...), got {frame.shape[1]} columns")
    steps = frame.iloc[:, 0].to_numpy()
    if not np.issubdtype(steps.dtype, np.integer):
        raise ValueError(f"{path}: the first column (the step) must hold integers")
    ops = frame.iloc[:, 1].astype(str).str.strip().str.lower()
    sign = np.where(ops.isin(INSERT), 1, np.where(ops.isin(DELETE), -1, 0))
    if np.any(sign == 0):
        raise ValueError(f"{path}: the second column (the op) must be insert/delete (or +/-)")
    return steps.astype(np.int64), sign, check_data(frame.iloc[:, 2:], what=str(path))


def stream(
    events: Path = typer.Argument(
        ..., help="CSV or Parquet of events: step (1..horizon), op (insert/delete), features."
    ),
    k: int = typer.Option(..., "--k", "-k", help="Number of clusters."),
    horizon: int = typer.Option(..., help="The public number of steps T (the noise grows with log T)."),
    bounds: str = typer.Option(..., help="Public per-feature bounds 'LOWER,UPPER' (rows are clipped to them)."),
    epsilon: float = typer.Option(1.0, "--epsilon", "-e", help="Budget for the whole horizon."),
    delta: float = typer.Option(1e-6, "--delta", "-d", help="Delta for the whole horizon."),
    mechanism: str = typer.Option("honaker", help="Continual counters: honaker (default) or tree."),
    seed: Optional[int] = typer.Option(None, help="Seeded noise for experiments (default: secure noise)."),
    state: Optional[Path] = typer.Option(None, help="State file: resumed from if it exists, saved at the end."),
    until: Optional[int] = typer.Option(None, help="Stop after this step (default: the horizon); resume with --state."),
    output: Path = typer.Option(Path("centers.jsonl"), "--output", "-o", help="JSON lines: centers per step."),
    header: Optional[bool] = HEADER_OPTION,
    sep: Optional[str] = SEP_OPTION,
    dropna: bool = DROPNA_OPTION,
) -> None:
    """Publish private k-means centers after every step of a stream (continual observation, Dupré la Tour, Henzinger & Saulpic (2024))."""
    from ..stream import ContinualKMeans

    check_output(output)
    low, high = bounds_pair(bounds)
    try:
        steps, signs, rows = read_events(events, header, sep, dropna)
        model = ContinualKMeans(k, epsilon, delta, (low, high), horizon, random_state=seed, mechanism=mechanism)
        if state is not None and state.exists():
            model = ContinualKMeans.load(state, expect=model)
    except (ValueError, FileNotFoundError) as exc:
        fail(str(exc))
    if np.any(steps > horizon) or np.any(steps < 1):  # refused before any step is published
        fail(f"{events} has events outside steps 1..{horizon} (the horizon): nothing was published")
    until = horizon if until is None else until
    if not 1 <= until <= horizon:
        fail(f"--until must lie in 1..{horizon} (the horizon)")
    order = np.argsort(steps, kind="stable")
    steps, signs, rows = steps[order], signs[order], rows[order]
    bounds_of = np.searchsorted(steps, np.arange(1, horizon + 2))  # events of step t: [bounds_of[t-1], bounds_of[t])
    lines = []
    with Progress(
        TextColumn("[bold]steps"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console
    ) as progress:
        task = progress.add_task("stream", total=until, completed=min(model.step_, until))
        for t in range(model.step_ + 1, until + 1):
            at = slice(bounds_of[t - 1], bounds_of[t])
            chosen, sign = rows[at], signs[at]
            centers = model.update(insert=chosen[sign > 0], delete=chosen[sign < 0])
            lines.append(json.dumps({"step": t, "centers": centers.tolist()}))
            progress.advance(task)
    if state is not None:
        model.save(state)
    text = "\n".join(lines) + ("\n" if lines else "")
    write_whole(output, lambda staged: staged.write_text(text))
    spent = model.privacy_spent_
    console.print(f"{len(lines)} steps published to {output}; the whole horizon spends {spent}")

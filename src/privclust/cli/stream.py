"""``privclust stream EVENTS``: fresh private centers after every step of a stream of insertions and deletions."""

from __future__ import annotations

import json
from contextlib import ExitStack
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
    steps = _integer_steps(frame.iloc[:, 0])
    if steps is None:
        raise ValueError(f"{path}: the first column (the step) must hold integers")
    ops = frame.iloc[:, 1].astype(str).str.strip().str.lower()
    sign = np.where(ops.isin(INSERT), 1, np.where(ops.isin(DELETE), -1, 0))
    if np.any(sign == 0):
        raise ValueError(f"{path}: the second column (the op) must be insert/delete (or +/-)")
    features = frame.iloc[:, 2:]
    if len(frame) == 0:  # a header alone: its columns come back untyped, and no value of them is non-numeric
        features = features.astype(np.float64)
    return steps, sign, check_data(features, what=str(path))


def _integer_steps(column) -> np.ndarray | None:
    """The step column as int64, or None unless every value is a whole number -- judged by the values, never by
    the column's type: a missing step that ``--dropna`` dropped leaves a float column, and no rows at all an object
    one, and a per-row rule must not make the whole file's fate depend on one row (nor may an empty file be told
    from its one-row neighbour)."""
    import pandas as pd

    values = column.to_numpy()
    if np.issubdtype(values.dtype, np.integer):
        return values.astype(np.int64)
    if values.dtype == bool:
        return None
    numbers = pd.to_numeric(column, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    whole = np.isfinite(numbers) & (numbers == np.round(numbers)) & (np.abs(numbers) <= 2.0**53)
    return numbers.astype(np.int64) if bool(np.all(whole)) else None


def _last_published(path: Path) -> int:
    """The step of the last line of an output this command wrote (0 for an empty file)."""
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not lines:
        return 0
    try:
        return int(json.loads(lines[-1])["step"])
    except (ValueError, KeyError, TypeError):
        raise ValueError(f"{path} is not the output of privclust stream (its last line has no step)") from None


def _replay_check(model, state: Path, output: Path, accounts) -> None:
    """Refuse an older copy of a stream's state: it would publish steps already published with fresh noise."""
    if accounts is not None:
        if model.ledger_ is not None and model.ledger_ != str(accounts.path.resolve()):
            raise ValueError(
                f"the stream in {state} is charged to the ledger {model.ledger_}, not {accounts.path}: "
                "resume it with the ledger it was charged to"
            )
        recorded = accounts.stream_step(model.run_id_)
        if recorded is None:
            raise ValueError(
                f"the ledger {accounts.path} has no record of the stream in {state} (started without --ledger, "
                "or charged to another ledger): nothing was published"
            )
        if model.step_ < recorded:
            raise ValueError(
                f"{state} is at step {model.step_} but the ledger records step {recorded} published for this stream: "
                "an older state would publish those steps again with fresh noise. Refused; resume from the newest state"
            )
    elif model.ledger_ is not None:
        raise ValueError(f"the stream in {state} is charged to the ledger {model.ledger_}: resume it with --ledger")
    if output.exists():
        last = _last_published(output)
        if model.step_ < last:
            raise ValueError(
                f"{state} is at step {model.step_} but {output} already holds step {last}: an older state would "
                "publish those steps again with fresh noise. Refused; resume from the newest state"
            )


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
    output: Path = typer.Option(
        Path("centers.jsonl"),
        "--output",
        "-o",
        help="JSON lines: centers per step. Appended to when resuming with --state; a new stream refuses an existing file.",
    ),
    ledger: Optional[Path] = typer.Option(
        None,
        "--ledger",
        help="A budget ledger file: the horizon's whole budget is charged to it once, before the first step "
        "(a resume charges nothing more), and it records the last step published, so an older state is refused.",
    ),
    header: Optional[bool] = HEADER_OPTION,
    sep: Optional[str] = SEP_OPTION,
    dropna: bool = DROPNA_OPTION,
) -> None:
    """Publish private k-means centers after every step of a stream (continual observation, Dupré la Tour, Henzinger & Saulpic (2024)).

    Events at steps outside 1..horizon are dropped (not read into any step)."""
    from ..privacy.budget import BudgetExceededError
    from ..privacy.ledger import LedgerAccountant
    from ..stream import ContinualKMeans

    check_output(output)
    if state is not None:  # saved after the steps are published: a path that cannot be written is refused now
        check_output(state, "--state")
    low, high = bounds_pair(bounds)
    with ExitStack() as charged:  # with a ledger, a new stream's reservation: settled when the steps are done
        try:
            accounts = LedgerAccountant.open(ledger) if ledger is not None else None
            model = ContinualKMeans(k, epsilon, delta, (low, high), horizon, random_state=seed, mechanism=mechanism)
            until = horizon if until is None else until
            if not 1 <= until <= horizon:
                raise ValueError(f"--until must lie in 1..{horizon} (the horizon)")
            resume = state is not None and state.exists()
            if resume:
                model = ContinualKMeans.load(state, expect=model)
                _replay_check(model, state, output, accounts)
                if model.step_ >= until:
                    raise ValueError(
                        f"the stream in {state} has already published step {model.step_} (stopping at step "
                        f"{until}): nothing to publish, nothing was written"
                    )
            elif output.exists():
                raise ValueError(
                    f"{output} exists: a new stream does not overwrite it (nothing was written). Give a new -o, "
                    "or the --state of the stream that wrote it to resume"
                )
            elif accounts is not None:  # the whole horizon, reserved once, before any event is read
                about = {"command": "stream", "events": str(events), "k": k, "epsilon": epsilon, "delta": delta}
                about.update(horizon=horizon, secure_noise=seed is None)
                about.update({"stream run": model.run_id_, "stream step": 0})
                accountant = charged.enter_context(accounts.run(epsilon, delta, about))
                model = ContinualKMeans(
                    k,
                    epsilon,
                    delta,
                    (low, high),
                    horizon,
                    random_state=seed,
                    mechanism=mechanism,
                    accountant=accountant,
                )
                model.run_id_, model.ledger_ = about["stream run"], str(accounts.path.resolve())
            steps, signs, rows = read_events(events, header, sep, dropna)
        except (ValueError, FileNotFoundError, BudgetExceededError) as exc:
            fail(str(exc))
        inside = (steps >= 1) & (steps <= horizon)  # a public rule: events outside the horizon are dropped
        steps, signs, rows = steps[inside], signs[inside], rows[inside]
        order = np.argsort(steps, kind="stable")
        steps, signs, rows = steps[order], signs[order], rows[order]
        bounds_of = np.searchsorted(
            steps, np.arange(1, horizon + 2)
        )  # events of step t: [bounds_of[t-1], bounds_of[t])
        lines = []
        try:
            with Progress(
                TextColumn("[bold]steps"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console
            ) as progress:
                task = progress.add_task("stream", total=until, completed=model.step_)
                for t in range(model.step_ + 1, until + 1):
                    at = slice(bounds_of[t - 1], bounds_of[t])
                    chosen, sign = rows[at], signs[at]
                    centers = model.update(insert=chosen[sign > 0], delete=chosen[sign < 0])
                    lines.append(json.dumps({"step": t, "centers": centers.tolist()}))
                    progress.advance(task)
        except (ValueError, BudgetExceededError) as exc:
            fail(str(exc))
    # Published in this order -- the ledger's step, the output, the state -- so a crash between two of them
    # leaves a state at most as new as what the ledger (or, without one, the output) says was published: the next
    # run is refused, never a replay, whichever output it writes to (the steps in between are lost, not published
    # twice).
    if accounts is not None:
        try:
            accounts.record_stream_step(model.run_id_, model.step_)
        except ValueError as exc:  # the ledger became unreadable meanwhile: nothing is published
            fail(f"{exc}; steps {model.step_ - len(lines) + 1}..{model.step_} were not published")
    previous = output.read_text(encoding="utf-8") if resume and output.exists() else ""
    text = previous + "\n".join(lines) + "\n"
    write_whole(output, lambda staged: staged.write_text(text, encoding="utf-8"))
    if state is not None:
        model.save(state)
    spent = model.privacy_spent_
    console.print(
        f"steps {model.step_ - len(lines) + 1}..{model.step_} published to {output}; the whole horizon spends {spent}"
        + (" (charged once, by the stream's first run)" if resume else "")
        + f" (events outside steps 1..{horizon} are dropped)"
    )

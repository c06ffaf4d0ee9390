"""What the ``privclust`` sub-commands share: failing with a message, and outputs that are written
whole or not at all (through :class:`privclust.io.StagedFiles`)."""

from __future__ import annotations

import os
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Callable, NoReturn, Optional

import typer
from rich.console import Console

__all__ = [
    "fail",
    "interrupts_reported",
    "interrupt_said",
    "bounds_pair",
    "check_output",
    "write_whole",
    "HEADER_OPTION",
    "SEP_OPTION",
    "DROPNA_OPTION",
]

_errors = Console(stderr=True)

# How a CSV is read: the same options, with the same meaning, for every command that reads one.
HEADER_OPTION = typer.Option(
    None,
    "--header/--no-header",
    help="Whether a CSV's first line is a header (default: it is when it holds names and no numbers, data when "
    "it holds numbers and no names; a line with both is refused until you say).",
)
SEP_OPTION = typer.Option(
    None, "--sep", help="A CSV's field separator, one character (default: a tab for .tsv, else a comma; '\\t' for tab)."
)
DROPNA_OPTION = typer.Option(
    False,
    "--dropna",
    help="Drop the rows with a missing value (empty, NA, NaN, ...) in the chosen columns before anything is "
    "computed (free: a per-row rule). Without it a missing value is refused, naming its column.",
)

LEDGER_OPTION = typer.Option(
    None,
    "--ledger",
    help="A budget ledger file: this run is charged to it, and refused before reading any data if it would "
    "exceed its budget (create one with 'privclust ledger init' or --ledger-budget).",
)
LEDGER_BUDGET_OPTION = typer.Option(
    None,
    "--ledger-budget",
    metavar="EPS,DELTA",
    help="EPSILON,DELTA: the total budget of a --ledger file that does not exist yet.",
)


def fail(message: str) -> NoReturn:
    _errors.print(f"[bold red]error:[/] {message}")
    raise typer.Exit(2)


INTERRUPTED_MESSAGE = "interrupted: no output file was written or changed"
_interrupt_said = [False]  # whether interrupts_reported has said it (the CLI's main says it otherwise)


@contextmanager
def interrupts_reported():
    """Ctrl-C: say that no output was touched (the staged and temporary files are gone by the time this runs)
    and exit with 130.  Every long step reads or computes in chunks, so Ctrl-C acts within a chunk's time."""
    try:
        yield
    except KeyboardInterrupt:
        _errors.print(INTERRUPTED_MESSAGE, soft_wrap=True)
        _interrupt_said[0] = True
        raise typer.Exit(130) from None


def interrupt_said() -> bool:
    """Whether a command has already reported Ctrl-C (before it, typer turns Ctrl-C into exit code 130 silently)."""
    return _interrupt_said[0]


def bounds_pair(text: str) -> list[float]:
    """``--bounds LOWER,UPPER`` as [lower, upper] (the domain itself checks them)."""
    try:
        lower, upper = (float(v) for v in text.split(","))
    except ValueError:
        fail(f"--bounds must be 'LOWER,UPPER' (e.g. '-1,1'), got {text!r}")
    return [lower, upper]


def check_output(path: Path, what: str = "--output") -> Path:
    """Refuse an output path that cannot be written before any data is read or any budget spent."""
    from ..io import check_output_path

    try:
        path = check_output_path(path, what)
    except ValueError as exc:
        fail(f"{exc} (nothing was written)")
    folder = path.parent if str(path.parent) else Path(".")
    if not os.access(folder, os.W_OK | os.X_OK):
        fail(f"{what}: the folder {folder} is not writable")
    return path


def write_whole(path: Path, write: Callable[[Path], None]) -> None:
    """``write(temporary)`` beside ``path``, then renamed into place: the file is whole or unchanged."""
    from ..io import StagedFiles

    with StagedFiles() as staged:
        write(staged.reserve(path))
        staged.commit()


# ------------------------------------------------------------------------------------ --ledger (fit, elbow, join)

# Where composition makes the figures differ: one sentence, said wherever a ledger's total is shown.
COMPOSITION_NOTE = (
    "the total composes every run's releases (Gaussian ones exactly, in GDP) at the ledger's delta: it is not the "
    "sum of each run's own (epsilon, delta), which fit, its --json, privacy_spent_ and ledger show report"
)


def parse_budget(text: str):
    from ..privacy.budget import Budget

    try:
        epsilon, delta = (float(p) for p in text.split(","))
    except ValueError:
        raise ValueError(f"--ledger-budget must be 'EPSILON,DELTA' (e.g. '3,1e-5'), got {text!r}") from None
    return Budget(epsilon, delta)


def open_ledger(path: Optional[Path], budget: Optional[str]):
    from ..privacy.ledger import LedgerAccountant

    if path is None:
        if budget is not None:
            raise ValueError("--ledger-budget needs --ledger FILE")
        return None
    return LedgerAccountant.open(path, parse_budget(budget) if budget is not None else None)


def ledger_run(
    ledger,
    epsilon: float,
    delta: float,
    about: dict,
    private: bool = True,
):
    """The run's reservation in the ledger (refused before any data is read), or nothing without a ledger;
    it takes the shape of the run's plan when the run checks it (:meth:`LedgerAccountant.run`).

    A non-private run (the lloyd baseline, bounds read off the data) is reserved as epsilon = inf, which
    every ledger refuses."""
    if ledger is None:
        return nullcontext(None)
    epsilon = epsilon if private else float("inf")
    return ledger.run(epsilon, delta, about)


def ledger_summary(ledger) -> Optional[dict]:
    if ledger is None:
        return None
    epsilon, delta = ledger.guarantee()
    return {
        "file": str(ledger.path),
        "spent": {"epsilon": epsilon, "delta": delta},
        "budget": {"epsilon": ledger.budget.epsilon, "delta": ledger.budget.delta},
        "note": COMPOSITION_NOTE,
    }

"""What the ``privclust`` sub-commands share: failing with a message, and outputs that are written
whole or not at all (through :class:`privclust.io.StagedFiles`)."""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, NoReturn

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

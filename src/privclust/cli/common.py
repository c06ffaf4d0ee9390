"""What the ``privclust`` sub-commands share: failing with a message, and outputs that are written
whole or not at all (through :class:`privclust.io.StagedFiles`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, NoReturn

import typer
from rich.console import Console

__all__ = ["fail", "bounds_pair", "check_output", "write_whole"]

_errors = Console(stderr=True)


def fail(message: str) -> NoReturn:
    _errors.print(f"[bold red]error:[/] {message}")
    raise typer.Exit(2)


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

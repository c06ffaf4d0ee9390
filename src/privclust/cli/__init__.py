"""The ``privclust`` command line.

Every command does its work in the same order, so that nothing is read or spent before everything
public has been checked (docs/privacy.md, threat model):

1. the parameters (k, epsilon, delta, algorithm, the syntax of --bounds and --columns);
2. the outputs: each gets a temporary twin in its folder now, so a missing or read-only folder or a
   plot format matplotlib cannot write fails here;
3. the ledger (--ledger): the whole request is reserved, or refused;
4. the input's schema (column names): --columns and the bounds are matched to it;
5. the rows, and the fit;
6. the outputs are written to their twins and renamed into place together.

A failure at any step ends with ``error: ...`` and exit code 2, leaves every output as it was, and
(before step 5) spends nothing.
"""

from __future__ import annotations

import csv
import json
import os
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, List, Optional

import numpy as np

# typer < 0.21 (the version Flower pins) imports click helpers that click 8.4 deprecates: a library's notice to
# its own maintainers, not something a user of the CLI can act on (its warnings name the command, not typer)
warnings.filterwarnings("ignore", category=DeprecationWarning, module="typer")
import typer  # noqa: E402
from rich.console import Console
from rich.progress import BarColumn, Progress, ProgressColumn, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

# Only what every command needs is imported here, so that `privclust --help` starts at once; the estimator,
# the algorithms and the metrics (scikit-learn, SciPy, pandas) are imported by the commands that use them.
from .. import __version__, datasets
from ..io import StagedFiles, check_separator
from ..privacy.errors import BudgetExceededError
from .bench import bench_app
from .common import (
    COMPOSITION_NOTE,
    DROPNA_OPTION,
    HEADER_OPTION,
    INTERRUPTED_MESSAGE,
    LEDGER_BUDGET_OPTION,
    LEDGER_OPTION,
    SEP_OPTION,
    interrupt_said,
    interrupts_reported,
    ledger_run,
    ledger_summary,
    open_ledger,
)
from .federated import federated_app
from .local import local_app
from .stream import stream


def _flags_take_no_value() -> None:
    """Typer's rich help prints a flag as taking a value ("--json <bool>"); a flag takes none."""
    option = getattr(getattr(typer, "core", None), "TyperOption", None)
    shown = getattr(option, "display_type_rich", None)
    if shown is None or getattr(shown, "hides_flags", False):
        return

    def display_type_rich(self, ctx):
        return None if getattr(self, "is_flag", False) else shown(self, ctx)

    display_type_rich.hides_flags = True
    option.display_type_rich = display_type_rich


_flags_take_no_value()

app = typer.Typer(
    name="privclust",
    help="Differentially private clustering: fit, inspect data sets, and benchmark.",
    no_args_is_help=True,
    add_completion=False,
)
app.add_typer(bench_app, name="bench")
app.add_typer(federated_app, name="federated")
app.add_typer(local_app, name="local")
ledger_app = typer.Typer(
    help="A privacy budget kept in a file, spent by every fit and elbow run given --ledger FILE.",
    no_args_is_help=True,
)
app.add_typer(ledger_app, name="ledger")
app.command("stream")(stream)
console = Console()
err_console = Console(stderr=True)

# The papers behind the algorithms, for help texts (docs/algorithms.md has the details).
PAPERS = {  # every registered algorithm (a test keeps this list and the registry equal)
    "auto": "the default: the greedy or FastLloyd, chosen from n, d, k and epsilon -- docs/choosing.md",
    "fastlloyd": "Diaa, Humphries & Kerschbaum, 2024",
    "glloyd": "the Gaussian baseline of Diaa, Humphries & Kerschbaum, 2024",
    "sulloyd": "Su et al., 2016; pure epsilon-DP",
    "maxcover": "Nguyen, Chaturvedi & Xu, AAAI 2021",
    "onecluster": "k balls by the 1-cluster of Nissim, Stemmer & Vadhan, PODS 2016",
    "greedy": "the private greedy of Dupré la Tour, Henzinger & Saulpic, ICML 2024",
    "evolve": "private evolution by nearest-candidate votes, after PE-means (Humphries et al., 2026)",
    "nonprivate-lloyd": "not private: a baseline",
}
PLOT_SAMPLE = 5_000  # rows brought back from Spark for the NICV and the plot


def _version(value: bool) -> None:
    if value:
        print(f"privclust {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """Differentially private clustering: fit, inspect data sets, and benchmark."""


def json_safe(value):
    """``value`` with infinities and NaN as strings, so the JSON is valid (epsilon = inf: not private)."""
    if isinstance(value, dict):
        return {key: json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(item) for item in value]
    if isinstance(value, float) and not np.isfinite(value):
        return str(value)
    return value


def fail(message: str, code: int = 2) -> None:
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)  # paths stay whole
    raise typer.Exit(code)


USER_ERRORS = (ValueError, TypeError, FileNotFoundError, IsADirectoryError, BudgetExceededError)


def _with_hint(message: str, columns: Optional[str]) -> str:
    if "non-numeric columns" in message and columns is None:
        return message + "; or choose the feature columns with --columns"
    return message


# ------------------------------------------------------------------------------------------ options

DATA_ARGUMENT = typer.Argument(None, help="A CSV / Parquet / .npy file, or a bundled data set name (default: s1).")
COLUMNS_OPTION = typer.Option(
    None,
    "--columns",
    "-c",
    metavar="COLUMNS",
    help="The feature columns, comma-separated, by name or 0-based position (e.g. 'age,income' or '1,2'). "
    "Without it EVERY column is a feature, an id column too.",
)
BOUNDS_OPTION = typer.Option(
    None,
    "--bounds",
    "-b",
    metavar="LO,HI",
    help="Public bounds LOWER,UPPER, declared without looking at the data: once for every feature, or repeated "
    "once per feature in column order. Without bounds, fit spends 10% of the budget on finding a box privately "
    "(docs/choosing.md; elbow needs them). 'data' reads them off the data: NOT private.",
)
BOUNDS_FILE_OPTION = typer.Option(
    None,
    "--bounds-file",
    help='Per-feature public bounds: JSON {"column": \\[lower, upper], ...} or CSV lines column,lower,upper.',
)
RADIUS_OPTION = typer.Option(None, help="Public bound: the rows lie in the ball of this radius about the origin.")
ENGINE_OPTION = typer.Option("local", help="local (rows in this process) or spark (rows stay in Spark).")
SPARK_MASTER_OPTION = typer.Option("local[*]", help="The Spark master URL for --engine spark.")


def _on_spark(engine: str) -> bool:
    if engine not in ("local", "spark"):
        fail(f"--engine must be local or spark, got {engine!r}")
    return engine == "spark"


def _split(text: Optional[str]) -> Optional[list[str]]:
    if text is None:
        return None
    items = [part.strip() for part in text.split(",")]
    if not all(items):
        raise ValueError(f"--columns must be names or positions separated by commas, got {text!r}")
    return items


def _check_public(
    k: Optional[int], epsilon: float, delta: float, algorithm: Optional[str] = None, k_name: str = "--k"
) -> None:
    """The parameters that need no data, checked before anything else (KMeans checks them again)."""
    from .._validation import check_delta, check_epsilon, check_n_clusters
    from ..algorithms.base import BASELINE, NON_PRIVATE, SKLEARN_ALGORITHMS

    if algorithm in SKLEARN_ALGORITHMS:  # no scikit-learn code to carry over here: say which is which
        raise ValueError(
            f"--algorithm {algorithm} is not a privclust algorithm (scikit-learn names its non-private Lloyd so): "
            f"leave --algorithm at auto or choose fastlloyd for private Lloyd, or {BASELINE} for the non-private "
            "baseline (docs/sklearn.md)"
        )
    if algorithm is not None and algorithm not in PAPERS:
        raise ValueError(f"unknown algorithm {algorithm!r}; choose one of {sorted(PAPERS)}")
    if k is not None:
        check_n_clusters(k, k_name)
    if algorithm not in NON_PRIVATE:
        check_epsilon(epsilon)
        check_delta(delta)


# ------------------------------------------------------------------------------------------ bounds


def _pair(text: str, what: str) -> tuple[float, float]:
    try:
        lower, upper = (float(p) for p in text.split(","))
    except ValueError:
        raise ValueError(f"{what} must be two numbers 'LOWER,UPPER' (e.g. '0,255') or 'data', got {text!r}") from None
    return _checked_pair(lower, upper, what)


def _checked_pair(lower, upper, what: str) -> tuple[float, float]:
    try:
        lower, upper = float(lower), float(upper)
    except (TypeError, ValueError):
        raise ValueError(f"{what}: the bounds must be numbers, got {lower!r} and {upper!r}") from None
    if not (np.isfinite(lower) and np.isfinite(upper)):
        raise ValueError(f"{what}: the bounds must be finite, got {lower:g} and {upper:g}")
    if not lower < upper:
        raise ValueError(f"{what}: the lower bound must be below the upper one, got {lower:g} and {upper:g}")
    return lower, upper


@dataclass(frozen=True)
class BoundsRequest:
    """The bounds as given, before the schema is known: at most one of its fields is set."""

    pairs: tuple = ()  # one (lower, upper) for every feature, or one per feature
    from_data: bool = False
    radius: Optional[float] = None
    file: Optional[Path] = None

    @classmethod
    def parse(cls, bounds: Optional[List[str]], bounds_file: Optional[Path], radius: Optional[float]):
        given = [
            name
            for name, value in (("--bounds", bounds), ("--bounds-file", bounds_file), ("--radius", radius))
            if value
        ]
        if len(given) > 1:
            raise ValueError(f"give one of {' / '.join(given)}, not both")
        if radius is not None:
            if not (np.isfinite(radius) and radius > 0):
                raise ValueError(f"--radius must be a positive number, got {radius:g}")
            return cls(radius=float(radius))
        if bounds_file is not None:
            return cls(file=bounds_file)
        if not bounds:
            return cls()
        if any(b.strip().lower() == "data" for b in bounds):
            if len(bounds) > 1:
                raise ValueError("--bounds data reads every feature's bounds off the data: give it once, alone")
            return cls(from_data=True)
        return cls(pairs=tuple(_pair(b, "--bounds") for b in bounds))

    @property
    def given(self) -> bool:
        return bool(self.pairs) or self.from_data or self.radius is not None or self.file is not None

    def resolve(self, names: list[str], positions: list[int], default=None):
        """The ``KMeans(bounds=...)`` value for the chosen columns (``names`` is the whole schema)."""
        if self.from_data:
            return "data"
        if self.radius is not None:
            return self.radius
        if self.file is not None:
            pairs = _bounds_file(self.file, names, positions)
        elif len(self.pairs) == 1:
            return self.pairs[0]
        elif self.pairs:
            if len(self.pairs) != len(positions):
                raise ValueError(
                    f"--bounds is given {len(self.pairs)} times for {len(positions)} features "
                    f"{[names[p] for p in positions]}: give it once for all, or once per feature in this order"
                )
            pairs = list(self.pairs)
        else:
            return default
        if len(set(pairs)) == 1:
            return pairs[0]  # the same for all: the unambiguous (lower, upper)
        return {"lower": [lo for lo, _ in pairs], "upper": [hi for _, hi in pairs]}  # per feature, unambiguous


def _bounds_file(path: Path, names: list[str], positions: list[int]) -> list[tuple[float, float]]:
    """Per-feature bounds from JSON {"column": [lo, hi]} or CSV column,lower,upper (a header line optional)."""
    from ..io import select_columns

    what = f"--bounds-file {path}"
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read {what}: {getattr(exc, 'strerror', None) or exc}") from None
    if text.lstrip().startswith("{"):
        try:
            given = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{what} is not valid JSON: {exc}") from None
        if not all(isinstance(v, list) and len(v) == 2 for v in given.values()):
            raise ValueError(f'{what}: give every column as "name": [lower, upper]')
        entries = list(given.items())
    else:
        rows = [r for r in csv.reader(text.splitlines()) if any(cell.strip() for cell in r)]
        if any(len(r) != 3 for r in rows):
            raise ValueError(f"{what}: every line must be column,lower,upper")
        if rows and rows[0][1].strip().lower() in ("lower", "lo", "low", "min"):
            rows = rows[1:]
        entries = [(r[0].strip(), [r[1], r[2]]) for r in rows]
    by_position: dict[int, tuple[float, float]] = {}
    for column, (lower, upper) in entries:
        position = select_columns(names, [column])[0]
        if position in by_position:
            raise ValueError(f"{what} gives column {names[position]!r} twice")
        by_position[position] = _checked_pair(lower, upper, f"{what}, column {names[position]!r}")
    missing = [names[p] for p in positions if p not in by_position]
    if missing:
        raise ValueError(f"{what} has no bounds for the feature columns {missing}")
    return [by_position[p] for p in positions]


# ------------------------------------------------------------------------------------------ input


@dataclass
class Source:
    """An input whose schema is known and whose rows are not read yet."""

    description: str
    names: list[str]  # every column of the input
    positions: list[int]  # the feature columns
    default_bounds: object
    read: Callable[[], object]  # the rows of the feature columns
    on_spark: bool = False
    # --user-column: (the rows, the user ids) -- on Spark, (the frame with the user column, its name)
    read_with_users: Optional[Callable[[], tuple]] = None

    @property
    def columns(self) -> list[str]:
        return [self.names[p] for p in self.positions]


def _bundled(data: Optional[str]) -> Optional[str]:
    if data is None:
        return "s1"
    return data.lower() if data.lower() in datasets.DATASETS and not Path(data).exists() else None


def _open_source(
    data: Optional[str],
    columns: Optional[str],
    on_spark: bool,
    master: str,
    header: Optional[bool] = None,
    sep: Optional[str] = None,
    dropna: bool = False,
    user_column: Optional[str] = None,
) -> Source:
    """The input's schema and the feature columns; no row is read (bundled public data sets aside).

    ``header``, ``sep`` and ``dropna`` say how a CSV is read (:func:`privclust.io.read_frame`).
    ``user_column``: a user-level fit's column of user ids (``--user-column``), not a feature."""
    from ..io import read_schema, read_table, read_table_and_ids

    wanted = _split(columns)
    name = _bundled(data)
    if on_spark:
        if name is not None:
            raise ValueError("--engine spark reads a Parquet or CSV file (or a folder of them), not a bundled data set")
        from ..io import read_spark_frame
        from ..queries.spark import spark_session

        frame = read_spark_frame(data, spark_session(master), header=header, sep=sep)
        names = [str(c) for c in frame.columns]
        user_column = _user_column_name(names, user_column)
        positions = _feature_positions(names, wanted, user_column)
        described = f"{data} (Spark, master {master}, {len(positions)} features)"
        chosen = [names[p] for p in positions]

        def selected(*extra):
            picked = frame.select(*chosen, *extra)
            return picked.dropna() if dropna else picked

        with_users = None if user_column is None else (lambda: (selected(user_column), user_column))
        return Source(described, names, positions, None, selected, True, with_users)
    if name is not None:
        if user_column is not None:
            raise ValueError("--user-column names a column of user ids in your table: a bundled data set has none")
        ds = datasets.load(name)  # public benchmark data
        names = [f"x{j}" for j in range(ds.X.shape[1])]
        positions = _feature_positions(names, wanted, None)
        described = f"bundled data set '{ds.name}' ({ds.description}, scaled to [-1, 1])"
        return Source(described, names, positions, ds.bounds, lambda: ds.X[:, positions])
    names = read_schema(data, header=header, sep=sep)
    user_column = _user_column_name(names, user_column)
    positions = _feature_positions(names, wanted, user_column)
    chosen = [names[p] for p in positions]
    options = {"header": header, "sep": sep, "dropna": dropna}

    def with_users():
        table, ids = read_table_and_ids(data, chosen, user_column, **options)
        return table.X, ids

    return Source(
        str(data),
        names,
        positions,
        None,
        lambda: read_table(data, chosen, **options).X,
        read_with_users=None if user_column is None else with_users,
    )


def _user_column_name(names: list[str], user_column: Optional[str]) -> Optional[str]:
    """The name of the --user-column (given by name or position), checked against the schema."""
    from ..io import select_columns

    return None if user_column is None else names[select_columns(names, [user_column])[0]]


def _feature_positions(names: list[str], wanted, user_column: Optional[str]) -> list[int]:
    """The feature columns: ``wanted`` (--columns) or every column but the user column (a name), never it."""
    from ..io import select_columns

    positions = select_columns(names, wanted)
    if user_column is None:
        return positions
    if wanted is not None and user_column in [names[p] for p in positions]:
        raise ValueError(f"--user-column {user_column!r} is also among --columns: user ids are not a feature")
    return [p for p in positions if names[p] != user_column]


def _reserve_outputs(staged: StagedFiles, **outputs) -> dict:
    """A temporary twin for every output given (``--name=(path, formats)``); None for the others."""
    return {
        name: None if spec[0] is None else staged.reserve(spec[0], f"--{name.replace('_', '-')}", spec[1])
        for name, spec in outputs.items()
    }


def _plot_formats() -> list[str]:
    from ..plotting import plot_formats

    return plot_formats()


# ------------------------------------------------------------------------------------------ ledger


def _ledger_summary_unchecked(path: Path, state: dict) -> dict:
    """The summary of a ledger that failed its check, as far as its values allow (NaN where they do not)."""
    from ..privacy.budget import PrivacyAccountant
    from ..privacy.ledger import _reserved, _spend_from_json

    budget = state["budget"]
    try:
        items = [i for e in state["entries"] for i in [*e["spends"], *_reserved(e)]]
        epsilon, delta = PrivacyAccountant().guarantee(float(budget["delta"]), [_spend_from_json(i) for i in items])
    except (AttributeError, KeyError, TypeError, ValueError):
        epsilon = delta = float("nan")
    return {
        "file": str(path),
        "spent": {"epsilon": epsilon, "delta": delta},
        "budget": {"epsilon": budget.get("epsilon"), "delta": budget.get("delta")},
    }


def _ledger_line(summary) -> str:
    summary = summary if isinstance(summary, dict) else ledger_summary(summary)
    spent, budget = summary["spent"], summary["budget"]
    return (
        f"ledger {summary['file']}: spent (epsilon={spent['epsilon']:.4g}, delta={spent['delta']:.3g}) "
        f"of (epsilon={_ledger_number(budget['epsilon'])}, delta={_ledger_number(budget['delta'])})"
    )


def _ledger_number(value) -> str:
    return f"{value:g}" if isinstance(value, (int, float)) else repr(value)


def _print_ledger(ledger) -> None:
    """The ledger's total, and the sentence that says why it differs from the runs' own figures."""
    console.print(_ledger_line(ledger), highlight=False)
    console.print(f"[dim]({COMPOSITION_NOTE})[/]", highlight=False)


# ------------------------------------------------------------------------------------------ progress


class IterationsColumn(ProgressColumn):
    """'3/7 iterations' once the algorithm has planned its iterations; a long stage before them as
    'placing the starting centers 35%'; 'planning' otherwise."""

    def render(self, task) -> Text:
        stage = task.fields.get("stage")
        if stage:
            return Text(f"{stage} {100.0 * task.completed:.0f}%", style="dim")
        if task.total is None:
            return Text("planning", style="dim")
        return Text(f"{int(task.completed)}/{int(task.total)} iterations")


def _progress(disable: bool) -> Progress:
    return Progress(
        SpinnerColumn(),
        TextColumn("[bold]{task.description}"),
        BarColumn(),  # pulses while the total is unknown
        IterationsColumn(),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
        disable=disable,
    )


# ------------------------------------------------------------------------------------------ fit


@app.command()
def fit(
    data: Optional[str] = DATA_ARGUMENT,
    columns: Optional[str] = COLUMNS_OPTION,
    header: Optional[bool] = HEADER_OPTION,
    sep: Optional[str] = SEP_OPTION,
    dropna: bool = DROPNA_OPTION,
    k: Optional[int] = typer.Option(None, "--k", "-k", help="Number of clusters (default: the data set's)."),
    epsilon: float = typer.Option(1.0, "--epsilon", "-e", help="Privacy budget epsilon."),
    delta: float = typer.Option(1e-6, "--delta", "-d", help="Privacy budget delta; keep it well below 1/n."),
    algorithm: str = typer.Option(
        "auto",
        "--algorithm",
        "-a",
        help="One of: " + "; ".join(f"{name} ({paper})" for name, paper in PAPERS.items()) + ".",
    ),
    bounds: Optional[List[str]] = BOUNDS_OPTION,
    bounds_file: Optional[Path] = BOUNDS_FILE_OPTION,
    radius: Optional[float] = RADIUS_OPTION,
    outer_bounds: bool = typer.Option(
        False,
        "--outer-bounds",
        help="The declared bounds (--bounds, --bounds-file or --radius) are only an outer limit: 10% of the "
        "budget finds a tighter box inside them privately (as without bounds), which helps when they are loose.",
    ),
    public_n: Optional[int] = typer.Option(None, help="A public row count (else a little budget buys a noisy one)."),
    seed: Optional[int] = typer.Option(
        None, help="Seed for reproducible experiments (numpy noise: not for releasing real data)."
    ),
    output: Path = typer.Option(
        Path("centers.csv"), "--output", "-o", help="Where to write the centers (CSV with the input's column names)."
    ),
    labels: Optional[Path] = typer.Option(None, help="Also write each row's cluster label here (not private)."),
    plot: Optional[Path] = typer.Option(None, help="Draw the clusters to this image (.png, .pdf, .svg, ...)."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    steps: bool = typer.Option(False, "--steps", help="List every privacy spend."),
    ledger: Optional[Path] = LEDGER_OPTION,
    ledger_budget: Optional[str] = LEDGER_BUDGET_OPTION,
    engine: str = ENGINE_OPTION,
    spark_master: str = SPARK_MASTER_OPTION,
    user_column: Optional[str] = typer.Option(
        None,
        "--user-column",
        help="Protect users, not rows: the column of user ids (not a feature); give --max-rows-per-user too.",
    ),
    max_rows_per_user: Optional[int] = typer.Option(
        None,
        "--max-rows-per-user",
        help="With --user-column: each user's rows are cut to this many, at random, before anything is released.",
    ),
) -> None:
    """Cluster a table privately and report what it cost.

    Every column of the input is a feature unless --columns names the features (never the --user-column).
    """
    from ..algorithms.base import NON_PRIVATE
    from ..estimator import KMeans

    on_spark = _on_spark(engine)
    with interrupts_reported(), StagedFiles() as staged:
        try:
            _check_public(k, epsilon, delta, algorithm)
            unit = _user_level(user_column, max_rows_per_user)
            wanted_bounds = BoundsRequest.parse(bounds, bounds_file, radius)
            _split(columns)  # the syntax; the names are matched to the input's schema below
            check_separator(sep)
            outputs = _reserve_outputs(staged, output=(output, None), plot=(plot, _plot_formats()))
            if labels is not None and on_spark:  # Spark writes a folder of Parquet files, renamed into place
                outputs["labels"] = staged.reserve_folder(labels, "--labels")
            elif labels is not None:
                outputs["labels"] = staged.reserve(labels, "--labels")
            accounts = open_ledger(ledger, ledger_budget)
            name = None if on_spark else _bundled(data)
            k = k if k is not None or name is None else datasets.DATASETS[name].k
            about = {
                "command": "fit",
                "data": str(data or "s1"),
                "algorithm": algorithm,
                "k": k,
                "epsilon": epsilon,
                "delta": delta,
                "secure_noise": seed is None,
            }
            private = algorithm not in NON_PRIVATE and not wanted_bounds.from_data
            with ledger_run(accounts, epsilon, delta, about, private) as accountant:
                source = _open_source(data, columns, on_spark, spark_master, header, sep, dropna, user_column)
                chosen_bounds = _checked_bounds(wanted_bounds, source, private=private, outer=outer_bounds)
                if k is None:
                    raise ValueError("give the number of clusters with --k")
                model = KMeans(
                    k,
                    epsilon=epsilon,
                    delta=delta,
                    bounds=chosen_bounds,
                    algorithm=algorithm,
                    random_state=seed,
                    public_n=public_n,
                    accountant=accountant,
                    **unit,
                )
                X, user_ids = source.read_with_users() if user_column is not None else (source.read(), None)
                users = {} if user_ids is None else {"user_ids": user_ids}
                with _progress(disable=as_json) as progress:
                    task = progress.add_task(f"{algorithm} on {_rows_shown(X, on_spark)}", total=None)
                    model.fit(
                        X,
                        **users,
                        callback=lambda done, planned: progress.update(task, completed=done, total=planned, stage=None),
                        progress=lambda what, done: progress.update(task, completed=done, total=1.0, stage=what),
                    )
                if on_spark and user_ids is not None:  # the outputs read the feature columns only
                    X = X.select(*source.columns)
        except USER_ERRORS as exc:
            fail(_with_hint(str(exc), columns))
        described = source.description if on_spark or name else f"{source.description} ({X.shape[0]} x {X.shape[1]})"
        result = _write_fit_outputs(staged, outputs, model, source, X, algorithm, k)
    _print_fit(model, source, result, described, algorithm, k, output, plot, labels, as_json, steps, seed, accounts)


def _user_level(user_column: Optional[str], max_rows_per_user: Optional[int]) -> dict:
    """The estimator's privacy unit from --user-column and --max-rows-per-user (public), checked now."""
    from ..privacy.unit import check_privacy_unit

    if (user_column is None) != (max_rows_per_user is None):
        raise ValueError(
            "--user-column and --max-rows-per-user go together: the column of user ids, and the public maximum "
            "of rows kept per user (e.g. --user-column user --max-rows-per-user 5)"
        )
    if user_column is None:
        return {}
    check_privacy_unit("user", max_rows_per_user)
    return {"privacy_unit": "user", "max_rows_per_user": max_rows_per_user}


def _checked_bounds(wanted: BoundsRequest, source: Source, private: bool = False, outer: bool = False):
    """The bounds for ``source``'s feature columns, checked against its schema before any row is read;
    ``outer``: the declared bounds are an outer limit inside which the fit finds a box privately."""
    from ..geometry.domain import make_domain

    chosen = wanted.resolve(source.names, source.positions, source.default_bounds)
    if outer:
        if not wanted.given or wanted.from_data or not private:
            raise ValueError(
                "--outer-bounds makes declared public bounds an outer limit for a private fit: declare them with "
                "--bounds, --bounds-file or --radius (not 'data'), and use a private algorithm"
            )
        make_domain(chosen, len(source.positions))
        return {"outer": chosen}
    if chosen is None and private:  # no bounds: a share of the budget finds a box privately (private_box)
        return None
    if chosen is None:
        raise ValueError(
            "this file needs public bounds: --bounds LOWER,UPPER for every feature (e.g. --bounds 0,1), "
            "--bounds once per feature, --bounds-file FILE or --radius R. Do not derive them from the data; "
            "--bounds data does, and voids the privacy guarantee."
        )
    if chosen == "data" and source.on_spark:
        raise ValueError("--bounds data is not supported with --engine spark: declare public bounds")
    if chosen != "data":
        make_domain(chosen, len(source.positions))  # the domain is public: any problem with it shows now
    return chosen


@dataclass
class FitResult:
    nicv: float


def _write_fit_outputs(staged: StagedFiles, outputs: dict, model, source: Source, X, algorithm, k):
    """Write every output to its temporary twin, then rename them all into place."""
    from ..io import write_points
    from ..metrics import nicv

    domain = model.domain_
    unit_centers = domain.to_unit(model.cluster_centers_.copy())
    if source.on_spark:  # a sample of the rows, brought to the driver, for the NICV and the plot
        rows = np.array(X.limit(PLOT_SAMPLE).collect(), dtype=float)
        row_labels = model.predict(rows)
    else:  # chunk by chunk: a memory-mapped input is never copied whole
        rows, row_labels = X, model.labels_
    result = FitResult(nicv(rows, unit_centers, transform=domain.to_unit))
    try:
        write_points(outputs["output"], model.cluster_centers_, header=source.columns, atomic=False)
        if outputs.get("labels") is not None and source.on_spark:
            model.predict(X).write.mode("overwrite").parquet(str(outputs["labels"]))
        elif outputs.get("labels") is not None:
            write_points(outputs["labels"], model.labels_, header=["label"], atomic=False)
        if outputs.get("plot") is not None:
            from ..plotting import plot_clusters

            spent, shown = model.privacy_spent_.epsilon, _algorithm_shown(model, algorithm)
            title = (
                f"private centers: {shown}, k = {k}, epsilon = {spent:.3g}"
                if np.isfinite(spent)
                else (f"centers, NOT private: {shown}, k = {k}")
            )
            plot_clusters(outputs["plot"], rows, row_labels, model.cluster_centers_, title, columns=source.columns)
        staged.commit()
    except OSError as exc:  # the budget is spent: do not lose the release with the file
        print(_centers_csv(model.cluster_centers_, source.columns), end="")
        fail(f"could not write the outputs ({exc.strerror or exc}); the centers are printed above", 1)
    return result


def _centers_csv(centers: np.ndarray, names: list[str]) -> str:
    from ..io import _csv_line

    return "\n".join([_csv_line(names), *(",".join(f"{v:.10g}" for v in row) for row in centers)]) + "\n"


def _algorithm_shown(model, algorithm: str) -> str:
    """The algorithm as the user should read it: with what ``auto`` chose."""
    chosen = model.fit_info_.get("auto")
    return f"auto: {chosen['chose']}" if chosen is not None else algorithm


# ------------------------------------------------------------------------------------------ the privacy report

NOT_PRIVATE_LABEL = "exact, for you only: not private"


def _rows_shown(X, on_spark: bool) -> str:
    """The progress line's row count: exact, so labelled as such (it is for the data holder only)."""
    return "a Spark DataFrame" if on_spark else f"{X.shape[0]:,} rows ({NOT_PRIVATE_LABEL})"


def _step_cost(step) -> str:
    """One release's cost as ``--steps`` prints it: GDP, (epsilon, delta), or delta alone."""
    if step.is_gdp:
        return f"mu={step.mu:.4g} (GDP)"
    if step.epsilon == 0 and step.delta > 0:
        return f"delta={step.delta:.3g} (delta only)"
    if step.delta > 0:
        return f"epsilon={step.epsilon:.4g}, delta={step.delta:.3g}"
    return f"epsilon={step.epsilon:.4g}"


def _entry_spent(entry: dict, ledger_delta) -> Optional[dict] | str:
    """What one ledger entry spent, as the run reported it: its spends composed at its own delta
    (None if it spent nothing, '?' if the values of a ledger that failed its check cannot be composed)."""
    from ..privacy.budget import PrivacyAccountant
    from ..privacy.ledger import _spend_from_json

    if not entry.get("spends"):
        return None
    try:
        one = PrivacyAccountant()
        for item in entry["spends"]:
            one.spend(_spend_from_json(item))
        about = entry.get("about") if isinstance(entry.get("about"), dict) else {}
        epsilon, delta = one.guarantee(float(about.get("delta", ledger_delta)))
    except (KeyError, TypeError, ValueError, RuntimeError):
        return "?"
    return {"epsilon": epsilon, "delta": delta}


def _print_fit(model, source, result, described, algorithm, k, output, plot, labels, as_json, steps, seed, ledger):
    from ..algorithms.base import NON_PRIVATE

    spent = model.privacy_spent_
    chosen = model.fit_info_.get("auto")
    # The non-private baseline's cell sizes are exact counts of the rows (their sum is n): for the data holder.
    exact_sizes = model.algorithm in NON_PRIVATE and hasattr(model, "cluster_sizes_")
    algorithm = _algorithm_shown(model, algorithm)
    private = bool(np.isfinite(spent.epsilon))  # the lloyd baseline and --bounds data are not
    if as_json:
        # Two parts, never mixed: what the fit released (private, publishable) and what was computed on
        # the raw rows for the data holder only (their count, the cost, the labels): not private.
        summary = {
            "release": {
                "algorithm": algorithm,
                "private": private,
                **({"auto": chosen} if chosen is not None else {}),
                "k": int(k),
                "columns": source.columns,
                "centers": model.cluster_centers_.tolist(),
                "centers_file": str(output),
                "iterations": model.n_iter_,
                **(
                    {"cluster_sizes": model.cluster_sizes_.tolist()}
                    if hasattr(model, "cluster_sizes_") and not exact_sizes
                    else {}
                ),
                "privacy_spent": spent.as_dict(),
                **({"private_box": model.fit_info_["domain"]} if "domain" in model.fit_info_ else {}),
                "secure_noise": seed is None,
                **({"ledger": ledger_summary(ledger)} if ledger is not None else {}),
            },
            "not_private": {
                "note": "computed on your raw rows, for you only: not differentially private, do not publish",
                "data": described,
                "nicv": result.nicv,
                **({"rows_clipped": model.n_rows_clipped_} if hasattr(model, "n_rows_clipped_") else {}),
                **({"cluster_sizes": model.cluster_sizes_.tolist()} if exact_sizes else {}),
                **({"plot_file": str(plot)} if plot is not None else {}),
                **({"labels_file": str(labels)} if labels is not None else {}),
            },
        }
        print(json.dumps(json_safe(summary), indent=2))
        return
    table = Table(title="privclust fit", show_header=True)
    for column in ("algorithm", "k", "epsilon spent", "delta spent", "iterations", "NICV*"):
        table.add_column(column, justify="right")
    table.add_row(
        algorithm, str(k), f"{spent.epsilon:.4g}", f"{spent.delta:.3g}", str(model.n_iter_), f"{result.nicv:.5f}"
    )
    console.print(f"data: {described} [dim](for you only: not private)[/]", highlight=False)
    console.print(f"features: {', '.join(source.columns)}", highlight=False)
    console.print(table)
    unit = spent.privacy_unit
    if unit["unit"] == "user":  # the neighbours the guarantee is for
        console.print(
            f"privacy unit: a user (each user's rows cut to at most {unit['max_rows_per_user']}, at random)",
            highlight=False,
        )
    console.print(
        "* NICV = k-means cost / n on the data scaled to [-1, 1]^d, computed on your data"
        + (f" (its first {PLOT_SAMPLE:,} rows on Spark)" if source.on_spark else "")
        + ": for you, not for publication."
    )
    if "domain" in model.fit_info_:  # no --bounds: the box found privately, and its cost (part of the total)
        box = model.fit_info_["domain"]
        console.print(
            "bounds found privately: "
            + ", ".join(f"{c} [{lo:.4g}, {hi:.4g}]" for c, lo, hi in zip(source.columns, box["lower"], box["upper"]))
            + f" for (epsilon={box['epsilon']:.3g}, delta={box['delta']:.3g})",
            highlight=False,
        )
    if steps:
        st = Table(title="privacy spends", show_header=True)
        st.add_column("release")
        st.add_column("cost", justify="right")
        for s in spent.steps:
            st.add_row(s.label, _step_cost(s))
        console.print(st)
    sizes = getattr(model, "cluster_sizes_", None)
    if sizes is not None:
        empty = model.fit_info_.get("nearly_empty_centers", 0)
        console.print(
            (
                f"cluster sizes [dim]({NOT_PRIVATE_LABEL})[/]"
                if exact_sizes
                else ("noisy cluster sizes (private)" if private else "noisy cluster sizes [bold](NOT private)[/]")
            )
            + f": {', '.join(f'{s:,.0f}' for s in sizes)}"
            + (f" -- [yellow]{empty} center(s) nearly empty (under 1% of the rows)[/]" if empty else ""),
            highlight=False,
        )
    clipped = getattr(model, "n_rows_clipped_", None)
    if clipped:
        console.print(
            f"[yellow]{clipped:,} rows lay outside --bounds and were clipped to them[/] [dim](for you only: "
            "not private)[/]; bounds that cut the data move its clusters",
            highlight=False,
        )
    if not private:
        console.print(
            "[bold red]NOT private[/]: epsilon = inf ("
            + ("the non-private baseline" if model.algorithm in NON_PRIVATE else "the bounds were read off the data")
            + "); nothing here may be published",
            highlight=False,
        )
    if seed is not None:
        console.print("[yellow]--seed was given: noise came from numpy samplers; do not publish this result.[/]")
    if ledger is not None:
        _print_ledger(ledger)
    written = [f"centers to {output}"]
    written += [f"labels to {labels} (not private)"] if labels is not None else []
    written += [f"plot to {plot} (shows your raw rows: not private)"] if plot is not None else []
    console.print("wrote " + ", ".join(written), highlight=False)


# ------------------------------------------------------------------------------------------ elbow


@app.command()
def elbow(
    data: Optional[str] = DATA_ARGUMENT,
    columns: Optional[str] = COLUMNS_OPTION,
    k_max: int = typer.Option(30, "--k-max", help="Largest k of the curve."),
    epsilon: float = typer.Option(1.0, "--epsilon", "-e", help="Privacy budget epsilon (the whole curve)."),
    delta: float = typer.Option(1e-6, "--delta", "-d", help="Privacy budget delta; keep it well below 1/n."),
    bounds: Optional[List[str]] = BOUNDS_OPTION,
    bounds_file: Optional[Path] = BOUNDS_FILE_OPTION,
    radius: Optional[float] = RADIUS_OPTION,
    seed: Optional[int] = typer.Option(None, help="Seed for reproducible experiments (not for real releases)."),
    plot: Path = typer.Option(Path("elbow.png"), help="Where to save the curve (.png, .pdf, .svg, ...)."),
    as_json: bool = typer.Option(False, "--json", help="Print the curve as JSON."),
    ledger: Optional[Path] = LEDGER_OPTION,
    ledger_budget: Optional[str] = LEDGER_BUDGET_OPTION,
    engine: str = ENGINE_OPTION,
    spark_master: str = SPARK_MASTER_OPTION,
    header: Optional[bool] = HEADER_OPTION,
    sep: Optional[str] = SEP_OPTION,
    dropna: bool = DROPNA_OPTION,
) -> None:
    """The private elbow curve: one run of the private greedy of Dupré la Tour, Henzinger & Saulpic (ICML 2024)
    gives a noisy cost for every k <= k-max, for the price of that one run.

    Every column of the input is a feature unless --columns names the features.
    """
    from ..elbow import elbow_curve

    on_spark = _on_spark(engine)
    with interrupts_reported(), StagedFiles() as staged:
        try:
            _check_public(k_max, epsilon, delta, k_name="--k-max")
            wanted_bounds = BoundsRequest.parse(bounds, bounds_file, radius)
            _split(columns)
            outputs = _reserve_outputs(staged, plot=(plot, _plot_formats()))
            accounts = open_ledger(ledger, ledger_budget)
            about = {"command": "elbow", "data": str(data or "s1"), "k_max": k_max, "epsilon": epsilon, "delta": delta}
            about["secure_noise"] = seed is None
            private = not wanted_bounds.from_data  # the greedy: Gaussian releases by default
            with ledger_run(accounts, epsilon, delta, about, private) as accountant:
                source = _open_source(data, columns, on_spark, spark_master, header, sep, dropna)
                chosen = _checked_bounds(wanted_bounds, source)
                X = source.read()
                with err_console.status(f"private greedy with k = {k_max} on {_rows_shown(X, on_spark)}"):
                    curve = elbow_curve(X, k_max, epsilon, delta, chosen, random_state=seed, accountant=accountant)
        except USER_ERRORS as exc:
            fail(_with_hint(str(exc), columns))
        try:
            curve.plot(outputs["plot"])
            staged.commit()
        except OSError as exc:
            print(json.dumps(json_safe({"ks": curve.ks.tolist(), "costs": curve.costs.tolist()})))
            fail(f"could not write the plot ({exc.strerror or exc}); the curve is above", 1)
    private = bool(np.isfinite(curve.privacy_spent.epsilon))  # --bounds data is not
    if as_json:
        release = {
            "private": private,
            "ks": curve.ks.tolist(),
            "costs": curve.costs.tolist(),
            "elbow": curve.elbow,
            "columns": source.columns,
            "privacy_spent": curve.privacy_spent.as_dict(),
            **({"ledger": ledger_summary(accounts)} if accounts is not None else {}),
        }
        print(json.dumps(json_safe(release)))
        return
    shown = "private elbow curve" if private else "elbow curve, NOT private,"
    table = Table(title=f"{shown} on {source.description}", show_header=True)
    table.add_column("k", justify="right")
    table.add_column("noisy cost", justify="right")
    for k, cost in zip(curve.ks, curve.costs):
        table.add_row(f"{k}" + (" <- elbow" if k == curve.elbow else ""), f"{cost:.4g}")
    console.print(table)
    console.print(f"elbow at k = {curve.elbow}; privacy spent {curve.privacy_spent}; plot saved to {plot}")
    if not private:
        console.print("[bold red]NOT private[/]: the bounds were read off the data; nothing here may be published")
    if accounts is not None:
        _print_ledger(accounts)
    if seed is not None:
        console.print("--seed was given: noise came from numpy samplers; do not publish this result.")


# ------------------------------------------------------------------------------------------ ledger


@ledger_app.command("init")
def ledger_init(
    path: Path = typer.Argument(..., help="The ledger file to create (JSON)."),
    epsilon: float = typer.Option(..., "--epsilon", "-e", help="The total epsilon every run together may spend."),
    delta: float = typer.Option(..., "--delta", "-d", help="The total delta; keep it well below 1/n."),
) -> None:
    """Create a ledger with a total budget for one data set: every run given --ledger FILE spends from it."""
    from ..privacy.budget import Budget
    from ..privacy.ledger import LedgerAccountant

    try:
        LedgerAccountant.create(path, Budget(epsilon, delta))
    except USER_ERRORS as exc:
        fail(str(exc))
    console.print(f"created {path}: budget (epsilon={epsilon:g}, delta={delta:g})", highlight=False)


@ledger_app.command("show")
def ledger_show(
    path: Path = typer.Argument(..., help="The ledger file."),
    as_json: bool = typer.Option(False, "--json", help="Print the ledger as JSON."),
) -> None:
    """Every run charged to a ledger, what each spent, and the total against the budget.

    A ledger that fails its integrity check (edited by hand, or an older format) is shown too, flagged,
    and the exit code is 1: no run may spend from it."""
    from ..privacy.ledger import LedgerAccountant, inspect_ledger

    try:
        state, problem = inspect_ledger(path)
        accounts = LedgerAccountant(path) if problem is None else None
    except USER_ERRORS as exc:
        fail(str(exc))
    entries = state["entries"]
    summary = ledger_summary(accounts) if accounts is not None else _ledger_summary_unchecked(path, state)
    for entry in entries:  # what each run spent, as the run itself reported it
        entry["spent"] = _entry_spent(entry, state["budget"].get("delta"))
    if as_json:
        check = {"ok": problem is None, **({"problem": problem} if problem is not None else {})}
        print(json.dumps(json_safe({"ledger": summary, "check": check, "entries": entries}), indent=2))
        if problem is not None:
            raise typer.Exit(1)
        return
    table = Table(title=f"ledger {path}", show_header=True)
    for column in ("time (UTC)", "command", "data", "requested (eps, delta)", "spent (eps, delta)", "status"):
        table.add_column(column, no_wrap=column == "time (UTC)")
    for entry in entries:
        about = entry.get("about") if isinstance(entry.get("about"), dict) else {}
        try:
            requested = f"({about['epsilon']:g}, {about['delta']:g})" if "epsilon" in about else ""
        except (KeyError, TypeError, ValueError):
            requested = "?"
        status = "running or killed: whole request held" if entry.get("reserved") else "done"
        spent = entry["spent"]
        spent = "?" if spent == "?" else f"({spent['epsilon']:.4g}, {spent['delta']:.3g})" if spent else "-"
        command = str(about.get("command", "")) + (f" {about['algorithm']}" if "algorithm" in about else "")
        when = str(entry.get("time", ""))[:16].replace("T", " ")  # UTC, to the minute
        table.add_row(when, command, str(about.get("data", "")), requested, spent, status)
    console.print(table)
    if accounts is not None:
        _print_ledger(accounts)
    else:
        console.print(_ledger_line(summary), highlight=False)
        flag = "FAILS its integrity check" if state["version"] != 1 else "has no integrity check (version 1)"
        err_console.print(f"[bold red]this ledger {flag}:[/] {problem}", highlight=False)
        raise typer.Exit(1)


@ledger_app.command("upgrade")
def ledger_upgrade(path: Path = typer.Argument(..., help="The ledger file.")) -> None:
    """Add the integrity check (total and checksum) to a version-1 ledger, after checking its values.

    Look at it with 'privclust ledger show FILE' first: the upgrade vouches for its entries as they are."""
    from ..privacy.ledger import upgrade_ledger

    try:
        changed = upgrade_ledger(path)
    except USER_ERRORS as exc:
        fail(str(exc))
    message = "upgraded to version 2: it now carries its checksum" if changed else "already version 2, and intact"
    console.print(f"{path}: {message}", highlight=False)


# ------------------------------------------------------------------------------------------ datasets


@app.command("datasets")
def list_datasets() -> None:
    """List the bundled benchmark data sets."""
    table = Table(title="bundled data sets", show_header=True)
    table.add_column("name")
    table.add_column("k", justify="right")
    table.add_column("description")
    for name, spec in datasets.DATASETS.items():
        table.add_row(name, str(spec.k), spec.description)
    console.print(table)


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """A warning as the command's own message: 'privclust: warning: ...', without a source location (the
    line that raised it is privclust's or typer's, never the user's: their line is the command)."""
    print(f"privclust: warning: {message}", file=sys.stderr if file is None else file)


INTERRUPTED = 130  # the exit code after Ctrl-C (128 + SIGINT)


def main() -> None:
    warnings.showwarning = _show_warning
    try:
        app()
    except KeyboardInterrupt:  # pragma: no cover -- struck outside a command's own handling (e.g. while importing)
        err_console.print(INTERRUPTED_MESSAGE)
        _exit_at_once(INTERRUPTED)
    except SystemExit as exc:
        if exc.code == INTERRUPTED:
            if not interrupt_said():  # struck before the command's own handling: nothing was written yet
                err_console.print(INTERRUPTED_MESSAGE, soft_wrap=True)
            _exit_at_once(INTERRUPTED)
        raise


def _exit_at_once(code: int) -> None:
    """End the process now, without the interpreter's teardown, after Ctrl-C.

    By the time Ctrl-C reaches here it has been handled where it struck: the staged outputs were
    discarded, the ledger's reservation released and the message printed; the temporary files have no
    name and the kernel closes them.  What is left is freeing numpy, pandas, scikit-learn, SciPy and
    OpenDP module by module, which takes a second or more on a loaded machine: skipped, so that the
    command is gone within the 2 s a user waits (issue 28)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)

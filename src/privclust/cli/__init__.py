"""The ``privclust`` command line."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import numpy as np
import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from .. import datasets
from ..algorithms import ALGORITHMS
from ..estimator import KMeans
from ..metrics import nicv
from ..privacy.budget import BudgetExceededError
from .bench import bench_app
from .federated import federated_app
from .local import local_app
from .stream import stream

app = typer.Typer(
    name="privclust",
    help="Differentially private clustering: fit, inspect data sets, and benchmark.",
    no_args_is_help=True,
    add_completion=False,
)
app.add_typer(bench_app, name="bench")
app.add_typer(federated_app, name="federated")
app.add_typer(local_app, name="local")
app.command("stream")(stream)
console = Console()
err_console = Console(stderr=True)


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
    err_console.print(f"[bold red]error:[/] {message}")
    raise typer.Exit(code)


def _parse_bounds(bounds: Optional[str], radius: Optional[float]):
    if radius is not None:
        if bounds is not None:
            fail("give either --bounds or --radius, not both")
        return radius
    if bounds is None:
        return None
    if bounds.strip().lower() == "data":
        return "data"
    try:
        parts = [float(p) for p in bounds.split(",")]
    except ValueError:
        fail(f"--bounds must be 'LOWER,UPPER' (e.g. '0,255') or 'data', got {bounds!r}")
    if len(parts) != 2:
        fail(f"--bounds must be two numbers 'LOWER,UPPER', got {bounds!r}")
    return tuple(parts)


PLOT_SAMPLE = 5_000  # rows brought back from Spark for the NICV and the plot
ENGINE_OPTION = typer.Option("local", help="local (rows in this process) or spark (rows stay in Spark).")
SPARK_MASTER_OPTION = typer.Option("local[*]", help="The Spark master URL for --engine spark.")


def _on_spark(engine: str) -> bool:
    if engine not in ("local", "spark"):
        fail(f"--engine must be local or spark, got {engine!r}")
    return engine == "spark"


def _load_on(on_spark: bool, data: Optional[str], master: str):
    return _load_spark(data, master) if on_spark else _load(data)


def _rows_text(X, on_spark: bool) -> str:
    return "a Spark DataFrame" if on_spark else f"{X.shape[0]:,} rows"


def _load_spark(data: Optional[str], master: str):
    """(Spark DataFrame, None, None, description): a file or folder read by Spark."""
    from ..io import read_spark_frame
    from ..queries.spark import spark_session

    if data is None or (data.lower() in datasets.DATASETS and not Path(data).exists()):
        raise ValueError("--engine spark reads a Parquet or CSV file (or a folder of them), not a bundled data set")
    frame = read_spark_frame(data, spark_session(master))
    return frame, None, None, f"{data} (Spark, master {master}, {len(frame.columns)} features)"


def _load(data: Optional[str]):
    """(X, default k, default bounds, description)."""
    from ..io import read_points

    if data is None or (data.lower() in datasets.DATASETS and not Path(data).exists()):
        ds = datasets.load(data or "s1")
        return ds.X, ds.k, ds.bounds, f"bundled data set '{ds.name}' ({ds.description}, scaled to [-1, 1])"
    X = read_points(data)
    return X, None, None, f"{data} ({X.shape[0]} x {X.shape[1]})"


@app.command()
def fit(
    data: Optional[str] = typer.Argument(
        None, help="A CSV / Parquet / .npy file, or a bundled data set name (default: s1)."
    ),
    k: Optional[int] = typer.Option(None, "--k", "-k", help="Number of clusters (default: the data set's)."),
    epsilon: float = typer.Option(1.0, "--epsilon", "-e", help="Privacy budget epsilon."),
    delta: float = typer.Option(1e-6, "--delta", "-d", help="Privacy budget delta (Gaussian algorithms)."),
    algorithm: str = typer.Option("fastlloyd", "--algorithm", "-a", help=f"One of: {', '.join(ALGORITHMS)}."),
    bounds: Optional[str] = typer.Option(
        None, help="Public per-feature bounds 'LOWER,UPPER' (required for files), or 'data' (not private!)."
    ),
    radius: Optional[float] = typer.Option(None, help="Public bound: points lie in the ball of this radius."),
    public_n: Optional[int] = typer.Option(None, help="A public row count (else a little budget buys a noisy one)."),
    seed: Optional[int] = typer.Option(
        None, help="Seed for reproducible experiments (numpy noise: not for releasing real data)."
    ),
    output: Path = typer.Option(Path("centers.csv"), "--output", "-o", help="Where to write the centers."),
    labels: Optional[Path] = typer.Option(None, help="Also write each row's cluster label here."),
    plot: Optional[Path] = typer.Option(None, help="Draw the clusters to this PNG."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    steps: bool = typer.Option(False, "--steps", help="List every privacy spend."),
    engine: str = ENGINE_OPTION,
    spark_master: str = SPARK_MASTER_OPTION,
) -> None:
    """Cluster a table privately and report what it cost."""
    on_spark = _on_spark(engine)
    if on_spark and labels is not None and labels.exists():
        fail(f"{labels} exists: with --engine spark, --labels names a new Parquet folder for Spark to write")
    try:
        X, default_k, default_bounds, described = _load_on(on_spark, data, spark_master)
        chosen_bounds = _parse_bounds(bounds, radius)
        if chosen_bounds is None:
            chosen_bounds = default_bounds
        if chosen_bounds is None:
            fail(
                "this file needs public bounds: --bounds LOWER,UPPER (e.g. --bounds 0,1) or --radius R. "
                "Do not derive them from the data; --bounds data does, and voids the privacy guarantee."
            )
        k = k if k is not None else default_k
        if k is None:
            fail("give the number of clusters with --k")
        model = KMeans(
            k,
            epsilon=epsilon,
            delta=delta,
            bounds=chosen_bounds,
            algorithm=algorithm,
            random_state=seed,
            public_n=public_n,
        )
        with Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total} iterations"),
            TimeElapsedColumn(),
            console=err_console,
            transient=True,
            disable=as_json,
        ) as progress:
            task = progress.add_task(f"{algorithm} on {_rows_text(X, on_spark)}", total=None)

            def callback(done: int, planned: int) -> None:
                progress.update(task, completed=done, total=planned)

            model.fit(X, callback=callback)
    except (ValueError, TypeError, FileNotFoundError, IsADirectoryError, BudgetExceededError) as exc:
        fail(str(exc))

    from ..io import write_points

    write_points(output, model.cluster_centers_)
    if labels is not None and on_spark:  # the executors label their rows and write them: nothing gathered
        model.predict(X).write.parquet(str(labels))
    elif labels is not None:
        write_points(labels, model.labels_, header=["label"])
    domain = model.domain_
    # NICV and the plot are for the data holder, on their own rows; on Spark, on a sample of them.
    rows = np.array(X.limit(PLOT_SAMPLE).collect(), dtype=float) if on_spark else np.asarray(X, dtype=float)
    unit_nicv = nicv(domain.to_unit(rows.copy()), domain.to_unit(model.cluster_centers_.copy()))
    spent = model.privacy_spent_
    if plot is not None:
        from ..plotting import plot_clusters

        plot_clusters(plot, rows, model.predict(rows), model.cluster_centers_, f"{algorithm}, k={k}, eps={epsilon:g}")
    if as_json:
        # Two parts, never mixed: what the fit released (private, publishable) and what was computed on
        # the raw rows for the data holder only (their count, the cost): not private, do not publish.
        summary = {
            "release": {
                "algorithm": algorithm,
                "k": int(k),
                "centers": model.cluster_centers_.tolist(),
                "centers_file": str(output),
                "iterations": model.n_iter_,
                "privacy_spent": spent.as_dict(),
                "secure_noise": seed is None,
            },
            "not_private": {
                "note": "computed on your raw rows, for you only: not differentially private, do not publish",
                "data": described,
                "nicv": unit_nicv,
                **({"plot_file": str(plot)} if plot is not None else {}),
            },
        }
        print(json.dumps(json_safe(summary), indent=2))
        return
    table = Table(title="privclust fit", show_header=True)
    for column in ("algorithm", "k", "epsilon spent", "delta spent", "iterations", "NICV*"):
        table.add_column(column, justify="right")
    table.add_row(
        algorithm, str(k), f"{spent.epsilon:.4g}", f"{spent.delta:.3g}", str(model.n_iter_), f"{unit_nicv:.5f}"
    )
    console.print(f"data: {described} [dim](for you only: not private)[/]")
    console.print(table)
    console.print(
        "* NICV = k-means cost / n on the data scaled to [-1, 1]^d, computed on your data"
        + (f" (its first {PLOT_SAMPLE:,} rows on Spark)" if on_spark else "")
        + ": for you, not for publication."
    )
    if steps:
        st = Table(title="privacy spends", show_header=True)
        st.add_column("release")
        st.add_column("cost", justify="right")
        for s in spent.steps:
            st.add_row(s.label, f"mu={s.mu:.4g} (GDP)" if s.is_gdp else f"epsilon={s.epsilon:.4g}")
        console.print(st)
    if seed is not None:
        console.print("[yellow]--seed was given: noise came from numpy samplers; do not publish this result.[/]")
    console.print(f"centers written to {output}" + (f", plot to {plot}" if plot else ""))


@app.command()
def elbow(
    data: Optional[str] = typer.Argument(
        None, help="A CSV / Parquet / .npy file, or a bundled data set name (default: s1)."
    ),
    k_max: int = typer.Option(30, "--k-max", help="Largest k of the curve."),
    epsilon: float = typer.Option(1.0, "--epsilon", "-e", help="Privacy budget epsilon (the whole curve)."),
    delta: float = typer.Option(1e-6, "--delta", "-d", help="Privacy budget delta."),
    bounds: Optional[str] = typer.Option(None, help="Public per-feature bounds 'LOWER,UPPER' (required for files)."),
    radius: Optional[float] = typer.Option(None, help="Public bound: points lie in the ball of this radius."),
    seed: Optional[int] = typer.Option(None, help="Seed for reproducible experiments (not for real releases)."),
    plot: Path = typer.Option(Path("elbow.png"), help="Where to save the curve."),
    as_json: bool = typer.Option(False, "--json", help="Print the curve as JSON."),
    engine: str = ENGINE_OPTION,
    spark_master: str = SPARK_MASTER_OPTION,
) -> None:
    """The private elbow curve: one greedy run gives a noisy cost for every k <= k-max (seed 000)."""
    from ..elbow import elbow_curve

    on_spark = _on_spark(engine)
    try:
        X, _, default_bounds, described = _load_on(on_spark, data, spark_master)
        chosen = _parse_bounds(bounds, radius)
        chosen = default_bounds if chosen is None else chosen
        if chosen is None:
            fail("this file needs public bounds: --bounds LOWER,UPPER or --radius R")
        with err_console.status(f"greedy with k = {k_max} on {_rows_text(X, on_spark)}"):
            curve = elbow_curve(X, k_max, epsilon, delta, chosen, random_state=seed)
    except (ValueError, TypeError, FileNotFoundError, IsADirectoryError, BudgetExceededError) as exc:
        fail(str(exc))
    curve.plot(plot)
    if as_json:
        print(
            json.dumps(
                {
                    "ks": curve.ks.tolist(),
                    "costs": curve.costs.tolist(),
                    "elbow": curve.elbow,
                    "privacy_spent": curve.privacy_spent.as_dict(),
                }
            )
        )
        return
    table = Table(title=f"private elbow curve on {described}", show_header=True)
    table.add_column("k", justify="right")
    table.add_column("noisy cost", justify="right")
    for k, cost in zip(curve.ks, curve.costs):
        table.add_row(f"{k}" + (" <- elbow" if k == curve.elbow else ""), f"{cost:.4g}")
    console.print(table)
    console.print(f"elbow at k = {curve.elbow}; privacy spent {curve.privacy_spent}; plot saved to {plot}")
    if seed is not None:
        console.print("--seed was given: noise came from numpy samplers; do not publish this result.")


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


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:  # pragma: no cover
        err_console.print("interrupted")
        sys.exit(130)

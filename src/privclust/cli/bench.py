"""``privclust bench ...``: benchmarks that write JSON + markdown + PNG."""

from __future__ import annotations

import os
import platform
import warnings
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from ..privacy.leaks import PrivacyLeakWarning
from .common import fail

bench_app = typer.Typer(help="Benchmarks: utility over epsilon, speed and memory.", no_args_is_help=True)
console = Console(stderr=True)


@bench_app.callback()
def _experiments() -> None:
    """Benchmarks seed their noise to be repeatable (their timings use the secure default, see
    docs/benchmarks.md): the seeded-noise warning is for releases, and would flood every worker's output."""
    warnings.filterwarnings("ignore", message="a seeded random_state draws the noise", category=PrivacyLeakWarning)


def _split(text: str, cast=str) -> list:
    return [cast(part.strip()) for part in text.split(",") if part.strip()]


def _progress() -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
    )


def _methods(text: Optional[str], default: list[str]) -> list[str]:
    from ..bench.utility import available_methods

    chosen = _split(text) if text else default
    unknown = [m for m in chosen if m not in available_methods()]
    if unknown:
        raise typer.BadParameter(f"unknown methods {unknown}; available: {', '.join(available_methods())}")
    return chosen


def _with_progress(label: str, total: int, run):
    """``run(on_done)`` under a progress bar that advances each time it calls ``on_done``."""
    with _progress() as progress:
        task = progress.add_task(label, total=total)
        return run(lambda _: progress.advance(task))


def _run_jobs(jobs, workers: int, label: str):
    """Run utility-style jobs with a progress bar; say which peers were missing."""
    from ..bench.utility import run_utility

    result = _with_progress(label, len(jobs), lambda on_done: run_utility(jobs, workers=workers, on_done=on_done))
    for why in result.missing.values():
        console.print(f"[yellow]peer missing:[/] {why}")
    return result


def machine_description() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores, {platform.system()} {platform.release()}, Python {platform.python_version()}"


@bench_app.command("utility")
def utility(
    datasets: str = typer.Option(
        "iris,lsun,s1,house,adult,wine,breast,yeast,mnist,birch2",
        help="Comma-separated bundled data sets and synthetic specs (synth:k=8,d=16,seed=2 or g2:d=64,seed=0).",
    ),
    methods: Optional[str] = typer.Option(None, help="Comma-separated methods (default: all, plus kmeans++)."),
    epsilons: str = typer.Option("0.1,0.25,0.5,0.75,1.0", help="Comma-separated epsilon grid."),
    runs: int = typer.Option(20, help="Seeds per (data set, method, epsilon); the paper uses 100."),
    quick: bool = typer.Option(False, "--quick", help="A small run: 3 seeds (about 30 seconds)."),
    first_seed: int = typer.Option(0, help="Seeds are first_seed .. first_seed + runs - 1."),
    private_n: bool = typer.Option(False, "--private-n", help="Spend budget on a noisy row count."),
    workers: int = typer.Option(os.cpu_count() or 1, help="Parallel worker processes."),
    out: Path = typer.Option(Path("bench-results/utility"), help="Output folder."),
) -> None:
    """NICV vs epsilon with 95% CIs, AUC per method, and the Figure-2 plots of FastLloyd (Diaa, Humphries
    & Kerschbaum, 2024)."""
    from .. import datasets as ds_module
    from ..bench.utility import default_methods, load_data, plan_jobs, split_datasets, write_utility_report

    names = split_datasets(datasets)
    for name in names:
        if ":" in name:
            try:
                load_data(name)
            except (ValueError, KeyError) as exc:
                raise typer.BadParameter(f"bad synthetic data spec {name!r}: {exc}") from None
        elif name not in ds_module.DATASETS:
            raise typer.BadParameter(f"unknown data set {name!r}; bundled: {', '.join(ds_module.DATASETS)}")
    chosen = _methods(methods, default_methods())
    eps = _split(epsilons, float)
    if quick:
        runs = min(runs, 3)
    jobs = plan_jobs(names, chosen, eps, range(first_seed, first_seed + runs), private_n)
    result = _run_jobs(jobs, workers, "utility runs")
    report = write_utility_report(
        result.rows, eps, out, title=f"Utility benchmark ({machine_description()})", missing=result.missing
    )
    console.print(f"wrote {report}, {out / 'utility.jsonl'} and plots")


@bench_app.command("speed")
def speed(
    n: str = typer.Option("10000,100000,1000000", help="Comma-separated row counts."),
    d: str = typer.Option("10", help="Comma-separated dimensions."),
    k: str = typer.Option("10", help="Comma-separated cluster counts."),
    methods: Optional[str] = typer.Option(None, help="Comma-separated methods (default: all private + sklearn)."),
    repeats: int = typer.Option(3, help="Timed repeats (best is kept)."),
    max_gib: float = typer.Option(2.0, help="Skip (and list) configurations whose input exceeds this many GiB."),
    peer_max_n: int = typer.Option(1_000_000, help="Run peers only up to this many rows (they can be very slow)."),
    noise_draws: int = typer.Option(100_000, help="Secure noise values timed in one call (seeded: ten times as many)."),
    targets: Optional[str] = typer.Option(
        None,
        help="Issue 28's rows instead of the grid: comma-separated of default, greedy, large-k (or 'all'); each "
        "fit at --n (its first value) x --d next to scikit-learn's, alternating, --repeats pairs.",
    ),
    large_k: str = typer.Option("1000,3000,5000", help="The large-k target's k values (900 x 2 rows)."),
    out: Path = typer.Option(Path("bench-results/speed"), help="Output folder."),
) -> None:
    """Wall time and peak memory of fit vs scikit-learn, with log-log plots and growth exponents; noise draws
    per second, seeded and secure; an accountant's check as the spends it has recorded grow.  With --targets: issue 28's rows, each timed against scikit-learn in pairs."""
    from ..algorithms import ALGORITHMS
    from ..algorithms.base import NON_PRIVATE
    from ..bench.peers import PEERS
    from ..bench.speed import (
        SKLEARN,
        TARGETS,
        accountant_checks,
        noise_rates,
        run_speed,
        run_targets,
        write_speed_report,
    )

    if targets is not None:
        wanted = list(TARGETS) if targets == "all" else _split(targets)
        unknown = [t for t in wanted if t not in TARGETS]
        if unknown:
            raise typer.BadParameter(f"unknown targets {unknown}; available: {', '.join(TARGETS)}, all")
        ns, dims, ks, big_ks = _split(n, int), _split(d, int), _split(k, int), _split(large_k, int)
        with _progress() as progress:
            task = progress.add_task("target runs", total=len(wanted) + len(big_ks) - ("large-k" in wanted))
            measured = run_targets(
                wanted, ns[0], dims[0], ks[0], big_ks, repeats, on_done=lambda _: progress.advance(task)
            )
        report = write_speed_report([], out, machine_description(), targets=measured)
        console.print(report.read_text())
        console.print(f"wrote {report}")
        return

    available = [*ALGORITHMS, SKLEARN, *PEERS]
    chosen = _split(methods) if methods else [m for m in available if m not in NON_PRIVATE]
    unknown = [m for m in chosen if m not in available]
    if unknown:
        raise typer.BadParameter(f"unknown methods {unknown}; available: {', '.join(available)}")
    ns, dims, ks = _split(n, int), _split(d, int), _split(k, int)
    with _progress() as progress:
        task = progress.add_task("speed runs", total=len(ns) * len(dims) * len(ks) * len(chosen))
        rows, missing = run_speed(
            ns,
            dims,
            ks,
            chosen,
            repeats,
            on_done=lambda _: progress.advance(task),
            max_input_bytes=int(max_gib * 2**30),
            peer_max_n=peer_max_n,
        )
    for what, why in missing.items():
        console.print(f"[yellow]not measured:[/] {what}: {why}")
    report = write_speed_report(
        rows, out, machine_description(), missing, noise_rates(noise_draws), checks=accountant_checks()
    )
    console.print(report.read_text())
    console.print(f"wrote {report}")


peers_app = typer.Typer(help="Peer libraries, each in its own environment.", no_args_is_help=True)
bench_app.add_typer(peers_app, name="peers")


@peers_app.command("list")
def peers_list() -> None:
    """Show the peers and whether each is installed."""
    from ..bench import peers

    for name, peer in peers.PEERS.items():
        state = "installed" if peers.is_installed(name) else "missing"
        console.print(f"{name}: {state} ({', '.join(peer.requirements)}) in {peers.peers_dir() / name}")
        for i, src in enumerate(peer.sources, 1):
            console.print(f"  --source {i}: {src.what}")


@peers_app.command("install")
def peers_install(
    name: str = typer.Argument(..., help="Peer to install, e.g. diffprivlib."),
    source: Optional[list[Path]] = typer.Option(
        None,
        help="Local source of a peer that is not on the package index, repeated in the order `peers list` shows "
        "(google-lsh: its learning/ folder; pe-means: a PE-means checkout, then that learning/ folder).",
    ),
) -> None:
    """Create the peer's own virtual environment and install it (needs the package index)."""
    from ..bench import peers

    if name not in peers.PEERS:
        raise typer.BadParameter(f"unknown peer {name!r}; known: {', '.join(peers.PEERS)}")
    try:
        target = peers.install(name, source)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    console.print(f"installed {name} in {target}")


@bench_app.command("scaling")
def scaling(
    methods: str = typer.Option("fastlloyd,glloyd,sulloyd", help="Comma-separated methods."),
    epsilons: str = typer.Option("0.1,0.25,0.5,0.75,1.0", help="Comma-separated epsilon grid."),
    sets: int = typer.Option(3, help="Independently generated data sets per (k, d)."),
    runs: int = typer.Option(3, help="Seeds per data set."),
    quick: bool = typer.Option(False, "--quick", help="A small grid, one set, two seeds (a couple of minutes)."),
    workers: int = typer.Option(os.cpu_count() or 1, help="Parallel worker processes."),
    out: Path = typer.Option(Path("bench-results/scaling"), help="Output folder."),
) -> None:
    """AUC as d and k grow, on synthetic data with controlled separation: Figures 3 and 4 of FastLloyd (Diaa,
    Humphries & Kerschbaum, 2024)."""
    from ..bench.scaling import scaling_plan, write_scaling_report

    chosen = _methods(methods, [])
    if quick:
        sets, runs = 1, 2
    eps = _split(epsilons, float)
    jobs, parts = scaling_plan(chosen, eps, sets=sets, runs=runs, quick=quick)
    result = _run_jobs(jobs, workers, "scaling runs")
    report = write_scaling_report(result.rows, parts, eps, out, machine_description())
    console.print(f"wrote {report} and plots")


@bench_app.command("audit")
def audit(
    scale: float = typer.Option(1.0, help="Multiply every audit's default number of draws (0.2: a quick look)."),
    draws: Optional[int] = typer.Option(None, help="Draws per side for every audit (default: each audit's own)."),
    only: Optional[str] = typer.Option(None, help="Comma-separated audit names (default: all)."),
    controls: bool = typer.Option(True, "--controls/--no-controls", help="Audit the broken-on-purpose controls too."),
    confidence: float = typer.Option(0.999, help="Confidence of each empirical lower bound."),
    out: Path = typer.Option(Path("bench-results/audit"), help="Output folder."),
) -> None:
    """Claimed vs empirical epsilon for every mechanism and algorithm, and controls broken on purpose.

    Exits with status 1 if a real mechanism's lower bound exceeds its claim or a control is not caught.
    """
    import json
    import time

    from .. import audit as auditing

    if not 0.5 <= confidence < 1:
        raise typer.BadParameter("confidence must lie in [0.5, 1)")
    if scale <= 0 or (draws is not None and draws < 40):
        raise typer.BadParameter("need scale > 0 and draws >= 40")
    try:
        items = auditing.plan(_split(only) if only else None, controls)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    start = time.perf_counter()
    results = _with_progress(
        "privacy audits",
        auditing.ticks(items),
        lambda on_done: auditing.audit_all(
            scale, [i.name for i in items], controls, confidence, draws, tick=lambda: on_done(None)
        ),
    )
    seconds = time.perf_counter() - start
    lines = _audit_report(results, confidence, seconds)
    Console().print("\n".join(lines))
    out.mkdir(parents=True, exist_ok=True)
    (out / "audit.json").write_text(json.dumps([r.as_dict() for r in results], indent=1))
    (out / "audit.md").write_text("\n".join(lines) + "\n")
    console.print(f"wrote {out / 'audit.md'} and {out / 'audit.json'}")
    over = [r.name for r in results if r.violated and not r.broken_on_purpose]
    missed = [r.name for r in results if r.broken_on_purpose and not r.violated]
    for name in over:
        console.print(f"[red]above its claim:[/] {name}")
    for name in missed:
        console.print(f"[red]broken on purpose but not caught:[/] {name}")
    if over or missed:
        raise typer.Exit(code=1)


def _audit_report(results, confidence: float, seconds: float) -> list[str]:
    """The markdown report of ``bench audit``: one row per audit, real mechanisms first."""
    lines = [
        f"# Privacy audit ({machine_description()}; {seconds / 60:.1f} minutes)",
        "",
        f"Each empirical epsilon is a lower bound holding with probability {confidence:g} (Clopper-Pearson on",
        "held-out draws); for claims with a Gaussian part it is the claim's own accounting with mu replaced by",
        "its lower bound. A real mechanism passes when its bound stays at or below the claim; a control,",
        "broken on purpose, must be caught (bound above the claim).",
        "",
        "| audit | noise | claim | claimed epsilon | delta | empirical epsilon | mu: claimed / lower bound "
        "| draws per side | verdict |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in sorted(results, key=lambda r: r.broken_on_purpose):
        if r.broken_on_purpose:
            verdict = "caught" if r.violated else "**NOT CAUGHT**"
        else:
            verdict = "**VIOLATED**" if r.violated else "ok"
        mu = "" if r.claimed_mu is None else f"{r.claimed_mu:.3f} / {r.empirical_mu:.3f}"
        lines.append(
            f"| {r.name} | {r.noise} | {r.claim_kind} | {r.claimed_epsilon:.3g} | {r.claimed_delta:.2g} "
            f"| {r.empirical_epsilon:.3f} | {mu} | {r.draws:,} | {verdict} |"
        )
    lines += ["", "Neighbouring pairs and tests (chosen on the first half of the draws):", ""]
    lines += [f"* {r.name}: {r.pair}; test: {r.test}" for r in results if not r.broken_on_purpose]
    return lines


@bench_app.command("federated")
def federated(
    repeats: int = typer.Option(3, help="Runs per setting (the median is reported)."),
    out: Path = typer.Option(Path("bench-results/federated"), help="Output folder."),
    engine: str = typer.Option(
        "",
        help="own, flower or own,flower: per-round time and bytes of the own protocol and/or the Flower app "
        "(privclust[flower]) on 3 clients of 10K rows, k = 5, d = 5, instead of the Table 3 settings.",
    ),
    max_iter: int = typer.Option(0, "--max-iter", help="With --engine: FastLloyd's iterations (0: its plan's)."),
) -> None:
    """Per-iteration time and bytes of federated FastLloyd in the Table 3 settings of its paper (Diaa, Humphries
    & Kerschbaum, 2024), or of the own protocol beside the Flower app (--engine)."""
    from ..bench.federated import TABLE3, run_engines, run_federated, write_engines_report, write_federated_report

    if engine:
        engines = _split(engine)
        for name in engines:
            if name not in ("own", "flower"):
                raise typer.BadParameter(f"unknown engine {name!r}: own, flower or own,flower", param_hint="--engine")
        if "flower" in engines:
            try:
                import flwr  # noqa: F401
            except ImportError:
                raise typer.BadParameter("the Flower engine needs flwr: pip install 'privclust[flower]'") from None
        if max_iter < 0:
            raise typer.BadParameter("--max-iter must be 0 (the plan's) or a positive number of iterations")
        rows = _with_progress(
            "federated engines",
            len(engines),
            lambda on_done: run_engines(engines, repeats=repeats, max_iter=max_iter or None, on_done=on_done),
        )
        report = write_engines_report(rows, out, machine_description())
        console.print(report.read_text())
        return
    rows = _with_progress(
        "federated runs", len(TABLE3) + 2, lambda on_done: run_federated(on_done=on_done, repeats=repeats)
    )
    report = write_federated_report(rows, out, machine_description())
    console.print(report.read_text())


@bench_app.command("local")
def local(
    users: str = typer.Option("10000,30000,100000,200000", help="Comma-separated numbers of users (blobs only)."),
    local_epsilons: str = typer.Option("1,2,4", help="Comma-separated local epsilons (local and naive local)."),
    central_epsilons: str = typer.Option("1", help="Comma-separated central epsilons (shuffle and central)."),
    delta: float = typer.Option(1e-6, help="Central delta (shuffle and central)."),
    datasets: str = typer.Option("blobs", help="Comma-separated: blobs (8 clusters, 2-d) and bundled data sets."),
    runs: int = typer.Option(5, help="Seeds per point (new data and noise each)."),
    protocol_users: int = typer.Option(1_000_000, help="Reports for the protocol's bytes and time (0: skip)."),
    protocol_epsilon: float = typer.Option(2.0, help="Local epsilon of the measured local protocol."),
    workers: int = typer.Option(os.cpu_count() or 1, help="Parallel worker processes."),
    out: Path = typer.Option(Path("bench-results/local"), help="Output folder."),
) -> None:
    """NICV vs users in the local and shuffle models, beside central, k-means++, one center and naive local."""
    from .. import datasets as ds_module
    from ..bench import local as bench

    names = _split(datasets)
    for name in names:
        if name != bench.BLOBS and name not in ds_module.DATASETS:
            raise typer.BadParameter(f"unknown data set {name!r}; blobs or bundled: {', '.join(ds_module.DATASETS)}")
    sizes, local_epsilon_list, central_eps = (
        _split(users, int),
        _split(local_epsilons, float),
        _split(central_epsilons, float),
    )
    if min(sizes, default=0) < 2 or runs < 1:
        raise typer.BadParameter("need at least 2 users per size and at least one run")
    jobs = bench.plan(names, sizes, range(runs), local_epsilon_list, central_eps, delta)
    rows = _with_progress(
        "local and shuffle runs", len(jobs), lambda on_done: bench.run(jobs, workers=workers, on_done=on_done)
    )
    protocol = []
    if protocol_users:
        with console.status(f"protocol: randomizing and aggregating {protocol_users:,} reports"):
            protocol = bench.measure_protocol(protocol_users, protocol_epsilon, (central_eps[0], delta))
    setup = {
        "datasets": names,
        "users": sizes,
        "local_epsilons": local_epsilon_list,
        "central_epsilons": central_eps,
        "delta": delta,
        "seeds": runs,
        "protocol_users": protocol_users,
    }
    report = bench.write_report(rows, protocol, setup, out, machine_description())
    console.print(report.read_text())
    console.print(f"wrote {report}, {out / 'local.json'} and plots")


@bench_app.command("maxcover")
def maxcover(
    datasets: str = typer.Option("mixture64,mnist60k", help="Comma-separated: mixture64, mnist60k."),
    methods: str = typer.Option("maxcover,fastlloyd,diffprivlib,lloyd", help="Comma-separated methods."),
    ks: str = typer.Option("2,4,8,16,32,64", help="Comma-separated numbers of clusters."),
    runs: int = typer.Option(5, help="Runs (seeds) per point; the paper uses 5."),
    mnist: Optional[Path] = typer.Option(None, help="mnist_train60k.npz (default: ../shared/datasets)."),
    workers: int = typer.Option(1, help="Processes for privclust's jobs (1 keeps timings clean)."),
    ablation: bool = typer.Option(
        False, help="Add the non-private diagnostics cover-exact and cover-private, and the cover's thresholds."
    ),
    out: Path = typer.Option(Path("bench-results/maxcover"), help="Output folder."),
) -> None:
    """k-means cost vs k at epsilon = 1, 64-Gaussian mixture and MNIST 60k (Nguyen, Chaturvedi & Xu, AAAI 2021,
    Fig. 1)."""
    from ..bench import maxcover as bench

    names = _split(datasets)
    mnist_path = bench.find_mnist(mnist)
    if "mnist60k" in names and mnist_path is None:
        raise typer.BadParameter("MNIST 60k not found: pass --mnist PATH/mnist_train60k.npz or drop it from --datasets")
    chosen = _split(methods) + (list(bench.ABLATION) if ablation else [])
    unknown = set(chosen) - set(bench.METHODS) - set(bench.ABLATION)
    if unknown:
        available = ", ".join(bench.METHODS + bench.ABLATION)
        raise typer.BadParameter(f"unknown methods {sorted(unknown)}; available: {available}")
    k_list = _split(ks, int)
    jobs = bench.plan(names, list(dict.fromkeys(chosen)), k_list, runs, mnist_path)
    rows, missing = _with_progress(
        "cost vs k", len(jobs), lambda on_done: bench.run(jobs, workers=workers, on_done=on_done)
    )
    for why in missing.values():
        console.print(f"[yellow]peer missing:[/] {why}")
    path = str(mnist_path) if mnist_path else None
    thresholds = {name: bench.cover_thresholds(name, max(k_list), path) for name in names} if ablation else None
    report = bench.write_report(rows, out, machine_description(), missing, thresholds)
    console.print(report.read_text())


@bench_app.command("spark")
def spark(
    n: str = typer.Option("100000,1000000", help="Comma-separated row counts."),
    d: int = typer.Option(10, help="Dimension."),
    k: int = typer.Option(10, help="Clusters."),
    algorithm: str = typer.Option("fastlloyd", help="The algorithm to fit on each engine."),
    repeats: int = typer.Option(1, help="Fits per engine and n (the best time and the largest memory are kept)."),
    master: str = typer.Option("local[*]", help="Spark master URL."),
    driver_memory: str = typer.Option(
        "4g", help="Spark driver memory (local mode: it also runs the executors and caches what the JVM reads)."
    ),
    engines: str = typer.Option(
        "memory,spark",
        help="Comma-separated engines: memory, spark (a plain Parquet scan: read by Spark's Python workers in "
        "local mode), spark-jvm (the same file with its columns renamed: read through the JVM, as any other "
        "frame). The report says which reader each fit had.",
    ),
    noise: str = typer.Option("secure", help="secure (the default noise) or seeded (reports the centers' gap)."),
    out: Path = typer.Option(Path("bench-results/spark"), help="Output folder (the Parquet inputs go here too)."),
) -> None:
    """The same fit in memory and on Spark, each in a driver process of its own: seconds and the driver's
    peak memory (Python + JVM) as n grows.  Inputs are written to Parquet chunk by chunk."""
    from ..bench import spark as bench

    sizes = _split(n, int)
    chosen = _split(engines, str)
    if not sizes or min(sizes) < 1:
        fail("--n takes positive row counts, e.g. --n 1000000,10000000")
    if not chosen or set(chosen) - {"memory", "spark", "spark-jvm"}:
        fail("--engines takes memory, spark, spark-jvm or several, e.g. --engines spark")
    if noise not in ("secure", "seeded"):
        fail("--noise is secure or seeded")
    if repeats < 1:
        fail("--repeats must be at least 1")
    rows = _with_progress(
        f"{algorithm} on {', '.join(chosen)}",
        len(sizes),
        lambda on_done: bench.run(
            sizes, d, k, algorithm, repeats, master, out / "data", driver_memory, on_done, tuple(chosen), noise
        ),
    )
    console.print(bench.write_report(rows, out, machine_description()).read_text())


@bench_app.command("onecluster")
def onecluster(
    runs: int = typer.Option(50, help="Runs (each with new data and noise)."),
    n: int = typer.Option(100_000, help="Rows."),
    d: int = typer.Option(10, help="Dimension."),
    t: int = typer.Option(2_000, help="Points in the planted ball (the t given to one_cluster)."),
    radius: float = typer.Option(0.1, help="Planted ball radius (the domain is [-1, 1]^d)."),
    epsilon: float = typer.Option(1.0, help="Privacy budget of each run (delta = 1e-6)."),
    out: Path = typer.Option(Path("bench-results/onecluster"), help="Output folder."),
) -> None:
    """Planted-cluster benchmark for one_cluster (Nissim, Stemmer & Vadhan, PODS 2016): success = >= t/2
    points inside, radius <= 4x."""
    from ..bench import onecluster as bench

    rows = _with_progress(
        "planted 1-cluster", runs, lambda on_done: bench.run(runs, n, d, t, radius, epsilon, on_done=on_done)
    )
    setup = {"n": n, "d": d, "t": t, "radius": radius, "epsilon": epsilon}
    console.print(bench.write_report(rows, setup, out, machine_description()).read_text())


@bench_app.command("userlevel")
def userlevel(
    dataset: str = typer.Option("adult", help="A bundled data set (its rows go to synthetic users)."),
    algorithms: str = typer.Option("fastlloyd,auto", help="Comma-separated algorithms."),
    epsilons: str = typer.Option("0.1,0.25,0.5,0.75,1.0", help="Comma-separated epsilon grid."),
    runs: int = typer.Option(10, help="Seeds per (algorithm, unit, epsilon)."),
    rows_per_user: int = typer.Option(5, help="Synthetic rows per user."),
    max_rows_per_user: int = typer.Option(5, help="The user-level fits' max_rows_per_user (m)."),
    assignment: str = typer.Option("exact", help="exact (every user holds rows_per_user rows) or random."),
    out: Path = typer.Option(Path("bench-results/userlevel"), help="Output folder."),
) -> None:
    """NICV vs epsilon of user-level fits (privacy_unit='user') beside row-level ones, on synthetic users."""
    from .. import datasets as ds_module
    from ..algorithms import ALGORITHMS
    from ..bench import userlevel as bench

    chosen = _split(algorithms)
    unknown = [a for a in chosen if a not in ALGORITHMS]
    if unknown or dataset not in ds_module.DATASETS or assignment not in bench.ASSIGNMENTS:
        raise typer.BadParameter(
            f"algorithms from {sorted(ALGORITHMS)}, a data set from {list(ds_module.DATASETS)}, "
            f"an assignment from {bench.ASSIGNMENTS}"
        )
    if rows_per_user < 1 or max_rows_per_user < 1 or runs < 1:
        raise typer.BadParameter("--rows-per-user, --max-rows-per-user and --runs must be at least 1")
    eps = _split(epsilons, float)
    total = len(chosen) * len(eps) * runs * 2
    result = _with_progress(
        "fits",
        total,
        lambda on_done: bench.run(
            dataset, chosen, eps, list(range(runs)), rows_per_user, max_rows_per_user, assignment, on_done
        ),
    )
    console.print(bench.write_report(result, out, machine_description()).read_text())


@bench_app.command("greedy")
def greedy(
    datasets: str = typer.Option("s1,birch2", help="Comma-separated bundled data sets."),
    runs: int = typer.Option(3, help="Seeds per setting."),
    out: Path = typer.Option(Path("bench-results/greedy"), help="Output folder."),
) -> None:
    """Sweep the constants (forbid, levels, boost, selection share) of the private greedy of Dupré la Tour,
    Henzinger & Saulpic (ICML 2024)."""
    from ..bench import greedy as bench

    names = _split(datasets)
    total = len(names) * sum(len(v) for v in bench.SWEEP.values())
    rows = _with_progress("greedy settings", total, lambda on_done: bench.run(names, runs, on_done=on_done))
    console.print(bench.write_report(rows, out, machine_description()).read_text())


@bench_app.command("stream")
def stream(
    steps: int = typer.Option(200, help="Steps of the sliding-window stream."),
    horizons: str = typer.Option("100,1000,10000", help="Comma-separated horizons T for error against T."),
    epsilon: float = typer.Option(1.0, help="Budget of the whole horizon (delta = 1e-6)."),
    seed: int = typer.Option(0, help="Seed of the data and the (seeded) noise of the first two experiments."),
    secure_steps: int = typer.Option(
        8, help="Steps timed with the default secure noise at --secure-horizon (0: skip; about 1-3 s each)."
    ),
    secure_horizon: int = typer.Option(8760, help="The horizon of the secure-noise timing (the docs' example)."),
    out: Path = typer.Option(Path("bench-results/stream"), help="Output folder."),
) -> None:
    """Continual observation (Dupré la Tour, Henzinger & Saulpic 2024): per-step NICV against k-means++ and the naive per-step greedy,
    error against the horizon T, time per update and memory."""
    from ..bench import stream as bench

    window = _with_progress(
        "window steps", steps, lambda on_done: bench.run_window(steps, epsilon=epsilon, seed=seed, on_done=on_done)
    )
    ts = _split(horizons, int)
    rows = _with_progress(
        "horizons", len(ts), lambda on_done: bench.run_horizons(ts, epsilon=epsilon, seed=seed, on_done=on_done)
    )
    secure = None
    if secure_steps > 0:
        secure = _with_progress(
            "secure-noise steps",
            secure_steps,
            lambda on_done: bench.run_secure_steps(
                secure_horizon, secure_steps, epsilon=epsilon, seed=seed, on_done=on_done
            ),
        )
    console.print(bench.write_report(window, rows, out, machine_description(), secure).read_text())


@bench_app.command("elbow")
def elbow(
    dataset: str = typer.Option("s1", help="A bundled data set with a reference k."),
    k_max: int = typer.Option(30, help="Largest k of each curve."),
    runs: int = typer.Option(20, help="Curves (each with new noise)."),
    epsilon: float = typer.Option(1.0, help="Budget of each curve (delta = 1/(n ln n))."),
    out: Path = typer.Option(Path("bench-results/elbow"), help="Output folder."),
) -> None:
    """How often the private elbow curve (the greedy of Dupré la Tour, Henzinger & Saulpic, ICML 2024) finds
    the data set's k."""
    from .. import datasets as ds_module
    from ..bench import elbow as bench

    if dataset not in ds_module.DATASETS:
        raise typer.BadParameter(f"unknown data set {dataset!r}; bundled: {', '.join(ds_module.DATASETS)}")
    rows = _with_progress(
        "elbow curves", runs, lambda on_done: bench.run(dataset, k_max, runs, epsilon, on_done=on_done)
    )
    console.print(bench.write_report(rows, out, machine_description()).read_text())


@bench_app.command("domain")
def domain(
    datasets: str = typer.Option(
        "s1,house,yeast,adult", help="Bundled data sets and synthetic specs (synth:k=5,d=4,seed=301,n=2000)."
    ),
    seeds: int = typer.Option(5, help="Seeds per setting."),
    first_seed: int = typer.Option(0, help="The first seed (fresh seeds for a report: not those tuned on)."),
    epsilon: float = typer.Option(1.0, help="Budget of each fit (delta 1e-6)."),
    placements: str = typer.Option(
        "unit",
        help="Where the data are put: unit (as bundled, [-1, 1]), x<s> ([-s, s]: x3, x1000), offset (each feature "
        "in [100, 110]), raw (each feature at its published scale).",
    ),
    goodradius: bool = typer.Option(False, help="Also seed 001's GoodRadius / GoodCenter ball (slow on Adult)."),
    out: Path = typer.Option(Path("bench-results/domain"), help="Output folder."),
) -> None:
    """What tight, 10x loose, privately found and outer-limited bounds cost the default fit, with the data at
    several scales and offsets (issue 27)."""
    from ..bench import domain as bench
    from ..bench.utility import split_datasets

    names = split_datasets(datasets)
    try:
        where = tuple(bench.check_placement(p) for p in _split(placements))
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    command = (
        f"privclust bench domain --datasets {datasets} --seeds {seeds} --first-seed {first_seed} "
        f"--epsilon {epsilon:g} --placements {','.join(where)}"
    )
    rows = _with_progress(
        "fits",
        len(names) * len(where) * len(bench.SETTINGS) * seeds,
        lambda on_done: bench.run(names, seeds, epsilon, on_done, placements=where, first_seed=first_seed),
    )
    if goodradius:
        command += " --goodradius"
        rows += _with_progress(
            "GoodRadius fits",
            len(names) * len(where) * seeds,
            lambda on_done: bench.goodradius(
                names, seeds, epsilon, on_done=on_done, placements=where, first_seed=first_seed
            ),
        )
    console.print(bench.write_report(rows, out, machine_description(), command).read_text())


@bench_app.command("aggregate")
def aggregate(
    runs: int = typer.Option(20, help="Runs (each with new data and noise)."),
    n: int = typer.Option(100_000, help="Rows."),
    n_subsets: int = typer.Option(4_000, help="Disjoint random parts."),
    epsilon: float = typer.Option(1.0, help="Budget of each run (delta = 1e-6)."),
    out: Path = typer.Option(Path("bench-results/aggregate"), help="Output folder."),
) -> None:
    """Sample-and-aggregate (Nissim, Stemmer & Vadhan, PODS 2016) as a private robust mean, against the plain
    mean and median."""
    from ..bench import aggregate as bench

    rows = _with_progress(
        "sample and aggregate", runs, lambda on_done: bench.run(runs, n, n_subsets, epsilon, on_done=on_done)
    )
    setup = {"n": n, "n_subsets": n_subsets, "epsilon": epsilon}
    console.print(bench.write_report(rows, setup, out, machine_description()).read_text())


@bench_app.command("subsample")
def subsample(
    n: int = typer.Option(10_000_000, help="Rows."),
    d: int = typer.Option(10, help="Dimension."),
    k: int = typer.Option(10, help="Clusters."),
    rate: float = typer.Option(0.01, help="Sampling rate."),
    repeats: int = typer.Option(3, help="Timed repeats (best is kept)."),
    out: Path = typer.Option(Path("bench-results/subsample"), help="Output folder."),
) -> None:
    """Time of Subsampled(fastlloyd, rate) vs fastlloyd on all rows, and both guarantees (Blocki, Grigorescu &
    Mukherjee, 2021)."""
    import json
    import time

    from ..bench.speed import synthetic_blobs
    from ..estimator import KMeans
    from ..metrics import nicv
    from ..subsample import Subsampled

    X = synthetic_blobs(n, d, k)
    rows = {}
    for name, make in (
        ("all rows", lambda: KMeans(k, epsilon=1.0, delta=1e-6, bounds=(-1, 1))),
        (f"Subsampled rate {rate:g}", lambda: Subsampled(KMeans(k, epsilon=1.0, delta=1e-6, bounds=(-1, 1)), rate)),
    ):
        best, model = float("inf"), None
        for _ in range(repeats):
            start = time.perf_counter()
            model = make().fit(X)
            best = min(best, time.perf_counter() - start)
        rows[name] = {
            "seconds": best,
            "epsilon": model.privacy_spent_.epsilon,
            "delta": model.privacy_spent_.delta,
            "nicv": nicv(X, model.cluster_centers_),
        }
    names = list(rows)
    ratio = rows[names[1]]["seconds"] / rows[names[0]]["seconds"]
    lines = [
        f"# Subsampling benchmark (n = {n:,}, d = {d}, k = {k}; {machine_description()})",
        "",
        "| fit | seconds | epsilon | delta | NICV |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {name} | {r['seconds']:.3f} | {r['epsilon']:.4g} | {r['delta']:.3g} | {r['nicv']:.4f} |"
        for name, r in rows.items()
    ]
    lines += ["", f"Time ratio (subsampled / all rows): {ratio:.4f}"]
    out.mkdir(parents=True, exist_ok=True)
    (out / "subsample.json").write_text(
        json.dumps({"n": n, "d": d, "k": k, "rate": rate, "rows": rows, "ratio": ratio}, indent=1)
    )
    (out / "subsample.md").write_text("\n".join(lines) + "\n")
    Console().print("\n".join(lines))


@bench_app.command("memory")
def memory(
    rows: int = typer.Option(1_000_000, help="Rows of the CSV given to `privclust fit` (0: skip)."),
    dims: int = typer.Option(10, help="Columns of that CSV."),
    users: int = typer.Option(4_000_000, help="Reports given to `local aggregate` and `local shuffle` (0: skip)."),
    source: Optional[Path] = typer.Option(
        None, help="Run the measured commands from this privclust `src` folder (another checkout: before vs after)."
    ),
    interrupts: int = typer.Option(0, help="Also run each command this many times more, sending Ctrl-C part way."),
    user_level: bool = typer.Option(
        False, "--user-level", help="Also measure `fit --user-column` on the same rows with a column of user ids."
    ),
    out: Path = typer.Option(Path("bench-results/memory"), help="Output folder."),
) -> None:
    """Peak memory (RSS and anonymous) of `privclust fit` on a CSV and of `local aggregate` / `local shuffle` on a
    file of reports, each measured as its own process (issue 28: files larger than memory)."""
    from ..bench import memory as bench

    if source is not None and not (source / "privclust").is_dir():
        fail(f"--source {source}: not a privclust src folder (it has no privclust package)")
    total = 1 + (rows > 0) * (1 + user_level) + 2 * (users > 0)
    measured = _with_progress(
        "memory runs",
        total,
        lambda on_done: bench.run(rows, dims, users, source, on_done, interrupts=interrupts, user_level=user_level),
    )
    setup = {"rows": rows, "dims": dims, "users": users, "source": str(source) if source else "this privclust"}
    setup["interrupts"], setup["user_level"] = interrupts, user_level
    console.print(bench.write_report(measured, setup, out, machine_description()).read_text())

"""``privclust federated ...``: run a federated clustering across processes and machines."""

from __future__ import annotations

import json
import math
from contextlib import ExitStack
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from .common import (
    DROPNA_OPTION,
    HEADER_OPTION,
    LEDGER_BUDGET_OPTION,
    LEDGER_OPTION,
    SEP_OPTION,
    bounds_pair,
    check_output,
    fail,
    ledger_run,
    ledger_summary,
    open_ledger,
    write_whole,
)

federated_app = typer.Typer(
    help="Federated FastLloyd: parties cluster their joint rows; the server sees only masked values.",
    no_args_is_help=True,
)
console = Console(stderr=True)


def _tls(certs: Optional[Path], stem: str, plain: bool, server: bool):
    from ..federated import client_context, server_context

    if plain:
        console.print("[yellow]--insecure-plain-tcp: no TLS, parties are not authenticated.[/]")
        return None
    if certs is None:
        fail("give --certs DIR (see `privclust federated make-certs`) or --insecure-plain-tcp for a local test")
    make = server_context if server else client_context
    try:
        return make(certs / f"{stem}.pem", certs / f"{stem}.key", certs / "ca.pem")
    except (OSError, ValueError) as exc:
        fail(f"cannot load TLS files {stem}.pem/{stem}.key/ca.pem from {certs}: {exc}")


def _server_address(server: str) -> tuple[str, int]:
    """(host, port) from HOST:PORT or [IPv6]:PORT, or a clear error."""
    host, sep, port = server.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        fail(f"--server must be HOST:PORT with a port in 1 .. 65535, got {server!r}")
    return host, int(port)


def _read_data(data: Path, header: Optional[bool] = None, sep: Optional[str] = None, dropna: bool = False):
    """This party's rows, checked before connecting (read as ``fit`` reads a file: ``header``, ``sep``,
    ``dropna``); io's messages name the file and what is wrong with it, never its contents."""
    from ..io import read_points

    try:
        return read_points(data, header=header, sep=sep, dropna=dropna)
    except (OSError, ValueError) as exc:
        fail(str(exc) if str(data) in str(exc) else f"cannot read {data}: {exc}")


def _fewer_parties(contributors: list, parties: int) -> str | None:
    """One line naming the rounds that ran with fewer than all ``parties`` (and who contributed), or None."""
    spans: list[list] = []  # [first round, last round, contributors]
    for r, members in enumerate(contributors):
        if len(members) == parties:
            continue
        if spans and spans[-1][1] == r - 1 and spans[-1][2] == members:
            spans[-1][1] = r
        else:
            spans.append([r, r, members])
    if not spans:
        return None
    said = [
        (f"round {a}" if a == b else f"rounds {a}-{b}")
        + f" had {len(m)} of {parties} parties ({', '.join(map(str, m))})"
        for a, b, m in spans
    ]
    return "fewer parties contributed: " + "; ".join(said)


def _positive(value: float, option: str) -> float:
    if not math.isfinite(value) or value <= 0:
        fail(f"{option} must be a positive number, got {value}")
    return value


@federated_app.command("make-certs")
def make_certs_command(
    out: Path = typer.Argument(..., help="Folder for ca.pem, server.pem/.key and party-i.pem/.key."),
    parties: int = typer.Option(..., help="Number of parties."),
    host: str = typer.Option("localhost,127.0.0.1", help="Comma-separated names/IPs the server certificate covers."),
) -> None:
    """Create a CA, a server certificate and one certificate per party (mutual TLS)."""
    from ..federated import make_certs
    from ..federated.server import MAX_PARTIES

    if not 2 <= parties <= MAX_PARTIES:
        fail(f"--parties must be 2 .. {MAX_PARTIES}, got {parties}")
    hosts = [h.strip() for h in host.split(",") if h.strip()]
    if not hosts:
        fail("--host names no host")
    try:
        make_certs(out, parties, hosts=hosts)
    except OSError as exc:
        fail(f"cannot write certificates to {out}: {exc}")
    console.print(f"wrote certificates for {parties} parties to {out}: give party i its party-i.* and ca.pem")


@federated_app.command("serve")
def serve(
    parties: int = typer.Option(..., help="Number of parties that must join."),
    k: int = typer.Option(..., "--k", help="Number of clusters."),
    epsilon: float = typer.Option(1.0, help="Privacy budget epsilon of the run."),
    delta: float = typer.Option(1e-6, help="Privacy budget delta of the run."),
    bounds: str = typer.Option(..., help="Public per-feature bounds 'LOWER,UPPER'."),
    algorithm: str = typer.Option(
        "auto",
        help="Any algorithm whose plan is dense Gaussian rounds: auto (default: the central default's choice), "
        "fastlloyd (the paper's), glloyd, greedy.",
    ),
    host: str = typer.Option("127.0.0.1", help="Address to listen on."),
    port: int = typer.Option(7790, help="Port to listen on (0: any free port)."),
    port_file: Optional[Path] = typer.Option(None, help="Write the port actually used here."),
    certs: Optional[Path] = typer.Option(None, help="Folder with server.pem, server.key, ca.pem."),
    insecure_plain_tcp: bool = typer.Option(False, help="No TLS (local tests only)."),
    timeout: float = typer.Option(
        60.0, help="Seconds to wait for the parties to join (since the last join) and for each round's messages."
    ),
    max_mib: float = typer.Option(64.0, help="Largest message accepted, in MiB."),
    threshold: Optional[int] = typer.Option(
        None, help="Parties that must survive every round (a majority, the default, up to all of them)."
    ),
) -> None:
    """Coordinate one federated run: sum masked values, add the DP noise, broadcast."""
    from ..federated import FederatedAbort, FederatedServer, Job

    _positive(timeout, "--timeout")
    if not math.isfinite(max_mib) or not 1 / 256 <= max_mib <= 16384:
        fail(f"--max-mib must be 1/256 .. 16384, got {max_mib}")
    if not 0 <= port <= 65535:
        fail(f"--port must be 0 .. 65535, got {port}")
    try:
        job = Job(n_clusters=k, epsilon=epsilon, delta=delta, bounds=bounds_pair(bounds), algorithm=algorithm)
        server = FederatedServer(
            job,
            parties,
            host=host,
            port=port,
            ssl_context=_tls(certs, "server", insecure_plain_tcp, True),
            timeout=timeout,
            max_bytes=int(max_mib * 2**20),
            threshold=threshold,
        )
    except ValueError as exc:
        fail(str(exc))
    if port_file is not None:
        port_file.write_text(str(server.address[1]))
    console.print(f"waiting for {parties} parties on {server.address[0]}:{server.address[1]}")
    try:
        report = server.serve()
    except FederatedAbort as exc:
        fail(f"run aborted: {exc}")
    note = _fewer_parties(report.contributors, parties)
    if note:
        console.print(note, markup=False)
    print(
        json.dumps(
            {
                "rounds": report.rounds,
                "parties": parties,
                "threshold": server.threshold,
                "party_counts": report.party_counts,
                "contributors": report.contributors,
                "dropouts": report.dropouts,
                "privacy_spent": report.privacy_spent,
                "bytes_received": report.bytes_received,
                "bytes_sent": report.bytes_sent,
                "seconds": report.seconds,
            },
            indent=2,
        )
    )


@federated_app.command("join")
def join_command(
    data: Path = typer.Option(..., help="This party's rows: CSV, Parquet or .npy."),
    party: int = typer.Option(..., help="This party's index, 0 .. parties-1 (must match its certificate)."),
    parties: int = typer.Option(..., help="Number of parties in the run."),
    server: str = typer.Option("127.0.0.1:7790", help="HOST:PORT of the server."),
    certs: Optional[Path] = typer.Option(None, help="Folder with party-<i>.pem, party-<i>.key, ca.pem."),
    group_key: Optional[Path] = typer.Option(
        None,
        help="A file of at least 32 random bytes shared by the parties: the output masks and the initial "
        "centers come from it (and every party's nonce) instead of from a secret agreed through the server.",
    ),
    insecure_plain_tcp: bool = typer.Option(False, help="No TLS (local tests only)."),
    timeout: float = typer.Option(
        60.0, help="Seconds to wait for the server (during the rounds at least twice the server's own timeout)."
    ),
    output: Path = typer.Option(Path("centers.csv"), "--output", "-o", help="Where to write the centers."),
    max_epsilon: float = typer.Option(1.0, help="Refuse a run whose announced epsilon is larger."),
    max_delta: float = typer.Option(1e-6, help="Refuse a run whose announced delta is larger."),
    k: Optional[int] = typer.Option(None, "--k", help="Refuse a run with another number of clusters."),
    bounds: Optional[str] = typer.Option(None, help="Refuse a run with other bounds 'LOWER,UPPER'."),
    min_threshold: Optional[int] = typer.Option(
        None, help="Refuse a run that goes on with fewer surviving parties (default: a majority)."
    ),
    header: Optional[bool] = HEADER_OPTION,
    sep: Optional[str] = SEP_OPTION,
    dropna: bool = DROPNA_OPTION,
    ledger: Optional[Path] = LEDGER_OPTION,
    ledger_budget: Optional[str] = LEDGER_BUDGET_OPTION,
) -> None:
    """Take part in a federated run with this party's rows.

    Everything that can be checked locally is checked before connecting: the server address,
    the output path, the data file, the keys, and with --ledger the file's budget (the limits,
    --max-epsilon and --max-delta, are reserved in it before connecting; the run settles at what
    its rounds spent); the announced job is checked against the limits before anything derived
    from the data is sent."""
    from ..federated import FederatedAbort, JobLimits, join
    from ..privacy.budget import BudgetExceededError
    from ..privacy.ledger import LedgerError

    address = _server_address(server)
    check_output(output)
    _positive(timeout, "--timeout")
    _positive(max_epsilon, "--max-epsilon")
    if not 0 < max_delta < 1:
        fail(f"--max-delta must lie in (0, 1), got {max_delta}")
    if not 2 <= parties or not 0 <= party < parties:
        fail(f"--party must be 0 .. {parties - 1} and --parties at least 2, got {party} of {parties}")
    X = _read_data(data, header, sep, dropna)
    key = None
    if group_key is not None:
        try:
            key = group_key.read_bytes()
        except OSError as exc:
            fail(f"cannot read the group key {group_key}: {exc}")
        if len(key) < 32:
            fail(f"{group_key} holds {len(key)} bytes; a group key needs at least 32 random bytes")
    context = _tls(certs, f"party-{party}", insecure_plain_tcp, False)
    limits = JobLimits(
        max_epsilon=max_epsilon,
        max_delta=max_delta,
        n_clusters=k,
        bounds=bounds_pair(bounds) if bounds is not None else None,
        min_threshold=min_threshold,
    )
    try:
        with ExitStack() as held:
            try:  # the ledger's own failures are the ledger's, not the server's
                accounts = open_ledger(ledger, ledger_budget)
                about = {"command": "federated join", "party": party, "server": server}
                accountant = held.enter_context(ledger_run(accounts, max_epsilon, max_delta, about))
            except OSError as exc:
                fail(f"cannot use the ledger {ledger}: {exc}")
            except BudgetExceededError as exc:
                fail(
                    f"refused by the ledger {ledger}: {exc} (it holds --max-epsilon and --max-delta for the run "
                    "before connecting: lower them to what the job asks)"
                )
            result = join(
                X,
                address,
                party,
                parties,
                ssl_context=context,
                group_key=key,
                timeout=timeout,
                limits=limits,
                accountant=accountant,
            )
    except FederatedAbort as exc:
        fail(f"run aborted: {exc}")
    except (BudgetExceededError, LedgerError) as exc:
        fail(f"refused by the ledger {ledger}: {exc}")
    except ValueError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot reach the server at {server}: {exc}")
    from ..io import write_points

    try:
        write_whole(output, lambda staged: write_points(staged, result.centers))
    except OSError as exc:
        fail(f"cannot write the centers to {output}: {exc}")
    note = _fewer_parties(result.contributors, parties)
    if note:
        console.print(note, markup=False)
    print(
        json.dumps(
            {
                "party": party,
                "iterations": result.n_iter,
                "rounds": result.rounds,
                "party_counts": result.party_counts,
                "contributors": result.contributors,
                "epsilon_spent": result.privacy_spent["epsilon"],
                "delta_spent": result.privacy_spent["delta"],
                **({"ledger": ledger_summary(accounts)} if accounts is not None else {}),
                "bytes_sent": result.bytes_sent,
                "bytes_received": result.bytes_received,
                "centers_file": str(output),
            },
            indent=2,
        )
    )

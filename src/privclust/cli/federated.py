"""``privclust federated ...``: run a federated clustering across processes and machines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

federated_app = typer.Typer(
    help="Federated FastLloyd: parties cluster their joint rows; the server sees only masked values.",
    no_args_is_help=True,
)
console = Console(stderr=True)


def _fail(message: str) -> None:
    console.print(f"[bold red]error:[/] {message}")
    raise typer.Exit(2)


def _tls(certs: Optional[Path], stem: str, plain: bool, server: bool):
    from ..federated import client_context, server_context

    if plain:
        console.print("[yellow]--insecure-plain-tcp: no TLS, parties are not authenticated.[/]")
        return None
    if certs is None:
        _fail("give --certs DIR (see `privclust federated make-certs`) or --insecure-plain-tcp for a local test")
    make = server_context if server else client_context
    try:
        return make(certs / f"{stem}.pem", certs / f"{stem}.key", certs / "ca.pem")
    except (OSError, ValueError) as exc:
        _fail(f"cannot load TLS files {stem}.pem/{stem}.key/ca.pem from {certs}: {exc}")


@federated_app.command("make-certs")
def make_certs_command(
    out: Path = typer.Argument(..., help="Folder for ca.pem, server.pem/.key and party-i.pem/.key."),
    parties: int = typer.Option(..., help="Number of parties."),
    host: str = typer.Option("localhost,127.0.0.1", help="Comma-separated names/IPs the server certificate covers."),
) -> None:
    """Create a CA, a server certificate and one certificate per party (mutual TLS)."""
    from ..federated import make_certs

    make_certs(out, parties, hosts=[h.strip() for h in host.split(",") if h.strip()])
    console.print(f"wrote certificates for {parties} parties to {out}: give party i its party-i.* and ca.pem")


@federated_app.command("serve")
def serve(
    parties: int = typer.Option(..., help="Number of parties that must join."),
    k: int = typer.Option(..., "--k", help="Number of clusters."),
    epsilon: float = typer.Option(1.0, help="Privacy budget epsilon of the run."),
    delta: float = typer.Option(1e-6, help="Privacy budget delta of the run."),
    bounds: str = typer.Option(..., help="Public per-feature bounds 'LOWER,UPPER'."),
    algorithm: str = typer.Option("fastlloyd", help="fastlloyd or glloyd."),
    host: str = typer.Option("127.0.0.1", help="Address to listen on."),
    port: int = typer.Option(7790, help="Port to listen on (0: any free port)."),
    port_file: Optional[Path] = typer.Option(None, help="Write the port actually used here."),
    certs: Optional[Path] = typer.Option(None, help="Folder with server.pem, server.key, ca.pem."),
    insecure_plain_tcp: bool = typer.Option(False, help="No TLS (local tests only)."),
    timeout: float = typer.Option(60.0, help="Seconds to wait for any party before aborting."),
    max_mib: float = typer.Option(64.0, help="Largest message accepted, in MiB."),
) -> None:
    """Coordinate one federated run: sum masked values, add the DP noise, broadcast."""
    from ..federated import FederatedAbort, FederatedServer, Job

    try:
        lo, hi = (float(v) for v in bounds.split(","))
        job = Job(n_clusters=k, epsilon=epsilon, delta=delta, bounds=[lo, hi], algorithm=algorithm)
        server = FederatedServer(
            job,
            parties,
            host=host,
            port=port,
            ssl_context=_tls(certs, "server", insecure_plain_tcp, True),
            timeout=timeout,
            max_bytes=int(max_mib * 2**20),
        )
    except ValueError as exc:
        _fail(str(exc))
    if port_file is not None:
        port_file.write_text(str(server.address[1]))
    console.print(f"waiting for {parties} parties on {server.address[0]}:{server.address[1]}")
    try:
        report = server.serve()
    except FederatedAbort as exc:
        _fail(f"run aborted: {exc}")
    print(
        json.dumps(
            {
                "rounds": report.rounds,
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
        None, help="A 32-byte key file shared by the parties instead of key agreement."
    ),
    insecure_plain_tcp: bool = typer.Option(False, help="No TLS (local tests only)."),
    timeout: float = typer.Option(60.0, help="Seconds to wait for the server."),
    output: Path = typer.Option(Path("centers.csv"), "--output", "-o", help="Where to write the centers."),
) -> None:
    """Take part in a federated run with this party's rows."""
    from ..federated import FederatedAbort, join
    from ..io import read_points, write_points

    try:
        X = read_points(data)
        host, _, port = server.rpartition(":")
        key = None
        if group_key is not None:
            key = group_key.read_bytes()
            if len(key) < 32:
                _fail(f"{group_key} holds {len(key)} bytes; a group key needs at least 32 random bytes")
        context = _tls(certs, f"party-{party}", insecure_plain_tcp, False)
        result = join(X, (host, int(port)), party, parties, ssl_context=context, group_key=key, timeout=timeout)
    except (ValueError, FileNotFoundError, IsADirectoryError) as exc:
        _fail(str(exc))
    except FederatedAbort as exc:
        _fail(f"run aborted: {exc}")
    except OSError as exc:
        _fail(f"cannot reach the server at {server}: {exc}")
    write_points(output, result.centers)
    print(
        json.dumps(
            {
                "party": party,
                "iterations": result.n_iter,
                "rounds": result.rounds,
                "epsilon_spent": result.privacy_spent["epsilon"],
                "delta_spent": result.privacy_spent["delta"],
                "bytes_sent": result.bytes_sent,
                "bytes_received": result.bytes_received,
                "centers_file": str(output),
            },
            indent=2,
        )
    )

"""``privclust local ...``: the local and shuffle models deployed -- devices report, a shuffler mixes, a server aggregates."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import numpy as np
import typer
from rich.console import Console

from .common import (
    DROPNA_OPTION,
    HEADER_OPTION,
    SEP_OPTION,
    bounds_pair,
    check_output,
    fail,
    interrupts_reported,
    write_whole,
)

local_app = typer.Typer(
    help="The local model deployed: each device randomizes its own point; the server sees one report per user.",
    no_args_is_help=True,
)
console = Console(stderr=True)


def _protocol(path: Path):
    from ..local import Protocol

    try:
        return Protocol.from_json(path.read_text())
    except FileNotFoundError:
        fail(f"no such protocol file: {path} (make one with `privclust local init`)")
    except (ValueError, TypeError, KeyError, json.JSONDecodeError) as exc:
        fail(f"{path} is not a privclust local protocol: {exc}")


@local_app.command("shuffler-key")
def shuffler_key(
    output: Path = typer.Option(Path("shuffler.key"), "--output", "-o", help="Where to write the private key."),
) -> None:
    """The shuffler's signing key: its private half to OUTPUT (readable by its owner only; keep it with the
    shuffler, never with the server), its public half to OUTPUT.pub, for `init --shuffle --shuffler-key`."""
    from ..io import StagedFiles
    from ..local import ShufflerKey

    public = output.with_name(output.name + ".pub")
    check_output(output)
    check_output(public)
    if output.suffix == ".pub":
        fail(f"{output} would hold the private key under a public key's name: choose another --output")
    for path in (output, public):
        if path.exists():  # a protocol may name the key: replacing it would leave that protocol no shuffler
            fail(f"{path} exists: a shuffle protocol may name its key; move it away first, or choose another --output")
    key = ShufflerKey.generate()
    with StagedFiles() as staged:  # both or neither
        staged.reserve(output, private=True).write_bytes(key.private_pem())  # mode 0600 before the key is in it
        staged.reserve(public).write_text(key.public_hex + "\n")
        staged.commit()
    console.print(f"wrote {output} (private: keep it with the shuffler) and {public}: {key.public_hex}")


def _public_key(given: str) -> str:
    """A shuffler's public key given as its .pub file or as 64 hex digits (spelt in lowercase, as protocols state
    it); a private key given by mistake is refused without being repeated."""
    path = Path(given)
    named_file = path.is_file()
    if named_file:
        try:
            given = path.read_text()
        except (OSError, UnicodeDecodeError):
            fail("--shuffler-key: cannot read that file as the shuffler's public key (the .pub file)")
    if "PRIVATE KEY" in given:
        fail(
            "--shuffler-key names the shuffler's PRIVATE key: give its public half (the .pub file beside it); keep "
            "the private key with the shuffler only"
        )
    if not named_file and given.strip("0123456789abcdefABCDEF \n"):
        fail("--shuffler-key names no file and is not hex digits: give the .pub file or the 64 hex digits it holds")
    return given.strip().lower()


@local_app.command("init")
def init(
    k: int = typer.Option(..., "--k", "-k", help="Number of clusters."),
    features: int = typer.Option(..., help="Number of features of every point."),
    bounds: str = typer.Option(..., help="Public per-feature bounds 'LOWER,UPPER' (points are clipped to them)."),
    epsilon: float = typer.Option(
        ..., "--epsilon", "-e", help="Each report's local epsilon; with --shuffle the central one."
    ),
    users: int = typer.Option(..., help="How many users will report (public: one report each)."),
    shuffle: bool = typer.Option(False, "--shuffle", help="Reports are shuffled: --epsilon/--delta are central."),
    delta: float = typer.Option(1e-6, "--delta", "-d", help="The central delta of a --shuffle protocol."),
    shuffler_key: Optional[str] = typer.Option(
        None,
        "--shuffler-key",
        help="A --shuffle protocol's shuffler: its public key (the .pub file `privclust local shuffler-key` writes, "
        "or its 64 hex digits). The server takes only batches that shuffler signed.",
    ),
    seed: Optional[int] = typer.Option(None, help="The public seed (default: fresh)."),
    output: Path = typer.Option(Path("protocol.json"), "--output", "-o", help="Where to write the protocol."),
) -> None:
    """Fix the public parameters every device and the server share (a protocol file)."""
    from ..local import Protocol

    check_output(output)
    if shuffle and shuffler_key is None:
        fail(
            "a --shuffle protocol names its shuffler's key (--shuffler-key), so that its server can tell the "
            "shuffler's output from reports that were never shuffled: make one with `privclust local shuffler-key`"
        )
    if shuffler_key is not None and not shuffle:
        fail("--shuffler-key is for a --shuffle protocol: a local protocol has no shuffler to trust")
    public = dict(n_clusters=k, n_features=features, bounds=bounds_pair(bounds))
    if seed is not None:
        public["seed"] = seed
    try:
        if shuffle:
            protocol = Protocol.for_shuffle(epsilon, delta, users, shuffler_key=_public_key(shuffler_key), **public)
        else:
            protocol = Protocol(epsilon=epsilon, users=users, **public)
        protocol.design()  # refuses parameters the algorithm cannot run with, now rather than on a device
    except (ValueError, TypeError) as exc:
        fail(str(exc))
    write_whole(output, lambda staged: staged.write_text(protocol.to_json()))
    local = f"each report epsilon_0 = {protocol.epsilon:.4g}"
    guarantee = f"shuffled: central ({epsilon:g}, {delta:g})-DP, {local}" if shuffle else f"{local}-LDP"
    console.print(f"wrote {output}: k = {k}, {features} features, {users:,} users, {guarantee}")


@local_app.command("report")
def report(
    points: Optional[Path] = typer.Argument(None, help="A CSV / .npy of device points, one device per row."),
    protocol_file: Path = typer.Option(Path("protocol.json"), "--protocol", "-p", help="The protocol file."),
    point: Optional[str] = typer.Option(None, help="One device's point as 'x1,x2,...' instead of a file."),
    output: Path = typer.Option(Path("reports.bin"), "--output", "-o", help="Where to write the reports."),
    header: Optional[bool] = HEADER_OPTION,
    sep: Optional[str] = SEP_OPTION,
    dropna: bool = DROPNA_OPTION,
) -> None:
    """Devices' side: each point in, one report out (the point never leaves unrandomized)."""
    from ..io import check_separator, read_points
    from ..local import Randomizer

    protocol = _protocol(protocol_file)
    check_output(output)
    if (points is None) == (point is None):
        fail("give a file of points or one --point, not both")
    try:
        check_separator(sep)
        if points is not None:
            rows = read_points(points, header=header, sep=sep, dropna=dropna)
        else:
            rows = np.array([[float(v) for v in point.split(",")]])
        data = Randomizer(protocol).reports(rows)
    except (ValueError, FileNotFoundError, IsADirectoryError) as exc:
        fail(str(exc))
    write_whole(output, lambda staged: staged.write_bytes(data))
    console.print(f"wrote {output}: {len(rows):,} reports, {len(data):,} bytes")


def _report_files(inputs: list[Path]) -> list[Path]:
    files = []
    for path in inputs:
        if path.is_dir():
            files += sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
        elif path.is_file():
            files.append(path)
        else:
            fail(f"no such file or folder: {path}")
    if not files:
        fail("no report files given")
    return files


def _opened(protocol, inputs: list[Path], shuffled: bool | None) -> list:
    """The report files given, each refused (before any report is read) unless it is a whole batch for ``protocol``
    of the kind ``shuffled`` names (``ReportFile.open``)."""
    from ..local import ReportFile

    return [ReportFile.open(protocol, path, shuffled) for path in _report_files(inputs)]


def _io_failure(exc: OSError) -> str:
    """A report file that could not be read, or a temporary or output file that could not be written: what the
    system said and, for a full disk, where to make room; nothing was written either way."""
    import errno
    import tempfile

    said = exc.strerror or type(exc).__name__
    if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
        return f"could not read the reports or write the output ({said}). Nothing was written"
    return (
        f"could not write a temporary file or the output ({said}): the nonces and the shuffle's buckets go to "
        f"TMPDIR ({tempfile.gettempdir()}); give it room (about the size of the reports) or point it elsewhere. "
        "Nothing was written"
    )


@local_app.command("shuffle")
def shuffle_reports(
    inputs: list[Path] = typer.Argument(..., help="Report files, or folders of them."),
    protocol_file: Path = typer.Option(Path("protocol.json"), "--protocol", "-p", help="The protocol file."),
    output: Path = typer.Option(Path("shuffled.bin"), "--output", "-o", help="Where to write the shuffled batch."),
    key: Optional[Path] = typer.Option(
        None, "--key", help="The shuffler's private key (`privclust local shuffler-key`): a shuffle protocol's."
    ),
) -> None:
    """The shuffler: every report of every input, uniformly permuted into one batch (run it apart from the server),
    signed with the shuffler's key that the protocol names.

    Streamed: the reports pass a chunk at a time into random buckets on disk, each then permuted in memory
    (Shuffler.shuffle_stream), so the inputs may be larger than memory."""
    from ..io import StagedFiles
    from ..local import (
        ShufflerKey,
        batch_signature,
        check_report_count,
        repeated_nonces,
        report_header,
        shuffler_signer,
    )
    from ..local.nonces import NonceSpill
    from ..local.signing import BatchDigest
    from ..shuffle import Shuffler

    protocol = _protocol(protocol_file)
    check_output(output)
    try:
        signer = shuffler_signer(protocol, None if key is None else ShufflerKey.load(key))
    except ValueError as exc:
        fail(str(exc))
    with interrupts_reported(), StagedFiles() as staged:
        try:
            files = _opened(protocol, inputs, shuffled=False)
            total = sum(f.reports for f in files)
            check_report_count(protocol, total)  # the shuffler neither duplicates nor adds
            with NonceSpill(total) as nonces, open(staged.reserve(output), "wb") as out:

                def batches():
                    for f in files:
                        for records in f.chunks():
                            nonces.stage(records["nonce"])
                            yield records

                def no_repeats():  # one report per user, none twice: refused before any report is written
                    repeated = nonces.staged_repeats()
                    if repeated:
                        raise repeated_nonces(repeated)

                digest = BatchDigest()

                def write(data) -> None:  # what is written is what is signed
                    digest.update(data)
                    out.write(data)

                write(report_header(protocol, shuffled=True))
                Shuffler().shuffle_stream(batches(), total, write, before_writing=no_repeats)
                out.write(batch_signature(signer, digest))
        except ValueError as exc:
            fail(str(exc))
        except OSError as exc:
            fail(_io_failure(exc))
        staged.commit()
    console.print(f"wrote {output}: {total:,} reports, shuffled" + (", signed" if signer is not None else ""))


@local_app.command("aggregate")
def aggregate(
    inputs: list[Path] = typer.Argument(..., help="Report files, or folders of them (any order)."),
    protocol_file: Path = typer.Option(Path("protocol.json"), "--protocol", "-p", help="The protocol file."),
    output: Path = typer.Option(Path("centers.csv"), "--output", "-o", help="Where to write the centers."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    accept_weaker: bool = typer.Option(
        False,
        "--accept-weaker",
        help="Release even when the reports received give a weaker guarantee than the protocol declared "
        "(a shuffle protocol with fewer reports than its users); the weaker guarantee is printed and recorded.",
    ),
) -> None:
    """The server's side: reports in, centers out (the release is computed once, from every report given).

    Streamed: the reports are tallied a chunk at a time and their nonces checked on disk
    (Aggregator.add_stream), so the inputs may be larger than memory."""
    from ..io import write_points
    from ..local import ONE_SHUFFLED_BATCH, Aggregator, served_batches

    protocol = _protocol(protocol_file)
    check_output(output)
    with interrupts_reported(), Aggregator(protocol) as aggregator:  # its nonce files freed when done
        try:
            files = _opened(protocol, inputs, served_batches(protocol))
            if protocol.shuffle is not None and len(files) > 1:
                raise ValueError(ONE_SHUFFLED_BATCH)
            stream = (records for f in files for records in f.chunks())
            aggregator.add_stream(stream, expected=sum(f.reports for f in files))
            result = aggregator.release(accept_weaker=accept_weaker)
        except ValueError as exc:
            fail(str(exc))
        except OSError as exc:
            fail(_io_failure(exc))
    write_whole(output, lambda staged: write_points(staged, result.centers))
    spent = result.privacy_spent
    summary = {
        "centers": result.centers.tolist(),
        "centers_file": str(output),
        "reports": result.reports,
        "privacy_spent": spent.as_dict(),
        "local_epsilon": protocol.epsilon,
        "planned_users": protocol.users,
        "declared": None if protocol.shuffle is None else list(protocol.shuffle),
        "accepted_weaker": result.accepted_weaker,
    }
    if as_json:
        print(json.dumps(summary, indent=2))
        return
    if result.accepted_weaker:
        eps, delta = protocol.shuffle
        console.print(f"ACCEPTED WEAKER (--accept-weaker): the declared guarantee was ({eps:g}, {delta:g})")
    console.print(
        f"{result.reports:,} of {protocol.users:,} planned reports -> {len(result.centers)} centers written to "
        f"{output}; privacy: {spent}"
    )

"""``privclust bench federated``: per-iteration time and traffic of the federated protocol.

Diaa et al.'s Table 3 settings: N in {10K, 100K}, k in {2, 5}, d in {2, 5}, two
parties with balanced random halves of the rows, plus LSun and S1.  The server
runs in this process, each party in its own process, over mutual TLS on
loopback.  Per-iteration time is the parties' mean wall time of one round
(local sums, masking, the round trip, the server's noise, unmasking); the
median of ``repeats`` runs is reported.  Traffic is counted in bytes on the
wire (frames, excluding TLS record overhead) per party and per round, next to
the ring payload k (d + 1) x 8 bytes.  Round 0 releases
the noisy row count and is reported apart from the Lloyd iterations.

Wall time on a shared machine is mostly waiting for a core (each iteration is two round trips,
four wake-ups per party), so each row also gives CPU time per iteration: each party's (its
process, from its sums to the decoded release) and the server's (its process, from gathering
the round's messages to drawing the next rounds' noise ahead), which load inflates far less.
"""

from __future__ import annotations

import multiprocessing as mp
import statistics
import tempfile
from functools import partial
from pathlib import Path

import numpy as np

from .. import datasets
from .._parallel import use_single_thread
from ..federated import FederatedServer, Job, JobLimits, client_context, join, make_certs, server_context
from .speed import synthetic_blobs
from .utility import bench_delta

__all__ = ["TABLE3", "run_federated", "write_federated_report", "SEED_FIGURES", "run_engines", "write_engines_report"]

ENGINE_SETTING = (3, 10_000, 5, 5)  # clients, rows per client, k, d (issue 29)

TABLE3 = [(n, k, d) for n in (10_000, 100_000) for k in (2, 5) for d in (2, 5)]
SEED_FIGURES = {
    (10_000, 2, 2): 3.03,
    (100_000, 5, 5): 22.56,
}  # ms per iteration reported by Diaa, Humphries & Kerschbaum (2024)


def _party(args):
    part, address, index, parties, certs, queue, limits = args
    use_single_thread()  # three processes share this machine's cores; real parties have their own
    context = client_context(
        Path(certs) / f"party-{index}.pem", Path(certs) / f"party-{index}.key", Path(certs) / "ca.pem"
    )
    result = join(part, address, index, parties, ssl_context=context, timeout=120, limits=limits)
    queue.put(
        (index, result.round_seconds, result.bytes_sent, result.bytes_received, result.rounds, result.round_cpu_seconds)
    )


def run_one(name: str, X: np.ndarray, k: int, certs: Path, parties: int = 2, max_iter: int | None = None) -> dict:
    rng = np.random.default_rng(0)
    parts = np.array_split(X[rng.permutation(len(X))], parties)
    job = Job(k, 1.0, bench_delta(len(X)), [-1.0, 1.0], max_iter=max_iter, algorithm="fastlloyd")  # the paper's
    limits = JobLimits(max_epsilon=job.epsilon, max_delta=job.delta)  # each party agrees to the bench's job
    server = FederatedServer(
        job,
        parties,
        ssl_context=server_context(certs / "server.pem", certs / "server.key", certs / "ca.pem"),
        timeout=120,
    )
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [
        ctx.Process(target=_party, args=((parts[i], server.address, i, parties, str(certs), queue, limits),))
        for i in range(parties)
    ]
    for p in procs:
        p.start()
    report = server.serve()
    results = sorted(queue.get(timeout=120) for _ in range(parties))
    for p in procs:
        p.join()
    rounds = report.rounds
    # Round 0 releases the noisy row count; the Lloyd iterations are the rounds after it.
    per_iteration_ms = [1000 * statistics.mean(r[1][1:]) for r in results]
    return {
        "setting": name,
        "n": len(X),
        "k": k,
        "d": X.shape[1],
        "parties": parties,
        "rounds": rounds,
        "ms_per_iteration": statistics.mean(per_iteration_ms),
        "ms_count_round": 1000 * statistics.mean(r[1][0] for r in results),
        "party_cpu_ms_per_iteration": [1000 * statistics.mean(r[5][1:]) for r in results],
        "server_cpu_ms_per_iteration": 1000 * statistics.mean(report.round_cpu_seconds[1:]),
        "bytes_sent_per_round": [r[2] / rounds for r in results],
        "bytes_received_per_round": [r[3] / rounds for r in results],
        "ring_bytes_per_round": 8 * k * (X.shape[1] + 1),
        "seed_ms": SEED_FIGURES.get((len(X), k, X.shape[1])),
    }


def _median_run(run, repeats: int) -> dict:
    """The run (``run()``, a row) with the median time per iteration of ``repeats``, with all their times."""
    runs = sorted((run() for _ in range(repeats)), key=lambda r: r["ms_per_iteration"])
    median = dict(runs[len(runs) // 2])
    median["ms_per_iteration_all_runs"] = [r["ms_per_iteration"] for r in runs]
    return median


def run_federated(on_done=None, repeats: int = 3) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        certs = make_certs(tmp, 2)
        settings = [
            (f"TimeSynth N={n:,} k={k} d={d}", synthetic_blobs(n, d, k, seed=1, spread=0.1), k) for n, k, d in TABLE3
        ]
        for name in ("lsun", "s1"):
            ds = datasets.load(name)
            settings.append((name, ds.X, ds.k))
        for name, X, k in settings:
            rows.append(_median_run(partial(run_one, name, X, k, certs), repeats))
            if on_done:
                on_done(rows[-1])
    return rows


def write_federated_report(rows: list[dict], out_dir: Path, machine: str) -> Path:
    import json

    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "federated.json").write_text(json.dumps(rows, indent=1))
    lines = [
        "# Federated benchmark",
        "",
        f"Machine: {machine}. Two parties, mutual TLS on loopback.",
        "",
        "| setting | rounds | ms / iteration | Diaa, Humphries & Kerschbaum (2024) (ms) | count round (ms) | bytes sent / round / party "
        "| ring payload | bytes received / round / party | CPU ms / iteration: parties | server |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        seed = f"{r['seed_ms']:.2f}" if r["seed_ms"] else "-"
        sent = " / ".join(f"{b:.0f}" for b in r["bytes_sent_per_round"])
        got = " / ".join(f"{b:.0f}" for b in r["bytes_received_per_round"])
        cpu = " / ".join(f"{c:.2f}" for c in r["party_cpu_ms_per_iteration"])
        lines.append(
            f"| {r['setting']} | {r['rounds']} | {r['ms_per_iteration']:.2f} | {seed} | "
            f"{r['ms_count_round']:.2f} | {sent} | "
            f"{r['ring_bytes_per_round']} | {got} | {cpu} | {r['server_cpu_ms_per_iteration']:.2f} |"
        )
    report = out_dir / "federated.md"
    report.write_text("\n".join(lines) + "\n")
    return report


def run_flower_one(name: str, X: np.ndarray, k: int, parties: int, max_iter: int | None = None) -> dict:
    """The same job as :func:`run_one` through the Flower app (``privclust.flower``): a SuperLink, a SuperNode
    per client and ``flwr run``, as real processes on loopback.  A round's time is the server's wall time from
    asking for the round's query to the noised release (the *next* exchange and SecAgg+'s four stages);
    bytes are Flower's serialised messages to and from each client, set-up and the final exchange included."""
    from ..flower.local import run_local

    rng = np.random.default_rng(0)
    parts = np.array_split(X[rng.permutation(len(X))], parties)
    delta = bench_delta(len(X))
    with tempfile.TemporaryDirectory() as tmp:
        out = run_local(
            parts,
            tmp,
            timeout=3600,
            limits={"max-delta": delta},
            k=k,
            epsilon=1.0,
            delta=delta,
            bounds="-1,1",
            algorithm="fastlloyd",
            max_iter=max_iter or 0,
        )
    server = out["server"]
    rounds = server["rounds"]
    return {
        "setting": name,
        "engine": "flower",
        "n": len(X),
        "k": k,
        "d": X.shape[1],
        "parties": parties,
        "rounds": rounds,
        "ms_per_iteration": 1000 * statistics.mean(server["round_seconds"][1:] or server["round_seconds"]),
        "ms_count_round": 1000 * server["round_seconds"][0],
        "bytes_sent_per_round": [b / rounds for b in server["bytes_received"].values()],  # by the client
        "bytes_received_per_round": [b / rounds for b in server["bytes_sent"].values()],
        "ring_bytes_per_round": 8 * k * (X.shape[1] + 1),
        "seconds": out["seconds"],
    }


def run_engines(engines=("own", "flower"), repeats: int = 1, max_iter: int | None = None, on_done=None) -> list[dict]:
    """Per-round time and bytes of the own protocol and the Flower app on one job: 3 clients of 10K rows,
    k = 5, d = 5 (``ENGINE_SETTING``); the median of ``repeats`` runs per engine."""
    parties, per_client, k, d = ENGINE_SETTING
    X = synthetic_blobs(parties * per_client, d, k, seed=1, spread=0.1)
    name = f"TimeSynth N={parties * per_client:,} k={k} d={d}, {parties} clients"
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        certs = make_certs(tmp, parties)
        for engine in engines:
            if engine == "own":
                row = _median_run(partial(run_one, name, X, k, certs, parties, max_iter), repeats) | {"engine": "own"}
            elif engine == "flower":
                row = _median_run(partial(run_flower_one, name, X, k, parties, max_iter), repeats)
            else:
                raise ValueError(f"unknown engine {engine!r}: own or flower")
            rows.append(row)
            if on_done:
                on_done(row)
    return rows


def write_engines_report(rows: list[dict], out_dir: Path, machine: str) -> Path:
    import json

    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "engines.json").write_text(json.dumps(rows, indent=1))
    lines = [
        "# Federated engines: the own protocol and the Flower app",
        "",
        f"Machine: {machine}. Loopback; the own protocol over mutual TLS, the Flower app over a SuperLink "
        "and SuperNodes (insecure transport on loopback, SecAgg+ inside). Not like for like: the own "
        "protocol's round time is the parties', the Flower app's the server's, and a Flower client replays "
        "every earlier round from its stored release on each message (its processes keep no memory; its rows "
        "are read once per round), so its mean grows slightly with the rounds; bytes are TLS frames for the "
        "one and Flower's serialised messages for the other.",
        "",
        "| engine | setting | rounds | ms / iteration round | count round (ms) | bytes sent / round / client "
        "| bytes received / round / client | ring payload |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        sent = " / ".join(f"{b:.0f}" for b in r["bytes_sent_per_round"])
        got = " / ".join(f"{b:.0f}" for b in r["bytes_received_per_round"])
        lines.append(
            f"| {r['engine']} | {r['setting']} | {r['rounds']} | {r['ms_per_iteration']:.1f} | "
            f"{r['ms_count_round']:.1f} | {sent} | {got} | {r['ring_bytes_per_round']} |"
        )
    report = out_dir / "engines.md"
    report.write_text("\n".join(lines) + "\n")
    return report

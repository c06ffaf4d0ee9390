"""The Flower ServerApp and ClientApp of federated FastLloyd (``privclust.flower``).

A Flower app points at them from its ``pyproject.toml``::

    [tool.flwr.app.components]
    serverapp = "privclust.flower.app:server_app"
    clientapp = "privclust.flower.app:client_app"

The rounds, the masks and the privacy argument are in :mod:`privclust.flower.rounds`
and docs/federated.md ("Flower").  Run config (the server's, public): ``k``,
``epsilon``, ``delta``, ``bounds`` ("lo,hi"), ``algorithm``, ``max-iter`` and
``public-n`` (0: not given), ``clients``, ``threshold`` (0: a majority), ``timeout``
(seconds), ``report`` (a JSON path for the server's report; "" for none).  Node config
(each client's own, never sent): ``data`` (its CSV), ``group-key`` (a file of at least
32 random bytes all clients share and the server does not), ``out`` (a JSON path for its
result) and optional limits ``max-epsilon``, ``max-delta``, ``k``, ``min-threshold``.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MessageType, RecordDict
from flwr.client.mod import secaggplus_mod
from flwr.clientapp import ClientApp
from flwr.common import Code, FitIns, FitRes, Parameters, Status, ndarrays_to_parameters, parameters_to_ndarrays
from flwr.common.secure_aggregation.secaggplus_constants import RECORD_KEY_STATE
from flwr.compat.common import recorddict_compat as compat
from flwr.server import LegacyContext, ServerConfig
from flwr.server.compat.grid_client_proxy import GridClientProxy
from flwr.server.strategy import Strategy
from flwr.server.workflow import SecAggPlusWorkflow
from flwr.server.workflow.constant import MAIN_CONFIGS_RECORD, MAIN_PARAMS_RECORD
from flwr.server.workflow.constant import Key as WorkflowKey
from flwr.serverapp import Grid, ServerApp
from flwr.supercore.inflatable.inflatable_object import get_all_nested_objects

from .._validation import check_data
from ..federated.client import JobLimits
from ..federated.secagg import default_threshold
from ..federated.server import Job, draw_ring_noise, round_spends, server_spent, validate_spec
from ..federated.wire import DEFAULT_MAX_BYTES, FederatedAbort, ProtocolError, aborted_after
from ..privacy.budget import BudgetExceededError, PrivacyAccountant
from ..privacy.noise import SecureNoise
from .rounds import (
    CLIPPING_RANGE,
    MAX_CLIENTS,
    MAX_WEIGHT,
    MODULUS_RANGE,
    QUANTIZATION_RANGE,
    ClientRounds,
    agree,
    from_limb_average,
)

__all__ = ["server_app", "client_app", "serve", "job_from_run_config"]

RECORD = "privclust"  # the config record of privclust's own (non-secure-aggregated) messages


# -- the server ------------------------------------------------------------------------------


def job_from_run_config(config) -> tuple[Job, int, int, float]:
    """(job, clients, threshold, timeout) from the server's run config; ValueError names what is wrong."""

    def optional(key):
        value = config.get(key, 0)
        return None if value in (0, "", None) else int(value)

    try:
        bounds = [float(v) for v in str(config["bounds"]).split(",")]
    except (KeyError, ValueError):
        raise ValueError("run config 'bounds' must be 'lo,hi' (two numbers), e.g. '-1,1'") from None
    if len(bounds) != 2:
        raise ValueError("run config 'bounds' must be 'lo,hi' (two numbers), e.g. '-1,1'")
    clients = int(config.get("clients", 0))
    if not 2 <= clients <= MAX_CLIENTS:
        raise ValueError(f"run config 'clients' must be 2 .. {MAX_CLIENTS}, got {clients}")
    threshold = optional("threshold") or default_threshold(clients)
    if not max(2, clients // 2 + 1) <= threshold <= clients:
        raise ValueError(f"run config 'threshold' must be a majority of the clients: {clients // 2 + 1} .. {clients}")
    timeout = float(config.get("timeout", 120))
    if not (math.isfinite(timeout) and timeout > 0):
        raise ValueError("run config 'timeout' must be a positive number of seconds")
    missing = [key for key in ("k", "epsilon", "delta") if key not in config]
    if missing:
        raise ValueError(f"run config {missing} missing: set them with flwr run --run-config")
    job = Job(
        n_clusters=int(config["k"]),
        epsilon=float(config["epsilon"]),
        delta=float(config["delta"]),
        bounds=bounds,
        algorithm=str(config.get("algorithm", "auto")),
        max_iter=optional("max-iter"),
        public_n=optional("public-n"),
    )
    return job, clients, threshold, timeout


def _size(message: Message) -> int:
    """Bytes of a message's objects as Flower ships them (its serialised records, without transport)."""
    return sum(len(obj.deflate()) for obj in get_all_nested_objects(message).values())


class _CountingGrid:
    """The grid, counting each node's bytes sent to and received from it (for ``privclust bench``)."""

    def __init__(self, grid: Grid):
        self._grid = grid
        self.sent: dict[int, int] = {}
        self.received: dict[int, int] = {}

    def __getattr__(self, name):
        return getattr(self._grid, name)

    def send_and_receive(self, messages, *, timeout=None):
        messages = list(messages)
        for m in messages:
            self.sent[m.metadata.dst_node_id] = self.sent.get(m.metadata.dst_node_id, 0) + _size(m)
        replies = list(self._grid.send_and_receive(messages, timeout=timeout))
        for r in replies:
            self.received[r.metadata.src_node_id] = self.received.get(r.metadata.src_node_id, 0) + _size(r)
        return replies


def _ask(grid, nodes, content: dict, timeout: float) -> tuple[dict, dict]:
    """Send privclust's own message to ``nodes``: ({node: reply record}, {node: why it failed})."""
    messages = [
        Message(RecordDict({RECORD: ConfigRecord(dict(content))}), dst_node_id=n, message_type=MessageType.QUERY)
        for n in sorted(nodes)
    ]
    replies, failures = {}, {}
    for reply in grid.send_and_receive(messages, timeout=timeout):
        node = reply.metadata.src_node_id
        if reply.has_error():
            failures[node] = reply.error.reason
        elif RECORD not in reply.content.config_records:
            failures[node] = "the reply carries no privclust record"
        else:
            replies[node] = reply.content.config_records[RECORD]
    for n in set(nodes) - set(replies) - set(failures):
        failures[n] = "no reply in time"
    return replies, failures


class _RoundStrategy(Strategy):
    """A legacy Strategy for one SecAgg+ aggregation: asks ``nodes`` for round ``round_index`` and keeps what
    SecAgg+ hands it (the limb averages and who is in them).  Nothing is evaluated."""

    def __init__(self, grid, run_id: int, nodes, round_index: int):
        self._proxies = [GridClientProxy(n, grid, run_id) for n in sorted(nodes)]
        self._round = round_index
        self.average: np.ndarray | None = None
        self.contributors: list[int] = []

    def initialize_parameters(self, client_manager):
        return None

    def configure_fit(self, server_round, parameters, client_manager):
        ins = FitIns(Parameters(tensors=[], tensor_type=""), {"round": self._round})
        return [(proxy, ins) for proxy in self._proxies]

    def aggregate_fit(self, server_round, results, failures):
        self.contributors = sorted(proxy.node_id for proxy, _ in results)
        arrays = parameters_to_ndarrays(results[0][1].parameters) if results else []
        self.average = arrays[0] if len(arrays) == 1 else None
        return None, {}

    def configure_evaluate(self, server_round, parameters, client_manager):
        return []

    def aggregate_evaluate(self, server_round, results, failures):
        return None, {}

    def evaluate(self, server_round, parameters):
        return None


def _secure_sum(grid, context: Context, nodes, round_index: int, threshold: int, timeout: float):
    """One SecAgg+ aggregation of round ``round_index``: (limb averages, contributing nodes)."""
    strategy = _RoundStrategy(grid, context.run_id, nodes, round_index)
    legacy = LegacyContext(context, config=ServerConfig(num_rounds=1), strategy=strategy)
    legacy.state.config_records[MAIN_CONFIGS_RECORD] = ConfigRecord({WorkflowKey.CURRENT_ROUND: round_index + 1})
    legacy.state.array_records[MAIN_PARAMS_RECORD] = ArrayRecord()
    workflow = SecAggPlusWorkflow(
        num_shares=1.0,  # every client shares with every other: the full graph, as the own protocol
        reconstruction_threshold=threshold,
        max_weight=MAX_WEIGHT,
        clipping_range=CLIPPING_RANGE,
        quantization_range=QUANTIZATION_RANGE,
        modulus_range=MODULUS_RANGE,
        timeout=timeout,
    )
    workflow(grid, legacy)
    if strategy.average is None or len(strategy.contributors) < threshold:
        raise ProtocolError(
            f"round {round_index}: SecAgg+ aggregated {len(strategy.contributors)} clients, fewer than the "
            f"threshold {threshold}; this round is not released"
        )
    return strategy.average, strategy.contributors


def _wait_for_nodes(grid, clients: int, timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    while True:
        nodes = sorted(grid.get_node_ids())
        if len(nodes) >= clients:
            return nodes[:clients]
        if time.monotonic() > deadline:
            raise ProtocolError(f"only {len(nodes)} of {clients} clients connected in time")
        time.sleep(0.2)


def serve(grid, context: Context, job: Job, clients: int, threshold: int, timeout: float, noise=None) -> dict:
    """Run the rounds (see :mod:`privclust.flower.rounds`); returns the server's report.

    The server's ledger is charged from each round's public noise parameters, checked before the
    round's masked sums are asked for; a round over the job's budget aborts the run."""
    noise = noise or SecureNoise()
    grid = _CountingGrid(grid)
    start = time.perf_counter()
    nodes = _wait_for_nodes(grid, clients, timeout)
    announced = {"job": job.as_dict(), "parties": clients, "threshold": threshold}
    replies, failures = _ask(grid, nodes, {"stage": "hello", "announce": json.dumps(announced)}, timeout)
    if failures:  # the set-up tolerates no dropout: nothing derived from the data was sent yet
        raise ProtocolError("set-up failed: " + "; ".join(f"node {n}: {why}" for n, why in sorted(failures.items())))
    nonces = {n: str(r["nonce"]) for n, r in replies.items()}
    index = {nonce: i for i, nonce in enumerate(sorted(nonces.values()))}  # a client's index, as clients count
    accountant = PrivacyAccountant(job.budget())
    alive, survivors, release = set(nodes), [], b""
    contributors, round_seconds, dropouts = [], [], {}
    try:
        for round_index in itertools.count():
            t0 = time.perf_counter()
            content = {"stage": "next", "round": round_index}
            if round_index == 0:
                content["nonces"] = json.dumps(sorted(nonces.values()))
            else:
                content["release"] = release
                content["survivors"] = json.dumps([nonces[n] for n in survivors])
            replies, failures = _ask(grid, alive, content, timeout)
            answer, agreeing = agree({n: json.loads(str(r["answer"])) for n, r in replies.items()}, threshold)
            for n in alive - agreeing:
                dropouts.setdefault(index[nonces[n]], round_index)
            alive = agreeing
            if answer.get("done"):
                break
            n_buckets, blocks, count = validate_spec(answer.get("spec"), DEFAULT_MAX_BYTES)
            spends = round_spends(str(answer.get("label")), blocks)
            accountant.check(spends)  # before any masked sums are asked for
            average, survivors = _secure_sum(grid, context, alive, round_index, threshold, timeout)
            total = from_limb_average(average, len(survivors))
            if total.size != count:
                raise ProtocolError(f"round {round_index}: SecAgg+ summed {total.size} values, the round has {count}")
            total += draw_ring_noise(noise, n_buckets, blocks).ravel()  # wraps modulo 2^64
            for s in spends:
                accountant.spend(s)
            for n in alive - set(survivors):
                dropouts.setdefault(index[nonces[n]], round_index)
            alive = set(survivors)
            release = total.astype("<u8").tobytes()
            contributors.append(sorted(index[nonces[n]] for n in survivors))
            round_seconds.append(time.perf_counter() - t0)
    except Exception as exc:
        if not contributors:  # nothing was released: the failure is all there is to say
            raise
        reason = str(exc) if isinstance(exc, (ProtocolError, BudgetExceededError)) else f"{type(exc).__name__}: {exc}"
        raise aborted_after(reason, len(contributors), server_spent(accountant)) from exc
    by_index = {index[nonces[n]]: n for n in nodes}
    return {
        "rounds": len(contributors),
        "privacy_spent": server_spent(accountant),
        "contributors": contributors,
        "party_counts": [len(c) for c in contributors],
        "dropouts": dropouts,
        "clients": clients,
        "threshold": threshold,
        "round_seconds": round_seconds,
        "seconds": time.perf_counter() - start,
        "bytes_sent": {i: grid.sent.get(n, 0) for i, n in sorted(by_index.items())},
        "bytes_received": {i: grid.received.get(n, 0) for i, n in sorted(by_index.items())},
    }


server_app = ServerApp()


@server_app.main()
def _server_main(grid: Grid, context: Context) -> None:
    job, clients, threshold, timeout = job_from_run_config(context.run_config)
    path, aborted = str(context.run_config.get("report", "")), None
    try:
        report = serve(grid, context, job, clients, threshold, timeout)
        shown = {k: report[k] for k in ("rounds", "privacy_spent", "contributors")}
    except FederatedAbort as exc:  # rounds were released before it: say what they spent, then fail
        report = shown = {"aborted": str(exc), "privacy_spent": exc.privacy_spent}
        aborted = exc
    print(json.dumps(shown), flush=True)
    if path:
        Path(path).write_text(json.dumps(report, indent=1))
    if aborted is not None:
        raise aborted


# -- the client ------------------------------------------------------------------------------


def _node_settings(node_config) -> tuple[np.ndarray, bytes, JobLimits]:
    """This client's rows, group key and limits from its own node config (read on every message)."""
    from ..io import read_points

    for key in ("data", "group-key", "out"):
        if not str(node_config.get(key, "")):
            raise ValueError(f"node config '{key}' is missing: set it with flower-supernode --node-config")
    key = Path(str(node_config["group-key"])).read_bytes()
    if len(key) < 32:
        raise ValueError("the group key file must hold at least 32 random bytes (shared by the clients only)")

    def number(name, kind):
        value = node_config.get(name)
        return None if value in (None, "") else kind(value)

    def limit(name, default):
        value = number(name, float)
        if value is not None and not (math.isfinite(value) and value > 0):  # 0 is no "use the default"
            raise ValueError(f"node config '{name}' must be a positive number, got {value!r}")
        return default if value is None else value

    defaults = JobLimits()  # epsilon 1 and delta 1e-6 unless the node says otherwise, as privclust federated join
    limits = JobLimits(
        max_epsilon=limit("max-epsilon", defaults.max_epsilon),
        max_delta=limit("max-delta", defaults.max_delta),
        n_clusters=number("k", int),
        min_threshold=number("min-threshold", int),
    )
    X = check_data(read_points(Path(str(node_config["data"]))))
    return X, key, limits


def _load(context: Context) -> ClientRounds:
    record = context.state.config_records.get(RECORD)
    return ClientRounds.from_json(str(record["state"]) if record is not None else None)


def _save(context: Context, rounds: ClientRounds) -> None:
    context.state.config_records[RECORD] = ConfigRecord({"state": rounds.as_json()})


client_app = ClientApp(mods=[secaggplus_mod])


def _told_the_server_nothing_of_the_data(handler):
    """Flower sends the text of any exception a ClientApp raises to the server.  A refusal of this client's rows
    (a missing value, a malformed line, a non-finite number) depends on them, so the server hears only the
    exception's type; the reason goes to this client's own log.  A ``ProtocolError`` is about the public
    messages only and passes as it is."""

    @functools.wraps(handler)
    def wrapped(msg: Message, context: Context) -> Message:
        try:
            return handler(msg, context)
        except ProtocolError:
            raise
        except Exception as exc:
            print(f"privclust.flower client: {exc}", file=sys.stderr, flush=True)
            raise ProtocolError(f"the client stopped ({type(exc).__name__}): see its own log") from None

    return wrapped


@client_app.query()
@_told_the_server_nothing_of_the_data
def _client_query(msg: Message, context: Context) -> Message:
    config = msg.content.config_records[RECORD]
    X, key, limits = _node_settings(context.node_config)
    rounds = _load(context)
    if config["stage"] == "hello":
        reply = {"nonce": rounds.hello(json.loads(str(config["announce"])), limits, X.shape[1])}
    elif config["stage"] == "next":
        round_index = int(config["round"])
        nonces = json.loads(str(config["nonces"])) if "nonces" in config else None
        survivors = json.loads(str(config["survivors"])) if "survivors" in config else None
        release = config.get("release")
        outcome = rounds.next_round(X, key, round_index, nonces, release, survivors)
        if outcome[0] == "done":
            _write_result(Path(str(context.node_config["out"])), outcome[1], rounds.state["session"])
            answer = {"done": True}
        else:
            answer = {"done": False, "label": outcome[1], "spec": outcome[2]}
        reply = {"answer": json.dumps(answer, sort_keys=True)}
    else:
        raise ProtocolError(f"unknown stage {config['stage']!r}")
    _save(context, rounds)
    return Message(RecordDict({RECORD: ConfigRecord(reply)}), reply_to=msg)


@client_app.train()
@_told_the_server_nothing_of_the_data
def _client_train(msg: Message, context: Context) -> Message:
    """SecAgg+'s collect stage calls this (through ``secaggplus_mod``) for this client's vector."""
    ins = compat.recorddict_to_fitins(msg.content, keep_input=True)
    X, key, _ = _node_settings(context.node_config)
    rounds = _load(context)
    threshold = int(context.state.config_records[RECORD_KEY_STATE]["threshold"])
    limbs = rounds.contribute(X, key, int(ins.config["round"]), threshold)
    _save(context, rounds)  # the round is marked sent before anything leaves: its mask is never reused
    res = FitRes(Status(Code.OK, ""), ndarrays_to_parameters([limbs]), int(MAX_WEIGHT), {})
    return Message(compat.fitres_to_recorddict(res, keep_input=True), reply_to=msg)


def _write_result(path: Path, result, session: str) -> None:
    from ..io import StagedFiles

    body = {
        "centers": np.asarray(result.centers).tolist(),
        "n_iter": result.n_iter,
        "privacy_spent": result.privacy_spent,
        "rounds": result.rounds,
        "contributors": result.contributors,
        "party_counts": result.party_counts,
        "session": session,  # the hash of the public transcript (job, threshold, nonces): it ties runs to results
    }
    with StagedFiles() as staged:  # whole or not there: written beside ``path``, then renamed into place
        staged.reserve(path).write_text(json.dumps(body, indent=1))
        staged.commit()

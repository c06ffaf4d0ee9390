"""A federated party: runs the unchanged algorithm against a masked-aggregation oracle.

Each party runs the same algorithm code as the central model; only the oracle differs.
:class:`FederatedClientOracle` is the federated privacy model: it splits the job's budget
as the curator does (a Gaussian pool, ``queries.plan``), answers a release by computing
this party's exact clipped per-bucket sums over its own rows (``queries.rows``, the same
code as the central model's) and handing them, encoded in the ring, to
:class:`MaskedAggregation`, which masks them, carries the round's messages and returns
the aggregate noised by the server with the block noise the plan calibrated.  The initial centers come from a seed all
parties derive from the group secret, and every later step depends only on released
values, so all parties hold identical centers throughout.
"""

from __future__ import annotations

import math
import socket
import ssl
import time
from dataclasses import dataclass, field

import numpy as np

from .._validation import check_data
from ..algorithms import ALGORITHMS
from ..geometry.domain import make_domain
from ..privacy.budget import Budget, BudgetExceededError, PrivacyAccountant
from ..queries.base import Released
from ..queries.central import block_mechanisms
from ..queries.curator import Curated
from ..queries.plan import CapabilityError, Oracle, pooled_allotments
from ..queries.rows import MemoryRows, Rows
from ..session import open_session
from . import crypto
from .ring import decode, encode
from .secagg import SecAggParty
from .server import CAPABILITIES, MAX_PARTIES, MAX_TIMEOUT, MODEL, PROTOCOL_VERSION, Job
from .wire import (
    DEFAULT_MAX_BYTES,
    FederatedAbort,
    Kind,
    ProtocolError,
    aborted_after,
    receive,
    ring_payload,
    ring_values,
    send,
    send_abort,
)

__all__ = ["FederatedClientOracle", "FederatedResult", "JobLimits", "MaskedAggregation", "join"]


class _Channel:
    """A connection to the server that counts bytes."""

    def __init__(self, sock: socket.socket, max_bytes: int):
        self.sock, self.max_bytes = sock, max_bytes
        self.sent = self.received = 0

    def send(self, kind: int, header: dict, payload: bytes = b"") -> None:
        self.sent += send(self.sock, kind, header, payload)

    def receive(self, expect: int):
        _, header, payload, n = receive(self.sock, self.max_bytes, expect=expect)
        self.received += n
        return header, payload


class MaskedAggregation:
    """One masked aggregation per round over the channel: ROUND, then UNMASK / REVEAL, then RESULT.

    Takes and returns plain ring vectors; the query-facing oracle stays apart."""

    def __init__(self, channel: _Channel, secagg: SecAggParty):
        self._channel, self._secagg = channel, secagg
        self.contributors: list[list[int]] = []  # per round: the parties whose sums are in the release
        self.sent_rounds = 0  # rounds that carried this party's masked sums (released or not: it cannot know)

    def released(self, round_index: int, header: dict, size: int) -> np.ndarray | None:
        """The ring total of a round released before this party computes its sums: never here, where each round
        is aggregated as it is asked (a replaying aggregation, ``flower.rounds``, returns its stored releases)."""
        return None

    def aggregate(self, round_index: int, header: dict, encoded: np.ndarray) -> np.ndarray:
        masked = self._secagg.mask(round_index, encoded)
        self._channel.send(Kind.ROUND, {"round": round_index, **header}, ring_payload(masked))
        self.sent_rounds += 1
        self._secagg.prepare(round_index)  # the next round's material, while the server gathers
        request, _ = self._channel.receive(Kind.UNMASK)
        if request.get("round") != round_index:
            raise ProtocolError(f"the server asked for the shares of round {request.get('round')!r}, not {round_index}")
        reveal = self._secagg.reveal(round_index, request.get("survivors"), request.get("dropped"))
        self._channel.send(Kind.REVEAL, {"round": round_index, **reveal})
        reply, payload = self._channel.receive(Kind.RESULT)
        if reply.get("round") != round_index:
            raise ProtocolError(f"the server answered round {reply.get('round')!r}, expected {round_index}")
        if reply.get("survivors") != request.get("survivors"):
            raise ProtocolError(f"the server's result for round {round_index} names other survivors than it unmasked")
        total = self._secagg.unmask(round_index, ring_values(payload, encoded.size), reply.get("survivors"))
        self._secagg.advance(round_index, reply.get("alive"), reply.get("next"))
        self.contributors.append(sorted(reply["survivors"]))
        return total


@dataclass
class _Rounds:
    """A party's rounds so far, shared by every view of its oracle (``with_pool``: ``auto``'s stages), so
    the rounds of a later stage go on numbering where the earlier stage's stopped."""

    count: int = 0
    seconds: list[float] = field(default_factory=list)
    cpu_seconds: list[float] = field(default_factory=list)  # this process's CPU time in each round
    last_spec: dict | None = None  # the noise parameters last sent (they travel only when they change)


class FederatedClientOracle(Oracle):
    """One party's view of the federated model: dense Gaussian sums, one masked round per release."""

    capabilities = CAPABILITIES
    model = MODEL

    def __init__(self, rows: Rows, budget: Budget, accountant: PrivacyAccountant, aggregation: MaskedAggregation):
        super().__init__(rows.n_features, budget, accountant)
        self._rows, self._aggregation = rows, aggregation
        self._rounds = _Rounds()

    @property
    def rounds(self) -> int:
        return self._rounds.count

    @property
    def round_seconds(self) -> list[float]:
        return self._rounds.seconds

    @property
    def round_cpu_seconds(self) -> list[float]:
        """This process's CPU time in each round (what a loaded machine inflates less than wall time)."""
        return self._rounds.cpu_seconds

    def allot(self, parts, family):
        return pooled_allotments(self.budget, parts, family)

    def answer(self, requests) -> list[Released]:
        return [self._round(query, allotment) for query, allotment in requests]

    def _round(self, query, allotment) -> Released:
        if allotment.mu is None or query.sparse:
            raise CapabilityError(f"{self.model} releases dense Gaussian sums only")
        start, start_cpu = time.perf_counter(), time.process_time()
        mechanisms = block_mechanisms(query, allotment)
        spec = {
            "n_buckets": query.n_buckets,
            "blocks": [
                {"name": b.name, "width": b.width, "sensitivity": m.sensitivity, "std": m.std}
                for b, m in zip(query.blocks, mechanisms)
            ],
        }
        header = {"label": query.label}
        if spec != self._rounds.last_spec:  # the noise parameters travel only when they change
            header["spec"] = self._rounds.last_spec = spec
        shape = (query.n_buckets, query.width)
        # Charged before this party's sums leave it: with t of n the server may release the round even if this
        # party never hears of it (it drops out after its message), so the round is recorded whatever follows.
        for block, mechanism in zip(query.blocks, mechanisms):
            self.accountant.spend(mechanism.spend(f"{query.label}/{block.name}"))
        total = self._aggregation.released(self._rounds.count, header, shape[0] * shape[1])
        if total is None:  # the rows are read only for a round that is not released yet
            total = self._aggregation.aggregate(self._rounds.count, header, encode(self._rows.sums([query])[0]).ravel())
        values = decode(total).reshape(shape)
        out = {block.name: values[:, cols] for block, cols in query.block_slices()}
        self._rounds.count += 1
        self._rounds.seconds.append(time.perf_counter() - start)
        self._rounds.cpu_seconds.append(time.process_time() - start_cpu)
        return Released(out, {b.name: m.std for b, m in zip(query.blocks, mechanisms)})


@dataclass
class FederatedResult:
    centers: np.ndarray
    n_iter: int
    privacy_spent: dict
    rounds: int
    bytes_sent: int
    bytes_received: int
    round_seconds: list[float] = field(default_factory=list)
    round_cpu_seconds: list[float] = field(default_factory=list)  # this party's CPU time per round
    contributors: list[list[int]] = field(default_factory=list)  # per round: the parties whose sums are in it

    @property
    def party_counts(self) -> list[int]:
        """How many parties contributed to each round."""
        return [len(c) for c in self.contributors]


@dataclass(frozen=True)
class JobLimits:
    """What this party agrees to: a job announced beyond them is refused before any data-derived message.

    By default at most epsilon 1 and delta 1e-6, as ``privclust federated join`` and the Flower client agree to;
    ``None`` leaves a parameter to the server.  ``min_threshold`` defaults to a majority (the server's threshold
    must be at least this)."""

    max_epsilon: float | None = 1.0
    max_delta: float | None = 1e-6
    n_clusters: int | None = None
    bounds: object = None
    min_threshold: int | None = None


def _same_bounds(a, b) -> bool:
    if isinstance(a, dict) or isinstance(b, dict) or np.ndim(a) == 0 or np.ndim(b) == 0:
        radius = lambda v: v["radius"] if isinstance(v, dict) else v  # noqa: E731
        try:
            return float(radius(a)) == float(radius(b))
        except (KeyError, TypeError, ValueError):
            return False
    try:
        return np.array_equal(np.asarray(a, dtype=float), np.asarray(b, dtype=float))
    except (TypeError, ValueError):
        return False


def check_job(job: Job, threshold: int, parties: int, limits: JobLimits) -> None:
    """Refuse (ValueError naming the limit) a job this party did not agree to."""
    if limits.max_epsilon is not None and job.epsilon > limits.max_epsilon:
        raise ValueError(f"the server announces epsilon {job.epsilon}, above this party's limit {limits.max_epsilon}")
    if limits.max_delta is not None and job.delta > limits.max_delta:
        raise ValueError(f"the server announces delta {job.delta}, above this party's limit {limits.max_delta}")
    if limits.n_clusters is not None and job.n_clusters != limits.n_clusters:
        raise ValueError(f"the server announces k = {job.n_clusters}, this party expects {limits.n_clusters}")
    if limits.bounds is not None and not _same_bounds(job.bounds, limits.bounds):
        raise ValueError(f"the server announces bounds {job.bounds}, this party expects {limits.bounds}")
    least = max(2, parties // 2 + 1, limits.min_threshold or 0)
    if threshold < least:
        raise ValueError(f"the server announces threshold {threshold}, this party requires at least {least}")


def _check_welcome(welcome: dict, party: int, parties: int, nonce: str, d: int, limits: JobLimits):
    """(job, threshold, session, server timeout) from the server's WELCOME, checked; ValueError refuses."""
    if welcome.get("version") != PROTOCOL_VERSION:
        raise ProtocolError(f"the server speaks protocol {welcome.get('version')!r}, this party {PROTOCOL_VERSION}")
    if welcome.get("parties") != parties:
        raise ProtocolError(f"the server announces {welcome.get('parties')!r} parties, this party expects {parties}")
    nonces = welcome.get("nonces")
    if not isinstance(nonces, dict) or set(nonces) != {str(i) for i in range(parties)}:
        raise ProtocolError("the server relayed the wrong set of party nonces")
    if nonces[str(party)] != nonce or not all(crypto.is_hex(v, crypto.SEED_BYTES) for v in nonces.values()):
        raise ProtocolError("the server did not relay this party's fresh nonce: the session is not fresh")
    if not crypto.is_hex(welcome.get("server_nonce"), crypto.SEED_BYTES):
        raise ProtocolError("the server sent no nonce")
    threshold, server_timeout = welcome.get("threshold"), welcome.get("timeout")
    if isinstance(threshold, bool) or not isinstance(threshold, int) or not 2 <= threshold <= parties:
        raise ProtocolError(f"the server announces an invalid threshold {threshold!r}")
    if (
        isinstance(server_timeout, bool)
        or not isinstance(server_timeout, (int, float))
        or not (math.isfinite(server_timeout) and server_timeout > 0)
    ):
        raise ProtocolError("the server announces an invalid timeout")
    try:
        job = Job(**welcome["job"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ProtocolError(f"the server announces an invalid job: {exc}") from None
    if job.n_features is not None and job.n_features != d:
        raise ValueError(f"the job has {job.n_features} features, this party's data {d}")
    make_domain(job.bounds, d)  # bounds that do not fit this party's columns
    check_job(job, threshold, parties, limits)
    return job, threshold, crypto.session_id(welcome), float(server_timeout)


def _connect(address, ssl_context: ssl.SSLContext | None, timeout: float, server_name: str | None):
    raw = socket.create_connection(tuple(address), timeout=timeout)
    raw.settimeout(timeout)
    raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # one small message per round: send it now
    if ssl_context is None:
        return raw
    try:
        return ssl_context.wrap_socket(raw, server_hostname=server_name or address[0])
    except BaseException:
        raw.close()
        raise


def join(
    data,
    address: tuple[str, int],
    party: int,
    parties: int,
    ssl_context: ssl.SSLContext | None = None,
    group_key: bytes | None = None,
    timeout: float = 60.0,
    max_bytes: int = DEFAULT_MAX_BYTES,
    server_name: str | None = None,
    callback=None,
    limits: JobLimits | None = None,
    accountant: PrivacyAccountant | None = None,
) -> FederatedResult:
    """Take part in a federated run with this party's rows; returns the released centers.

    The party checks the announced job against ``limits`` and refuses it before sending
    anything derived from its data.  While the rounds run it waits for the server at least
    twice the server's dropout timeout (the server may be waiting out a dropped party).

    ``accountant``: this party's own budget across runs (a :class:`~privclust.privacy.ledger.LedgerAccountant`
    file, say): the job's whole plan is checked against it before any row is read, and every round is
    recorded in it -- what ``limits``, which hold one run, cannot do for a job run again.  A run that aborts
    raises :class:`FederatedAbort` whose ``privacy_spent`` is what its released rounds spent."""
    X = check_data(data)
    if isinstance(parties, bool) or not isinstance(parties, int) or not 2 <= parties <= MAX_PARTIES:
        raise ValueError(f"parties must be an integer in 2 .. {MAX_PARTIES}, got {parties!r}")
    if isinstance(party, bool) or not isinstance(party, int) or not 0 <= party < parties:
        raise ValueError(f"party must be an integer in 0 .. {parties - 1}, got {party!r}")
    if group_key is not None and len(group_key) < crypto.SEED_BYTES:
        raise ValueError(f"a group key needs at least {crypto.SEED_BYTES} random bytes")
    if not (isinstance(timeout, (int, float)) and 0 < timeout <= MAX_TIMEOUT):
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    limits = limits or JobLimits()
    if accountant is not None and not isinstance(accountant, PrivacyAccountant):
        raise TypeError("accountant must be a privclust PrivacyAccountant (or LedgerAccountant)")
    sock = _connect(address, ssl_context, timeout, server_name)
    channel, aggregation, recorder = _Channel(sock, max_bytes), None, None
    try:
        nonce = crypto.new_nonce()
        channel.send(
            Kind.HELLO,
            {"version": PROTOCOL_VERSION, "party": party, "parties": parties, "n_features": X.shape[1], "nonce": nonce},
        )
        welcome, _ = channel.receive(Kind.WELCOME)
        try:
            job, threshold, session, server_timeout = _check_welcome(welcome, party, parties, nonce, X.shape[1], limits)
        except ValueError as exc:
            raise ValueError(f"party {party} refuses the job: {exc}") from None
        recorder = PrivacyAccountant(job.budget(), parent=accountant)  # this run's spends, charged to the party's too
        sock.settimeout(min(max(timeout, 2 * server_timeout + 10), 3 * MAX_TIMEOUT))
        secagg = SecAggParty(party, parties, threshold, session, group_key)
        channel.send(Kind.PUBKEY, {"public": secagg.public_key, "group_key": group_key is not None})
        keys, _ = channel.receive(Kind.PUBKEYS)
        secagg.absorb_public_keys(keys.get("keys"))
        channel.send(Kind.SHARES, secagg.setup_message())
        relayed, _ = channel.receive(Kind.SHARE)
        secagg.absorb_setup(relayed)
        aggregation = MaskedAggregation(channel, secagg)
        # Every party derives the same public seed from the group secret: the geometry only, no noise.
        seed = crypto.geometry_seed(secagg.group_secret, session)
        run, result = run_party(X, job, seed, aggregation, callback, recorder)
        channel.send(Kind.DONE, {})
    except FederatedAbort as exc:
        raise aborted_after(str(exc), _sent(aggregation), _spent(recorder), CARRIED) from exc
    except (ProtocolError, OSError, ValueError, BudgetExceededError) as exc:
        # the server (and through it every party) hears why -- but not this party's own budget or ledger
        told = "its own budget refuses the job" if isinstance(exc, BudgetExceededError) else str(exc)
        send_abort(sock, f"party {party}: {told}")
        raise aborted_after(f"party {party}: {exc}", _sent(aggregation), _spent(recorder), CARRIED) from exc
    finally:
        sock.close()
    return party_result(run, result, aggregation.contributors, channel.sent, channel.received)


def _spent(accountant: PrivacyAccountant | None) -> dict | None:
    """A party's record: the total and every step (none before the job was agreed)."""
    return None if accountant is None else accountant.report().as_dict()


CARRIED = "carried this party's sums (each may have been released)"  # what a party's abort counts


def _sent(aggregation: "MaskedAggregation | None") -> int:
    """How many rounds carried this party's sums (none before its rounds began): each may have been released."""
    return 0 if aggregation is None else aggregation.sent_rounds


def run_party(X: np.ndarray, job: Job, seed: int, aggregation, callback=None, parent: PrivacyAccountant | None = None):
    """Run ``job``'s algorithm on this party's checked rows ``X``: (session, FitResult); every spend is also
    recorded in ``parent`` (checked against it first).

    ``aggregation`` carries each round (``released(round, header, size)``: a total known already, else
    ``aggregate(round, header, encoded) -> ring total``, see :class:`MaskedAggregation`); ``seed`` is the
    public geometry seed every party derives alike.  The algorithm is the central model's code; only the
    oracle is the party's."""

    def federated(accountant, randomness):  # this party's rows; the server adds the noise
        domain = make_domain(job.bounds, X.shape[1])
        rows = MemoryRows(X, X.shape[1], transform=domain.to_unit)
        return Curated(FederatedClientOracle(rows, job.budget(), accountant, aggregation), domain, X.shape[1], rows)

    with open_session(
        job.budget(), job.bounds, parent=parent, random_state=seed, oracle=federated, seeded_noise=False
    ) as run:
        options = {"alpha": job.alpha, "max_iter": job.max_iter}
        ctx = run.context(job.n_clusters, public_n=job.public_n, options=options, callback=callback)
        result = ALGORITHMS[job.algorithm](ctx)
    return run, result


def party_result(run, result, contributors, sent: int = 0, received: int = 0) -> FederatedResult:
    """What a party reports of a finished run: the released centers, the ledger and who contributed."""
    return FederatedResult(
        centers=run.domain.from_unit(result.centers),
        n_iter=result.n_iter,
        privacy_spent=_spent(run.accountant),
        rounds=run.oracle.rounds,
        bytes_sent=sent,
        bytes_received=received,
        round_seconds=run.oracle.round_seconds,
        round_cpu_seconds=run.oracle.round_cpu_seconds,
        contributors=[list(c) for c in contributors],
    )

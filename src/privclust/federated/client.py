"""A federated party: runs the unchanged algorithm against a masked-aggregation oracle.

Each party runs the same algorithm code as the central model; only the oracle
differs.  :class:`FederatedClientOracle` answers a query by computing this
party's exact clipped per-bucket sums (the central oracle's own code, on local
rows), encoding them in the ring, adding this party's mask, and sending one
message; the server's reply is the masked noisy aggregate, from which the
party subtracts every party's mask.  The initial centers come from a seed all
parties derive from the group seed, and every later step depends only on
released values, so all parties hold identical centers throughout.
"""

from __future__ import annotations

import socket
import ssl
import time
from dataclasses import dataclass, field

import numpy as np

from .._validation import check_data
from ..algorithms import ALGORITHMS, FitContext
from ..geometry.domain import make_domain
from ..privacy.budget import PrivacyAccountant
from ..privacy.noise import Randomness
from ..queries.base import AggregateOracle, BucketSumQuery
from ..queries.central import CentralOracle
from . import crypto
from .ring import decode, encode
from .server import PROTOCOL_VERSION, Job
from .wire import (
    DEFAULT_MAX_BYTES,
    FederatedAbort,
    Kind,
    ProtocolError,
    receive,
    ring_payload,
    ring_values,
    send,
    send_abort,
)

__all__ = ["FederatedClientOracle", "FederatedResult", "join"]


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


class FederatedClientOracle(AggregateOracle):
    def __init__(
        self,
        channel: _Channel,
        local: CentralOracle,
        accountant: PrivacyAccountant,
        session: str,
        party: int,
        parties: int,
        group_seed: bytes,
    ):
        super().__init__(local.n_features, accountant, noise=None)
        self._channel, self._local = channel, local
        self._session, self._party, self._parties, self._seed = session, party, parties, group_seed
        self.rounds = 0
        self.round_seconds: list[float] = []
        self._last_spec = None

    def release(self, query: BucketSumQuery) -> dict[str, np.ndarray]:
        spends = query.spends()
        self.accountant.check(spends)
        start = time.perf_counter()
        exact = self._local.exact_sums(query)
        count = exact.size
        masked = encode(exact).ravel() + crypto.mask(self._seed, self._session, self._party, self.rounds, count)
        spec = {
            "n_buckets": query.n_buckets,
            "blocks": [
                {"name": b.name, "width": b.width, "sensitivity": b.mechanism.sensitivity, "std": b.mechanism.std}
                for b in query.blocks
            ],
        }
        header = {"round": self.rounds, "label": query.label}
        if spec != self._last_spec:  # the noise parameters travel only when they change
            header["spec"] = self._last_spec = spec
        self._channel.send(Kind.ROUND, header, ring_payload(masked))
        reply, payload = self._channel.receive(Kind.RESULT)
        if reply.get("round") != self.rounds:
            raise ProtocolError(f"the server answered round {reply.get('round')}, expected {self.rounds}")
        total = ring_values(payload, count)
        for party in range(self._parties):
            total -= crypto.mask(self._seed, self._session, party, self.rounds, count)
        values = decode(total).reshape(exact.shape)
        out = {}
        for (block, cols), spend in zip(query.block_slices(), spends):
            out[block.name] = values[:, cols]
            self.accountant.spend(spend)
        self.rounds += 1
        self.round_seconds.append(time.perf_counter() - start)
        return out


@dataclass
class FederatedResult:
    centers: np.ndarray
    n_iter: int
    privacy_spent: dict
    rounds: int
    bytes_sent: int
    bytes_received: int
    round_seconds: list[float] = field(default_factory=list)


def _connect(address, ssl_context: ssl.SSLContext | None, timeout: float, server_name: str | None):
    raw = socket.create_connection(tuple(address), timeout=timeout)
    raw.settimeout(timeout)
    raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # one small message per round: send it now
    if ssl_context is None:
        return raw
    return ssl_context.wrap_socket(raw, server_hostname=server_name or address[0])


def _group_seed(channel: _Channel, session: str, party: int, parties: int, group_key: bytes | None) -> bytes:
    if group_key is not None:
        channel.send(Kind.PUBKEY, {"public": None})
        return crypto.derive(group_key, "group", session)
    pair = crypto.KeyPair()
    channel.send(Kind.PUBKEY, {"public": pair.public_hex})
    keys, _ = channel.receive(Kind.PUBKEYS)
    keys = keys.get("keys", {})
    if sorted(keys) != sorted(str(i) for i in range(parties)):
        raise ProtocolError("the server relayed the wrong set of public keys")
    if party == 0:
        seed = crypto.new_group_seed()
        shares = {
            str(j): crypto.seal_seed(pair.shared_key(keys[str(j)], session, 0, j), seed, session)
            for j in range(1, parties)
        }
        channel.send(Kind.SHARES, {"shares": shares})
        return seed
    header, _ = channel.receive(Kind.SHARE)
    try:
        return crypto.open_seed(pair.shared_key(keys["0"], session, 0, party), header["sealed"], session)
    except Exception as exc:  # invalid tag: tampered or misrouted share
        raise ProtocolError(f"the group key share does not authenticate: {exc}") from None


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
) -> FederatedResult:
    """Take part in a federated run with this party's rows; returns the released centers."""
    X = check_data(data)
    sock = _connect(address, ssl_context, timeout, server_name)
    channel = _Channel(sock, max_bytes)
    try:
        channel.send(
            Kind.HELLO, {"version": PROTOCOL_VERSION, "party": party, "parties": parties, "n_features": X.shape[1]}
        )
        welcome, _ = channel.receive(Kind.WELCOME)
        session, job = welcome["session"], Job(**welcome["job"])
        seed = _group_seed(channel, session, party, parties, group_key)
        domain = make_domain(job.bounds, X.shape[1])
        accountant = PrivacyAccountant(job.budget())
        local = CentralOracle(X, PrivacyAccountant(), noise=None, transform=domain.to_unit)
        oracle = FederatedClientOracle(channel, local, accountant, session, party, parties, seed)
        ctx = FitContext(
            oracle=oracle,
            n_clusters=job.n_clusters,
            budget=job.budget(),
            randomness=Randomness(crypto.geometry_seed(seed, session)),
            public_n=job.public_n,
            options={"alpha": job.alpha, "max_iter": job.max_iter},
            callback=callback,
        )
        result = ALGORITHMS[job.algorithm](ctx)
        channel.send(Kind.DONE, {"session": session})
    except (ProtocolError, FederatedAbort, OSError, ValueError) as exc:
        send_abort(sock, f"party {party}: {exc}")
        sock.close()
        if isinstance(exc, FederatedAbort):
            raise
        raise FederatedAbort(f"party {party}: {exc}") from exc
    sock.close()
    report = accountant.report()
    return FederatedResult(
        centers=domain.from_unit(result.centers),
        n_iter=result.n_iter,
        privacy_spent={
            "epsilon": report.epsilon,
            "delta": report.delta,
            "mu": report.mu,
            "steps": [s.as_dict() for s in report.steps],
        },
        rounds=oracle.rounds,
        bytes_sent=channel.sent,
        bytes_received=channel.received,
        round_seconds=oracle.round_seconds,
    )

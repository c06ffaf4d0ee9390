"""The aggregation server of masked secure aggregation (seed 003, Fig. 1).

The server never sees an unmasked value: it sums the parties' masked ring
elements, adds DP noise to the masked sum, and broadcasts.  It also keeps its
own ledger of the job's budget from the public noise parameters each round
declares, and aborts a run that would overspend.

Noise in the ring, and why the guarantee holds exactly.  Each party rounds its
exact clipped sums to the grid 2^-q before masking, so the aggregate the noise
protects is an integer vector A (in grid units).  Adding or removing one row
changes one party's exact sums by at most the block's sensitivity D (l2), and
its rounded sums by at most D 2^q + sqrt(w) (w coordinates, each rounding
moving by less than 1): that is A's sensitivity.  The server draws continuous
Gaussian noise (OpenDP's exact sampler) with standard deviation
sigma_int = (D 2^q + sqrt(w)) / mu for the round's planned mu = D / std and adds
its rounding to the masked A.  Since A is integer, A + round(eta) =
round(A + eta): the release is a post-processing of the continuous Gaussian
mechanism on A, which is mu-GDP -- the same mu the central algorithm plans.  The
extra sqrt(w) costs a relative 2^-q-scale increase in noise, not in privacy.
"""

from __future__ import annotations

import math
import queue
import secrets
import socket
import ssl
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field

import numpy as np

from ..privacy.budget import Budget, BudgetExceededError, PrivacyAccountant, Spend
from ..privacy.noise import NoiseSource, SecureNoise
from .ring import SCALE
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

__all__ = ["Job", "FederatedServer", "ServerReport", "PROTOCOL_VERSION"]

PROTOCOL_VERSION = 1
GAUSSIAN_ALGORITHMS = frozenset({"fastlloyd", "glloyd"})


@dataclass(frozen=True)
class Job:
    """The public parameters every party runs with (announced by the server)."""

    n_clusters: int
    epsilon: float
    delta: float
    bounds: object
    n_features: int | None = None
    algorithm: str = "fastlloyd"
    alpha: float = 0.8
    public_n: int | None = None
    max_iter: int | None = None

    def __post_init__(self):
        if self.algorithm not in GAUSSIAN_ALGORITHMS:
            raise ValueError(
                f"federated runs support {sorted(GAUSSIAN_ALGORITHMS)} (the server adds Gaussian noise), "
                f"not {self.algorithm!r}"
            )

    def as_dict(self) -> dict:
        return asdict(self)

    def budget(self) -> Budget:
        return Budget(self.epsilon, self.delta)


@dataclass
class ServerReport:
    rounds: int
    privacy_spent: dict
    bytes_received: dict = field(default_factory=dict)
    bytes_sent: dict = field(default_factory=dict)
    seconds: float = 0.0


ACCEPT_POLL = 0.1  # seconds between looks at finished handshakes while waiting for connections
MAX_HANDSHAKES = 64  # handshakes in flight at once


class _Handshake:
    """One incoming connection while its TLS handshake and HELLO are read (in a thread of its own)."""

    def __init__(self, raw: socket.socket):
        self.raw = raw
        self.sock = None  # the channel once wrapped (a TLS socket takes over raw's descriptor)
        self.hello, self.received, self.error = None, 0, None
        self._lock, self._closed = threading.Lock(), False

    def wrap(self, context: ssl.SSLContext | None) -> socket.socket:
        with self._lock:  # never wrap a socket that close() has already shut
            if self._closed:
                raise OSError("the run started without this connection")
            self.sock = (
                context.wrap_socket(self.raw, server_side=True, do_handshake_on_connect=False) if context else self.raw
            )
            return self.sock

    def close(self) -> None:
        """Shut the connection: a thread blocked reading it wakes up, and the peer sees it closed."""
        with self._lock:
            self._closed = True
            target = self.sock or self.raw
            try:
                target.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            target.close()


class _Party:
    def __init__(self, sock: socket.socket, index: int):
        self.sock, self.index = sock, index
        self.received = self.sent = 0
        self.spec = None  # the noise parameters this party declared last


class FederatedServer:
    """Serves one federated run for ``parties`` clients.

    ``noise=None`` uses OpenDP's secure sampler; ``add_noise=False`` exists only
    to test the protocol bit-exactly and makes the run non-private.
    ``record`` (a list) receives every masked payload, for tests.
    """

    def __init__(
        self,
        job: Job,
        parties: int,
        host: str = "127.0.0.1",
        port: int = 0,
        ssl_context: ssl.SSLContext | None = None,
        timeout: float = 60.0,
        max_bytes: int = DEFAULT_MAX_BYTES,
        noise: NoiseSource | None = None,
        add_noise: bool = True,
        record: list | None = None,
    ):
        if parties < 2:
            raise ValueError("a federated run needs at least 2 parties")
        job.budget()  # validates epsilon and delta
        self.job, self.parties = job, int(parties)
        self._ssl, self._timeout, self._max_bytes = ssl_context, float(timeout), int(max_bytes)
        self._noise = noise or SecureNoise()
        self._noise.add_gaussian(np.zeros(1), 1.0)  # load the sampler now, not inside the first round
        self._add_noise, self._record = add_noise, record
        self._spare = None
        self._listener = socket.create_server((host, port))
        self._listener.settimeout(self._timeout)
        self.address = self._listener.getsockname()[:2]
        self.accountant = PrivacyAccountant(job.budget())

    # -- connection set-up ---------------------------------------------------------------

    def _accept(self) -> list[_Party]:
        """Wait for every party.  Each connection's TLS handshake and HELLO run in a thread of their own,
        so a silent or slow client delays nobody else; the run starts as soon as all parties have
        joined, and connections still half-open then are closed.  ``timeout`` bounds the wait since
        the last connection or join."""
        connected: dict[int, _Party] = {}
        arrived: queue.Queue = queue.Queue()
        pending: list[_Handshake] = []
        self._listener.settimeout(ACCEPT_POLL)
        last_progress = time.monotonic()
        pool = ThreadPoolExecutor(max_workers=MAX_HANDSHAKES, thread_name_prefix="privclust-handshake")
        try:
            while len(connected) < self.parties:
                try:
                    raw, _ = self._listener.accept()
                    pending.append(_Handshake(raw))
                    pool.submit(self._handshake, pending[-1], arrived)
                    last_progress = time.monotonic()
                except socket.timeout:
                    pass
                while not arrived.empty():
                    done = arrived.get()
                    pending.remove(done)
                    if self._join(done, connected):
                        last_progress = time.monotonic()
                if len(connected) < self.parties and time.monotonic() - last_progress > self._timeout:
                    raise ProtocolError(f"only {len(connected)} of {self.parties} parties joined in time")
        except BaseException as exc:
            for party in connected.values():
                send_abort(party.sock, str(exc))
                party.sock.close()
            raise
        finally:
            for handshake in pending:  # still running: closing the socket ends its thread
                handshake.close()
            pool.shutdown(wait=False)
        return [connected[i] for i in range(self.parties)]

    def _handshake(self, handshake: "_Handshake", arrived: queue.Queue) -> None:
        try:
            handshake.raw.settimeout(self._timeout)
            handshake.raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock = handshake.wrap(self._ssl)
            if self._ssl is not None:
                sock.do_handshake()
            _, handshake.hello, _, handshake.received = receive(sock, self._max_bytes, expect=Kind.HELLO)
        except (ProtocolError, ssl.SSLError, OSError, ValueError) as exc:
            handshake.error = exc
        arrived.put(handshake)

    def _join(self, handshake: "_Handshake", connected: dict) -> bool:
        """Admit a handshaken client (True) or turn it away (False); the run goes on waiting."""
        error = handshake.error
        if error is None:
            try:
                index = self._check_hello(handshake.sock, handshake.hello, connected)
            except ProtocolError as exc:
                error = exc
        if error is not None:
            if handshake.sock is not None:  # an established channel: say why
                send_abort(handshake.sock, f"rejected: {error}")
            handshake.close()
            if isinstance(error, ProtocolError) and "wrong number of parties" in str(error):
                raise error
            return False
        party = _Party(handshake.sock, index)
        party.received += handshake.received
        connected[index] = party
        return True

    def _check_hello(self, sock, hello: dict, connected: dict) -> int:
        if hello.get("version") != PROTOCOL_VERSION:
            raise ProtocolError(f"protocol version {hello.get('version')!r}, expected {PROTOCOL_VERSION}")
        if hello.get("parties") != self.parties:
            raise ProtocolError(
                f"wrong number of parties: a client expects {hello.get('parties')}, the server {self.parties}"
            )
        index = hello.get("party")
        if not isinstance(index, int) or not 0 <= index < self.parties or index in connected:
            raise ProtocolError(f"party id {index!r} is invalid or already taken")
        if self._ssl is not None:
            subject = dict(item[0] for item in sock.getpeercert().get("subject", ()))
            if subject.get("commonName") != f"party-{index}":
                raise ProtocolError(f"certificate of {subject.get('commonName')!r} cannot join as party-{index}")
        d = hello.get("n_features")
        if self.job.n_features is not None and d != self.job.n_features:
            raise ProtocolError(f"party {index} has {d} features, the job {self.job.n_features}")
        return index

    # -- the run -------------------------------------------------------------------------

    def serve(self) -> ServerReport:
        """Run the whole protocol; raises FederatedAbort (after telling every party) on failure."""
        start = time.perf_counter()
        parties: list[_Party] = []
        try:
            parties = self._accept()
            rounds = self._run(parties)
        except (ProtocolError, FederatedAbort, BudgetExceededError, OSError, ValueError) as exc:
            for p in parties:
                send_abort(p.sock, str(exc))
            raise FederatedAbort(str(exc)) from exc
        finally:
            for p in parties:
                p.sock.close()
            self._listener.close()
        report = self.accountant.report()
        return ServerReport(
            rounds=rounds,
            privacy_spent={"epsilon": report.epsilon, "delta": report.delta, "mu": report.mu},
            bytes_received={p.index: p.received for p in parties},
            bytes_sent={p.index: p.sent for p in parties},
            seconds=time.perf_counter() - start,
        )

    def _broadcast(self, parties, kind, header, payload=b"") -> None:
        for p in parties:
            p.sent += send(p.sock, kind, header, payload)

    def _run(self, parties: list[_Party]) -> int:
        session = secrets.token_hex(16)
        self._broadcast(parties, Kind.WELCOME, {"session": session, "job": self.job.as_dict(), "parties": self.parties})
        keys = {}
        for p in parties:
            _, header, _, n = receive(p.sock, self._max_bytes, expect=Kind.PUBKEY)
            p.received += n
            keys[p.index] = header.get("public")
        if all(k is None for k in keys.values()):
            pass  # every party holds the pre-shared group key
        elif any(k is None for k in keys.values()):
            raise ProtocolError("parties disagree on key agreement (some use a pre-shared key)")
        else:
            self._broadcast(parties, Kind.PUBKEYS, {"keys": {str(i): k for i, k in keys.items()}})
            _, shares, _, n = receive(parties[0].sock, self._max_bytes, expect=Kind.SHARES)
            parties[0].received += n
            for p in parties[1:]:
                sealed = shares.get("shares", {}).get(str(p.index))
                if not isinstance(sealed, dict):
                    raise ProtocolError(f"the leader sent no key share for party {p.index}")
                p.sent += send(p.sock, Kind.SHARE, {"sealed": sealed})
        round_index = 0
        while True:
            messages = []
            for p in parties:
                kind, header, payload, n = receive(p.sock, self._max_bytes)
                p.received += n
                messages.append((kind, header, payload))
            kinds = {m[0] for m in messages}
            if kinds == {Kind.DONE}:
                return round_index
            if kinds != {Kind.ROUND}:
                raise ProtocolError("parties disagree: some finished while others sent a round")
            self._aggregate(parties, round_index, messages)
            round_index += 1

    def _aggregate(self, parties, round_index: int, messages) -> None:
        # Each party's connection belongs to this session; within it, rounds must come in order.
        for party, (_, header, _) in zip(parties, messages):
            if header.get("round") != round_index:
                raise ProtocolError(
                    f"replayed or out-of-order round from party {party.index}: got round "
                    f"{header.get('round')}, expected {round_index}"
                )
            if "spec" in header:
                party.spec = header["spec"]
            if party.spec is None:
                raise ProtocolError(f"party {party.index} sent a round without its noise parameters")
        spec, label = parties[0].spec, messages[0][1].get("label")
        if any(p.spec != spec or m[1].get("label") != label for p, m in zip(parties[1:], messages[1:])):
            raise ProtocolError(f"parties disagree on round {round_index}'s query")
        try:
            blocks = list(spec["blocks"])
            n_buckets = int(spec["n_buckets"])
        except (KeyError, TypeError, ValueError):
            raise ProtocolError(f"malformed noise parameters in round {round_index}") from None
        widths = [int(b["width"]) for b in blocks]
        count = n_buckets * sum(widths)
        total = np.zeros(count, dtype=np.uint64)
        for _, _, payload in messages:
            values = ring_values(payload, count)
            if self._record is not None:
                self._record.append(values.copy())
            total += values  # wraps modulo 2^64
        spends = [Spend(f"{label}/{b['name']}", mu=float(b["sensitivity"]) / float(b["std"])) for b in blocks]
        self.accountant.check(spends)
        if self._add_noise:
            total += self._ring_noise(n_buckets, blocks).ravel()
        for s in spends:
            self.accountant.spend(s)
        self._broadcast(parties, Kind.RESULT, {"round": round_index}, ring_payload(total))
        if self._add_noise:
            # Noise does not depend on the data: draw the next round's now, while the parties
            # compute (later rounds usually repeat this round's noise parameters).
            self._spare = (self._noise_key(n_buckets, blocks), self._draw_noise(n_buckets, blocks))

    @staticmethod
    def _noise_key(n_buckets: int, blocks: list) -> tuple:
        return (n_buckets, tuple((int(b["width"]), float(b["sensitivity"]), float(b["std"])) for b in blocks))

    def _draw_noise(self, n_buckets: int, blocks: list) -> np.ndarray:
        """Integer ring noise per block: round(N(0, sigma_int^2)), see the module docstring."""
        parts = []
        for block in blocks:
            width, sensitivity, std = int(block["width"]), float(block["sensitivity"]), float(block["std"])
            sigma_int = std * SCALE + math.sqrt(width) * std / sensitivity
            parts.append(np.rint(self._noise.add_gaussian(np.zeros((n_buckets, width)), sigma_int)))
        return np.hstack(parts).astype(np.int64).view(np.uint64)

    def _ring_noise(self, n_buckets: int, blocks: list) -> np.ndarray:
        key = self._noise_key(n_buckets, blocks)
        spare, self._spare = self._spare, None
        if spare is not None and spare[0] == key:
            return spare[1]  # each draw is used once, then discarded
        return self._draw_noise(n_buckets, blocks)

"""The aggregation server: dropout-tolerant masked secure aggregation plus the DP noise.

The server never sees an unmasked value, neither a party's sums nor their total: each
round it sums the survivors' masked messages, has the survivors reveal the Shamir shares
that take the self masks and the dropped parties' pairwise masks off (``secagg.py``),
adds DP noise to what is left -- the survivors' sum under the output masks only the
parties can remove -- and broadcasts.  It keeps its own ledger of the job's budget from
the public noise parameters each round declares, and aborts a run that would overspend.

Noise in the ring, and why the guarantee holds exactly.  Each party rounds its exact
clipped sums to the grid 2^-q before masking, so the aggregate the noise protects is an
integer vector A (in grid units).  Adding or removing one row changes one party's exact
sums by at most the block's sensitivity D (l2), and its rounded sums by at most
D 2^q + sqrt(w) (w coordinates, each rounding moving by less than 1): that is A's
sensitivity, whoever else contributed.  The server draws continuous Gaussian noise
(OpenDP's exact sampler) with standard deviation sigma_int = (D 2^q + sqrt(w)) / mu for
the round's planned mu = D / std and adds its rounding to the masked A.  Since A is
integer, A + round(eta) = round(A + eta): the release is a post-processing of the
continuous Gaussian mechanism on A, which is mu-GDP -- the same mu the central algorithm
plans.  When parties drop out, A is the sum over the survivors: a row of a dropped party
is simply not in it, and a row of a survivor moves it by the same bound, so the same
sigma_int protects it.

Hostile peers.  Connections are accepted and their TLS handshakes and HELLOs read by one
non-blocking loop: each handshake has a deadline of its own, each source address a
bounded number of pending connections (the oldest are shut to make room), nothing is
written to a connection before its handshake completed, and the join deadline moves only
when a party's slot is taken for the first time.  Until the run starts a slot is held only by
a live connection: an admitted party that hangs up (or sends anything before the WELCOME)
frees its slot, and a newer connection for the same party replaces the older one (a party
may reconnect; a stale or hostile connection cannot keep it out).  A certificate's identity is checked before anything its peer says
is acted on.
"""

from __future__ import annotations

import json
import math
import numbers
import re
import secrets
import selectors
import socket
import ssl
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from functools import partial

import numpy as np

from .._validation import positive_finite
from ..algorithms import ALGORITHMS, FitContext
from ..algorithms.base import NON_PRIVATE, algorithm_spec
from ..algorithms.params import DEFAULT_ALPHA, check_params
from ..geometry.domain import make_domain
from ..privacy.budget import Budget, BudgetExceededError, Cover, PrivacyAccountant, Spend
from ..privacy.leaks import warn_leak
from ..privacy.noise import NoiseSource, Randomness, SecureNoise
from ..queries.plan import ADAPTIVE, DENSE, CapabilityError, PlanningOracle, Staged
from . import crypto
from .ring import SCALE
from .secagg import check_material, default_threshold, remove_masks
from .wire import (
    DEFAULT_MAX_BYTES,
    PREFIX_SIZE,
    FederatedAbort,
    Kind,
    ProtocolError,
    aborted_after,
    frame_size,
    parse_frame,
    receive,
    ring_payload,
    ring_values,
    send,
    send_abort,
)

__all__ = [
    "Job",
    "FederatedServer",
    "ServerReport",
    "PROTOCOL_VERSION",
    "validate_spec",
    "round_spends",
    "server_spent",
    "draw_ring_noise",
]

PROTOCOL_VERSION = 2
# What a party's oracle offers: dense Gaussian sums, in as many rounds as the algorithm asks for.  Any
# algorithm whose plan needs no more (and prices nothing itself) runs federated: the server only adds
# Gaussian noise and charges mu-GDP.
CAPABILITIES = frozenset({DENSE, ADAPTIVE})
MODEL = "the federated model (masked aggregation; the server adds Gaussian noise)"
MAX_PARTIES = 1000
MAX_TIMEOUT = 86400.0  # seconds: a day
MAX_SIGMA_INT = 2.0**56  # ring noise must leave the sums' headroom (ring.py) intact


def _is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


@dataclass(frozen=True)
class Job:
    """The public parameters every party runs with (announced by the server, checked on both sides)."""

    n_clusters: int
    epsilon: float
    delta: float
    bounds: object
    n_features: int | None = None
    algorithm: str = "auto"
    alpha: float = DEFAULT_ALPHA
    public_n: int | None = None
    max_iter: int | None = None

    def __post_init__(self):
        if self.algorithm not in ALGORITHMS:
            raise ValueError(f"unknown algorithm {self.algorithm!r}; choose one of {sorted(ALGORITHMS)}")
        if self.algorithm in NON_PRIVATE:
            raise ValueError(f"algorithm={self.algorithm!r} is the non-private baseline: a federated run is private")
        if not _is_int(self.n_clusters) or self.n_clusters < 1:
            raise ValueError(f"the number of clusters k must be a positive integer, got {self.n_clusters!r}")
        self.budget()
        if self.delta <= 0:
            raise ValueError("delta must be positive: the federated algorithms are Gaussian mechanisms")
        if self.n_features is not None and (not _is_int(self.n_features) or self.n_features < 1):
            raise ValueError(f"n_features must be a positive integer, got {self.n_features!r}")
        # alpha and max_iter as the estimator checks them (algorithms.params): glloyd takes no alpha
        check_params(self.algorithm, {"alpha": self.alpha, "max_iter": self.max_iter})
        if self.public_n is not None and (not _is_int(self.public_n) or self.public_n < 1):
            raise ValueError(f"public_n must be a positive integer, got {self.public_n!r}")
        bounds = self.bounds.tolist() if isinstance(self.bounds, np.ndarray) else self.bounds
        if isinstance(bounds, tuple):
            bounds = list(bounds)
        object.__setattr__(self, "bounds", bounds)
        d = self.n_features or (len(bounds) if np.ndim(bounds) == 2 else 1)
        if isinstance(bounds, str):
            raise ValueError("federated runs need declared bounds (bounds='data' would read every party's data)")
        make_domain(bounds, d)  # raises ValueError on empty, inverted, infinite or malformed bounds
        self.check_plan(d)

    def check_plan(self, d: int) -> None:
        """Refuse an algorithm whose plan a party's oracle cannot serve: ``Oracle.check`` refuses one needing
        more than dense rounds (every plan it may run, in its pool); each of them must spend only pooled
        Gaussian parts (what the server noises and charges); and where it chooses among plans, they must cost
        the same (the server records the rounds it serves, not the union a choice is bounded by)."""
        oracle = PlanningOracle(d, self.budget(), CAPABILITIES, MODEL)
        options = {"alpha": self.alpha, "max_iter": self.max_iter}  # as a party passes them
        ctx = FitContext(oracle, self.n_clusters, self.budget(), Randomness(0), public_n=self.public_n, options=options)
        spec = algorithm_spec(self.algorithm, ctx)
        oracle.check(spec)
        for plan in [p for stage in spec.stages for p in stage.options] if isinstance(spec, Staged) else [spec]:
            if plan.family != "gaussian" or any(not part.pooled for part in plan.parts):
                raise CapabilityError(
                    f"{self.algorithm} ({plan.what}) prices releases of its own, which {MODEL} does not "
                    "serve: the server adds Gaussian noise only; choose e.g. fastlloyd, glloyd, greedy or auto"
                )
        covers = [Cover.of(spends) for spends in oracle.spends(spec)]
        if any(not (cover.within(covers[0]) and covers[0].within(cover)) for cover in covers):
            # the server records each round's spends as it serves it: a choice among plans of different costs
            # would be recorded below the union its guarantee rests on (a party records that union)
            raise CapabilityError(
                f"{self.algorithm} may choose among plans of different costs, which {MODEL} cannot record: its "
                "server charges the rounds it serves; choose an algorithm with one plan (e.g. fastlloyd)"
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
    round_cpu_seconds: list = field(default_factory=list)  # the server's CPU time per released round
    dropouts: dict = field(default_factory=dict)  # party -> the round it dropped out in
    contributors: list = field(default_factory=list)  # per released round: the parties whose sums are in it

    @property
    def party_counts(self) -> list[int]:
        """How many parties contributed to each released round."""
        return [len(c) for c in self.contributors]


def validate_spec(spec, max_bytes: int) -> tuple[int, list[dict], int]:
    """(n_buckets, blocks, ring elements) of a round's declared noise parameters, or ProtocolError."""
    if not isinstance(spec, dict) or not isinstance(spec.get("blocks"), list) or not spec["blocks"]:
        raise ProtocolError("the noise parameters name no blocks")
    n_buckets = spec.get("n_buckets")
    if not _is_int(n_buckets) or n_buckets < 1:
        raise ProtocolError(f"the number of buckets must be a positive integer, got {n_buckets!r}")
    blocks = []
    for block in spec["blocks"]:
        if not isinstance(block, dict) or not isinstance(block.get("name"), str):
            raise ProtocolError("a block of the noise parameters has no name")
        width, sensitivity, std = block.get("width"), block.get("sensitivity"), block.get("std")
        if not _is_int(width) or width < 1:
            raise ProtocolError(f"block {block['name']!r}: width must be a positive integer, got {width!r}")
        try:
            sensitivity = positive_finite(f"block {block['name']!r}: sensitivity", sensitivity)
            std = positive_finite(f"block {block['name']!r}: std", std)
        except ValueError as exc:
            raise ProtocolError(str(exc)) from None
        sigma_int = std * SCALE + math.sqrt(width) * std / sensitivity
        if not math.isfinite(sigma_int) or sigma_int > MAX_SIGMA_INT:
            raise ProtocolError(
                f"block {block['name']!r}: std {std} / sensitivity {sensitivity} is too large for the ring"
            )
        blocks.append({"name": block["name"], "width": int(width), "sensitivity": sensitivity, "std": std})
    count = n_buckets * sum(b["width"] for b in blocks)
    if 8 * count > max_bytes:
        raise ProtocolError(
            f"{n_buckets} buckets of {count // n_buckets} values exceed the message limit of {max_bytes} bytes"
        )
    return n_buckets, blocks, count


# -- accepting parties ---------------------------------------------------------------------

HANDSHAKE_TIMEOUT = 10.0  # seconds a connection has to finish its TLS handshake and HELLO
MAX_PENDING_PER_SOURCE = 32  # pending connections per source address; the oldest is shut for a new one
MAX_PENDING = 2048  # pending connections in all
HELLO_LIMIT = 64 * 1024  # bytes a HELLO may take
_PARTY_NAME = re.compile(r"party-(\d{1,6})")


class _Pending:
    """A connection whose handshake or HELLO is under way (non-blocking)."""

    def __init__(self, sock, source: str, deadline: float, handshaken: bool):
        self.sock, self.source, self.deadline = sock, source, deadline
        self.handshaken, self.identity, self.buffer = handshaken, None, bytearray()

    def reject(self, reason: str) -> None:
        """Say why, in one non-blocking write, only on a channel whose handshake finished; then shut."""
        if self.handshaken:
            try:
                self.sock.setblocking(False)
                send(self.sock, Kind.ABORT, {"reason": f"rejected: {reason}"})
            except (OSError, ValueError):
                pass
        self.close()

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


def _hung_up(sock) -> str | None:
    """Why an admitted party's connection, readable before the run started, is no longer a party's: "closed",
    or that it spoke out of turn; None if it is still there (TLS bytes that carry no data)."""
    try:
        data = sock.recv(1)
    except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError, InterruptedError):
        return None
    except (OSError, ValueError):
        return "closed"
    return "closed" if not data else "sent data before the WELCOME"


class _Party:
    def __init__(self, sock, index: int, hello: dict, received: int):
        self.sock, self.index, self.hello = sock, index, hello
        self.received, self.sent = received, 0
        self.spec = None  # the noise parameters this party declared last


class FederatedServer:
    """Serves one federated run for ``parties`` clients.

    ``threshold`` (default: a majority) is how many parties must survive every round; up
    to ``parties - threshold`` may drop out.  ``timeout`` bounds the wait for the parties to
    join (counted from the last join) and for each round's messages (a party that misses it
    has dropped out).  ``noise=None`` uses OpenDP's secure sampler (another source, e.g. seeded, warns
    as a seeded central fit does); ``add_noise=False`` exists only to test the protocol bit-exactly:
    the run is not private, so it warns and its report states epsilon = inf (the parties, who cannot
    tell, record what the rounds declared).
    ``record`` (a list) receives ``(round, party, masked payload)`` of every message, for tests.
    ``contributors`` lists, per released round, the parties whose sums are in it (public protocol
    metadata: which connections delivered in time, not a statistic of the rows).
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
        threshold: int | None = None,
        handshake_timeout: float = HANDSHAKE_TIMEOUT,
    ):
        if not isinstance(job, Job):
            raise ValueError("job must be a privclust.federated.Job")
        if not _is_int(parties) or not 2 <= parties <= MAX_PARTIES:
            raise ValueError(f"a federated run needs 2 .. {MAX_PARTIES} parties, got {parties!r}")
        threshold = default_threshold(parties) if threshold is None else threshold
        if not _is_int(threshold) or not max(2, parties // 2 + 1) <= threshold <= parties:
            raise ValueError(
                f"the threshold must be a majority of the parties and at least 2: "
                f"{max(2, parties // 2 + 1)} .. {parties}, got {threshold!r}"
            )
        self.joined: frozenset[int] = frozenset()  # the slots live connections hold while parties join
        self._timeout = positive_finite("timeout", timeout)
        if self._timeout > MAX_TIMEOUT:
            raise ValueError(f"timeout must be at most {MAX_TIMEOUT:g} seconds, got {timeout!r}")
        self._handshake_timeout = min(positive_finite("handshake_timeout", handshake_timeout), self._timeout)
        if not _is_int(max_bytes) or not 4096 <= max_bytes <= 2**34:
            raise ValueError(f"the message limit must be 4 KiB .. 16 GiB, got {max_bytes!r} bytes")
        if not _is_int(port) or not 0 <= port <= 65535:
            raise ValueError(f"port must be 0 .. 65535, got {port!r}")
        self.job, self.parties, self.threshold = job, int(parties), int(threshold)
        self._ssl, self._max_bytes = ssl_context, int(max_bytes)
        self._noise = noise or SecureNoise()
        if not add_noise:
            warn_leak(
                "add_noise=False releases the parties' exact sums: the run is NOT differentially private (its "
                "report states epsilon = inf); it exists to test the protocol bit-exactly"
            )
        elif not self._noise.secure:
            warn_leak(
                "the server's noise is not OpenDP's secure sampler (a seeded source, e.g.): the run is "
                "reproducible, but its noise lacks the secure default's protection against floating-point "
                "attacks. Leave noise=None for results you release."
            )
        self._noise.add_gaussian(np.zeros(1), 1.0)  # load the sampler now, not inside the first round
        self._add_noise, self._record = add_noise, record
        self._spare = None
        try:
            self._listener = socket.create_server((host, port), backlog=1024)
        except (OSError, OverflowError) as exc:
            raise ValueError(f"cannot listen on {host}:{port}: {exc}") from None
        self.address = self._listener.getsockname()[:2]
        self.accountant = PrivacyAccountant(job.budget())
        self.dropouts: dict[int, int] = {}
        self.contributors: list[list[int]] = []  # per released round (public protocol metadata)
        self.round_cpu_seconds: list[float] = []  # per released round: this process, from its gather to its draw ahead

    # -- connection set-up ---------------------------------------------------------------

    def _accept(self) -> dict[int, _Party]:
        """Wait for every party (see the module docstring on hostile peers).

        A slot is held only by a live connection: until the run starts, the server watches every
        admitted party's connection, and one that closes (or says anything before the WELCOME)
        frees its slot; a newer connection for a slot replaces the older one.  Neither moves the
        join deadline, which moves only when a slot is taken for the first time."""
        connected: dict[int, _Party] = {}
        pending: dict[int, _Pending] = {}  # by file descriptor
        by_source: dict[str, deque] = {}
        ever: set[int] = set()  # the slots taken at least once
        selector = selectors.DefaultSelector()
        self._listener.setblocking(False)
        selector.register(self._listener, selectors.EVENT_READ, None)
        join_deadline = time.monotonic() + self._timeout

        def drop(p: _Pending, reason: str | None = None, keep: bool = False) -> None:
            fd = p.sock.fileno()
            if fd in pending:
                del pending[fd]
                selector.unregister(p.sock)
            queue = by_source.get(p.source)
            if queue is not None:
                try:
                    queue.remove(p)
                except ValueError:
                    pass
            if keep:  # admitted: the socket lives on as a party's channel
                return
            if reason:
                p.reject(reason)
            else:
                p.close()

        def leave(party: _Party, reason: str | None = None) -> None:
            """Free ``party``'s slot; ``reason`` is sent (one non-blocking write) when its peer may still read."""
            del connected[party.index]
            self.joined = frozenset(connected)
            selector.unregister(party.sock)
            if reason:
                try:
                    send(party.sock, Kind.ABORT, {"reason": f"rejected: {reason}"})
                except (OSError, ValueError):
                    pass
            try:
                party.sock.close()
            except OSError:
                pass

        def handle(events) -> None:
            nonlocal join_deadline
            for key, _ in events:
                if key.data is None:
                    self._accept_some(selector, pending, by_source, drop)
                elif isinstance(key.data, _Party):
                    if connected.get(key.data.index) is key.data:
                        gone = _hung_up(key.data.sock)
                        if gone is not None:
                            leave(key.data, None if gone == "closed" else gone)
                elif key.data.sock.fileno() in pending:
                    admitted = self._progress(key.data, connected, drop)
                    if admitted is None:
                        continue
                    old = connected.get(admitted.index)
                    if old is not None:
                        leave(old, f"replaced by a newer connection of party {admitted.index}")
                    connected[admitted.index] = admitted
                    self.joined = frozenset(connected)
                    selector.register(admitted.sock, selectors.EVENT_READ, admitted)
                    if admitted.index not in ever:
                        ever.add(admitted.index)
                        join_deadline = time.monotonic() + self._timeout

        try:
            while True:
                if len(connected) == self.parties:
                    handle(selector.select(0))  # a last look: has anyone hung up meanwhile?
                    if len(connected) == self.parties:
                        break
                    continue
                now = time.monotonic()
                if now > join_deadline:
                    raise ProtocolError(f"only {len(connected)} of {self.parties} parties joined in time")
                for p in [p for p in pending.values() if p.deadline < now]:
                    drop(p)  # silent or too slow: shut without a word
                wake = min([join_deadline] + [p.deadline for p in pending.values()])
                handle(selector.select(max(0.0, min(wake - now, 0.5))))
        except BaseException as exc:
            for party in connected.values():
                send_abort(party.sock, str(exc))
                party.sock.close()
            raise
        finally:
            for p in list(pending.values()):
                p.close()
            selector.close()
            self._listener.close()  # the run has its parties: nobody else gets in
        for party in connected.values():
            party.sock.setblocking(True)
            party.sock.settimeout(self._timeout)
        return connected

    def _accept_some(self, selector, pending: dict, by_source: dict, drop) -> None:
        for _ in range(64):  # a burst at a time, then look at the handshakes again
            try:
                raw, address = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # e.g. out of descriptors: try again on the next turn
                return
            source = address[0]
            queue = by_source.setdefault(source, deque())
            while len(queue) >= MAX_PENDING_PER_SOURCE:
                drop(queue[0])
            while len(pending) >= MAX_PENDING:
                drop(min(pending.values(), key=lambda p: p.deadline))
            try:
                raw.setblocking(False)
                raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock = self._ssl.wrap_socket(raw, server_side=True, do_handshake_on_connect=False) if self._ssl else raw
            except (OSError, ValueError):
                raw.close()
                continue
            p = _Pending(sock, source, time.monotonic() + self._handshake_timeout, handshaken=self._ssl is None)
            pending[sock.fileno()] = p
            queue.append(p)
            selector.register(sock, selectors.EVENT_READ, p)

    def _progress(self, p: _Pending, connected: dict, drop) -> _Party | None:
        """Advance one pending connection; returns the party once its HELLO is accepted."""
        if not p.handshaken:
            try:
                p.sock.do_handshake()
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                return None  # more bytes to come; the deadline bounds the wait
            except (OSError, ValueError):
                drop(p)  # no or a bad certificate, or not TLS at all
                return None
            p.handshaken = True
            # Identity first: only a certificate for one of this run's parties gets any further.
            subject = dict(item[0] for item in (p.sock.getpeercert() or {}).get("subject", ()))
            name = subject.get("commonName")
            match = _PARTY_NAME.fullmatch(name or "")
            if match is None or int(match.group(1)) >= self.parties:
                drop(p, f"the certificate of {name!r} is not one of this run's {self.parties} parties")
                return None
            p.identity = int(match.group(1))
        while True:  # read what is there (TLS may hold decrypted bytes the selector does not see)
            try:
                data = p.sock.recv(HELLO_LIMIT)
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError, InterruptedError):
                break
            except (OSError, ValueError):
                drop(p)
                return None
            if not data:
                drop(p)
                return None
            p.buffer += data
            if len(p.buffer) > HELLO_LIMIT:
                drop(p, "HELLO too long")
                return None
        if len(p.buffer) < PREFIX_SIZE:
            return None
        try:
            size = frame_size(bytes(p.buffer[:PREFIX_SIZE]), HELLO_LIMIT, expect=Kind.HELLO)
            if len(p.buffer) < size:
                return None
            _, hello, _ = parse_frame(bytes(p.buffer[:size]))
            index = self._check_hello(p, hello, connected)
        except ProtocolError as exc:
            if "wrong number of parties" in str(exc) and p.identity is not None:
                drop(p, str(exc))  # a real party of this run was configured differently: nobody can go on
                raise
            drop(p, str(exc))
            return None
        if len(p.buffer) > size:  # a party waits for the WELCOME after its HELLO
            drop(p, "sent more than its HELLO before the WELCOME")
            return None
        drop(p, keep=True)
        return _Party(p.sock, index, hello, size)  # non-blocking until the run starts (see _accept)

    def _check_hello(self, p: _Pending, hello: dict, connected: dict) -> int:
        index = hello.get("party")
        if p.identity is not None and index != p.identity:
            raise ProtocolError(f"the certificate of 'party-{p.identity}' cannot join as party-{index}")
        if not _is_int(index) or not 0 <= index < self.parties:
            raise ProtocolError(f"party id {index!r} is invalid")
        if hello.get("version") != PROTOCOL_VERSION:
            raise ProtocolError(f"protocol version {hello.get('version')!r}, expected {PROTOCOL_VERSION}")
        if hello.get("parties") != self.parties:
            raise ProtocolError(
                f"wrong number of parties: party {index} expects {hello.get('parties')!r}, the server {self.parties}"
            )
        if not crypto.is_hex(hello.get("nonce"), crypto.SEED_BYTES):
            raise ProtocolError("the HELLO carries no fresh nonce")
        d = hello.get("n_features")
        others = (q.hello["n_features"] for q in connected.values() if q.index != index)  # not one it replaces
        expected = self.job.n_features or next(others, None)
        if not _is_int(d) or d < 1 or (expected is not None and d != expected):
            raise ProtocolError(f"party {index} has {d!r} features, the run {expected}")
        return index

    # -- the run -------------------------------------------------------------------------

    def serve(self) -> ServerReport:
        """Run the whole protocol; raises FederatedAbort (after telling every party) on failure."""
        start = time.perf_counter()
        parties: dict[int, _Party] = {}
        everyone: list[_Party] = []
        try:
            parties = self._accept()
            everyone = list(parties.values())
            if self.job.n_features is None:  # the job was checked at the d its bounds give; the parties have theirs
                self.job.check_plan(next(iter(parties.values())).hello["n_features"])
            rounds = self._run(parties)
        except Exception as exc:  # whatever went wrong, the parties hear why, and nothing more is released
            reason = (
                str(exc)
                if isinstance(exc, (ProtocolError, FederatedAbort, BudgetExceededError, CapabilityError))
                else (f"server error: {type(exc).__name__}: {exc}")
            )
            for p in parties.values():
                send_abort(p.sock, reason)
            raise aborted_after(reason, len(self.contributors), self._spent()) from exc
        finally:
            for p in everyone:
                p.sock.close()
        return ServerReport(
            rounds=rounds,
            privacy_spent=self._spent(),
            bytes_received={p.index: p.received for p in everyone},
            bytes_sent={p.index: p.sent for p in everyone},
            seconds=time.perf_counter() - start,
            round_cpu_seconds=list(self.round_cpu_seconds),
            dropouts=dict(self.dropouts),
            contributors=[list(c) for c in self.contributors],
        )

    def _spent(self) -> dict:
        """What the released rounds spent, by this server's ledger."""
        if not self._add_noise:  # the rounds were released exact: nothing of the plan's guarantee holds
            return {"epsilon": math.inf, "delta": 0.0, "mu": None}
        return server_spent(self.accountant)

    def _send(self, p: _Party, kind: int, header: dict, payload: bytes = b"") -> None:
        p.sock.settimeout(self._timeout)
        p.sent += send(p.sock, kind, header, payload)

    def _receive(self, p: _Party, deadline: float, expect: int | None = None):
        kind, header, payload, n = receive(p.sock, self._max_bytes, expect=expect, deadline=deadline)
        p.received += n
        return kind, header, payload

    def _gather(self, parties, deadline: float, expect: int | None = None):
        """Every party's next message, until ``deadline``: ({party: message}, {party: why it failed})."""
        messages, failures = {}, {}
        for p in parties:
            try:
                messages[p.index] = self._receive(p, deadline, expect)
            except (ProtocolError, FederatedAbort, OSError, ValueError) as exc:
                failures[p.index] = str(exc)
        return messages, failures

    def _setup(self, parties: dict[int, _Party]) -> tuple[str, dict]:
        """Key set-up with every party (no dropout tolerated yet: nothing data-derived was sent)."""
        welcome = {
            "version": PROTOCOL_VERSION,
            "job": self.job.as_dict(),
            "parties": self.parties,
            "threshold": self.threshold,
            "timeout": self._timeout,
            "nonces": {str(i): p.hello["nonce"] for i, p in sorted(parties.items())},
            "server_nonce": secrets.token_hex(crypto.SEED_BYTES),
        }
        session = crypto.session_id(welcome)
        everyone = list(parties.values())
        for p in everyone:
            self._send(p, Kind.WELCOME, welcome)
        deadline = time.monotonic() + self._timeout
        keys, modes = {}, set()
        for p in everyone:
            _, header, _ = self._receive(p, deadline, Kind.PUBKEY)
            if not crypto.is_hex(header.get("public"), 32):
                raise ProtocolError(f"party {p.index} sent a malformed public key")
            keys[str(p.index)] = header["public"]
            modes.add(bool(header.get("group_key")))
        if len(modes) > 1:
            raise ProtocolError("parties disagree on key agreement (some use a pre-shared group key)")
        for p in everyone:
            self._send(p, Kind.PUBKEYS, {"keys": keys})
        material = {}
        deadline = time.monotonic() + self._timeout
        for p in everyone:
            _, header, _ = self._receive(p, deadline, Kind.SHARES)
            check_material(header, set(parties) - {p.index}, p.index, 0)
            material[p.index] = header
        for p in everyone:
            self._send(p, Kind.SHARE, self._relay(material, set(parties), p.index))
        return session, material

    @staticmethod
    def _relay(material: dict, members: set, recipient: int) -> dict:
        return {
            "keys": {str(j): {"mask_key": material[j]["mask_key"], "commit": material[j]["commit"]} for j in members},
            "sealed": {str(j): material[j]["sealed"][str(recipient)] for j in members if j != recipient},
        }

    def _drop(self, p: _Party, round_index: int, reason: str) -> None:
        self.dropouts.setdefault(p.index, round_index)
        send_abort(p.sock, f"dropped from the run in round {round_index}: {reason}", timeout=0.5)
        p.sock.close()

    def _short(self, alive: int, round_index: int, failures: dict) -> ProtocolError:
        why = "; ".join(f"party {i}: {r}" for i, r in sorted(failures.items()))
        return ProtocolError(
            f"round {round_index}: {alive} of {self.parties} parties remain, fewer than the threshold "
            f"{self.threshold}; this round is not released" + (f" ({why})" if why else "")
        )

    def _run(self, parties: dict[int, _Party]) -> int:
        session, material = self._setup(parties)
        alive = dict(parties)
        round_index = 0
        while True:
            cpu = time.process_time()
            messages, failures = self._gather(alive.values(), time.monotonic() + self._timeout)
            done = {i for i, m in messages.items() if m[0] == Kind.DONE}
            for i, (kind, header, _) in messages.items():
                if kind not in (Kind.DONE, Kind.ROUND):
                    failures[i] = f"expected ROUND or DONE, got {Kind.NAMES[kind]}"
                elif kind == Kind.ROUND and header.get("round") != round_index:
                    failures[i] = (
                        f"replayed or out-of-order round from party {i}: got round {header.get('round')!r}, "
                        f"expected {round_index}"
                    )
            senders = {i for i, m in messages.items() if m[0] == Kind.ROUND and i not in failures}
            if not senders and done:  # the algorithm ended: every party still here has its result
                for i in set(alive) - done:
                    self._drop(alive[i], round_index, failures.get(i, "left"))
                return round_index
            for i in done:
                failures[i] = "finished while others sent a round"
            supporters, spec, label = self._agree(alive, messages, senders, failures, round_index)
            n_buckets, blocks, count = validate_spec_or_abort(spec, self._max_bytes, round_index)
            vectors = {}
            for i in supporters:
                try:
                    vectors[i] = ring_values(messages[i][2], count)
                except ProtocolError as exc:
                    failures[i] = str(exc)
            survivors = set(vectors)
            dropped = set(alive) - survivors
            for i in dropped:
                self._drop(alive[i], round_index, failures.get(i, "no message"))
            if len(survivors) < self.threshold:
                raise self._short(len(survivors), round_index, failures)
            spends = round_spends(label, blocks)
            self.accountant.check(spends)  # before anything is unmasked: this round fits the budget
            members = {i: alive[i] for i in survivors}
            total = np.zeros(count, dtype=np.uint64)
            for i in sorted(survivors):
                if self._record is not None:
                    self._record.append((round_index, i, vectors[i].copy()))
                total += vectors[i]  # wraps modulo 2^64
            prefetch = partial(self._prefetch_noise, n_buckets, blocks) if self._add_noise else None
            reveals, material_next = self._unmask(members, survivors, dropped, round_index, failures, prefetch)
            total = remove_masks(total, round_index, session, survivors, dropped, reveals, material, self.threshold)
            if self._add_noise:
                total += self._ring_noise(n_buckets, blocks).ravel()
            # Charged before anything leaves the server: a ledger may never miss a round that was released,
            # even one interrupted between its first and last send.
            for s in spends:
                self.accountant.spend(s)
            responders = set(reveals)
            for i in survivors - responders:
                self._drop(alive[i], round_index, failures.get(i, "no shares"))
            for i in sorted(responders):
                header = {
                    "round": round_index,
                    "survivors": sorted(survivors),
                    "alive": sorted(responders),
                    "next": self._relay(material_next, responders, i),
                }
                try:
                    self._send(alive[i], Kind.RESULT, header, ring_payload(total))
                except (OSError, ValueError):
                    pass  # its connection is gone: it drops out next round
            self.contributors.append(sorted(survivors))
            alive = {i: alive[i] for i in responders}
            material = material_next
            round_index += 1
            if self._add_noise:
                # Noise does not depend on the data: draw the next round's now, while the parties
                # compute (later rounds usually repeat this round's noise parameters).
                self._spare = (self._noise_key(n_buckets, blocks), self._draw_noise(n_buckets, blocks))
            self.round_cpu_seconds.append(time.process_time() - cpu)  # the whole process's (a bench runs it alone)

    def _agree(self, alive, messages, senders, failures, round_index):
        """The query (label and noise parameters) that at least ``threshold`` senders declare; the others
        are dropped.  A majority threshold makes it unique."""
        votes: dict[str, list] = {}
        for i in senders:
            header = messages[i][1]
            if "spec" in header:
                alive[i].spec = header["spec"]
            if alive[i].spec is None:
                failures[i] = f"party {i} sent a round without its noise parameters"
                continue
            key = json.dumps([header.get("label"), alive[i].spec], sort_keys=True)
            votes.setdefault(key, []).append(i)
        best = max(votes.values(), key=len, default=[])
        if len(votes) > 1 and len(best) < self.threshold:
            raise ProtocolError(f"parties disagree on round {round_index}'s query")
        if len(best) < self.threshold:
            raise self._short(len(best), round_index, failures)
        for group in votes.values():
            if group is not best:
                for i in group:
                    failures[i] = f"party {i} declared another query for round {round_index}"
        header = messages[best[0]][1]
        return set(best), alive[best[0]].spec, str(header.get("label"))

    def _unmask(self, members: dict, survivors: set, dropped: set, round_index: int, failures: dict, meanwhile=None):
        """Ask the survivors for their shares; returns ({responder: reveal}, {responder: next material}).

        ``meanwhile()`` runs once the requests are out, while the survivors compute their reveals."""
        request = {"round": round_index, "survivors": sorted(survivors), "dropped": sorted(dropped)}
        asked = []
        for i, p in sorted(members.items()):
            try:
                self._send(p, Kind.UNMASK, request)
                asked.append(p)
            except (OSError, ValueError) as exc:
                failures[i] = str(exc)
        if meanwhile is not None:
            meanwhile()
        messages, errors = self._gather(asked, time.monotonic() + self._timeout, Kind.REVEAL)
        failures.update(errors)
        reveals, material_next = {}, {}
        for i, (_, header, _) in messages.items():
            try:
                if header.get("round") != round_index:
                    raise ProtocolError(f"party {i} revealed shares of round {header.get('round')!r}")
                seeds, keys = header.get("seeds"), header.get("keys")
                if not isinstance(seeds, dict) or set(seeds) != {str(j) for j in survivors}:
                    raise ProtocolError(f"party {i} revealed the wrong self-mask shares")
                if not isinstance(keys, dict) or set(keys) != {str(j) for j in dropped}:
                    raise ProtocolError(f"party {i} revealed the wrong key shares")
                check_material(header.get("next"), survivors - {i}, i, round_index + 1)
            except ProtocolError as exc:
                failures[i] = str(exc)
                continue
            reveals[i], material_next[i] = header, header["next"]
        if len(reveals) < self.threshold:
            raise self._short(len(reveals), round_index, failures)
        return reveals, material_next

    @staticmethod
    def _noise_key(n_buckets: int, blocks: list) -> tuple:
        return (n_buckets, tuple((b["width"], b["sensitivity"], b["std"]) for b in blocks))

    def _draw_noise(self, n_buckets: int, blocks: list) -> np.ndarray:
        return draw_ring_noise(self._noise, n_buckets, blocks)

    def _prefetch_noise(self, n_buckets: int, blocks: list) -> None:
        """Draw this round's noise now, while the survivors compute their reveals, unless the draw made
        ahead after the last release fits (its noise parameters changed, e.g. the first Lloyd round)."""
        key = self._noise_key(n_buckets, blocks)
        if self._spare is None or self._spare[0] != key:
            self._spare = (key, self._draw_noise(n_buckets, blocks))

    def _ring_noise(self, n_buckets: int, blocks: list) -> np.ndarray:
        key = self._noise_key(n_buckets, blocks)
        spare, self._spare = self._spare, None
        if spare is not None and spare[0] == key:
            return spare[1]  # each draw is used once, then discarded
        return self._draw_noise(n_buckets, blocks)


def server_spent(accountant: PrivacyAccountant) -> dict:
    """What a server's ledger says its released rounds spent: the totals (its report's; a party's has the steps)."""
    report = accountant.report()
    return {"epsilon": report.epsilon, "delta": report.delta, "mu": report.mu}


def round_spends(label: str, blocks: list[dict]) -> list[Spend]:
    """What a round with the validated noise parameters ``blocks`` charges: each block is mu-GDP with
    mu = sensitivity / std (the ring noise keeps that mu exactly, see the module docstring)."""
    return [Spend(f"{label}/{b['name']}", mu=b["sensitivity"] / b["std"]) for b in blocks]


def draw_ring_noise(noise: NoiseSource, n_buckets: int, blocks: list[dict]) -> np.ndarray:
    """Integer ring noise per block: round(N(0, sigma_int^2)), see the module docstring.  It depends on
    the validated noise parameters only, never on the data nor on who contributed."""
    parts = []
    for block in blocks:
        width, sensitivity, std = block["width"], block["sensitivity"], block["std"]
        sigma_int = std * SCALE + math.sqrt(width) * std / sensitivity
        parts.append(np.rint(noise.add_gaussian(np.zeros((n_buckets, width)), sigma_int)))
    return np.hstack(parts).astype(np.int64).view(np.uint64)


def validate_spec_or_abort(spec, max_bytes: int, round_index: int):
    try:
        return validate_spec(spec, max_bytes)
    except ProtocolError as exc:
        raise ProtocolError(f"invalid noise parameters in round {round_index}: {exc}") from None

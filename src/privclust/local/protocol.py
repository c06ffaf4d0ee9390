"""The local model deployed: a device turns its point into one report; the server turns reports into centers.

Both sides build the same round from public parameters alone -- a
:class:`Protocol` -- as the private greedy's own round (``greedy_round``:
every query, and from the greedy's plan its share of the users); the server
turns the released answers into centers with the greedy's own
post-processing (``greedy_centers``).  The public seed fixes everything
random that both must agree on: the nets' shifts, the JL projection, and the
frequency oracles' hash families.

* :class:`Randomizer` (a device): point -> report, with the device's own
  randomness (the OS CSPRNG, ``local.secure``).  Nothing about the point leaves except the report,
  which is epsilon-LDP (``local.oracle``).
* :class:`Aggregator` (the server): takes reports in any order and in any
  batches (they are tallied into additive tables) -- a shuffle protocol's
  server the shuffler's one signed output --, and releases the centers:
  the same greedy, its one release answered from the tallies.  It refuses a
  batch that would take the reports past the protocol's ``users`` or that
  repeats a nonce (a report or batch counted twice), and a shuffle protocol
  states the central guarantee of the reports it actually received.

**Report format** (all integers little-endian).  A batch of reports is a
header -- the 4 bytes ``PCLR``, a format version byte (3), the 8-byte protocol
fingerprint (the first 8 bytes of the SHA-256 of the protocol's canonical
JSON) -- followed by 27-byte records: the query answered (uint16), the hash
function (uint16; 0 for randomized response), the frequency oracle's output
(uint32), for vector queries the coordinate (uint16) and bit (int8; 0
otherwise), and the device's 16-byte nonce (random).  One device's report is
40 bytes; a batch of n reports is 13 + 27 n bytes.  A batch for another
protocol is refused.  The shuffler's output starts with ``PCLS`` instead and
ends with its 64-byte signature (``local.signing``): 13 + 27 n + 64 bytes.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import mmap
import os
import secrets
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np

from .._pages import drop_pages
from ..algorithms.base import FitContext
from ..algorithms.greedy import GreedyRound, GreedySpec, greedy_centers, greedy_round, greedy_spec, solution_cost
from ..geometry.domain import make_domain
from ..privacy.amplification import local_epsilon_for, shuffle_delta, shuffle_epsilon, tail_for
from ..privacy.budget import REPLACE_ONE, Budget, PrivacyAccountant, PrivacyReport, Spend
from ..queries.base import clip_blocks
from ..queries.curator import Curated
from ..queries.plan import DENSE, SPARSE, Oracle
from ..session import open_session
from .nonces import Nonces, NonceSpill
from .oracle import DEFAULT_BUCKET_SHARE, REPORT, LocalRound, Tally, user_shares
from .secure import SecureRandom
from .signing import SIGNATURE_BYTES, UNSIGNED, BatchDigest, ShufflerKey, check_public_key, verify_batch

__all__ = [
    "Protocol",
    "Randomizer",
    "Aggregator",
    "LocalResult",
    "encode_reports",
    "decode_reports",
    "check_reports",
    "check_report_count",
    "repeated_nonces",
    "report_header",
    "ONE_SHUFFLED_BATCH",
    "shuffler_signer",
    "batch_signature",
    "ShufflerKey",
    "served_batches",
    "ReportFile",
    "WeakerGuaranteeError",
]

MAGIC, FORMAT = b"PCLR", 3
# The shuffler's output starts with a magic of its own and ends with the shuffler's signature: a shuffle protocol's
# guarantee is the shuffled reports', so its server takes only batches that passed the shuffler (a device's batch is
# linkable to its device), and only the signature says a batch did (local.signing)
SHUFFLED_MAGIC = b"PCLS"
HEADER_BYTES = len(MAGIC) + 1 + 8


@dataclass(frozen=True)
class Protocol:
    """The public parameters of a local (or shuffle) deployment: all a device and the server must share.

    ``epsilon`` is each report's local guarantee; ``users`` the number of users the round is sized for
    (public: every device sends one report); ``seed`` the public randomness.  A shuffle deployment states
    its central guarantee in ``shuffle`` (epsilon, delta) -- see :meth:`for_shuffle` -- and its server takes a
    shuffled batch only signed by the shuffler whose public key it names in ``shuffler_key`` (``local.signing``)."""

    n_clusters: int
    n_features: int
    bounds: list
    epsilon: float
    users: int
    seed: int = field(default_factory=lambda: secrets.randbits(31))
    algorithm_params: dict | None = None
    shuffle: tuple[float, float] | None = None
    bucket_share: float = DEFAULT_BUCKET_SHARE
    shuffler_key: str | None = None

    def __post_init__(self):
        make_domain(self.bounds, self.n_features)  # refuses bounds that do not fit the features
        if not (math.isfinite(self.epsilon) and self.epsilon > 0):
            raise ValueError(f"epsilon must be positive and finite, got {self.epsilon!r}")
        if not (isinstance(self.users, int) and self.users >= 2):
            raise ValueError(f"users must be an integer of at least 2, got {self.users!r}")
        if self.shuffler_key is not None:
            if self.shuffle is None:
                raise ValueError("only a shuffle protocol names a shuffler's key: a local protocol needs no shuffler")
            check_public_key(self.shuffler_key)

    @classmethod
    def for_shuffle(cls, epsilon: float, delta: float, users: int, **public) -> "Protocol":
        """A protocol whose shuffled reports are (epsilon, delta)-DP: each report gets the largest local
        epsilon_0 that amplification by shuffling allows for ``users`` reports."""
        return cls(epsilon=local_epsilon_for(epsilon, delta, users), users=users, shuffle=(epsilon, delta), **public)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "Protocol":
        fields = json.loads(text)
        if fields.get("shuffle") is not None:
            fields["shuffle"] = tuple(fields["shuffle"])
        return cls(**fields)

    @property
    def fingerprint(self) -> bytes:
        return hashlib.sha256(self.to_json().encode()).digest()[:8]

    def guarantee(self, reports: int | None = None) -> tuple[float, float]:
        """The (epsilon, delta) the server's view of ``reports`` reports has (default: the planned ``users``).

        Local: epsilon-LDP per report, whatever their number.  Shuffle: amplification needs the other
        users' reports to hide among, so the central guarantee is computed at the number actually
        received (``privacy.amplification``); with fewer than planned it is weaker than the declared one,
        and with fewer than 2 it is only the reports' own epsilon_0."""
        if self.shuffle is None:
            return self.epsilon, 0.0
        n = self.users if reports is None else int(reports)
        eps, delta = self.shuffle
        if n < 2:
            return self.epsilon, 0.0
        if shuffle_delta(eps, self.epsilon, n, tail_for(delta)) <= delta:
            return eps, delta  # the declared guarantee holds at n (the very test that chose epsilon_0)
        return min(self.epsilon, shuffle_epsilon(self.epsilon, n, delta)), delta

    def weaker_than_declared(self, guarantee: tuple[float, float]) -> bool:
        """Whether ``guarantee`` is worse than the protocol's declared one (the central target of a shuffle
        protocol; a local protocol's epsilon is its declared guarantee)."""
        eps, delta = self.shuffle if self.shuffle is not None else (self.epsilon, 0.0)
        return guarantee[0] > eps or guarantee[1] > delta

    def round_spend(
        self, reports: int | None = None, accepted_weaker: bool = False, guarantee: tuple[float, float] | None = None
    ) -> Spend:
        """The round's spend at ``reports`` reports received (default: the planned users); ``guarantee``, if the
        caller has it already, is :meth:`guarantee` at ``reports``."""
        eps, delta = self.guarantee(reports) if guarantee is None else guarantee
        if self.shuffle is None:
            return Spend("local reports: one per user, each epsilon-LDP", epsilon=eps, relation=REPLACE_ONE)
        n = self.users if reports is None else int(reports)
        label = f"shuffled reports: {n:,} of the planned {self.users:,} users, eps0-LDP, amplified by shuffling"
        if accepted_weaker:
            declared_eps, declared_delta = self.shuffle
            label += f"; ACCEPTED WEAKER than the declared ({declared_eps:g}, {declared_delta:g})"
        return Spend(label, epsilon=eps, delta=delta, relation=REPLACE_ONE)

    def design(self) -> tuple[LocalRound, object]:
        """(the round, the domain): the greedy's one release, from public parameters."""
        designed = self._design()
        return designed.round, designed.domain

    def _design(self) -> "_Design":
        """The round with what the server's post-processing needs of the greedy (all public: see :class:`_Design`)."""
        with self._session() as session:
            spec, greedy, rng, shares = self._greedy(session)
        requests = [(query, share) for (query, _, _), share in zip(greedy.requests, shares)]
        local = LocalRound.design(requests, self.epsilon, self.seed, self.users, self.bucket_share)
        return _Design(local, session.domain, spec, greedy, rng)

    def _session(self, accountant: PrivacyAccountant | None = None, spend: Spend | None = None):
        """The protocol's run (``privclust.session``): a ledger under ``accountant`` with no budget of its own
        (it is charged ``spend``, what the reports received give: :meth:`round_spend`), the public seed's
        randomness -- the same geometry on every device and the server; no noise is drawn from it -- and the
        round's oracle."""

        def planning(ledger, randomness):
            oracle = _LocalRoundOracle(self, ledger, spend)
            return Curated(oracle, make_domain(self.bounds, self.n_features), self.n_features, None)

        return open_session(
            None, self.bounds, parent=accountant, random_state=self.seed, oracle=planning, seeded_noise=False
        )

    def _greedy(self, session) -> tuple[GreedySpec, GreedyRound, np.random.Generator, list[float]]:
        """The greedy's plan in the local model, its one round (drawn from the public seed), the generator
        its post-processing goes on with, and each request's share of the users."""
        oracle, options = session.oracle, {"params": self.algorithm_params}
        ctx = FitContext(oracle, self.n_clusters, oracle.budget, session.randomness, self.users, options=options)
        spec = greedy_spec(ctx)
        if spec.restarts != 1:
            raise ValueError("the local protocol is one round: one greedy run; drop 'restarts'")
        plan = spec.open(oracle)  # refuses what one round of reports cannot serve
        rng = session.randomness.geometry()
        round_ = greedy_round(spec, self.n_features, rng)
        return spec, round_, rng, [plan.allotment(part).fraction(f).share for _, part, f in round_.requests]


@dataclass(frozen=True)
class _Design:
    """A protocol's round as both sides build it from the public parameters, and what the server keeps of the
    greedy to release it: its spec (whose plan, opened against the release's ledger, reserves the spend), its
    round and the public generator its post-processing goes on with (copied for each release)."""

    round: LocalRound
    domain: object
    spec: GreedySpec
    greedy: GreedyRound
    rng: np.random.Generator


class _LocalRoundOracle(Oracle):
    """The deployed local model: shares of users, one round, answered by the devices' reports.

    Its plan reserves ``spend`` -- the guarantee of the reports received (none while designing the round) --
    against the run's ledger when the greedy opens it, and :meth:`release_round` charges it when the tallies
    are released: the only place the protocol spends."""

    capabilities = frozenset({DENSE, SPARSE})
    model = "the local model (one round of reports)"

    def __init__(self, protocol: Protocol, accountant: PrivacyAccountant, spend: Spend | None):
        super().__init__(protocol.n_features, Budget(protocol.epsilon), accountant)
        self._spend = spend

    def allot(self, parts, family):
        return user_shares(self.model, parts)

    def reserved(self, plan):
        return [] if self._spend is None else [self._spend]

    def answer(self, requests):
        raise RuntimeError("the local protocol's round is answered by the devices' reports (release_round)")

    def release_round(self, round_: LocalRound, tallies: list[Tally]):
        """The round's estimates from the devices' tallies, charged ``spend``."""
        self.accountant.spend(self._spend)
        return round_.release(tallies)


def check_reports(
    protocol: "Protocol",
    records: np.ndarray,
    received: int = 0,
    seen: Nonces | None = None,
    spilled: NonceSpill | None = None,
) -> None:
    """Refuse a batch that would take the reports past the protocol's users, or that repeats a nonce (within
    itself, or one of ``seen`` or ``spilled``): one report per user, each counted once.  The messages name
    counts only (public in this model), never a report."""
    check_report_count(protocol, received + len(records))
    nonces = np.asarray(records)["nonce"]
    repeated = (seen if seen is not None else Nonces()).repeats(nonces)
    repeated += spilled.seen(nonces) if spilled is not None else 0
    if repeated:
        raise repeated_nonces(repeated)


def repeated_nonces(repeated: int) -> ValueError:
    """The refusal of reports that repeat a nonce (a count, public in this model; never a report)."""
    return ValueError(
        f"{repeated:,} reports repeat a nonce already received (a duplicated batch or replayed reports): "
        "the batch is refused"
    )


def check_report_count(protocol: "Protocol", total: int) -> None:
    """Refuse ``total`` reports when they are more than the protocol's users."""
    if total > protocol.users:
        raise ValueError(
            f"more reports than the protocol's {protocol.users:,} users ({total:,}): every user sends one "
            "report; a duplicated batch or a device sending several is refused"
        )


def report_header(protocol: Protocol, shuffled: bool = False) -> bytes:
    """What a batch of ``protocol``'s reports starts with (the records follow): a device's batch, or (``shuffled``)
    the shuffler's output (whose signature ends it: :func:`batch_signature`)."""
    return (SHUFFLED_MAGIC if shuffled else MAGIC) + bytes([FORMAT]) + protocol.fingerprint


def shuffler_signer(protocol: Protocol, key: ShufflerKey | None) -> ShufflerKey | None:
    """The key a shuffler of ``protocol`` signs with: the one a shuffle protocol names (refused if ``key`` is another
    or missing, or if the protocol names none); none for a local protocol, whose shuffled batches need no mark."""
    if protocol.shuffle is None:
        if key is not None:
            raise ValueError(
                "a local protocol names no shuffler's key: its shuffled output is not signed, so give no key (--key)"
            )
        return None
    if protocol.shuffler_key is None:
        raise ValueError(
            "this shuffle protocol names no shuffler's key, so no server would take its shuffled output: make a key "
            "(privclust local shuffler-key) and a protocol that names it (privclust local init --shuffle "
            "--shuffler-key FILE)"
        )
    if key is None:
        raise ValueError(
            "this shuffle protocol names its shuffler's key: give that key (privclust local shuffle --key FILE, or "
            "the key argument) so that the server can tell its output from reports that were never shuffled"
        )
    if key.public_hex != protocol.shuffler_key:
        raise ValueError(
            "this key is not the shuffler's key the protocol names: give the key whose .pub file the protocol was "
            "made with (privclust local init --shuffler-key); nothing was shuffled"
        )
    return key


def batch_signature(key: ShufflerKey | None, digest: BatchDigest) -> bytes:
    """A shuffled batch's last bytes: ``key``'s signature of ``digest`` (header and records), or zeros unsigned."""
    return UNSIGNED if key is None else key.sign(digest)


def encode_reports(
    protocol: Protocol, records: np.ndarray, shuffled: bool = False, key: ShufflerKey | None = None
) -> bytes:
    """A batch of ``records``: a device's, or (``shuffled``) the shuffler's output, signed with ``key`` when the
    protocol names a shuffler's key (:func:`shuffler_signer`)."""
    body = report_header(protocol, shuffled) + np.ascontiguousarray(records, dtype=REPORT).tobytes()
    if not shuffled:
        return body
    digest = BatchDigest()
    digest.update(body)
    return body + batch_signature(shuffler_signer(protocol, key), digest)


# Amplification is by the reports shuffled together: two batches each shuffled alone (or 2,000 of one report) hide
# each report among its own batch only, so a shuffle protocol's server takes the shuffler's one output a release
ONE_SHUFFLED_BATCH = (
    "a shuffle protocol's server takes one shuffled batch a release: reports shuffled in separate batches hide only "
    "among their own batch, not among all the users the guarantee counts; give the shuffler every device's reports "
    "at once (privclust local shuffle takes many files) and the server its one output"
)


def served_batches(protocol: Protocol) -> bool | None:
    """What the server of ``protocol`` takes: only the shuffler's output (True) for a shuffle protocol -- whose
    guarantee holds only for reports that passed it --, any batch (None) for a local one (each report is
    epsilon-LDP wherever it went)."""
    return True if protocol.shuffle is not None else None


def _check_header(protocol: Protocol, head: bytes, body_bytes: int, shuffled: bool | None = None) -> int:
    """The number of reports of a batch starting with ``head`` and holding ``body_bytes`` after its header (a
    shuffled batch's signature included), refused unless it was made for ``protocol`` and holds a whole number of
    reports; ``shuffled``: True to take only the shuffler's output, False only devices' batches, None either.
    A shuffle protocol's server can verify a shuffled batch only with the key the protocol names: refused without.
    Read as either kind (None), a shuffle protocol's batch is read as its server reads it: only the shuffler's."""
    if shuffled is None:
        shuffled = served_batches(protocol)
    if len(head) < HEADER_BYTES or head[:4] not in (MAGIC, SHUFFLED_MAGIC):
        raise ValueError("not a batch of privclust local reports (bad header)")
    if shuffled and head[:4] != SHUFFLED_MAGIC:
        raise ValueError(
            "these reports did not pass the shuffler (a device's batch): a shuffle protocol's server takes only the "
            "shuffler's output (privclust local shuffle), since the amplified guarantee holds only for shuffled "
            "reports; nothing was tallied"
        )
    if shuffled is False and head[:4] == SHUFFLED_MAGIC:
        raise ValueError("these reports were already shuffled: the shuffler takes the devices' batches")
    if head[4] != FORMAT:
        raise ValueError(f"report format {head[4]} is not supported (this privclust reads format {FORMAT})")
    if head[5:HEADER_BYTES] != protocol.fingerprint:
        raise ValueError("these reports were made for another protocol (fingerprint mismatch): refused")
    if head[:4] == SHUFFLED_MAGIC:
        if protocol.shuffle is not None and protocol.shuffler_key is None:
            raise ValueError(
                "this shuffle protocol names no shuffler's key, so its server cannot tell the shuffler's output from "
                "reports that were never shuffled: make a key (privclust local shuffler-key) and a protocol that "
                "names it (privclust local init --shuffle --shuffler-key FILE); nothing was tallied"
            )
        body_bytes -= SIGNATURE_BYTES
    if body_bytes < 0 or body_bytes % REPORT.itemsize:
        raise ValueError("the batch of reports is truncated (its length is not a whole number of reports)")
    return body_bytes // REPORT.itemsize


def decode_reports(protocol: Protocol, data: bytes, shuffled: bool | None = None) -> np.ndarray:
    """The records of a batch of reports, refused unless they were made for ``protocol`` (and, with ``shuffled``,
    unless they are -- True -- or are not -- False -- the shuffler's output; a shuffle protocol's shuffled batch
    unless it carries the signature of the shuffler the protocol names)."""
    if not isinstance(data, bytes):  # one copy, checked and decoded: a mapping rewritten between the two is not read
        data = bytes(data)
    reports = _check_header(protocol, data[:HEADER_BYTES], len(data) - HEADER_BYTES, shuffled)
    end = HEADER_BYTES + reports * REPORT.itemsize
    if data[:4] == SHUFFLED_MAGIC and protocol.shuffle is not None:
        digest = BatchDigest()
        digest.update(memoryview(data)[:end])
        verify_batch(protocol.shuffler_key, digest, data[end:])
    return np.frombuffer(data, dtype=REPORT, count=reports, offset=HEADER_BYTES)


REPORTS_CHUNK = 2**20  # reports read from a file at a time (27 MiB)


@dataclass(frozen=True)
class ReportFile:
    """A file of reports whose header and length were checked (:meth:`open`), read a chunk at a time: a
    file of any size is tallied or shuffled in the memory of one chunk."""

    path: Path
    reports: int  # how many it holds (public: one per user)
    # made by open only:
    header: bytes  # as open found it: chunks reads the same or refuses
    signed: bool  # the shuffler's output: a signature follows the records
    verify_with: str | None  # the shuffler's public key it must be signed with (a shuffle protocol's)

    @classmethod
    def open(cls, protocol: Protocol, path: str | Path, shuffled: bool | None = None) -> "ReportFile":
        """The file at ``path``, refused (before any report is read) unless it is a whole batch for ``protocol``
        (and, with ``shuffled``, of the kind it names: :func:`decode_reports`).  The signature of a shuffle
        protocol's shuffled batch is verified as :meth:`chunks` reads it, before the last chunk's read ends."""
        path = Path(path)
        try:
            with open(path, "rb") as batch:
                head, size = batch.read(HEADER_BYTES), os.fstat(batch.fileno()).st_size
        except OSError as exc:
            raise ValueError(f"cannot read the reports {path}: {exc.strerror or exc}") from None
        try:
            reports = _check_header(protocol, head, size - HEADER_BYTES, shuffled)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None
        signed = head[:4] == SHUFFLED_MAGIC
        verify_with = protocol.shuffler_key if signed and protocol.shuffle is not None else None
        return cls(path, reports, head, signed, verify_with)

    def chunks(self, reports: int | None = None) -> Iterator[np.ndarray]:
        """The file's records, ``reports`` (default :data:`REPORTS_CHUNK`) at a time; refused if the file no
        longer holds what :meth:`open` found, or (a shuffle protocol's shuffled batch) if its signature is not the
        shuffler's.  The signature is checked after the last records are yielded: only a consumer that commits
        a whole stream, ``Aggregator.add_stream``, is safe -- never tally the chunks one by one."""
        reports = REPORTS_CHUNK if reports is None else int(reports)
        changed = f"{self.path} changed while it was read: run again on a file nobody is writing"
        digest = BatchDigest()
        with open(self.path, "rb") as batch:
            header = batch.read(HEADER_BYTES)
            if header != self.header:  # another batch put in its place since open checked it
                raise ValueError(changed)
            digest.update(header)
            left = self.reports
            while left:
                data = batch.read(min(left, reports) * REPORT.itemsize)
                if not data or len(data) % REPORT.itemsize:
                    raise ValueError(changed)
                digest.update(data)
                records = np.frombuffer(data, dtype=REPORT)
                left -= len(records)
                yield records
            signature = batch.read(SIGNATURE_BYTES) if self.signed else b""
            if len(signature) != (SIGNATURE_BYTES if self.signed else 0) or batch.read(1):
                raise ValueError(changed)
            if self.verify_with is not None:
                try:
                    verify_batch(self.verify_with, digest, signature)
                except ValueError as exc:
                    raise ValueError(f"{self.path}: {exc}") from None


class Randomizer:
    """A device's side: one point in, one epsilon-LDP report out (``report``); ``reports`` does many devices."""

    def __init__(self, protocol: Protocol, rng: np.random.Generator | None = None):
        self.protocol = protocol
        self.round, self.domain = protocol.design()
        self._rng = rng  # seeded experiments and tests only: a numpy Generator is not a CSPRNG

    def _records(self, points: np.ndarray) -> np.ndarray:
        rng = self._rng if self._rng is not None else SecureRandom()
        points = np.atleast_2d(np.asarray(points, dtype=np.float64))
        if points.shape[1] != self.protocol.n_features or not np.all(np.isfinite(points)):
            raise ValueError(f"a point has {self.protocol.n_features} finite coordinates")
        unit = self.domain.to_unit(points.copy())
        which = self.round.assign(unit.shape[0], rng)
        records = np.zeros(unit.shape[0], dtype=REPORT)
        for index, local in enumerate(self.round.queries):
            users = np.flatnonzero(which == index)
            if users.size:
                buckets, values = local.query.contribution(unit[users])
                values = clip_blocks(np.asarray(values, dtype=np.float64), local.query)
                records[users] = self.round.report(index, buckets, values, rng)
        # Each report's nonce: random bytes, independent of the point, so the server can refuse a report (or a
        # batch) it has already counted.  From the OS CSPRNG even on the seeded path: two seeded runs must not
        # send the same nonces.
        records["nonce"] = np.frombuffer(os.urandom(16 * len(records)), dtype="V16")
        return records

    def report(self, point) -> bytes:
        """One device's report of its point (24 bytes)."""
        return encode_reports(self.protocol, self._records(np.asarray(point, dtype=np.float64).reshape(1, -1)))

    def reports(self, points) -> bytearray:
        """The reports of many devices, one per row of ``points`` (an array or a memory map), as one batch
        (a ``bytearray``: header, then records).

        Made :data:`REPORTS_CHUNK` rows at a time, each chunk's records written straight into the batch (and a
        memory map's pages of the chunk given back), so memory is the batch and one chunk: each device's report depends on its own point and coins only, so
        the batch is the same (in law) as one made at once, and Ctrl-C acts between chunks."""
        points = np.atleast_2d(points)
        if not points.shape[0] or points.shape[1] != self.protocol.n_features:  # refused before the batch exists
            return bytearray(encode_reports(self.protocol, self._records(points)))  # the points' shape checked
        batch = bytearray(HEADER_BYTES + points.shape[0] * REPORT.itemsize)
        batch[:HEADER_BYTES] = report_header(self.protocol)
        records = np.frombuffer(batch, dtype=REPORT, offset=HEADER_BYTES)  # a view: writing it writes the batch
        for start in range(0, points.shape[0], REPORTS_CHUNK):
            chunk = slice(start, start + REPORTS_CHUNK)
            records[chunk] = self._records(points[chunk])
            drop_pages(points, chunk)  # a memory map's pages of the chunk given back (``privclust._pages``)
        del records  # the batch may be resized by its owner once no view holds it
        return batch


class WeakerGuaranteeError(ValueError):
    """The reports received give a weaker guarantee than the protocol declared (too few to shuffle among)."""


@dataclass
class LocalResult:
    centers: np.ndarray
    privacy_spent: PrivacyReport
    reports: int
    declared: tuple[float, float] | None = None  # the protocol's declared guarantee (a shuffle's central target)
    accepted_weaker: bool = False  # released although the reports gave less than ``declared``


class Aggregator:
    """The server's side: reports in (any order, any batches; for a shuffle protocol one batch, the shuffler's signed
    output: ONE_SHUFFLED_BATCH), centers out.

    The nonces of streamed reports are kept in temporary files (:class:`NonceSpill`) until :meth:`close`
    (or the end of a ``with`` block) frees them; a closed aggregator takes no more reports (it could no
    longer tell a replayed one) but can still release what it tallied."""

    def __init__(self, protocol: Protocol):
        self.protocol = protocol
        self._design = protocol._design()
        self.round, self.domain = self._design.round, self._design.domain
        self.tallies: list[Tally] | None = None
        self.received = 0
        self._batches = 0  # batches taken (a shuffle protocol's server takes one: ONE_SHUFFLED_BATCH)
        self._nonces = Nonces()  # the nonces of the batches given to add
        self._spill: NonceSpill | None = None  # those of the streams given to add_stream, on disk
        self._closed = False

    def close(self) -> None:
        """Free the nonces' temporary files; no report is taken afterwards (see the class docstring)."""
        self._closed = True
        if self._spill is not None:
            self._spill.close()
            self._spill = None

    def __enter__(self) -> "Aggregator":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _open(self) -> None:
        if self._closed:
            raise ValueError(
                "this aggregator is closed: it no longer holds the nonces that refuse a replayed report, so it "
                "takes no more reports (release what it tallied, or start a new aggregator)"
            )

    def add(self, batch) -> int:
        """Tally a batch of reports (bytes-like: bytes, bytearray, memoryview, mmap; or records, taken on the caller's
        word); returns how many it held.  A batch that would take the
        reports past the protocol's users, repeats a nonce, or holds a forged field is refused whole (the
        tallies stay as they were)."""
        self._open()
        self._one_batch_of_a_shuffle()
        if isinstance(batch, (bytes, bytearray, memoryview, mmap.mmap)):  # a batch (its header first)
            # a shuffle protocol's server takes the shuffler's output only
            records = decode_reports(self.protocol, batch, served_batches(self.protocol))
        else:  # records: the caller vouches for where they came from
            records = batch
        records = np.asarray(records, dtype=REPORT)
        tallies = self.round.tally(records)  # refuses a forged field
        check_reports(self.protocol, records, self.received, self._nonces, self._spill)  # the count, the nonces
        self.tallies = tallies if self.tallies is None else [a.merge(b) for a, b in zip(self.tallies, tallies)]
        self._nonces.add(records["nonce"])
        self.received += len(records)
        self._batches += 1
        return len(records)

    def _one_batch_of_a_shuffle(self) -> None:
        """Refuse a second batch (of any kind, even empty) for a shuffle protocol: ONE_SHUFFLED_BATCH."""
        if self.protocol.shuffle is not None and self._batches:
            raise ValueError(ONE_SHUFFLED_BATCH)

    def add_stream(self, batches: Iterable, expected: int | None = None, scratch=None) -> int:
        """Tally a stream of batches (record arrays, e.g. :meth:`ReportFile.chunks`) as one batch that need not
        fit in memory; returns how many reports it held.

        The same checks as :meth:`add`, in bounded memory: each batch is tallied (a forged field is refused)
        and counted against the users as it passes, and its nonces are staged in a :class:`NonceSpill` on
        disk; once the stream has passed they are checked for repeats, among themselves and against every
        nonce received before, one part at a time.  Any refusal refuses the whole stream: the tallies, the
        count and the nonces stay as they were -- so a shuffled file's signature, which :meth:`ReportFile.chunks`
        checks after its last records, refuses the stream whole.  The records are taken on the caller's word
        (read a file with :meth:`ReportFile.open` as the server does, ``shuffled`` left out); a shuffle protocol's
        server takes one stream or batch a release.  ``expected`` (public: the files' lengths say it): the
        stream's count, checked against the users before any report is read."""
        self._open()
        self._one_batch_of_a_shuffle()
        if expected is not None:
            check_report_count(self.protocol, self.received + expected)
        if self._spill is None:
            self._spill = NonceSpill(self.protocol.users, scratch)
        tallies, count, repeated = None, 0, 0
        try:
            for batch in batches:
                records = np.asarray(batch, dtype=REPORT)
                part = self.round.tally(records)  # refuses a forged field
                count += len(records)
                check_report_count(self.protocol, self.received + count)
                repeated += self._nonces.seen(records["nonce"])  # against the batches given to add
                self._spill.stage(records["nonce"])
                tallies = part if tallies is None else [a.merge(b) for a, b in zip(tallies, part)]
            repeated += self._spill.staged_repeats()
            if repeated:
                raise repeated_nonces(repeated)
        except BaseException:  # a refusal, or Ctrl-C: nothing of the stream is kept
            self._spill.rollback()
            raise
        self._spill.commit()
        if tallies is not None:
            self.tallies = tallies if self.tallies is None else [a.merge(b) for a, b in zip(self.tallies, tallies)]
        self.received += count
        self._batches += 1
        return count

    def release(self, accountant: PrivacyAccountant | None = None, accept_weaker: bool = False) -> LocalResult:
        """The centers from every report tallied so far (the round is released once: run it when all are in).

        The spend is the guarantee of the reports actually received (:meth:`Protocol.guarantee`).  When it is
        weaker than the protocol's declared one -- a shuffle protocol that received fewer reports than its
        users -- nothing is released (:class:`WeakerGuaranteeError`) unless ``accept_weaker``; then the spend's
        label and the result say so."""
        guarantee = self.protocol.guarantee(self.received)
        weaker = self.protocol.weaker_than_declared(guarantee)
        if weaker and not accept_weaker:
            eps, delta = self.protocol.shuffle
            raise WeakerGuaranteeError(
                f"{self.received:,} reports of the planned {self.protocol.users:,} give only central "
                f"(epsilon={guarantee[0]:.4g}, delta={guarantee[1]:g}), weaker than the protocol's declared "
                f"({eps:g}, {delta:g}): nothing released (to release at the weaker guarantee, accept it "
                "explicitly: --accept-weaker, or accept_weaker=True)"
            )
        if self.tallies is None:  # no report: the tallies of none (a closed aggregator releases them too)
            self.tallies = self.round.tally(np.zeros(0, dtype=REPORT))
        spend = self.protocol.round_spend(self.received, accepted_weaker=weaker, guarantee=guarantee)
        with self.protocol._session(accountant, spend) as session:
            self._design.spec.open(session.oracle)  # the greedy's plan, which reserves (and checks) the spend
            released = session.oracle.release_round(self.round, self.tallies)
            rng = copy.deepcopy(self._design.rng)  # the public generator where the round left it, every release
            _, lifted = greedy_centers(self._design.greedy, released, rng)  # post-processing
            centers, _ = solution_cost(lifted, self.protocol.n_clusters, rng)
        return LocalResult(
            self.domain.from_unit(centers),
            session.report(),
            self.received,
            declared=self.protocol.shuffle,
            accepted_weaker=weaker,
        )

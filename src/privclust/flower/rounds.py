"""Federated FastLloyd's rounds over Flower's SecAgg+: everything that needs no Flower.

``privclust.flower.app`` carries these steps in Flower messages; here they are plain
functions on numpy arrays and a JSON-able state, so they are tested without a SuperLink.

Per round t (see docs/federated.md, "Flower"):

1. *next* (a Flower query message, not secure-aggregated): the server sends the previous
   round's release -- the survivors' sum under their output masks, with the server's
   noise -- and its survivors.  Each client removes the survivors' output masks, stores
   the release, and replays the algorithm (the central model's code, ``run_party``) from
   the public start through the stored releases: it ends (*done*) or asks for round t,
   whose label and noise parameters (public) the client answers.  The replay reads no
   row: a released round's query is answered from its stored release, and round t is
   announced from its query alone.
2. The server checks the noise parameters (``validate_spec``) and its ledger
   (``round_spends``) before any data-derived message is asked for, then runs Flower's
   SecAgg+ workflow.  In its collect stage each client replays again to round t (again
   without a row) and there, in the one pass over its rows of the round, encodes
   its exact clipped sums in Z_(2^64) (``ring.encode``), adds its **output mask**
   O_i(t) = PRF(group key, session, i, t) (``secagg.output_mask``) and hands SecAgg+ the
   64-bit ring elements cut into 16-bit limbs (``to_limbs``).  SecAgg+ masks them in its
   Z_(2^32) and reveals to the server the sums of the limbs over the survivors, from which
   the server rebuilds Y = sum_U (x_i + O_i(t)) mod 2^64 (``from_limb_average``).
3. The server adds the round's whole Gaussian noise in the ring (``draw_ring_noise``, as
   the own protocol's server) and keeps Y + noise for the next *next* message.

Privacy.  The server (and SecAgg+) only ever see functions of y_i = x_i + O_i(t): the O_i
are outputs of a PRF under a key the clients share and the server does not, on inputs no
other message uses (the session binds every client's fresh nonce; each client masks each
round once), so the y_i are uniform and independent of the data, and so are their limbs
and the limbs' sums.  The server learns the survivor sets (it decides them) and the public
noise parameters, as in the own protocol.  Limbs are exact: a limb l is sent as l - c
with c = 2^15 and SecAgg+'s quantizer 2^16 / (2 c) = 1, so its stochastic rounding meets
integers only; n limbs sum below n 2^16 < 2^32 (SecAgg+'s modulus), so nothing wraps
but the 64-bit ring, which wraps as the own protocol's does.  The noise is the own
protocol's, on the same integer aggregate, so each round is mu-GDP with the planned mu
and the rounds compose as in the central plan; survivors do not change the sensitivity.
"""

from __future__ import annotations

import json

import numpy as np

from ..federated import crypto
from ..federated.client import JobLimits, check_job, party_result, run_party
from ..federated.secagg import output_mask
from ..federated.server import Job
from ..federated.wire import ProtocolError
from ..geometry.domain import make_domain

__all__ = [
    "LIMB_BITS",
    "QUANTIZATION_RANGE",
    "CLIPPING_RANGE",
    "MODULUS_RANGE",
    "MAX_CLIENTS",
    "to_limbs",
    "from_limb_average",
    "ClientRounds",
    "Pending",
    "agree",
]

LIMB_BITS = 16
LIMBS = 64 // LIMB_BITS
QUANTIZATION_RANGE = 2**LIMB_BITS  # SecAgg+'s quantization_range: one limb's values
CLIPPING_RANGE = float(QUANTIZATION_RANGE // 2)  # quantizer QUANTIZATION_RANGE / (2 c) = 1: exact
MODULUS_RANGE = 2**32  # SecAgg+'s ring (it must be below 2^33; its masks are uniform there)
MAX_WEIGHT = 1.0  # each client sends weight 1: SecAgg+'s weighted average is the plain mean
MAX_CLIENTS = MODULUS_RANGE // QUANTIZATION_RANGE - 1  # n limbs (and n weights) sum without wrapping


def to_limbs(ring: np.ndarray) -> np.ndarray:
    """64-bit ring elements as SecAgg+'s input: 4 limbs of 16 bits each, low first, each as l - c."""
    ring = np.asarray(ring, dtype=np.uint64).ravel()
    mask = np.uint64(QUANTIZATION_RANGE - 1)
    limbs = np.stack([(ring >> np.uint64(LIMB_BITS * j)) & mask for j in range(LIMBS)], axis=1).ravel()
    return limbs.astype(np.float64) - CLIPPING_RANGE


def from_limb_average(average: np.ndarray, contributors: int) -> np.ndarray:
    """The ring sum sum_i y_i mod 2^64 from what SecAgg+ hands the strategy for ``contributors`` clients
    of weight 1: (sum of the limbs - n c) / n per limb.  ProtocolError unless that is a sum of limbs."""
    if contributors < 1:
        raise ProtocolError("SecAgg+ aggregated no client")
    average = np.asarray(average, dtype=np.float64).ravel()
    if average.size % LIMBS:
        raise ProtocolError(f"SecAgg+ returned {average.size} values, not a whole number of {LIMBS}-limb elements")
    sums = average * contributors + contributors * CLIPPING_RANGE
    rounded = np.rint(sums)
    if not (
        np.all(np.isfinite(sums))
        and np.all(np.abs(sums - rounded) < 1e-3)
        and np.all(rounded >= 0)
        and np.all(rounded < contributors * QUANTIZATION_RANGE)
    ):
        raise ProtocolError("SecAgg+ returned an aggregate that is not a sum of limbs")
    limbs = rounded.astype(np.uint64).reshape(-1, LIMBS)
    total = np.zeros(len(limbs), dtype=np.uint64)
    for j in range(LIMBS):
        total += limbs[:, j] << np.uint64(LIMB_BITS * j)  # wraps modulo 2^64
    return total


def session_of(job: dict, threshold: int, nonces: list[str]) -> str:
    """The run's session id: SHA-256 of the job, the threshold and every client's fresh nonce."""
    return crypto.session_id({"job": job, "threshold": threshold, "nonces": sorted(nonces)})


class Pending(BaseException):
    """The replay reached a round without a release: its label, noise parameters, the number of its ring values
    and, when the client contributes to it, its encoded sums (None when it only announces it).

    A BaseException so that no ``except Exception`` in an algorithm swallows it."""

    def __init__(self, round_index: int, label: str, spec: dict, size: int, encoded: np.ndarray | None = None):
        super().__init__(round_index)
        self.round, self.label, self.spec, self.size, self.encoded = round_index, label, spec, size, encoded


class _Replay:
    """The party's aggregation (``federated.client.MaskedAggregation``'s interface) during a replay: the
    stored releases round by round, then :class:`Pending` at the first round without one -- before the party
    reads its rows for it, unless it ``contributes`` to that round, when it comes with the round's encoded sums.
    A round is thus replayed from its release alone: one message reads the rows at most once."""

    def __init__(self, releases: list[np.ndarray], labels: list[str], contributors: list[list[int]], contributes: bool):
        self._releases, self._labels, self.contributors = releases, labels, contributors
        self._contributes = contributes
        self._spec = None

    def released(self, round_index: int, header: dict, size: int) -> np.ndarray | None:
        self._spec = header.get("spec", self._spec)  # the oracle sends it only when it changes
        if round_index < len(self._releases):
            if header.get("label") != self._labels[round_index]:
                raise ProtocolError(f"round {round_index} replays as another query than it was released for")
            return self._releases[round_index].copy()
        if not self._contributes:
            raise Pending(round_index, str(header.get("label")), self._spec, size)
        return None  # the party computes its sums for this round, and hands them to aggregate

    def aggregate(self, round_index: int, header: dict, encoded: np.ndarray) -> np.ndarray:
        raise Pending(round_index, str(header.get("label")), self._spec, encoded.size, encoded)


class ClientRounds:
    """One client's side, as a state that survives between Flower messages (``as_json``/``from_json``).

    The client's rows, group key and limits are its own (its node config); everything the server
    says is checked before it is acted on."""

    def __init__(self, state: dict | None = None):
        self.state = state or {}

    def as_json(self) -> str:
        return json.dumps(self.state)

    @classmethod
    def from_json(cls, text: str | None) -> ClientRounds:
        return cls(json.loads(text) if text else None)

    # -- hello -----------------------------------------------------------------------------

    def hello(self, announced: dict, limits: JobLimits, n_features: int) -> str:
        """Check the announced job (refuse with ValueError before anything data-derived is sent) and
        return this client's fresh nonce."""
        if self.state:
            raise ProtocolError("the server said hello twice in one run")
        parties, threshold = announced.get("parties"), announced.get("threshold")
        if not isinstance(parties, int) or not 2 <= parties <= MAX_CLIENTS:
            raise ProtocolError(f"the server announces an invalid number of clients {parties!r}")
        if not isinstance(threshold, int) or not 2 <= threshold <= parties:
            raise ProtocolError(f"the server announces an invalid threshold {threshold!r}")
        try:
            job = Job(**announced.get("job", {}))
        except (TypeError, ValueError) as exc:
            raise ProtocolError(f"the server announces an invalid job: {exc}") from None
        if job.n_features is not None and job.n_features != n_features:
            raise ValueError(f"the job has {job.n_features} features, this client's data {n_features}")
        make_domain(job.bounds, n_features)
        check_job(job, threshold, parties, limits)
        self.state = {
            "job": job.as_dict(),
            "parties": parties,
            "threshold": threshold,
            "nonce": crypto.new_nonce(),
            "releases": [],  # per round: the unmasked noisy total (hex of its ring elements)
            "labels": [],
            "contributors": [],  # per round: the survivors' indices in the sorted nonces
            "sent": -1,  # the last round this client masked a message for (each mask is used once)
        }
        return self.state["nonce"]

    # -- next: a release in, the next query's public parameters out --------------------------

    def next_round(self, X, group_key: bytes, round_index: int, nonces=None, release=None, survivors=None):
        """Take round ``round_index - 1``'s release and replay: ``("round", label, spec)`` for the
        next round, or ``("done", result)`` (a ``FederatedResult``) when the algorithm ended."""
        s = self._started()
        pending = s.get("pending")
        if round_index == 0:
            if pending is not None or s.get("session"):
                raise ProtocolError("the server restarted the rounds")
            self._set_session(nonces)
        else:
            if pending is None or pending["round"] != round_index - 1 or s["sent"] != round_index - 1:
                raise ProtocolError(f"the server releases round {round_index - 1}, which this client did not send")
            self._absorb(group_key, round_index - 1, release, survivors, pending)
        try:
            run, result = self._replay(X, group_key, contributes=False)
        except Pending as p:
            if p.round != round_index:
                raise ProtocolError(f"the replay asks for round {p.round}, the server for {round_index}") from None
            s["pending"] = {"round": p.round, "label": p.label, "spec": p.spec, "count": int(p.size)}
            return "round", p.label, p.spec
        s["pending"] = None
        return "done", party_result(run, result, s["contributors"])

    def contribute(self, X, group_key: bytes, round_index: int, threshold: int) -> np.ndarray:
        """This client's masked sums of round ``round_index`` as SecAgg+ limbs (see the module docstring)."""
        s = self._started()
        pending = s.get("pending")
        if pending is None or pending["round"] != round_index:
            raise ProtocolError(f"the server asks for round {round_index}, which this client did not announce")
        if s["sent"] >= round_index:
            raise ProtocolError(f"the server asks for round {round_index} again: each round is masked once")
        if threshold != s["threshold"]:
            raise ProtocolError(f"SecAgg+ runs with threshold {threshold}, the server announced {s['threshold']}")
        try:
            self._replay(X, group_key, contributes=True)
        except Pending as p:
            if (p.round, p.label, p.spec, p.size) != (round_index, pending["label"], pending["spec"], pending["count"]):
                raise ProtocolError(f"round {round_index} replays as another query than announced") from None
            s["sent"] = round_index
            masked = p.encoded + output_mask(group_key, s["session"], s["nonce"], round_index, p.encoded.size)
            return to_limbs(masked)
        raise ProtocolError(f"the algorithm ended before round {round_index}")

    # -- internals ---------------------------------------------------------------------------

    def _started(self) -> dict:
        if not self.state:
            raise ProtocolError("the server sent a round before its hello")
        return self.state

    def _set_session(self, nonces) -> None:
        s = self.state
        if (
            not isinstance(nonces, list)
            or len(nonces) != s["parties"]
            or len(set(nonces)) != len(nonces)
            or not all(crypto.is_hex(n, crypto.SEED_BYTES) for n in nonces)
        ):
            raise ProtocolError("the server relayed an invalid set of client nonces")
        if s["nonce"] not in nonces:
            raise ProtocolError("the server did not relay this client's fresh nonce: the session is not fresh")
        s["nonces"] = sorted(nonces)
        s["session"] = session_of(s["job"], s["threshold"], nonces)

    def _absorb(self, group_key: bytes, round_index: int, release, survivors, pending: dict) -> None:
        """Remove the survivors' output masks from the server's release of ``round_index`` and keep it."""
        s = self.state
        if (
            not isinstance(survivors, list)
            or len(set(survivors)) != len(survivors)
            or not set(survivors) <= set(s["nonces"])
        ):
            raise ProtocolError(f"the server names invalid survivors for round {round_index}")
        if s["nonce"] not in survivors or len(survivors) < s["threshold"]:
            raise ProtocolError(f"the server's survivors of round {round_index} leave out this client or are too few")
        if not isinstance(release, bytes) or len(release) != 8 * pending["count"]:
            raise ProtocolError(f"the server's release of round {round_index} has the wrong size")
        total = np.frombuffer(release, dtype="<u8").astype(np.uint64)
        for nonce in survivors:
            total -= output_mask(group_key, s["session"], nonce, round_index, total.size)
        s["releases"].append(total.astype("<u8").tobytes().hex())
        s["labels"].append(pending["label"])
        s["contributors"].append(sorted(s["nonces"].index(n) for n in survivors))

    def _replay(self, X, group_key: bytes, contributes: bool):
        """Run the algorithm from the public start through the stored releases (the central model's code), to
        :class:`Pending` at the first round without one (with its encoded sums if this client ``contributes``)."""
        s = self.state
        releases = [np.frombuffer(bytes.fromhex(r), dtype="<u8").astype(np.uint64) for r in s["releases"]]
        aggregation = _Replay(releases, s["labels"], s["contributors"], contributes)
        seed = crypto.geometry_seed(group_key, s["session"])
        return run_party(X, Job(**s["job"]), seed, aggregation)


def agree(replies: dict, threshold: int):
    """The reply (a JSON-able value) at least ``threshold`` clients gave, and who gave it; ProtocolError if none.

    With a majority threshold it is unique; clients that answered otherwise are dropped by the caller."""
    votes: dict[str, list] = {}
    for client, reply in replies.items():
        votes.setdefault(json.dumps(reply, sort_keys=True), []).append(client)
    best = max(votes.values(), key=len, default=[])
    if len(best) < threshold:
        raise ProtocolError(
            f"no {threshold} clients agree on the next round ({len(replies)} answered, {len(votes)} different answers)"
        )
    return replies[best[0]], set(best)

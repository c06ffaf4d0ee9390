"""Dropout-tolerant masked aggregation (SecAgg, Bonawitz et al. CCS 2017), one aggregation per round.

Plain arrays and dicts in, plain arrays and dicts out: no sockets here (``client.py`` and
``server.py`` carry the messages).

Party i's message in round t is its fixed-point vector x_i plus three masks (mod 2^64):

    y_i = x_i + S_i(t) + sum_{j alive, j != i} sign(i, j) P_ij(t) + O_i(t)

* P_ij(t): pairwise mask from an X25519 agreement between round-t keys of i and j (both
  fresh every round), sign +1 if i < j else -1: the pairwise masks cancel in the sum.
* S_i(t): self mask from a fresh 32-byte seed of party i.
* O_i(t): output mask from the group secret every party knows and the server does not;
  it stays on the aggregate, so the server never sees the sum, noisy or not.

Every party Shamir-shares (threshold t) its round key and its self-mask seed among the
other parties, sealed under pairwise keys, relayed by the server.  Once the server knows
who sent round t's message (survivors U) and who did not (dropped D), every survivor
reveals its shares of the survivors' self-mask seeds and of the dropped parties' round
keys -- never both for one party in one round.  From ``threshold`` survivors' shares the
server removes the self masks of U and the dropped parties' pairwise masks, leaving
sum_U x_i + sum_U O_i(t); it adds the DP noise and broadcasts; the parties subtract
sum_U O_i(t).  Round keys and seeds are fresh each round (the next round's travel with
this round's reveal), so a key revealed for a dropout opens no other round.
"""

from __future__ import annotations

import os

import numpy as np

from . import crypto, shamir
from .wire import ProtocolError

__all__ = ["SecAggParty", "RoundSecrets", "remove_masks", "check_material", "default_threshold", "output_mask"]


def default_threshold(parties: int) -> int:
    """A majority: two disjoint survivor sets cannot both reach it."""
    return parties // 2 + 1


def _sign(i: int, j: int) -> int:
    return 1 if i < j else -1


def _pair_mask(shared: bytes, session: str, round_index: int, i: int, j: int, count: int) -> np.ndarray:
    low, high = sorted((i, j))
    return crypto.prg(crypto.derive(shared, "pair", session, round_index, low, high), count)


def _self_mask(seed: bytes, session: str, party: int, round_index: int, count: int) -> np.ndarray:
    return crypto.prg(crypto.derive(seed, "self", session, party, round_index), count)


def output_mask(group: bytes, session: str, party, round_index: int, count: int) -> np.ndarray:
    """Party ``party``'s output mask of round ``round_index``: only holders of ``group`` can compute it."""
    return crypto.prg(crypto.derive(group, "output", session, party, round_index), count)


def _commit(seed: bytes, session: str, party: int, round_index: int) -> str:
    """A binding, hiding commitment to a self-mask seed, so the server can check its reconstruction."""
    return crypto.derive(seed, "commit", session, party, round_index).hex()


def _box_label(session: str, round_index: int, sender: int, recipient: int) -> str:
    return f"{session}|shares|{round_index}|{sender}->{recipient}"


SHARE_BYTES = (shamir.PRIME.bit_length() + 7) // 8  # one share of GF(2^521 - 1): 66 bytes


def _box_body(key_share: int, seed_share: int) -> bytes:
    """What a sealed box carries: the recipient's share of the round key, then of the seed, each in
    ``SHARE_BYTES`` big-endian bytes (half the size of the hex in JSON it once was)."""
    return key_share.to_bytes(SHARE_BYTES, "big") + seed_share.to_bytes(SHARE_BYTES, "big")


def _open_box_body(body: bytes) -> tuple[int, int, bytes]:
    """(key share, seed share, what follows them) of an opened box; ValueError if it is too short."""
    if len(body) < 2 * SHARE_BYTES:
        raise ValueError("the box is too short to hold two shares")
    key_share = int.from_bytes(body[:SHARE_BYTES], "big")
    seed_share = int.from_bytes(body[SHARE_BYTES : 2 * SHARE_BYTES], "big")
    return key_share, seed_share, body[2 * SHARE_BYTES :]


class RoundSecrets:
    """One party's secrets for one round: a pairwise-mask key pair and a self-mask seed."""

    def __init__(self):
        self.key = crypto.KeyPair()
        self.seed = os.urandom(crypto.SEED_BYTES)


def check_material(material, senders_to: set[int], sender: int, round_index: int) -> None:
    """Shape of one party's public round material: a key, a commitment, a box for every recipient."""
    if not isinstance(material, dict):
        raise ProtocolError(f"party {sender} sent no key material for round {round_index}")
    if not crypto.is_hex(material.get("mask_key"), 32) or not crypto.is_hex(material.get("commit"), 32):
        raise ProtocolError(f"party {sender} sent a malformed key for round {round_index}")
    sealed = material.get("sealed")
    if not isinstance(sealed, dict) or not {str(j) for j in senders_to} <= set(sealed):
        raise ProtocolError(f"party {sender} sent no key shares for some parties in round {round_index}")
    for j in senders_to:
        box = sealed[str(j)]
        if (
            not isinstance(box, dict)
            or not crypto.is_hex(box.get("nonce"), 12)
            or not isinstance(box.get("ciphertext"), str)
        ):
            raise ProtocolError(f"party {sender} sent a malformed key share in round {round_index}")


class SecAggParty:
    """Party ``party``'s side of the protocol for one run (session)."""

    def __init__(self, party: int, parties: int, threshold: int, session: str, group_key: bytes | None = None):
        self.party, self.parties, self.threshold, self.session = party, parties, threshold, session
        self.alive = set(range(parties))
        self._sealing = crypto.KeyPair()  # for the share boxes, this run only
        self._group_key = group_key
        self._contribution = os.urandom(crypto.SEED_BYTES)
        self._box_keys: dict[int, bytes] = {}
        self.group_secret: bytes | None = None
        self._next = RoundSecrets()  # secrets of the round about to be set up
        self._current: RoundSecrets | None = None
        self._peer_keys: dict[int, str] = {}  # the current round's pairwise public keys
        self._shares: dict[int, tuple[int, int]] = {}  # owner -> (share of its round key, of its seed)
        self._next_peer_keys: dict[int, str] = {}
        self._next_shares: dict[int, tuple[int, int]] = {}
        self._revealed = -1  # the last round whose shares were revealed: once per round
        self._own_output: tuple[int, np.ndarray] | None = None  # (round, this party's output mask in it)
        self._prepared: tuple[int, dict] | None = None  # (round, its material built ahead: see prepare)

    # -- set-up ----------------------------------------------------------------------------

    @property
    def public_key(self) -> str:
        return self._sealing.public_hex

    def absorb_public_keys(self, keys) -> None:
        """The sealing keys of all parties, relayed by the server."""
        if not isinstance(keys, dict) or set(keys) != {str(i) for i in range(self.parties)}:
            raise ProtocolError("the server relayed the wrong set of public keys")
        if keys[str(self.party)] != self.public_key:
            raise ProtocolError("the server relayed a wrong public key for this party")
        for j in range(self.parties):
            if j == self.party:
                continue
            if not crypto.is_hex(keys[str(j)], 32):
                raise ProtocolError(f"the server relayed a malformed public key for party {j}")
            low, high = sorted((self.party, j))
            self._box_keys[j] = crypto.derive(self._sealing.exchange(keys[str(j)]), "seal", self.session, low, high)

    def _material(self, round_index: int, recipients, secrets: RoundSecrets, extra: bytes = b"") -> dict:
        """The public key and commitment of ``secrets`` and, per recipient, a sealed box of its shares
        (see ``_box_body``) followed by ``extra``."""
        key_shares = shamir.split(secrets.key.private_bytes, self.parties, self.threshold)
        seed_shares = shamir.split(secrets.seed, self.parties, self.threshold)
        self._next_shares[self.party] = (key_shares[self.party + 1], seed_shares[self.party + 1])
        sealed = {}
        for j in recipients:
            body = _box_body(key_shares[j + 1], seed_shares[j + 1]) + extra
            label = _box_label(self.session, round_index, self.party, j)
            sealed[str(j)] = crypto.seal(self._box_keys[j], body, label)
        return {
            "mask_key": secrets.key.public_hex,
            "commit": _commit(secrets.seed, self.session, self.party, round_index),
            "sealed": sealed,
        }

    def setup_message(self) -> dict:
        """Round 0's key material, with this party's contribution to the group secret in every box."""
        others = [j for j in range(self.parties) if j != self.party]
        return self._material(0, others, self._next, self._contribution)

    def _absorb(self, round_index: int, relayed, members: set[int]) -> dict[int, bytes]:
        """Open the boxes addressed to this party from every other member; returns what follows the
        shares in each (the group-secret contribution in the set-up's boxes, else nothing)."""
        if not isinstance(relayed, dict) or not isinstance(relayed.get("keys"), dict):
            raise ProtocolError(f"the server relayed no key material for round {round_index}")
        keys, sealed = relayed["keys"], relayed.get("sealed")
        if set(keys) != {str(j) for j in members} or not isinstance(sealed, dict):
            raise ProtocolError(f"the server relayed key material of the wrong parties for round {round_index}")
        contents = {}
        self._next_peer_keys = {}
        for j in members:
            if not crypto.is_hex(keys[str(j)].get("mask_key") if isinstance(keys[str(j)], dict) else None, 32):
                raise ProtocolError(f"the server relayed a malformed key of party {j}")
            self._next_peer_keys[j] = keys[str(j)]["mask_key"]
            if j == self.party:
                continue
            label = _box_label(self.session, round_index, j, self.party)
            try:
                body = crypto.unseal(self._box_keys[j], sealed.get(str(j)), label)
                key_share, seed_share, contents[j] = _open_box_body(body)
                self._next_shares[j] = (key_share, seed_share)
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                raise ProtocolError(f"the key shares of party {j} for round {round_index} are invalid: {exc}") from None
        if self._next_peer_keys[self.party] != self._next.key.public_hex:
            raise ProtocolError("the server relayed a wrong round key for this party")
        self._current, self._peer_keys, self._shares = self._next, self._next_peer_keys, self._next_shares
        self._next, self._next_shares = RoundSecrets(), {}
        return contents

    def absorb_setup(self, relayed) -> None:
        contents = self._absorb(0, relayed, self.alive)
        if self._group_key is not None:
            self.group_secret = crypto.derive(self._group_key, "group", self.session)
            return
        parts = {self.party: self._contribution}
        for j, extra in contents.items():
            if len(extra) != crypto.SEED_BYTES:
                raise ProtocolError(f"party {j} sent no contribution to the group secret")
            parts[j] = extra
        # Every party's fresh contribution goes in: no single party (nor the server) chooses the secret.
        self.group_secret = crypto.derive(b"".join(parts[j] for j in sorted(parts)), "group", self.session)

    # -- rounds ----------------------------------------------------------------------------

    def mask(self, round_index: int, encoded: np.ndarray) -> np.ndarray:
        """This party's masked message for round ``round_index``."""
        count = encoded.size
        y = np.asarray(encoded, dtype=np.uint64).ravel().copy()
        y += _self_mask(self._current.seed, self.session, self.party, round_index, count)
        own = output_mask(self.group_secret, self.session, self.party, round_index, count)
        self._own_output = (round_index, own)  # unmask takes it off again
        y += own
        for j in sorted(self.alive - {self.party}):
            p = _pair_mask(
                self._current.key.exchange(self._peer_keys[j]), self.session, round_index, self.party, j, count
            )
            if _sign(self.party, j) > 0:
                y += p
            else:
                y -= p
        return y

    def reveal(self, round_index: int, survivors, dropped) -> dict:
        """Shares the server needs to unmask round ``round_index``, and this party's next round material.

        Refuses a survivor set that is not a partition of the alive parties, leaves this party out,
        or is under the threshold; reveals at most once per round."""
        survivors, dropped = _party_set(survivors), _party_set(dropped)
        if survivors is None or dropped is None or survivors & dropped or survivors | dropped != self.alive:
            raise ProtocolError(f"the server's survivor list for round {round_index} does not partition the parties")
        if self.party not in survivors or len(survivors) < self.threshold:
            raise ProtocolError(f"the server's survivor list for round {round_index} is invalid")
        if round_index <= self._revealed:
            raise ProtocolError(f"the server asked twice for round {round_index}'s shares")
        self._revealed = round_index
        others = survivors - {self.party}
        prepared, self._prepared = self._prepared, None
        if prepared is not None and prepared[0] == round_index + 1:
            material = prepared[1]  # boxes for every alive party: keep the survivors'
            material = {**material, "sealed": {str(j): material["sealed"][str(j)] for j in sorted(others)}}
        else:
            material = self._material(round_index + 1, sorted(others), self._next)
        return {
            "seeds": {str(i): format(self._shares[i][1], "x") for i in sorted(survivors)},
            "keys": {str(j): format(self._shares[j][0], "x") for j in sorted(dropped)},
            "next": material,
        }

    def prepare(self, round_index: int) -> None:
        """Build the material for round ``round_index + 1`` now, while the server gathers round
        ``round_index``'s messages, so ``reveal`` only picks the survivors' boxes.  It holds nothing
        the reveal would not: the same fresh secrets, shared and sealed for every alive party."""
        if round_index > self._revealed:
            others = sorted(self.alive - {self.party})
            self._prepared = (round_index + 1, self._material(round_index + 1, others, self._next))

    def unmask(self, round_index: int, total: np.ndarray, survivors) -> np.ndarray:
        """The noisy aggregate from the server's reply: subtract the survivors' output masks."""
        survivors = _party_set(survivors)
        if survivors is None or not survivors <= self.alive or self.party not in survivors:
            raise ProtocolError(f"the server's result for round {round_index} names invalid survivors")
        out = np.asarray(total, dtype=np.uint64).copy()
        for i in sorted(survivors):
            own = self._own_output if i == self.party else None
            if own is not None and own[0] == round_index and own[1].size == out.size:
                out -= own[1]  # the mask this party added in mask(), not derived twice
            else:
                out -= output_mask(self.group_secret, self.session, i, round_index, out.size)
        return out

    def advance(self, round_index: int, alive, relayed) -> None:
        """Enter round ``round_index + 1`` with the parties the server still counts on."""
        alive = _party_set(alive)
        if alive is None or not alive <= self.alive or self.party not in alive or len(alive) < self.threshold:
            raise ProtocolError(f"the server's party list after round {round_index} is invalid")
        self._absorb(round_index + 1, relayed, alive)
        self.alive = alive


def _party_set(values) -> set[int] | None:
    if not isinstance(values, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return None
    return set(values) if len(set(values)) == len(values) else None


def _collect(reveals: dict[int, dict], field: str, owner: int, threshold: int) -> dict[int, int]:
    """``threshold`` shares of ``owner``'s secret from the revealing parties (x = party + 1)."""
    shares = {}
    for k in sorted(reveals):
        value = reveals[k].get(field, {}).get(str(owner))
        try:
            shares[k + 1] = int(value, 16)
        except (TypeError, ValueError):
            raise ProtocolError(f"party {k} revealed a malformed share") from None
        if len(shares) == threshold:
            return shares
    raise ProtocolError(f"too few shares to recover party {owner}'s masks")


def remove_masks(
    total: np.ndarray,
    round_index: int,
    session: str,
    survivors: set[int],
    dropped: set[int],
    reveals: dict[int, dict],
    material: dict[int, dict],
    threshold: int,
) -> np.ndarray:
    """The server's step: take the survivors' self masks and the dropped parties' pairwise masks off
    ``total`` (the sum of the survivors' messages).  ``reveals[k]`` is survivor k's REVEAL;
    ``material[j]`` party j's public round material.  What is left is the survivors' sum plus their
    output masks, which the server cannot remove."""
    out = np.asarray(total, dtype=np.uint64).copy()
    count = out.size
    for i in sorted(survivors):
        try:
            seed = shamir.combine(_collect(reveals, "seeds", i, threshold))
        except shamir.ShareError:
            raise ProtocolError(f"the shares of party {i}'s self-mask seed are inconsistent") from None
        if _commit(seed, session, i, round_index) != material[i]["commit"]:
            raise ProtocolError(f"the shares of party {i}'s self-mask seed are inconsistent")
        out -= _self_mask(seed, session, i, round_index, count)
    for j in sorted(dropped):
        try:
            key = crypto.KeyPair(shamir.combine(_collect(reveals, "keys", j, threshold)))
        except (shamir.ShareError, ValueError):
            raise ProtocolError(f"the shares of party {j}'s round key are inconsistent") from None
        if key.public_hex != material[j]["mask_key"]:
            raise ProtocolError(f"the shares of party {j}'s round key are inconsistent")
        for i in sorted(survivors):
            p = _pair_mask(key.exchange(material[i]["mask_key"]), session, round_index, i, j, count)
            if _sign(i, j) > 0:  # survivor i added +P_ij: take it off
                out -= p
            else:
                out += p
    return out

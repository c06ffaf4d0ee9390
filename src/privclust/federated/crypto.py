"""Key agreement and mask expansion for masked secure aggregation (seed 003, Fig. 1).

* Key agreement: every client makes an X25519 key pair and the server relays the
  public keys.  The leader (party 0) draws a 32-byte group seed and sends it to
  each other party sealed with AES-256-GCM under a key derived (HKDF-SHA256) from
  their X25519 shared secret, with the session id as associated data.  The
  server relays ciphertexts it cannot open.  Alternatively the operator hands
  every client the same 32-byte key file (``--group-key``).
* Masks: party i's mask in round t is the AES-256-CTR keystream under
  HKDF(group seed, "mask", session, i, t), read as uint64 ring elements.  Every
  client can expand every party's mask; the server, lacking the seed, sees each
  client's message as a one-time pad (computationally uniform).
* Public seed: the initial centers are public geometry; all parties draw them
  from a seed derived from the group seed, so they agree without the server.
"""

from __future__ import annotations

import os

import numpy as np
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

__all__ = ["KeyPair", "derive", "seal_seed", "open_seed", "mask", "geometry_seed", "new_group_seed"]

SEED_BYTES = 32


def derive(secret: bytes, *info: object, length: int = 32) -> bytes:
    label = "|".join(str(part) for part in ("privclust-msa", *info)).encode()
    return HKDF(algorithm=hashes.SHA256(), length=length, salt=None, info=label).derive(secret)


class KeyPair:
    def __init__(self):
        self._private = X25519PrivateKey.generate()

    @property
    def public_hex(self) -> str:
        raw = self._private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        return raw.hex()

    def shared_key(self, peer_public_hex: str, session: str, a: int, b: int) -> bytes:
        peer = X25519PublicKey.from_public_bytes(bytes.fromhex(peer_public_hex))
        low, high = sorted((a, b))
        return derive(self._private.exchange(peer), "pair", session, low, high)


def new_group_seed() -> bytes:
    return os.urandom(SEED_BYTES)


def seal_seed(key: bytes, seed: bytes, session: str) -> dict:
    nonce = os.urandom(12)
    return {"nonce": nonce.hex(), "ciphertext": AESGCM(key).encrypt(nonce, seed, session.encode()).hex()}


def open_seed(key: bytes, sealed: dict, session: str) -> bytes:
    return AESGCM(key).decrypt(bytes.fromhex(sealed["nonce"]), bytes.fromhex(sealed["ciphertext"]), session.encode())


def mask(group_seed: bytes, session: str, party: int, round_index: int, count: int) -> np.ndarray:
    """Party ``party``'s mask for round ``round_index``: ``count`` uniform uint64 ring elements."""
    key = derive(group_seed, "mask", session, party, round_index)
    encryptor = Cipher(algorithms.AES(key), modes.CTR(b"\0" * 16)).encryptor()
    stream = encryptor.update(b"\0" * (8 * count)) + encryptor.finalize()
    return np.frombuffer(stream, dtype="<u8").astype(np.uint64)


def geometry_seed(group_seed: bytes, session: str) -> int:
    return int.from_bytes(derive(group_seed, "geometry", session, length=8), "big")

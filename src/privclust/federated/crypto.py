"""Cryptographic building blocks of the federated protocol, all from ``cryptography``.

* ``derive``: HKDF-SHA256 with a label naming the use, the session and the parties, so
  no key serves two purposes, two runs or two pairs.
* ``KeyPair``: X25519 key agreement (pairwise mask keys, fresh every round; sealing keys,
  fresh every run).
* ``seal`` / ``unseal``: AES-256-GCM with associated data binding the session, round,
  sender and recipient, so the server can relay a ciphertext but not read, alter,
  misroute or replay it.
* ``prg``: AES-256-CTR keystream read as uniform uint64 ring elements (the masks).
* ``session_id``: the SHA-256 of the public transcript (job, every party's fresh nonce, the
  server's nonce); every key above is bound to it, so no single party or server can make
  a run repeat an earlier run's keys.
"""

from __future__ import annotations

import hashlib
import json
import os

import numpy as np
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

__all__ = [
    "KeyPair",
    "derive",
    "seal",
    "unseal",
    "prg",
    "session_id",
    "new_nonce",
    "geometry_seed",
    "SEED_BYTES",
]

SEED_BYTES = 32


def derive(secret: bytes, *info: object, length: int = 32) -> bytes:
    label = "|".join(str(part) for part in ("privclust-secagg", *info)).encode()
    return HKDF(algorithm=hashes.SHA256(), length=length, salt=None, info=label).derive(secret)


def new_nonce() -> str:
    return os.urandom(SEED_BYTES).hex()


def session_id(transcript: dict) -> str:
    """SHA-256 of the canonical JSON of the public transcript every party checks."""
    return hashlib.sha256(json.dumps(transcript, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def is_hex(value, size: int) -> bool:
    """``value`` is a string of exactly ``size`` bytes in hex."""
    if not isinstance(value, str) or len(value) != 2 * size:
        return False
    try:
        bytes.fromhex(value)
    except ValueError:
        return False
    return True


class KeyPair:
    """An X25519 key pair; ``private_bytes`` is what is secret-shared when the key must be recoverable."""

    def __init__(self, private: bytes | None = None):
        self._private = X25519PrivateKey.from_private_bytes(private) if private else X25519PrivateKey.generate()

    @property
    def private_bytes(self) -> bytes:
        return self._private.private_bytes(
            serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
        )

    @property
    def public_hex(self) -> str:
        raw = self._private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        return raw.hex()

    def exchange(self, peer_public_hex: str) -> bytes:
        """The raw X25519 shared secret with a peer (derive a key from it before use)."""
        return self._private.exchange(X25519PublicKey.from_public_bytes(bytes.fromhex(peer_public_hex)))


def seal(key: bytes, plaintext: bytes, associated: str) -> dict:
    nonce = os.urandom(12)
    return {"nonce": nonce.hex(), "ciphertext": AESGCM(key).encrypt(nonce, plaintext, associated.encode()).hex()}


def unseal(key: bytes, box, associated: str) -> bytes:
    """The plaintext of a sealed box; raises ValueError if it does not authenticate."""
    try:
        return AESGCM(key).decrypt(bytes.fromhex(box["nonce"]), bytes.fromhex(box["ciphertext"]), associated.encode())
    except Exception as exc:  # InvalidTag, bad hex, missing fields: all mean "not from the claimed sender"
        raise ValueError(f"a sealed message does not authenticate ({type(exc).__name__})") from None


def prg(key: bytes, count: int) -> np.ndarray:
    """``count`` uniform uint64 ring elements: the AES-256-CTR keystream under ``key``."""
    encryptor = Cipher(algorithms.AES(key), modes.CTR(b"\0" * 16)).encryptor()
    stream = encryptor.update(b"\0" * (8 * count)) + encryptor.finalize()
    return np.frombuffer(stream, dtype="<u8").astype(np.uint64)


def geometry_seed(group_secret: bytes, session: str) -> int:
    """The seed of the public initial centers, known to every party and not to the server."""
    return int.from_bytes(derive(group_secret, "geometry", session, length=8), "big")

"""The shuffler's signature on its output: what lets a shuffle protocol's server tell shuffled reports from others.

A shuffle protocol's guarantee is amplification by shuffling, and it holds only
for reports that passed the shuffler: a device's batch is linkable to its
device.  A header saying "shuffled" is a claim anyone -- a device, or the
server's own operator -- could write on reports that were never shuffled, so
the claim is signed: the shuffler holds an Ed25519 key (``privclust local
shuffler-key``) whose public half the protocol names (``shuffler_key``, part of
its fingerprint), and a shuffled batch ends with the signature of
SHA-256(``_TAG`` || header || records).  The server verifies it with the key the
protocol names before it releases anything; a batch without a valid signature
is refused whole.

The hash is taken as the batch streams past, so a batch larger than memory is
signed and verified in one pass.  A local protocol (no shuffle) needs no mark:
each report is epsilon-LDP wherever it went, so its shuffled batches may go
unsigned (a trailer of zeros) and its server does not check them.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

__all__ = ["ShufflerKey", "BatchDigest", "SIGNATURE_BYTES", "UNSIGNED", "verify_batch"]

SIGNATURE_BYTES = 64  # an Ed25519 signature
# The encodings of Ed25519's eight points of small order, the sign bit cleared (as libsodium's blocklist): against
# such a "public key" a signature anyone can write verifies (R the identity, S = 0: for every message when the key
# is the identity, for one in eight or fewer otherwise), so no one need hold it.  y = p and p + 1 are the
# non-canonical encodings of 0 and 1.
_SMALL_ORDER = frozenset(
    bytes.fromhex(encoding)
    for encoding in (
        "0000000000000000000000000000000000000000000000000000000000000000",
        "0100000000000000000000000000000000000000000000000000000000000000",
        "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
        "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
        "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
        "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
        "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    )
)
_FIELD = 2**255 - 19
UNSIGNED = bytes(SIGNATURE_BYTES)  # a local protocol's shuffled batch: nothing to vouch for
_TAG = b"privclust shuffled reports, format 3\0"  # the report format (protocol.FORMAT) whose batches are signed


class BatchDigest:
    """The SHA-256 of what a shuffled batch holds before its signature (header, then records), fed as it streams."""

    def __init__(self):
        self._hash = hashlib.sha256(_TAG)

    def update(self, data) -> None:
        self._hash.update(data)

    def digest(self) -> bytes:
        return self._hash.digest()


class ShufflerKey:
    """The shuffler's private key (Ed25519, from ``cryptography``)."""

    def __init__(self, private):
        self._private = private

    @classmethod
    def generate(cls) -> "ShufflerKey":
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        return cls(Ed25519PrivateKey.generate())

    @classmethod
    def load(cls, path: str | Path) -> "ShufflerKey":
        """The key in the PEM file at ``path`` (as :meth:`private_pem` writes it), refused if it is not one."""
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
        from cryptography.hazmat.primitives.serialization import load_pem_private_key

        try:
            private = load_pem_private_key(Path(path).read_bytes(), password=None)
        except OSError as exc:
            raise ValueError(f"cannot read the shuffler's key {path}: {exc.strerror or exc}") from None
        except (ValueError, TypeError):
            private = None
        if not isinstance(private, Ed25519PrivateKey):
            raise ValueError(
                f"{path} is not a shuffler's key (an unencrypted Ed25519 PEM key, as privclust local shuffler-key "
                "writes)"
            )
        return cls(private)

    def private_pem(self) -> bytes:
        from cryptography.hazmat.primitives import serialization

        return self._private.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )

    @property
    def public_hex(self) -> str:
        """The public half, as a protocol names it: 64 hex digits."""
        from cryptography.hazmat.primitives import serialization

        raw = self._private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        return raw.hex()

    def sign(self, digest: BatchDigest) -> bytes:
        return self._private.sign(digest.digest())


def check_public_key(public_hex: str) -> None:
    """Refuse a protocol's ``shuffler_key`` unless it is an Ed25519 public key as 64 lowercase hex digits (one
    spelling: the shuffler compares keys as the protocol states them) whose point is not of small order and is
    encoded canonically -- a key whose signatures someone must hold the private half to make.  The value refused
    is never repeated (it may be a private key given by mistake)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    shape = "an Ed25519 public key as 64 lowercase hex digits (the .pub file privclust local shuffler-key writes)"
    if not isinstance(public_hex, str) or len(public_hex) != 64 or public_hex.strip("0123456789abcdef"):
        raise ValueError(f"shuffler_key must be {shape}")
    raw = bytes.fromhex(public_hex)
    point = bytes([*raw[:31], raw[31] & 0x7F])
    if point in _SMALL_ORDER or int.from_bytes(point, "little") >= _FIELD:
        raise ValueError(
            "shuffler_key is a weak Ed25519 key (a point of small order, or a non-canonical encoding): signatures "
            "for it can be made without any private key; make a key with privclust local shuffler-key"
        )
    try:
        Ed25519PublicKey.from_public_bytes(raw)
    except ValueError:
        raise ValueError(f"shuffler_key must be {shape}") from None


def verify_batch(public_hex: str, digest: BatchDigest, signature: bytes) -> None:
    """Refuse a shuffled batch whose ``signature`` is not the shuffler's on ``digest``."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        Ed25519PublicKey.from_public_bytes(bytes.fromhex(public_hex)).verify(signature, digest.digest())
    except InvalidSignature:
        raise ValueError(
            "this batch does not carry the signature of the shuffler the protocol names: it did not come whole "
            "from that shuffler (privclust local shuffle --key), so its reports may not have been shuffled; "
            "nothing was tallied"
        ) from None

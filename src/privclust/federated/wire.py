"""Message framing for the federated protocol.

A frame is ``MAGIC (4 bytes) | kind (1 byte) | header length (4) | payload length (8)``
followed by a UTF-8 JSON header and a binary payload (ring elements as
little-endian uint64).  Lengths are checked against a limit before anything is
read, so an oversized or malformed frame is refused without buffering it.
"""

from __future__ import annotations

import json
import socket
import struct
import time

import numpy as np

__all__ = [
    "ProtocolError",
    "FederatedAbort",
    "send",
    "send_abort",
    "receive",
    "frame_size",
    "parse_frame",
    "Kind",
    "DEFAULT_MAX_BYTES",
]

MAGIC = b"PCF1"
_PREFIX = struct.Struct(">4sBIQ")
DEFAULT_MAX_BYTES = 64 * 2**20


class ProtocolError(RuntimeError):
    """A peer broke the protocol (malformed, oversized, replayed or out-of-order message)."""


class FederatedAbort(RuntimeError):
    """The run was aborted; nothing further is released.  ``privacy_spent``: what the rounds released before
    the abort spent, in the record of whoever raised it (the server's ledger, or the party's), or ``None``."""

    def __init__(self, message: str, privacy_spent: dict | None = None):
        super().__init__(message)
        self.privacy_spent = privacy_spent


def aborted_after(message: str, rounds: int, spent: dict | None, what: str = "were released") -> FederatedAbort:
    """The abort of a run after ``rounds`` rounds that ``what`` (were released; or, at a party, carried its sums,
    which the server may have released), spending ``spent``: its message says so."""
    if rounds and spent is not None:
        message += f"; before it, {rounds} round(s) {what}, spending epsilon {spent['epsilon']:.6g}, delta {spent['delta']:.3g}"
    return FederatedAbort(message, privacy_spent=spent)


class Kind:
    HELLO, WELCOME, PUBKEY, PUBKEYS, SHARES, SHARE, ROUND, RESULT, DONE, ABORT, UNMASK, REVEAL = range(1, 13)
    NAMES = {
        1: "HELLO",
        2: "WELCOME",
        3: "PUBKEY",
        4: "PUBKEYS",
        5: "SHARES",
        6: "SHARE",
        7: "ROUND",
        8: "RESULT",
        9: "DONE",
        10: "ABORT",
        11: "UNMASK",
        12: "REVEAL",
    }


def send(sock: socket.socket, kind: int, header: dict, payload: bytes = b"") -> int:
    """Send one frame; returns the bytes written."""
    head = json.dumps(header, separators=(",", ":")).encode()
    frame = _PREFIX.pack(MAGIC, kind, len(head), len(payload)) + head + payload
    sock.sendall(frame)
    return len(frame)


def send_abort(sock: socket.socket, reason: str, timeout: float = 2.0) -> None:
    """Tell an authenticated peer the run is aborted, if its connection still works; waits at most
    ``timeout`` seconds (a peer that does not read must not hold anyone up)."""
    try:
        sock.settimeout(timeout)
        send(sock, Kind.ABORT, {"reason": reason})
    except (OSError, ValueError):
        pass


def frame_size(prefix: bytes, max_bytes: int, expect: int | None = None) -> int:
    """Total size of the frame starting with ``prefix`` (at least PREFIX_SIZE bytes), checked first."""
    magic, kind, head_len, payload_len = _PREFIX.unpack(prefix[: _PREFIX.size])
    if magic != MAGIC:
        raise ProtocolError("malformed frame: bad magic bytes (not a privclust federated peer?)")
    if kind not in Kind.NAMES:
        raise ProtocolError(f"malformed frame: unknown message kind {kind}")
    if head_len + payload_len > max_bytes:
        raise ProtocolError(f"oversized message: {head_len + payload_len} bytes, limit {max_bytes}")
    if expect is not None and kind != expect:
        raise ProtocolError(f"expected {Kind.NAMES[expect]}, got {Kind.NAMES[kind]}")
    return _PREFIX.size + head_len + payload_len


def parse_frame(frame: bytes):
    """(kind, header, payload) of one complete frame already checked by ``frame_size``."""
    _, kind, head_len, _ = _PREFIX.unpack(frame[: _PREFIX.size])
    try:
        header = json.loads(frame[_PREFIX.size : _PREFIX.size + head_len]) if head_len else {}
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        raise ProtocolError("malformed frame: header is not JSON") from None
    if not isinstance(header, dict):
        raise ProtocolError("malformed frame: header is not an object")
    return kind, header, frame[_PREFIX.size + head_len :]


PREFIX_SIZE = _PREFIX.size


def _read_exact(sock: socket.socket, size: int, deadline: float | None = None) -> bytes:
    chunks, left = [], size
    while left:
        try:
            if deadline is not None:  # a peer trickling bytes must not stretch the wait
                sock.settimeout(max(deadline - time.monotonic(), 0.001))
            chunk = sock.recv(min(left, 1 << 20))
        except (socket.timeout, TimeoutError):
            raise ProtocolError("timed out waiting for a peer (did a party drop out?)") from None
        if not chunk:
            raise ProtocolError("the peer closed the connection")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def receive(
    sock: socket.socket, max_bytes: int = DEFAULT_MAX_BYTES, expect: int | None = None, deadline: float | None = None
):
    """(kind, header, payload, bytes read) of the next frame; ABORT frames raise FederatedAbort.

    ``deadline`` (``time.monotonic()``) bounds the whole frame, not each read."""
    magic, kind, head_len, payload_len = _PREFIX.unpack(_read_exact(sock, _PREFIX.size, deadline))
    if magic != MAGIC:
        raise ProtocolError("malformed frame: bad magic bytes (not a privclust federated peer?)")
    if kind not in Kind.NAMES:
        raise ProtocolError(f"malformed frame: unknown message kind {kind}")
    if head_len + payload_len > max_bytes:
        raise ProtocolError(f"oversized message: {head_len + payload_len} bytes, limit {max_bytes}")
    body = _read_exact(sock, head_len + payload_len, deadline) if head_len + payload_len else b""  # one read
    try:
        header = json.loads(body[:head_len]) if head_len else {}
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        raise ProtocolError("malformed frame: header is not JSON") from None
    if not isinstance(header, dict):
        raise ProtocolError("malformed frame: header is not an object")
    payload = body[head_len:]
    if kind == Kind.ABORT:
        raise FederatedAbort(str(header.get("reason", "aborted by a peer")))
    if expect is not None and kind != expect:
        raise ProtocolError(f"expected {Kind.NAMES[expect]}, got {Kind.NAMES[kind]}")
    return kind, header, payload, _PREFIX.size + head_len + payload_len


def ring_payload(values: np.ndarray) -> bytes:
    return np.ascontiguousarray(values, dtype="<u8").tobytes()


def ring_values(payload: bytes, count: int) -> np.ndarray:
    if len(payload) != 8 * count:
        raise ProtocolError(f"malformed payload: {len(payload)} bytes for {count} ring elements")
    return np.frombuffer(payload, dtype="<u8").astype(np.uint64)

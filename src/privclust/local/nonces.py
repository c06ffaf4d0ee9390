"""The reports' nonces, kept to refuse a report counted twice: in memory (:class:`Nonces`) or on disk (:class:`NonceSpill`).

Every report carries a 16-byte nonce drawn by its device from the OS CSPRNG, independent of its point
(``local.protocol``).  A nonce seen twice means a batch given twice or replayed reports, which the server
and the shuffler refuse.  The nonces say nothing about anyone's point, so keeping them (in memory or in a
temporary file) and the counts in a refusal leak nothing; still, the files are private and nameless.

**Why on disk, and how.**  The nonces are 16 of a report's 27 bytes: holding them all is 0.6x a file of
reports (1.6 GB at 10^8 reports), more than a streamed server may take.  Sorting them on disk would need
several passes; instead :class:`NonceSpill` splits them into parts by a hash of the nonce -- two equal
nonces always land in the same part -- each part a nameless temporary file of about ``PART_BYTES``, and
looks for repeats one part at a time: one pass to write, one to read, memory one part.  The hash is a
multiply-shift hash with secret odd multipliers drawn per spill, so reports crafted to fall into one part
(to make it large) cannot be aimed without knowing them.
"""

from __future__ import annotations

import os
import tempfile

import numpy as np

__all__ = ["Nonces", "NonceSpill", "repeats_within", "PART_BYTES"]

NONCE = np.dtype("V16")
PART_BYTES = 16 * 2**20  # a spill's parts are sized for about this many bytes of nonces each
MAX_PARTS = 256  # beyond this many parts (4 GiB of nonces, 2.7e8 reports) the parts grow instead


def _words(nonces: np.ndarray) -> np.ndarray:
    """The nonces as (n, 2) little-endian 64-bit words."""
    return np.ascontiguousarray(nonces, dtype=NONCE).view("<u8").reshape(-1, 2)


def repeats_within(nonces: np.ndarray) -> int:
    """How many of ``nonces`` repeat an earlier one of them (the copies beyond the first).

    Sorted by their first 8 bytes; only the nonces tied there are compared in full."""
    if not nonces.size:
        return 0
    keys = _words(nonces)[:, 0]
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    tied = np.zeros(keys.size, dtype=bool)
    same = sorted_keys[1:] == sorted_keys[:-1]
    tied[1:] |= same
    tied[:-1] |= same
    candidates = nonces[order[tied]]
    return int(candidates.size - np.unique(candidates).size)


class Nonces:
    """The nonces of every report received so far, in memory, to refuse one seen before (exact, 16 bytes compared).

    Kept as sorted runs merged like a binary counter (O(n log n) over any number of batches); a batch is
    looked up by its first 8 bytes and the rare hits compared in full."""

    def __init__(self):
        self._runs: list[tuple[np.ndarray, np.ndarray]] = []  # (first 8 bytes sorted, the nonces in that order)

    def seen(self, nonces: np.ndarray) -> int:
        """How many of ``nonces`` equal one received before."""
        if not nonces.size:
            return 0
        keys = _words(nonces)[:, 0]
        count = 0
        for run_keys, run_nonces in self._runs:
            at = np.minimum(np.searchsorted(run_keys, keys), run_keys.size - 1)
            hit = run_keys[at] == keys
            if np.any(hit):
                count += int(np.isin(nonces[hit], run_nonces[np.isin(run_keys, keys[hit])]).sum())
        return count

    def repeats(self, nonces: np.ndarray) -> int:
        """How many of ``nonces`` repeat one of the batch itself or one received before."""
        return repeats_within(nonces) + self.seen(nonces)

    def add(self, nonces: np.ndarray) -> None:
        if not nonces.size:
            return
        keys = _words(nonces)[:, 0]
        order = np.argsort(keys, kind="stable")
        self._runs.append((keys[order], np.asarray(nonces)[order]))
        while len(self._runs) > 1 and self._runs[-2][0].size <= 2 * self._runs[-1][0].size:
            (k2, n2), (k1, n1) = self._runs.pop(), self._runs.pop()
            keys, nonces = np.concatenate([k1, k2]), np.concatenate([n1, n2])
            order = np.argsort(keys, kind="stable")
            self._runs.append((keys[order], nonces[order]))


class NonceSpill:
    """Nonces of more reports than memory should hold, in parts on disk (see the module docstring).

    Nonces are *staged* as a stream passes (:meth:`stage`), checked once it has passed
    (:meth:`staged_repeats`), then kept (:meth:`commit`) or dropped (:meth:`rollback`), so a refused
    stream leaves the spill as it was.  ``capacity``: the most nonces it will hold (public: a protocol's
    users, or the reports' count), which sizes the parts.  The parts are ``tempfile.TemporaryFile``-s in
    ``scratch`` (default ``TMPDIR``): mode 0600, nameless, gone when closed or when the process ends."""

    def __init__(self, capacity: int, scratch=None, part_bytes: int | None = None):
        part_bytes = PART_BYTES if part_bytes is None else int(part_bytes)
        parts = -(-NONCE.itemsize * max(1, int(capacity)) // part_bytes)
        self._files: list = [None] * int(min(MAX_PARTS, max(1, parts)))  # opened on first write
        self._committed = [0] * len(self._files)  # bytes of each part that hold kept nonces
        self._multipliers = np.frombuffer(os.urandom(16), dtype="<u8") | np.uint64(1)
        self._scratch = scratch
        self.staged = 0

    @property
    def parts(self) -> int:
        return len(self._files)

    def _parts_of(self, nonces: np.ndarray) -> np.ndarray:
        words = _words(nonces)
        with np.errstate(over="ignore"):  # multiply-shift: wrapping uint64 arithmetic
            mixed = words[:, 0] * self._multipliers[0] + words[:, 1] * self._multipliers[1]
        return ((mixed >> np.uint64(32)) % np.uint64(self.parts)).astype(np.intp)

    def _file(self, i: int):
        if self._files[i] is None:
            self._files[i] = tempfile.TemporaryFile(dir=self._scratch, prefix=".privclust-nonces-")
        return self._files[i]

    def stage(self, nonces: np.ndarray) -> None:
        """Append ``nonces`` to their parts (not checked yet)."""
        nonces = np.asarray(nonces, dtype=NONCE)
        if not nonces.size:
            return
        parts = self._parts_of(nonces)
        order = np.argsort(parts, kind="stable")
        ends = np.searchsorted(parts[order], np.arange(self.parts + 1))
        ordered = np.ascontiguousarray(nonces[order])
        for i in np.flatnonzero(np.diff(ends)):
            part = self._file(i)
            part.seek(0, os.SEEK_END)
            part.write(ordered[ends[i] : ends[i + 1]])
        self.staged += nonces.size

    def _read(self, i: int, committed_only: bool = False) -> np.ndarray:
        if self._files[i] is None:
            return np.zeros(0, dtype=NONCE)
        part = self._files[i]
        part.seek(0)
        data = part.read(self._committed[i]) if committed_only else part.read()
        return np.frombuffer(data, dtype=NONCE)

    def staged_repeats(self) -> int:
        """How many staged nonces repeat another staged one or a kept one (the kept ones hold no repeats)."""
        return sum(repeats_within(self._read(i)) for i in range(self.parts) if self._files[i] is not None)

    def seen(self, nonces: np.ndarray) -> int:
        """How many of ``nonces`` equal a kept one (for a batch checked in memory beside the spill)."""
        nonces = np.asarray(nonces, dtype=NONCE)
        if not nonces.size or not any(self._committed):
            return 0
        parts = self._parts_of(nonces)
        return sum(
            int(np.isin(nonces[parts == i], self._read(i, committed_only=True)).sum())
            for i in np.unique(parts)
            if self._committed[i]
        )

    def commit(self) -> None:
        """Keep the staged nonces."""
        for i, part in enumerate(self._files):
            if part is not None:
                self._committed[i] = part.seek(0, os.SEEK_END)
        self.staged = 0

    def rollback(self) -> None:
        """Drop the staged nonces: the spill holds the kept ones only, as before the stream."""
        for i, part in enumerate(self._files):
            if part is not None:
                part.truncate(self._committed[i])
        self.staged = 0

    def close(self) -> None:
        for part in self._files:
            if part is not None:
                part.close()
        self._files = [None] * self.parts
        self._committed = [0] * self.parts

    def __enter__(self) -> "NonceSpill":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

"""A cryptographically secure source for the devices' coins and the shuffler's permutation.

A numpy ``Generator`` is a fast statistical generator (PCG64), not a cryptographic one: seeding it from
OS entropy hides the seed, but its output is predictable from earlier output.  A device's coin flips and
the shuffler's permutation are what the local and shuffle guarantees rest on, so unseeded they come from
the operating system's CSPRNG (``os.urandom``), drawn in bulk and converted with numpy.

:class:`SecureRandom` offers the few ``Generator`` methods the randomizers use -- ``random``,
``integers``, ``choice`` and ``permutation`` -- with exact laws: uniform doubles on the 2^-53 grid of
[0, 1), integers by rejection (no modulo bias), a permutation by sorting distinct uniform 64-bit keys
(i.i.d. keys, conditioned on being distinct, rank every order equally often).  The seeded path (a numpy
``Generator`` passed in) stays for experiments and tests, which say they are not private.
"""

from __future__ import annotations

import os

import numpy as np

__all__ = ["SecureRandom"]

_U64 = np.dtype("<u8")


def _words(n: int) -> np.ndarray:
    """``n`` uniform 64-bit words from the OS CSPRNG."""
    return np.frombuffer(os.urandom(8 * int(n)), dtype=_U64).copy()


class SecureRandom:
    """The subset of ``numpy.random.Generator`` the device randomizers and the shuffler use, from ``os.urandom``."""

    def random(self, size=None):
        n = 1 if size is None else int(np.prod(size))
        out = (_words(n) >> np.uint64(11)).astype(np.float64) * 2.0**-53
        return float(out[0]) if size is None else out.reshape(size)

    def _below(self, high: np.ndarray) -> np.ndarray:
        """One uniform integer in [0, high_i) per entry of ``high`` (uint64, every entry >= 1), by rejection."""
        high = np.asarray(high, dtype=_U64)
        # 2^64 mod h, computed in wrapping uint64 arithmetic: (2^64 - h) mod h.
        limit = np.uint64(0) - (np.uint64(0) - high) % high  # the largest multiple of h below 2^64 (0: all)
        out = np.empty(high.shape, dtype=_U64)
        todo = np.arange(high.size)
        while todo.size:
            words = _words(todo.size)
            ok = (limit[todo] == 0) | (words < limit[todo])
            out[todo[ok]] = words[ok] % high[todo[ok]]
            todo = todo[~ok]
        return out

    def integers(self, low, high=None, size=None):
        if high is None:
            low, high = 0, low
        low, high = int(low), int(high)
        if high <= low:
            raise ValueError("high must be above low")
        n = 1 if size is None else int(np.prod(size))
        out = self._below(np.full(n, high - low, dtype=_U64)).astype(np.int64) + low
        return int(out[0]) if size is None else out.reshape(size)

    def choice(self, a, size=None, p=None):
        if p is None:
            return self.integers(0, int(a), size)
        cumulative = np.cumsum(np.asarray(p, dtype=np.float64))
        u = self.random(size) * cumulative[-1]
        return np.minimum(np.searchsorted(cumulative, u, side="right"), len(cumulative) - 1)

    def permutation(self, n: int) -> np.ndarray:
        while True:
            keys = _words(int(n))
            order = np.argsort(keys, kind="stable")
            if n < 2 or np.all(keys[order[1:]] != keys[order[:-1]]):
                return order

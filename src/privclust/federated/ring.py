"""Fixed-point encoding in the ring Z_(2^64).

A real value v becomes round(v * 2^q) as a two's-complement 64-bit integer;
sums of encodings wrap modulo 2^64 and decode exactly as long as the true sum
stays within +-2^63 / 2^q.  Encoding keeps one bit of headroom (+-2^62 / 2^q = 4.4e12 in the normalised
units, q = 20). Points lie in [-1, 1]^d and every released sum is bounded by
n * 2 sqrt(d), so for d <= 1024 any total n up to 6.8e10 rows fits, counts
included -- far beyond the seed's Z_(2^32), q = 16, which overflows at 32,768
rows.  Encoding refuses values that could come near the limit.
"""

from __future__ import annotations

import numpy as np

__all__ = ["FRACTION_BITS", "LIMIT", "encode", "decode", "RingOverflowError"]

FRACTION_BITS = 20
SCALE = float(2**FRACTION_BITS)
LIMIT = 2.0**62 / SCALE  # headroom of one bit for the sum of the parties and the noise


class RingOverflowError(ValueError):
    """A value is too large for the fixed-point ring."""


def encode(values: np.ndarray) -> np.ndarray:
    values = np.asarray(values, dtype=np.float64)
    if values.size and not np.all(np.abs(values) < LIMIT):
        raise RingOverflowError(f"a value exceeds the ring's limit of +-{LIMIT:.3g}; too many rows for one run")
    return np.rint(values * SCALE).astype(np.int64).view(np.uint64)


def decode(elements: np.ndarray) -> np.ndarray:
    return np.asarray(elements, dtype=np.uint64).view(np.int64).astype(np.float64) / SCALE

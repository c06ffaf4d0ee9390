"""Shamir secret sharing over the prime field GF(2^521 - 1), for 32-byte secrets.

No well-kept Python library shares 32-byte secrets over a prime field (pycryptodome's
``Shamir`` takes 16 bytes in GF(2^128); ``cryptography`` has none), and the scheme is
a few lines: a random polynomial of degree ``threshold - 1`` whose constant term is
the secret, evaluated at x = 1 .. n; any ``threshold`` points give the secret back by
Lagrange interpolation at 0, fewer reveal nothing (every secret is equally likely).
The Mersenne prime 2^521 - 1 exceeds every 256-bit secret.
"""

from __future__ import annotations

import secrets

__all__ = ["PRIME", "split", "combine", "ShareError"]

PRIME = 2**521 - 1


class ShareError(ValueError):
    """Shares that cannot give a secret (too few, duplicated, out of the field)."""


def split(secret: bytes, parties: int, threshold: int) -> dict[int, int]:
    """Shares of ``secret`` for x = 1 .. ``parties``: ``{x: y}``; any ``threshold`` of them recover it."""
    if not 1 <= threshold <= parties:
        raise ShareError(f"threshold {threshold} must lie in 1 .. {parties}")
    value = int.from_bytes(secret, "big")
    if value >= PRIME:
        raise ShareError("secret too large for the field")
    coefficients = [value] + [secrets.randbelow(PRIME) for _ in range(threshold - 1)]
    shares = {}
    for x in range(1, parties + 1):
        y = 0
        for c in reversed(coefficients):  # Horner
            y = (y * x + c) % PRIME
        shares[x] = y
    return shares


def combine(shares: dict[int, int], length: int = 32) -> bytes:
    """The secret (``length`` bytes) from ``{x: y}`` shares; exactly the threshold's number must be given."""
    if not shares:
        raise ShareError("no shares")
    for x, y in shares.items():
        if not (isinstance(x, int) and isinstance(y, int) and 0 < x < PRIME and 0 <= y < PRIME):
            raise ShareError("a share lies outside the field")
    secret = 0
    for xi, yi in shares.items():
        numerator, denominator = 1, 1
        for xj in shares:
            if xj != xi:
                numerator = numerator * (-xj) % PRIME
                denominator = denominator * (xi - xj) % PRIME
        secret = (secret + yi * numerator * pow(denominator, -1, PRIME)) % PRIME
    if secret.bit_length() > 8 * length:
        raise ShareError("the shares do not lie on one polynomial of a secret this size")
    return secret.to_bytes(length, "big")

"""Local randomizers: frequency oracles for bucket ids, and a one-coordinate randomizer for value vectors.

Every randomizer here maps one user's private value to one report and is
epsilon-LDP by construction, whatever the data; the server turns many reports
into unbiased estimates.

**Frequency oracles** (a value v in a public domain [0, D)):

* :class:`GeneralizedRR` (k-ary randomized response) for small domains: report
  v with probability p = e^eps / (e^eps + D - 1), else a uniform other value.
  The estimate of v's count is (#reports = v - n q) / (p - q), q = 1 / (e^eps + D - 1);
  its variance per user is about q (1 - q) / (p - q)^2.
* :class:`LocalHashing` -- optimal local hashing (Wang, Blocki, Li, Jha, USENIX
  Security 2017) -- for large domains: the user draws one of S public hash
  functions h_s: [D] -> [g], g = round(e^eps) + 1, and reports (s, y) with y =
  h_s(v) with probability p = e^eps / (e^eps + g - 1), else a uniform other
  value of [g].  For any hash, the report's distribution changes by a factor at
  most p / q = e^eps when v changes: eps-LDP.  The estimate of v's count is
  (#{reports with h_s(v) = y} - n / g) / (p - 1/g), with variance per user about
  4 e^eps / (e^eps - 1)^2 whatever D is.  Why this oracle: its variance is the
  best known for large domains at every epsilon (it matches the lower bound up
  to a constant, and beats Hadamard response's 1-bit variance
  ((e^eps + 1) / (e^eps - 1))^2 by a factor e^eps / 4 at the larger epsilons the
  shuffle model uses); the usual objection, decoding cost n x D, goes away with a
  public family of S hash functions: the server first tallies the reports into
  an S x g table (one pass over n reports), then each candidate costs S look-ups,
  so decoding is O(n + S D) instead of O(n D).  S is public and chosen large
  enough (``hash_functions``) that collisions of heavy values under a shared
  hash add little variance.

Wang et al. recommend randomized response when D < 3 e^eps + 2; :func:`frequency_oracle` chooses so.

**Value vectors** (:class:`OneCoordinate`): a value row in [-1, 1]^w is reported as
one uniformly chosen coordinate j and one bit b, with P[b = +1] = 1/2 + x_j (e^eps - 1) / (2 (e^eps + 1)):
eps-LDP (the bit's odds change by at most e^eps), and w C b e_j with C = (e^eps + 1) / (e^eps - 1) is
an unbiased estimate of x (Nguyen, Xiao, Yang, Hui, Shin, Shin 2016, "Harmony").  A report is a few bytes.

The hash family h_s(v) = ((a_s v_hi + c_s v_lo + b_s) mod P) mod g, with P = 2^31 - 1 (prime),
v = v_hi 2^31 + v_lo (bucket ids up to 2^62) and a_s, c_s, b_s uniform in [0, P), is universal: two ids
collide with probability 1/g up to rounding (multiply-shift families are only 2-approximately universal,
which biases the estimates of small, nearby bucket ids).  It is drawn from a public seed; privacy does not
depend on its quality, only accuracy does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._validation import positive_finite

__all__ = [
    "GeneralizedRR",
    "LocalHashing",
    "OneCoordinate",
    "frequency_oracle",
    "hash_functions_for",
    "DEFAULT_HASH_FUNCTIONS",
]

DEFAULT_HASH_FUNCTIONS = 256
MAX_HASH_FUNCTIONS = 65536  # hash indices travel as 16-bit integers
SPREAD = 8  # the sizing of the hash family assumes a heavy value holds at most 1/SPREAD of the reports
PRIME = 2**31 - 1
_DECODE_CELLS = 2**22  # candidates x hash functions evaluated at once while decoding (memory stays ~32 MiB)


@dataclass(frozen=True)
class GeneralizedRR:
    """k-ary randomized response over [0, domain)."""

    domain: int
    epsilon: float

    @property
    def p(self) -> float:
        return math.exp(self.epsilon) / (math.exp(self.epsilon) + self.domain - 1)

    @property
    def q(self) -> float:
        return 1.0 / (math.exp(self.epsilon) + self.domain - 1)

    def randomize(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """One report (a value of [0, domain)) per value."""
        values = np.asarray(values, dtype=np.int64)
        keep = rng.random(values.size) < self.p
        other = rng.integers(0, self.domain - 1, size=values.size)
        other += other >= values  # a uniform value other than the true one
        return np.where(keep, values, other)

    def tally(self, reports: np.ndarray) -> np.ndarray:
        return np.bincount(np.asarray(reports, dtype=np.int64), minlength=self.domain).astype(np.float64)

    def estimate(self, table: np.ndarray, total, candidates: np.ndarray) -> np.ndarray:
        """Unbiased sums for ``candidates`` from a table indexed by report value: report counts (``total``
        the number of reports) or per-report value sums in trailing columns (``total`` their column sums)."""
        return (table[np.asarray(candidates, dtype=np.int64)] - np.asarray(total) * self.q) / (self.p - self.q)

    def weights(self, reports: np.ndarray, candidates: np.ndarray) -> np.ndarray:
        """Per report and candidate the unbiased indicator weight (its mean is 1 if the user's value is it)."""
        hit = np.asarray(reports)[:, None] == np.asarray(candidates)[None, :]
        return (hit - self.q) / (self.p - self.q)

    def variance(self) -> float:
        """Variance per user of a count estimate (for a value the user does not hold)."""
        return self.q * (1.0 - self.q) / (self.p - self.q) ** 2


@dataclass(frozen=True)
class LocalHashing:
    """Optimal local hashing with a public family of ``hash_functions`` hashes drawn from ``seed``."""

    domain: int
    epsilon: float
    seed: int
    hash_functions: int = DEFAULT_HASH_FUNCTIONS

    @property
    def g(self) -> int:
        return max(2, int(round(math.exp(self.epsilon))) + 1)

    @property
    def p(self) -> float:
        return math.exp(self.epsilon) / (math.exp(self.epsilon) + self.g - 1)

    def _family(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        rng = np.random.default_rng(np.random.SeedSequence([self.seed, 0x1EE7]))
        return tuple(rng.integers(0, PRIME, size=(3, self.hash_functions), dtype=np.uint64))

    def hash(self, which: np.ndarray, values: np.ndarray) -> np.ndarray:
        """h_which(values), elementwise (broadcasting), in [0, g); values in [0, 2^62)."""
        a, c, b = self._family()
        x = np.asarray(values).astype(np.uint64)
        high, low = x >> np.uint64(31), x & np.uint64(PRIME)
        mixed = (a[which] * high + c[which] * low + b[which]) % np.uint64(PRIME)  # < 2^63: no overflow
        return (mixed % np.uint64(self.g)).astype(np.int64)

    def randomize(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Reports as (hash index, y) pairs: an (n, 2) int array."""
        values = np.asarray(values, dtype=np.int64)
        which = rng.integers(0, self.hash_functions, size=values.size)
        hashed = self.hash(which, values)
        keep = rng.random(values.size) < self.p
        other = rng.integers(0, self.g - 1, size=values.size)
        other += other >= hashed
        return np.stack([which, np.where(keep, hashed, other)], axis=1)

    def tally(self, reports: np.ndarray) -> np.ndarray:
        """The S x g table of report counts: all the server keeps."""
        reports = np.asarray(reports, dtype=np.int64).reshape(-1, 2)
        flat = np.bincount(reports[:, 0] * self.g + reports[:, 1], minlength=self.hash_functions * self.g)
        return flat.reshape(self.hash_functions, self.g).astype(np.float64)

    def estimate(self, table: np.ndarray, total, candidates: np.ndarray) -> np.ndarray:
        """Unbiased sums for ``candidates`` from the S x g table (trailing columns: per-report value sums,
        with ``total`` their column sums; else counts, with ``total`` the number of reports)."""
        candidates = np.asarray(candidates, dtype=np.int64)
        rest = table.shape[2:]
        support = np.empty((candidates.size, *rest))
        rows = np.arange(self.hash_functions)[:, None]
        step = max(1, _DECODE_CELLS // (self.hash_functions * max(1, int(np.prod(rest)))))
        for start in range(0, candidates.size, step):
            part = candidates[start : start + step]
            support[start : start + step] = table[rows, self.hash(rows, part[None, :])].sum(axis=0)
        return (support - np.asarray(total) / self.g) / (self.p - 1.0 / self.g)

    def weights(self, reports: np.ndarray, candidates: np.ndarray) -> np.ndarray:
        reports = np.asarray(reports, dtype=np.int64).reshape(-1, 2)
        hit = self.hash(reports[:, :1], np.asarray(candidates)[None, :]) == reports[:, 1:2]
        return (hit - 1.0 / self.g) / (self.p - 1.0 / self.g)

    def variance(self) -> float:
        q = 1.0 / self.g
        return q * (1.0 - q) / (self.p - q) ** 2

    def collision_variance(self, squared_counts: float) -> float:
        """The variance an estimate gets from other values colliding with it under the shared hash functions,
        given the sum of their squared counts: a heavy value moves every candidate that one of its functions
        maps onto its own hash, for all of its users at once."""
        q = 1.0 / self.g
        other = (1.0 - self.p) / (self.g - 1)
        return squared_counts * q * (1.0 - q) * ((self.p - other) / (self.p - q)) ** 2 / self.hash_functions


def hash_functions_for(users: float, epsilon: float) -> int:
    """How many public hash functions local hashing uses for about ``users`` reports at ``epsilon``.

    With S shared functions, heavy values collide with a given candidate under the same function for many
    users at once, adding about sum_v f_v^2 / (g S) <= n max_v f_v / (g S) to an estimate's variance, against
    the oracle's own n v, v = q (1 - q) / (p - q)^2.  With no value holding more than 1/SPREAD of the
    reports, S >= n / (SPREAD g v) keeps the first below the second.  (Small domains, where values are
    most concentrated, use randomized response and no hash at all.)  The server's decoding costs S per
    candidate."""
    g = max(2, int(round(math.exp(epsilon))) + 1)
    p = math.exp(epsilon) / (math.exp(epsilon) + g - 1)
    v = (1.0 / g) * (1.0 - 1.0 / g) / (p - 1.0 / g) ** 2
    wanted = max(DEFAULT_HASH_FUNCTIONS, float(users) / (SPREAD * g * v))
    return int(min(MAX_HASH_FUNCTIONS, 2 ** math.ceil(math.log2(wanted))))


def frequency_oracle(domain: int, epsilon: float, seed: int, users: float = 0.0):
    """Randomized response for small domains (D < 3 e^eps + 2, Wang et al.), optimal local hashing otherwise;
    ``users`` is the expected number of reports (public), which sizes local hashing's hash family."""
    epsilon = positive_finite("a local randomizer's epsilon", epsilon)
    if domain < 2:
        raise ValueError("a frequency oracle needs a domain of at least 2 values")
    if domain < 3.0 * math.exp(epsilon) + 2.0:
        return GeneralizedRR(int(domain), epsilon)
    if domain > 2**62:
        raise ValueError(f"a domain of {domain} values is too large for local hashing (at most 2^62)")
    return LocalHashing(int(domain), epsilon, int(seed), hash_functions_for(users, epsilon))


@dataclass(frozen=True)
class OneCoordinate:
    """One coordinate and one bit per report: an unbiased eps-LDP estimate of a row in [-1, 1]^width."""

    width: int
    epsilon: float

    @property
    def scale(self) -> float:
        """C = (e^eps + 1) / (e^eps - 1): a report's bit is worth width * C."""
        return (math.exp(self.epsilon) + 1.0) / math.expm1(self.epsilon)

    def randomize(self, rows: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """(coordinate, bit in {-1, +1}) per row: an (n, 2) int array."""
        rows = np.clip(np.asarray(rows, dtype=np.float64).reshape(-1, self.width), -1.0, 1.0)
        j = rng.integers(0, self.width, size=rows.shape[0])
        up = 0.5 + rows[np.arange(rows.shape[0]), j] / (2.0 * self.scale)
        bit = np.where(rng.random(rows.shape[0]) < up, 1, -1)
        return np.stack([j, bit], axis=1)

    def estimates(self, reports: np.ndarray) -> np.ndarray:
        """Each report's unbiased estimate of its row: (n, width), one non-zero per row."""
        reports = np.asarray(reports, dtype=np.int64).reshape(-1, 2)
        out = np.zeros((reports.shape[0], self.width))
        out[np.arange(reports.shape[0]), reports[:, 0]] = reports[:, 1] * self.width * self.scale
        return out

    def variance(self) -> float:
        """Variance per user of one coordinate's estimate (at most)."""
        return self.width * self.scale**2

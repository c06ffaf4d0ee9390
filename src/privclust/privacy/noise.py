"""Where privclust's randomness comes from.

Two noise sources share one interface:

* :class:`SecureNoise` (the default, ``random_state=None``) draws every noise
  value with OpenDP's samplers.  They add noise to the exact value in exact
  arithmetic -- the input is rounded to a power-of-two grid and discrete
  Laplace / discrete Gaussian noise is sampled from OS entropy -- so the
  output carries no floating-point artefacts of the kind Mironov (CCS 2012)
  used to break textbook ``x + numpy.random.laplace()``.  We use OpenDP
  rather than write these samplers ourselves: they are subtle, and OpenDP's
  are proven and maintained.
* :class:`SeededNoise` (``random_state=<int>``) draws the same distributions
  from numpy generators seeded by the user, so experiments are reproducible.
  Floating-point attacks apply to it: **it is for experiments, not for
  releasing real data.**

Each fit owns one :class:`Randomness`: public geometry (initial centers,
projections) and noise come from independent streams of it, and every
mechanism call in seeded mode draws from its own child stream, so no two
mechanisms ever share noise.
"""

from __future__ import annotations

import math
import secrets
from functools import lru_cache

import numpy as np

from .._parallel import map_chunks, n_workers

__all__ = ["NoiseSource", "SecureNoise", "SeededNoise", "PartitionedNoise", "Randomness"]


class NoiseSource:
    """Adds noise to exact values; subclasses choose how it is sampled."""

    secure: bool = False

    def add_gaussian(self, values: np.ndarray, std: float) -> np.ndarray:
        raise NotImplementedError

    def add_laplace(self, values: np.ndarray, scale: float) -> np.ndarray:
        raise NotImplementedError

    def noisy_argmax(self, scores: np.ndarray, scale: float) -> int:
        """Index of the largest ``score + Exponential(scale)`` (permute-and-flip)."""
        raise NotImplementedError

    def gumbel_argmax(self, scores: np.ndarray, scale: float) -> int:
        """Index of the largest ``score + Gumbel(scale)``: index i with probability proportional to
        exp(score_i / scale) -- the exponential mechanism's own distribution."""
        raise NotImplementedError

    def uniform(self, low: np.ndarray, high: np.ndarray) -> np.ndarray:
        """A uniform point of the box [low, high] (a data-independent fallback output)."""
        raise NotImplementedError

    def uniform_index(self, n: int) -> int:
        """A uniform integer in [0, n)."""
        raise NotImplementedError

    def partitioned(self) -> "PartitionedNoise":
        """Independent noise sources for the partitions of one release, drawn where each partition lives
        (a Spark executor): picklable, and partition p's source is the same wherever it is built."""
        raise NotImplementedError


class PartitionedNoise:
    """One release's noise, split by partition: ``at(p)`` is partition p's own noise source.

    Secure: every partition draws from OpenDP's samplers and OS entropy, so the partitions' noises are
    independent.  Seeded: partition p's stream is child p of one stream the driver spawned for the
    release, so the noise is reproducible and independent of where, or in which order, partitions run."""

    def __init__(self, seeds: np.random.SeedSequence | None):
        self._seeds = seeds

    def at(self, partition: int) -> NoiseSource:
        if self._seeds is None:
            return SecureNoise()
        seeds = self._seeds
        child = np.random.SeedSequence(
            seeds.entropy, spawn_key=seeds.spawn_key + (int(partition),), pool_size=seeds.pool_size
        )
        return SeededNoise(child)


@lru_cache(maxsize=1)
def _opendp():
    """OpenDP's constructors privclust draws noise with, from their own modules: ``opendp.prelude`` also loads
    OpenDP's scikit-learn extras (scikit-learn, SciPy's statistics, pandas: 2.4 s), in every Spark worker that
    draws noise, where these take 0.2 s."""
    from types import SimpleNamespace

    from opendp import domains, measurements, measures, metrics, mod

    mod.enable_features("contrib")
    return SimpleNamespace(
        m=measurements,
        vector_domain=domains.vector_domain,
        atom_domain=domains.atom_domain,
        l1_distance=metrics.l1_distance,
        l2_distance=metrics.l2_distance,
        linf_distance=metrics.linf_distance,
        max_divergence=measures.max_divergence,
        zero_concentrated_divergence=measures.zero_concentrated_divergence,
    )


# OpenDP rounds a release's values to the grid 2^k before adding noise on that grid.  Its privacy map charges
# the rounding: the sensitivity grows by at most sqrt(size) 2^k (l2) or size 2^k (l1).  The grid below keeps
# that growth under scale * 2^-GRID_BITS, so a Gaussian release's mu (sensitivity / scale) or a Laplace
# release's epsilon grows by at most 2^-GRID_BITS in absolute terms -- below the float resolution of any
# spend above 2^-27 -- while the samplers run several times faster than on the finest grid (2^-1074).
GRID_BITS = 80
FINEST_GRID = -1074  # the smallest k OpenDP takes for f64: exact rounding of every float


def grid_exponent(scale: float, size: int) -> int:
    """k of OpenDP's noise grid 2^k for ``size`` values at noise ``scale``: size 2^k <= scale 2^-GRID_BITS."""
    return max(FINEST_GRID, math.floor(math.log2(scale) - math.log2(max(size, 1))) - GRID_BITS)


@lru_cache(maxsize=256)
def vector_measurement(kind: str, scale: float, size: int, k: int | None = None):
    """OpenDP's measurement adding ``kind`` ("gaussian" or "laplace") noise of ``scale`` to a vector of
    ``size`` floats on the grid 2^``k`` (by default ``grid_exponent(scale, size)``), built once per
    (kind, scale, size, k).  It adds the noise to the values themselves in exact arithmetic and rounds the
    result once, so the output carries no floating-point artefacts."""
    dp = _opendp()
    domain = dp.vector_domain(dp.atom_domain(T=float, nan=False), size=size)
    k = grid_exponent(scale, size) if k is None else int(k)
    if kind == "gaussian":
        return dp.m.make_gaussian(domain, dp.l2_distance(T=float), scale=scale, k=k)
    if kind == "laplace":
        return dp.m.make_laplace(domain, dp.l1_distance(T=float), scale=scale, k=k)
    raise ValueError(f"unknown noise kind {kind!r}")


@lru_cache(maxsize=256)
def _noisy_max(scale: float, measure: str):
    dp = _opendp()
    domain = dp.vector_domain(dp.atom_domain(T=float, nan=False))
    output_measure = dp.max_divergence() if measure == "max" else dp.zero_concentrated_divergence()
    return dp.m.make_noisy_max(domain, dp.linf_distance(T=float), output_measure, scale=scale)


NOISE_CALL_VALUES = 4096  # values noised per OpenDP call: well under a second, so Ctrl-C acts within 2 s
# A release of at least twice this many values is noised on several threads: an OpenDP call costs ~0.15 ms and a
# value ~15 us, so two pieces of 32 take ~0.6 ms of the 1.1 ms one call takes.  (At 512, the default's small
# releases -- FastLloyd's 100 sums a step, the greedy start's finer levels and lifting -- drew ~2,300 values a fit
# on the calling thread alone.)
PARALLEL_DRAWS = 32


def vector_pieces(size: int) -> np.ndarray:
    """Where a release of ``size`` values is cut: one piece per worker, each of at least ``PARALLEL_DRAWS``
    values (one piece below that: threads would cost more than they save), and none over
    ``NOISE_CALL_VALUES`` (an OpenDP call cannot be interrupted: Ctrl-C acts between pieces).  More pieces than
    workers come in whole rounds of the workers, so that none idles while another draws the last piece (the
    greedy's 76,000 values at 1e6 rows went in 19 pieces on 2 threads)."""
    workers = n_workers()
    pieces = max(1, min(workers, size // PARALLEL_DRAWS), -(-size // NOISE_CALL_VALUES))
    if pieces > workers:
        pieces = -(-pieces // workers) * workers
    return np.linspace(0, size, pieces + 1).round().astype(np.int64)


class SecureNoise(NoiseSource):
    """OpenDP's exact samplers, seeded from OS entropy (not reproducible).

    A release's values go to OpenDP as one vector (see :func:`vector_measurement`), or -- a large release --
    as contiguous pieces (:func:`vector_pieces`) sampled on the pool's threads (the sampler is ~15 us a value
    and releases the GIL), none over :data:`NOISE_CALL_VALUES` values, so that Ctrl-C, which can act only
    between OpenDP calls, acts within a second.  A piece is the same measurement on fewer values, on the whole
    release's grid (``k`` from its full size): OpenDP noises each coordinate on its own, independently, so
    the release has exactly the law of one call over the whole vector, the one OpenDP's map charges for."""

    secure = True

    def _apply(self, kind: str, values: np.ndarray, scale: float) -> np.ndarray:
        values = np.asarray(values, dtype=np.float64)
        if values.size == 0:
            return values.copy()
        flat, scale = np.ascontiguousarray(values.ravel()), float(scale)
        cuts = vector_pieces(flat.size)
        if cuts.size == 2:
            out = vector_measurement(kind, scale, flat.size)(flat)
        else:
            k = grid_exponent(scale, flat.size)
            pieces = [flat[a:b] for a, b in zip(cuts[:-1], cuts[1:])]
            drawn = map_chunks(lambda piece: vector_measurement(kind, scale, piece.size, k)(piece), pieces)
            out = np.concatenate([np.asarray(piece, dtype=np.float64) for piece in drawn])
        return np.asarray(out, dtype=np.float64).reshape(values.shape)

    def add_gaussian(self, values, std):
        return self._apply("gaussian", values, std)

    def add_laplace(self, values, scale):
        return self._apply("laplace", values, scale)

    def noisy_argmax(self, scores, scale):
        return int(_noisy_max(float(scale), "max")(np.ascontiguousarray(scores, dtype=np.float64)))

    def gumbel_argmax(self, scores, scale):
        # OpenDP's noisy max under zCDP adds Gumbel noise: the exponential mechanism exactly.
        return int(_noisy_max(float(scale), "zcdp")(np.ascontiguousarray(scores, dtype=np.float64)))

    def uniform_index(self, n):
        return secrets.randbelow(int(n))

    def uniform(self, low, high):
        # The point carries no information about the data, so OS entropy through numpy suffices.
        return np.random.default_rng(secrets.randbits(128)).uniform(low, high)

    def partitioned(self):
        return PartitionedNoise(None)


class SeededNoise(NoiseSource):
    """Reproducible numpy sampling. Not for production releases (see module doc)."""

    secure = False

    def __init__(self, seed_sequence: np.random.SeedSequence):
        self._seeds = seed_sequence

    def _stream(self) -> np.random.Generator:
        # A fresh child stream per mechanism call: independent mechanisms never
        # share noise, and the order of calls fixes the whole run.
        return np.random.default_rng(self._seeds.spawn(1)[0])

    def add_gaussian(self, values, std):
        values = np.asarray(values, dtype=np.float64)
        return values + self._stream().normal(0.0, float(std), size=values.shape)

    def add_laplace(self, values, scale):
        values = np.asarray(values, dtype=np.float64)
        return values + self._stream().laplace(0.0, float(scale), size=values.shape)

    def noisy_argmax(self, scores, scale):
        scores = np.asarray(scores, dtype=np.float64)
        return int(np.argmax(scores + self._stream().exponential(float(scale), size=scores.shape)))

    def gumbel_argmax(self, scores, scale):
        scores = np.asarray(scores, dtype=np.float64)
        return int(np.argmax(scores + self._stream().gumbel(0.0, float(scale), size=scores.shape)))

    def uniform(self, low, high):
        return self._stream().uniform(low, high)

    def uniform_index(self, n):
        return int(self._stream().integers(0, int(n)))

    def partitioned(self):
        return PartitionedNoise(self._seeds.spawn(1)[0])


class Randomness:
    """All the randomness of one fit: a noise source and public-geometry streams.

    ``random_state=None`` gives secure noise and an OS-seeded geometry stream;
    an integer (or ``numpy.random.SeedSequence``) gives reproducible seeded
    noise.  A ``numpy.random.Generator`` or ``RandomState`` is accepted too, for
    scikit-learn compatibility, and seeds the reproducible mode from it.
    """

    def __init__(self, random_state=None):
        if random_state is None:
            root = np.random.SeedSequence(secrets.randbits(128))
            self.noise: NoiseSource = SecureNoise()
        else:
            root = _seed_sequence(random_state)
            self.noise = SeededNoise(root.spawn(1)[0])
        self._geometry_root = root.spawn(1)[0]

    @property
    def secure(self) -> bool:
        return self.noise.secure

    def geometry(self) -> np.random.Generator:
        """A new independent stream for data-independent (public) randomness."""
        return np.random.default_rng(self._geometry_root.spawn(1)[0])

    def devices(self) -> np.random.Generator:
        """The randomness of the users' own randomizers (local and shuffle models): OS entropy, unless the
        run is seeded for an experiment."""
        return self.secret()

    def secret(self) -> np.random.Generator:
        """Randomness that is never released (a randomizer's coins, which rows a Poisson sample keeps): OS
        entropy, unless the run is seeded for an experiment."""
        if self.secure:
            return np.random.default_rng(secrets.randbits(128))
        return np.random.default_rng(self._geometry_root.spawn(1)[0].spawn(1)[0])


def _seed_sequence(random_state) -> np.random.SeedSequence:
    if isinstance(random_state, np.random.SeedSequence):
        return random_state
    if isinstance(random_state, (bool, np.bool_)):
        raise TypeError("random_state must be None, an int, or a numpy SeedSequence/Generator")
    if isinstance(random_state, (int, np.integer)):
        if random_state < 0:
            raise ValueError(f"random_state must be a non-negative int, got {random_state}")
        return np.random.SeedSequence(int(random_state))
    if isinstance(random_state, np.random.Generator):
        return np.random.SeedSequence(int(random_state.integers(0, 2**63)))
    if isinstance(random_state, np.random.RandomState):
        return np.random.SeedSequence(int(random_state.randint(0, 2**31 - 1)))
    raise TypeError(
        f"random_state must be None, an int, or a numpy SeedSequence/Generator, got {type(random_state).__name__}"
    )

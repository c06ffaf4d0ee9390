"""Deliberately broken variants of the library, for the audit's controls.

An audit that never fails proves nothing, so every run also audits mechanisms
broken on purpose and checks that each is caught.  The breakage is injected
where the library cannot route around it: at the noise layer (the samplers
every mechanism calls) and at the public domain map (where rows are clipped to
the declared bounds).  Both context managers restore the library on exit and
are not thread-safe: use them only around single-threaded draws.
"""

from __future__ import annotations

import dataclasses
import functools
from contextlib import contextmanager

import numpy as np

from ..geometry.domain import BoxDomain
from ..privacy.noise import SecureNoise, SeededNoise
from ..queries.base import Block

__all__ = ["scaled_noise", "unclipped_domain", "overconfident_devices", "row_sensitivity_for_users", "NOISE_METHODS"]

# The noise layer's methods, by kind; each takes (values or scores, scale).
NOISE_METHODS = {
    "gaussian": ("add_gaussian",),
    "laplace": ("add_laplace",),
    "exponential": ("gumbel_argmax", "noisy_argmax"),
}


def _rescaled(method, factor: float):
    @functools.wraps(method)
    def broken(self, values, scale):
        return method(self, values, scale * factor)

    return broken


@contextmanager
def scaled_noise(factor: float, kinds=tuple(NOISE_METHODS)):
    """BROKEN ON PURPOSE: every noise draw of ``kinds`` at ``factor`` times the scale it was asked for.

    Applies to the secure (OpenDP) and the seeded noise source alike; the
    mechanisms still *claim* the privacy of the scale they asked for.
    """
    saved = []
    try:
        for cls in (SecureNoise, SeededNoise):
            for kind in kinds:
                for name in NOISE_METHODS[kind]:
                    saved.append((cls, name, cls.__dict__.get(name)))
                    setattr(cls, name, _rescaled(getattr(cls, name), factor))
        yield
    finally:
        for cls, name, own in reversed(saved):
            if own is None:
                delattr(cls, name)
            else:
                setattr(cls, name, own)


@contextmanager
def unclipped_domain():
    """BROKEN ON PURPOSE: both clipping steps are dropped.

    ``BoxDomain.to_unit`` maps rows onto the unit box without clipping them to the
    bounds, and ``Block.scale_to_bound`` (where every contribution is clipped to
    its block's norm bound) leaves every value as it is.  A row outside the
    declared bounds then lands outside [-1, 1]^d with its whole weight, and every
    sensitivity is false.  (Either step alone is a defence the other backs up.)
    """
    original_map, original_clip = BoxDomain.to_unit, Block.scale_to_bound

    def to_unit(self, rows):
        rows = np.asarray(rows, dtype=np.float64)
        return (rows - self.lower) * (2.0 / (self.upper - self.lower)) - 1.0

    def no_clip(self, norms, margin=0.0):
        return np.ones(np.shape(norms))

    BoxDomain.to_unit, Block.scale_to_bound = to_unit, no_clip
    try:
        yield
    finally:
        BoxDomain.to_unit, Block.scale_to_bound = original_map, original_clip


@contextmanager
def overconfident_devices(factor: float):
    """BROKEN ON PURPOSE: every device randomizer (local and shuffle models) randomizes at ``factor``
    times its epsilon, while the protocol still claims the epsilon it was built with."""
    from ..local.frequency import GeneralizedRR, LocalHashing, OneCoordinate

    saved = {cls: cls.randomize for cls in (GeneralizedRR, LocalHashing, OneCoordinate)}

    def at_factor(randomize):
        @functools.wraps(randomize)
        def broken(self, values, rng):
            return randomize(dataclasses.replace(self, epsilon=self.epsilon * factor), values, rng)

        return broken

    try:
        for cls, randomize in saved.items():
            cls.randomize = at_factor(randomize)
        yield
    finally:
        for cls, randomize in saved.items():
            cls.randomize = randomize


@contextmanager
def row_sensitivity_for_users():
    """BROKEN ON PURPOSE: a user-level fit still bounds each user's rows to m and claims user-level privacy,
    but the central oracle calibrates every release for one row's change (the sensitivity of one row with m
    rows per user), so a user's m rows move the sums m times further than the noise allows for."""
    from ..queries import central

    original = central.block_mechanisms

    def one_row(query, allotment, group=1):
        return original(query, allotment, 1)

    central.block_mechanisms = one_row
    try:
        yield
    finally:
        central.block_mechanisms = original

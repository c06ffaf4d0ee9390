"""Warnings for a weakened or voided guarantee, pointed at the user's line.

A :class:`PrivacyLeakWarning` is a ``RuntimeWarning``: it is about what a call does at run time
(reads bounds off the data, seeds the noise, skips the noise), not about a deprecated API.  It is
attributed to the first frame outside privclust (and outside scikit-learn and joblib, which call ``fit``
for the user in searches and pipelines), so the user sees their own line, not ours.  The command line
prints warnings without a location (``privclust: warning: ...``): there the user's line is the command.
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from pathlib import Path

__all__ = ["PrivacyLeakWarning", "warn_leak", "warn_if_seeded", "warn_user"]

_PACKAGE = str(Path(__file__).resolve().parents[1])
# Libraries that call an estimator's fit on the user's behalf (scikit-learn's searches, pipelines and
# cross-validation, joblib's loops): the warning passes through their frames too, to the user's call.
_CALLERS = ("sklearn", "joblib")


def _passed_through() -> tuple[str, ...]:
    """The folders (and contextlib's file) whose frames are not the user's."""
    places = [_PACKAGE + os.sep, contextlib.__file__]
    for name in _CALLERS:
        module = sys.modules.get(name)  # not imported: none of its frames can be on the stack
        if getattr(module, "__file__", None):
            places.append(str(Path(module.__file__).resolve().parent) + os.sep)
    return tuple(places)


class PrivacyLeakWarning(RuntimeWarning):
    """The requested operation weakens or voids the differential-privacy guarantee."""


def warn_user(message: str, category: type[Warning]) -> None:
    """Warn with ``category`` at the first caller outside privclust (and the libraries that call ``fit``)."""
    passed = _passed_through()
    frame, level = sys._getframe(1), 2  # stacklevel 2: the frame that called warn_user
    while frame is not None and str(Path(frame.f_code.co_filename).resolve()).startswith(passed):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)


def warn_leak(message: str) -> None:
    """Warn with :class:`PrivacyLeakWarning` at the first caller outside privclust."""
    warn_user(message, PrivacyLeakWarning)


def warn_if_seeded(random_state) -> None:
    """Seeded noise comes from numpy's floating-point samplers: reproducible, but without the
    protection of the secure default against attacks on the low bits of floating-point noise
    (Mironov, CCS 2012)."""
    if random_state is not None:
        warn_leak(
            "a seeded random_state draws the noise from numpy's floating-point samplers: the run "
            "is reproducible, but its noise lacks the secure default's protection against floating-point "
            "attacks. Leave random_state=None for results you release."
        )

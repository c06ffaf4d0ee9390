"""scikit-learn's and diffprivlib's KMeans parameters, read for a differentially private fit.

Code written for ``sklearn.cluster.KMeans`` or ``diffprivlib.models.KMeans`` runs on
``privclust.KMeans`` unchanged.  Each of their parameters either does what it means under DP,
or is accepted and ignored with one :class:`CompatibilityWarning` per fit saying why, or is
refused with the reason -- always from the parameters alone, before any row is read:

``init``
    An array of public centers (data units, one per cluster) is the start of the Lloyd family
    (``fastlloyd``, ``glloyd``, ``sulloyd``, ``nonprivate-lloyd``): declared by the user, not
    read off the rows, so it costs no budget.  ``auto`` runs FastLloyd from it.  Algorithms that
    do not start from k centers (the greedy, ``maxcover``, ``onecluster``) refuse it, and so do
    the one-round privacy models (local, shuffle), which only the greedy serves.  ``"k-means++"`` and ``"random"`` pick rows of the
    private data as centers: ignored (the algorithm's own start, public or private, is used).
    A callable would be handed the private rows: refused.
``n_init``
    Several starts and keeping the best would need the best found privately: each start's fit in
    its own share of the budget, and a private selection on their costs (noised at a public bound
    on one row's cost) in another.  That selection is not implemented, so privclust makes one fit
    with the whole budget (``auto`` or ``algorithm_params={"init": "greedy"}`` give a better
    private start).  Accepted, ignored.  Whether restarts would pay is data-dependent
    (``examples/n_init_budget_split.py``, docs/sklearn.md).
``max_iter``
    Honoured by the Lloyd family (the fixed number of steps; the budget is split over them).
    ``auto`` takes it (scikit-learn code passes ``max_iter=300``) and ignores it: it fixes each
    candidate's iterations from public values, and 300 noisy steps would each get almost none of
    the budget.  ``algorithm="fastlloyd"`` sets them.
``tol``
    scikit-learn stops when the centers move less than ``tol``: how far they move depends on the
    rows, so the stopping time would be released without noise.  privclust's number of iterations
    is fixed in the plan from public values (``max_iter`` or the heuristic).  Accepted, ignored.
``verbose``
    Progress on stderr: the plan's iterations as they finish, and what was spent -- public values
    and releases only.
``n_jobs``
    The number of threads the fit uses (chunks of rows, and BLAS): joblib's convention, ``None``
    all cores, ``-1`` all cores, ``-2`` all but one.
``copy_x``
    privclust never modifies the caller's ``X`` (the rows are mapped into the unit box chunk by
    chunk, in copies), so both values are honoured as they are: no warning.
``algorithm``
    scikit-learn's ``"lloyd"`` and ``"elkan"`` name two implementations of the non-private Lloyd
    iteration.  Code passing them must not get a non-private fit here, so they mean "privclust's
    default private algorithm" (``auto``), with the warning.  privclust's non-private baseline is
    ``"nonprivate-lloyd"``.
``sample_weight`` (in ``fit``)
    A row of weight w moves every sum and count by up to w, so the noise would have to be scaled by a
    public bound on the weights, and privclust takes none: any weights are refused.

diffprivlib's own parameters (``epsilon``, ``bounds``, ``random_state``, ``accountant``) are
privclust's too.
"""

from __future__ import annotations

import math
import numbers
import os
import sys
from typing import Callable

from .algorithms.base import SKLEARN_ALGORITHMS
from .algorithms.params import Boolean, Integer, Interval, check_params
from .privacy.leaks import warn_user

__all__ = [
    "CompatibilityWarning",
    "resolve_algorithm",
    "public_start",
    "ignored",
    "warn_ignored",
    "check_sample_weight",
    "threads",
    "Progress",
    "DEFAULT_ALGORITHM",
]

DEFAULT_ALGORITHM = "auto"
SKLEARN_INITS = ("k-means++", "random")  # scikit-learn's starts: rows (or their spread) of the data

REASONS = {
    "algorithm": (
        "scikit-learn's name for its non-private Lloyd; privclust fits with its default private algorithm "
        f"({DEFAULT_ALGORITHM!r}) instead (its non-private baseline is 'nonprivate-lloyd')"
    ),
    "init": (
        "scikit-learn's start picks rows of the data, which a private fit cannot publish; the algorithm's own "
        "start is used (pass an array of public centers to start from them)"
    ),
    "n_init": (
        "each start would need its own share of the budget and the best a private selection on their costs, "
        "which privclust does not implement; it makes one fit with the whole budget"
    ),
    "max_iter": (
        "algorithm='auto' fixes each candidate's iterations from public values, and a Lloyd fit splits its "
        "budget over its steps (scikit-learn's 300 would leave each step almost nothing); pass "
        "algorithm='fastlloyd' to set them"
    ),
    "tol": (
        "a tolerance on how far the centers move reads the data; the number of iterations is fixed in advance "
        "from public values (max_iter or the heuristic)"
    ),
}


class CompatibilityWarning(UserWarning):
    """A scikit-learn or diffprivlib parameter was accepted but cannot be honoured under DP (and is ignored)."""


def resolve_algorithm(algorithm) -> str:
    """The privclust algorithm to run: scikit-learn's ``"lloyd"`` / ``"elkan"`` are the default private one."""
    return DEFAULT_ALGORITHM if isinstance(algorithm, str) and algorithm in SKLEARN_ALGORITHMS else algorithm


def public_start(init):
    """``init`` as the algorithms' ``start`` option: an array of public centers, or None (the algorithm's own
    start; scikit-learn's data-dependent starts are ignored).  A callable or an unknown string is refused."""
    if init is None or (isinstance(init, str) and init in SKLEARN_INITS):
        return None
    if isinstance(init, str):
        raise ValueError(
            f"init must be None, an array of public centers, or scikit-learn's {' or '.join(map(repr, SKLEARN_INITS))}"
            f" (ignored: they read the data), got {init!r}"
        )
    if callable(init):
        raise TypeError(
            "init: a callable start is called with the private rows (scikit-learn passes it X), which a private "
            "fit cannot do: pass an array of public centers"
        )
    return init  # checked by the algorithm's table (algorithms.params.Centers) and against k and d


# The values scikit-learn allows, checked with the parameter tables' constraints (algorithms.params)
N_INIT = Integer(1, hint=", 'auto' or None")
TOL = Interval(0.0, math.inf, closed="left", hint=" (or None)")
VERBOSE = Integer(0, hint=" (or a bool)")


def ignored(algorithm, init, n_init, tol, verbose, copy_x, n_jobs, max_iter=None) -> dict[str, str]:
    """The parameters given that are accepted but not honoured, each with why (checks them all first).
    ``max_iter`` is one of them when the algorithm run is ``auto`` (:func:`auto_ignores_max_iter`)."""
    if not isinstance(verbose, bool):
        VERBOSE.check("verbose", verbose)
    Boolean().check("copy_x", copy_x)
    threads(n_jobs)  # checked here, used by the fit
    one_start = n_init is None or (isinstance(n_init, str) and n_init == "auto") or N_INIT.check("n_init", n_init) == 1
    if tol is not None:
        TOL.check("tol", tol)
    notes = {}
    if resolve_algorithm(algorithm) != algorithm:
        notes[f"algorithm={algorithm!r}"] = REASONS["algorithm"]
    if isinstance(init, str) and init in SKLEARN_INITS:
        notes[f"init={init!r}"] = REASONS["init"]
    if not one_start:
        notes[f"n_init={n_init!r}"] = REASONS["n_init"]
    if tol is not None:
        notes[f"tol={tol!r}"] = REASONS["tol"]
    if auto_ignores_max_iter(algorithm, max_iter):
        check_params("fastlloyd", {"max_iter": max_iter})  # a valid value, though ignored
        notes[f"max_iter={max_iter!r}"] = REASONS["max_iter"]
    return notes


def auto_ignores_max_iter(algorithm, max_iter) -> bool:
    """Whether ``max_iter`` is given to ``auto`` (directly or through scikit-learn's algorithm names), which
    takes it as scikit-learn code passes it (often ``max_iter=300``) and ignores it, with the warning."""
    return max_iter is not None and resolve_algorithm(algorithm) == "auto"


def warn_ignored(notes: dict[str, str]) -> None:
    """One :class:`CompatibilityWarning` for every parameter in ``notes``, at the user's line."""
    if notes:
        said = "; ".join(f"{name}: {why}" for name, why in notes.items())
        warn_user(f"privclust.KMeans ignores {', '.join(notes)} -- {said} (docs/sklearn.md)", CompatibilityWarning)


def check_sample_weight(sample_weight) -> None:
    """Weights are refused, before any row is read (see the module docstring)."""
    if sample_weight is not None:
        raise ValueError(
            "sample_weight is not supported: a row of weight w moves every noisy sum and count by up to w, so the "
            "noise would need a public bound on the weights, which privclust does not take; fit unweighted rows"
        )


def threads(n_jobs) -> int | None:
    """``n_jobs`` (joblib's convention) as a number of threads, or None (all cores, the default)."""
    if n_jobs is None:
        return None
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, numbers.Integral) or n_jobs == 0:
        raise ValueError(f"n_jobs must be a non-zero integer or None (-1: every core), got {n_jobs!r}")
    if n_jobs > 0:
        return int(n_jobs)
    return max(1, (os.cpu_count() or 1) + 1 + int(n_jobs))


class Progress:
    """``verbose``: the fit's progress on stderr, from public values and releases only (the algorithm, the
    plan's iteration count -- from public values or the noisy row count --, what ``auto`` chose and why, what
    was spent).  Wraps the user's ``callback``, if any."""

    def __init__(self, verbose, callback: Callable[[int, int], None] | None):
        self.on = bool(verbose)
        self.callback = callback

    def say(self, text: str) -> None:
        if self.on:
            print(f"privclust.KMeans: {text}", file=sys.stderr, flush=True)

    def __call__(self, done: int, planned: int) -> None:
        self.say(f"iteration {done} of {planned}")
        if self.callback is not None:
            self.callback(done, planned)

    def as_callback(self) -> Callable[[int, int], None] | None:
        return self if self.on else self.callback

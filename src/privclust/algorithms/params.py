"""Every algorithm's parameters, declared once: what each takes, its constraints and defaults, and the check.

An algorithm's :class:`Params` table lists the estimator-level options it takes (of ``max_iter``,
``alpha``, ``radius_strategy``, ``postprocess``, and ``start``: public initial centers, the
estimator's ``init=<array>``) and its ``algorithm_params`` keys, each with a
constraint and a default.  :func:`check_params` is the only place they are checked: the estimator
calls it before anything is planned, and an algorithm reads its parameters through it
(``algorithms.base.algorithm_params``), which on values already checked is the same check again.

Rules:

* ``None`` is "the algorithm's default", for every parameter.
* An estimator-level option an algorithm does not take is refused, naming the algorithm, unless it
  is left at the estimator's default (``KMeans(alpha=0.8)`` is every algorithm's ``alpha``).
* An ``algorithm_params`` key the algorithm does not know is refused, listing what it accepts.
* ``auto`` chooses its algorithm after a noisy row count, so it takes an option only if every
  algorithm it may choose takes it: an option that one of them does not take is refused before
  anything is released, naming that algorithm.

The constraints check one value each; rules that tie several values together (FastLloyd's
``init_share`` needs a private ``init``, ...) stay with the algorithm, before its plan.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field

import numpy as np

from .._validation import check_shares

__all__ = [
    "Constraint",
    "Interval",
    "Integer",
    "OneOf",
    "Boolean",
    "Shares",
    "Centers",
    "Param",
    "Params",
    "TABLES",
    "declare",
    "table",
    "check_params",
    "ESTIMATOR_DEFAULTS",
    "MAX_ITER",
    "DEFAULT_ALPHA",
    "max_iter_param",
    "ALPHA",
    "RADIUS_STRATEGY",
    "RADIUS_STRATEGIES",
    "START",
    "OPTION_NAMES",
]

# A public cap on max_iter, for the estimator and the federated server alike: every iteration is planned
# (one noisy release, and in a federated run one round of every party) before the first runs.  1,000: the
# heuristics choose 2 to 7, each iteration's noise grows with sqrt(T) (about 32x one iteration's at 1,000,
# far past any use), and the non-private Lloyd stops when its centers are stable.
MAX_ITER = 1000
DEFAULT_ALPHA = 0.8  # FastLloyd's radius scale (the seed's)


class Constraint:
    """One value's constraint: :meth:`check` returns the value (converted) or raises a ValueError naming it."""

    def check(self, name: str, value):
        raise NotImplementedError


def _is_real(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


@dataclass(frozen=True)
class Interval(Constraint):
    """A finite real number between ``low`` and ``high``; ``closed`` is "both", "left", "right" or "neither"."""

    low: float
    high: float
    closed: str = "both"
    hint: str = ""

    def check(self, name: str, value) -> float:
        low_in, high_in = self.closed in ("both", "left"), self.closed in ("both", "right")
        ok = _is_real(value) and math.isfinite(value)
        ok = ok and (value >= self.low if low_in else value > self.low)
        ok = ok and (value <= self.high if high_in else value < self.high)
        if not ok:
            if self.low == 0 and not low_in and self.high == math.inf:
                raise ValueError(f"{name}{self.hint} must be a positive finite number, got {value!r}")
            interval = f"{'[' if low_in else '('}{self.low:g}, {self.high:g}{']' if high_in else ')'}"
            raise ValueError(f"{name}{self.hint} must be a number in {interval}, got {value!r}")
        return float(value)


@dataclass(frozen=True)
class Integer(Constraint):
    """An integer in [low, high] (``high`` None: no upper bound)."""

    low: int = 1
    high: int | None = None
    hint: str = ""

    def check(self, name: str, value) -> int:
        if (
            isinstance(value, bool)
            or not isinstance(value, numbers.Integral)
            or value < self.low
            or (self.high is not None and value > self.high)
        ):
            bound = f"between {self.low} and {self.high}" if self.high is not None else f">= {self.low}"
            raise ValueError(f"{name} must be an integer {bound}{self.hint}, got {value!r}")
        return int(value)


@dataclass(frozen=True)
class OneOf(Constraint):
    """One of a few strings."""

    choices: tuple

    def check(self, name: str, value):
        if not isinstance(value, str) or value not in self.choices:
            raise ValueError(f"{name} must be one of {tuple(self.choices)}, got {value!r}")
        return value


@dataclass(frozen=True)
class Boolean(Constraint):
    """True or False (numpy's booleans too)."""

    def check(self, name: str, value) -> bool:
        if not isinstance(value, (bool, np.bool_)):
            raise ValueError(f"{name} must be True or False, got {value!r}")
        return bool(value)


@dataclass(frozen=True)
class Shares(Constraint):
    """A budget split: a dict of shares for ``required`` (positive) and ``optional`` parts, summing to 1."""

    required: tuple
    optional: tuple = ()
    what: str | None = None  # the name in messages, if not the parameter's

    def check(self, name: str, value) -> dict:
        return check_shares(self.what or name, value, self.required, self.optional)


@dataclass(frozen=True)
class Centers(Constraint):
    """Points given by the user (public: declared, not read off the data): a finite 2-d array of numbers,
    one point per row.  Their number and dimension are checked against k and d by whoever uses them."""

    def check(self, name: str, value) -> np.ndarray:
        try:
            points = np.array(value, dtype=np.float64)  # a copy: the caller's array is never changed
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be an array of numbers, one center per row") from None
        if points.ndim != 2 or points.shape[0] < 1 or points.shape[1] < 1:
            raise ValueError(f"{name} must be a 2-d array with one center per row, got {points.ndim} dimension(s)")
        if not np.all(np.isfinite(points)):
            raise ValueError(f"{name} must hold finite numbers only (no NaN or infinity)")
        return points


@dataclass(frozen=True)
class Param:
    """A parameter's constraint and default (``None``: the algorithm works it out from other values)."""

    constraint: Constraint
    default: object = None


@dataclass(frozen=True)
class Params:
    """An algorithm's parameters: the estimator-level ``options`` it takes and its ``algorithm_params``."""

    name: str  # the registry's name (``KMeans(algorithm=...)``)
    label: str  # how messages name it
    options: dict[str, Param] = field(default_factory=dict)
    params: dict[str, Param] = field(default_factory=dict)
    candidates: tuple[str, ...] = ()  # auto: the algorithms it may choose (their tables bound its options)


# The estimator's options and the values that mean "not set": left there, no algorithm is asked to take them.
ESTIMATOR_DEFAULTS = {"max_iter": None, "alpha": DEFAULT_ALPHA, "radius_strategy": "step", "postprocess": None}
RADIUS_STRATEGIES = ("step", "constant")  # FastLloyd's first radius: half the diagonal ("step") or eta
# Public initial centers (data units): the estimator's init=<array>, an option only the algorithms that start
# from k centers take.  Not "init", which is FastLloyd's algorithm_params key for how it starts.
START = "start"
OPTION_NAMES = {START: "init"}  # how messages name an option the user sets under another name

TABLES: dict[str, Params] = {}


def declare(params: Params) -> Params:
    """Register an algorithm's table (each algorithm's module declares its own)."""
    TABLES[params.name] = params
    return params


def table(algorithm: str) -> Params:
    """The table of ``algorithm`` (its registry name)."""
    if algorithm in TABLES:
        return TABLES[algorithm]
    raise ValueError(f"unknown algorithm {algorithm!r}; choose one of {sorted(TABLES)}")


def max_iter_param(default: int | None = None) -> Param:
    return Param(Integer(1, MAX_ITER, hint=" or None (each iteration is one noisy release)"), default)


ALPHA = Param(Interval(0.0, math.inf, closed="neither"), DEFAULT_ALPHA)
RADIUS_STRATEGY = Param(OneOf(RADIUS_STRATEGIES), ESTIMATOR_DEFAULTS["radius_strategy"])


def _shown(key: str) -> str:
    return OPTION_NAMES.get(key, key)


def _unset(key: str, value) -> bool:
    """Is the estimator-level ``value`` its default (so not asked of the algorithm)?"""
    default = ESTIMATOR_DEFAULTS.get(key)
    if value is None:
        return True
    if isinstance(default, str):
        return isinstance(value, str) and value == default
    if isinstance(default, float):
        return _is_real(value) and value == default
    return False


def check_params(algorithm: str, given: dict) -> dict:
    """Check ``given`` (``{option: value, ..., "params": algorithm_params}``) against ``algorithm``'s table.

    Returns the same shape with every option the algorithm takes and every key of its
    ``algorithm_params`` present, defaults filled in; raises a ValueError (a TypeError for an
    ``algorithm_params`` that is not a dict) naming the parameter -- and, for one the algorithm does
    not take, the algorithm -- before anything is planned.  Checking a result again returns it."""
    spec = table(algorithm)
    options = {key: value for key, value in given.items() if key != "params" and not _unset(key, value)}
    for key in options:
        if key in spec.options:
            continue
        default = ESTIMATOR_DEFAULTS.get(key)
        if spec.candidates:
            takers = [c for c in spec.candidates if key in table(c).options]
            refusing = next(c for c in spec.candidates if key not in table(c).options)
            use = f", or choose algorithm={' or '.join(repr(c) for c in takers)}, which takes it" if takers else ""
            raise ValueError(
                f"algorithm='auto' may choose {refusing!r}, which does not take {_shown(key)}: "
                f"leave {_shown(key)} at its default ({default!r}){use}"
            )
        takes = ", ".join(map(_shown, spec.options)) or "none of " + ", ".join(ESTIMATOR_DEFAULTS)
        raise ValueError(
            f"algorithm={spec.name!r} does not take {_shown(key)} (it takes {takes}): "
            f"leave {_shown(key)} at its default ({default!r})"
        )
    checked = {
        key: param.default if options.get(key) is None else param.constraint.check(_shown(key), options[key])
        for key, param in spec.options.items()
    }
    raw = given.get("params")
    if raw is not None and not isinstance(raw, dict):
        raise TypeError(f"algorithm_params must be a dict or None, got {type(raw).__name__}")
    raw = raw or {}
    unknown = set(raw) - set(spec.params)
    if unknown:
        raise ValueError(f"unknown {spec.label} parameters {sorted(unknown)}; it accepts {list(spec.params)}")
    checked["params"] = {
        key: param.default if raw.get(key) is None else param.constraint.check(key, raw[key])
        for key, param in spec.params.items()
    }
    return checked

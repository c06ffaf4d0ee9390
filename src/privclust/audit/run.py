"""One audit: draw on both neighbours, learn a test on half the draws, bound the privacy loss on the other half.

The draws of each side are split in two.  On the first half a statistic is
fitted (the output itself for a scalar; Fisher's linear discriminant -- the
likelihood ratio of two Gaussians with a shared covariance -- for a vector;
the empirical log-likelihood ratio of the outcome for discrete outputs) and
the threshold and direction of the test ``statistic > t`` that gives the
largest privacy-loss bound.  The second half, never seen by those choices,
measures that one test's error rates, and :mod:`privclust.audit.bounds`
turns them into a lower bound that holds with the stated confidence.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from typing import Callable

import numpy as np

from .bounds import Claim, cp_upper

__all__ = ["AuditResult", "run_audit", "Sampler", "CONFIDENCE"]

Sampler = Callable[[int, int], np.ndarray]  # (side: 0 for D, 1 for D', draws) -> outputs, one row per draw
CONFIDENCE = 0.999
CHUNKS = 10  # progress ticks per side

# Quantile levels of the pooled statistic tried as thresholds.  Few of them, denser in the tails (where
# (epsilon, delta) bounds are found): picking the best of many noisy candidates on the selection half
# would mostly pick noise, which the held-out half then does not confirm.
_TAIL = np.array([3e-4, 1e-3, 3e-3, 0.01, 0.02])
_LEVELS = np.unique(np.concatenate([np.linspace(0.05, 0.95, 19), _TAIL, 1.0 - _TAIL]))


@dataclass
class AuditResult:
    name: str
    family: str
    claimed_epsilon: float
    claimed_delta: float
    empirical_epsilon: float
    violated: bool
    broken_on_purpose: bool
    claim_kind: str
    claimed_mu: float | None
    empirical_mu: float | None  # lower bound on mu, for claims with a Gaussian part
    draws: int  # per side; half choose the test, half measure it
    confidence: float
    noise: str
    pair: str
    test: str
    seconds: float = 0.0
    extra: dict = field(default_factory=dict)

    @property
    def caught(self) -> bool | None:
        """For a control: did the audit catch it?  ``None`` for a real mechanism."""
        return self.violated if self.broken_on_purpose else None

    @property
    def ok(self) -> bool:
        """A real mechanism within its claim, or a broken control caught."""
        return self.violated == self.broken_on_purpose

    def as_dict(self) -> dict:
        return {**asdict(self), "caught": self.caught, "ok": self.ok}


def _as_rows(outputs) -> np.ndarray:
    out = np.asarray(outputs, dtype=np.float64)
    return out.reshape(out.shape[0], -1)


def _fit_statistic(sel0: np.ndarray, sel1: np.ndarray, discrete: bool) -> tuple[Callable, str]:
    """A scalar statistic, larger on D' the more the output looks like D', learnt from the selection half."""
    if discrete:
        keys0, keys1 = [tuple(r) for r in sel0], [tuple(r) for r in sel1]
        values = sorted(set(keys0) | set(keys1))
        c0 = {v: 0 for v in values}
        c1 = dict(c0)
        for k in keys0:
            c0[k] += 1
        for k in keys1:
            c1[k] += 1
        # Empirical log-likelihood ratio, smoothed; outcomes never seen score 0.
        n0, n1, m = len(keys0), len(keys1), len(values)
        table = {v: math.log((c1[v] + 0.5) / (n1 + 0.5 * m)) - math.log((c0[v] + 0.5) / (n0 + 0.5 * m)) for v in values}
        return (lambda out: np.array([table.get(tuple(r), 0.0) for r in out])), "log-likelihood ratio of the outcome"
    if sel0.shape[1] == 1:
        return (lambda out: out[:, 0]), "the output"
    # Fisher's discriminant, ridge-regularised (outputs may have constant coordinates).
    diff = sel1.mean(axis=0) - sel0.mean(axis=0)
    cov = (np.cov(sel0, rowvar=False) + np.cov(sel1, rowvar=False)) / 2.0
    cov += np.eye(cov.shape[0]) * (1e-9 * max(float(np.trace(cov)), 1e-300) + 1e-300)
    w = np.linalg.solve(cov, diff)
    return (lambda out: out @ w), "Fisher's discriminant of the output"


def _error_rates(s0: np.ndarray, s1: np.ndarray, thresholds: np.ndarray):
    """Counts, per threshold t, of the draws above t on each side."""
    above0 = s0.size - np.searchsorted(np.sort(s0), thresholds, side="right")
    above1 = s1.size - np.searchsorted(np.sort(s1), thresholds, side="right")
    return above0, above1


def _bounds(claim: Claim, above0, above1, n0: int, n1: int, level: float) -> np.ndarray:
    """Loss bounds of the tests "s > t rejects D" (column 0) and "s > t rejects D'" (column 1)."""
    # Rejecting D when s > t: alpha = P_D(s > t), beta = P_D'(s <= t); and the mirror image.
    reject_d = claim.loss_bound(cp_upper(above0, n0, level), cp_upper(n1 - above1, n1, level))
    reject_d2 = claim.loss_bound(cp_upper(above1, n1, level), cp_upper(n0 - above0, n0, level))
    return np.stack([np.atleast_1d(reject_d), np.atleast_1d(reject_d2)], axis=-1)


def _draw(sample: Sampler, side: int, draws: int, tick) -> np.ndarray:
    parts = []
    for size in np.diff(np.linspace(0, draws, CHUNKS + 1).astype(int)):  # exactly CHUNKS ticks
        if size:
            parts.append(_as_rows(sample(side, int(size))))
        if tick is not None:
            tick()
    return np.concatenate(parts)


def run_audit(
    name: str,
    sample: Sampler,
    claim: Claim,
    draws: int,
    *,
    confidence: float = CONFIDENCE,
    discrete: bool = False,
    family: str = "",
    broken_on_purpose: bool = False,
    noise: str = "secure",
    pair: str = "",
    tick: Callable[[], None] | None = None,
) -> AuditResult:
    """Audit ``sample`` against ``claim`` with ``draws`` draws per side; see the module docstring."""
    if draws < 20:
        raise ValueError(f"an audit needs at least 20 draws per side, got {draws}")
    start = time.perf_counter()
    level = (1.0 - confidence) / 2.0  # alpha and beta are each bounded at this level: both hold w.p. confidence
    out0, out1 = _draw(sample, 0, draws, tick), _draw(sample, 1, draws, tick)
    half = draws // 2
    statistic, what = _fit_statistic(out0[:half], out1[:half], discrete)
    s0, s1 = statistic(out0[:half]), statistic(out1[:half])
    pooled = np.concatenate([s0, s1])
    thresholds = np.unique(pooled) if discrete else np.unique(np.quantile(pooled, _LEVELS))
    scores = _bounds(claim, *_error_rates(s0, s1, thresholds), s0.size, s1.size, level)
    best, direction = np.unravel_index(int(np.argmax(scores)), scores.shape)
    t = float(thresholds[best])

    # The held-out half measures that single test.
    h0, h1 = statistic(out0[half:]), statistic(out1[half:])
    above0, above1 = _error_rates(h0, h1, np.array([t]))
    bound = float(_bounds(claim, above0, above1, h0.size, h1.size, level)[0, direction])
    rejected = "D" if direction == 0 else "D'"
    empirical_mu = None if claim.mu is None else bound
    return AuditResult(
        name=name,
        family=family,
        claimed_epsilon=float(claim.epsilon),
        claimed_delta=float(claim.delta),
        empirical_epsilon=claim.epsilon_at_delta(bound),
        violated=bool(bound > claim.parameter),
        broken_on_purpose=broken_on_purpose,
        claim_kind=claim.kind,
        claimed_mu=claim.mu,
        empirical_mu=empirical_mu,
        draws=int(draws),
        confidence=float(confidence),
        noise=noise,
        pair=pair,
        test=f"{what} > {t:.4g} rejects {rejected}",
        seconds=time.perf_counter() - start,
    )

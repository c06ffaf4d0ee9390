"""Privacy amplification by shuffling: n eps0-LDP reports, uniformly permuted, are (eps, delta)-DP.

We use the numerical bound of Feldman, McMillan and Talwar ("Hiding among the
clones", FOCS 2021, Section 3).  Their reduction: for any eps0-LDP randomizer
and neighbouring data sets (one user's point replaced), the shuffled reports are
a post-processing of one of two distributions over pairs of counts.  With
C ~ Binomial(n - 1, e^-eps0) -- the other users who act as "clones" of the
differing user -- and, given C = c, A ~ Binomial(c, 1/2),

    P_c = alpha * A + (1 - alpha) * (A + 1),    Q_c = (1 - alpha) * A + alpha * (A + 1),

alpha = e^eps0 / (e^eps0 + 1) (mixtures of the laws of A and A + 1, on {0..c+1}).
So delta(eps) <= E_C[ H_eps(P_C || Q_C) ], the hockey-stick divergence
H_eps(P || Q) = sum_a max(0, P(a) - e^eps Q(a)) (and the same reversed).

Two facts make it cheap and exact (no sampling):

* P_c(a) / Q_c(a) = (alpha + (1 - alpha) t) / ((1 - alpha) + alpha t) with
  t = Pr[A = a - 1] / Pr[A = a] = a / (c - a + 1), which grows with a, so the ratio
  falls with a: {a : P_c(a) > e^eps Q_c(a)} is a prefix {a <= a*} and
  H_eps(P_c || Q_c) = P_c(A <= a*) - e^eps Q_c(A <= a*) -- two binomial CDFs;
* P_c(a) = Q_c(c + 1 - a) (A is symmetric), so both directions are equal.

The sum over c is evaluated over every c except two binomial tails of mass
at most ``tail`` each, and the mass left out is added in full: the result is an
upper bound on delta.  eps is then found by bisection (delta(eps) decreases in
eps), and the local eps0 a target (eps, delta) allows by bisection on eps0 at
that eps (the bound grows with eps0).  The closed form of FMT's Theorem 3.2,
eps <= ln(1 + (e^eps0 - 1)/(e^eps0 + 1) (8 sqrt(e^eps0 ln(4/delta)) / sqrt(n) + 8 e^eps0 / n)),
valid for eps0 <= ln(n / (16 ln(2/delta))), is kept for comparison: the
numerical bound is never above it (tested).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special, stats

__all__ = ["shuffle_delta", "shuffle_epsilon", "local_epsilon_for", "closed_form_epsilon", "tail_for"]

_TAIL = 1e-16  # binomial mass left out at each end (added to delta in full); scipy's isf fails below this
_BISECTIONS = 48


def _check(local_epsilon: float, n: int) -> None:
    if not (math.isfinite(local_epsilon) and local_epsilon > 0):
        raise ValueError(f"the local epsilon must be positive and finite, got {local_epsilon!r}")
    if not (isinstance(n, (int, np.integer)) and n >= 2):
        raise ValueError(f"shuffling needs at least 2 reports, got {n!r}")


def shuffle_delta(eps: float, local_epsilon: float, n: int, tail: float = _TAIL) -> float:
    """An upper bound on delta at ``eps`` for n shuffled eps0-LDP reports (see the module docstring)."""
    _check(local_epsilon, n)
    if eps >= local_epsilon:
        return 0.0  # shuffling never hurts: the reports alone are eps0-DP
    alpha = math.exp(local_epsilon) / (math.exp(local_epsilon) + 1.0)
    p = math.exp(-local_epsilon)
    # isf, not ppf(1 - tail): 1 - 1e-17 rounds to 1, which would sweep every c up to n.
    low, high = int(stats.binom.ppf(tail, n - 1, p)), int(stats.binom.isf(tail, n - 1, p))
    c = np.arange(max(low - 1, 0), high + 1)
    log_weight = (
        special.gammaln(n)
        - special.gammaln(c + 1.0)
        - special.gammaln(n - c)
        + c * math.log(p)
        + (n - 1 - c) * math.log1p(-p)
    )
    weight = np.exp(log_weight)
    left_out = max(0.0, float(special.bdtr(c[0] - 1, n - 1, p)) if c[0] > 0 else 0.0) + float(
        special.bdtrc(c[-1], n - 1, p)
    )
    # The ratio P_c / Q_c is at least e^eps exactly when t <= t_star.
    e = math.exp(eps)
    numerator = alpha - e * (1.0 - alpha)
    if numerator <= 0:
        return float(min(1.0, left_out))
    t_star = numerator / (e * alpha - (1.0 - alpha))
    cut = np.floor(t_star * (c + 1) / (1.0 + t_star) + 1e-12)  # a <= cut  <=>  a / (c - a + 1) <= t_star
    f_cut = _binomial_cdf(cut, c)
    f_below = _binomial_cdf(cut - 1, c)
    p_mass = alpha * f_cut + (1.0 - alpha) * f_below
    q_mass = (1.0 - alpha) * f_cut + alpha * f_below
    divergence = np.maximum(p_mass - e * q_mass, 0.0)
    return float(min(1.0, np.dot(weight, divergence) + left_out))


def _binomial_cdf(k: np.ndarray, c: np.ndarray) -> np.ndarray:
    """P[Binomial(c, 1/2) <= k], elementwise (0 below 0, 1 from c on)."""
    k = np.asarray(k, dtype=np.float64)
    inside = (k >= 0) & (k < c)
    out = np.where(k >= c, 1.0, 0.0)
    # P[Bin(c, 1/2) <= k] = I_{1/2}(c - k, k + 1): the regularized incomplete beta, 30x faster than bdtr.
    out[inside] = special.betainc(c[inside] - k[inside], k[inside] + 1.0, 0.5)
    return out


def tail_for(delta: float) -> float:
    """The binomial mass left out at each end when bounding delta near the target ``delta``."""
    return min(1e-12, max(_TAIL, delta * 1e-6))  # what is left out stays about a millionth of the target


def _bisect(holds, good: float, bad: float) -> float:
    """The end of [good, bad] where the monotone ``holds`` is true, after _BISECTIONS halvings: always a
    point where it holds, so the answer errs on the safe side."""
    for _ in range(_BISECTIONS):
        mid = (good + bad) / 2.0
        if holds(mid):
            good = mid
        else:
            bad = mid
    return good


def shuffle_epsilon(local_epsilon: float, n: int, delta: float) -> float:
    """The smallest eps (to bisection accuracy, rounded up) with ``shuffle_delta(eps) <= delta``."""
    _check(local_epsilon, n)
    if not 0 < delta < 1:
        raise ValueError(f"delta must lie in (0, 1), got {delta!r}")
    tail = tail_for(delta)
    if shuffle_delta(0.0, local_epsilon, n, tail) <= delta:
        return 0.0
    return _bisect(lambda eps: shuffle_delta(eps, local_epsilon, n, tail) <= delta, good=float(local_epsilon), bad=0.0)


def local_epsilon_for(eps: float, delta: float, n: int, ceiling: float = 30.0) -> float:
    """The largest eps0 (to bisection accuracy, rounded down) whose n shuffled reports are (eps, delta)-DP
    by :func:`shuffle_delta` -- at least eps: an eps-LDP randomizer is eps-DP without any shuffling."""
    if not (math.isfinite(eps) and eps > 0):
        raise ValueError(f"epsilon must be positive and finite, got {eps!r}")
    if not 0 < delta < 1:
        raise ValueError(f"delta must lie in (0, 1), got {delta!r}")
    _check(1.0, n)
    tail = tail_for(delta)
    if shuffle_delta(eps, ceiling, n, tail) <= delta:
        return ceiling
    return _bisect(lambda local_epsilon: shuffle_delta(eps, local_epsilon, n, tail) <= delta, good=eps, bad=ceiling)


def closed_form_epsilon(local_epsilon: float, n: int, delta: float) -> float | None:
    """FMT's Theorem 3.2 closed form, or None outside its range eps0 <= ln(n / (16 ln(2 / delta)))."""
    _check(local_epsilon, n)
    if local_epsilon > math.log(n / (16.0 * math.log(2.0 / delta))):
        return None
    e0 = math.exp(local_epsilon)
    return math.log1p(
        (e0 - 1.0) / (e0 + 1.0) * (8.0 * math.sqrt(e0 * math.log(4.0 / delta)) / math.sqrt(n) + 8.0 * e0 / n)
    )

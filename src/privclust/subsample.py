"""Sublinear private clustering by Poisson subsampling (Blocki, Grigorescu & Mukherjee 2021).

``Subsampled(estimator, rate)`` keeps each row independently with probability
``rate`` (the sampling of Blocki et al.'s algorithm A'), fits any privclust
estimator on the sample and reports the amplified guarantee.

Sublinear work: for an array with random access the sample is drawn without a
pass over the rows -- its size m ~ Binomial(n, rate), then m distinct indices
uniformly at random -- which has exactly the distribution of independent
per-row coin flips.  Only the m sampled rows are read.

Privacy (Blocki, Grigorescu & Mukherjee 2021, Theorem 1, add/remove neighbours): if the estimator is
(eps, delta)-DP, the whole is (eps', delta')-DP with

    eps'   = ln max{ xi (e^eps - 1) + 1, 1 / (xi (e^-eps - 1) + 1) }
    delta' = max{ e^-eps delta xi / (xi (e^-eps - 1) + 1), delta xi }.

The base fit runs against a private ledger; every shared accountant -- the
one given to ``Subsampled`` and the one the base estimator carries -- is
charged the amplified spend (checked before any row is read).  The sample
size m is never released and never shapes an outcome: an empty sample is
fitted like any other (the base releases noise alone), so no refusal depends
on m.  The amplified guarantee is computed from the base fit's total
(epsilon, delta), which is valid for any (eps, delta)-DP base.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import binom
from sklearn.base import BaseEstimator, ClusterMixin, clone

from ._validation import check_data
from .algorithms.base import BASELINE, NON_PRIVATE
from .estimator import ON_TRAINING_ROWS
from .privacy.budget import PrivacyAccountant, PrivacyReport, Spend
from .queries.rows import poisson_indices
from .queries.spark import is_spark_frame

__all__ = ["amplified", "group_privacy", "sample_size", "suggest_rate", "Subsampled"]


def amplified(epsilon: float, delta: float, rate: float) -> tuple[float, float]:
    """(eps', delta') of an (epsilon, delta)-DP algorithm run on a Poisson sample with rate ``rate``."""
    if not 0 < rate <= 1:
        raise ValueError(f"rate must lie in (0, 1], got {rate!r}")
    if epsilon < 0 or not 0 <= delta < 1:
        raise ValueError("need epsilon >= 0 and 0 <= delta < 1")
    if math.isinf(epsilon):
        return math.inf, delta * rate
    low = rate * math.expm1(-epsilon) + 1.0
    eps = math.log(max(rate * math.expm1(epsilon) + 1.0, 1.0 / low))
    return eps, max(math.exp(-epsilon) * delta * rate / low, delta * rate)


def group_privacy(epsilon: float, rate: float, group: int, threshold: int, delta: float = 0.0) -> tuple[float, float]:
    """Guarantee for groups of ``group`` rows of an (epsilon, delta)-DP algorithm on a Poisson sample.

    Blocki, Grigorescu & Mukherjee (2021), Theorem 9: with delta_T = P[Binomial(g, rate) > T], the sampled
    algorithm is (T eps, delta_T)-DP for groups of size g.  We state it with the
    *base* epsilon (conditioned on i <= T of the group being sampled, the
    samples differ in i rows, so naive group privacy gives i eps), which is
    always valid; the seed writes T eps'.  For a base with delta > 0, naive
    group privacy adds T e^((T-1) eps) delta.
    """
    if group < 1 or not 0 <= threshold <= group:
        raise ValueError("need group >= 1 and 0 <= threshold <= group")
    if not 0 < rate <= 1:
        raise ValueError(f"rate must lie in (0, 1], got {rate!r}")
    tail = float(binom.sf(threshold, group, rate))
    extra = threshold * math.exp((threshold - 1) * epsilon) * delta if threshold else 0.0
    return threshold * epsilon, tail + extra


def sample_size(
    k: int,
    diameter: float,
    eta: float,
    theta: float = 0.05,
    objective: str = "means",
    d: int | None = None,
    n: int | None = None,
    approximation: float = 1.0,
    c: float = 1.0,
) -> int:
    """Sample size after which the sample's clustering cost is within ``eta`` (Blocki, Grigorescu & Mukherjee 2021).

    ``eta`` is the tolerated additive error in the *average* cost per point, ``theta``
    the failure probability, ``diameter`` M the data's diameter (2 sqrt(d) in the unit
    box).  With ``d`` (Euclidean data) Theorems 5 / 8 apply, with ``approximation``
    w(1 + alpha) the base algorithm's factor; otherwise Theorems 3 / 7 (any metric;
    need ``n``).  k-median (``objective="median"``) scales with M / eta, k-means with
    M^2 / eta.  The theorems hold "for an appropriate constant c" they do not state:
    ``c`` defaults to 1, so the result is the bound's shape, a starting point to
    validate (e.g. with ``privclust bench subsample``), not a guarantee.
    """
    if k < 1 or diameter <= 0 or eta <= 0 or not 0 < theta < 1:
        raise ValueError("need k >= 1, diameter > 0, eta > 0 and 0 < theta < 1")
    if objective not in ("means", "median"):
        raise ValueError(f"objective must be 'means' or 'median', got {objective!r}")
    ratio = diameter / eta if objective == "median" else diameter**2 / eta
    log_theta = math.log(1.0 / theta)
    if d is not None:
        w = float(approximation)
        first = (diameter if objective == "median" else diameter**2) * w * (1 + w) * log_theta / eta
        second = ratio**2 * (log_theta + k * d * math.log(max(math.sqrt(d) * diameter / (2 * eta), math.e)))
    else:
        if n is None:
            raise ValueError("the general-metric bound (no d) needs n")
        first = ratio * log_theta
        second = ratio**2 * (k * math.log(n) + log_theta)
    return int(math.ceil(c * max(first, second)))


def suggest_rate(n: int, **bound) -> float:
    """``sample_size(**bound) / n``, capped at 1: the Poisson rate whose expected sample is that large."""
    if n < 1:
        raise ValueError("n must be positive")
    return min(1.0, sample_size(n=n, **bound) / n)


class Subsampled(ClusterMixin, BaseEstimator):
    """Fit ``estimator`` on a Poisson sample of the rows (Blocki, Grigorescu & Mukherjee 2021); amplified privacy.

    Attributes after ``fit``: ``estimator_`` (the fitted base), ``cluster_centers_``,
    ``privacy_spent_`` (the amplified guarantee), ``base_privacy_spent_``.  The fitted
    base keeps none of what it computed exactly on the sample (``labels_``,
    ``inertia_``, ``n_rows_clipped_``, ``outliers_``): their sizes would show the sample
    size m.  Label rows with :meth:`predict`.
    """

    def __init__(self, estimator, rate: float = 0.01, random_state=None, accountant: PrivacyAccountant | None = None):
        self.estimator = estimator
        self.rate = rate
        self.random_state = random_state
        self.accountant = accountant

    def _planned_base(self) -> tuple[float, float]:
        if getattr(self.estimator, "algorithm", None) in NON_PRIVATE:
            raise ValueError(f"subsampling amplifies a private algorithm; {BASELINE!r} is the non-private baseline")
        if getattr(self.estimator, "privacy_model", "central") != "central":
            # The amplification theorem is for add/remove neighbours; a local or shuffle round is replace-one
            # and publishes its number of reports (here, the sample's size).
            raise ValueError(
                "subsampling amplifies central fits only (add/remove neighbours), not the local or shuffle model"
            )
        if getattr(self.estimator, "privacy_unit", "row") != "row":
            # Poisson sampling of rows amplifies a row-level guarantee; a user's rows would be sampled one by
            # one, which that bound does not cover (and the user ids would no longer match the sample).
            raise ValueError(
                "subsampling amplifies row-level fits only: with privacy_unit='user' a user's rows would be "
                "sampled one by one, which the amplification bound does not cover; fit the user-level KMeans "
                "directly"
            )
        delta = float(getattr(self.estimator, "delta", 0.0) or 0.0)
        if isinstance(getattr(self.estimator, "bounds", None), str):  # bounds="data": not private at all
            return math.inf, delta
        return float(self.estimator.epsilon), delta

    def fit(self, X, y=None, **fit_params):
        if not (isinstance(self.rate, (int, float)) and 0 < self.rate <= 1):
            raise ValueError(f"rate must lie in (0, 1], got {self.rate!r}")
        eps, delta = self._planned_base()
        planned = amplified(eps, delta, self.rate)
        ledgers = self._ledgers()
        for ledger in ledgers:
            ledger.check([Spend("subsampled fit", epsilon=planned[0], delta=planned[1])])
        rng = np.random.default_rng(self.random_state)
        if is_spark_frame(X):
            # Spark's sample() keeps each row independently with probability rate: Poisson
            # subsampling, as Theorem 1 needs; the rows stay in Spark.
            sample = X.sample(withReplacement=False, fraction=float(self.rate), seed=int(rng.integers(2**62)))
        else:
            if isinstance(X, (list, tuple)):
                X = np.asarray(X)
            n = len(X)
            rows = poisson_indices(n, self.rate, rng)  # may be empty: the base then fits an empty sample
            sample = check_data(X.iloc[rows] if hasattr(X, "iloc") else X[rows])  # reads only the sampled rows
        # The base fit charges a ledger of its own; the shared accountants get the amplified total.
        base = clone(self.estimator).set_params(accountant=None)
        if getattr(base, "public_n", None) is not None:
            # A declared row count describes the full data; the base sees about rate times as many rows.
            base.set_params(public_n=max(1, int(round(self.rate * base.public_n))))
        if base.random_state is None and self.random_state is not None:
            base.set_params(random_state=int(rng.integers(2**31)))
        base.fit(sample, **fit_params)
        # What the base computed exactly on the sample (labels_ has one entry per sampled row, ...) would
        # show the sample size m, and cannot be matched to the rows anyway: the fitted base keeps none of it.
        for name in ON_TRAINING_ROWS:
            base.__dict__.pop(name, None)
        spent = base.privacy_spent_
        eps_amp, delta_amp = amplified(spent.epsilon, spent.delta, self.rate)
        for ledger in ledgers:
            ledger.spend(Spend("subsampled fit", epsilon=eps_amp, delta=delta_amp))
        self.estimator_ = base
        self.cluster_centers_ = base.cluster_centers_
        self.n_iter_ = base.n_iter_
        self.base_privacy_spent_ = spent
        self.privacy_spent_ = PrivacyReport(
            epsilon=eps_amp,
            delta=delta_amp,
            mu=None,
            steps=[
                Spend(
                    f"subsampled (rate {self.rate:g}) fit of {len(spent.steps)} releases",
                    epsilon=eps_amp,
                    delta=delta_amp,
                )
            ],
        )
        return self

    def _ledgers(self) -> list[PrivacyAccountant]:
        """Every shared accountant to charge: this one's and the base estimator's -- once if they are one, and
        only the child where one is the other's parent (a child records each spend in its parents too)."""
        found = []
        for ledger in (self.accountant, getattr(self.estimator, "accountant", None)):
            if ledger is not None and not any(ledger is seen for seen in found):
                if not isinstance(ledger, PrivacyAccountant):
                    raise TypeError("accountant must be a privclust PrivacyAccountant")
                found.append(ledger)
        return [ledger for ledger in found if not any(_is_ancestor(ledger, other) for other in found)]

    def predict(self, X):
        return self.estimator_.predict(X)


def _is_ancestor(ledger: PrivacyAccountant, of: PrivacyAccountant) -> bool:
    """Whether ``ledger`` is a parent of ``of``, or a parent's parent, and so on."""
    parent = of.parent
    while parent is not None:
        if parent is ledger:
            return True
        parent = parent.parent
    return False

"""A privclust fit as an OpenDP measurement, so that OpenDP's compositors and odometers can hold it beside
the other queries of an analysis and one budget covers them all.

>>> import opendp.prelude as dp
>>> from privclust import KMeans
>>> from privclust.opendp import make_private_kmeans
>>> fit = make_private_kmeans(KMeans(8, epsilon=1.0, delta=1e-6, bounds=(-1, 1), public_n=10_000), n_features=2)
>>> fit.map(1)          # zero-concentrated DP: rho  # doctest: +SKIP
>>> centers = fit(X)    # a numpy array of the released centers  # doctest: +SKIP

**Input.** A 2-d numpy array of ``n_features`` float columns (OpenDP's ``array2_domain``) under the
symmetric distance: data sets at distance 1 differ by one added or removed row -- privclust's add/remove
neighbours.

**Output measure.** The one the fit's ledger composes exactly: a fit whose every release is Gaussian
(FastLloyd, GLloyd, the greedy's dense levels, ``auto`` on them) is rho-zCDP with rho = sum mu_i^2 / 2
(a Gaussian release of sensitivity D and standard deviation sigma is (D / sigma)-GDP and (D / sigma)^2 / 2
-zCDP, and both compose by adding mu^2); any other fit (a partition-selection delta, Laplace releases, the
exponential mechanism) is (epsilon, delta)-DP, as ``privacy_spent_`` states it.

**Privacy map.** From privclust's own accounting, before anything runs: the fit's plan is a value
(``KMeans.planned_spends``), and the map composes what it may spend -- for ``auto``, which chooses after a
noisy count, the largest over the plans it may choose (zCDP: the largest rho; approximate DP: their
union -- the largest Gaussian mu with the largest other epsilon and delta -- composed).  Distance 0 costs
nothing; distance 1 costs the plan; distance k > 1 is bounded by group privacy (k^2 rho for zCDP; (k epsilon, k e^((k - 1) epsilon) delta)
for approximate DP).  The function fits a fresh clone of the estimator -- of the copy taken when the
measurement was built, whose plan the map is -- on the rows whose values are all finite (a row with a
NaN or an infinite value, which the domain holds, is left out: a map that changes the symmetric distance
by at most as much) and returns ``cluster_centers_``; nothing else of the fit leaves the measurement.

OpenDP's ``make_user_measurement`` requires its ``honest-but-curious`` feature: privclust enables it (and
``contrib``) when it builds the measurement; the privacy argument above is what the feature asks the
builder of a measurement to vouch for.
"""

from __future__ import annotations

import math

import numpy as np
from sklearn.base import clone

from .algorithms.base import NON_PRIVATE
from .estimator import KMeans
from .privacy.budget import Cover, PrivacyAccountant

__all__ = ["make_private_kmeans", "MEASURES"]

MEASURES = ("auto", "zCDP", "approximate")


def _opendp():
    import opendp.prelude as dp

    dp.enable_features("contrib", "honest-but-curious")
    return dp


def make_private_kmeans(model: KMeans, n_features: int, measure: str = "auto"):
    """An OpenDP ``Measurement`` that fits ``model`` (a configured, unfitted :class:`privclust.KMeans`) on a
    numpy array of ``n_features`` columns and releases its centers (see the module docstring).

    ``measure``: ``"zCDP"`` (every release Gaussian), ``"approximate"`` ((epsilon, delta)-DP), or ``"auto"``
    (zCDP when the plan allows it).  Refused: a shared ``accountant`` (OpenDP's compositor is the
    accountant here), seeded noise (``random_state``: not private), and models other than the central one."""
    if not isinstance(model, KMeans):
        raise TypeError("make_private_kmeans takes a privclust KMeans")
    # The map is computed once, now: the measurement keeps a copy of its own (parameters deep-copied), so that a
    # later set_params on the caller's model cannot change what it spends behind the map.
    model = clone(model)
    if measure not in MEASURES:
        raise ValueError(f"measure must be one of {MEASURES}, got {measure!r}")
    if model.accountant is not None:
        raise ValueError(
            "give the model no accountant: the OpenDP compositor holding this measurement keeps the budget"
        )
    if model.random_state is not None:
        raise ValueError("seeded noise (random_state) is not private: an OpenDP measurement needs the secure noise")
    if isinstance(model.bounds, str):
        raise ValueError("declare public bounds: bounds read off the data are not private")
    if model.algorithm in NON_PRIVATE:
        raise ValueError(f"algorithm={model.algorithm!r} is the non-private baseline: it is no measurement")
    if getattr(model, "privacy_unit", "row") != "row":
        raise ValueError(
            "the measurement's input metric is the symmetric distance over rows, and privacy_unit='user' protects "
            "users (each user's rows bounded to max_rows_per_user): its map is not one of rows; use a row-level model"
        )
    if isinstance(n_features, bool) or not isinstance(n_features, int) or n_features < 1:
        raise ValueError(f"n_features must be a positive integer, got {n_features!r}")
    plans = model.planned_spends(n_features)  # checks the parameters too, before anything is built
    gaussian = all(s.is_gdp for spends in plans for s in spends)
    if measure == "zCDP" and not gaussian:
        raise ValueError(
            f"algorithm={model.algorithm!r} with these parameters makes releases that are not Gaussian (a selection "
            "delta, Laplace or the exponential mechanism): its guarantee is (epsilon, delta); use measure='approximate'"
        )
    zcdp = measure == "zCDP" or (measure == "auto" and gaussian)
    delta = model.delta
    if zcdp:
        rho = max(math.fsum(s.mu**2 for s in spends) / 2.0 for spends in plans)
    else:
        # auto chooses its plan from a noisy count: an adaptive choice, for which the largest epsilon over the
        # plans (each composed at delta) is no bound -- the choice can pair one plan's Gaussian mu with another's
        # selection delta.  Every plan's trade-off dominates the one of their union cover (the largest mu, and
        # the largest epsilon and delta of the other releases), so that cover's composition bounds any choice.
        epsilon = PrivacyAccountant().guarantee(delta, Cover.of_any(plans).spends("the plans' union"))[0]

    def privacy_map(d_in):
        k = int(d_in)
        if k < 0:
            raise ValueError("a distance is non-negative")
        if zcdp:
            return rho * k * k
        if k == 0:
            return (0.0, 0.0)
        if (k - 1) * epsilon > 700:  # e^((k - 1) epsilon) overflows a double: no delta below 1 is left
            return (k * epsilon, 1.0)
        return (k * epsilon, min(1.0, k * math.exp((k - 1) * epsilon) * delta))

    def function(X):
        # A row with a NaN or an infinite value (OpenDP's array domain holds them) is left out -- a 1-stable map,
        # each row kept or dropped on its own: KMeans refuses non-finite input, and a refusal of one data set
        # beside a release on its neighbour would tell such a row apart with certainty.
        X = np.asarray(X, dtype=np.float64)
        return np.asarray(clone(model).fit(X[np.isfinite(X).all(axis=1)]).cluster_centers_)

    dp = _opendp()
    return dp.m.make_user_measurement(
        input_domain=dp.numpy.array2_domain(num_columns=n_features, T=float),
        input_metric=dp.symmetric_distance(),
        output_measure=dp.zero_concentrated_divergence() if zcdp else dp.approximate(dp.max_divergence()),
        function=function,
        privacy_map=privacy_map,
    )

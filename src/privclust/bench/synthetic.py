"""Synthetic data for the scaling benchmark, generated in-project.

``separated(k, d, seed)`` follows the recipe of Diaa et al.'s Synth sets: n = 10,000
points in k Gaussian clusters with sizes in the ratio 1 : 2 : ... : k, a random
number (0-100) of uniform outliers, and a controlled separation between the
closest pair of clusters, then scaled to [-1, 1]^d.  Separation is the index of
Qiu & Joe (used by R's clusterGeneration): for two clusters projected on the
line joining their centers, J = (L2 - U1) / (U2 - L1) with L, U the 2.5% and
97.5% quantiles; J in [0.16, 0.26] spans partly overlapping to separated
clusters.  With equal spherical spread s, J = (D - 2zs) / (D + 2zs), z = 1.96,
so s = D (1 - J) / (2z (1 + J)) for the closest centers at distance D.

``g2(d, seed)`` mirrors SIPU's G2 sets: 2,048 points, two Gaussian clusters
centred at (500, ..., 500) and (600, ..., 600) with standard deviation 100 per
coordinate, scaled to [-1, 1]^d.

``skewed(k, d, seed, n)`` is ``separated``'s mixture pushed into a corner of its box: every coordinate
through exp(2x), then scaled to [-1, 1]^d again, so most rows crowd one end of every feature, as they
do in real data with a skewed feature (incomes, counts, lab values).

``scikit_learn(name, k)`` is one of scikit-learn's bundled real data sets (``digits``: 1,797 x 64;
``breast_cancer``: 569 x 30; ``diabetes``: 442 x 10), scaled to [-1, 1]^d: held-out real data that ship
with a dependency, none of them among privclust's bundled sets.

Spec strings (``synth:k=8,d=16,seed=2``, ``synth:k=3,d=6,seed=12,n=50000``, ``skew:k=3,d=6,seed=5,n=500``,
``g2:d=64,seed=0``, ``sklearn:digits,k=10``) name these sets in benchmark rows.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import norm

from ..datasets import Dataset
from ..geometry.init import sphere_packing

__all__ = ["separated", "skewed", "g2", "scikit_learn", "from_spec", "spec"]

Z = norm.ppf(0.975)


def _scale(X: np.ndarray) -> np.ndarray:
    lo, hi = X.min(axis=0), X.max(axis=0)
    return 2.0 * (X - lo) / np.where(hi > lo, hi - lo, 1.0) - 1.0


def separated(k: int, d: int, seed: int = 0, n: int = 10_000, separation: float | None = None) -> Dataset:
    rng = np.random.default_rng([seed, k, d])
    J = rng.uniform(0.16, 0.26) if separation is None else separation
    centers = sphere_packing(k, d, rng) if k > 1 else np.zeros((1, d))
    if k > 1:
        gaps = np.linalg.norm(centers[:, None] - centers[None], axis=-1) + np.eye(k) * 1e9
        spread = gaps.min() * (1 - J) / (2 * Z * (1 + J))
    else:
        spread = 0.2
    sizes = np.arange(1, k + 1)
    sizes = np.floor(n * sizes / sizes.sum()).astype(int)
    sizes[-1] += n - sizes.sum()
    labels = np.repeat(np.arange(k), sizes)
    X = centers[labels] + rng.normal(0.0, spread, size=(n, d))
    outliers = rng.integers(0, 101)
    X = np.vstack([X, rng.uniform(X.min(), X.max(), size=(outliers, d))])
    labels = np.concatenate([labels, np.full(outliers, -1)])
    name = spec("synth", k=k, d=d, seed=seed, **({} if n == 10_000 else {"n": n}))
    return Dataset(name, _scale(X), labels, k, f"Synth k={k} d={d} J={J:.2f}")


def skewed(k: int, d: int, seed: int = 0, n: int = 10_000) -> Dataset:
    base = separated(k, d, seed, n)
    name = spec("skew", k=k, d=d, seed=seed, **({} if n == 10_000 else {"n": n}))
    return Dataset(name, _scale(np.exp(2.0 * base.X)), base.labels, k, f"{base.description}, skewed by exp(2x)")


SCIKIT_LEARN = {"digits": "load_digits", "breast_cancer": "load_breast_cancer", "diabetes": "load_diabetes"}


def scikit_learn(name: str, k: int) -> Dataset:
    import sklearn.datasets

    if name not in SCIKIT_LEARN:
        raise ValueError(f"unknown scikit-learn data set {name!r}: one of {', '.join(SCIKIT_LEARN)}")
    bunch = getattr(sklearn.datasets, SCIKIT_LEARN[name])()
    X = np.asarray(bunch.data, dtype=np.float64)
    return Dataset(f"sklearn:{name},k={k}", _scale(X), None, k, f"scikit-learn's {name} ({X.shape[0]} x {X.shape[1]})")


def g2(d: int, seed: int = 0) -> Dataset:
    rng = np.random.default_rng([seed, d])
    labels = np.repeat([0, 1], 1024)
    X = np.where(labels[:, None] == 0, 500.0, 600.0) + rng.normal(0.0, 100.0, size=(2048, d))
    return Dataset(spec("g2", d=d, seed=seed), _scale(X), labels, 2, f"G2-like d={d}")


def spec(kind: str, **params) -> str:
    return kind + ":" + ",".join(f"{key}={value}" for key, value in params.items())


def from_spec(text: str) -> Dataset:
    kind, _, rest = text.partition(":")
    if kind == "sklearn":
        name, _, tail = rest.partition(",")
        options = dict(part.split("=") for part in tail.split(",") if part)
        return scikit_learn(name, int(options.get("k", 2)))
    params = {key: int(value) for key, value in (part.split("=") for part in rest.split(",") if part)}
    if kind in ("synth", "skew"):
        make = separated if kind == "synth" else skewed
        return make(params["k"], params["d"], params.get("seed", 0), n=params.get("n", 10_000))
    if kind == "g2":
        return g2(params["d"], params.get("seed", 0))
    raise ValueError(f"unknown synthetic data spec {text!r}")

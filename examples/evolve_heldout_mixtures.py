"""auto picks evolve in the plane with few rows per cluster (this checked the first such rule: from k = 10 below
n eps / k = 100): its cost against FastLloyd's on six 2-d Gaussian mixtures nobody tuned on (docs/choosing.md).
Seeded noise, for the comparison only."""

import warnings

import numpy as np

from privclust import KMeans

warnings.filterwarnings("ignore", message="a seeded random_state")

for k, n, eps in [(12, 600, 1.0), (20, 1500, 0.5), (40, 2000, 1.0), (16, 10000, 0.1), (24, 4000, 0.25), (10, 500, 1.0)]:
    res = {}
    for alg in ("fastlloyd", "evolve"):
        costs = []
        for s in range(6):
            r = np.random.default_rng(5000 + s * 7 + k)
            C = r.uniform(-0.85, 0.85, (k, 2))
            lab = r.integers(0, k, n)
            X = np.clip(C[lab] + r.normal(0, 0.04, (n, 2)), -1, 1)
            m = KMeans(k, epsilon=eps, bounds=(-1, 1), algorithm=alg, random_state=s).fit(X)
            costs.append(m.inertia_ / n)
        res[alg] = np.mean(costs)
    print(
        f"k={k} n={n} eps={eps} signal={n * eps / k:.0f} fastlloyd={res['fastlloyd']:.4f} evolve={res['evolve']:.4f} ratio={res['evolve'] / res['fastlloyd']:.2f}",
        flush=True,
    )

"""Why privclust.KMeans ignores scikit-learn's n_init (docs/sklearn.md): restarts split the budget.

n_init restarts under DP must share the budget.  This gives them the most favourable terms: the m runs
of FastLloyd split mu exactly (each mu / sqrt(m), Gaussian DP: together the fit's (epsilon, delta)), and
the best is picked by its *exact* NICV -- a non-private selection that a real n_init would have to buy
with more budget.  If even that loses to one run with the whole budget, n_init cannot help.

Usage: PYTHONPATH=src python examples/n_init_budget_split.py [RUNS] [DATASETS] [EPSILONS]
e.g.   PYTHONPATH=src python examples/n_init_budget_split.py 10 s1,house,adult 0.5,1
Prints the mean NICV (+- its standard error) over RUNS seeds for m = 1, 3, 10 restarts.
"""

import math
import sys
import warnings

import numpy as np

from privclust import KMeans, PrivacyLeakWarning, datasets
from privclust.metrics import nicv
from privclust.privacy.gdp import gdp_epsilon, gdp_mu

DELTA = 1e-6


def best_of(m: int, X: np.ndarray, k: int, epsilon: float, seed: int) -> float:
    """The exact NICV of the best of m FastLloyd runs that together spend (epsilon, DELTA)."""
    share = gdp_epsilon(gdp_mu(epsilon, DELTA) / math.sqrt(m), DELTA)  # each run mu / sqrt(m)
    costs = []
    for run in range(m):
        model = KMeans(
            k,
            epsilon=share,
            delta=DELTA,
            bounds=(-1, 1),
            algorithm="fastlloyd",
            public_n=len(X),
            random_state=seed * 1000 + run,  # seeded noise: an experiment, not a release
        )
        costs.append(nicv(X, model.fit(X).cluster_centers_))
    return min(costs)


if __name__ == "__main__":
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    names = sys.argv[2].split(",") if len(sys.argv) > 2 else ["s1", "house", "adult"]
    epsilons = [float(e) for e in sys.argv[3].split(",")] if len(sys.argv) > 3 else [0.5, 1.0]
    warnings.simplefilter("ignore", PrivacyLeakWarning)
    for name in names:
        data = datasets.load(name)
        for epsilon in epsilons:
            cells = []
            for m in (1, 3, 10):
                values = np.array([best_of(m, data.X, data.k, epsilon, seed) for seed in range(runs)])
                cells.append(f"m={m}: {values.mean():.4f} (+-{values.std(ddof=1) / math.sqrt(runs):.4f})")
            print(f"{name} (n={len(data.X)}, d={data.X.shape[1]}, k={data.k}) epsilon={epsilon:g}: " + ", ".join(cells))

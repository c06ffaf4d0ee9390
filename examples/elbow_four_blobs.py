"""Issue 27's check of the private elbow: 10 curves at epsilon = 1 (secure noise) on 4-cluster 3-d mixtures.

Usage: PYTHONPATH=src python examples/elbow_four_blobs.py [FIRST_DATA_SEED] [K_MAX]
Prints each curve's elbow and whether any released (post-processed) cost is below zero.
"""

import sys

import numpy as np

from privclust.elbow import elbow_curve


def mixture(seed: int, n: int = 2000, sd: float = 0.07) -> np.ndarray:
    """2,000 rows around 4 centers about 1 apart (a tetrahedron at a random offset) in [-1, 1]^3."""
    rng = np.random.default_rng(seed)
    centers = np.array([[1, 1, 1], [1, -1, -1], [-1, 1, -1], [-1, -1, 1]], float) * 0.35 + rng.uniform(-0.2, 0.2, 3)
    return np.clip(centers[rng.integers(0, 4, n)] + rng.normal(0, sd, (n, 3)), -1, 1)


if __name__ == "__main__":
    first = int(sys.argv[1]) if len(sys.argv) > 1 else 201
    k_max = int(sys.argv[2]) if len(sys.argv) > 2 else 15
    found, negative = [], 0
    for seed in range(first, first + 10):
        curve = elbow_curve(mixture(seed), k_max, 1.0, 1e-6, (-1, 1))  # random_state=None: secure noise
        found.append(curve.elbow)
        negative += bool(np.any(curve.costs < 0))
    print(f"elbow = 4 in {sum(k == 4 for k in found)} of 10 curves {found}; curves with a negative cost: {negative}")

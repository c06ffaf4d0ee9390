"""Privately aggregate per-subset k-means solutions with sample-and-aggregate (seed 001, Section 6).

Each of 1,500 disjoint random subsets is clustered with ordinary (non-private)
scikit-learn k-means; a solution is turned into one vector by sorting its k
centers along the first coordinate (a fixed, data-independent canonical
order), and `sample_and_aggregate` privately returns a vector close to most
subsets' solutions.  Any clustering routine can be plugged in the same way.

Run:  python examples/aggregate_kmeans.py
"""

import numpy as np
from sklearn.cluster import KMeans

from privclust import sample_and_aggregate

K = 3
rng = np.random.default_rng(1)
truth = np.array([[-0.6, 0.2], [0.1, -0.5], [0.7, 0.4]])
X = truth[rng.integers(0, K, 150_000)] + rng.normal(0, 0.08, (150_000, 2))


def solve(subset: np.ndarray) -> np.ndarray:
    centers = KMeans(K, n_init=3, random_state=0).fit(subset).cluster_centers_
    return centers[np.argsort(centers[:, 0])].ravel()


result = sample_and_aggregate(
    solve, X, n_subsets=1_500, output_bounds=(-1, 1), output_dim=K * 2, epsilon=1.0, delta=1e-6
)
centers = result.center.reshape(K, 2)
print("private centers:\n", np.round(centers, 3))
print("planted centers:\n", truth)
print(f"largest center error: {np.abs(centers - truth).max():.3f}; privacy spent: {result.privacy_spent}")

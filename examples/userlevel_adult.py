"""Protect users, not rows: k-means on Adult where every user owns 5 rows (issue 29).

Adult has one row per person; here its rows are dealt to synthetic users, 5 each, as
in a data set of repeated visits.  A row-level fit protects one row; the user-level
fit (``privacy_unit="user"``) protects all of one user's rows: each user's rows are
cut to ``max_rows_per_user`` at random (never by their values) and every release is
noised for that many rows, so it costs about what a row-level fit at epsilon / 5
costs.  Both fits spend the same epsilon; NICV is measured on every row.

Run:  python examples/userlevel_adult.py
"""

import numpy as np

from privclust import KMeans, datasets
from privclust.metrics import nicv

X = datasets.load("adult").X  # 48,842 rows scaled to [-1, 1]
users = np.random.default_rng(0).permutation(len(X)) % (len(X) // 5)  # 5 rows per user

for epsilon in (0.25, 1.0):
    common = {"epsilon": epsilon, "bounds": (-1, 1), "algorithm": "fastlloyd", "random_state": 0}
    rows = KMeans(3, **common).fit(X)
    per_user = KMeans(3, privacy_unit="user", max_rows_per_user=5, **common).fit(X, user_ids=users)
    print(
        f"epsilon = {epsilon}: NICV row level {nicv(X, rows.cluster_centers_):.4f}, "
        f"user level {nicv(X, per_user.cluster_centers_):.4f}"
    )
print(per_user.privacy_spent_)

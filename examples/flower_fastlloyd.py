"""Federated FastLloyd as a Flower app: three clients, SecAgg+ between them, the server's noise once per round.

Starts a Flower SuperLink and three SuperNodes on 127.0.0.1 (real processes), runs privclust's app with
``flwr run``, and prints what the server reports (rounds, who contributed, its ledger) and the centers every
client released.  The server never sees the clients' rows, their sums or the group key: see
docs/federated.md, "Flower".  Needs ``pip install "privclust[flower]"``; a round takes a few seconds (every
Flower message starts a ClientApp process; minutes on a busy machine).

Run:  python examples/flower_fastlloyd.py
"""

import tempfile

import numpy as np

from privclust.flower.local import run_local

rng = np.random.default_rng(7)
truth = np.array([[-0.6, -0.5], [0.55, -0.4], [0.0, 0.6]])
X = np.clip(truth[rng.integers(0, 3, 6_000)] + rng.normal(0, 0.06, (6_000, 2)), -1, 1)
parts = np.array_split(X, 3)  # one hospital's rows each

with tempfile.TemporaryDirectory() as workdir:
    out = run_local(
        parts, workdir, timeout=1800, k=3, epsilon=1.0, delta=1e-6, bounds="-1,1", algorithm="fastlloyd", max_iter=2
    )

server, clients = out["server"], out["clients"]
print(f"{server['rounds']} rounds in {out['seconds']:.0f} s; contributors per round: {server['contributors']}")
print(f"server's ledger: epsilon {server['privacy_spent']['epsilon']:.3f}, delta {server['privacy_spent']['delta']:g}")
centers = np.array(clients[0]["centers"])
assert all(np.array_equal(np.array(c["centers"]), centers) for c in clients)  # every client holds the same
print("released centers (every client):")
print(np.round(centers[np.argsort(centers[:, 0])], 3))

"""Golden ledgers and seeded centers: every algorithm in every privacy model, pinned.

These pin what a fit spends, step by step (label, epsilon, delta, mu), and the centers a seeded fit
returns, so that a restructuring of the code (issue 26: one composable plan) can be checked to move
nothing.  A change to a pinned value must be intended and said in its commit (``tests/goldens.py``
says how to regenerate them).

* central, in memory: every algorithm, and ``auto`` with and without a public row count;
* central, memory-mapped: the same fit as in memory, against the same pinned file;
* Spark: in ``test_spark.py`` (it shares that module's session); a seeded Spark fit of FastLloyd and
  maxcover is the in-memory fit (asserted there), and the MPC greedy has a pinned file of its own;
* local and shuffle, the continual stream, and the federated protocol, whose noise is drawn by the
  server from the secure sampler (it has no seeded mode): there only the ledger is pinned.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from goldens import CENTRAL, blobs, central_params, check, ledger, record

from privclust import KMeans


@pytest.mark.parametrize("case", sorted(CENTRAL))
def test_central_in_memory(case):
    check(f"central-{case}", record(KMeans(3, **central_params(case)).fit(blobs(4000))))


@pytest.mark.parametrize("case", ["fastlloyd", "greedy", "maxcover", "private-box"])
def test_central_memory_mapped_is_the_in_memory_fit(case, tmp_path):
    np.save(tmp_path / "rows.npy", blobs(4000))
    X = np.load(tmp_path / "rows.npy", mmap_mode="r")
    check(f"central-{case}", record(KMeans(3, **central_params(case)).fit(X)))


@pytest.mark.parametrize("model", ["local", "shuffle"])
def test_local_and_shuffle(model):
    params = dict(epsilon=2.0, bounds=(-1, 1), algorithm="greedy", privacy_model=model, random_state=5)
    if model == "shuffle":
        params["delta"] = 1e-6
    check(f"{model}-greedy", record(KMeans(3, **params).fit(blobs(20_000, seed=3))))


def test_stream():
    from privclust.stream import ContinualKMeans

    model = ContinualKMeans(n_clusters=3, epsilon=1.0, delta=1e-6, bounds=(-1, 1), horizon=4, random_state=5)
    X = blobs(6000, seed=4)
    published = [model.update(insert=X[:3000])]
    published.append(model.update(insert=X[3000:4500], delete=X[:500]))
    published.append(model.update(insert=X[4500:], delete=X[500:1000]))
    spent = model.privacy_spent_
    check(
        "stream-greedy",
        {"ledger": ledger(spent.steps, (spent.epsilon, spent.delta)), "centers": np.vstack(published).tolist()},
    )


def test_federated(tmp_path):
    from privclust.federated import FederatedServer, Job, client_context, join, make_certs, server_context

    certs = make_certs(tmp_path / "certs", 3)
    parts = np.array_split(blobs(3000, seed=6), 2)

    def tls(who, server=False):
        make = server_context if server else client_context
        return make(certs / f"{who}.pem", certs / f"{who}.key", certs / "ca.pem")

    server = FederatedServer(
        Job(3, 1.0, 1e-6, [-1, 1], algorithm="fastlloyd"), 2, ssl_context=tls("server", True), timeout=60
    )
    errors = []

    def party(i):
        try:
            join(parts[i], server.address, i, 2, ssl_context=tls(f"party-{i}"), timeout=60)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=party, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    report = server.serve()
    for t in threads:
        t.join(120)
    assert not errors, errors
    total = (report.privacy_spent["epsilon"], report.privacy_spent["delta"])
    check("federated-fastlloyd", {"ledger": ledger(server.accountant.spends, total)})

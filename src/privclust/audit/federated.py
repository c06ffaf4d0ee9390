"""The federated server's view: one party's masked messages must not depend on its rows.

Kept small and separate on purpose: it uses only ``FederatedServer(...,
record=list)``, which receives ``(round, party, masked payload)`` of every
message, and ``join`` on loopback without TLS.  Two parties run a FastLloyd job; party 0 holds D or D'.
Every ring element party 0 sends (each coordinate of each round, scaled to
[0, 1)) is one draw.  Masked with a pad the server does not know, these are
uniform whatever the rows, so the claim audited is epsilon = 0: any event's
frequency must be the same on both sides.  A Kolmogorov-Smirnov test of all
recorded values against the uniform distribution is reported too.
"""

from __future__ import annotations

import threading

import numpy as np
from scipy.stats import kstest

from .bounds import Claim

__all__ = ["masked_view", "federated_run"]

ROUNDS = 5


def federated_run(rows0: np.ndarray, rows1: np.ndarray, rounds: int = ROUNDS) -> list[tuple]:
    """One two-party run on loopback; the (round, party, masked payload) messages the server received."""
    from ..federated import FederatedServer, Job, JobLimits, join

    record: list[tuple] = []
    job = Job(1, 8.0, 1e-5, [-1, 1], public_n=len(rows0) + len(rows1), max_iter=rounds, algorithm="fastlloyd")
    server = FederatedServer(job, 2, timeout=30, record=record)
    limits = JobLimits(max_epsilon=job.epsilon, max_delta=job.delta)  # the parties agree to the audit's job
    errors: list[BaseException] = []

    def guarded(fn, *args):
        try:
            fn(*args)
        except BaseException as exc:  # noqa: BLE001 -- re-raised below, in the caller's thread
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(server.serve,))]
    threads += [
        threading.Thread(
            target=guarded,
            args=(lambda r=rows, i=i: join(r, server.address, party=i, parties=2, timeout=30, limits=limits),),
        )
        for i, rows in enumerate((rows0, rows1))
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return record


def masked_view(rows: int = 50):
    D = np.full((rows, 1), -0.5)
    neighbours = (D, np.vstack([D, [[0.999]]]))
    other = np.full((rows, 1), 0.5)
    seen: list[np.ndarray] = []

    def sample(side: int, n: int) -> np.ndarray:
        values: list[np.ndarray] = []
        while sum(v.size for v in values) < n:
            record = federated_run(neighbours[side], other)
            mine = [payload for _, party, payload in record if party == 0]  # party 0's message of every round
            seen.extend(payload for _, _, payload in record)
            values.extend(np.asarray(m, dtype=np.float64) / 2.0**64 for m in mine)
        return np.concatenate(values)[:n]

    def report(confidence: float) -> tuple[dict, bool]:
        p = float(kstest(np.concatenate(seen).astype(np.float64) / 2.0**64, "uniform").pvalue)
        return {"uniformity_p_value": p, "masked_values": int(sum(v.size for v in seen))}, p < 1.0 - confidence

    sample.report = report
    return sample, Claim.dp(0.0)

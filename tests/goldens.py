"""Pinned ledgers and seeded centers: the helpers behind ``test_golden.py`` (and the Spark case in ``test_spark.py``).

Regenerate the pinned files with ``PRIVCLUST_GOLDEN=regen python -m pytest -q tests/test_golden.py tests/test_spark.py``
and review the diff of ``tests/golden/*.json`` before committing it: a changed value must be intended.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np

from privclust.privacy.budget import Spend

GOLDEN = Path(__file__).parent / "golden"
REGENERATE = os.environ.get("PRIVCLUST_GOLDEN") == "regen"
TRUTH = np.array([[-0.6, -0.5], [0.55, -0.4], [0.0, 0.6]])


def blobs(n: int, d: int = 2, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centers = np.hstack([TRUTH, np.zeros((3, d - 2))]) if d > 2 else TRUTH
    return np.clip(centers[rng.integers(0, 3, n)] + rng.normal(0, 0.06, (n, d)), -1, 1)


def step(spend: Spend) -> dict:
    return {"label": spend.label, "epsilon": spend.epsilon, "delta": spend.delta, "mu": spend.mu}


def ledger(steps, total: tuple[float, float]) -> dict:
    return {"total": list(total), "steps": [step(s) for s in steps]}


def record(model) -> dict:
    spent = model.privacy_spent_
    return {
        "ledger": ledger(spent.steps, (spent.epsilon, spent.delta)),
        "centers": np.asarray(model.cluster_centers_).tolist(),
    }


def check(name: str, got: dict) -> None:
    """Compare ``got`` with the pinned ``tests/golden/<name>.json`` (or write it when regenerating)."""
    path = GOLDEN / f"{name}.json"
    got = json.loads(json.dumps(got))  # the same float round trip as the pinned file
    if REGENERATE:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(json.dumps(got, indent=1) + "\n")
        return
    assert path.exists(), f"no golden file {path.name}; regenerate with PRIVCLUST_GOLDEN=regen"
    want = json.loads(path.read_text())
    same_ledger(got["ledger"], want["ledger"])
    if "centers" in want:
        np.testing.assert_allclose(np.array(got["centers"]), np.array(want["centers"]), rtol=1e-7, atol=1e-9)


def same_ledger(got: dict, want: dict) -> None:
    assert [s["label"] for s in got["steps"]] == [s["label"] for s in want["steps"]]
    for g, w in zip(got["steps"], want["steps"]):
        for key in ("epsilon", "delta", "mu"):
            if w[key] is None or g[key] is None:
                assert g[key] == w[key], (w["label"], key)
            else:
                assert math.isclose(g[key], w[key], rel_tol=1e-9, abs_tol=1e-15), (w["label"], key, g[key], w[key])
    np.testing.assert_allclose(got["total"], want["total"], rtol=1e-9, atol=1e-15)


CENTRAL = {
    "fastlloyd": {},
    "greedy": {},
    "glloyd": {},
    "sulloyd": {"delta": 0.0},
    "maxcover": {},
    "onecluster": {},
    "auto": {},
    "auto-counted": {"algorithm": "auto", "public_n": None},  # 5% of the budget buys the row count
    "greedy-mpc": {"algorithm": "greedy", "algorithm_params": {"mpc": True}},
    "fastlloyd-greedy-start": {"algorithm": "fastlloyd", "algorithm_params": {"init": "greedy"}},
    "private-box": {"algorithm": "fastlloyd", "bounds": None},  # 10% of the budget finds the box first
}


def central_params(case: str) -> dict:
    params = dict(epsilon=1.0, delta=1e-6, bounds=(-1, 1), algorithm=case, random_state=11, public_n=4000)
    params.update(CENTRAL[case])
    return params

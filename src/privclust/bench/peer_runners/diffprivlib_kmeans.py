"""Run IBM diffprivlib's KMeans on a batch of jobs; executed by the peer's own Python.

Input: the path of a JSON file {"data": "<.npy path>", "jobs": [{"k", "epsilon",
"seed", "lower", "upper"}], "memory": bool}.  Output: one JSON line per job on
stdout: {"centers", "iterations", "seconds", "peak_bytes"}.
"""

import time
import tracemalloc
import warnings

import numpy as np
from _batch import serve
from diffprivlib.models import KMeans


def run(X, job, trace):
    if trace:
        tracemalloc.start()
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = KMeans(
            n_clusters=job["k"],
            epsilon=job["epsilon"],
            bounds=(job["lower"], job["upper"]),
            random_state=job["seed"],
        ).fit(X)
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1] if trace else 0
    if trace:
        tracemalloc.stop()
    return {
        "centers": np.asarray(model.cluster_centers_).tolist(),
        "iterations": int(getattr(model, "n_iter_", 0) or 0),
        "seconds": seconds,
        "peak_bytes": int(peak),
    }


if __name__ == "__main__":
    serve(run)

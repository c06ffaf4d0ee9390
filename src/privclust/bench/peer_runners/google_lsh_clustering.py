"""Run Google's LSH clustering (google/differential-privacy, learning/clustering) on a batch of jobs.

Executed by the peer's own Python; calls the library's public entry point
``clustering_algorithm.private_lsh_clustering(k, Data(points, radius),
DifferentialPrivacyParam(epsilon, delta))``.  The library wants a radius that
bounds every point's distance from the origin, so the data are shifted by the
centre of the declared bounds box (a public value) and the radius is that of
the ball around the box: half the box's diagonal.  Centers are shifted back.
Its noise (numpy's global generator, scipy's discrete Laplace) and its final
k-means++ on the coreset are seeded with ``np.random.seed(seed)``.  When the
private coreset has fewer than k points the library returns fewer centers;
the last is repeated up to k (the cost is unchanged) and "returned" says how
many it gave.

Input: the path of a JSON file {"data": "<.npy path>", "jobs": [{"k", "epsilon",
"delta", "seed", "lower", "upper"}], "memory": bool}.  Output: one JSON line per
job on stdout: {"centers", "returned", "iterations", "seconds", "peak_bytes"}.
"""

import logging
import time
import tracemalloc
import warnings

import numpy as np
from _batch import ball_of_box, pad_to_k, serve
from clustering import clustering_algorithm, clustering_params


def run(X, job, trace):
    middle, radius = ball_of_box(job, X.shape[1])
    if trace:
        tracemalloc.start()
    start = time.perf_counter()
    np.random.seed(job["seed"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = clustering_algorithm.private_lsh_clustering(
            job["k"],
            clustering_params.Data(X - middle, radius),
            clustering_params.DifferentialPrivacyParam(job["epsilon"], job.get("delta", 1e-6)),
        )
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1] if trace else 0
    if trace:
        tracemalloc.stop()
    centers, returned = pad_to_k(result.centers, job["k"], middle)
    return {
        "centers": centers.tolist(),
        "returned": returned,
        "iterations": 0,  # one coreset; its k-means++ is post-processing
        "seconds": seconds,
        "peak_bytes": int(peak),
    }


if __name__ == "__main__":
    logging.disable(logging.WARNING)
    serve(run)

"""Run PE-means (Humphries et al., 2026; t3humphries/PE-means) on a batch of jobs.

Executed by the peer's own Python, with the PE-means checkout on its path (``src.pe_means_main``) and
Google's clustering package (its data type and loss) installed.  Calls the authors' entry points as their
experiment scripts do: ``pe_means`` for d <= 32, ``hdpe_means`` (a random projection to 16 dimensions,
then one noisy sum and count per cluster in the full space) above.  Settings are those of their
experiment scripts: their default parameters, ``int(4 sqrt(d))`` generations (times epsilon above 1),
``L = max(n / (5k), 4)`` mutants per survivor, ``run_id`` = the job's seed.  The data are shifted by the
centre of the declared bounds box and the radius is half the box's diagonal (``ball_of_box``); the
centers are shifted back and, when fewer than k come back, padded (``pad_to_k``).  One BLAS and one
OpenMP thread, as the authors' single-run script sets.

Seeded from the job: ``run_id`` seeds numpy's global generator (the mutations, the noise), and the
sphere-packing start, which the peer draws from ``pack_in_sphere``'s own ``RandomState(seed=None)`` -- fresh OS
entropy, whatever ``run_id`` -- gets a seed derived from the job's (``start_seed``: a stream apart from
``run_id``'s, so the start and the mutations are not the same draws).  ``pe_means`` takes no seed for it, so the
runner hands the peer's module a ``pack_in_sphere`` with that seed bound while a job runs; the peer's code is
unchanged.  A run is then a function of the data and the job's seed alone.

Input: the path of a JSON file {"data": "<.npy path>", "jobs": [{"k", "epsilon", "delta", "seed", "lower",
"upper"}], "memory": bool}.  Output: one JSON line per job on stdout: {"centers", "returned",
"iterations", "seconds", "peak_bytes"}.
"""

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[_var] = "1"

import contextlib  # noqa: E402
import functools  # noqa: E402
import io  # noqa: E402
import logging  # noqa: E402
import time  # noqa: E402
import tracemalloc  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import src.pe_means_main as peer  # noqa: E402
from _batch import ball_of_box, pad_to_k, serve  # noqa: E402
from clustering import clustering_params  # noqa: E402
from src.helpers import PE_PARAMS  # noqa: E402

HIGH_DIMENSION = 32  # the authors run hdpe_means above this (experiments/run_ours_HD.py)
START_STREAM = 1  # the job's seed spawns the start's seed on this stream (run_id seeds numpy's global one)


def start_seed(seed) -> int:
    """The sphere-packing start's seed (a RandomState seed, below 2^32) for the job's ``seed``."""
    return int(np.random.SeedSequence([int(seed), START_STREAM]).generate_state(1)[0])


@contextlib.contextmanager
def seeded_start(seed):
    """The peer's ``pack_in_sphere`` with ``seed`` bound while the job runs (its callers pass none)."""
    unseeded = peer.pack_in_sphere
    peer.pack_in_sphere = functools.partial(unseeded, seed=seed)
    try:
        yield
    finally:
        peer.pack_in_sphere = unseeded


def settings(n, d, k, epsilon, seed):
    """The authors' per-run configuration (experiments/run_ours.py)."""
    base = int(4 * np.sqrt(d))
    config = dict(PE_PARAMS)
    config.update(
        num_gen=max(int(epsilon * base), 1) if epsilon > 1 else max(base, 1),
        L=int(max(n / (5 * k), 4)),
        run_id=int(seed),
    )
    return config


def run(X, job, trace):
    n, d = X.shape
    middle, radius = ball_of_box(job, d)
    config = settings(n, d, job["k"], job["epsilon"], job["seed"])
    data = clustering_params.Data(X - middle, radius)
    privacy = clustering_params.DifferentialPrivacyParam(job["epsilon"], job["delta"])
    if trace:
        tracemalloc.start()
    start = time.perf_counter()
    quiet = contextlib.redirect_stdout(io.StringIO())  # stdout carries our JSON
    with warnings.catch_warnings(), quiet, seeded_start(start_seed(job["seed"])):
        warnings.simplefilter("ignore")
        if d > HIGH_DIMENSION:
            _, centers, _ = peer.hdpe_means(job["k"], data, config, privacy, visualize=False)
        else:
            _, centers, _ = peer.pe_means(job["k"], data, config, privacy, visualize=False)
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1] if trace else 0
    if trace:
        tracemalloc.stop()
    centers, returned = pad_to_k(centers, job["k"], middle)
    return {
        "centers": centers.tolist(),
        "returned": returned,
        "iterations": int(config["num_gen"]),  # generations (hdpe_means sets its own; see the note)
        "seconds": seconds,
        "peak_bytes": int(peak),
    }


if __name__ == "__main__":
    logging.disable(logging.WARNING)
    serve(run)

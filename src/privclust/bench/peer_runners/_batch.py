"""The runners' shared loop and helpers, imported from beside them (a runner's folder is first on its
interpreter's path).

Reads the JSON file named on the command line -- {"data": "<.npy path>", "jobs": [...], "memory": bool} --
and prints ``run(X, job, memory)`` for each job as one JSON line on stdout.
"""

import json
import sys

import numpy as np


def serve(run) -> None:
    with open(sys.argv[1]) as fh:
        spec = json.load(fh)
    X = np.load(spec["data"])
    for job in spec["jobs"]:
        print(json.dumps(run(X, job, spec.get("memory", False))), flush=True)


def ball_of_box(job, d):
    """(middle, radius) of the ball around the job's bounds box: its centre and half its diagonal.

    For a peer that wants every point within a radius of the origin: shift the data by ``middle`` (a public
    value) and pass ``radius``; every point of the box is inside."""
    lower = np.broadcast_to(np.asarray(job["lower"], dtype=float), (d,))
    upper = np.broadcast_to(np.asarray(job["upper"], dtype=float), (d,))
    return (lower + upper) / 2, float(np.linalg.norm(upper - lower) / 2)


def pad_to_k(centers, k, middle):
    """A peer's centers, shifted back by ``middle``, padded to ``k`` rows: (centers, how many it returned).

    The last center is repeated (the cost is unchanged); none at all: the box's centre, a public value."""
    centers = np.asarray(centers, dtype=float).reshape(-1, len(middle)) + middle
    returned = len(centers)
    filler = centers[-1:] if returned else middle[None, :]
    return np.vstack([centers, np.repeat(filler, k - returned, axis=0)]), returned

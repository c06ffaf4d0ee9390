"""The runners' shared loop, imported from beside them (a runner's folder is first on its interpreter's path).

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

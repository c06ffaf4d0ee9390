"""evolve with declared bounds 10x looser than the data: its NICV against the tight box's, beside FastLloyd's, on
four held-out 2-d mixtures (bench.synthetic specs; noise seeds 60-62, none of them tuned on).  Seeded noise, for the
comparison only (docs/algorithms.md, "evolve")."""

import warnings

import numpy as np

from privclust import KMeans
from privclust.bench import synthetic

warnings.filterwarnings("ignore", message="a seeded random_state")

SETS = (
    "synth:k=20,d=2,seed=41,n=3000",
    "synth:k=32,d=2,seed=42",
    "synth:k=10,d=2,seed=43,n=1500",
    "synth:k=64,d=2,seed=44",
)
for spec in SETS:
    ds = synthetic.from_spec(spec)
    for algorithm in ("evolve", "fastlloyd"):
        for eps in (0.1, 0.5, 1.0):
            cost = {}
            for half in (1.0, 10.0):
                fits = [
                    KMeans(ds.k, epsilon=eps, bounds=(-half, half), algorithm=algorithm, random_state=seed).fit(ds.X)
                    for seed in range(60, 63)
                ]
                cost[half] = np.mean([m.inertia_ / len(ds.X) for m in fits])
            print(f"{spec} {algorithm} eps={eps:g} tight={cost[1.0]:.4g} 10x={cost[10.0]:.4g}", flush=True)

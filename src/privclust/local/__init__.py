"""The local model: each user's point is randomized on their device; the server sees only reports.

* ``privclust.local.Protocol``: the public parameters a deployment shares;
* ``privclust.local.Randomizer``: a device's side (point in, report out);
* ``privclust.local.Aggregator``: the server's side (reports in, centers out);
* ``KMeans(..., privacy_model="local")``: the same protocol simulated, every row one user.
"""

from . import protocol
from .frequency import GeneralizedRR, LocalHashing, OneCoordinate, frequency_oracle
from .oracle import REPORT, LocalOracle, LocalQuery, LocalRound
from .protocol import *  # noqa: F403  (the deployment's API: protocol.__all__)

__all__ = [
    *protocol.__all__,
    "GeneralizedRR",
    "LocalHashing",
    "OneCoordinate",
    "frequency_oracle",
    "REPORT",
    "LocalOracle",
    "LocalQuery",
    "LocalRound",
]

"""The local model: each user's point is randomized on their device; the server sees only reports.

* ``privclust.local.Protocol``: the public parameters a deployment shares;
* ``privclust.local.Randomizer``: a device's side (point in, report out);
* ``privclust.local.Aggregator``: the server's side (reports in, centers out);
* ``KMeans(..., privacy_model="local")``: the same protocol simulated, every row one user.
"""

from .frequency import GeneralizedRR, LocalHashing, OneCoordinate, frequency_oracle
from .oracle import REPORT, LocalOracle, LocalQuery, LocalRound
from .protocol import (
    Aggregator,
    LocalResult,
    Protocol,
    Randomizer,
    ReportFile,
    WeakerGuaranteeError,
    check_report_count,
    check_reports,
    decode_reports,
    encode_reports,
    repeated_nonces,
    report_header,
)

__all__ = [
    "Protocol",
    "Randomizer",
    "Aggregator",
    "LocalResult",
    "encode_reports",
    "decode_reports",
    "check_reports",
    "check_report_count",
    "repeated_nonces",
    "report_header",
    "ReportFile",
    "WeakerGuaranteeError",
    "GeneralizedRR",
    "LocalHashing",
    "OneCoordinate",
    "frequency_oracle",
    "REPORT",
    "LocalOracle",
    "LocalQuery",
    "LocalRound",
]

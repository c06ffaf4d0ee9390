"""Federated FastLloyd: several parties cluster their joint rows; the server sees only masked values.

>>> server = FederatedServer(Job(n_clusters=3, epsilon=1, delta=1e-6, bounds=(-1, 1)), parties=3)  # doctest: +SKIP
>>> server.serve()                                   # in the server process          # doctest: +SKIP
>>> join(rows, server.address, party=0, parties=3)   # in each party's process        # doctest: +SKIP
"""

from .certs import client_context, make_certs, server_context
from .client import FederatedClientOracle, FederatedResult, JobLimits, join
from .server import FederatedServer, Job, ServerReport
from .wire import FederatedAbort, ProtocolError

__all__ = [
    "FederatedServer",
    "Job",
    "ServerReport",
    "FederatedClientOracle",
    "FederatedResult",
    "JobLimits",
    "join",
    "make_certs",
    "server_context",
    "client_context",
    "FederatedAbort",
    "ProtocolError",
]

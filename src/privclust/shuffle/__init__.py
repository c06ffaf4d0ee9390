"""The shuffle model: local reports, uniformly permuted by a shuffler before the server sees them.

Users run the local model's randomizer (``privclust.local``) at a larger local
epsilon_0; a :class:`Shuffler` -- a separate component a deployment can run on
its own machine -- permutes the reports uniformly and strips everything but the
reports themselves; by amplification by shuffling (``privacy.amplification``) the
server's view is (epsilon, delta)-DP.  The user asks for the central (epsilon,
delta) and privclust solves for the largest epsilon_0 that meets it.
"""

from ..privacy.amplification import closed_form_epsilon, local_epsilon_for, shuffle_delta, shuffle_epsilon
from .oracle import ShuffleOracle, Shuffler

__all__ = [
    "Shuffler",
    "ShuffleOracle",
    "shuffle_delta",
    "shuffle_epsilon",
    "local_epsilon_for",
    "closed_form_epsilon",
]

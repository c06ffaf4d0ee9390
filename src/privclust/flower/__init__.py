"""Federated FastLloyd as a Flower app: SecAgg+ sums, output masks only the clients remove, the server's noise.

``privclust.flower.app`` holds the ServerApp and ClientApp (they need ``flwr``: ``pip install
privclust[flower]``); ``privclust.flower.rounds`` the steps that need no Flower; and
``privclust.flower.local`` runs a whole federation as real processes on loopback (tests,
examples, ``privclust bench federated --engine flower``).  See docs/federated.md, "Flower".
"""

from .rounds import ClientRounds, from_limb_average, to_limbs

__all__ = ["ClientRounds", "to_limbs", "from_limb_average"]

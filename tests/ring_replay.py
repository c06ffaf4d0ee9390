"""A central replay of the federated protocol for bit-exact tests: exact party sums summed in the ring, no noise."""

from __future__ import annotations

from privclust.federated.ring import decode, encode
from privclust.geometry.domain import make_domain
from privclust.privacy.budget import Budget, PrivacyAccountant
from privclust.queries.base import Released
from privclust.queries.plan import ADAPTIVE, DENSE, Oracle, pooled_allotments
from privclust.queries.rows import MemoryRows


class RingReplay(Oracle):
    """Each round sums the fixed-point encoded exact sums of ``contributors(round)`` of the parties' rows."""

    capabilities = frozenset({DENSE, ADAPTIVE})

    def __init__(self, parts, bounds=(-1, 1), budget=Budget(1.0, 1e-6), contributors=None):
        d = parts[0].shape[1]
        domain = make_domain(bounds, d)
        self.local = [MemoryRows(p, d, transform=domain.to_unit) for p in parts]
        self.contributors = contributors or (lambda round_index: self.local)
        self.round = 0
        super().__init__(d, budget, PrivacyAccountant())

    def allot(self, parts, family):
        return pooled_allotments(self.budget, parts, family)

    def answer(self, requests):
        out = []
        for query, _ in requests:
            rows = self.contributors(self.round)
            self.round += 1
            values = decode(sum(encode(r.sums([query])[0]) for r in rows))
            out.append(Released({b.name: values[:, cols] for b, cols in query.block_slices()}))
        return out

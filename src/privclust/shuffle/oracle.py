"""The shuffler, and the shuffle model simulated end to end (every row one user)."""

from __future__ import annotations

import numpy as np

from ..local.oracle import DEFAULT_BUCKET_SHARE, LocalOracle, LocalRound
from ..local.secure import SecureRandom
from ..privacy.amplification import local_epsilon_for
from ..privacy.budget import REPLACE_ONE, Budget, PrivacyAccountant, Spend
from ..queries.rows import Rows

__all__ = ["Shuffler", "ShuffleOracle"]


class Shuffler:
    """Permutes a batch of reports uniformly at random; nothing else about a report's origin survives.

    The permutation is drawn from the OS CSPRNG (``local.secure``) unless a generator is given (tests and
    seeded experiments; a numpy generator is not cryptographically secure).  Amplification needs the server never to learn it: run the shuffler apart from the
    server (another machine or party), and send it reports stripped of sender metadata."""

    def __init__(self, rng: np.random.Generator | None = None):
        self._rng = rng

    def shuffle(self, reports: np.ndarray) -> np.ndarray:
        rng = self._rng if self._rng is not None else SecureRandom()
        return np.asarray(reports)[rng.permutation(len(reports))]


class ShuffleOracle(LocalOracle):
    """The shuffle model: the local round at the largest epsilon_0 whose shuffled reports are (epsilon, delta)-DP."""

    model = "the shuffle model (one round of shuffled reports, no adaptive rounds, no exact access)"

    def __init__(
        self,
        rows: Rows,
        budget: Budget,
        accountant: PrivacyAccountant,
        rng: np.random.Generator,
        seed: int,
        bucket_share: float = DEFAULT_BUCKET_SHARE,
    ):
        if budget.delta <= 0:
            raise ValueError("the shuffle model's guarantee is (epsilon, delta) with delta > 0: give a delta")
        super().__init__(rows, budget.epsilon, accountant, rng, seed, bucket_share)
        self.budget = budget
        self.local_epsilon = None  # solved when the round is designed: it needs the (public) number of reports

    def round_spend(self) -> Spend:
        return Spend(
            "shuffled reports: one per user, eps0-LDP, amplified by shuffling",
            epsilon=self.budget.epsilon,
            delta=self.budget.delta,
            relation=REPLACE_ONE,  # amplification by shuffling (FMT) is for one user's point replaced
        )

    def design(self, requests) -> LocalRound:
        n = self.rows.count()  # public in the shuffle model: the shuffler outputs one report per user
        if n < 2:
            raise ValueError("shuffling needs at least 2 users")
        # The largest eps0 whose shuffled reports meet (epsilon, delta) by the numerical bound (checked at the
        # target epsilon for every bisection step): what the spend states.
        self.local_epsilon = local_epsilon_for(self.budget.epsilon, self.budget.delta, n)
        return super().design(requests)

    def collect(self, round_: LocalRound) -> np.ndarray:
        return Shuffler(self.rng).shuffle(super().collect(round_))

"""The shuffler, and the shuffle model simulated end to end (every row one user)."""

from __future__ import annotations

import tempfile
from typing import Callable, Iterable

import numpy as np

from ..local.oracle import DEFAULT_BUCKET_SHARE, REPORT, LocalOracle, LocalRound
from ..local.secure import SecureRandom
from ..privacy.amplification import local_epsilon_for
from ..privacy.budget import REPLACE_ONE, Budget, PrivacyAccountant, Spend
from ..queries.rows import Rows

__all__ = ["Shuffler", "ShuffleOracle", "BUCKET_BYTES"]

BUCKET_BYTES = 32 * 2**20  # a streamed shuffle's buckets hold about this many bytes of reports each
MAX_BUCKETS = 512  # open files at once (beside the nonces' 256 parts, under the usual limit of 1024): then larger


class Shuffler:
    """Permutes a batch of reports uniformly at random; nothing else about a report's origin survives.

    The permutation is drawn from the OS CSPRNG (``local.secure``) unless a generator is given (tests and
    seeded experiments; a numpy generator is not cryptographically secure).  Amplification needs the server never to learn it: run the shuffler apart from the
    server (another machine or party), and send it reports stripped of sender metadata."""

    def __init__(self, rng: np.random.Generator | None = None):
        self._rng = rng

    def _random(self):
        return self._rng if self._rng is not None else SecureRandom()

    def shuffle(self, reports: np.ndarray) -> np.ndarray:
        return np.asarray(reports)[self._random().permutation(len(reports))]

    def shuffle_batch(self, protocol, batch: bytes, key=None) -> bytes:
        """The shuffler's output for the devices' ``batch`` (bytes, as ``Randomizer.reports`` makes them): its
        reports permuted, in a batch marked as shuffled and signed with ``key`` (a ``local.ShufflerKey``, the one a
        shuffle protocol names) -- the only batch a shuffle protocol's server takes as bytes (``Aggregator.add``).
        A batch already shuffled, or made for another protocol, is refused."""
        from ..local.protocol import decode_reports, encode_reports

        records = decode_reports(protocol, batch, shuffled=False)
        return encode_reports(protocol, self.shuffle(records), shuffled=True, key=key)

    def shuffle_stream(
        self,
        batches: Iterable[np.ndarray],
        total: int,
        write: Callable[[np.ndarray], object],
        before_writing: Callable[[], None] | None = None,
        scratch=None,
        bucket_bytes: int | None = None,
    ) -> int:
        """A uniform permutation of ``total`` records arriving in ``batches`` (too many, perhaps, for memory),
        handed to ``write`` a piece at a time; returns how many were written.

        Every record is sent to one of B buckets drawn uniformly and independently (B from the public
        ``total``: about ``bucket_bytes``, default :data:`BUCKET_BYTES`, of reports each, and at most
        :data:`MAX_BUCKETS`), each bucket a nameless private temporary file (``tempfile.TemporaryFile`` in
        ``scratch``); then each bucket is permuted uniformly in memory and written, bucket after bucket.

        The result is a uniform permutation: a given order of the n records arises from exactly one bucket
        assignment with sizes (n_1, ..., n_B) -- probability B^-n -- followed by the one permutation of each
        bucket that puts it in that order -- probability 1 / (n_1! ... n_B!) -- and summed over all sizes,
        sum multinomial(n; n_1..n_B) B^-n / n! = 1 / n!.  Memory: one batch, then one bucket.
        ``before_writing`` runs once every batch is read, before anything is written (a check that may
        refuse: the server must not see a stream the shuffler refuses)."""
        rng = self._random()
        bucket_bytes = BUCKET_BYTES if bucket_bytes is None else int(bucket_bytes)
        wanted = -(-max(1, int(total)) * REPORT.itemsize // bucket_bytes)
        buckets = [None] * int(min(MAX_BUCKETS, max(1, wanted)))
        dtype = None
        try:
            for batch in batches:
                batch = np.asarray(batch)
                dtype = batch.dtype
                if not batch.size:
                    continue
                which = np.asarray(rng.integers(0, len(buckets), size=batch.size), dtype=np.intp)
                order = np.argsort(which, kind="stable")
                ends = np.searchsorted(which[order], np.arange(len(buckets) + 1))
                ordered = batch[order]
                for i in np.flatnonzero(np.diff(ends)):
                    if buckets[i] is None:
                        buckets[i] = tempfile.TemporaryFile(dir=scratch, prefix=".privclust-shuffle-")
                    buckets[i].write(ordered[ends[i] : ends[i + 1]])
            if before_writing is not None:
                before_writing()
            written = 0
            for bucket in buckets:
                if bucket is None:
                    continue
                bucket.seek(0)
                records = np.frombuffer(bucket.read(), dtype=dtype)
                write(records[rng.permutation(records.size)])
                written += records.size
                bucket.close()
            return written
        finally:
            for bucket in buckets:
                if bucket is not None:
                    bucket.close()


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

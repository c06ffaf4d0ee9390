"""Continual counters: the noisy running sum of every bucket, released at every step of a public horizon.

A stream runs for a public horizon of T steps.  At step t every bucket b receives
an increment x_b(t) (a vector of width w: the sum of the value rows of the points
inserted into b at step t, minus those of the points deleted), and the counters
publish, after every step, an estimate of every bucket's prefix sum
S_b(t) = x_b(1) + ... + x_b(t).

**The binary-tree mechanism** (Dwork, Naor, Pitassi, Rothblum 2010; Chan, Shi,
Song 2011).  Level h = 0 .. L-1, L = floor(log2 T) + 1, cuts the steps into
dyadic intervals of 2^h steps; a node is an interval's exact sum plus fresh
N(0, sigma^2) noise per coordinate, drawn once, when the interval closes.  The
prefix [1, t] is the disjoint union of one closed node per set bit of t, so its
estimate sums at most L noisy nodes.  ``mechanism="tree"`` publishes exactly
that sum (variance sigma^2 popcount(t) per coordinate).

**The variance-optimal estimator** (Honaker 2015; the default,
``mechanism="honaker"``).  Every node also has two children whose own
estimates say something about its sum; the best linear unbiased estimate of a
node from its subtree is the inverse-variance combination of its own noisy value
(variance sigma^2) and the sum of its children's estimates (variance 2 v_{h-1}):
v_0 = sigma^2, 1 / v_h = 1 / sigma^2 + 1 / (2 v_{h-1}), which falls towards
sigma^2 / 2.  Online only the subtrees already closed are known, and the
prefix [1, t] uses exactly the closed subtrees of its dyadic decomposition
(every closed node lies in one of them), so summing their subtree estimates is
the best linear unbiased estimate of S(t) from everything released by step t.
It costs nothing more: the same nodes, post-processed.

**State and memory.**  A bucket keeps, per level, the exact sum of its open
interval and the estimate of its last closed left node (the only closed nodes a
later prefix or a later parent needs): 2 L w numbers, whatever the stream length.
Dense counters hold every bucket of a small declared universe; sparse counters
hold only the buckets some update ever touched.  A bucket first touched at step
s0 needs the estimates of the nodes that closed before s0 over an interval in
which it held nothing: those are pure noise, independent of everything else, so
they are drawn at s0 from their exact distribution (N(0, v_h) each) -- the
outputs have the same law as if every bucket of the universe had run from step 1.

**Sensitivity.**  An item contributes its clipped value v (|v| <= Delta) to the
leaf of the step it is inserted at, and -v to the leaf of the step it is deleted
at (if it is): one node per level on each of the two leaf-to-root paths (nodes
shared by both paths cancel).  The vector of all released nodes therefore moves
by at most sqrt(2 L) Delta in l2 norm (:func:`tree_sensitivity`), and releasing
every node with N(0, sigma^2) noise is (sqrt(2 L) Delta / sigma)-GDP -- for the
whole horizon, all buckets together, since an item touches one bucket of each
query (parallel composition) and every published estimate is post-processing of
the nodes.
"""

from __future__ import annotations

import math

import numpy as np

from ..privacy.noise import NoiseSource

__all__ = [
    "MECHANISMS",
    "tree_levels",
    "tree_sensitivity",
    "node_variances",
    "prefix_variance",
    "ContinualCounters",
]

MECHANISMS = ("honaker", "tree")


def tree_levels(horizon: int) -> int:
    """L = floor(log2 T) + 1: the levels whose nodes close within the horizon."""
    if int(horizon) < 1:
        raise ValueError(f"the horizon must be a positive number of steps, got {horizon!r}")
    return int(horizon).bit_length()


def tree_sensitivity(horizon: int) -> float:
    """The l2 distance between the released nodes of two neighbouring streams, per unit of an item's value:
    one insertion and its later deletion touch at most one node per level each (module docstring)."""
    return math.sqrt(2.0 * tree_levels(horizon))


def node_variances(levels: int, mechanism: str) -> np.ndarray:
    """Per level, the variance of a closed node's estimate in units of sigma^2."""
    if mechanism not in MECHANISMS:
        raise ValueError(f"mechanism must be one of {MECHANISMS}, got {mechanism!r}")
    v = np.ones(levels)
    if mechanism == "honaker":
        for h in range(1, levels):
            v[h] = 1.0 / (1.0 + 1.0 / (2.0 * v[h - 1]))
    return v


def _bits(t: int, levels: int) -> list[int]:
    return [h for h in range(levels) if (t >> h) & 1]


def prefix_variance(t: int, horizon: int, mechanism: str) -> float:
    """The variance of the estimate of S(t), per coordinate, in units of sigma^2."""
    v = node_variances(tree_levels(horizon), mechanism)
    return float(sum(v[h] for h in _bits(int(t), v.size)))


class ContinualCounters:
    """Continual counters for the buckets of one query (see the module docstring).

    ``column_std``: the node noise sigma of every value column; ``n_buckets``: allocate every bucket of
    a dense universe up front, or ``None`` for sparse counters that hold only the buckets touched."""

    def __init__(self, horizon: int, column_std, mechanism: str = "honaker", n_buckets: int | None = None):
        self.horizon = int(horizon)
        self.levels = tree_levels(self.horizon)
        self.mechanism = mechanism
        self.column_std = np.asarray(column_std, dtype=np.float64).reshape(-1)
        self.variances = node_variances(self.levels, mechanism)
        self.width = self.column_std.size
        self.step = 0
        self.dense = n_buckets is not None
        n = int(n_buckets) if self.dense else 0
        self.ids = np.arange(n, dtype=np.int64)
        self._open = np.zeros((n, self.levels, self.width))  # exact sums of the open interval of each level
        self._left = np.zeros((n, self.levels, self.width))  # estimates of the last closed node of each level
        self._sorted = np.arange(n, dtype=np.int64)  # rows by ascending id (sparse lookup)

    # -- updates ------------------------------------------------------------------------------------------

    def add(self, buckets: np.ndarray, values: np.ndarray, noise: NoiseSource) -> None:
        """Add the value rows of one step's updates (deletions carry negated values) to their buckets.
        ``noise`` draws the past of sparse buckets touched for the first time."""
        buckets = np.asarray(buckets, dtype=np.int64)
        keep = buckets >= 0
        if not keep.any():
            return
        ids, inverse = np.unique(buckets[keep], return_inverse=True)
        sums = np.zeros((ids.size, self.width))
        np.add.at(sums, inverse, values[keep])
        rows = self._rows(ids, noise)
        self._open[rows] += sums[:, None, :]

    def _rows(self, ids: np.ndarray, noise: NoiseSource) -> np.ndarray:
        """The storage rows of bucket ``ids`` (sorted, distinct), creating sparse ones on first touch."""
        if self.dense:
            if ids.size and (ids[0] < 0 or ids[-1] >= self.ids.size):
                raise ValueError("a contribution names a bucket outside the query's universe")
            return ids
        known = self.ids[self._sorted]
        at = np.searchsorted(known, ids)
        found = at < known.size
        found[found] = known[at[found]] == ids[found]
        rows = np.empty(ids.size, dtype=np.int64)
        rows[found] = self._sorted[at[found]]
        new = ids[~found]
        if new.size:
            start = self.ids.size
            self.ids = np.concatenate([self.ids, new])
            self._open = np.concatenate([self._open, np.zeros((new.size, self.levels, self.width))])
            self._left = np.concatenate([self._left, self._past(new.size, noise)])
            self._sorted = np.argsort(self.ids, kind="stable")
            rows[~found] = start + np.arange(new.size)
        return rows

    def _past(self, count: int, noise: NoiseSource) -> np.ndarray:
        """The closed left nodes of buckets that held nothing so far: pure noise of each node's variance."""
        left = np.zeros((count, self.levels, self.width))
        for h in _bits(self.step, self.levels):
            for cols, std in self._column_groups():
                left[:, h, cols] = noise.add_gaussian(left[:, h, cols], std * math.sqrt(self.variances[h]))
        return left

    def _column_groups(self):
        """(columns, sigma) for each run of columns sharing one sigma (one block of a query)."""
        start = 0
        for j in range(1, self.width + 1):
            if j == self.width or self.column_std[j] != self.column_std[start]:
                yield slice(start, j), float(self.column_std[start])
                start = j

    def end_step(self, noise: NoiseSource) -> None:
        """Close step t + 1: every interval ending there becomes a node.  The noise of all the nodes that close
        is drawn at once, one call per block of columns (one secure-noise vector per block and step)."""
        if self.step >= self.horizon:
            raise ValueError(f"the counters' horizon of {self.horizon} steps is over")
        self.step += 1
        t = self.step
        top = (t & -t).bit_length() - 1  # levels 0..top close at t; level top is a left child (bit set)
        # The plain tree publishes only left children: the right children below ``top`` are never used, so
        # their noise is not drawn (releasing fewer nodes costs nothing).  Honaker's estimator uses them all.
        first = top if self.mechanism == "tree" else 0
        nodes = np.empty_like(self._open[:, first : top + 1])
        for cols, std in self._column_groups():
            nodes[..., cols] = noise.add_gaussian(self._open[:, first : top + 1, cols], std)
        self._open[:, : top + 1] = 0.0
        below = None  # the estimate of the right child just closed one level down
        for h in range(first, top + 1):
            node = nodes[:, h - first]
            if self.mechanism == "honaker" and h > 0:
                kids = self._left[:, h - 1] + below  # the left child (closed earlier) and the right one
                own, spread = 1.0, 2.0 * self.variances[h - 1]  # variances in units of sigma^2
                node = (node / own + kids / spread) / (1.0 / own + 1.0 / spread)
            below = node
        self._left[:, top] = below  # a left child: kept for later prefixes and for its parent

    # -- what is published ---------------------------------------------------------------------------------

    def estimates(self) -> np.ndarray:
        """The estimate of every stored bucket's prefix sum at the current step (rows in ``ids`` order)."""
        bits = _bits(self.step, self.levels)
        if not bits:
            return np.zeros((self.ids.size, self.width))
        return self._left[:, bits].sum(axis=1)

    def std(self) -> np.ndarray:
        """The noise standard deviation of every column's current estimates."""
        return self.column_std * math.sqrt(prefix_variance(self.step, self.horizon, self.mechanism))

    @property
    def nbytes(self) -> int:
        return int(self.ids.nbytes + self._open.nbytes + self._left.nbytes + self._sorted.nbytes)

    # -- durable state -------------------------------------------------------------------------------------

    def state(self) -> dict[str, np.ndarray]:
        return {"ids": self.ids, "open": self._open, "left": self._left, "step": np.array(self.step)}

    def restore(self, state: dict[str, np.ndarray]) -> None:
        shape = (state["ids"].size, self.levels, self.width)
        if state["open"].shape != shape or state["left"].shape != shape:
            raise ValueError("the saved counters do not have this query's shape")
        if self.dense and state["ids"].size != self.ids.size:
            raise ValueError("the saved counters do not cover this query's buckets")
        self.ids = np.asarray(state["ids"], dtype=np.int64)
        self._open = np.array(state["open"], dtype=np.float64)
        self._left = np.array(state["left"], dtype=np.float64)
        self._sorted = np.argsort(self.ids, kind="stable")
        self.step = int(state["step"])

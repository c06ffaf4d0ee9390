"""``ContinualKMeans``: fresh private centers after every step of a data set that changes.

The simplest correct design, and the one Dupré la Tour, Henzinger & Saulpic (2024) proves: the public geometry
-- the greedy's levels of balls (and its JL projection above d = 4) and the
public grid of its lifting -- is fixed at construction from the bounds and the
seed; the greedy's queries over it are declared once to a
:class:`~privclust.stream.oracle.ContinualOracle`, whose continual counters
answer them after every step; and the greedy's own post-processing
(``algorithms.greedy``: noise floor, argmax selection, lifting, boosting)
turns each step's noisy answers into that step's centers.  Everything a caller
sees -- centers, ``step_``, ``privacy_spent_``, errors, the state file's
public part -- is a function of the public parameters and of the counters'
published estimates.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import uuid
import zipfile
from pathlib import Path

import numpy as np

from .._validation import check_data, check_delta, check_epsilon, check_int, check_n_clusters
from ..algorithms.greedy import greedy_centers, greedy_round, greedy_spec, solution_cost
from ..geometry.domain import make_domain
from ..io import StagedFiles
from ..privacy.budget import Budget, PrivacyAccountant, PrivacyReport
from ..privacy.leaks import warn_if_seeded
from ..queries.curator import Curated
from ..session import open_session
from .counters import MECHANISMS
from .oracle import ContinualOracle, HorizonError, StepNoise

__all__ = ["ContinualKMeans", "ALGORITHMS", "MAX_HORIZON", "FORMAT"]

ALGORITHMS = ("greedy",)
MAX_HORIZON = 2**40  # a public cap: the tree has one level per bit of the horizon
FORMAT = "privclust continual state 1"
# Independent seeded streams derived from one seed: public geometry, node noise, per-step post-processing.
_GEOMETRY, _NOISE, _POST = 0, 1, 2


def _json_bounds(bounds):
    if isinstance(bounds, dict):
        return {key: float(value) for key, value in bounds.items()}
    if np.ndim(bounds) == 0:
        return float(bounds)
    return np.asarray(bounds, dtype=np.float64).tolist()


class ContinualKMeans:
    """Private k-means centers under continual observation (Dupré la Tour, Henzinger & Saulpic 2024): one solution per step.

    Parameters
    ----------
    n_clusters, epsilon, delta, bounds :
        As for :class:`privclust.KMeans`; ``bounds`` is the public domain (rows outside are clipped to
        it).  The guarantee (epsilon, delta) covers everything published over the whole horizon, for
        streams that differ by one item's insertion and possibly its later deletion.
    horizon :
        The public number of steps T.  Noise grows with log T; updates past it are refused.
    algorithm :
        ``"greedy"`` (the private greedy of Dupré la Tour, Henzinger & Saulpic (2024) -- the one algorithm proven here).
    mechanism :
        ``"honaker"`` (default: the binary tree with the variance-optimal estimator) or ``"tree"``.
    random_state :
        ``None``: secure noise (OpenDP samplers, OS entropy).  An int: reproducible seeded noise, for
        experiments only -- a resumed stream then gives exactly the outputs of an uninterrupted one.
    n_features :
        The number of features (public: the schema); by default read off the first update.
    algorithm_params :
        The greedy's options (``algorithms.greedy``), e.g. ``{"levels": 7}``.
    accountant :
        A shared :class:`~privclust.privacy.budget.PrivacyAccountant` the stream's spends are charged to.
    """

    def __init__(
        self,
        n_clusters: int,
        epsilon: float,
        delta: float,
        bounds,
        horizon: int,
        algorithm: str = "greedy",
        random_state: int | None = None,
        mechanism: str = "honaker",
        n_features: int | None = None,
        algorithm_params: dict | None = None,
        accountant: PrivacyAccountant | None = None,
    ):
        self.n_clusters = check_n_clusters(n_clusters)
        self.epsilon = check_epsilon(epsilon)
        self.delta = check_delta(delta)
        if self.delta <= 0:
            raise ValueError("continual observation adds Gaussian noise: it needs delta > 0 (e.g. 1e-6)")
        self.horizon = check_int("horizon", horizon, 1, MAX_HORIZON)
        if algorithm not in ALGORITHMS:
            raise ValueError(f"algorithm must be one of {ALGORITHMS} under continual observation, got {algorithm!r}")
        if mechanism not in MECHANISMS:
            raise ValueError(f"mechanism must be one of {MECHANISMS}, got {mechanism!r}")
        if random_state is not None:
            random_state = check_int("random_state", random_state, 0, 2**128 - 1)
        warn_if_seeded(random_state)  # it seeds the node noise too, not only the public geometry
        self.algorithm, self.mechanism, self.random_state = algorithm, mechanism, random_state
        self.bounds = _json_bounds(bounds)
        self.algorithm_params = dict(algorithm_params or {})
        if int(self.algorithm_params.get("restarts", 1) or 1) != 1:
            raise ValueError("restarts are not supported under continual observation (one greedy run per step)")
        # The seed of the public geometry and of seeded noise: drawn now when the noise is secure (the
        # geometry is public, so it is kept in the state file; the noise is not reproducible then).
        self._seed = random_state if random_state is not None else secrets.randbits(128)
        self._parent = accountant
        # A public name for this stream, kept in its state file (and, with a ledger, in the ledger entry that
        # charges it), so an older copy of the state can be recognised and refused (``privclust stream``).
        self.run_id_ = uuid.uuid4().hex
        self.ledger_: str | None = None  # the ledger file the stream is charged to, if any (``privclust stream``)
        self.step_ = 0
        self.centers_: np.ndarray | None = None
        self.n_features_ = None
        if n_features is not None:
            self._start(check_int("n_features", n_features, 1, 10**6))

    # -- set-up (public only) ------------------------------------------------------------------------------

    def _sequence(self, *key: int) -> np.random.SeedSequence:
        return np.random.SeedSequence(self._seed, spawn_key=key)

    def _start(self, n_features: int) -> None:
        """Fix the public geometry, declare the greedy's queries and charge the whole horizon's spends."""
        self.n_features_ = n_features

        def continual(accountant, randomness):  # secure noise unless seeded, from the stream's own sequence
            noise = StepNoise(None if self.random_state is None else self._sequence(_NOISE))
            oracle = ContinualOracle(n_features, budget, accountant, self.horizon, noise, self.mechanism)
            return Curated(oracle, make_domain(self.bounds, n_features), n_features, None)

        budget = Budget(self.epsilon, self.delta)
        # The seed fixes the public geometry; the node noise is seeded by its own sequence (``_NOISE``).
        setup = open_session(
            budget, self.bounds, parent=self._parent, random_state=self._seed, oracle=continual, seeded_noise=False
        )
        with setup as session:
            self.domain_, self.accountant_, self.oracle_ = session.domain, session.accountant, session.oracle
            self.spec_ = greedy_spec(session.context(self.n_clusters, options={"params": self.algorithm_params}))
            plan = self.spec_.open(self.oracle_)
            self._round = greedy_round(self.spec_, n_features, np.random.default_rng(self._sequence(_GEOMETRY)))
            plan.release_many(self._round.requests)  # the levels' and the lifting's (no adaptive rounds)

    @property
    def privacy_spent_(self) -> PrivacyReport | None:
        """What the stream spends for its whole horizon (charged when its queries are declared)."""
        return self.accountant_.report() if self.n_features_ is not None else None

    # -- the stream ----------------------------------------------------------------------------------------

    def _rows(self, rows, what: str) -> np.ndarray | None:
        if rows is None:
            return None
        arr = check_data(rows, what=what)
        if self.n_features_ is None:
            self._start(arr.shape[1])
        if arr.shape[1] != self.n_features_:
            raise ValueError(f"{what} has {arr.shape[1]} features; this stream has {self.n_features_}")
        return arr

    def update(self, insert=None, delete=None, publish: bool = True) -> np.ndarray | None:
        """Apply one step -- rows inserted and rows deleted -- and return that step's centers (``publish``;
        else ``None``: a service may ingest every step and compute centers only at some, see :meth:`publish`).

        Deleting rows that were never inserted is the caller's error: it is not (and cannot privately be)
        checked; the counters then estimate the running sum of the updates as given (see
        ``stream.oracle``).  Past the horizon, :class:`HorizonError` and nothing changes."""
        if self.step_ >= self.horizon:
            raise HorizonError(
                f"the stream's horizon of {self.horizon} steps is over: no update was applied. The guarantee "
                "covers the declared horizon only; start a new stream (with its own budget) to go on."
            )
        inserted, deleted = self._rows(insert, "insert"), self._rows(delete, "delete")
        if self.n_features_ is None:
            raise ValueError("the first update needs rows (the number of features is read off them)")
        unit = [None if rows is None else self.domain_.to_unit(np.array(rows)) for rows in (inserted, deleted)]
        self.oracle_.update(*unit)
        self.step_ = self.oracle_.step
        self.centers_ = None
        return self.publish() if publish else None

    def publish(self) -> np.ndarray:
        """The current step's centers (also ``centers_``): the greedy's post-processing of the step's
        published estimates -- free, and the same whenever it is called within the step."""
        rng = np.random.default_rng(self._sequence(_POST, self.step_))
        _, lifted = greedy_centers(self._round, self.oracle_.releases(), rng)
        final, _ = solution_cost(lifted, self.n_clusters, rng)
        self.centers_ = self.domain_.from_unit(final)
        return self.centers_

    # -- durable state -------------------------------------------------------------------------------------

    def config(self) -> dict:
        """The public configuration a state file must match (the seed only when the noise is seeded)."""
        return {
            "format": FORMAT,
            "n_clusters": self.n_clusters,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "bounds": self.bounds,
            "horizon": self.horizon,
            "algorithm": self.algorithm,
            "mechanism": self.mechanism,
            "algorithm_params": self.algorithm_params,
            "random_state": self.random_state,
        }

    def save(self, path) -> None:
        """Write the stream's whole state to ``path`` (npz, no pickle), atomically: a temporary file
        beside it, readable by its owner only (mode 0600), synced and renamed into place.  **The file is
        private**: it holds exact running sums."""
        path = Path(path)
        arrays = {"step": np.array(self.step_)}
        header = dict(self.config(), seed=str(self._seed), n_features=self.n_features_, run_id=self.run_id_)
        header["ledger"] = self.ledger_
        if self.n_features_ is not None:
            for i, counters in enumerate(self.oracle_.counters):
                for name, value in counters.state().items():
                    arrays[f"q{i}_{name}"] = value
            if self.centers_ is not None:
                arrays["centers"] = self.centers_
        arrays["header"] = np.array(json.dumps(header, sort_keys=True))
        arrays["checksum"] = np.array(_checksum(arrays))
        with StagedFiles() as staged:
            temporary = staged.reserve(path, "the state file", private=True)
            with open(temporary, "wb") as out:  # a file object: no ".npz" appended
                np.savez(out, **arrays)
            staged.commit()  # synced, mode 0600, renamed into place

    @classmethod
    def load(cls, path, expect: "ContinualKMeans | dict | None" = None, accountant=None) -> "ContinualKMeans":
        """Resume a stream saved by :meth:`save`.  With ``expect`` (a stream, or its :meth:`config`), a file
        from any other configuration is refused.  The resumed stream's ledger records the horizon's spends
        again -- the same release, not a new one: do not pass an ``accountant`` that already holds them."""
        if not Path(path).is_file():
            raise FileNotFoundError(f"no state file at {path}")
        try:
            with np.load(Path(path), allow_pickle=False) as data:
                arrays = {name: data[name] for name in data.files}
        except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as exc:
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ValueError(f"{path} is not a privclust stream state file ({reason})") from None
        checksum = arrays.pop("checksum", None)
        if checksum is None or "header" not in arrays or str(checksum) != _checksum(arrays):
            raise ValueError(f"{path} is not an intact privclust stream state file (missing parts or checksum)")
        header = json.loads(str(arrays["header"]))
        if header.get("format") != FORMAT:
            raise ValueError(f"{path} has state format {header.get('format')!r}; this version reads {FORMAT!r}")
        if expect is not None:
            wanted = expect.config() if isinstance(expect, ContinualKMeans) else dict(expect)
            saved = {key: header.get(key) for key in wanted}
            if wanted.get("random_state") is None:  # secure noise: the saved geometry seed is the stream's own
                saved.pop("random_state", None)
                wanted.pop("random_state", None)
            differ = sorted(key for key in wanted if json.dumps(wanted[key]) != json.dumps(saved.get(key)))
            if differ:
                raise ValueError(f"{path} is the state of a stream with another configuration ({', '.join(differ)})")
        model = cls(
            header["n_clusters"],
            header["epsilon"],
            header["delta"],
            header["bounds"],
            header["horizon"],
            header["algorithm"],
            header["random_state"],
            header["mechanism"],
            header["n_features"],
            header["algorithm_params"],
            accountant,
        )
        model._seed = int(header["seed"])
        model.run_id_ = str(header.get("run_id") or model.run_id_)
        model.ledger_ = header.get("ledger")
        if header["n_features"] is not None:
            model._start(int(header["n_features"]))  # the same geometry and queries, from the same seed
            for i, counters in enumerate(model.oracle_.counters):
                names = ("ids", "open", "left", "step")
                if any(f"q{i}_{name}" not in arrays for name in names):
                    raise ValueError(f"{path} does not hold this configuration's counters")
                counters.restore({name: arrays[f"q{i}_{name}"] for name in names})
            if f"q{len(model.oracle_.counters)}_ids" in arrays:
                raise ValueError(f"{path} holds counters this configuration does not have")
        model.step_ = int(arrays["step"])
        model.centers_ = arrays.get("centers")
        return model


def _checksum(arrays: dict[str, np.ndarray]) -> str:
    digest = hashlib.sha256()
    for name in sorted(arrays):
        value = np.ascontiguousarray(arrays[name])
        digest.update(name.encode())
        digest.update(str(value.dtype).encode() + str(value.shape).encode())
        digest.update(value.tobytes())
    return digest.hexdigest()

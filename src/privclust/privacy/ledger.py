"""A privacy budget kept in a file: every run, in any process, that names the file spends from it.

The in-memory :class:`~privclust.privacy.budget.PrivacyAccountant` composes the spends of one
Python process.  Runs of the command line are separate processes, and a data set's budget must
cover all of them: :class:`LedgerAccountant` keeps the budget and every spend in a JSON file, rereads
it before every check and appends to it under an exclusive lock, so spends from several processes
compose as if they had been made in one.

The file (``privclust ledger show FILE`` prints it)::

    {"format": "privclust-ledger", "version": 2,
     "budget": {"epsilon": 3.0, "delta": 1e-05},
     "entries": [{"id": "...", "time": "2025-...", "about": {"command": "fit", ...},
                  "reserved": null, "spends": [{"label": "...", "mu": 0.21}, ...]}, ...],
     "total": {"epsilon": 0.0, "delta": 0.0, "mu": 0.21},
     "checksum": "sha256:..."}

The file checks itself, and a file that fails the check is never spent from (:func:`inspect_ledger`
reads it for display): every value is finite and non-negative (a delta below 1), the budget is a
valid :class:`Budget`, ``total`` -- the (epsilon, delta) spends added up and the mu-GDP spends
composed, open reservations included -- matches the entries, and ``checksum`` is the SHA-256 of
the rest of the content (canonical JSON: sorted keys, no spaces).  This catches mistakes and careless
edits (a NaN, a negative spend, a removed entry, a raised budget); it cannot stop someone who rewrites
the file and recomputes its checksum -- the owner of the file can always reset it.  Version-1 files
(no total, no checksum) are not spent from until ``privclust ledger upgrade FILE`` (:func:`upgrade_ledger`)
checks their values and adds the checksum.

An entry is either a run (:meth:`LedgerAccountant.run`: the whole request is *reserved* before any
data is read and replaced by the run's exact spends when it ends) or the spends one accountant object
recorded directly (``KMeans(accountant=LedgerAccountant(path))``).  The total is the composition of
every spend and every open reservation (a run that was killed keeps its whole request charged), with
the Gaussian spends composed exactly in GDP and converted at the budget's delta.

Writes are atomic (a temporary file in the same folder, then ``os.replace``), so a reader never sees
half a ledger and a crash leaves the previous version.  The lock is ``flock`` on a companion file
``FILE.lock`` (the ledger itself is replaced on every write, so it cannot carry the lock).  A path is
resolved to the real file first (``os.path.realpath``): a ledger reached through a symbolic link is
locked and replaced where it really is, so the link stays a link and every name for the file spends
from one budget.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import math
import os
import tempfile
import threading
import uuid
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable, Iterator

from . import budget as _budget
from .budget import ADD_REMOVE, Budget, BudgetExceededError, Cover, PrivacyAccountant, PrivacyReport, Spend
from .gdp import gdp_mu

__all__ = ["LedgerAccountant", "LedgerError", "inspect_ledger", "upgrade_ledger"]

FORMAT = "privclust-ledger"
VERSION = 2
_REL_TOLERANCE = 1e-12  # the stored total against the one recomputed (the same sums, so equal in practice)

RECOVER = (
    "not spending from it. See what changed with 'privclust ledger show {path}'; restore the file from a "
    "backup, or start a new ledger (privclust ledger init NEW ...) with the budget that really remains"
)


class LedgerError(ValueError):
    """The ledger file is missing, unreadable, or not a privclust ledger."""


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _spend_to_json(spend: Spend) -> dict:
    return spend.as_dict()


def _spend_from_json(item: dict) -> Spend:
    relation = str(item.get("relation", ADD_REMOVE))  # files written before the field: add/remove
    if "mu" in item:
        return Spend(label=str(item["label"]), mu=float(item["mu"]), relation=relation)
    return Spend(
        label=str(item["label"]),
        epsilon=float(item["epsilon"]),
        delta=float(item.get("delta", 0.0)),
        relation=relation,
    )


class LedgerAccountant(PrivacyAccountant):
    """A :class:`PrivacyAccountant` whose budget and spends live in a JSON file shared across processes.

    Every check rereads the file; every spend is checked and appended under an exclusive lock
    (``fcntl.flock`` on ``FILE.lock``), and the file is replaced atomically.  So two processes can
    never both pass a check for budget that only one of them may spend: the second is refused.

    Unlike the in-memory accountant, which refuses to be pickled (a copy would spend the same budget
    unseen), this one may be pickled and sent to other processes: it carries only the file's path,
    and every copy reads and appends to the same file, so their spends compose.

    Use :meth:`create` to start a ledger with a budget, ``LedgerAccountant(path)`` to open one, and
    :meth:`run` to reserve a whole run's request before it reads any data.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = _real(path)
        self._entry_id = f"direct-{uuid.uuid4().hex[:12]}"  # where this object's direct spends go
        state = self._load()
        super().__init__(Budget(**state["budget"]), parent=None)
        self._refresh(state)

    # -- creating and opening ---------------------------------------------------------------------------

    @classmethod
    def create(cls, path: str | os.PathLike, budget: Budget) -> "LedgerAccountant":
        """A new ledger file at ``path`` with ``budget``; refuses to replace an existing one."""
        if not isinstance(budget, Budget):
            raise TypeError("budget must be a privclust Budget(epsilon, delta)")
        path = _real(path)
        if not path.parent.is_dir():
            raise LedgerError(f"cannot create the ledger {path}: the folder {path.parent} does not exist")
        with _locked(path):
            if path.exists():
                raise LedgerError(f"{path} exists already; open it instead of creating it")
            _write(path, {"format": FORMAT, "version": VERSION, "budget": _budget_json(budget), "entries": []})
        return cls(path)

    @classmethod
    def open(cls, path: str | os.PathLike, budget: Budget | None = None) -> "LedgerAccountant":
        """Open the ledger at ``path``; if it does not exist, create it with ``budget`` (required then).

        A ``budget`` given for an existing ledger must be the one it was created with: a budget is set
        once, not changed run by run."""
        path = _real(path)
        if not path.exists():
            if budget is None:
                raise LedgerError(
                    f"no ledger at {path}: create it with a total budget first "
                    f"(privclust ledger init {path} --epsilon E --delta D, or --ledger-budget E,D)"
                )
            try:
                return cls.create(path, budget)
            except LedgerError:
                if not path.exists():
                    raise  # else another process created it meanwhile: open theirs
        ledger = cls(path)
        if budget is not None and (budget.epsilon, budget.delta) != (ledger.budget.epsilon, ledger.budget.delta):
            raise LedgerError(
                f"{path} has the budget (epsilon={ledger.budget.epsilon:g}, delta={ledger.budget.delta:g}), "
                f"not (epsilon={budget.epsilon:g}, delta={budget.delta:g}); a ledger's budget is fixed when it "
                "is created"
            )
        return ledger

    def __reduce__(self):
        # Only the path travels: the copy rereads the shared file (see the class docstring).
        return (type(self), (str(self.path),))

    # -- the accountant's interface, backed by the file ------------------------------------------------

    @property
    def spends(self) -> list[Spend]:
        """Everything the file charges, in order: recorded spends, and each open reservation as one step."""
        self._refresh()
        return list(self._spends)

    def guarantee(self, delta: float | None = None, extra: Iterable[Spend] = ()) -> tuple[float, float]:
        self._refresh()
        return super().guarantee(delta, extra)

    def check(self, planned: Iterable[Spend]) -> None:
        """Raise :class:`BudgetExceededError` if ``planned`` would take the file's total past its budget."""
        planned = list(planned)
        self._refresh()  # the file is replaced atomically: reading it needs no lock
        super().check(planned)

    def spend(self, spend: Spend) -> None:
        """Check ``spend`` against the file as it is now and append it, both under the lock."""
        with _locked(self.path):
            state = self._refresh()
            super().check([spend])
            entry = next((e for e in state["entries"] if e["id"] == self._entry_id), None)
            if entry is None:
                entry = {"id": self._entry_id, "time": _now(), "about": {"recorded by": "accountant"}}
                entry.update(reserved=None, spends=[])
                state["entries"].append(entry)
            entry["spends"].append(_spend_to_json(spend))
            _write(self.path, state)
            self._refresh(state)

    def _record(self, spend: Spend) -> None:
        # A child accountant (a fit's own ledger) checked this spend against us and now records it; another
        # process may have spent in between, so the check is repeated under the lock, with the append.
        self.spend(spend)

    def report(self, delta: float | None = None) -> PrivacyReport:
        """The total and every step in the file; an open reservation is a step of its whole request."""
        self._refresh()
        return super().report(delta)

    # -- runs: reserve the request, settle with the exact spends --------------------------------------

    @contextmanager
    def run(self, epsilon: float, delta: float, about: dict | None = None) -> Iterator[PrivacyAccountant]:
        """Reserve one run's budget -- refused now, before the run reads any data, if it cannot fit -- and
        yield an in-memory accountant to give the run (``accountant=``).

        When the block ends, however it ends, the reservation is replaced by what that accountant
        recorded: the run's exact spends.  A run that spent nothing leaves no entry; a process killed
        inside the block leaves its reservation charged.  A non-private run (``epsilon = inf``) is
        refused by any ledger.

        **The reservation takes the shape of the run's plan.**  At the start it is the run's request as
        an (epsilon, delta) spend, or -- when that does not fit beside the file's Gaussian spends, which
        basic composition would leave no delta to be converted at -- as the mu-GDP spend
        ``gdp_mu(epsilon, delta)``.  When the run checks its plan (before it reads any row) the
        reservation becomes the plan's *cover*: its Gaussian spends composed (one mu), its other
        epsilons and deltas added.  Every later check grows the cover if it must (the union with what
        was covered before), under the lock and against the file; every spend is covered when it is made.  The file's total is monotone in
        each part of a cover, so the reservation always bounds what the run records, whoever else
        spends meanwhile; and the yielded accountant also keeps the run within its own
        (epsilon, delta)."""
        entry_id = f"run-{uuid.uuid4().hex[:12]}"
        if math.isinf(epsilon):
            raise BudgetExceededError("a non-private run cannot be charged to a finite privacy budget")
        budget = Budget(epsilon, delta)
        shapes = [Cover(epsilon=epsilon, delta=delta)]
        if delta > 0:  # mu-GDP at delta = 0 is epsilon = inf
            shapes.append(Cover(mu=gdp_mu(epsilon, delta)))
        with _locked(self.path):
            state = self._refresh()
            for shape in shapes:
                try:
                    super().check(shape.spends(entry_id))
                    break
                except BudgetExceededError:
                    if shape is shapes[-1]:
                        raise
            entry = {"id": entry_id, "time": _now(), "about": dict(about or {})}
            entry.update(reserved=[_spend_to_json(s) for s in shape.spends(entry_id)], spends=[])
            state["entries"].append(entry)
            _write(self.path, state)
        collector = _LedgerRun(budget, self, entry_id, shape)
        try:
            yield collector
        finally:
            # No check or spend of the run is in flight while it settles, and none is admitted after: the
            # accountant may outlive the block, and a spend it approved then would reach no file.
            with _budget._spending, collector._lock:
                collector._closed = True
                self._settle(entry_id, collector.spends)

    def _reshape(self, entry_id: str, cover: "Cover") -> None:
        """Replace the open run ``entry_id``'s reservation by ``cover``, if the file's budget admits it."""
        with _locked(self.path):
            state = self._refresh()
            entry = next((e for e in state["entries"] if e["id"] == entry_id), None)
            if entry is None or entry.get("reserved") is None:  # settled (an empty list is an empty cover)
                raise LedgerError(
                    f"{self.path} no longer holds this run's reservation ({entry_id}); nothing was released"
                )
            entry["reserved"] = [_spend_to_json(s) for s in cover.spends(entry_id)]
            self._refresh(state)
            try:
                super().check([])
            except BudgetExceededError:
                self._refresh()
                raise
            _write(self.path, state)

    def _settle(self, entry_id: str, spends: list[Spend]) -> None:
        with _locked(self.path):
            state = self._load()
            entries = state["entries"]
            at = next((i for i, e in enumerate(entries) if e["id"] == entry_id), None)
            if not spends:  # nothing was released: the run costs nothing and leaves no entry
                if at is not None:
                    del entries[at]
            else:  # recorded whatever the budget says now: these releases happened
                entry = entries[at] if at is not None else {"id": entry_id, "time": _now(), "about": {}}
                entry.update(reserved=None, spends=[_spend_to_json(s) for s in spends])
                if at is None:
                    entries.append(entry)
            _write(self.path, state)
            self._refresh(state)

    # -- continual streams (privclust stream): a stream's last published step, in its entry's "about" ----

    def stream_step(self, run_id: str) -> int | None:
        """The last step recorded for the stream ``run_id`` (``about["stream run"]``), or ``None``."""
        for entry in self._load()["entries"]:
            about = entry.get("about") or {}
            if about.get("stream run") == run_id:
                return int(about.get("stream step", 0))
        return None

    def record_stream_step(self, run_id: str, step: int) -> None:
        """Record, under the lock, that the stream ``run_id`` has published up to ``step`` (never lowered)."""
        with _locked(self.path):
            state = self._load()
            entry = next((e for e in state["entries"] if (e.get("about") or {}).get("stream run") == run_id), None)
            if entry is None:
                raise LedgerError(f"{self.path} has no entry for the stream {run_id}")
            entry["about"]["stream step"] = max(int(entry["about"].get("stream step", 0)), int(step))
            _write(self.path, state)
            self._refresh(state)

    # -- the file ---------------------------------------------------------------------------------------

    def entries(self) -> list[dict]:
        """The file's entries as stored (for display)."""
        return self._load()["entries"]

    def _refresh(self, state: dict | None = None) -> dict:
        """Reread the file (unless ``state`` is given) into the in-memory fields the base class composes."""
        state = self._load() if state is None else state
        self.budget = Budget(**state["budget"])
        steps = []
        for entry in state["entries"]:
            steps.extend(_spend_from_json(s) for s in entry["spends"])
            steps.extend(_spend_from_json(s) for s in _reserved(entry))
        self._spends = steps
        return state

    def _load(self) -> dict:
        state, problem = _read(self.path)
        if problem is not None:
            raise LedgerError(problem)
        return state


def inspect_ledger(path: str | os.PathLike) -> tuple[dict, str | None]:
    """The ledger at ``path`` as stored, and why it may not be spent from (``None`` if it may).

    For display: a file that fails its check is returned with the reason; only a file that cannot be
    read, or is not a privclust ledger at all, raises :class:`LedgerError`."""
    return _read(_real(path))


def upgrade_ledger(path: str | os.PathLike) -> bool:
    """Add the total and checksum to a version-1 ledger whose values are valid; ``False`` if it is
    version 2 already (and passes its check).  Refuses a version-2 file that fails its check: an edit
    is not blessed by upgrading."""
    path = _real(path)
    with _locked(path):
        state, problem = _read(path)
        if state["version"] == VERSION:
            if problem is not None:
                raise LedgerError(problem)
            return False
        try:
            _check_values(state)
        except (TypeError, ValueError) as exc:
            raise LedgerError(
                f"{path} cannot be upgraded: {exc}; restore it from a backup or start a new ledger"
            ) from None
        state["version"] = VERSION
        _write(path, state)
        return True


def _read(path: Path) -> tuple[dict, str | None]:
    """Parse the file (:class:`LedgerError` if it cannot be, or is not a ledger), then check it."""
    try:
        with open(path, encoding="utf-8") as f:
            state = json.load(f)
    except FileNotFoundError:
        raise LedgerError(f"no ledger at {path}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise LedgerError(f"cannot read the ledger {path}: {exc}") from None
    try:
        _check_shape(state)
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise LedgerError(f"{path} is not a valid privclust ledger ({exc}); not spending from it") from None
    if state["version"] == 1:
        return state, (
            f"{path} is a version 1 ledger (written by an earlier privclust, without a checksum); not spending "
            f"from it. Check its entries with 'privclust ledger show {path}' and, if they are right, add the "
            f"checksum with 'privclust ledger upgrade {path}'"
        )
    try:
        _check_values(state)
        _check_integrity(state)
    except (TypeError, ValueError) as exc:
        return state, f"{path} fails its integrity check ({exc}): it was changed outside privclust; " + RECOVER.format(
            path=path
        )
    return state, None


def _check_shape(state: dict) -> None:
    """The structure of a ledger of a known version (values are checked by :func:`_check_values`)."""
    if not isinstance(state, dict) or state.get("format") != FORMAT or state.get("version") not in (1, VERSION):
        raise ValueError(f"no format {FORMAT!r}, version 1 or {VERSION}")
    if not isinstance(state["budget"], dict) or not isinstance(state["entries"], list):
        raise TypeError("no budget or no entries")
    for entry in state["entries"]:
        if not isinstance(entry["id"], str) or not isinstance(entry["spends"], list):
            raise TypeError("an entry without an id or spends")
        for item in [*entry["spends"], *_reserved(entry)]:
            if not isinstance(item, dict) or "label" not in item:
                raise TypeError("a spend without a label")


def _number(value, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{what} is not a number")
    if not math.isfinite(value):
        raise ValueError(f"{what} is not finite")
    if value < 0:
        raise ValueError(f"{what} is negative")
    return float(value)


def _check_values(state: dict) -> None:
    """Every budget and spend value a finite, non-negative number (a delta below 1)."""
    budget = state["budget"]
    for what in ("epsilon", "delta"):
        _number(budget.get(what), f"the budget's {what}")
    Budget(budget["epsilon"], budget["delta"])  # epsilon > 0, delta < 1
    ids = set()
    for entry in state["entries"]:
        if entry["id"] in ids:
            raise ValueError(f"the entry {entry['id']} appears twice")
        ids.add(entry["id"])
        for item in [*entry["spends"], *_reserved(entry)]:
            where = f"a spend of the entry {entry['id']}"
            if "mu" in item:
                if set(item) - {"label", "mu", "relation"}:  # a relation may come with it (a user-level Gaussian)
                    raise ValueError(f"{where} is both mu-GDP and (epsilon, delta)")
                _number(item["mu"], f"the mu of {where}")
            else:
                _number(item.get("epsilon"), f"the epsilon of {where}")
                if _number(item.get("delta", 0.0), f"the delta of {where}") >= 1:
                    raise ValueError(f"the delta of {where} is not below 1")


def _content(state: dict) -> dict:
    return {key: value for key, value in state.items() if key != "checksum"}


def _checksum(state: dict) -> str:
    canonical = json.dumps(_content(state), sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _total(entries: list[dict]) -> dict:
    """The (epsilon, delta) spends added up and the mu-GDP spends composed, open reservations included."""
    items = [i for e in entries for i in [*e["spends"], *_reserved(e)]]
    return {
        "epsilon": math.fsum(float(i["epsilon"]) for i in items if "mu" not in i),
        "delta": math.fsum(float(i.get("delta", 0.0)) for i in items if "mu" not in i),
        "mu": math.sqrt(math.fsum(float(i["mu"]) ** 2 for i in items if "mu" in i)),
    }


def _check_integrity(state: dict) -> None:
    """The stored total matches the entries, and the checksum matches the content."""
    stored, computed = state.get("total"), _total(state["entries"])
    if not isinstance(stored, dict) or set(stored) != set(computed):
        raise ValueError("no total")
    for what, value in computed.items():
        if not math.isclose(_number(stored[what], f"the total's {what}"), value, rel_tol=_REL_TOLERANCE, abs_tol=0):
            raise ValueError(f"the entries add up to {what} = {value:.6g}, not the {stored[what]:.6g} stored")
    if state.get("checksum") != _checksum(state):
        raise ValueError("its checksum does not match its content")


def _reserved(entry: dict) -> list[dict]:
    """An entry's open reservation as a list of spends (one spend in files written before covers)."""
    reserved = entry.get("reserved")
    if not reserved:
        return []
    return list(reserved) if isinstance(reserved, list) else [reserved]


class _LedgerRun(PrivacyAccountant):
    """The accountant of one ledger run: within the run's own budget, and within its reservation in the
    file, which takes the shape of the plans the run checks (see :meth:`LedgerAccountant.run`).

    A reservation is for add/remove neighbours, so a replace-one release (a local or shuffle round) is
    refused: once settled it would restate every other spend of the file for replace-one neighbours,
    about twice their cost, past what the reservation checked."""

    def __init__(self, budget: Budget, ledger: "LedgerAccountant", entry_id: str, reserved: Cover):
        super().__init__(budget)
        self._ledger, self._entry_id, self._reserved = ledger, entry_id, reserved
        self._placeholder = True  # the request's shape, until the run checks its first plan
        self._lock = threading.RLock()  # a check reads and replaces the reservation: one thread at a time
        self._closed = False  # the run's block has ended: its spends are settled in the file

    def check(self, planned: Iterable[Spend]) -> None:
        with self._lock:
            self._refuse_if_closed()
            self._check(list(planned))

    def _record(self, spend: Spend) -> None:
        with self._lock:
            self._refuse_if_closed()
            super()._record(spend)

    def _refuse_if_closed(self) -> None:
        if self._closed:
            raise BudgetExceededError(
                "this ledger run has ended (its with block closed) and its spends are settled in the file: its "
                "accountant releases nothing more; start another run; nothing was released"
            )

    def _check(self, planned: list[Spend]) -> None:
        if any(s.relation != ADD_REMOVE for s in planned):
            raise BudgetExceededError(
                "a ledger run reserves for add/remove neighbours, and this run planned a release for other "
                "neighbours (replace-one: the local or shuffle model; or one user's rows: privacy_unit='user'); "
                "give the ledger itself as the accountant instead; nothing was released"
            )
        super().check(planned)  # the run's own (epsilon, delta)
        need = Cover.of([*self.spends, *planned])
        if self._placeholder:  # the first check: the request's placeholder takes the plan's shape
            reshaped = need
        elif need.within(self._reserved):
            return
        else:  # later checks only grow it: a plan checked earlier (auto's candidates) stays covered
            reshaped = need.union(self._reserved)
        self._ledger._reshape(self._entry_id, reshaped)
        self._reserved, self._placeholder = reshaped, False


def _budget_json(budget) -> dict:
    return {"epsilon": float(budget.epsilon), "delta": float(budget.delta)}


def _real(path: str | os.PathLike) -> Path:
    """The file itself: symbolic links resolved, so every name for one ledger locks and replaces it."""
    return Path(os.path.realpath(path))


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock on ``path``'s companion ``.lock`` file (blocks until it is free)."""
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


def _write(path: Path, state: dict) -> None:
    """Replace ``path`` by ``state`` atomically: a reader sees the old ledger or the new one.

    The stored total and the checksum are recomputed from the content, which the caller has checked."""
    state = {**_content(state), "version": VERSION, "total": _total(state["entries"])}
    state["checksum"] = _checksum(state)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(state, out, indent=1, allow_nan=False)
            out.write("\n")
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temporary, path.stat().st_mode & 0o7777 if path.exists() else _default_mode())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _default_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask

"""Free channels inside one Python program: forked copies of a budget, f's warnings, exact attributes.

Like ``test_side_channels.py``, each test checks that nothing a user sees depends on the private rows
(or escapes the budget) except through an accounted release.
"""

from __future__ import annotations

import multiprocessing
import re
import threading
import warnings
from pathlib import Path

import numpy as np
import pytest

from privclust import Budget, BudgetExceededError, KMeans, PrivacyAccountant, Subsampled, sample_and_aggregate
from privclust.privacy.ledger import LedgerAccountant

DOCS = Path(__file__).resolve().parents[1] / "docs"


def in_forked_child(work) -> str:
    """Run ``work()`` in a forked process (which inherits this one's memory, nothing pickled) and say how it went."""
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)

    def child():
        try:
            work()
        except Exception as exc:  # noqa: BLE001 -- the outcome is what the test compares
            send.send(f"{type(exc).__name__}: {exc}")
        else:
            send.send("result")

    process = context.Process(target=child)
    process.start()
    outcome = receive.recv()
    process.join()
    return outcome


def full_budget_fit(accountant: PrivacyAccountant) -> KMeans:
    X = np.random.default_rng(0).uniform(-1, 1, (200, 2))
    return KMeans(3, epsilon=1.0, delta=1e-6, bounds=(-1, 1), accountant=accountant, random_state=0).fit(X)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the seeded noise's warning
def test_a_forked_copy_of_an_accountant_refuses_to_spend_and_the_original_keeps_its_budget():
    shared = PrivacyAccountant(Budget(1.0, 1e-6))
    outcomes = [in_forked_child(lambda: full_budget_fit(shared)) for _ in range(2)]
    for seen in outcomes:
        assert seen.startswith("BudgetExceededError") and "another process" in seen and "LedgerAccountant" in seen
    assert shared.spends == []
    full_budget_fit(shared)  # the budget is whole here, and spent here only once
    with pytest.raises(BudgetExceededError):
        full_budget_fit(shared)


def test_a_forked_copy_refuses_direct_spends_and_checks_but_may_be_read(tmp_path):
    shared = PrivacyAccountant(Budget(1.0))
    shared.spend_dp("before the fork", 0.25)
    assert in_forked_child(lambda: shared.spend_dp("in the child", 0.25)).startswith("BudgetExceededError")
    assert in_forked_child(lambda: shared.check([])).startswith("BudgetExceededError")
    assert in_forked_child(lambda: PrivacyAccountant(parent=shared).spend_dp("via a child", 0.1)).startswith(
        "BudgetExceededError"
    )
    assert in_forked_child(lambda: shared.report()) == "result"
    shared.spend_dp("after the fork", 0.75)  # the original is untouched by its copies
    assert [s.label for s in shared.spends] == ["before the fork", "after the fork"]
    # Only a copy is refused: an accountant made in the child spends there, and a LedgerAccountant,
    # which rereads its file, composes the spends of every process that holds it.
    assert in_forked_child(lambda: PrivacyAccountant(Budget(1.0)).spend_dp("own budget", 1.0)) == "result"
    ledger = LedgerAccountant.create(tmp_path / "budget.json", Budget(1.0))
    assert in_forked_child(lambda: ledger.spend_dp("in the child", 0.25)) == "result"
    ledger.spend_dp("in the parent", 0.25)
    assert sorted(s.label for s in ledger.spends) == ["in the child", "in the parent"]
    assert in_forked_child(lambda: ledger.spend_dp("too much", 0.75)).startswith("BudgetExceededError")


def warnings_seen(call) -> list[tuple[str, str]]:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        call()
    return [(w.category.__name__, str(w.message)) for w in seen]


def test_sample_and_aggregate_lets_no_warning_of_f_on_a_private_part_through():
    X = np.random.default_rng(0).uniform(0.5, 1.0, (400, 1))
    Y = np.vstack([X, [[-0.5]]])  # one negative row: log warns on its part only

    def noisy_f(part):
        if np.any(part < 0):
            warnings.warn("a negative value in this part", UserWarning, stacklevel=2)
        return np.atleast_1d(np.mean(np.log(part)))

    def run(data):
        return sample_and_aggregate(noisy_f, data, 40, output_bounds=(-1, 1), output_dim=1)

    before_errors, before_filters = np.geterr(), list(warnings.filters)
    seen_x, seen_y = warnings_seen(lambda: run(X)), warnings_seen(lambda: run(Y))
    assert seen_x == seen_y == []
    assert np.geterr() == before_errors and warnings.filters == before_filters  # the caller's settings are back


def documented_attributes() -> dict[str, str]:
    """Each name in the Attributes section of KMeans's docstring, with the text of its entry."""
    section = KMeans.__doc__.split("Attributes\n    ----------\n")[1]
    entries = re.split(r"\n    (?=\S)", "\n" + section)
    described = {}
    for entry in filter(None, (e.strip() for e in entries)):
        head, _, text = entry.partition(" :")
        for name in head.split(","):
            described[name.strip()] = " ".join(text.split())
    return described


def test_every_fitted_attribute_is_documented_and_the_exact_ones_are_marked_not_private():
    X = np.random.default_rng(0).uniform(-2, 2, (200, 2))  # rows outside the bounds: some are clipped
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        balls = KMeans(3, bounds=(-1, 1), algorithm="onecluster", random_state=0).fit(X)
        lloyd = KMeans(3, bounds=(-1, 1), algorithm="fastlloyd", random_state=0).fit(X)
    fitted = {name for model in (balls, lloyd) for name in vars(model) if name.endswith("_")}
    described = documented_attributes()
    assert sorted(fitted - set(described)) == []
    # Computed exactly on the training rows: marked so in the docstring and in docs/privacy.md's model.
    privacy = (DOCS / "privacy.md").read_text()
    model = privacy[privacy.index("## Model") : privacy.index("## Threat model")]
    for name in ("labels_", "inertia_", "n_rows_clipped_", "outliers_"):
        assert "not differentially private" in described[name], name
        assert f"`{name}`" in model, name


def test_sample_and_aggregate_absorbs_f_exiting_on_a_private_part():
    X = np.random.default_rng(0).uniform(0.5, 1.0, (400, 1))
    Y = np.vstack([X, [[-0.5]]])

    def exits_on_negative(part):
        if np.any(part < 0):
            raise SystemExit("a negative value in this part")
        return np.atleast_1d(np.median(part))

    for data in (X, Y):
        result = sample_and_aggregate(exits_on_negative, data, 40, output_bounds=(-1, 1), output_dim=1)
        assert result.center.shape == (1,)


def public_shapes(model) -> dict[str, tuple]:
    """The shape of every fitted attribute of ``model`` and of the estimator it wraps (``estimator_``)."""
    shapes = {}
    for prefix, obj in (("", model), ("estimator_.", getattr(model, "estimator_", None))):
        for name, value in vars(obj or object()).items():
            if name.endswith("_") and not name.startswith("_"):
                shapes[prefix + name] = np.shape(value) if isinstance(value, (np.ndarray, list, tuple)) else ()
    return shapes


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the seeded noise's warning
def test_subsampled_keeps_no_attribute_whose_shape_shows_the_sample_size():
    rng = np.random.default_rng(0)
    small, large = rng.uniform(-1, 1, (100, 2)), rng.uniform(-1, 1, (1_000, 2))
    base = KMeans(3, bounds=(-1, 1), random_state=0)
    shapes = [public_shapes(Subsampled(base, rate=0.5, random_state=0).fit(X)) for X in (small, large)]
    assert shapes[0] == shapes[1]
    assert not any(name.endswith(("labels_", "inertia_", "n_rows_clipped_")) for name in shapes[0])


class SlowToCheck(PrivacyAccountant):
    """A shared accountant whose first check, once passed, lets another thread spend before it returns."""

    def __init__(self, budget, meanwhile):
        super().__init__(budget)
        self.meanwhile = meanwhile

    def check(self, planned):
        super().check(planned)
        meanwhile, self.meanwhile = self.meanwhile, None
        if meanwhile is not None:
            other = threading.Thread(target=meanwhile)
            other.start()
            other.join(timeout=1.0)  # a spend that waits for ours (the fix) is not waited for
            self.other = other


def test_two_threads_cannot_both_pass_the_check_for_the_last_of_a_budget():
    outcomes = []

    def spend_the_budget():
        try:
            PrivacyAccountant(parent=shared).spend_dp("thread B", 1.0)
        except BudgetExceededError:
            outcomes.append("refused")
        else:
            outcomes.append("spent")

    shared = SlowToCheck(Budget(1.0), spend_the_budget)
    PrivacyAccountant(parent=shared).spend_dp("thread A", 1.0)  # passes its check, then B runs
    shared.other.join()
    assert outcomes == ["refused"]
    assert [s.label for s in shared.spends] == ["thread A"]

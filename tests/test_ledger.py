"""The file-backed budget ledger: spends from several objects and processes compose, nothing overspends."""

import json
import multiprocessing
import pickle

import numpy as np
import pytest

from privclust import KMeans
from privclust.privacy.budget import Budget, BudgetExceededError, PrivacyAccountant, Spend
from privclust.privacy.gdp import gdp_epsilon, gdp_mu
from privclust.privacy.ledger import LedgerAccountant, LedgerError


@pytest.fixture
def ledger(tmp_path):
    return LedgerAccountant.create(tmp_path / "budget.json", Budget(1.0, 1e-5))


def rows():
    return np.random.default_rng(0).uniform(0, 1, (500, 2))


def test_create_open_and_their_refusals(tmp_path, ledger):
    path = ledger.path
    assert LedgerAccountant.open(path).budget == Budget(1.0, 1e-5)
    assert LedgerAccountant.open(path, Budget(1.0, 1e-5)).budget == Budget(1.0, 1e-5)
    with pytest.raises(LedgerError, match="fixed when it is created"):
        LedgerAccountant.open(path, Budget(2.0, 1e-5))
    with pytest.raises(LedgerError, match="exists already"):
        LedgerAccountant.create(path, Budget(5.0, 1e-5))
    with pytest.raises(LedgerError, match="ledger init"):
        LedgerAccountant.open(tmp_path / "none.json")
    created = LedgerAccountant.open(tmp_path / "new.json", Budget(3.0, 1e-6))
    assert created.budget == Budget(3.0, 1e-6) and created.spends == []
    with pytest.raises(LedgerError, match="does not exist"):
        LedgerAccountant.create(tmp_path / "no" / "such.json", Budget(1.0))


def test_spends_made_through_one_object_are_seen_by_another(ledger):
    other = LedgerAccountant(ledger.path)
    ledger.spend_dp("first", 0.6)
    assert other.guarantee() == pytest.approx((0.6, 0.0))
    with pytest.raises(BudgetExceededError):
        other.spend_dp("second", 0.5)
    other.spend_dp("second", 0.4)
    assert [s.label for s in ledger.spends] == ["first", "second"]
    assert ledger.report().epsilon == pytest.approx(1.0)


def test_gaussian_spends_compose_in_gdp_across_objects(ledger):
    mu = gdp_mu(0.5, 1e-5)
    LedgerAccountant(ledger.path).spend_gdp("a", mu)
    LedgerAccountant(ledger.path).spend_gdp("b", mu)
    # Two halves of the budget in GDP cost less than the whole budget: exact composition, not addition.
    assert ledger.guarantee()[0] == pytest.approx(gdp_epsilon(np.sqrt(2) * mu, 1e-5))
    assert ledger.guarantee()[0] < 1.0


def test_it_can_be_pickled_carrying_only_its_path(ledger):
    ledger.spend_dp("before", 0.25)
    copy = pickle.loads(pickle.dumps(ledger))
    assert isinstance(copy, LedgerAccountant) and copy.path == ledger.path
    copy.spend_dp("from the copy", 0.25)
    assert ledger.guarantee()[0] == pytest.approx(0.5)
    with pytest.raises(TypeError, match="cannot be sent to another process"):
        pickle.dumps(PrivacyAccountant(Budget(1.0)))


def _spend_until_refused(ledger: LedgerAccountant) -> int:
    accepted = 0
    for i in range(20):
        try:
            ledger.spend_dp(f"worker spend {i}", 0.0625)
            accepted += 1
        except BudgetExceededError:
            pass
    return accepted


def test_processes_spending_at_once_never_overspend(ledger):
    with multiprocessing.get_context("fork").Pool(4) as pool:
        accepted = pool.map(_spend_until_refused, [ledger] * 4)  # pickled: each process opens the file
    assert sum(accepted) == 16  # 16 x 0.0625 = 1: the budget, exactly, and not one spend more
    assert len(ledger.spends) == 16 and ledger.guarantee()[0] == pytest.approx(1.0)


def test_a_fit_charges_the_file_and_a_fit_over_budget_is_refused(ledger):
    fastlloyd = dict(bounds=(0, 1), algorithm="fastlloyd")
    KMeans(3, epsilon=0.6, delta=1e-6, accountant=LedgerAccountant(ledger.path), **fastlloyd).fit(rows())
    spent = ledger.guarantee()[0]
    assert 0 < spent <= 0.6 + 1e-9
    with pytest.raises(BudgetExceededError):  # alone it would fit (epsilon 1 at delta 1e-6 is < 1 at 1e-5)
        KMeans(3, epsilon=1.0, delta=1e-6, accountant=LedgerAccountant(ledger.path), **fastlloyd).fit(rows())
    assert ledger.guarantee()[0] == pytest.approx(spent)


def test_a_run_reserves_its_request_then_records_its_exact_spends(ledger):
    other = LedgerAccountant(ledger.path)
    with ledger.run(0.6, 1e-6, {"command": "fit"}) as accountant:
        # While it runs, the whole request is held: another process cannot take it.
        with pytest.raises(BudgetExceededError):
            other.check([Spend("another run", epsilon=0.5)])
        KMeans(3, epsilon=0.6, delta=1e-6, bounds=(0, 1), accountant=accountant).fit(rows())
    entries = ledger.entries()
    assert len(entries) == 1 and entries[0]["reserved"] is None and entries[0]["about"] == {"command": "fit"}
    assert len(entries[0]["spends"]) == len(accountant.spends) > 1
    assert ledger.guarantee()[0] < 0.6  # GDP spends at the ledger's larger delta cost less than requested


def test_a_run_over_budget_is_refused_before_it_starts(ledger):
    ledger.spend_dp("earlier", 0.7)
    with pytest.raises(BudgetExceededError):
        with ledger.run(0.5, 1e-6):
            raise AssertionError("the run started")
    with pytest.raises(BudgetExceededError, match="non-private"):
        with ledger.run(float("inf"), 1e-6):
            raise AssertionError("the run started")
    assert len(ledger.entries()) == 1


def test_a_failed_run_keeps_what_it_spent_and_one_that_spent_nothing_leaves_no_trace(ledger):
    with pytest.raises(RuntimeError):
        with ledger.run(0.5, 0.0) as accountant:
            accountant.spend_dp("released before the failure", 0.2)
            raise RuntimeError("interrupted")
    with pytest.raises(RuntimeError):
        with ledger.run(0.5, 0.0):
            raise RuntimeError("failed before any release")
    assert [s.label for s in ledger.spends] == ["released before the failure"]
    assert ledger.guarantee()[0] == pytest.approx(0.2)


def test_a_killed_run_keeps_its_reservation_charged(ledger):
    runs = ledger.run(0.5, 0.0)
    runs.__enter__()  # and never exits, as if the process had been killed
    assert LedgerAccountant(ledger.path).guarantee()[0] == pytest.approx(0.5)
    assert "reserved by run-" in LedgerAccountant(ledger.path).report().steps[0].label


def test_gaussian_reservations_compose_exactly_and_bind_the_run(tmp_path):
    ledger = LedgerAccountant.create(tmp_path / "l.json", Budget(1.0, 1e-5))
    ledger.spend_gdp("an earlier Gaussian run", gdp_mu(0.6, 1e-6))
    with pytest.raises(BudgetExceededError):  # as an (epsilon, delta) request it does not fit ...
        with ledger.run(0.6, 1e-6):
            pass
    with ledger.run(0.6, 1e-6, gaussian=True) as accountant:  # ... as a mu-GDP one it does
        with pytest.raises(BudgetExceededError, match="Gaussian"):
            accountant.spend_dp("a Laplace release", 0.01)
        with pytest.raises(BudgetExceededError):
            accountant.spend_gdp("more than the run asked for", 1.01 * gdp_mu(0.6, 1e-6))
        accountant.spend_gdp("the run", gdp_mu(0.6, 1e-6))
    assert ledger.guarantee()[0] <= 1.0 + 1e-9


def test_the_file_is_replaced_atomically_and_a_corrupt_one_is_refused(ledger, monkeypatch):
    ledger.spend_dp("kept", 0.1)
    before = ledger.path.read_text()

    def crash(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(json, "dump", crash)
    with pytest.raises(KeyboardInterrupt):
        ledger.spend_dp("lost", 0.1)
    monkeypatch.undo()
    assert ledger.path.read_text() == before
    assert sorted(p.name for p in ledger.path.parent.iterdir()) == ["budget.json", "budget.json.lock"]
    ledger.path.write_text(before[: len(before) // 2])
    with pytest.raises(LedgerError, match="cannot read the ledger"):
        LedgerAccountant(ledger.path)
    ledger.path.write_text(json.dumps({"format": "something else"}))
    with pytest.raises(LedgerError, match="not a valid privclust ledger"):
        LedgerAccountant(ledger.path).check([])

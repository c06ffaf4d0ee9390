"""The file-backed budget ledger: spends from several objects and processes compose, nothing overspends."""

import json
import math
import multiprocessing
import os
import pickle

import numpy as np
import pytest
from typer.testing import CliRunner

from privclust import KMeans
from privclust.cli import app
from privclust.privacy.budget import Budget, BudgetExceededError, PrivacyAccountant, Spend
from privclust.privacy.gdp import gdp_epsilon, gdp_mu
from privclust.privacy.ledger import LedgerAccountant, LedgerError

runner = CliRunner()


def cli(*args):
    return runner.invoke(app, [str(a) for a in args])


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


def test_a_run_that_does_not_fit_as_epsilon_delta_is_reserved_as_gaussian_and_bound_by_its_own_budget(tmp_path):
    ledger = LedgerAccountant.create(tmp_path / "l.json", Budget(3.0, 1e-6))
    ledger.spend_gdp("an earlier Gaussian run", gdp_mu(0.5, 1e-6))
    # As an (epsilon, delta) spend the run would leave the earlier Gaussian spend no delta (epsilon = inf) ...
    with pytest.raises(BudgetExceededError, match="epsilon=inf"):
        ledger.check([Spend("as (epsilon, delta)", epsilon=1.0, delta=1e-6)])
    with ledger.run(1.0, 1e-6) as accountant:  # ... so it is reserved as mu-GDP, which composes exactly
        assert [s.mu is not None for s in LedgerAccountant(ledger.path).spends] == [True, True]
        with pytest.raises(BudgetExceededError):
            accountant.spend_gdp("more than the run asked for", 1.01 * gdp_mu(1.0, 1e-6))
        accountant.spend_gdp("the run", gdp_mu(1.0, 1e-6))
    assert ledger.guarantee()[0] == pytest.approx(gdp_epsilon(np.hypot(gdp_mu(0.5, 1e-6), gdp_mu(1.0, 1e-6)), 1e-6))
    with pytest.raises(BudgetExceededError):  # in neither form does this one fit
        with ledger.run(3.0, 1e-6):
            raise AssertionError("the run started")


def test_the_reservation_takes_the_plans_shape_and_covers_every_spend(tmp_path):
    """A plan with Gaussian releases and a delta-only selection (FastLloyd from the greedy) runs beside earlier
    Gaussian spends; the file's reservation is then the plan's cover, so others are checked against it."""
    ledger = LedgerAccountant.create(tmp_path / "l.json", Budget(1.5, 1e-6))
    ledger.spend_gdp("an elbow curve", gdp_mu(0.5, 1e-6))
    mu = gdp_mu(1.0, 0.5e-6)
    plan = [Spend("iterations", mu=mu), Spend("greedy level (selection)", delta=0.5e-6)]
    with ledger.run(1.0, 1e-6) as accountant:
        accountant.check(plan)  # before any row is read: the reservation becomes the plan's cover
        held = [s for s in LedgerAccountant(ledger.path).spends if s.label.startswith("reserved")]
        assert sorted((s.mu or 0.0, s.delta) for s in held) == sorted([(mu, 0.0), (0.0, 0.5e-6)])
        with pytest.raises(BudgetExceededError):  # another process spending now sees the cover, not less
            LedgerAccountant(ledger.path).spend_dp("another run's Laplace release", 0.4)
        for spend in plan:
            accountant.spend(spend)
        with pytest.raises(BudgetExceededError):  # a later plan past the ledger's budget: nothing released
            accountant.check([Spend("one more round", mu=2.0)])
    assert [s.label for s in accountant.spends] == [s.label for s in plan]
    assert ledger.guarantee()[0] <= 1.5 * (1 + 1e-9)


def test_a_later_check_grows_the_reservation_when_the_file_admits_it(tmp_path):
    ledger = LedgerAccountant.create(tmp_path / "l.json", Budget(2.0, 1e-6))
    with ledger.run(1.0, 1e-6) as accountant:
        accountant.check([Spend("count", epsilon=0.05)])
        accountant.spend(Spend("count", epsilon=0.05))
        accountant.check([Spend("the fit", mu=gdp_mu(0.9, 1e-6))])  # after a release: the cover only grows
        reserved = [s for s in LedgerAccountant(ledger.path).spends if s.label.startswith("reserved")]
        assert sorted((s.epsilon, s.mu or 0.0) for s in reserved) == [(0.0, gdp_mu(0.9, 1e-6)), (0.05, 0.0)]
        accountant.spend(Spend("the fit", mu=gdp_mu(0.9, 1e-6)))
    assert [s.label for s in ledger.spends] == ["count", "the fit"]


def test_a_grown_reservation_is_checked_against_the_file_as_others_left_it(tmp_path):
    # A run's later check grows its reservation only if the file's budget admits the grown one.  The check used to
    # reread the file, and so to weigh the reservation as it was before growing: another process's spend plus
    # this run's second plan took the file to epsilon 2.79 against its budget of 2.
    ledger = LedgerAccountant.create(tmp_path / "l.json", Budget(2.0, 1e-6))
    with ledger.run(1.0, 1e-6) as run:
        run.check([Spend("a small fit", mu=gdp_mu(0.2, 1e-6))])
        LedgerAccountant(ledger.path).spend_dp("another process", 1.79)
        before = ledger.path.read_text()
        with pytest.raises(BudgetExceededError):
            run.check([Spend("a larger plan", epsilon=1.0)])
        assert ledger.path.read_text() == before  # the reservation did not grow
        run.spend(Spend("a small fit", mu=gdp_mu(0.2, 1e-6)))  # what was reserved still fits
    epsilon, _ = LedgerAccountant(ledger.path).guarantee()
    assert epsilon <= 2.0 * (1 + 1e-9)


def test_a_run_accountant_kept_past_its_block_releases_nothing(tmp_path):
    # Its reservation is settled when the block ends; a spend it approved after would reach no file (it used to:
    # within the reservation's slack a check never asked the file, and its record stayed in the object).
    ledger = LedgerAccountant.create(tmp_path / "l.json", Budget(1.0))
    with ledger.run(1.0, 0.0) as run:
        run.check([Spend("plan a", epsilon=0.9)])
        run.spend(Spend("plan b", epsilon=0.1))
    settled = ledger.path.read_text()
    with pytest.raises(BudgetExceededError, match="run has ended"):
        run.spend(Spend("after the block", epsilon=0.8))
    with pytest.raises(BudgetExceededError, match="run has ended"):
        run.check([Spend("after the block", epsilon=0.1)])
    assert ledger.path.read_text() == settled and [s.label for s in run.spends] == ["plan b"]


def test_a_spend_its_ledger_parent_refuses_is_not_kept_by_the_child(tmp_path, monkeypatch):
    # Another process spends between the child's check and its record: the ledger refuses under its lock, and the
    # child, which recorded first, used to report a release that never happened.
    ledger = LedgerAccountant.create(tmp_path / "l.json", Budget(1.0))
    child = PrivacyAccountant(Budget(1.0), parent=ledger)
    checked = LedgerAccountant.check

    def check_then_another_process_spends(self, planned):
        checked(self, planned)
        if not LedgerAccountant(self.path).spends:
            LedgerAccountant(self.path).spend_dp("another process", 0.7)

    monkeypatch.setattr(LedgerAccountant, "check", check_then_another_process_spends)
    with pytest.raises(BudgetExceededError):
        child.spend(Spend("a fit's step", epsilon=0.5))
    assert child.spends == [] and [s.label for s in ledger.spends] == ["another process"]


def test_a_run_whose_first_check_plans_nothing_can_still_grow_its_reservation(tmp_path):
    # The first check shapes the reservation as an empty cover (reserved: []): the run is still open, and a
    # later spend grows it against the file -- it is not taken for a settled run.
    ledger = LedgerAccountant.create(tmp_path / "l.json", Budget(2.0, 1e-5))
    with ledger.run(1.0, 1e-6) as run:
        run.check([])
        run.spend(Spend("a release", mu=0.1))
    (entry,) = ledger.entries()
    assert entry["reserved"] is None and entry["spends"] == [{"label": "a release", "mu": 0.1}]


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


# -- one ledger, whatever the path ---------------------------------------------------------------------


def test_a_ledger_reached_through_a_symlink_is_the_same_ledger(tmp_path, ledger):
    link = tmp_path / "budget.link"
    link.symlink_to(ledger.path.name)  # relative, as ln -s makes it
    accepted = 0
    for i in range(6):  # alternately through the link and the real name: 0.3 each on a budget of 1
        try:
            LedgerAccountant(link if i % 2 == 0 else ledger.path).spend_dp(f"spend {i}", 0.3)
            accepted += 1
        except BudgetExceededError:
            pass
    assert accepted == 3 and ledger.guarantee()[0] == pytest.approx(0.9)
    assert link.is_symlink() and os.readlink(link) == "budget.json"  # still a link, to the same file
    assert LedgerAccountant(link).guarantee()[0] == pytest.approx(0.9)
    assert not (tmp_path / "budget.link.lock").exists()  # one lock, beside the real file


def test_processes_spending_through_a_link_and_the_real_name_never_overspend(tmp_path, ledger):
    link = tmp_path / "budget.link"
    link.symlink_to(ledger.path)
    ledgers = [LedgerAccountant(link), ledger, LedgerAccountant(link), ledger]
    with multiprocessing.get_context("fork").Pool(4) as pool:
        accepted = pool.map(_spend_until_refused, ledgers)
    assert sum(accepted) == 16 and ledger.guarantee()[0] == pytest.approx(1.0)
    assert link.is_symlink()


def test_fits_through_a_link_and_the_real_name_share_one_budget(tmp_path):
    real, link = tmp_path / "L", tmp_path / "L.link"
    assert cli("ledger", "init", real, "--epsilon", "2", "--delta", "1e-6").exit_code == 0
    link.symlink_to(real)
    outcomes = []
    for i in range(4):  # each fit asks for (1, 1e-6): the budget holds two
        out = cli(
            "fit",
            "-k",
            "3",
            "-e",
            "1",
            "--seed",
            "0",
            "-a",
            "sulloyd",
            "--ledger",
            link if i % 2 else real,
            "-o",
            tmp_path / f"c{i}.csv",
        )
        outcomes.append(out.exit_code)
    assert outcomes == [0, 0, 2, 2]
    assert link.is_symlink() and len(LedgerAccountant(real).entries()) == 2


# -- a ledger that checks itself -----------------------------------------------------------------------


def _edit(path, change):
    state = json.loads(path.read_text())
    change(state)
    path.write_text(json.dumps(state, indent=1))


def _first_spend(state):
    return state["entries"][0]["spends"][0]


TAMPERS = {
    "a NaN spend": lambda s: _first_spend(s).update(epsilon=math.nan),
    "a negative spend": lambda s: _first_spend(s).update(epsilon=-0.5),
    "a NaN mu": lambda s: s["entries"][1]["spends"][0].update(mu=math.nan),
    "a removed entry": lambda s: s["entries"].pop(),
    "a raised budget": lambda s: s["budget"].update(epsilon=10.0),
    "an edited checksum": lambda s: s.update(checksum="sha256:" + "0" * 64),
    "an infinite delta": lambda s: _first_spend(s).update(delta=math.inf),
}


@pytest.fixture
def spent(ledger):
    ledger.spend_dp("a Laplace release", 0.25)
    LedgerAccountant(ledger.path).spend_gdp("a Gaussian release", gdp_mu(0.25, 1e-6))
    return ledger


@pytest.mark.parametrize("tamper", sorted(TAMPERS))
def test_a_ledger_edited_by_hand_is_refused(spent, tamper):
    opened = LedgerAccountant(spent.path)  # opened before the edit: it rereads the file for every spend
    _edit(spent.path, TAMPERS[tamper])
    with pytest.raises(LedgerError, match="fails its integrity check") as refused:
        opened.spend_dp("after the edit", 0.01)
    assert "ledger show" in str(refused.value) and "backup" in str(refused.value)
    with pytest.raises(LedgerError, match="fails its integrity check"):
        LedgerAccountant(spent.path)
    with pytest.raises(LedgerError, match="fails its integrity check"):
        with opened.run(0.01, 0.0):
            raise AssertionError("the run started")


def test_ledger_show_totals_a_tampered_ledger_holding_an_open_reservation(ledger):
    # A killed run's reservation is a list of spends; the unchecked summary used to crash on it.
    ledger.spend_dp("done", 0.25)
    reserved = [{"label": "reserved by run-0", "epsilon": 0.5, "delta": 0.0}]  # as a run's, in the file's form
    killed = {"id": "run-0", "time": "2026-11-28T00:00:00+00:00", "about": {}, "reserved": reserved, "spends": []}
    _edit(ledger.path, lambda s: s["entries"].append(killed))  # outside privclust: the checksum no longer holds
    shown = cli("ledger", "show", ledger.path, "--json")
    assert shown.exit_code == 1 and json.loads(shown.stdout)["ledger"]["spent"]["epsilon"] == pytest.approx(0.75)


@pytest.mark.parametrize("tamper", ["a NaN spend", "a removed entry", "an edited checksum"])
def test_ledger_show_displays_a_tampered_ledger_flagged_and_fit_refuses_it(tmp_path, spent, tamper):
    _edit(spent.path, TAMPERS[tamper])
    shown = cli("ledger", "show", spent.path)
    assert shown.exit_code == 1 and "FAILS its integrity check" in shown.output
    assert shown.output.count("done") == len(json.loads(spent.path.read_text())["entries"])  # every entry shown
    as_json = cli("ledger", "show", spent.path, "--json")
    assert as_json.exit_code == 1 and json.loads(as_json.stdout)["check"]["ok"] is False
    fit = cli("fit", "-k", "3", "-e", "0.1", "--seed", "0", "--ledger", spent.path, "-o", tmp_path / "c.csv")
    assert fit.exit_code == 2 and "integrity check" in fit.output and not (tmp_path / "c.csv").exists()


def test_an_untouched_ledger_passes_its_check(spent):
    state = json.loads(spent.path.read_text())
    assert state["version"] == 2 and state["checksum"].startswith("sha256:")
    assert state["total"]["epsilon"] == pytest.approx(0.25) and state["total"]["mu"] == pytest.approx(
        gdp_mu(0.25, 1e-6)
    )
    shown = cli("ledger", "show", spent.path, "--json")
    assert shown.exit_code == 0 and json.loads(shown.stdout)["check"]["ok"] is True
    spent.path.write_text(json.dumps(state))  # whitespace is not content: still the same ledger
    LedgerAccountant(spent.path).spend_dp("more", 0.1)


def test_a_version_1_ledger_is_refused_until_upgraded(spent):
    state = json.loads(spent.path.read_text())
    old = {"format": "privclust-ledger", "version": 1, "budget": state["budget"], "entries": state["entries"]}
    spent.path.write_text(json.dumps(old))
    with pytest.raises(LedgerError, match="version 1.*ledger upgrade"):
        LedgerAccountant(spent.path)
    shown = cli("ledger", "show", spent.path)
    assert shown.exit_code == 1 and "version 1" in shown.output and "ledger upgrade" in shown.output
    upgraded = cli("ledger", "upgrade", spent.path)
    assert upgraded.exit_code == 0, upgraded.output
    assert LedgerAccountant(spent.path).guarantee()[0] == pytest.approx(spent.guarantee()[0])
    assert cli("ledger", "upgrade", spent.path).exit_code == 0  # already version 2: nothing to do
    _edit(spent.path, TAMPERS["a raised budget"])
    refused = cli("ledger", "upgrade", spent.path)  # upgrade does not bless an edited version-2 file
    assert refused.exit_code == 2 and "integrity check" in refused.output


def test_a_version_1_ledger_with_a_bad_value_is_not_upgraded(spent):
    state = json.loads(spent.path.read_text())
    _first_spend(state).update(epsilon=-1.0)
    old = {"format": "privclust-ledger", "version": 1, "budget": state["budget"], "entries": state["entries"]}
    spent.path.write_text(json.dumps(old))
    refused = cli("ledger", "upgrade", spent.path)
    assert refused.exit_code == 2 and "negative" in refused.output


# -- the documented sequence -----------------------------------------------------------------------------


def test_the_documented_ledger_sequence_runs(tmp_path):
    """docs/choosing.md: a ledger for (3, 1e-6), an elbow curve at 0.5, then a fit at 1 (on bundled data)."""
    ledger = tmp_path / "patients.ledger"
    assert cli("ledger", "init", ledger, "--epsilon", "3", "--delta", "1e-6").exit_code == 0
    elbow = cli("elbow", "-e", "0.5", "--ledger", ledger, "--plot", tmp_path / "elbow.png")
    assert elbow.exit_code == 0, elbow.output
    fit = cli("fit", "-k", "4", "-e", "1", "--ledger", ledger, "-o", tmp_path / "centers.csv")
    assert fit.exit_code == 0, fit.output
    shown = cli("ledger", "show", ledger)
    assert shown.exit_code == 0 and "elbow" in shown.output and "fit" in shown.output
    # Composed in GDP: at most the two requests' mu composed (epsilon 1.14 at 1e-6), far below 0.5 + 1.
    at_most = gdp_epsilon(np.hypot(gdp_mu(0.5, 1e-6), gdp_mu(1.0, 1e-6)), 1e-6)
    assert 1.0 < LedgerAccountant(ledger).guarantee()[0] <= at_most * (1 + 1e-9) and at_most < 1.15


def test_a_runs_adaptive_choice_settles_at_the_union_it_reserved(ledger):
    """auto with a private n chooses its plan on the noisy count: the run reserved the union of the plans it could
    choose, and settles at it -- not at the chosen plan's smaller cost, which depends on that count."""
    from privclust.privacy.budget import Cover

    X = np.random.default_rng(0).uniform(-1, 1, (2000, 5))
    with ledger.run(0.5, 1e-6) as accountant:
        model = KMeans(5, epsilon=0.5, delta=1e-6, bounds=(-1, 1), random_state=0, accountant=accountant).fit(X)
    union, settled = Cover.of_any(model.planned_spends(5)), Cover.of(ledger.spends)
    assert union.delta > 0 and model.fit_info_["auto"]["chose"] == "fastlloyd-overclustered"  # no delta of its own
    assert (settled.mu, settled.delta) == pytest.approx((union.mu, union.delta), rel=1e-12)

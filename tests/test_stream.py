"""Continual observation: counters, oracle and ContinualKMeans (Dupré la Tour, Henzinger & Saulpic 2024)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from privclust.privacy.budget import Budget, PrivacyAccountant
from privclust.privacy.gdp import gdp_epsilon, gdp_mu
from privclust.privacy.noise import SeededNoise
from privclust.queries.base import Block, SumQuery
from privclust.queries.plan import ADAPTIVE, CapabilityError, Part
from privclust.stream import (
    ContinualCounters,
    ContinualKMeans,
    ContinualOracle,
    HorizonError,
    StepNoise,
    prefix_variance,
    tree_levels,
    tree_sensitivity,
)


def _noise(seed=0):
    return SeededNoise(np.random.SeedSequence(seed))


def _closed_nodes(t: int, levels: int) -> list[tuple[int, int]]:
    """Every dyadic interval [start, end] (1-based) of at most 2^(levels-1) steps closed by step t."""
    return [(j * 2**h + 1, (j + 1) * 2**h) for h in range(levels) for j in range(t // 2**h)]


def _blue_variance(t: int, levels: int) -> float:
    """Independent reference: the variance of the best linear unbiased estimate of S(t) from every node
    closed by t, each with unit noise -- generalized least squares on the explicit design matrix."""
    nodes = _closed_nodes(t, levels)
    X = np.zeros((len(nodes), t))
    for row, (start, end) in enumerate(nodes):
        X[row, start - 1 : end] = 1.0
    a = np.ones(t)
    return float(a @ np.linalg.solve(X.T @ X, a))


@pytest.mark.parametrize("horizon", [1, 7, 16, 23])
def test_honaker_variance_is_the_least_squares_variance(horizon):
    levels = tree_levels(horizon)
    for t in range(1, horizon + 1):
        assert prefix_variance(t, horizon, "honaker") == pytest.approx(_blue_variance(t, levels), rel=1e-9)
        assert prefix_variance(t, horizon, "tree") == bin(t).count("1")


@pytest.mark.parametrize("mechanism", ["honaker", "tree"])
def test_counters_are_unbiased_with_the_claimed_variance(mechanism):
    """20,000 independent buckets of one dense counter set are 20,000 replicates of one counter."""
    horizon, buckets, sigma = 13, 20_000, 2.0
    counters = ContinualCounters(horizon, [sigma], mechanism, n_buckets=buckets)
    rng = np.random.default_rng(1)
    truth = np.zeros(buckets)
    for t in range(1, horizon + 1):
        noise = _noise(t)
        increments = rng.integers(-3, 4, size=buckets).astype(float)
        counters.add(np.arange(buckets), increments[:, None], noise)
        truth += increments
        counters.end_step(noise)
        error = counters.estimates()[:, 0] - truth
        variance = sigma**2 * prefix_variance(t, horizon, mechanism)
        assert abs(error.mean()) < 5 * math.sqrt(variance / buckets)
        assert error.var() == pytest.approx(variance, rel=0.06)  # sd of the sample variance: 1 %
        assert counters.std()[0] == pytest.approx(math.sqrt(variance))


def test_variance_optimal_estimator_beats_the_plain_tree():
    horizon = 10_000
    tree = np.array([prefix_variance(t, horizon, "tree") for t in range(1, horizon + 1)])
    honaker = np.array([prefix_variance(t, horizon, "honaker") for t in range(1, horizon + 1)])
    assert np.all(honaker <= tree + 1e-12)
    assert honaker.mean() < 0.7 * tree.mean()
    assert honaker.max() < 0.7 * tree.max()


@pytest.mark.parametrize("horizon", [5, 8, 13])
def test_tree_sensitivity_bounds_every_insertion_and_deletion(horizon):
    """Brute force over every (insertion step, deletion step): the released nodes move by at most
    sqrt(2 L) in l2 norm per unit of value."""
    levels = tree_levels(horizon)
    nodes = _closed_nodes(horizon, levels)
    worst = 0.0
    for s in range(1, horizon + 1):
        for gone in list(range(s + 1, horizon + 1)) + [None]:
            change = np.array(
                [(start <= s <= end) - (gone is not None and start <= gone <= end) for start, end in nodes], float
            )
            worst = max(worst, float(np.linalg.norm(change)))
    assert worst <= tree_sensitivity(horizon) + 1e-12
    assert worst >= math.sqrt(2 * levels - 2) - 1e-12  # and the bound is nearly attained


def test_sparse_counters_hold_only_touched_buckets_whatever_the_length():
    horizon = 1000
    counters = ContinualCounters(horizon, [1.0, 1.0], "honaker", n_buckets=None)
    touched = np.array([5, 10**15, 77, 3])
    sizes = []
    for t in range(horizon):
        noise = _noise(t)
        counters.add(touched[[t % 4]], np.ones((1, 2)), noise)
        counters.end_step(noise)
        sizes.append(counters.nbytes)
    assert counters.ids.size == 4
    assert sizes[-1] == sizes[3]  # memory stopped growing once every bucket was touched
    per_bucket = 2 * tree_levels(horizon) * 2 * 8 + 2 * 8
    assert counters.nbytes <= 4 * per_bucket


def test_a_late_sparse_bucket_has_the_noise_of_one_that_ran_from_the_start():
    horizon, sigma, buckets = 12, 1.0, 20_000
    counters = ContinualCounters(horizon, [sigma], "honaker", n_buckets=None)
    for t in range(1, horizon + 1):
        noise = _noise(100 + t)
        if t == 7:  # every bucket first touched at step 7, by nothing
            counters.add(np.arange(buckets), np.zeros((buckets, 1)), noise)
        counters.end_step(noise)
    errors = counters.estimates()[:, 0]
    assert errors.var() == pytest.approx(prefix_variance(horizon, horizon, "honaker"), rel=0.06)


def _oracle(horizon=16, epsilon=1.0, delta=1e-6, mechanism="honaker", accountant=None):
    budget = Budget(epsilon, delta)
    accountant = accountant or PrivacyAccountant(budget)
    noise = StepNoise(np.random.SeedSequence(3))
    return ContinualOracle(1, budget, accountant, horizon, noise, mechanism), accountant


def _histogram(n_buckets=4, sparse=False):
    def contribution(chunk):
        return np.floor((chunk[:, 0] + 1.0) * n_buckets / 2.0).clip(0, n_buckets - 1).astype(np.int64), np.ones(
            (chunk.shape[0], 1)
        )

    return SumQuery("cells", n_buckets, (Block("count", 1, 1.0, count=True),), contribution, sparse=sparse)


def test_oracle_charges_the_horizon_once_and_calibrates_from_the_tree_sensitivity():
    oracle, accountant = _oracle(horizon=100)
    plan = oracle.plan([Part("all", share=1.0)])
    plan.release_many([(_histogram(), "all", 1.0)])
    mu = gdp_mu(1.0, 1e-6)
    assert oracle.counters[0].column_std[0] == pytest.approx(math.sqrt(2 * 7) / mu)
    for _ in range(10):
        oracle.update(np.zeros((5, 1)), None)
    report = accountant.report()
    assert len(report.steps) == 1 and report.mu == pytest.approx(mu)
    assert report.epsilon == pytest.approx(gdp_epsilon(mu, 1e-6)) and report.epsilon <= 1.0 + 1e-9


def test_oracle_refuses_what_it_cannot_serve():
    oracle, accountant = _oracle()
    with pytest.raises(CapabilityError):
        oracle.plan([Part("all", share=1.0)], needs={ADAPTIVE})
    with pytest.raises(CapabilityError):
        oracle.plan([Part("exp", epsilon=0.5)])
    plan = oracle.plan([Part("a", share=0.5), Part("b", share=0.5)])
    plan.release(_histogram(), "a")
    with pytest.raises(CapabilityError):
        plan.release(_histogram(), "b")  # a second round: the queries are declared once
    assert accountant.report().mu == pytest.approx(gdp_mu(1.0, 1e-6) * math.sqrt(0.5))


def test_sparse_threshold_hides_a_bucket_only_one_item_ever_touched():
    """Each of 4,000 buckets holds one item for the whole horizon: at most delta of them may ever show."""
    horizon, delta, buckets = 32, 0.05, 4000
    oracle, _ = _oracle(horizon=horizon, epsilon=2.0, delta=0.5)
    query = SumQuery(
        "ids",
        10**12,
        (Block("count", 1, 1.0, count=True),),
        lambda chunk: (chunk[:, 0].astype(np.int64), np.ones((chunk.shape[0], 1))),
        sparse=True,
    )
    oracle.plan([Part("sparse", share=1.0, delta=delta)]).release(query, "sparse")
    shown = set()
    for t in range(horizon):
        rows = np.arange(buckets, dtype=float)[:, None] if t == 0 else None
        oracle.update(rows, None)
        shown |= set(oracle.releases()[0].ids.tolist())
    assert len(shown) / buckets <= delta * 1.4


def _blobs(rng, m, centers):
    labels = rng.integers(0, len(centers), m)
    return np.clip(centers[labels] + rng.normal(0, 0.05, (m, centers.shape[1])), -1, 1)


CENTERS = np.array([[-0.6, -0.5], [0.5, 0.6], [0.6, -0.5]])


def _model(**kw):
    args = dict(n_clusters=3, epsilon=1.0, delta=1e-6, bounds=(-1, 1), horizon=8, random_state=5)
    args.update(kw)
    return ContinualKMeans(**args)


def test_continual_kmeans_tracks_the_data():
    from privclust.metrics import nicv

    rng = np.random.default_rng(0)
    model = _model()
    current = _blobs(rng, 10_000, CENTERS)
    model.update(insert=current)
    for _ in range(3):
        new = _blobs(rng, 1000, CENTERS)
        centers = model.update(insert=new, delete=current[:1000])
        current = np.vstack([current[1000:], new])
    assert model.step_ == 4 and model.centers_ is centers and centers.shape == (3, 2)
    assert nicv(current, centers) <= 3.0 * nicv(current, CENTERS)
    assert model.privacy_spent_.epsilon <= 1.0 + 1e-9


def test_resumed_stream_gives_the_outputs_of_an_uninterrupted_one(tmp_path):
    rng = np.random.default_rng(1)
    batches = [_blobs(rng, 2000, CENTERS) for _ in range(6)]
    whole = _model()
    expected = [whole.update(insert=b, delete=batches[i - 1][:500] if i else None) for i, b in enumerate(batches)]
    first = _model()
    for i, b in enumerate(batches[:3]):
        first.update(insert=b, delete=batches[i - 1][:500] if i else None)
    first.save(tmp_path / "state.npz")
    resumed = ContinualKMeans.load(tmp_path / "state.npz", expect=_model())
    assert resumed.step_ == 3
    np.testing.assert_array_equal(resumed.centers_, expected[2])
    for i in range(3, 6):
        np.testing.assert_array_equal(resumed.update(insert=batches[i], delete=batches[i - 1][:500]), expected[i])
    assert not list(tmp_path.glob(".*part"))  # the atomic write left no temporary file


def test_state_file_from_another_configuration_or_damaged_is_refused(tmp_path):
    model = _model()
    model.update(insert=np.zeros((10, 2)))
    path = tmp_path / "state.npz"
    model.save(path)
    with pytest.raises(ValueError, match="another configuration.*epsilon"):
        ContinualKMeans.load(path, expect=_model(epsilon=0.5))
    with pytest.raises(ValueError, match="another configuration.*horizon"):
        ContinualKMeans.load(path, expect=_model(horizon=9))
    data = dict(np.load(path))
    data["q0_open"] = data["q0_open"] + 1.0
    np.savez(tmp_path / "tampered.npz", **data)
    with pytest.raises(ValueError, match="intact"):
        ContinualKMeans.load(tmp_path / "tampered.npz")
    (tmp_path / "junk.npz").write_bytes(b"not a state file")
    with pytest.raises(ValueError, match="not a privclust"):
        ContinualKMeans.load(tmp_path / "junk.npz")


def test_updates_past_the_horizon_are_refused_and_change_nothing():
    model = _model(horizon=2)
    model.update(insert=np.zeros((5, 2)))
    model.update(insert=np.ones((5, 2)))
    before = [c.state() for c in model.oracle_.counters]
    centers = model.centers_.copy()
    with pytest.raises(HorizonError, match="horizon of 2 steps"):
        model.update(insert=np.zeros((5, 2)))
    assert model.step_ == 2
    np.testing.assert_array_equal(model.centers_, centers)
    for saved, counters in zip(before, model.oracle_.counters):
        for name, value in counters.state().items():
            np.testing.assert_array_equal(value, saved[name])


def test_a_deletion_undoes_its_insertion_and_a_stray_deletion_corrupts_nothing():
    rng = np.random.default_rng(2)
    rows = _blobs(rng, 3000, CENTERS)
    churn, quiet = _model(), _model()
    churn.update(insert=rows[:100])
    churn.update(delete=rows[:100])
    quiet.update(insert=np.zeros((0, 2)))
    quiet.update(insert=np.zeros((0, 2)))
    for a, b in zip(churn.oracle_.releases(), quiet.oracle_.releases()):
        for name in a.values:  # the same noise, and the item's contribution cancelled exactly
            np.testing.assert_allclose(a[name], b[name], atol=1e-9)
    stray = _model()
    stray.update(insert=rows)
    stray.update(delete=rows[:50] + 0.3)  # never inserted: accepted, not checked (caller's promise)
    centers = stray.update(insert=rows[:10])
    assert stray.step_ == 3 and np.all(np.isfinite(centers))


def test_bad_input_is_refused_before_anything_changes():
    model = _model()
    model.update(insert=np.zeros((3, 2)))
    with pytest.raises(ValueError, match="NaN"):
        model.update(insert=np.array([[0.0, np.nan]]))
    with pytest.raises(ValueError, match="3 features"):
        model.update(delete=np.zeros((2, 3)))
    assert model.step_ == 1
    with pytest.raises(ValueError, match="greedy"):
        _model(algorithm="fastlloyd")
    with pytest.raises(ValueError, match="delta > 0"):
        _model(delta=0.0)


def test_stream_command_publishes_every_step_and_resumes(tmp_path):
    import json

    import pandas as pd
    from typer.testing import CliRunner

    from privclust.cli import app

    rng = np.random.default_rng(4)
    rows = [(t, "insert", *x) for t in (1, 2, 3) for x in _blobs(rng, 400, CENTERS)]
    rows += [(3, "delete", *rows[0][2:])]
    pd.DataFrame(rows, columns=["step", "op", "x", "y"]).to_csv(tmp_path / "events.csv", index=False)
    base = ["stream", str(tmp_path / "events.csv"), "-k", "3", "--horizon", "5", "--bounds=-1,1", "--seed", "2"]
    runner = CliRunner()
    result = runner.invoke(app, base + ["-o", str(tmp_path / "all.jsonl")])
    assert result.exit_code == 0, result.output
    published = [json.loads(line) for line in (tmp_path / "all.jsonl").read_text().splitlines()]
    assert [p["step"] for p in published] == [1, 2, 3, 4, 5]
    assert np.array(published[-1]["centers"]).shape == (3, 2)
    state = ["--state", str(tmp_path / "state.npz")]
    assert runner.invoke(app, base + state + ["--until", "2", "-o", str(tmp_path / "a.jsonl")]).exit_code == 0
    assert runner.invoke(app, base + state + ["-o", str(tmp_path / "b.jsonl")]).exit_code == 0
    resumed = [
        json.loads(line) for name in ("a", "b") for line in (tmp_path / f"{name}.jsonl").read_text().splitlines()
    ]
    assert resumed == published
    refused = runner.invoke(app, base + state + ["-e", "0.5", "-o", str(tmp_path / "x.jsonl")])
    assert refused.exit_code == 2 and "another configuration" in refused.output
    assert not (tmp_path / "x.jsonl").exists()


# -- the command's durable runs: ledger, replay, outputs, state file (issue 25, items 4 and 8) ----------------


def _events(tmp_path, steps=(1, 2, 3), extra=()):
    import pandas as pd

    rng = np.random.default_rng(4)
    rows = [(t, "insert", *x) for t in steps for x in _blobs(rng, 200, CENTERS)]
    rows += list(extra)
    pd.DataFrame(rows, columns=["step", "op", "x", "y"]).to_csv(tmp_path / "events.csv", index=False)
    return ["stream", str(tmp_path / "events.csv"), "-k", "3", "--horizon", "5", "--bounds=-1,1", "--seed", "2"]


def _run(args):
    from typer.testing import CliRunner

    from privclust.cli import app

    return CliRunner().invoke(app, [str(a) for a in args])


def _steps(path):
    import json

    return [json.loads(line)["step"] for line in path.read_text().splitlines()]


def test_stream_ledger_charges_the_horizon_once_and_refuses_an_older_state(tmp_path):
    import shutil

    from privclust.privacy.ledger import LedgerAccountant

    base = _events(tmp_path)
    ledger = LedgerAccountant.create(tmp_path / "ledger.json", Budget(3.0, 1e-5))
    state, out = tmp_path / "state.npz", tmp_path / "centers.jsonl"
    common = base + ["--ledger", ledger.path, "--state", state, "-o", out]
    first = _run(common + ["--until", "2"])
    assert first.exit_code == 0, first.output
    charged = ledger.guarantee()
    assert 0 < charged[0] <= 1.0 + 1e-9 and len(ledger.entries()) == 1
    shutil.copy(state, tmp_path / "old.npz")
    assert _run(common + ["--until", "4"]).exit_code == 0
    assert ledger.guarantee() == charged and len(ledger.entries()) == 1  # a resume charges nothing more
    assert ledger.entries()[0]["about"]["stream step"] == 4
    shutil.copy(tmp_path / "old.npz", state)  # an older copy of the state, and a fresh output file
    replay = _run(base + ["--ledger", ledger.path, "--state", state, "-o", tmp_path / "other.jsonl"])
    assert replay.exit_code == 2 and "older state" in replay.output
    assert not (tmp_path / "other.jsonl").exists() and ledger.guarantee() == charged
    unledgered = _run(base + ["--state", state, "-o", tmp_path / "other.jsonl"])
    assert unledgered.exit_code == 2 and "--ledger" in unledgered.output


@pytest.mark.parametrize("killed_in", ["record_stream_step", "write_whole"])
def test_a_stream_run_killed_while_publishing_never_lets_an_older_state_publish_its_steps_again(
    tmp_path, monkeypatch, killed_in
):
    # The ledger's step is recorded before the output and the state are written: killed while recording, nothing
    # is out and the older state resumes; killed after, the older state is refused, whichever output it names.
    # (The ledger used to be recorded last: killed there, the steps were out and the older state published them
    # again, with fresh noise.)
    import importlib
    import shutil

    from privclust.privacy.ledger import LedgerAccountant

    stream_cli = importlib.import_module("privclust.cli.stream")  # the module: the package names its command alike

    base = _events(tmp_path)
    ledger = LedgerAccountant.create(tmp_path / "ledger.json", Budget(3.0, 1e-5))
    state, out = tmp_path / "state.npz", tmp_path / "centers.jsonl"
    common = base + ["--ledger", ledger.path, "--state", state]
    assert _run(common + ["-o", out, "--until", "2"]).exit_code == 0
    shutil.copy(state, tmp_path / "old.npz")

    def killed(*args, **kwargs):
        raise KeyboardInterrupt("killed")

    if killed_in == "record_stream_step":
        monkeypatch.setattr(LedgerAccountant, "record_stream_step", killed)
    else:
        monkeypatch.setattr(stream_cli, "write_whole", killed)
    assert _run(common + ["-o", out, "--until", "4"]).exit_code != 0
    monkeypatch.undo()
    assert _steps(out) == [1, 2]  # the killed run published nothing
    shutil.copy(tmp_path / "old.npz", state)
    again = _run(common + ["-o", tmp_path / "other.jsonl", "--until", "4"])
    if killed_in == "record_stream_step":  # the ledger still says step 2: steps 3 and 4 are published once, now
        assert again.exit_code == 0, again.output
        assert _steps(tmp_path / "other.jsonl") == [3, 4]
    else:  # the ledger says step 4: steps 3 and 4 are lost, never published twice
        assert again.exit_code == 2 and "older state" in again.output
        assert not (tmp_path / "other.jsonl").exists()


def test_stream_dropna_treats_a_row_missing_its_step_as_any_dropped_row(tmp_path):
    # --dropna is a rule per row: the row missing its step is dropped, and the column it left as floats is still
    # read as whole steps (it used to refuse the whole file: its fate hung on one row).
    plain = _run(_events(tmp_path) + ["-o", tmp_path / "plain.jsonl", "--dropna"])
    assert plain.exit_code == 0, plain.output
    missing = _run(
        _events(tmp_path, extra=[(None, "insert", 0.5, 0.5)]) + ["-o", tmp_path / "missing.jsonl", "--dropna"]
    )
    assert missing.exit_code == 0, missing.output
    assert (tmp_path / "plain.jsonl").read_text() == (tmp_path / "missing.jsonl").read_text()
    (tmp_path / "half.csv").write_text("step,op,x,y\n1.5,insert,0.1,0.2\n")
    half = _run(["stream", tmp_path / "half.csv", "-k", "2", "--horizon", "3", "--bounds=-1,1", "-o", tmp_path / "h"])
    assert half.exit_code == 2 and "must hold integers" in half.output


def test_stream_publishes_from_a_header_alone_as_from_its_one_row_neighbour(tmp_path):
    # An empty data set neighbours every one-row one: refusing it would say n = 0 (its columns come back untyped).
    args = ["-k", "2", "--horizon", "3", "--bounds=-1,1", "--seed", "1"]
    for name, text in (("none", "step,op,x,y\n"), ("one", "step,op,x,y\n2,insert,0.5,0.5\n")):
        (tmp_path / f"{name}.csv").write_text(text)
        done = _run(["stream", tmp_path / f"{name}.csv", *args, "-o", tmp_path / f"{name}.jsonl"])
        assert done.exit_code == 0, done.output
        assert _steps(tmp_path / f"{name}.jsonl") == [1, 2, 3]


def test_stream_without_ledger_refuses_a_state_older_than_its_output(tmp_path):
    import shutil

    base = _events(tmp_path)
    state, out = tmp_path / "state.npz", tmp_path / "centers.jsonl"
    assert _run(base + ["--state", state, "-o", out, "--until", "2"]).exit_code == 0
    shutil.copy(state, tmp_path / "old.npz")
    assert _run(base + ["--state", state, "-o", out, "--until", "4"]).exit_code == 0
    before = out.read_text()
    shutil.copy(tmp_path / "old.npz", state)
    replay = _run(base + ["--state", state, "-o", out])
    assert replay.exit_code == 2 and "older state" in replay.output
    assert out.read_text() == before


def test_stream_output_is_appended_on_resume_and_never_truncated(tmp_path):
    base = _events(tmp_path)
    state, out = tmp_path / "state.npz", tmp_path / "centers.jsonl"
    assert _run(base + ["--state", state, "-o", out, "--until", "2"]).exit_code == 0
    assert _run(base + ["--state", state, "-o", out]).exit_code == 0
    assert _steps(out) == [1, 2, 3, 4, 5]  # resumed: appended, the earlier steps kept
    whole = out.read_text()
    again = _run(base + ["--state", state, "-o", out])  # the documented command, re-run after it finished
    assert again.exit_code == 2 and "already published step 5" in again.output
    fresh = _run(base + ["-o", out])  # a new stream (no state) onto an existing output
    assert fresh.exit_code == 2 and "exists" in fresh.output
    assert out.read_text() == whole


def test_stream_state_file_is_readable_by_its_owner_only(tmp_path):
    base = _events(tmp_path)
    state = tmp_path / "state.npz"
    assert _run(base + ["--state", state, "-o", tmp_path / "a.jsonl", "--until", "2"]).exit_code == 0
    assert state.stat().st_mode & 0o777 == 0o600


def test_stream_corrupt_state_is_a_one_line_error(tmp_path):
    base = _events(tmp_path)
    state = tmp_path / "state.npz"
    assert _run(base + ["--state", state, "-o", tmp_path / "a.jsonl", "--until", "2"]).exit_code == 0
    data = state.read_bytes()
    state.write_bytes(data[: len(data) // 2])  # a truncated copy
    result = _run(base + ["--state", state, "-o", tmp_path / "b.jsonl"])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit)
    assert "not a privclust stream state file" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "b.jsonl").exists()


def test_stream_drops_events_outside_the_horizon_by_a_public_rule(tmp_path):
    inside = _events(tmp_path)
    assert _run(inside + ["-o", tmp_path / "a.jsonl"]).exit_code == 0
    outside = _events(tmp_path, extra=[(9, "insert", 0.5, 0.5), (0, "delete", 0.1, 0.1)])
    result = _run(outside + ["-o", tmp_path / "b.jsonl"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "a.jsonl").read_text() == (tmp_path / "b.jsonl").read_text()  # same seed: same outputs
    assert "outside steps 1..5 are dropped" in result.output


def test_nothing_public_counts_the_touched_sparse_buckets():
    rng = np.random.default_rng(6)
    rows = rng.uniform(-1, 1, size=(500, 6))
    a, b = _model(bounds=(-1, 1)), _model(bounds=(-1, 1))
    a.update(insert=rows)
    b.update(insert=np.vstack([rows, [[0.91, -0.93, 0.97, -0.95, 0.92, -0.9]]]))  # one more row, new buckets
    assert getattr(a, "memory_bytes_", None) == getattr(b, "memory_bytes_", None)


class _Counting(SeededNoise):
    """Seeded noise that records the size of every Gaussian draw."""

    def __init__(self, seed=0):
        super().__init__(np.random.SeedSequence(seed))
        self.sizes = []

    def add_gaussian(self, values, std):
        self.sizes.append(np.asarray(values).size)
        return super().add_gaussian(values, std)


@pytest.mark.parametrize("mechanism", ["honaker", "tree"])
def test_a_step_draws_its_nodes_noise_in_one_call_per_block(mechanism):
    counters = ContinualCounters(16, [1.0, 1.0, 2.0], mechanism, n_buckets=5)  # two blocks of columns
    for _ in range(7):
        counters.end_step(_noise())
    noise = _Counting()
    counters.end_step(noise)  # step 8 closes levels 0..3
    used = 4 if mechanism == "honaker" else 1  # the plain tree never uses the right children below level 3
    assert sorted(noise.sizes) == [5 * 1 * used, 5 * 2 * used]


def test_bench_stream_times_steps_with_secure_noise(tmp_path):
    from privclust.bench import stream as bench

    secure = bench.run_secure_steps(horizon=8, steps=2, k=3, window=400, batch=100)
    assert secure["secure"] and len(secure["update_s"]) == len(secure["centers_s"]) == 2
    window = {"steps": [{"step": 1, "continual": 1.0, "kmeans++": 1.0, "naive": 1.0}], "spent": "x"}
    window["median_last_half"] = {"continual": 1.0, "kmeans++": 1.0, "naive": 1.0}
    horizons = [dict(horizon=8, continual=1.0, naive=1.0, ratio=1.0, update_ms=1.0, update_rows=2, centers_ms=1.0)]
    horizons[0]["counter_mb"] = 1.0
    report = bench.write_report(window, horizons, tmp_path, "test", secure).read_text()
    assert "Secure noise (OpenDP), T = 8" in report


def test_stream_ledger_refuses_the_budget_before_reading_any_event(tmp_path):
    from privclust.privacy.ledger import LedgerAccountant

    base = _events(tmp_path, extra=[(2, "insert", float("nan"), 0.0)])  # a bad row: only read after the budget
    ledger = LedgerAccountant.create(tmp_path / "ledger.json", Budget(0.5, 1e-5))
    result = _run(base + ["--ledger", ledger.path, "-o", tmp_path / "a.jsonl"])
    assert result.exit_code == 2 and "NaN" not in result.output and "budget" in result.output.lower()
    assert ledger.entries() == [] and not (tmp_path / "a.jsonl").exists()


def test_stream_refuses_a_state_path_it_cannot_write_before_publishing(tmp_path):
    """The state is saved after the steps are published: a folder that does not exist is refused first, so the
    stream is never left with its centers published, its budget charged and no state to resume from."""
    base = _events(tmp_path)
    out = tmp_path / "centers.jsonl"
    refused = _run(base + ["--state", tmp_path / "missing" / "state.npz", "-o", out, "--until", "2"])
    assert refused.exit_code == 2 and "--state" in refused.output and not out.exists()


def test_stream_refuses_to_resume_against_a_copy_of_its_ledger(tmp_path):
    """A copy of the ledger holds the stream's run id too: resuming against it would publish the next steps
    without the real ledger ever recording them, so the state's ledger must be the one given."""
    import shutil

    from privclust.privacy.ledger import LedgerAccountant

    base = _events(tmp_path)
    first = LedgerAccountant.create(tmp_path / "first.json", Budget(3.0, 1e-5))
    state, out = tmp_path / "state.npz", tmp_path / "centers.jsonl"
    assert _run(base + ["--ledger", first.path, "--state", state, "-o", out, "--until", "2"]).exit_code == 0
    shutil.copy(first.path, tmp_path / "copy.json")
    moved = _run(base + ["--ledger", tmp_path / "copy.json", "--state", state, "-o", out])
    assert moved.exit_code == 2 and "charged to the ledger" in moved.output
    assert json.loads(out.read_text().splitlines()[-1])["step"] == 2  # nothing more was published


def test_a_seeded_stream_warns_that_its_noise_is_seeded_and_a_secure_one_does_not():
    import warnings

    from privclust.privacy.leaks import PrivacyLeakWarning

    with pytest.warns(PrivacyLeakWarning, match="seeded random_state"):
        _model(random_state=5)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        _model(random_state=None)

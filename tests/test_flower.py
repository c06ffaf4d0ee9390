"""Federated FastLloyd as a Flower app: its rounds in process, Flower's own SecAgg+ arithmetic, and a real
federation (SuperLink, three SuperNodes, ``flwr run``) on loopback."""

import json
import os

import numpy as np
import pytest
from ring_replay import RingReplay

from privclust.algorithms import ALGORITHMS, FitContext
from privclust.federated import Job, JobLimits, crypto
from privclust.federated.ring import encode
from privclust.federated.secagg import output_mask
from privclust.federated.server import draw_ring_noise, validate_spec
from privclust.federated.wire import ProtocolError
from privclust.flower.rounds import (
    CLIPPING_RANGE,
    MAX_WEIGHT,
    MODULUS_RANGE,
    QUANTIZATION_RANGE,
    ClientRounds,
    from_limb_average,
    to_limbs,
)
from privclust.geometry.domain import make_domain
from privclust.privacy.budget import Budget
from privclust.privacy.noise import Randomness, SecureNoise

TRUE_CENTERS = np.array([[-0.6, -0.5], [0.55, -0.4], [0.0, 0.6]])
KEY = bytes(range(32))


@pytest.fixture(scope="module")
def parts():
    rng = np.random.default_rng(3)
    X = np.clip(TRUE_CENTERS[rng.integers(0, 3, 3000)] + rng.normal(0, 0.06, (3000, 2)), -1, 1)
    return np.array_split(X, 3)


def secaggplus_average(limb_vectors):
    """What Flower's SecAgg+ hands the strategy, computed with Flower's own quantize / dequantize and its
    modular sums (clients' collect stage and the server's unmask stage, masks left out: they cancel)."""
    from flwr.common.secure_aggregation.quantization import dequantize, quantize

    n = len(limb_vectors)
    total = np.zeros(len(limb_vectors[0]), dtype=np.int64)
    for limbs in limb_vectors:
        total = (total + quantize([limbs], CLIPPING_RANGE, QUANTIZATION_RANGE)[0]) % MODULUS_RANGE
    ratio = round(1 / MAX_WEIGHT * QUANTIZATION_RANGE)
    (average,) = dequantize([total], CLIPPING_RANGE, QUANTIZATION_RANGE)
    average += -(n - 1) * CLIPPING_RANGE
    average *= QUANTIZATION_RANGE / (n * ratio % MODULUS_RANGE)
    return average


def test_limbs_through_flowers_quantization_give_the_exact_ring_sum():
    """64-bit ring elements survive SecAgg+'s clipping, stochastic quantization and weighted mean exactly."""
    rng = np.random.default_rng(0)
    vectors = [rng.integers(0, 2**64, 50, dtype=np.uint64) for _ in range(5)]
    vectors[0][:3] = [0, 2**64 - 1, 2**63]  # the edges of the ring
    for _ in range(3):  # the rounding is stochastic: exact every time
        total = from_limb_average(secaggplus_average([to_limbs(v) for v in vectors]), len(vectors))
        np.testing.assert_array_equal(total, sum(vectors))  # numpy's uint64 sum wraps modulo 2^64
    with pytest.raises(ProtocolError, match="not a sum of limbs"):
        from_limb_average(secaggplus_average([to_limbs(v) for v in vectors]) + 0.3, len(vectors))


def _clients(parts, limits=None):
    clients = [ClientRounds() for _ in parts]
    announced = {
        "job": Job(3, 1.0, 1e-6, [-1, 1], public_n=3000, max_iter=3, algorithm="fastlloyd").as_dict(),
        "parties": 3,
        "threshold": 2,
    }
    nonces = [c.hello(json.loads(json.dumps(announced)), limits or JobLimits(), 2) for c in clients]
    return clients, nonces


def _run(parts, noise=None, record=None):
    """The server's side in process: SecAgg+ replaced by the plain sum of the limbs it would reveal."""
    clients, nonces = _clients(parts)
    release, survivors, round_index = None, None, 0
    while True:
        answers = [
            c.next_round(p, KEY, round_index, nonces if round_index == 0 else None, release, survivors)
            for c, p in zip(clients, parts)
        ]
        if answers[0][0] == "done":
            return [a[1] for a in answers], clients
        assert all(a == answers[0] for a in answers)  # every client asks for the same public query
        n_buckets, blocks, count = validate_spec(answers[0][2], 2**20)
        limbs = [c.contribute(p, KEY, round_index, 2) for c, p in zip(clients, parts)]
        if record is not None:
            record.append(limbs)
        total = from_limb_average(secaggplus_average(limbs), 3)
        if noise is not None:
            total += draw_ring_noise(noise, n_buckets, blocks).ravel()
        release, survivors = total.astype("<u8").tobytes(), list(nonces)
        round_index += 1


def test_without_noise_the_rounds_are_bit_exact(parts):
    """Without the server's noise every client ends with the centers of the central ring replay from the same
    public start: the Flower rounds compute exactly what the own protocol computes (which equals the replay)."""
    results, clients = _run(parts)
    seed = crypto.geometry_seed(KEY, clients[0].state["session"])
    ctx = FitContext(RingReplay(parts), 3, Budget(1.0, 1e-6), Randomness(seed), public_n=3000, options={"max_iter": 3})
    expected = make_domain((-1, 1), 2).from_unit(ALGORITHMS["fastlloyd"](ctx).centers)
    for result in results:
        np.testing.assert_array_equal(result.centers, expected)
        assert result.contributors == [[0, 1, 2]] * 3
        assert result.privacy_spent["epsilon"] == pytest.approx(1.0)


def test_each_message_reads_the_rows_at_most_once_whatever_the_round(parts, monkeypatch):
    """A client replays the earlier rounds from their stored releases without reading a row: announcing round t
    reads none, contributing to it reads the rows once.  (Each message used to sum every earlier round again:
    O(T^2) passes over the rows in a run of T rounds.)"""
    from privclust.queries.rows import MemoryRows

    passes = []
    sums = MemoryRows.sums

    def counted(self, queries):
        passes[-1] += 1
        return sums(self, queries)

    monkeypatch.setattr(MemoryRows, "sums", counted)
    clients, nonces = _clients(parts)
    c, p = clients[0], parts[0]
    others = list(zip(clients[1:], parts[1:]))
    release, survivors, per_message = None, None, []
    for round_index in range(5):
        passes.append(0)
        answer = c.next_round(p, KEY, round_index, nonces if round_index == 0 else None, release, survivors)
        announced = passes[-1]
        for other, rows in others:
            other.next_round(rows, KEY, round_index, nonces if round_index == 0 else None, release, survivors)
        if answer[0] == "done":
            per_message.append((announced, None))
            break
        passes.append(0)
        limbs = [c.contribute(p, KEY, round_index, 2)]
        contributed = passes[-1]
        limbs += [other.contribute(rows, KEY, round_index, 2) for other, rows in others]
        per_message.append((announced, contributed))
        release = from_limb_average(secaggplus_average(limbs), 3).astype("<u8").tobytes()
        survivors = list(nonces)
    assert per_message == [(0, 1), (0, 1), (0, 1), (0, None)]  # three iterations, then done
    assert [len(c.state["releases"]) for c in clients] == [3, 3, 3]


def test_with_the_servers_noise_the_ledger_is_the_plans(parts):
    results, _ = _run(parts, noise=SecureNoise())
    assert all(np.array_equal(r.centers, results[0].centers) for r in results)
    steps = [s["label"] for s in results[0].privacy_spent["steps"]]
    assert steps == [f"iteration {t}/{b}" for t in (1, 2, 3) for b in ("sum", "count")]
    assert results[0].privacy_spent["epsilon"] == pytest.approx(1.0)


def test_what_the_server_sees_is_masked_by_the_clients_output_masks(parts):
    """SecAgg+ reveals the sum of what the clients hand it: here that is sum_i (x_i + O_i), and it differs from
    the exact encoded sums by exactly the output masks, which take the group key the server does not have."""
    record = []
    _, clients = _run(parts, record=record)
    session, nonces = clients[0].state["session"], clients[0].state["nonces"]
    seen = from_limb_average(secaggplus_average(record[0]), 3)
    masks = sum(output_mask(KEY, session, n, 0, seen.size) for n in nonces)
    exact = seen - masks
    assert not np.array_equal(seen, exact)
    # without the key, another key's masks leave nothing that decodes as bounded sums
    wrong = seen - sum(output_mask(bytes(32), session, n, 0, seen.size) for n in nonces)
    assert np.all(np.abs(exact.view(np.int64)) < 2**40) and not np.all(np.abs(wrong.view(np.int64)) < 2**40)
    # each client's limbs are uniform 16-bit values whatever its data: the masked element, not the sums
    limbs = np.concatenate(record[0]) + CLIPPING_RANGE
    assert limbs.min() >= 0 and limbs.max() < QUANTIZATION_RANGE and np.ptp(limbs) > QUANTIZATION_RANGE / 2


def test_a_client_refuses_what_would_weaken_its_masks_or_its_limits(parts):
    announced = {"job": Job(3, 2.0, 1e-6, [-1, 1], algorithm="fastlloyd").as_dict(), "parties": 3, "threshold": 2}
    with pytest.raises(ValueError, match="above this party's limit"):
        ClientRounds().hello(announced, JobLimits(max_epsilon=1.0), 2)
    with pytest.raises(ValueError, match="requires at least 3"):
        ClientRounds().hello(
            {**announced, "job": Job(3, 1.0, 1e-6, [-1, 1], algorithm="fastlloyd").as_dict()},
            JobLimits(min_threshold=3),
            2,
        )

    clients, nonces = _clients(parts)
    c, p = clients[0], parts[0]
    with pytest.raises(ProtocolError, match="fresh nonce"):  # a server replaying an old session
        c.next_round(p, KEY, 0, [crypto.new_nonce() for _ in range(3)])
    assert c.next_round(p, KEY, 0, nonces)[0] == "round"
    with pytest.raises(ProtocolError, match="threshold"):
        c.contribute(p, KEY, 0, 1)
    first = c.contribute(p, KEY, 0, 2)
    with pytest.raises(ProtocolError, match="masked once"):  # one output mask, one message
        c.contribute(p, KEY, 0, 2)
    assert first.size == 4 * encode(np.zeros(first.size // 4)).size
    release = np.zeros(first.size // 4, dtype=np.uint64).tobytes()
    with pytest.raises(ProtocolError, match="leave out this client"):
        c.next_round(p, KEY, 1, release=release, survivors=nonces[1:])


@pytest.mark.slow
def test_a_flower_federation_of_three_supernodes_on_loopback(parts, tmp_path):
    """Real processes: a SuperLink, three SuperNodes and ``flwr run`` of privclust's app, SecAgg+ between them.

    The centers are the central ring replay's (from the same public start) up to the noise, and the server's
    ledger and every client's match the plan."""
    from privclust.flower.local import run_local

    out = run_local(
        parts, tmp_path, timeout=600, k=3, epsilon=1.0, delta=1e-6, public_n=3000, max_iter=1, algorithm="fastlloyd"
    )
    results, server = out["clients"], out["server"]
    assert all(r is not None for r in results)
    assert server["rounds"] == 1 and server["contributors"] == [[0, 1, 2]]
    assert server["privacy_spent"]["epsilon"] == pytest.approx(1.0)
    assert all(r["privacy_spent"]["epsilon"] == pytest.approx(1.0) for r in results)
    assert all(r["centers"] == results[0]["centers"] for r in results)
    seed = crypto.geometry_seed((tmp_path / "group.key").read_bytes(), results[0]["session"])
    ctx = FitContext(RingReplay(parts), 3, Budget(1.0, 1e-6), Randomness(seed), public_n=3000, options={"max_iter": 1})
    replay = ALGORITHMS["fastlloyd"](ctx)
    expected = make_domain((-1, 1), 2).from_unit(replay.centers)
    # The replay is exact; the federation's step divides noisy sums (std sigma_R) by a noisy count (std sigma_C),
    # so a center moves by about (sigma_R + sigma_C) / n_j: ~0.01 for a cell of 1,000 rows, but ~0.1 for one of
    # 100, which a random start (a fresh session each run) sometimes leaves a center with.  Six such deviations.
    sizes, info = np.maximum(np.asarray(replay.info["sizes"]), 1.0), replay.info
    tolerance = 0.01 + 6.0 * (info["sigma_R"] + info["sigma_C"]) / sizes
    assert np.all(np.abs(np.asarray(results[0]["centers"]) - expected) <= tolerance[:, None]), (tolerance, expected)
    assert server["bytes_sent"] and all(v > 0 for v in server["bytes_received"].values())
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".privclust-")]  # results written whole


def test_a_dropout_leaves_the_survivors_with_the_replay_of_their_rows(parts):
    """A client missing from round 1 on: the other two release the sums of their own rows (the replay with
    their rows only from round 1), their results name who contributed, and the dropped client refuses to go on."""
    clients, nonces = _clients(parts)
    alive = [0, 1, 2]
    release, survivors, round_index = None, None, 0
    while True:
        answers = {
            i: clients[i].next_round(
                parts[i], KEY, round_index, nonces if round_index == 0 else None, release, survivors
            )
            for i in alive
        }
        if answers[alive[0]][0] == "done":
            break
        if round_index == 1:
            alive = [0, 1]  # client 2 answered the query but its SecAgg+ message never came
        limbs = [clients[i].contribute(parts[i], KEY, round_index, 2) for i in alive]
        release = from_limb_average(secaggplus_average(limbs), len(alive)).astype("<u8").tobytes()
        survivors, round_index = [clients[i].state["nonce"] for i in alive], round_index + 1
    with pytest.raises(ProtocolError, match="did not send"):
        clients[2].next_round(parts[2], KEY, round_index, release=release, survivors=survivors)

    seed = crypto.geometry_seed(KEY, clients[0].state["session"])
    replay = RingReplay(parts)
    replay.contributors = lambda r: replay.local if r == 0 else replay.local[:2]
    ctx = FitContext(replay, 3, Budget(1.0, 1e-6), Randomness(seed), public_n=3000, options={"max_iter": 3})
    expected = make_domain((-1, 1), 2).from_unit(ALGORITHMS["fastlloyd"](ctx).centers)
    index = sorted(nonces).index
    ids = sorted(index(clients[i].state["nonce"]) for i in (0, 1))
    for i in (0, 1):
        result = answers[i][1]
        np.testing.assert_array_equal(result.centers, expected)
        assert result.contributors == [[0, 1, 2], ids, ids]


def test_bad_run_and_node_configs_are_refused_with_the_key_to_fix(tmp_path):
    from privclust.flower.app import _node_settings, job_from_run_config

    good = {"k": 3, "epsilon": 1.0, "delta": 1e-6, "bounds": "-1,1", "clients": 3}
    job, clients, threshold, _ = job_from_run_config(good)
    assert (job.n_clusters, clients, threshold) == (3, 3, 2)
    for bad, message in [
        ({"bounds": "-1"}, "'bounds' must be 'lo,hi'"),
        ({"clients": 1}, "'clients' must be 2"),
        ({"threshold": 1}, "'threshold' must be a majority"),
        ({"timeout": -1}, "'timeout' must be a positive"),
    ]:
        with pytest.raises(ValueError, match=message):
            job_from_run_config({**good, **bad})
    with pytest.raises(ValueError, match=r"\['epsilon'\] missing"):
        job_from_run_config({key: value for key, value in good.items() if key != "epsilon"})
    with pytest.raises(ValueError, match="node config 'group-key' is missing"):
        _node_settings({"data": str(tmp_path / "x.csv"), "out": str(tmp_path / "o.json")})
    (tmp_path / "short.key").write_bytes(b"x" * 8)
    with pytest.raises(ValueError, match="at least 32 random bytes"):
        _node_settings({"data": "never-read.csv", "group-key": str(tmp_path / "short.key"), "out": "o.json"})


def test_bench_refuses_an_unknown_engine():
    from typer.testing import CliRunner

    from privclust.cli import app

    out = CliRunner().invoke(app, ["bench", "federated", "--engine", "own,ray"])
    assert out.exit_code != 0 and "unknown engine 'ray'" in out.output


def test_a_clients_failure_reaches_the_server_without_its_reason(capsys):
    """Flower forwards a ClientApp's exception text to the server: a refusal of the client's rows (which depends on
    them) must reach it as a type only, the reason staying in the client's own log."""
    from privclust.flower import app

    def refuses_its_rows(msg, context):
        raise ValueError("data.csv: column 'b' has a missing value in row 17 (value 3.25)")

    with pytest.raises(ProtocolError) as told:
        app._told_the_server_nothing_of_the_data(refuses_its_rows)(None, None)
    assert str(told.value) == "the client stopped (ValueError): see its own log"
    assert "row 17" in capsys.readouterr().err  # the node's operator still sees why
    with pytest.raises(ProtocolError, match="unknown stage"):  # protocol errors name public messages only
        app._told_the_server_nothing_of_the_data(lambda m, c: (_ for _ in ()).throw(ProtocolError("unknown stage")))(
            None, None
        )
    assert app._client_query.__wrapped__ and app._client_train.__wrapped__  # both handlers go through it


def test_a_node_limit_of_zero_is_refused_not_taken_for_the_default(tmp_path):
    """max-delta = 0 (accept no approximate DP) became 1e-6: a (1, 1e-6) job was then accepted."""
    from privclust.flower.app import _node_settings

    (tmp_path / "group.key").write_bytes(b"k" * 32)
    node = {"data": "never-read.csv", "group-key": str(tmp_path / "group.key"), "out": "o.json"}
    for name, value in (("max-delta", "0"), ("max-epsilon", "0"), ("max-epsilon", "nan"), ("max-delta", "-1e-6")):
        with pytest.raises(ValueError, match=f"'{name}' must be a positive number"):
            _node_settings({**node, name: value})


def test_a_flower_run_aborted_after_released_rounds_says_what_they_spent(parts, monkeypatch):
    """The server app's ledger was a local variable: a run aborted at round 2 reported nothing of the two rounds
    it had released. serve() now raises a FederatedAbort that says how many and what they spent. Flower's
    messaging and SecAgg+ are replaced here by the clients' own rounds and the plain sum of their limbs."""
    from privclust.federated import FederatedAbort
    from privclust.flower import app

    clients = {n: ClientRounds() for n in (11, 12, 13)}
    rows = dict(zip(clients, parts))

    def ask(grid, nodes, content, timeout):
        replies = {}
        for n in sorted(nodes):
            if content["stage"] == "hello":
                replies[n] = {"nonce": clients[n].hello(json.loads(content["announce"]), JobLimits(), 2)}
                continue
            nonces = json.loads(content["nonces"]) if "nonces" in content else None
            survivors = json.loads(content["survivors"]) if "survivors" in content else None
            out = clients[n].next_round(rows[n], KEY, content["round"], nonces, content.get("release"), survivors)
            answer = {"done": True} if out[0] == "done" else {"done": False, "label": out[1], "spec": out[2]}
            replies[n] = {"answer": json.dumps(answer, sort_keys=True)}
        return replies, {}

    def secure_sum(grid, context, nodes, round_index, threshold, timeout):
        if round_index == 2:  # two clients' SecAgg+ messages never arrive
            raise ProtocolError(f"round {round_index}: SecAgg+ aggregated 1 client, fewer than the threshold")
        limbs = [clients[n].contribute(rows[n], KEY, round_index, threshold) for n in sorted(nodes)]
        return secaggplus_average(limbs), sorted(nodes)

    monkeypatch.setattr(app, "_ask", ask)
    monkeypatch.setattr(app, "_secure_sum", secure_sum)
    monkeypatch.setattr(app, "_wait_for_nodes", lambda grid, n, timeout: sorted(clients))
    job = Job(3, 1.0, 1e-6, [-1, 1], algorithm="fastlloyd", public_n=3000)
    with pytest.raises(
        FederatedAbort, match=r"fewer than the threshold; before it, 2 round\(s\) were released"
    ) as told:
        app.serve(None, None, job, 3, 2, 10.0, noise=SecureNoise())
    assert 0 < told.value.privacy_spent["epsilon"] < 1.0

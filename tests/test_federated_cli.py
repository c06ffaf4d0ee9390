"""``privclust federated ...``: everything checkable is checked before connecting, with exit code 2."""

import gzip
import json
import socket
import threading
import time

import numpy as np
import pytest
from test_federated_secagg import Leave, leave_after
from typer.testing import CliRunner

from privclust.cli import app
from privclust.federated import FederatedAbort, FederatedServer, Job, join

runner = CliRunner()


class Outcome:
    def __init__(self, result):
        self.exit_code = result.exit_code
        self.output = " ".join(result.output.split())  # rich wraps long lines
        self.stdout = result.stdout


def invoke(*args):
    out = runner.invoke(app, ["federated", *map(str, args)])
    assert "Traceback" not in out.output
    return Outcome(out)


@pytest.fixture
def rows(tmp_path):
    rng = np.random.default_rng(3)
    path = tmp_path / "rows.csv"
    np.savetxt(path, np.clip(rng.normal(0, 0.3, (400, 2)), -1, 1), delimiter=",")
    return path


@pytest.fixture
def listener():
    """A port nobody should connect to: the checks run before connecting."""
    sock = socket.create_server(("127.0.0.1", 0))
    sock.setblocking(False)
    yield sock
    with pytest.raises(BlockingIOError):
        sock.accept()
    sock.close()


def test_make_certs_refuses_fewer_than_two_parties(tmp_path):
    out = invoke("make-certs", tmp_path / "c", "--parties", -2)
    assert out.exit_code == 2 and "--parties must be 2" in out.output
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--k", 0], "k must be a positive integer"),
        (["--bounds", "1,-1"], "empty"),
        (["--delta", 0], "delta must be positive"),
        (["--max-mib", -1], "--max-mib"),
        (["--timeout", 0], "--timeout"),
        (["--port", 99999], "--port"),
        (["--parties", 1], "parties"),
        (["--threshold", 1], "majority"),
        (["--bounds", "x"], "--bounds"),
    ],
)
def test_serve_validates_the_job_when_it_starts(args, message):
    base = {"--parties": 3, "--k": 3, "--bounds": "-1,1", "--port": 0, "--insecure-plain-tcp": None}
    for name, value in zip(args[::2], args[1::2]):
        base[name] = value
    flat = [x for name, value in base.items() for x in ([name] if value is None else [name, value])]
    out = invoke("serve", *flat)
    assert out.exit_code == 2 and message in out.output


def join_args(data, port, *more):
    return ["join", "--data", data, "--party", 0, "--parties", 2, "--server", f"127.0.0.1:{port}"] + [
        "--insecure-plain-tcp",
        *more,
    ]


def test_join_without_a_port_is_a_clear_error(rows):
    out = invoke("join", "--data", rows, "--party", 0, "--parties", 2, "--server", "127.0.0.1", "--insecure-plain-tcp")
    assert out.exit_code == 2 and "HOST:PORT" in out.output


def test_join_checks_the_output_folder_before_connecting(rows, listener, tmp_path):
    out = invoke(*join_args(rows, listener.getsockname()[1], "-o", tmp_path / "missing" / "c.csv"))
    assert out.exit_code == 2 and "does not exist" in out.output
    out = invoke(*join_args(rows, listener.getsockname()[1], "-o", tmp_path))
    assert out.exit_code == 2 and "is a folder" in out.output


def test_join_reports_unreadable_data_before_connecting(tmp_path, listener):
    text = tmp_path / "text.csv.gz"
    text.write_text("1,2\n3,4\n")
    whole = gzip.compress("\n".join(f"{i},{i}" for i in range(5000)).encode())
    truncated = tmp_path / "truncated.csv.gz"
    truncated.write_bytes(whole[: len(whole) // 2])
    ragged = tmp_path / "ragged.csv"
    ragged.write_text('1,2\n3,4,5\n"6,7\n')
    port = listener.getsockname()[1]
    for path, message in [
        (text, "not gzip-compressed"),
        (truncated, "truncated or corrupt"),
        (ragged, "not a well-formed table"),
        (tmp_path / "absent.csv", "no such file"),
    ]:
        out = invoke(*join_args(path, port, "-o", tmp_path / "c.csv"))
        assert out.exit_code == 2 and str(path) in out.output and message in out.output


def serve_in_thread(job, threaded: dict, parties=2, callbacks: dict | None = None):
    """A plain-TCP server and the parties of ``threaded`` (index -> rows) in threads; the rest are left to the CLI."""
    server = FederatedServer(job, parties, timeout=10)
    results = {}

    def serve():
        try:
            results["server"] = server.serve()
        except Exception as exc:  # noqa: BLE001
            results["server"] = exc

    def party(i):
        try:
            callback = (callbacks or {}).get(i)
            results[i] = join(threaded[i], server.address, i, parties, timeout=20, callback=callback)
        except Exception as exc:  # noqa: BLE001
            results[i] = exc

    threads = [threading.Thread(target=serve)] + [threading.Thread(target=party, args=(i,)) for i in threaded]
    for t in threads:
        t.start()
    return server, threads, results


def test_join_refuses_an_epsilon_over_its_limit(rows, tmp_path):
    X = np.loadtxt(rows, delimiter=",")
    server, threads, results = serve_in_thread(Job(3, 5.0, 1e-6, [-1, 1], algorithm="fastlloyd"), {1: X})
    out = invoke(*join_args(rows, server.address[1], "-o", tmp_path / "c.csv", "--max-epsilon", 1))
    for t in threads:
        t.join(30)
    assert out.exit_code == 2 and "epsilon 5.0, above this party's limit 1.0" in out.output
    assert not (tmp_path / "c.csv").exists()
    assert server.accountant.report().epsilon == 0


def test_join_writes_the_centers_whole_under_their_name(rows, tmp_path):
    X = np.loadtxt(rows, delimiter=",")
    server, threads, results = serve_in_thread(Job(3, 1.0, 1e-6, [-1, 1], algorithm="fastlloyd"), {1: X})
    folder = tmp_path / "out"
    folder.mkdir()
    out = invoke(*join_args(rows, server.address[1], "-o", folder / "c.csv", "--k", 3, "--bounds", "-1,1"))
    for t in threads:
        t.join(30)
    assert out.exit_code == 0, out.output
    assert [p.name for p in folder.iterdir()] == ["c.csv"]  # no temporary file left behind
    centers = np.loadtxt(folder / "c.csv", delimiter=",", skiprows=1)
    np.testing.assert_allclose(centers, results[1].centers, rtol=1e-8)  # CSV keeps 10 digits


# --- who contributed to each round (issue 25, item 6) ------------------------------------------------


@pytest.fixture
def three_parts():
    rng = np.random.default_rng(4)
    centers = np.array([[-0.6, -0.5], [0.55, -0.4], [0.0, 0.6]])
    X = np.clip(centers[rng.integers(0, 3, 6000)] + rng.normal(0, 0.06, (6000, 2)), -1, 1)
    return np.array_split(X, 3)


def expected_contributors(rounds):
    """Party 2 leaves after iteration 1: rounds 0 (the row count) and 1 have all three parties."""
    assert rounds > 2
    return [[0, 1, 2]] * 2 + [[0, 1]] * (rounds - 2)


def test_serve_reports_each_rounds_parties_in_its_json(three_parts, tmp_path):
    parts, port_file, results = three_parts, tmp_path / "port", {}

    def party(i):
        for _ in range(600):  # the CLI writes the port once it listens
            if port_file.exists() and port_file.read_text():
                break
            time.sleep(0.05)
        try:
            address = ("127.0.0.1", int(port_file.read_text()))
            results[i] = join(parts[i], address, i, 3, timeout=20, callback=leave_after(1) if i == 2 else None)
        except Exception as exc:  # noqa: BLE001
            results[i] = exc

    threads = [threading.Thread(target=party, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    out = invoke(
        "serve", "--parties", 3, "--k", 3, "--bounds", "-1,1", "--port", 0, "--port-file", port_file,
        "--insecure-plain-tcp", "--timeout", 10, "--algorithm", "fastlloyd",
    )  # fmt: skip
    for t in threads:
        t.join(60)
    assert out.exit_code == 0, out.output
    assert isinstance(results[2], Leave) and not isinstance(results[0], Exception), results
    report = json.loads(out.stdout)
    assert report["parties"] == 3 and report["threshold"] == 2 and report["dropouts"] == {"2": 2}
    assert report["contributors"] == expected_contributors(report["rounds"])
    assert report["party_counts"] == [len(c) for c in report["contributors"]]
    assert "2 of 3 parties" in out.output  # said on stderr too


def test_join_reports_each_rounds_parties_in_its_json(three_parts, tmp_path):
    parts = three_parts
    server, threads, results = serve_in_thread(
        Job(3, 1.0, 1e-6, [-1, 1], algorithm="fastlloyd"),
        {1: parts[1], 2: parts[2]},
        parties=3,
        callbacks={2: leave_after(1)},
    )
    np.savetxt(tmp_path / "p0.csv", parts[0], delimiter=",")
    out = invoke(
        "join", "--data", tmp_path / "p0.csv", "--party", 0, "--parties", 3, "--server", f"127.0.0.1:{server.address[1]}",
        "--insecure-plain-tcp", "-o", tmp_path / "c.csv",
    )  # fmt: skip
    for t in threads:
        t.join(60)
    assert out.exit_code == 0, out.output
    party = json.loads(out.stdout)
    assert party["contributors"] == expected_contributors(party["rounds"])
    assert party["party_counts"] == [len(c) for c in party["contributors"]]
    assert party["contributors"] == results["server"].contributors
    assert "2 of 3 parties" in out.output  # said on stderr too


def test_join_reads_its_file_as_fit_does(tmp_path, listener):
    rows = tmp_path / "p0.csv"
    rows.write_text("a;b\n1;2\n3;\n5;6\n")
    port = listener.getsockname()[1]
    out = invoke(*join_args(rows, port, "-o", tmp_path / "c.csv", "--sep", ";"))
    assert out.exit_code == 2 and "column 'b'" in out.output and "--dropna" in out.output
    closed = socket.create_server(("127.0.0.1", 0))
    free_port = closed.getsockname()[1]
    closed.close()  # nothing listens there: the party gets past its file and fails to connect
    out = invoke(*join_args(rows, free_port, "-o", tmp_path / "c.csv", "--sep", ";", "--dropna", "--timeout", 2))
    assert out.exit_code != 0 and "column" not in out.output and "127.0.0.1" in out.output, out.output


def test_join_charges_a_ledger_and_the_same_job_run_again_is_refused_by_it(rows, tmp_path, listener):
    """A party's limits hold one run; the same job run again released the rows once more (epsilon 3 after three
    runs at a limit of 1). With --ledger the file composes the runs: the limits are reserved in it before
    connecting, the run settles at what its rounds spent, and a run the file cannot afford is refused before it
    reaches the server."""
    X = np.loadtxt(rows, delimiter=",")
    ledger = tmp_path / "party.ledger"
    server, threads, results = serve_in_thread(Job(3, 0.6, 1e-6, [-1, 1], algorithm="fastlloyd"), {1: X})
    out = invoke(
        *join_args(rows, server.address[1], "-o", tmp_path / "c0.csv"),
        "--ledger",
        ledger,
        "--ledger-budget",
        "1,1e-5",
    )
    for t in threads:
        t.join(30)
    assert out.exit_code == 0, out.output
    (entry,) = json.loads(ledger.read_text())["entries"]
    assert entry["reserved"] is None and len(entry["spends"]) == len(results[1].privacy_spent["steps"])  # settled
    assert json.loads(out.stdout)["ledger"]["spent"]["epsilon"] < 0.6  # the job's, not the limit's (1) reserved
    again = invoke(*join_args(rows, listener.getsockname()[1], "-o", tmp_path / "c1.csv"), "--ledger", ledger)
    assert again.exit_code == 2 and "refused by the ledger" in again.output and not (tmp_path / "c1.csv").exists()
    assert len(json.loads(ledger.read_text())["entries"]) == 1  # the refused run left no entry


def test_an_aborted_run_says_what_its_rounds_spent(three_parts):
    """A run aborted after releasing rounds said only 'nothing is released': the server says how many rounds it
    released and what they spent, each party how many carried its sums (the server may release a round whose
    result a party never saw), and the exception carries it."""

    def leave_after_two(done, planned):
        if done == 2:
            raise ValueError("party 1 goes away")

    server, threads, results = serve_in_thread(
        Job(3, 1.0, 1e-6, [-1, 1], algorithm="fastlloyd"),
        {0: three_parts[0], 1: three_parts[1]},
        callbacks={1: leave_after_two},
    )
    for t in threads:
        t.join(60)
    assert all(isinstance(results[who], FederatedAbort) for who in ("server", 0, 1)), results
    released = len(server.contributors)  # the row count and two iterations
    assert f"before it, {released} round(s) were released, spending epsilon" in str(results["server"])
    assert f"before it, {released} round(s) carried this party's sums" in str(results[1])
    # party 0 sent the round the server then aborted: it counts it, and charged it before sending
    assert f"before it, {released + 1} round(s) carried this party's sums" in str(results[0])
    spent = {who: results[who].privacy_spent["epsilon"] for who in ("server", 0, 1)}
    assert spent["server"] == pytest.approx(spent[1]) and 0 < spent[1] < spent[0] < 1.0


def test_a_party_records_a_round_before_its_sums_leave_it(three_parts, monkeypatch):
    """With t of n the server releases a round whose result a party never sees (it drops out after sending): the
    party charged rounds when their results came back, so its own accountant and ledger never held that round."""
    from privclust.federated import client as client_module
    from privclust.privacy.budget import Budget, PrivacyAccountant

    original = client_module.MaskedAggregation.aggregate

    def aggregate(self, round_index, header, encoded):
        if self._secagg.party == 2 and round_index == 2:  # its sums go out, then its network fails
            original_receive = self._channel.receive
            self._channel.receive = lambda expect: (_ for _ in ()).throw(OSError("the network fails"))
            try:
                return original(self, round_index, header, encoded)
            finally:
                self._channel.receive = original_receive
        return original(self, round_index, header, encoded)

    monkeypatch.setattr(client_module.MaskedAggregation, "aggregate", aggregate)
    mine = PrivacyAccountant(Budget(10.0, 1e-5))
    job = Job(3, 1.0, 1e-6, [-1, 1], algorithm="fastlloyd", public_n=6000)
    server = FederatedServer(job, 3, timeout=10, threshold=2)
    results = {}

    def run(who, call):
        try:
            results[who] = call()
        except Exception as exc:  # noqa: BLE001 - reported to the test
            results[who] = exc

    calls = {"server": server.serve}
    for i in range(3):
        calls[i] = lambda i=i: join(
            three_parts[i], server.address, i, 3, timeout=20, accountant=mine if i == 2 else None
        )
    threads = [threading.Thread(target=run, args=item) for item in calls.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert 2 in server.contributors[2]  # round 2 was released with party 2's rows in it
    assert isinstance(results[2], FederatedAbort) and "3 round(s) carried this party's sums" in str(results[2])
    iterations = {s.label.split("/")[0] for s in mine.spends}
    assert iterations == {"iteration 1", "iteration 2", "iteration 3"}  # all three, the released third too

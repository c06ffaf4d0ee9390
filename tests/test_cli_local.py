"""``privclust local``: a protocol file, devices' reports, a shuffler and the server, as separate steps."""

import json

import numpy as np
from typer.testing import CliRunner

from privclust.cli import app
from privclust.metrics import nicv

runner = CliRunner()


def run(*args):
    return runner.invoke(app, ["local", *map(str, args)])


def blobs(n, seed=0):
    rng = np.random.default_rng(seed)
    centers = rng.uniform(-0.7, 0.7, (4, 2))
    return np.clip(centers[rng.integers(0, 4, n)] + rng.normal(0, 0.05, (n, 2)), -1, 1)


def test_devices_a_shuffler_and_the_server_release_centers(tmp_path):
    X = blobs(60_000)
    np.save(tmp_path / "first.npy", X[:30_000])
    np.save(tmp_path / "second.npy", X[30_000:])
    protocol, reports = tmp_path / "protocol.json", tmp_path / "reports"
    reports.mkdir()
    out = run(
        "init", "-k", 4, "--features", 2, "--bounds", "-1,1", "-e", 1, "--users", 60_000, "--shuffle", "-o", protocol
    )
    assert out.exit_code == 0, out.output
    assert json.loads(protocol.read_text())["shuffle"] == [1.0, 1e-06]
    for part in ("first", "second"):
        out = run("report", tmp_path / f"{part}.npy", "-p", protocol, "-o", reports / f"{part}.bin")
        assert out.exit_code == 0, out.output
    assert (reports / "first.bin").stat().st_size == 13 + 27 * 30_000  # the documented report format
    out = run("shuffle", reports, "-p", protocol, "-o", tmp_path / "shuffled.bin")
    assert out.exit_code == 0, out.output
    out = run("aggregate", tmp_path / "shuffled.bin", "-p", protocol, "-o", tmp_path / "centers.csv", "--json")
    assert out.exit_code == 0, out.output
    summary = json.loads(out.stdout)
    assert summary["reports"] == 60_000 and summary["privacy_spent"]["epsilon"] == 1.0
    centers = np.loadtxt(tmp_path / "centers.csv", delimiter=",", skiprows=1)
    assert nicv(X, centers) < 0.1 * nicv(X, X.mean(0, keepdims=True))


def test_reports_of_another_protocol_and_bad_paths_fail_cleanly_and_write_nothing(tmp_path):
    one, other = tmp_path / "one.json", tmp_path / "other.json"
    for path, k in ((one, 3), (other, 4)):
        assert (
            run("init", "-k", k, "--features", 2, "--bounds", "0,1", "-e", 2, "--users", 100, "-o", path).exit_code == 0
        )
    assert run("report", "--point", "0.5,0.5", "-p", one, "-o", tmp_path / "r.bin").exit_code == 0
    out = run("aggregate", tmp_path / "r.bin", "-p", other, "-o", tmp_path / "c.csv")
    assert out.exit_code == 2 and "another protocol" in out.output and not (tmp_path / "c.csv").exists()
    out = run("report", "--point", "0.5,0.5", "-p", one, "-o", tmp_path / "missing" / "r.bin")
    assert out.exit_code == 2 and "does not exist" in out.output
    out = run("report", "--point", "0.5,0.5", "-p", tmp_path / "nope.json", "-o", tmp_path / "r2.bin")
    assert out.exit_code == 2 and "local init" in out.output
    out = run("init", "-k", 2, "--features", 2, "--bounds", "1,0", "-e", 1, "--users", 100, "-o", tmp_path / "p.json")
    assert out.exit_code == 2 and not (tmp_path / "p.json").exists()
    assert "Traceback" not in out.output


def test_a_duplicated_batch_is_refused_by_the_shuffler_and_the_server(tmp_path):
    protocol = tmp_path / "protocol.json"
    args = ("-k", 2, "--features", 2, "--bounds", "-1,1", "-e", 1, "--users", 5000, "--shuffle", "-o", protocol)
    assert run("init", *args).exit_code == 0
    np.save(tmp_path / "points.npy", blobs(2000))
    assert run("report", tmp_path / "points.npy", "-p", protocol, "-o", tmp_path / "a.bin").exit_code == 0
    out = run("shuffle", tmp_path / "a.bin", tmp_path / "a.bin", "-p", protocol, "-o", tmp_path / "s.bin")
    assert out.exit_code == 2 and "repeat a nonce" in out.output and not (tmp_path / "s.bin").exists()
    assert run("shuffle", tmp_path / "a.bin", "-p", protocol, "-o", tmp_path / "s.bin").exit_code == 0
    out = run("aggregate", tmp_path / "s.bin", tmp_path / "s.bin", "-p", protocol, "-o", tmp_path / "c.csv")
    assert out.exit_code == 2 and "repeat a nonce" in out.output and not (tmp_path / "c.csv").exists()
    assert "Traceback" not in out.output


def test_a_shuffle_protocols_server_takes_only_the_shufflers_output(tmp_path):
    # The amplified guarantee holds for shuffled reports only: a device's batch (linkable to its device) is
    # refused by the server before any report is tallied, and a shuffled batch by the shuffler.  A local protocol's
    # server takes either: each report is epsilon-LDP wherever it went.
    for shuffle in (True, False):
        protocol = tmp_path / f"protocol-{shuffle}.json"
        args = ("-k", 2, "--features", 2, "--bounds", "-1,1", "-e", 1, "--users", 2000, "-o", protocol)
        assert run("init", *args, *(["--shuffle"] if shuffle else [])).exit_code == 0
        np.save(tmp_path / "points.npy", blobs(2000))
        device, shuffled = tmp_path / f"r-{shuffle}.bin", tmp_path / f"s-{shuffle}.bin"
        assert run("report", tmp_path / "points.npy", "-p", protocol, "-o", device).exit_code == 0
        assert run("shuffle", device, "-p", protocol, "-o", shuffled).exit_code == 0
        out = run("shuffle", shuffled, "-p", protocol, "-o", tmp_path / "again.bin")
        assert out.exit_code == 2 and "already shuffled" in out.output and not (tmp_path / "again.bin").exists()
        out = run("aggregate", device, "-p", protocol, "-o", tmp_path / "c.csv")
        if shuffle:
            assert out.exit_code == 2 and "did not pass the shuffler" in out.output
            assert not (tmp_path / "c.csv").exists() and "Traceback" not in out.output
        else:
            assert out.exit_code == 0, out.output
            (tmp_path / "c.csv").unlink()
        assert run("aggregate", shuffled, "-p", protocol, "-o", tmp_path / "c.csv").exit_code == 0
        (tmp_path / "c.csv").unlink()


def test_aggregating_fewer_reports_than_planned_is_refused_unless_the_weaker_guarantee_is_accepted(tmp_path):
    protocol = tmp_path / "protocol.json"
    args = ("-k", 2, "--features", 2, "--bounds", "-1,1", "-e", 1, "--users", 200_000, "--shuffle", "-o", protocol)
    assert run("init", *args).exit_code == 0
    np.save(tmp_path / "points.npy", blobs(1000))
    assert run("report", tmp_path / "points.npy", "-p", protocol, "-o", tmp_path / "d.bin").exit_code == 0
    assert run("shuffle", tmp_path / "d.bin", "-p", protocol, "-o", tmp_path / "r.bin").exit_code == 0
    out = run("aggregate", tmp_path / "r.bin", "-p", protocol, "-o", tmp_path / "c.csv", "--json")
    assert out.exit_code == 2 and "epsilon=7.7" in out.output and "--accept-weaker" in out.output
    assert not (tmp_path / "c.csv").exists()
    out = run("aggregate", tmp_path / "r.bin", "-p", protocol, "-o", tmp_path / "c.csv", "--json", "--accept-weaker")
    assert out.exit_code == 0, out.output
    summary = json.loads(out.stdout)
    assert summary["accepted_weaker"] is True and summary["declared"] == [1.0, 1e-06]
    assert 7 < summary["privacy_spent"]["epsilon"] < 7.8 and summary["privacy_spent"]["delta"] == 1e-06
    assert "ACCEPTED WEAKER" in summary["privacy_spent"]["steps"][0]["label"]

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


def _shuffler(folder):
    """A shuffler's key pair made by the CLI: (the private key's file, its public half's)."""
    out = run("shuffler-key", "-o", folder / "shuffler.key")
    assert out.exit_code == 0, out.output
    return folder / "shuffler.key", folder / "shuffler.key.pub"


def test_devices_a_shuffler_and_the_server_release_centers(tmp_path):
    X = blobs(60_000)
    np.save(tmp_path / "first.npy", X[:30_000])
    np.save(tmp_path / "second.npy", X[30_000:])
    protocol, reports = tmp_path / "protocol.json", tmp_path / "reports"
    reports.mkdir()
    key, public = _shuffler(tmp_path)
    assert oct(key.stat().st_mode & 0o777) == "0o600"  # the private half: its owner's only
    args = ("-k", 4, "--features", 2, "--bounds", "-1,1", "-e", 1, "--users", 60_000)
    out = run("init", *args, "--shuffle", "--shuffler-key", public, "-o", protocol)
    assert out.exit_code == 0, out.output
    assert json.loads(protocol.read_text())["shuffle"] == [1.0, 1e-06]
    for part in ("first", "second"):
        out = run("report", tmp_path / f"{part}.npy", "-p", protocol, "-o", reports / f"{part}.bin")
        assert out.exit_code == 0, out.output
    assert (reports / "first.bin").stat().st_size == 13 + 27 * 30_000  # the documented report format
    out = run("shuffle", reports, "-p", protocol, "-o", tmp_path / "shuffled.bin", "--key", key)
    assert out.exit_code == 0, out.output
    assert (tmp_path / "shuffled.bin").stat().st_size == 13 + 27 * 60_000 + 64  # the shuffler's signature ends it
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


def test_a_duplicated_batch_is_refused_by_the_shuffler_and_by_the_server_as_a_second_batch(tmp_path):
    protocol = tmp_path / "protocol.json"
    key, public = _shuffler(tmp_path)
    args = ("-k", 2, "--features", 2, "--bounds", "-1,1", "-e", 1, "--users", 5000, "--shuffle", "-o", protocol)
    assert run("init", *args, "--shuffler-key", public).exit_code == 0
    np.save(tmp_path / "points.npy", blobs(2000))
    assert run("report", tmp_path / "points.npy", "-p", protocol, "-o", tmp_path / "a.bin").exit_code == 0
    out = run("shuffle", tmp_path / "a.bin", tmp_path / "a.bin", "-p", protocol, "-o", tmp_path / "s.bin", "--key", key)
    assert out.exit_code == 2 and "repeat a nonce" in out.output and not (tmp_path / "s.bin").exists()
    assert run("shuffle", tmp_path / "a.bin", "-p", protocol, "-o", tmp_path / "s.bin", "--key", key).exit_code == 0
    out = run("aggregate", tmp_path / "s.bin", tmp_path / "s.bin", "-p", protocol, "-o", tmp_path / "c.csv")
    assert out.exit_code == 2 and "one shuffled batch a release" in out.output and not (tmp_path / "c.csv").exists()
    assert "Traceback" not in out.output


def test_a_shuffle_protocols_server_takes_only_the_shufflers_output(tmp_path):
    # The amplified guarantee holds for shuffled reports only: a device's batch (linkable to its device) is
    # refused by the server before any report is tallied, and a shuffled batch by the shuffler.  A local protocol's
    # server takes either: each report is epsilon-LDP wherever it went.
    key, public = _shuffler(tmp_path)
    for shuffle in (True, False):
        protocol = tmp_path / f"protocol-{shuffle}.json"
        args = ("-k", 2, "--features", 2, "--bounds", "-1,1", "-e", 1, "--users", 2000, "-o", protocol)
        assert run("init", *args, *(["--shuffle", "--shuffler-key", public] if shuffle else [])).exit_code == 0
        np.save(tmp_path / "points.npy", blobs(2000))
        device, shuffled = tmp_path / f"r-{shuffle}.bin", tmp_path / f"s-{shuffle}.bin"
        assert run("report", tmp_path / "points.npy", "-p", protocol, "-o", device).exit_code == 0
        assert (
            run("shuffle", device, "-p", protocol, "-o", shuffled, *(["--key", key] if shuffle else [])).exit_code == 0
        )
        out = run(
            "shuffle", shuffled, "-p", protocol, "-o", tmp_path / "again.bin", *(["--key", key] if shuffle else [])
        )
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
    key, public = _shuffler(tmp_path)
    args = ("-k", 2, "--features", 2, "--bounds", "-1,1", "-e", 1, "--users", 200_000, "--shuffle", "-o", protocol)
    assert run("init", *args, "--shuffler-key", public).exit_code == 0
    np.save(tmp_path / "points.npy", blobs(1000))
    assert run("report", tmp_path / "points.npy", "-p", protocol, "-o", tmp_path / "d.bin").exit_code == 0
    assert run("shuffle", tmp_path / "d.bin", "-p", protocol, "-o", tmp_path / "r.bin", "--key", key).exit_code == 0
    out = run("aggregate", tmp_path / "r.bin", "-p", protocol, "-o", tmp_path / "c.csv", "--json")
    assert out.exit_code == 2 and "epsilon=7.7" in out.output and "--accept-weaker" in out.output
    assert not (tmp_path / "c.csv").exists()
    out = run("aggregate", tmp_path / "r.bin", "-p", protocol, "-o", tmp_path / "c.csv", "--json", "--accept-weaker")
    assert out.exit_code == 0, out.output
    summary = json.loads(out.stdout)
    assert summary["accepted_weaker"] is True and summary["declared"] == [1.0, 1e-06]
    assert 7 < summary["privacy_spent"]["epsilon"] < 7.8 and summary["privacy_spent"]["delta"] == 1e-06
    assert "ACCEPTED WEAKER" in summary["privacy_spent"]["steps"][0]["label"]


def test_a_shuffle_protocols_server_takes_only_batches_its_shuffler_signed(tmp_path):
    """The shuffled mark is a header anyone can write: a batch marked shuffled but not signed by the shuffler the
    protocol names -- devices' reports relabelled, a batch signed by another key, one whose reports were changed
    after signing -- is refused before any report is tallied.  A shuffle protocol needs a shuffler's key, and the
    shuffler signs only with that one."""
    from privclust.local import Protocol, decode_reports, encode_reports

    key, public = _shuffler(tmp_path)
    (tmp_path / "elsewhere").mkdir()
    other, _ = _shuffler(tmp_path / "elsewhere")
    protocol_file = tmp_path / "protocol.json"
    args = ("-k", 2, "--features", 2, "--bounds", "-1,1", "-e", 1, "--users", 2000, "--shuffle", "-o", protocol_file)
    out = run("init", *args)
    assert out.exit_code == 2 and "--shuffler-key" in out.output and not protocol_file.exists()
    assert run("init", *args, "--shuffler-key", public).exit_code == 0
    protocol = Protocol.from_json(protocol_file.read_text())
    np.save(tmp_path / "points.npy", blobs(2000))
    assert run("report", tmp_path / "points.npy", "-p", protocol_file, "-o", tmp_path / "d.bin").exit_code == 0
    for shuffler_args, said in (([], "give that key"), (["--key", other], "not the shuffler's key")):
        out = run("shuffle", tmp_path / "d.bin", "-p", protocol_file, "-o", tmp_path / "s.bin", *shuffler_args)
        assert out.exit_code == 2 and said in out.output and not (tmp_path / "s.bin").exists()
    assert (
        run("shuffle", tmp_path / "d.bin", "-p", protocol_file, "-o", tmp_path / "s.bin", "--key", key).exit_code == 0
    )
    records = decode_reports(protocol, (tmp_path / "d.bin").read_bytes(), shuffled=False)
    signed = (tmp_path / "s.bin").read_bytes()
    relabelled = encode_reports(protocol, records, shuffled=False).replace(b"PCLR", b"PCLS", 1) + bytes(64)
    tampered = bytearray(signed)
    tampered[13 + 27 * 5 + 20] ^= 1  # one report's nonce changed after the shuffler signed
    for name, data in (("relabelled", relabelled), ("tampered", bytes(tampered))):
        (tmp_path / f"{name}.bin").write_bytes(data)
        out = run("aggregate", tmp_path / f"{name}.bin", "-p", protocol_file, "-o", tmp_path / "c.csv")
        assert out.exit_code == 2 and "signature of the shuffler" in out.output, (name, out.output)
        assert not (tmp_path / "c.csv").exists() and "Traceback" not in out.output
    assert run("aggregate", tmp_path / "s.bin", "-p", protocol_file, "-o", tmp_path / "c.csv").exit_code == 0


def test_the_shufflers_key_is_made_once_named_by_its_public_half_and_served_one_batch(tmp_path):
    key, public = _shuffler(tmp_path)
    out = run("shuffler-key", "-o", key)  # a protocol may name it: never replaced
    assert out.exit_code == 2 and "exists" in out.output and key.read_bytes().startswith(b"-----BEGIN PRIVATE KEY")
    out = run("shuffler-key", "-o", tmp_path / "other.pub")
    assert out.exit_code == 2 and "public key's name" in out.output and not (tmp_path / "other.pub").exists()
    protocol = tmp_path / "protocol.json"
    args = ("-k", 2, "--features", 2, "--bounds", "-1,1", "-e", 1, "--users", 4000, "--shuffle", "-o", protocol)
    out = run("init", *args, "--shuffler-key", key)  # the private half by mistake: refused, never printed
    assert out.exit_code == 2 and "PRIVATE key" in out.output and "BEGIN" not in out.output
    assert not protocol.exists()
    assert run("init", *args, "--shuffler-key", public.read_text().strip().upper()).exit_code == 0  # hex, any case
    np.save(tmp_path / "points.npy", blobs(2000))
    for part in "ab":
        assert run("report", tmp_path / "points.npy", "-p", protocol, "-o", tmp_path / f"{part}.bin").exit_code == 0
        out = run("shuffle", tmp_path / f"{part}.bin", "-p", protocol, "-o", tmp_path / f"s{part}.bin", "--key", key)
        assert out.exit_code == 0, out.output
    # each batch shuffled alone hides its reports among its own 2,000, not the 4,000 the guarantee counts
    out = run("aggregate", tmp_path / "sa.bin", tmp_path / "sb.bin", "-p", protocol, "-o", tmp_path / "c.csv")
    assert out.exit_code == 2 and "one shuffled batch a release" in out.output and not (tmp_path / "c.csv").exists()
    both = ("shuffle", tmp_path / "a.bin", tmp_path / "b.bin", "-p", protocol, "-o", tmp_path / "s.bin", "--key", key)
    assert run(*both).exit_code == 0
    assert run("aggregate", tmp_path / "s.bin", "-p", protocol, "-o", tmp_path / "c.csv").exit_code == 0
    local = tmp_path / "local.json"
    assert run("init", *args[:-3], "-o", local).exit_code == 0
    assert run("report", tmp_path / "points.npy", "-p", local, "-o", tmp_path / "l.bin").exit_code == 0
    out = run("shuffle", tmp_path / "l.bin", "-p", local, "-o", tmp_path / "ls.bin", "--key", key)
    assert out.exit_code == 2 and "local protocol names no shuffler's key" in out.output

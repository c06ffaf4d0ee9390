"""The federated server against hostile and careless peers (issue 19), and the parties' own limits."""

import socket
import ssl
import threading
import time

import numpy as np
import pytest

from privclust.federated import (
    FederatedAbort,
    FederatedServer,
    Job,
    JobLimits,
    client_context,
    crypto,
    join,
    make_certs,
    server_context,
)
from privclust.federated.secagg import SecAggParty
from privclust.federated.server import PROTOCOL_VERSION
from privclust.federated.wire import Kind, receive, send

TRUE_CENTERS = np.array([[-0.6, -0.5], [0.55, -0.4], [0.0, 0.6]])


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certs(tmp_path_factory.mktemp("certs"), 3)


@pytest.fixture(scope="module")
def parts():
    rng = np.random.default_rng(2)
    X = np.clip(TRUE_CENTERS[rng.integers(0, 3, 3000)] + rng.normal(0, 0.06, (3000, 2)), -1, 1)
    return np.array_split(X, 2)


def tls(certs, who, server=False):
    make = server_context if server else client_context
    return make(certs / f"{who}.pem", certs / f"{who}.key", certs / "ca.pem")


def tls_client(address, certs, who):
    raw = socket.create_connection(address, timeout=10)
    return tls(certs, who).wrap_socket(raw, server_hostname="127.0.0.1")


def hello(sock, party, parties=2, **changes):
    header = {"version": PROTOCOL_VERSION, "party": party, "parties": parties, "n_features": 2}
    send(sock, Kind.HELLO, {**header, "nonce": crypto.new_nonce(), **changes})


class Run:
    """A server in a thread; ``parties(...)`` starts honest parties in threads; ``finish()`` joins them."""

    def __init__(self, certs, job=None, parties=2, **server_kwargs):
        server_kwargs = {"timeout": 10, **server_kwargs}
        self.server = FederatedServer(
            job or Job(3, 1.0, 1e-6, [-1, 1], algorithm="fastlloyd"),
            parties,
            ssl_context=tls(certs, "server", True),
            **server_kwargs,
        )
        self.certs, self.out, self.errors, self.threads = certs, {}, {}, []
        self._start(self._serve)

    def _start(self, target, *args):
        self.threads.append(threading.Thread(target=target, args=args))
        self.threads[-1].start()

    def _serve(self):
        try:
            self.out["server"] = self.server.serve()
        except Exception as exc:  # noqa: BLE001 - reported to the test
            self.errors["server"] = exc

    def _party(self, i, rows, kwargs):
        try:
            self.out[i] = join(
                rows, self.server.address, i, self.server.parties, ssl_context=tls(self.certs, f"party-{i}"), **kwargs
            )
        except Exception as exc:  # noqa: BLE001
            self.errors[i] = exc

    def parties(self, parts, **kwargs):
        for i, rows in enumerate(parts):
            self._start(self._party, i, rows, {"timeout": 30, **kwargs})
        return self

    def finish(self):
        for t in self.threads:
            t.join(90)  # a hang guard
        return self


def test_a_certificate_of_no_party_cannot_abort_the_run(certs, parts):
    """Issue 19: the party-count check came before the certificate check, so any CA-signed certificate
    (the server's own here) could abort the run with a wrong party count."""
    run = Run(certs)
    for who in ("server", "party-2"):  # CA-signed, but not a party of this 2-party run
        sock = tls_client(run.server.address, certs, who)
        hello(sock, 0, parties=7)
        with pytest.raises(FederatedAbort, match="not one of this run's 2 parties"):
            receive(sock)
        sock.close()
    run.parties(parts).finish()
    assert not run.errors, run.errors
    np.testing.assert_array_equal(run.out[0].centers, run.out[1].centers)


def test_the_join_deadline_is_not_reset_by_connections_that_never_join(certs):
    run = Run(certs, timeout=2)
    stop, opened = threading.Event(), []

    def keep_connecting():  # a new silent connection every 0.2 s for up to 20 s, until told to stop
        for _ in range(100):
            if stop.is_set():
                return
            try:
                opened.append(socket.create_connection(run.server.address))
            except OSError:  # the server gave up and stopped listening: keep trying (it must not matter), so
                pass  # that the check below never races this thread's own end
            time.sleep(0.2)

    connector = threading.Thread(target=keep_connecting)
    connector.start()
    run.threads[0].join(15)  # the connector goes on for 20 s: a deadline reset by connections never ends
    server_ended, connector_running = not run.threads[0].is_alive(), connector.is_alive()
    stop.set()
    connector.join(30)
    run.finish()
    for s in opened:
        s.close()
    assert server_ended and connector_running
    assert "only 0 of 2 parties joined" in str(run.errors["server"])


def scripted_pair(certs, address):
    """Two parties doing the real set-up (keys and shares), then left to the test."""
    socks = [tls_client(address, certs, f"party-{i}") for i in range(2)]

    def setup(i):
        hello(socks[i], i)
        _, welcome, _, _ = receive(socks[i], expect=Kind.WELCOME)
        secagg = SecAggParty(i, 2, welcome["threshold"], crypto.session_id(welcome))
        send(socks[i], Kind.PUBKEY, {"public": secagg.public_key, "group_key": False})
        _, keys, _, _ = receive(socks[i], expect=Kind.PUBKEYS)
        secagg.absorb_public_keys(keys["keys"])
        send(socks[i], Kind.SHARES, secagg.setup_message())
        receive(socks[i], expect=Kind.SHARE)

    threads = [threading.Thread(target=setup, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(15)
    return socks


@pytest.mark.parametrize(
    "change, reason",
    [
        ({"std": 0.0}, "std must be a positive finite number"),
        ({"sensitivity": 0.0}, "sensitivity must be a positive finite number"),
        ({"std": float("inf")}, "std must be a positive finite number"),
        ({"std": float("nan")}, "std must be a positive finite number"),
        ({"width": 0}, "width must be a positive integer"),
        ({"n_buckets": 10**13}, "exceed the message limit"),
        ({"n_buckets": -3}, "number of buckets must be a positive integer"),
        ({"std": 1e300, "sensitivity": 1e-300}, "too large for the ring"),
    ],
)
def test_invalid_noise_parameters_abort_with_a_clear_reason_to_every_party(certs, change, reason):
    """Issue 19: std = 0 or sensitivity = 0 killed the server with ZeroDivisionError, std = inf with an
    OpenDP error, 10^13 buckets with a 73 TiB allocation; the parties only saw "peer closed"."""
    run = Run(certs)
    socks = scripted_pair(certs, run.server.address)
    block = {"name": "count", "width": 1, "sensitivity": 1.0, "std": 10.0}
    spec = {"n_buckets": 1, "blocks": [block]}
    for key, value in change.items():
        (spec if key == "n_buckets" else block)[key] = value
    for sock in socks:
        send(sock, Kind.ROUND, {"round": 0, "label": "rows", "spec": spec}, b"\x00" * 8)
    run.finish()
    assert isinstance(run.errors["server"], FederatedAbort)
    assert "invalid noise parameters" in str(run.errors["server"]) and reason in str(run.errors["server"])
    for sock in socks:
        with pytest.raises(FederatedAbort, match=reason):
            receive(sock)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: Job(0, 1.0, 1e-6, [-1, 1], algorithm="fastlloyd"), "k must be a positive integer"),
        (lambda: Job(3, 1.0, 1e-6, [1, -1], algorithm="fastlloyd"), "empty"),
        (lambda: Job(3, 1.0, 0.0, [-1, 1], algorithm="fastlloyd"), "delta must be positive"),
        (lambda: Job(3, float("inf"), 1e-6, [-1, 1], algorithm="fastlloyd"), "epsilon"),
        (lambda: Job(3, 1.0, 1e-6, [-1, float("nan")], algorithm="fastlloyd"), "finite"),
        (lambda: Job(3, 1.0, 1e-6, "data", algorithm="fastlloyd"), "declared bounds"),
        (lambda: FederatedServer(Job(3, 1, 1e-6, [-1, 1], algorithm="fastlloyd"), 2, max_bytes=-1), "message limit"),
        (lambda: FederatedServer(Job(3, 1, 1e-6, [-1, 1], algorithm="fastlloyd"), 2, timeout=0), "timeout"),
        (lambda: FederatedServer(Job(3, 1, 1e-6, [-1, 1], algorithm="fastlloyd"), 2, port=99999), "port"),
        (lambda: FederatedServer(Job(3, 1, 1e-6, [-1, 1], algorithm="fastlloyd"), 1), "parties"),
        (lambda: FederatedServer(Job(3, 1, 1e-6, [-1, 1], algorithm="fastlloyd"), 5, threshold=2), "majority"),
        (lambda: FederatedServer(Job(3, 1, 1e-6, [-1, 1], algorithm="fastlloyd"), 5, threshold=6), "majority"),
    ],
)
def test_the_job_and_server_are_validated_when_the_server_starts(make, message):
    with pytest.raises(ValueError, match=message):
        make()


@pytest.mark.parametrize(
    "job, limits, message",
    [
        (
            Job(3, 1000.0, 1e-6, [-1, 1], algorithm="fastlloyd"),
            JobLimits(max_epsilon=1.0),
            "epsilon 1000.0, above this party's limit",
        ),
        (Job(3, 1.0, 1e-3, [-1, 1], algorithm="fastlloyd"), JobLimits(max_delta=1e-6), "delta 0.001, above"),
        (Job(4, 1.0, 1e-6, [-1, 1], algorithm="fastlloyd"), JobLimits(n_clusters=3), "k = 4, this party expects 3"),
        (Job(3, 1.0, 1e-6, [-2, 2], algorithm="fastlloyd"), JobLimits(bounds=(-1, 1)), "bounds"),
    ],
)
def test_a_party_refuses_a_job_beyond_its_limits_before_sending_data(certs, parts, job, limits, message):
    record = []
    run = Run(certs, job, record=record).parties(parts, limits=limits).finish()
    assert isinstance(run.errors[0], FederatedAbort) and message in str(run.errors[0])
    assert "refuses the job" in str(run.errors["server"])
    assert record == []  # no masked message was ever sent
    assert run.server.accountant.report().epsilon == 0


def test_a_real_run_completes_among_200_silent_and_50_malformed_connections(certs, parts):
    """The load target of issue 19, on loopback: hostile connections open before and while the parties join."""
    run = Run(certs, timeout=20)
    address, hostile = run.server.address, []
    sources = [f"127.0.0.{i}" for i in range(2, 10)]  # 25 silent connections from each of 8 addresses
    for i in range(200):
        hostile.append(socket.create_connection(address, source_address=(sources[i % 8], 0)))
    for _ in range(25):  # not TLS at all
        s = socket.create_connection(address)
        s.sendall(b"GET / HTTP/1.0\r\n\r\n" + bytes(range(256)))
        hostile.append(s)
    for i in range(25):  # TLS with a party's certificate, then garbage instead of a HELLO
        s = tls_client(address, certs, f"party-{i % 2}")
        s.sendall(b"\xff" * 64)
        hostile.append(s)
    run.parties(parts).finish()
    try:
        assert not run.errors, run.errors
        np.testing.assert_array_equal(run.out[0].centers, run.out[1].centers)
        assert run.out["server"].rounds == run.out[0].rounds
        # The server shut every hostile connection (by the end of the run at the latest).
        for s in hostile[:200]:
            s.settimeout(10)
            try:
                assert s.recv(1) == b""
            except ConnectionResetError:
                pass
    finally:
        for s in hostile:
            s.close()


def test_a_slow_handshake_is_cut_at_its_own_deadline(certs, parts):
    """A client that trickles its TLS handshake one byte at a time is shut at its handshake deadline, and the
    parties join meanwhile."""
    run = Run(certs, handshake_timeout=1)
    raw = socket.create_connection(run.server.address)
    raw.sendall(b"\x16")  # the first byte of a TLS record, then nothing
    run.parties(parts).finish()
    assert not run.errors, run.errors
    raw.settimeout(10)
    try:
        assert raw.recv(1) == b""
    except (ConnectionResetError, ssl.SSLError):
        pass
    raw.close()


def test_a_party_trickling_its_message_is_cut_at_the_round_deadline(certs):
    """The round deadline bounds a whole message, not each read: one byte every half second does not hold the
    server (and everyone else) hostage."""
    run = Run(certs, timeout=2)
    socks = scripted_pair(certs, run.server.address)
    spec = {"n_buckets": 1, "blocks": [{"name": "count", "width": 1, "sensitivity": 1.0, "std": 10.0}]}
    send(socks[0], Kind.ROUND, {"round": 0, "label": "rows", "spec": spec}, b"\x00" * 8)
    frame = bytearray()

    class Capture:
        def sendall(self, data):
            frame.extend(data)

    send(Capture(), Kind.ROUND, {"round": 0, "label": "rows", "spec": spec}, b"\x00" * 8)
    stop = threading.Event()

    def trickle():
        for byte in frame[:60]:  # 30 s at this pace
            if stop.is_set():
                return
            try:
                socks[1].sendall(bytes([byte]))
            except OSError:
                return
            time.sleep(0.5)

    trickler = threading.Thread(target=trickle)
    trickler.start()
    run.threads[0].join(15)
    server_ended, still_trickling = not run.threads[0].is_alive(), trickler.is_alive()
    stop.set()
    trickler.join(30)
    run.finish()
    assert server_ended and still_trickling
    assert "timed out" in str(run.errors["server"]) and "fewer than the threshold" in str(run.errors["server"])


# --- slots held only by live connections (issue 25, item 6) ------------------------------------------


def _wait_until_joined(server, slots: set[int], seconds: float = 30.0) -> None:
    """Wait (bounded) until the server has admitted exactly ``slots``: the order of connections is then fixed."""
    deadline = time.monotonic() + seconds
    while set(server.joined) != slots:
        assert time.monotonic() < deadline, f"the server did not admit {slots} in {seconds} s"
        time.sleep(0.01)


def test_a_connection_that_claims_party_0_and_hangs_up_frees_the_slot(certs, parts):
    """Before, the slot stayed taken: the real party 0 was refused ('already joined') and the run aborted."""
    run = Run(certs)
    fake = tls_client(run.server.address, certs, "party-0")
    hello(fake, 0)
    _wait_until_joined(run.server, {0})  # admitted: else this test could not tell the bug apart
    fake.close()
    run.parties(parts).finish()
    assert not run.errors, run.errors
    np.testing.assert_array_equal(run.out[0].centers, run.out[1].centers)
    assert run.out["server"].contributors == [[0, 1]] * run.out["server"].rounds


def test_a_party_reconnecting_replaces_its_silent_connection(certs, parts):
    """A connection holding party 0's slot without a word (a half-open link, or a copy of the key) does not keep
    the party out: its newer connection takes the slot, and the old one hears why."""
    run = Run(certs)
    stale = tls_client(run.server.address, certs, "party-0")
    hello(stale, 0)
    _wait_until_joined(run.server, {0})  # the stale connection is the older one (else it would replace the party)
    run._start(run._party, 0, parts[0], {"timeout": 30})
    # Party 0's newer connection replaces the stale one before party 1 fills the last slot: were party 1 first,
    # the run would start with the silent connection in party 0's slot (a join only waits for the slots to fill).
    with pytest.raises(FederatedAbort, match="replaced by a newer connection of party 0"):
        receive(stale)
    stale.close()
    run._start(run._party, 1, parts[1], {"timeout": 30})
    run.finish()
    assert not run.errors, run.errors


def test_rejoining_does_not_move_the_join_deadline(certs):
    """Joining again for a slot (after a hang-up, or over a live connection) does not restart the join deadline,
    so one party's connections cannot hold the server forever."""
    run = Run(certs, timeout=2)
    stop = threading.Event()

    def keep_rejoining():  # party 0 joins again every 0.2 s for up to 20 s
        held = []
        for _ in range(100):
            if stop.is_set():
                break
            try:
                sock = tls_client(run.server.address, certs, "party-0")
                hello(sock, 0)
                held.append(sock)
            except OSError:  # the server gave up and stopped listening: keep trying, so that the check
                pass  # below never races this thread's own end
            time.sleep(0.2)
        for sock in held:
            sock.close()

    rejoiner = threading.Thread(target=keep_rejoining)
    rejoiner.start()
    run.threads[0].join(15)
    server_ended, rejoiner_running = not run.threads[0].is_alive(), rejoiner.is_alive()
    stop.set()
    rejoiner.join(30)
    run.finish()
    assert server_ended and rejoiner_running
    assert "only 1 of 2 parties joined" in str(run.errors["server"])

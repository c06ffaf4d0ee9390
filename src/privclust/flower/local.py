"""A whole Flower federation as real processes on loopback: one SuperLink, a SuperNode per client, ``flwr run``.

For tests, the example and ``privclust bench federated --engine flower``.  Each client's rows
go to a CSV only its SuperNode's node config names, with the group key file the clients
share (the server is never given either); the server's report and every client's result
come back as JSON files.  Everything listens on 127.0.0.1 only, on free ports, and every
process started here is ended here (by its process group) whatever happens.
"""

from __future__ import annotations

import json
import numbers
import os
import signal
import socket
import subprocess
import sys
import time
from contextlib import ExitStack
from importlib import resources
from pathlib import Path

import numpy as np

__all__ = ["run_local", "app_dir"]


def app_dir() -> Path:
    """The Flower app directory shipped with privclust (its pyproject.toml names the components)."""
    return Path(str(resources.files("privclust.flower") / "fab"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_port(port: int, deadline: float, what: str) -> None:
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1.0):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what} did not start listening on 127.0.0.1:{port} in time") from None
            time.sleep(0.2)


def _tool(name: str) -> str:
    path = Path(sys.executable).parent / name
    if not path.exists():
        raise RuntimeError(f"{name} not found beside {sys.executable}: install privclust[flower] (pip)")
    return str(path)


def _toml(value) -> str:
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, numbers.Integral):
        return str(int(value))
    return repr(float(value))  # numpy scalars too: repr(np.float64(...)) is not TOML


def _start(stack: ExitStack, args: list[str], log: Path, env: dict) -> subprocess.Popen:
    out = stack.enter_context(open(log, "w"))
    proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)

    def stop():
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()

    stack.callback(stop)
    return proc


def run_local(parts, workdir, timeout: float = 1800.0, limits: dict | None = None, **run_config) -> dict:
    """Run the Flower app on ``parts`` (one array of rows per client) and return
    ``{"server": report, "clients": [result or None, ...], "seconds": wall time}``.

    ``run_config`` overrides the app's run config (``k``, ``epsilon``, ``bounds``, ``max-iter``...;
    write dashes as underscores).  ``limits`` adds to every client's node config (``{"max-delta": 1e-5}``:
    what the clients agree to; by default epsilon 1 and delta 1e-6, as ``privclust federated join``)."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    home = workdir / "flwr-home"
    home.mkdir(exist_ok=True)
    key = workdir / "group.key"
    key.write_bytes(os.urandom(32))
    key.chmod(0o600)
    link = _free_port()
    (home / "config.toml").write_text(
        f'[superlink]\ndefault = "local"\n\n[superlink.local]\naddress = "127.0.0.1:{link}"\ninsecure = true\n'
    )
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])  # flower-superexec
    # no update check and no telemetry: nothing leaves the machine (Flower sends usage events by default)
    env = dict(os.environ, FLWR_HOME=str(home), FLWR_DISABLE_UPDATE_CHECK="1", FLWR_TELEMETRY_ENABLED="0", PATH=path)
    config = {"clients": len(parts), "report": str(workdir / "server.json"), "timeout": float(timeout)}
    config.update({k.replace("_", "-"): v for k, v in run_config.items()})
    overrides = " ".join(f"{k}={_toml(v)}" for k, v in config.items())
    start = time.monotonic()
    with ExitStack() as stack:
        _start(
            stack,
            [_tool("flower-superlink"), "--insecure", "--disable-runtime-dependency-installation", "--port", str(link)],
            workdir / "superlink.log",
            env,
        )
        _wait_for_port(link, time.monotonic() + min(timeout, 120.0), "the SuperLink")
        for i, rows in enumerate(parts):
            data = workdir / f"client-{i}.csv"
            np.savetxt(data, np.asarray(rows, dtype=float), delimiter=",")
            node_config = f'data="{data}" group-key="{key}" out="{workdir / f"client-{i}.json"}"'
            node_config += "".join(f" {name}={_toml(value)}" for name, value in (limits or {}).items())
            _start(
                stack,
                [
                    _tool("flower-supernode"),
                    "--insecure",
                    "--superlink",
                    f"127.0.0.1:{link}",
                    "--port",
                    str(_free_port()),
                    "--node-config",
                    node_config,
                ],
                workdir / f"supernode-{i}.log",
                env,
            )
        run = _start(
            stack,
            [_tool("flwr"), "run", str(app_dir()), "local", "--stream", "--run-config", overrides],
            workdir / "flwr-run.log",
            env,
        )
        report_path = Path(config["report"])
        deadline = time.monotonic() + timeout
        while not report_path.exists():
            now = time.monotonic()
            if run.poll() is not None and not report_path.exists():
                time.sleep(1.0)  # the report is written before the run ends
                if not report_path.exists():
                    raise RuntimeError(f"the Flower run ended without a report; see {workdir / 'flwr-run.log'}")
            if now > deadline:
                raise TimeoutError(f"the Flower run took longer than {timeout} s; see {workdir}")
            time.sleep(0.2)
    clients = []
    for i in range(len(parts)):
        out = workdir / f"client-{i}.json"
        clients.append(json.loads(out.read_text()) if out.exists() else None)
    return {"server": json.loads(report_path.read_text()), "clients": clients, "seconds": time.monotonic() - start}

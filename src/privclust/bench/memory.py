"""``privclust bench memory``: peak memory of the commands that read large inputs (issue 28, files larger than memory).

Each measured command runs as its own process -- ``privclust fit`` on a CSV, ``privclust local aggregate``
and ``privclust local shuffle`` on a file of reports -- and is measured from outside:

* ``peak_rss``: the kernel's peak resident set of the process (``VmHWM`` of ``/proc/<pid>/status``, a
  high-water mark, read every 10 ms until the process ends), which counts the pages of memory-mapped files
  too (the fit's spilled rows, as the page cache holds them).  Not ``ru_maxrss``: Linux carries it over
  from the parent through ``vfork`` and ``exec``, so a child of a large bench process would report the
  bench's size (it did: 357 MiB for a ``local aggregate`` that peaks at 230);
* ``peak_anon``: the peak anonymous memory (``RssAnon`` of ``/proc/<pid>/status``, polled every 10 ms):
  what the process itself allocated, which a file larger than memory must keep small;
* ``base_anon``: the same for an interpreter that only imports what the commands import, subtracted to give
  ``above_base`` -- the part that could grow with the input.

With ``interrupts``, each command is run again and sent Ctrl-C (SIGINT) part way through: the row records
how long it took to exit, its exit code and last message, and whether its output or a temporary twin was
left behind (issue 28: Ctrl-C honoured within 2 s, no half-written file).

``source`` runs the commands from another checkout's ``src`` folder (e.g. the code before a change), so that
before and after are measured by the same harness.  The inputs are synthetic (public) and written to a
temporary folder that is removed afterwards.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

__all__ = ["measure", "run", "write_report"]

BASE_IMPORTS = "import numpy, pandas, scipy.sparse, sklearn.utils, privclust.cli, privclust.estimator, privclust.local"


def _status_kib(pid: int, field: str) -> int:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        pass
    return 0


def _env(source: Path | None) -> dict:
    """This process's environment, with ``source`` (another checkout's ``src``) first on the path if given."""
    env = dict(os.environ)
    if source is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(source), *filter(None, [env.get("PYTHONPATH")])])
    return env


def measure(args: list[str], source: Path | None = None, cwd: Path | None = None) -> dict:
    """Run ``python args...`` (``source`` first on its path) and measure its peak memory and time."""
    env = _env(source)
    errors = tempfile.TemporaryFile()  # not a pipe: a child writing more than a pipe holds would stall
    start = time.perf_counter()
    process = subprocess.Popen([sys.executable, *args], cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=errors)
    peak_anon = peak_rss = 0
    while True:
        pid, status, _ = os.wait4(process.pid, os.WNOHANG)
        if pid:
            break
        peak_anon = max(peak_anon, _status_kib(process.pid, "RssAnon"))
        peak_rss = max(peak_rss, _status_kib(process.pid, "VmHWM"))  # the kernel's own high-water mark
        time.sleep(0.01)
    seconds = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    with errors:
        errors.seek(0)
        error = errors.read().decode(errors="replace")[-2000:]
    if process.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({process.returncode}): {error}")
    return {"seconds": seconds, "peak_rss": peak_rss * 1024, "peak_anon": peak_anon * 1024}


def interrupted(args: list[str], after: float, output: Path, source: Path | None = None) -> dict:
    """Run ``python args...``, send it SIGINT (Ctrl-C) ``after`` seconds in, and measure how long it takes to say
    so (its ``interrupted`` message) and to exit, with what code, and whether ``output`` or a hidden temporary
    twin of it was left behind (the output exists only if the command finished before the signal)."""
    import signal
    import threading

    env = _env(source)
    for stale in [output, *output.parent.glob(".privclust-*")]:  # an earlier run's, which would read as this one's
        stale.unlink(missing_ok=True)
    process = subprocess.Popen(
        [sys.executable, *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    lines: list[tuple[float, str]] = []  # (when, line) of stderr, read as it comes (a full pipe would stall it)
    reader = threading.Thread(target=lambda: lines.extend((time.perf_counter(), line) for line in process.stderr))
    reader.start()
    time.sleep(after)
    sent = time.perf_counter()
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
    process.wait()
    exited = time.perf_counter() - sent
    reader.join()
    said = [when - sent for when, line in lines if line.startswith("interrupted")]
    leftovers = [p.name for p in output.parent.iterdir() if p.name.startswith(".privclust-")]
    return {
        "after": after,
        "said": said[0] if said else None,
        "latency": exited,
        "exit_code": process.returncode,
        "message": lines[-1][1].strip() if lines else "",
        "left": leftovers,  # temporary twins
        "output": output.exists(),  # whole if it exists (renamed into place complete): the command had finished
    }


USER_ROWS = 5  # the user-level fit's CSV: about this many rows per user, and --max-rows-per-user


def _write_csv(path: Path, n: int, d: int, k: int, seed: int, users: bool = False) -> int:
    """A CSV of n blobs rows, written a million rows at a time; returns the float64 array's size in bytes.
    ``users``: a last column ``user`` of integer user ids, about :data:`USER_ROWS` rows each."""
    import pandas as pd

    from .speed import synthetic_blobs

    step = 1_000_000
    with open(path, "w") as out:
        out.write(",".join([*(f"x{j}" for j in range(d)), *(["user"] if users else [])]) + "\n")
        for start in range(0, n, step):
            frame = pd.DataFrame(synthetic_blobs(min(step, n - start), d, k, seed=seed + start))
            if users:
                frame["user"] = np.random.default_rng(seed + start).integers(0, max(1, n // USER_ROWS), len(frame))
            frame.to_csv(out, header=False, index=False, float_format="%.6g")
    return n * d * 8


def _write_reports(folder: Path, users: int, seed: int) -> tuple[Path, Path]:
    """A local protocol for ``users`` users (a shuffle protocol, its shuffler's key beside it in ``shuffler.key``)
    and one file of their reports."""
    from ..local import Protocol, Randomizer, ShufflerKey, report_header

    key = ShufflerKey.generate()
    (folder / "shuffler.key").write_bytes(key.private_pem())
    public = dict(n_clusters=4, n_features=2, bounds=[-1, 1], seed=seed, shuffler_key=key.public_hex)
    protocol = Protocol.for_shuffle(1.0, 1e-6, users, **public)
    (folder / "protocol.json").write_text(protocol.to_json())
    randomizer = Randomizer(protocol, np.random.default_rng(seed))
    rng = np.random.default_rng(seed + 1)
    centers = rng.uniform(-0.7, 0.7, (4, 2))
    with open(folder / "reports.bin", "wb") as out:
        out.write(report_header(protocol))
        for start in range(0, users, 1_000_000):
            m = min(1_000_000, users - start)
            points = np.clip(centers[rng.integers(0, 4, m)] + rng.normal(0, 0.05, (m, 2)), -1, 1)
            out.write(memoryview(randomizer.reports(points))[len(report_header(protocol)) :])
    return folder / "protocol.json", folder / "reports.bin"


def run(
    rows: int,
    dims: int,
    users: int,
    source: Path | None = None,
    on_done=None,
    seed: int = 0,
    interrupts: int = 0,
    user_level: bool = False,
) -> list[dict]:
    """Measure the base interpreter, ``fit`` on a rows x dims CSV, and ``local aggregate`` / ``local shuffle``
    on ``users`` reports; with ``interrupts``, each command is also run that many times more and sent Ctrl-C
    at evenly spread moments of its measured run (the row's ``interrupts``: latency, exit code, leftovers).
    ``user_level``: also ``fit --user-column`` on the same rows with a column of user ids."""
    results = []

    def record(row: dict, args: list[str], output: Path) -> None:
        spread = [row["seconds"] * (i + 1) / (interrupts + 1) for i in range(interrupts)]
        row["interrupts"] = [interrupted(args, after, output, source) for after in spread]
        results.append(row)
        if on_done is not None:
            on_done(row)

    with tempfile.TemporaryDirectory(prefix="privclust-bench-memory-") as folder:
        folder = Path(folder)
        base = measure(["-c", BASE_IMPORTS], source)
        results.append({"command": "interpreter with the imports", "input_bytes": 0, **base, "interrupts": []})
        if on_done is not None:
            on_done(results[-1])
        outputs = folder / "outputs"
        outputs.mkdir()
        if rows:
            array = _write_csv(folder / "data.csv", rows, dims, 10, seed)
            centers = outputs / "centers.csv"
            fit = ["-m", "privclust", "fit", str(folder / "data.csv"), "-k", "10", "-b", "-1,1", "-o", str(centers)]
            size = (folder / "data.csv").stat().st_size
            measured = measure(fit, source)
            centers.unlink()
            row = {"command": f"fit, {rows:,} x {dims} CSV", "input_bytes": size, "array_bytes": array, **measured}
            record(row, fit, centers)
            (folder / "data.csv").unlink()
        if rows and user_level:
            array = _write_csv(folder / "users.csv", rows, dims, 10, seed, users=True)
            fit = ["-m", "privclust", "fit", str(folder / "users.csv"), "-k", "10", "-b", "-1,1", "-o", str(centers)]
            fit += ["--user-column", "user", "--max-rows-per-user", str(USER_ROWS)]
            size = (folder / "users.csv").stat().st_size
            measured = measure(fit, source)
            centers.unlink()
            command = f"fit --user-column, {rows:,} x {dims} CSV + ids"
            record({"command": command, "input_bytes": size, "array_bytes": array, **measured}, fit, centers)
            (folder / "users.csv").unlink()
        if users:
            protocol, reports = _write_reports(folder, users, seed)
            size = reports.stat().st_size
            # The shuffler's output is what a shuffle protocol's server takes: kept aside for the aggregate's runs
            served = outputs / "served.bin"
            for name, given, output in (
                ("shuffle", reports, outputs / "shuffled.bin"),
                ("aggregate", served, outputs / "centers.csv"),
            ):
                args = ["-m", "privclust", "local", name, str(given), "-p", str(protocol), "-o", str(output)]
                if name == "shuffle":
                    args += ["--key", str(folder / "shuffler.key")]
                measured = measure(args, source)
                if name == "shuffle":
                    output.replace(served)
                else:
                    output.unlink()
                record({"command": f"local {name}, {users:,} reports", "input_bytes": size, **measured}, args, output)
            served.unlink()
    for row in results:
        row["above_base"] = max(0, row["peak_anon"] - base["peak_anon"])
        row["base_anon"] = base["peak_anon"]
    return results


def _mib(value: float) -> str:
    return f"{value / 2**20:,.0f}"


def write_report(rows: list[dict], setup: dict, out: Path, machine: str) -> Path:
    """memory.json and memory.md in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "memory.json").write_text(json.dumps({"setup": setup, "rows": rows}, indent=1))
    lines = [
        f"# Peak memory of the large-input commands ({machine})",
        "",
        f"Setup: {json.dumps(setup)}. Peak RSS: the kernel's high-water mark (``VmHWM``), mapped file pages included; "
        "anonymous: ``RssAnon`` polled every 10 ms; above base: anonymous minus the interpreter's with the imports.",
        "",
        "| command | input (MiB) | seconds | peak RSS (MiB) | anonymous (MiB) | above base (MiB) "
        "| RSS / input | RSS / array |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        size = r["input_bytes"]
        per_input = f"{r['peak_rss'] / size:.2f}" if size else "-"
        per_array = f"{r['peak_rss'] / r['array_bytes']:.2f}" if r.get("array_bytes") else "-"
        lines.append(
            f"| {r['command']} | {_mib(size)} | {r['seconds']:.1f} | {_mib(r['peak_rss'])} | {_mib(r['peak_anon'])} "
            f"| {_mib(r['above_base'])} | {per_input} | {per_array} |"
        )
    interrupts = [(r["command"], i) for r in rows for i in r.get("interrupts", [])]
    if interrupts:
        lines += [
            "",
            "Ctrl-C (SIGINT) sent at evenly spread moments of each command's run:",
            "",
            "| command | sent after (s) | said so after (s) | exited after (s) | exit code | last message "
            "| output | temporaries left |",
            "|---|---|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {command} | {i['after']:.1f} | {'-' if i['said'] is None else format(i['said'], '.2f')} "
            f"| {i['latency']:.2f} | {i['exit_code']} | {i['message']} | {'written' if i['output'] else 'none'} "
            f"| {', '.join(i['left']) or 'none'} |"
            for command, i in interrupts
        ]
    (out / "memory.md").write_text("\n".join(lines) + "\n")
    return out / "memory.md"

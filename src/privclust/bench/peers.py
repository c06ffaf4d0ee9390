"""Peer libraries, run through the same harness from their own environments.

A peer often cannot be installed beside privclust's dependencies (IBM
diffprivlib 0.6 does not import with scikit-learn >= 1.8), so each peer lives
in its own virtual environment under ``PRIVCLUST_PEERS_DIR`` (default
``~/.cache/privclust/peers``), created by ``privclust bench peers install NAME``.
A stand-alone runner script (``peer_runners/``) is executed by the peer's
interpreter on a batch of jobs and answers in JSON.  A peer that is not
installed is reported as missing, never silently dropped.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["PEERS", "Peer", "PeerMissing", "peers_dir", "is_installed", "install", "run_batch"]


@dataclass(frozen=True)
class Peer:
    name: str
    requirements: tuple[str, ...]
    runner: str  # file in peer_runners/
    note: str


PEERS: dict[str, Peer] = {
    "diffprivlib": Peer(
        name="diffprivlib",
        requirements=("diffprivlib==0.6.6", "scikit-learn>=1.6,<1.8"),
        runner="diffprivlib_kmeans.py",
        note="IBM diffprivlib KMeans (Su et al.'s DPLloyd, Laplace); its claimed epsilon. Its budget "
        "split gives each coordinate the count's share, which overspends the claim for d >= 5.",
    ),
}


class PeerMissing(RuntimeError):
    """The peer's environment is not installed (or broken)."""


def peers_dir() -> Path:
    return Path(os.environ.get("PRIVCLUST_PEERS_DIR", Path.home() / ".cache" / "privclust" / "peers"))


def _python(peer: Peer) -> Path:
    return peers_dir() / peer.name / "bin" / "python"


def is_installed(name: str) -> bool:
    return _python(PEERS[name]).exists()


def install(name: str) -> Path:
    """Create the peer's own virtual environment and install it there."""
    peer = PEERS[name]
    target = peers_dir() / peer.name
    subprocess.run([sys.executable, "-m", "venv", str(target)], check=True)
    subprocess.run([str(_python(peer)), "-m", "pip", "install", "--quiet", *peer.requirements], check=True)
    return target


def run_batch(name: str, X: np.ndarray, jobs: list[dict], memory: bool = False, timeout: float = 3600) -> list[dict]:
    """Run ``jobs`` ({k, epsilon, seed, lower, upper}) of peer ``name`` on ``X``."""
    peer = PEERS[name]
    python = _python(peer)
    if not python.exists():
        raise PeerMissing(f"{name} is not installed: run `privclust bench peers install {name}`")
    runner = Path(__file__).parent / "peer_runners" / peer.runner
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "X.npy"
        np.save(data, np.ascontiguousarray(X))
        spec = Path(tmp) / "jobs.json"
        spec.write_text(json.dumps({"data": str(data), "jobs": jobs, "memory": memory}))
        proc = subprocess.run([str(python), str(runner), str(spec)], capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise PeerMissing(f"{name} failed: {proc.stderr.strip().splitlines()[-1] if proc.stderr else proc.returncode}")
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]

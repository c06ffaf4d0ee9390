"""Peer libraries, run through the same harness from their own environments.

A peer often cannot be installed beside privclust's dependencies (IBM
diffprivlib 0.6 does not import with scikit-learn >= 1.8), so each peer lives
in its own virtual environment under ``PRIVCLUST_PEERS_DIR`` (default
``~/.cache/privclust/peers``), created by ``privclust bench peers install NAME``.
A stand-alone runner script (``peer_runners/``) is executed by the peer's
interpreter on a batch of jobs and answers in JSON.  A peer that is not
installed is reported as missing, never silently dropped.

A peer that is not on the package index (``source`` set) is installed from a
local copy of its source that the user provides: ``privclust bench peers
install NAME --source PATH``.  privclust ships none of a peer's code.
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
    source: str | None = None  # what --source PATH must be, for a peer not on the package index
    takes_delta: bool = False  # (epsilon, delta)-DP: jobs carry privclust's delta; else pure epsilon-DP


PEERS: dict[str, Peer] = {
    "diffprivlib": Peer(
        name="diffprivlib",
        requirements=("diffprivlib==0.6.6", "scikit-learn>=1.6,<1.8"),
        runner="diffprivlib_kmeans.py",
        note="IBM diffprivlib KMeans (Su et al.'s DPLloyd, Laplace); its claimed epsilon. Its budget "
        "split gives each coordinate the count's share, which overspends the claim for d >= 5.",
    ),
    "google-lsh": Peer(
        name="google-lsh",
        requirements=("dp-accounting==0.6.0", "absl-py~=1.0", "numpy~=1.21", "scipy~=1.7", "scikit-learn>=1.5"),
        runner="google_lsh_clustering.py",
        note="Google's LSH clustering (google/differential-privacy, learning/clustering; "
        "private_lsh_clustering: a private LSH-tree coreset, then k-means++ on it), (epsilon, delta) "
        "as claimed by its own PLD accounting; data centred on the bounds box, radius = half its "
        "diagonal. Not on PyPI: installed from a local copy of that repository's learning/ folder "
        "with `privclust bench peers install google-lsh --source PATH/learning`.",
        source="the learning/ folder of a google/differential-privacy checkout (it holds setup.py)",
        takes_delta=True,
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


def install(name: str, source: str | Path | None = None) -> Path:
    """Create the peer's own virtual environment and install it there (from ``source`` if the peer needs one)."""
    peer = PEERS[name]
    if peer.source and source is None:
        raise ValueError(f"{name} is not on the package index: pass --source PATH, {peer.source}")
    if source is not None and not peer.source:
        raise ValueError(f"{name} installs from the package index: it takes no --source")
    local = [str(Path(source).resolve())] if source is not None else []
    target = peers_dir() / peer.name
    subprocess.run([sys.executable, "-m", "venv", str(target)], check=True)
    subprocess.run([str(_python(peer)), "-m", "pip", "install", "--quiet", *peer.requirements, *local], check=True)
    return target


def run_batch(name: str, X: np.ndarray, jobs: list[dict], memory: bool = False, timeout: float = 3600) -> list[dict]:
    """Run ``jobs`` ({k, epsilon, delta, seed, lower, upper}) of peer ``name`` on ``X``."""
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

"""Peer libraries, run through the same harness from their own environments.

A peer often cannot be installed beside privclust's dependencies (IBM
diffprivlib 0.6 does not import with scikit-learn >= 1.8), so each peer lives
in its own virtual environment under ``PRIVCLUST_PEERS_DIR`` (default
``~/.cache/privclust/peers``), created by ``privclust bench peers install NAME``.
A stand-alone runner script (``peer_runners/``) is executed by the peer's
interpreter on a batch of jobs and answers in JSON.  A peer that is not
installed is reported as missing, never silently dropped.

A peer that is not on the package index (``sources`` set) is installed from
local copies of its source that the user provides, one ``--source PATH`` per
entry of ``sources``, in that order: ``privclust bench peers install NAME
--source PATH [--source PATH]``.  Each path is checked for the file that marks
it (``PeerSource.marker``) before any environment is made.  A source with a
``setup.py`` or ``pyproject.toml`` is pip-installed; a bare checkout (research
code imported from its root, as its authors run it) is put on the peer's path by
a ``.pth`` file in the peer's environment.  privclust ships none of a peer's code.
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

__all__ = ["PEERS", "Peer", "PeerSource", "PeerMissing", "peers_dir", "is_installed", "install", "run_batch"]


@dataclass(frozen=True)
class PeerSource:
    """One local source a peer off the package index needs: what it is, and a file every copy of it holds."""

    what: str
    marker: str  # relative path that must exist under the given folder


@dataclass(frozen=True)
class Peer:
    name: str
    requirements: tuple[str, ...]
    runner: str  # file in peer_runners/
    note: str
    sources: tuple[PeerSource, ...] = ()  # one --source PATH each, in order, for a peer not on the package index
    takes_delta: bool = False  # (epsilon, delta)-DP: jobs carry privclust's delta; else pure epsilon-DP


GOOGLE_LEARNING = PeerSource(
    "the learning/ folder of a google/differential-privacy checkout (it holds setup.py)",
    "clustering/clustering_params.py",
)


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
        sources=(GOOGLE_LEARNING,),
        takes_delta=True,
    ),
    "pe-means": Peer(
        name="pe-means",
        requirements=(
            "faiss-cpu==1.13.2",
            "dp-accounting==0.6.0",
            "absl-py~=1.0",
            "numpy~=1.26",
            "scipy~=1.11",
            "scikit-learn>=1.5,<1.8",
        ),
        runner="pe_means.py",
        note="PE-means (Humphries et al., 2026; t3humphries/PE-means, commit e67d051): private evolution, each "
        "generation a Gaussian-noised histogram of nearest-candidate votes (sensitivity 1 whatever the domain), "
        "composed over the generations by its own GDP accounting to (epsilon, delta) at privclust's delta (its "
        "paper uses 1/n^1.1). Its experiment script's settings: generations int(4 sqrt(d)), L = max(n/(5k), 4) "
        "mutants per survivor, sphere-packing start, weighted k-means selection. Data centred on the bounds box, "
        "radius = half its diagonal (its paper centres on the data's mean and scales by the data's largest norm, "
        "both not private). Mismatches: it reads the row count as public (its vote threshold and population "
        "size), where privclust's default here buys a noisy count; its sphere-packing start, which it draws from "
        "fresh OS entropy, is seeded by the runner from the job's seed (the peer's code unchanged); for d > 32 it is its hdpe_means (a random "
        "projection to 16-d, then one noisy sum and count per cluster), whose final sums add one scalar noise "
        "draw shared by every coordinate and a noise multiplier set for two fewer steps than it charges: as "
        "written that last release is not private, and MNIST's figures flatter it. Not on PyPI: `privclust bench "
        "peers install pe-means --source PATH/PE-means --source PATH/learning` (it imports Google's clustering "
        "package for its data type and loss).",
        sources=(PeerSource("a PE-means checkout (t3humphries/PE-means)", "src/pe_means_main.py"), GOOGLE_LEARNING),
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


def _check_sources(peer: Peer, sources: list[Path]) -> list[Path]:
    """The peer's local sources, resolved, or a ValueError saying which one is wrong and what it must be."""
    flag = "".join(f" --source PATH ({s.what})" for s in peer.sources)
    if not peer.sources and sources:
        raise ValueError(f"{peer.name} installs from the package index: it takes no --source")
    if len(sources) != len(peer.sources):
        raise ValueError(
            f"{peer.name} is not on the package index: pass{flag} (got {len(sources)} --source, "
            f"need {len(peer.sources)}, in that order)"
        )
    resolved = []
    for path, want in zip(sources, peer.sources):
        path = Path(path).resolve()
        if not (path / want.marker).is_file():
            raise ValueError(f"--source {path} is not {want.what}: it has no {want.marker}")
        resolved.append(path)
    return resolved


def _is_package(path: Path) -> bool:
    return (path / "setup.py").is_file() or (path / "pyproject.toml").is_file()


def install(name: str, source: str | Path | list | tuple | None = None) -> Path:
    """Create the peer's own virtual environment and install it there (from ``source``: one local path per
    entry of the peer's ``sources``, for a peer off the package index)."""
    peer = PEERS[name]
    given = [] if source is None else [source] if isinstance(source, (str, Path)) else list(source)
    local = _check_sources(peer, given)
    target = peers_dir() / peer.name
    subprocess.run([sys.executable, "-m", "venv", str(target)], check=True)
    packages = [str(p) for p in local if _is_package(p)]
    subprocess.run([str(_python(peer)), "-m", "pip", "install", "--quiet", *peer.requirements, *packages], check=True)
    bare = [str(p) for p in local if not _is_package(p)]
    if bare:  # research code run from its root: put the root on the peer's path
        site = subprocess.run(
            [str(_python(peer)), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        (Path(site) / f"privclust_peer_{peer.name.replace('-', '_')}.pth").write_text("\n".join(bare) + "\n")
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

"""The seed papers' benchmark data sets, bundled, with their [-1, 1] scaling.

``load(name)`` returns a :class:`Dataset` whose ``X`` is scaled to
[-1, 1]^d the way the FastLloyd paper (Diaa, Humphries & Kerschbaum 2024) does: per feature min-max,
except MNIST, whose pixel range [0, 255] is public.  The scaling reads the
feature ranges of these *public benchmark* sets; for your own private data,
declare bounds instead (``KMeans(bounds=...)``).
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from importlib import resources

import numpy as np

__all__ = ["Dataset", "DATASETS", "load", "load_raw", "names"]


@dataclass(frozen=True)
class _Spec:
    file: str
    k: int
    labels: str | None
    description: str


# name -> file stem, the k the FastLloyd paper uses, label file, description
DATASETS: dict[str, _Spec] = {
    "iris": _Spec("iris.csv.gz", 3, "iris.labels.csv.gz", "Iris, 150 x 4"),
    "lsun": _Spec("lsun.csv.gz", 3, "lsun.labels.csv.gz", "LSun (FCPS), 400 x 2"),
    "s1": _Spec("s1.csv.gz", 15, "s1.labels.csv.gz", "S1 (SIPU), 5,000 x 2"),
    "house": _Spec("house.csv.gz", 3, None, "House colours, 1,837 x 3"),
    "adult": _Spec("adult_num.csv.gz", 3, "adult_num.labels.csv.gz", "Adult numeric, 48,842 x 6"),
    "wine": _Spec("wine.csv.gz", 3, "wine.labels.csv.gz", "Wine, 178 x 13"),
    "breast": _Spec(
        "breast_cancer_wisconsin_original.csv.gz",
        2,
        "breast_cancer_wisconsin_original.labels.csv.gz",
        "Breast cancer Wisconsin (original), 699 x 9",
    ),
    "yeast": _Spec("yeast.csv.gz", 10, "yeast.labels.csv.gz", "Yeast, 1,484 x 8"),
    "mnist": _Spec("mnist_test10k.npz", 10, "mnist_test10k.labels.csv.gz", "MNIST test, 10,000 x 784"),
    "birch2": _Spec("birch2_sub25k.csv.gz", 100, "birch2_sub25k.labels.csv.gz", "Birch2 subsample, 25,000 x 2"),
}


@dataclass(frozen=True)
class Dataset:
    name: str
    X: np.ndarray  # scaled to [-1, 1]^d
    labels: np.ndarray | None
    k: int
    description: str

    @property
    def bounds(self) -> tuple[float, float]:
        return (-1.0, 1.0)


def names() -> list[str]:
    return list(DATASETS)


def _path(file: str):
    return resources.files("privclust") / "data" / file


def _read_csv(file: str) -> np.ndarray:
    with gzip.open(_path(file), "rt") as fh:
        return np.loadtxt(fh, delimiter=",", skiprows=1, ndmin=2)


def _spec(name: str) -> _Spec:
    try:
        return DATASETS[name.lower()]
    except KeyError:
        raise ValueError(f"unknown data set {name!r}; bundled: {', '.join(DATASETS)}") from None


def load_raw(name: str) -> np.ndarray:
    """The data set as published (unscaled)."""
    spec = _spec(name)
    if spec.file.endswith(".npz"):
        with np.load(_path(spec.file)) as npz:
            return npz["X"].astype(np.float64)
    return _read_csv(spec.file)


def load(name: str) -> Dataset:
    """The data set scaled to [-1, 1]^d, with reference labels where they exist."""
    spec = _spec(name)
    raw = load_raw(name)
    if spec.file.endswith(".npz"):
        X = raw / 255.0 * 2.0 - 1.0
    else:
        lo, hi = raw.min(axis=0), raw.max(axis=0)
        span = np.where(hi > lo, hi - lo, 1.0)
        X = 2.0 * (raw - lo) / span - 1.0
    labels = _read_csv(spec.labels)[:, 0].astype(int) if spec.labels else None
    return Dataset(name.lower(), X, labels, spec.k, spec.description)

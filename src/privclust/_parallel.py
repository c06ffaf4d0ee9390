"""Process chunks of rows on every core.

numpy and BLAS release the GIL, so threads share the work without copying
the data.  Inside the pool BLAS is limited to one thread per worker, so the
two levels of parallelism do not oversubscribe the cores.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable, TypeVar

from functools import lru_cache

from threadpoolctl import ThreadpoolController

T = TypeVar("T")

__all__ = ["map_chunks", "n_workers"]


@lru_cache(maxsize=1)
def _controller() -> ThreadpoolController:
    # Finding the loaded BLAS/OpenMP libraries is slow: do it once.
    return ThreadpoolController()


def n_workers() -> int:
    return max(1, os.cpu_count() or 1)


def map_chunks(fn: Callable[..., T], chunks: Iterable, workers: int | None = None) -> list[T]:
    chunks = list(chunks)
    workers = min(workers or n_workers(), len(chunks))
    if workers <= 1:
        return [fn(c) for c in chunks]
    with _controller().limit(limits=1), ThreadPoolExecutor(workers) as pool:
        return list(pool.map(fn, chunks))

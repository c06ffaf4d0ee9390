"""Process chunks of rows on every core.

numpy and BLAS release the GIL, so threads share the work without copying
the data.  Inside the pool BLAS is limited to one thread per worker, so the
two levels of parallelism do not oversubscribe the cores.

The pool's threads are started once per process and reused by every pass
(a fit makes tens of passes; starting two threads for each cost more than a
small pass itself on a busy machine).  A chunk function that itself maps
chunks runs its inner map on its own thread, so the pool never waits on
itself.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache
from typing import Callable, Iterable, Iterator, TypeVar

from threadpoolctl import ThreadpoolController

T = TypeVar("T")

__all__ = ["map_chunks", "imap_chunks", "n_workers", "one_thread", "use_single_thread", "fit_threads"]

_max_workers: int | None = None
_fit_workers: ContextVar[int | None] = ContextVar("privclust_fit_workers", default=None)  # KMeans(n_jobs=...)
_pools: dict[int, ThreadPoolExecutor] = {}
_pool_lock = threading.Lock()
_in_pool = threading.local()  # set on the pool's own threads


@lru_cache(maxsize=1)
def _controller() -> ThreadpoolController:
    # Finding the loaded BLAS/OpenMP libraries is slow: do it once.
    return ThreadpoolController()


def n_workers() -> int:
    return _fit_workers.get() or _max_workers or max(1, os.cpu_count() or 1)


@contextmanager
def fit_threads(workers: int | None) -> Iterator[None]:
    """Within the block, at most ``workers`` threads: for chunks of rows (``map_chunks``) and for BLAS and
    OpenMP; ``None`` changes nothing.  The chunk count is this thread's (a context variable), the BLAS limit
    the process's (threadpoolctl), restored when the block ends."""
    if workers is None:
        yield
        return
    token = _fit_workers.set(int(workers))
    try:
        with _controller().limit(limits=int(workers)):
            yield
    finally:
        _fit_workers.reset(token)


def use_single_thread() -> None:
    """For worker processes that already fill the cores: no threads of our own, one BLAS thread."""
    global _max_workers
    _max_workers = 1
    _controller().limit(limits=1)  # kept for the life of the process


def one_thread():
    """A context in which BLAS and OpenMP run one thread: for small problems (tens of points), where waking
    a team of threads costs more than the work (scikit-learn's k-means on 30 points: 12 ms a run, 2 ms alone)."""
    return _controller().limit(limits=1)


def _mark_pool_thread() -> None:
    _in_pool.active = True


def _shared_pool() -> ThreadPoolExecutor:
    """The process's pool of ``n_workers()`` threads, started on first use: one per size, never shut down while
    a fit may hold it (concurrent fits may ask for different sizes: ``KMeans(n_jobs=...)``)."""
    workers = n_workers()
    with _pool_lock:
        if workers not in _pools:
            _pools[workers] = ThreadPoolExecutor(workers, thread_name_prefix="privclust", initializer=_mark_pool_thread)
        return _pools[workers]


def _forget_pool() -> None:  # a forked child has none of its parent's threads
    global _pools, _pool_lock
    _pools, _pool_lock = {}, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def _serial(workers: int) -> bool:
    return workers <= 1 or getattr(_in_pool, "active", False)


def map_chunks(fn: Callable[..., T], chunks: Iterable, workers: int | None = None) -> list[T]:
    chunks = list(chunks)
    if _serial(min(workers or n_workers(), len(chunks))):
        return [fn(c) for c in chunks]
    return list(imap_chunks(fn, chunks, workers))


def imap_chunks(fn: Callable[..., T], chunks: Iterable, workers: int | None = None) -> Iterator[T]:
    """``fn`` of every chunk, in order, as they finish: at most two per worker in flight, so a pass over many
    chunks holds a few partial answers whatever its length, and no worker waits for a slow neighbour."""
    workers = workers or n_workers()
    if _serial(workers):
        yield from (fn(c) for c in chunks)
        return
    pool = _shared_pool()
    with _controller().limit(limits=1):
        pending: deque = deque()
        try:
            for chunk in chunks:
                pending.append(pool.submit(fn, chunk))
                if len(pending) >= 2 * workers:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for future in pending:  # the caller stopped early, or a chunk failed
                future.cancel()

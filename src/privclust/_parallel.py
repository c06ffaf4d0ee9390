"""Process chunks of rows on every core.

numpy and BLAS release the GIL, so threads share the work without copying
the data.  Inside the pool BLAS is limited to one thread per worker, so the
two levels of parallelism do not oversubscribe the cores.

The pool's threads are started once per process and reused by every pass
(a fit makes tens of passes; starting two threads for each cost more than a
small pass itself on a busy machine).  A chunk function that itself maps
chunks runs its inner map on its own thread, so the pool never waits on
itself.

Thread limits (:func:`limited_threads`: a fit's ``n_jobs``, one BLAS thread for
small problems and inside the pool) meet two kinds of library.  OpenMP's count
(libgomp's, and OpenBLAS's when built on OpenMP) belongs to the thread that sets
it: each block sets it in its own thread and restores it there.  A BLAS with a
pool of its own (OpenBLAS on pthreads, as numpy's and scipy's wheels ship it) has
one count for the whole process, so concurrent blocks cannot each have theirs:
while blocks of any threads are inside, it is the smallest of their limits, and
the count it had before the first of them entered comes back when the last one
leaves.  Those blocks are kept under one lock here; threadpoolctl lets only the
thread that first set such a count change it (its "controlling thread"), so each
change is made after handing that role to the thread making it.  Code outside
privclust that sets the count meanwhile (scikit-learn's KMeans limits BLAS itself)
shares the one count: a change of its own holds until privclust's next one.
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

__all__ = [
    "map_chunks",
    "imap_chunks",
    "n_workers",
    "one_thread",
    "use_single_thread",
    "fit_threads",
    "limited_threads",
]

_max_workers: int | None = None
_fit_workers: ContextVar[int | None] = ContextVar("privclust_fit_workers", default=None)  # KMeans(n_jobs=...)
_pools: dict[int, ThreadPoolExecutor] = {}
_pool_lock = threading.Lock()
_in_pool = threading.local()  # set on the pool's own threads


@lru_cache(maxsize=1)
def _controller() -> ThreadpoolController:
    # Finding the loaded BLAS/OpenMP libraries is slow: do it once.
    return ThreadpoolController()


def _per_thread(library) -> bool:
    """Whether a library's thread count is the calling thread's: OpenMP's, and OpenBLAS's on OpenMP (threadpoolctl
    sets it with omp_set_num_threads).  Any other BLAS keeps one count for every thread of the process."""
    return library.user_api == "openmp" or (
        library.internal_api == "openblas" and getattr(library, "threading_layer", None) == "openmp"
    )


def _libraries(per_thread: bool) -> list:
    return [lib for lib in _controller().lib_controllers if _per_thread(lib) == per_thread]


_shared_lock = threading.Lock()
_shared_limits: list[int] = []  # the limits of the blocks inside limited_threads now, in every thread
_shared_saved: list[tuple[object, int]] = []  # the process-wide libraries' counts before the first block entered


def _set_process_wide(library, count: int) -> None:
    """A process-wide library at ``count`` threads, from whichever thread calls (under ``_shared_lock``)."""
    take_control = getattr(type(library), "clear_controlling_thread", None)
    if take_control is not None:  # threadpoolctl ignores a thread that does not hold its control: hand it over
        take_control(force=True)
    library.set_num_threads(count)
    if take_control is not None:
        take_control(force=True)  # and let it go, as threadpoolctl's own limits do when they end


@contextmanager
def limited_threads(limit: int) -> Iterator[None]:
    """Within the block, BLAS and OpenMP run at most ``limit`` threads: OpenMP in this thread (set and restored
    here); a process-wide BLAS at the smallest limit of the blocks inside in any thread, its count from before the
    first of them back when the last one leaves (see the module docstring)."""
    global _shared_saved
    limit = int(limit)
    here = [(lib, n) for lib in _libraries(per_thread=True) if (n := lib.get_num_threads()) is not None]
    for lib, _ in here:
        lib.set_num_threads(limit)
    with _shared_lock:
        if not _shared_limits:
            _shared_saved = [
                (lib, n) for lib in _libraries(per_thread=False) if (n := lib.get_num_threads()) is not None
            ]
        _shared_limits.append(limit)
        for lib, _ in _shared_saved:
            _set_process_wide(lib, min(_shared_limits))
    try:
        yield
    finally:
        with _shared_lock:
            _shared_limits.remove(limit)
            for lib, count in _shared_saved:  # the last block out: each as it was before the first came in
                _set_process_wide(lib, min(_shared_limits) if _shared_limits else count)
            if not _shared_limits:
                _shared_saved = []
        for lib, count in here:
            lib.set_num_threads(count)


def n_workers() -> int:
    return _fit_workers.get() or _max_workers or max(1, os.cpu_count() or 1)


@contextmanager
def fit_threads(workers: int | None) -> Iterator[None]:
    """Within the block, at most ``workers`` threads: for chunks of rows (``map_chunks``) and for BLAS and
    OpenMP; ``None`` changes nothing.  The chunk count and OpenMP's are this thread's, a process-wide BLAS's the
    smallest of the blocks inside in any thread (:func:`limited_threads`), restored when the last one ends."""
    if workers is None:
        yield
        return
    token = _fit_workers.set(int(workers))
    try:
        with limited_threads(int(workers)):
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
    return limited_threads(1)


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


def _forget_pool() -> None:  # a forked child has none of its parent's threads, nor their blocks
    global _pools, _pool_lock, _shared_lock, _shared_limits, _shared_saved
    _pools, _pool_lock = {}, threading.Lock()
    _shared_lock, _shared_limits, _shared_saved = threading.Lock(), [], []


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
    with limited_threads(1):
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

"""Giving back the pages of a memory map once a pass has read them.

A memory-mapped input (a ``.npy`` opened with ``mmap_mode="r"``, or the temporary file that
``privclust.io.read_table`` spills a CSV or Parquet table into) is read chunk by chunk, but every page a
pass touches stays mapped into the process until the map is closed, so after one pass the resident set
holds the whole array.  Those pages are clean page-cache pages the kernel may reclaim under pressure,
but they count in the process's resident set (the peak a user or a scheduler sees) and they compete
with the fit's own memory.  :func:`drop_pages` tells the kernel that the pages of some rows are no
longer needed (``madvise(MADV_DONTNEED)``): they are unmapped from the process at once, stay in the
page cache while there is room, and are mapped again (from the cache, or read from the file) if a later
pass touches them.  For a shared mapping of a file -- numpy's modes ``"r"``, ``"r+"`` and ``"w+"`` --
that loses nothing: the file holds every byte (a written page stays dirty in the page cache and is
written back as usual).  A copy-on-write map (mode ``"c"``) would lose its private changes, so it is
left alone, as is every array that is not a memory map.

Privacy: this decides nothing from the rows' values.  Which pages are dropped follows from the chunk's
row positions, which the pass chose without reading the rows.
"""

from __future__ import annotations

import mmap

import numpy as np

__all__ = ["drop_pages", "gather_rows"]

_SHARED_MODES = ("r", "r+", "w+")  # np.memmap's modes that map the file shared (not copy-on-write)
_DONTNEED = getattr(mmap, "MADV_DONTNEED", None)  # Unix only: elsewhere the pages stay until the map is closed
# A read fault maps more than the faulting page: the whole page-cache folio holding it (Linux caches a file in
# folios of up to 2 MiB, naturally aligned in the file) and the cached pages around it (fault-around, 64 KiB by
# default).  So a chunk's first and last reads map pages of the chunks beside it, and the dropped range is widened
# to the aligned 2 MiB windows of the file that hold the chunk, which hold everything its reads mapped.
_WINDOW = 2 * 2**20


def _shared_map(X) -> mmap.mmap | None:
    """The mapping under ``X`` if it is a memory map whose pages may be dropped, else None."""
    if _DONTNEED is None or not isinstance(X, np.memmap) or getattr(X, "mode", None) not in _SHARED_MODES:
        return None
    mapping = getattr(X, "_mmap", None)  # numpy keeps the mmap of the file (shared by views of the map)
    if not isinstance(mapping, mmap.mmap) or mapping.closed or X.ndim != 2 or X.size == 0:
        return None
    return mapping


def drop_pages(X, rows) -> None:
    """Give back the resident pages holding the rows ``rows`` (a slice of step 1, or sorted row indices) of a
    2-D memory map ``X``: see the module's docstring.  Anything else (an array in memory, a copy-on-write
    map) is left as it is.  Best effort: a system that refuses the advice keeps the pages mapped."""
    mapping = _shared_map(X)
    if mapping is None:
        return
    if isinstance(rows, slice):
        first, stop, _ = rows.indices(X.shape[0])
        last = stop - 1
    else:
        rows = np.asarray(rows)
        if rows.size == 0:
            return
        first, last = int(rows[0]), int(rows[-1])
    row_step, column_step = X.strides
    if last < first or row_step <= 0 or column_step <= 0:
        return
    origin = np.frombuffer(mapping, dtype=np.uint8).ctypes.data  # the mapping's first byte
    at = X.ctypes.data - origin  # X[0, 0] within the mapping
    in_file = X.offset - X.offset % mmap.ALLOCATIONGRANULARITY  # where numpy started the mapping in the file
    start = at + first * row_step + in_file
    end = at + last * row_step + (X.shape[1] - 1) * column_step + X.itemsize + in_file
    # Whole windows of the file (see _WINDOW); a page of a neighbouring chunk that goes too is mapped again from
    # the page cache if that chunk is still being read.
    start = max(0, start - start % _WINDOW - in_file)
    end = min(len(mapping), end + (-end) % _WINDOW - in_file)
    if end <= start:
        return
    try:
        mapping.madvise(_DONTNEED, start, end - start)
    except (OSError, ValueError):
        pass


def gather_rows(X, index: np.ndarray, block: int) -> np.ndarray:
    """``X[index]`` for sorted row indices, gathered ``block`` indices at a time so that a memory map's
    pages are given back (:func:`drop_pages`) as the gather goes: a sample spread over the whole map
    touches nearly every page of it.  An array in memory is indexed in one step."""
    if _shared_map(X) is None:
        return X[index]
    out = np.empty((index.size, X.shape[1]), dtype=X.dtype)
    for start in range(0, index.size, block):
        part = index[start : start + block]
        out[start : start + part.size] = X[part]
        drop_pages(X, part)
    return out

"""BLAS threads for the index's matrix products: one thread for small ones.

numpy's OpenBLAS splits a matrix product over as many threads as there are
cores (two here).  For a small product that buys a tenth of a millisecond
and costs the tail: each thread must get a core, and on a busy machine one
of them waits for a time slice.  Measured here in one run (``bench_store``'s
numpy floor, cosine top-10 over N x 256 float32 rows; ranges over two passes
of each; the machine was shared, load average 11-13 on 2 cores even when
"idle", "busy" = two more CPU-bound processes):

============  ===========================  ===========================
N             2 threads p50 / p99 (ms)     1 thread p50 / p99 (ms)
============  ===========================  ===========================
5k, idle      0.09-0.16 / 20-30            0.20 / 13-22
5k, busy      0.09-0.10 / 52-97            0.19-0.20 / 16-21
100k, idle    18-28 / 74-118               11-19 / 27-80
100k, busy    36-40 / 92-98                43-44 / 81-96
1M, idle      160-194 / 266-327            156-179 / 348-365
1M, busy      342-400 / 483-753            525-542 / 637-1,003
============  ===========================  ===========================

So the index runs a product of at most :data:`SINGLE_THREAD_MAX_ROWS` rows
on one BLAS thread and leaves larger ones to the library's setting.

A split product also costs after it returns: OpenBLAS's worker thread spins
(busy-waits for more work, ``blas_thread_server``) for about 60 ms before it
sleeps.  Measured here (OpenBLAS 0.3.31, numpy's wheel): one 2,000 x 256
matrix-vector product, then nothing -- 59 ms of CPU by the worker; the
journaled ``ReActAgent.reply`` benchmark spent 4.6 ms of such CPU per turn
(0.8-1.1 ms with every product on one thread), a core taken from the turn
and the store's threads on a two-core machine.  The products that left it
spinning were the ones no limit covered: a write's near-duplicate check
(the namespace's rows against 20 new memories) and the soft term match of
the second stage.  And the limit does not hold in every thread: once
OpenBLAS's threads have run, a thread count set from any thread but the
process's main one is ignored (measured with this build: set to 1 from a
worker thread, read back 2; from the main thread it holds), so a search or
a write on a worker thread (the recorder's, ``asyncio.to_thread``'s) ran
split products under the "limit".  Those small products are therefore
computed by :func:`unsplit_matmul`: in blocks of rows each below
:data:`SPLIT_FREE_WORK`, which OpenBLAS runs on the calling thread whatever
its setting -- no process-wide switch, and the same numbers (each row's
product is computed alone either way).  The index's search keeps the limit
for what is not blocked; a product OpenBLAS would not split skips it (and
its ~20 us).

Scope: the limit is taken around the index's own search (threadpoolctl
sets OpenBLAS's process-wide thread count, there is no per-thread one) and
given back when the last concurrent search of the process leaves it, so the
host application's setting is what it was after every search.  While a
small search runs, a BLAS call made by another thread of the host at that
very moment runs single-threaded too; a host that changes its own setting
during a search has that change undone when the search ends.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import structlog
from threadpoolctl import ThreadpoolController

__all__ = ["SINGLE_THREAD_MAX_ROWS", "SPLIT_FREE_WORK", "blas_threads_for", "unsplit_matmul"]

log = structlog.get_logger(__name__)

#: Products over at most this many rows run on one BLAS thread.
SINGLE_THREAD_MAX_ROWS: Final = 32_768
#: Multiply-adds below which OpenBLAS runs a product on the calling thread.
#: Measured (0.3.31, 256 dimensions): a matrix-vector product was split from
#: ~1,800 rows (460k), a matrix product from 2,048 result cells (524k, its
#: ``m * n * k`` threshold); half the smaller leaves a margin.
SPLIT_FREE_WORK: Final = 262_144

_lock = threading.Lock()
#: threadpoolctl's controllers of the process's BLAS libraries (found once).
_libs: list[Any] | None = None
#: The libraries set to one thread by the outermost limit, with their setting before.
_saved: list[tuple[Any, int]] = []
_depth = 0


def _start_limit() -> None:
    """Set every BLAS library to one thread, keeping what it had (outermost call only).

    Through threadpoolctl's controller of each library (its ``num_threads``
    and ``set_num_threads``), not ``ThreadpoolController.limit``: that builds
    a limiter and reads every library's full info per call, ~30 us here,
    which a single write's near-duplicate check paid for a ~30 us product.
    """
    global _libs, _depth
    with _lock:
        if _depth == 0:
            try:
                if _libs is None:
                    _libs = [
                        lib
                        for lib in ThreadpoolController().lib_controllers
                        if lib.user_api == "blas"
                    ]
                for lib in _libs:
                    before = lib.num_threads
                    if before != 1:
                        lib.set_num_threads(1)
                        _saved.append((lib, before))
            except Exception as exc:  # pragma: no cover - an exotic BLAS build
                log.debug("store.blas_limit_failed", error=str(exc))
        _depth += 1


def _end_limit() -> None:
    global _depth
    with _lock:
        _depth -= 1
        if _depth == 0:
            while _saved:
                lib, before = _saved.pop()
                try:
                    lib.set_num_threads(before)
                except Exception as exc:  # pragma: no cover - an exotic BLAS build
                    log.debug("store.blas_restore_failed", error=str(exc))


@contextmanager
def blas_threads_for(rows: int, work: int | None = None) -> Iterator[None]:
    """Run the block on one BLAS thread when its products span at most ``rows`` rows.

    Args:
        rows: Rows of the largest matrix product the block computes.
        work: Its multiply-adds (rows x columns x inner dimension), when
            known: below :data:`SPLIT_FREE_WORK` nothing is changed (OpenBLAS
            does not split it).
    """
    if rows > SINGLE_THREAD_MAX_ROWS or (work is not None and work < SPLIT_FREE_WORK):
        yield
        return
    _start_limit()
    try:
        yield
    finally:
        _end_limit()


def unsplit_matmul(a: npt.NDArray[Any], b: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """``a @ b`` (``a`` 2-D) in blocks of rows OpenBLAS never splits over its threads.

    Each block's multiply-adds stay below :data:`SPLIT_FREE_WORK`, so every
    product runs on the calling thread in any thread and whatever the process's
    BLAS setting, and no worker is left spinning after it.  Rows of the result
    are the rows of one product: the same values as ``a @ b``.
    """
    cols = 1 if b.ndim == 1 else int(b.shape[1])
    depth = max(1, int(a.shape[1]))
    step = SPLIT_FREE_WORK // (depth * cols)
    if a.shape[0] <= step:
        out: npt.NDArray[Any] = a @ b
        return out
    shape = (a.shape[0],) if b.ndim == 1 else (a.shape[0], cols)
    blocks = np.empty(shape, dtype=np.result_type(a, b))
    if step >= 1:
        for start in range(0, a.shape[0], step):
            np.matmul(a[start : start + step], b, out=blocks[start : start + step])
        return blocks
    # One row against every column is already past the split-free work (a
    # batch of 1,024 or more new memories at 256 dimensions): tiles of rows x
    # columns.  A row at a time, as before, was a matrix-vector product that
    # read all of ``b`` again for every row of ``a`` (5,000 x 5,000 x 256: 15 s
    # instead of 0.4 s) and was still past the work OpenBLAS splits.
    tile = max(1, math.isqrt((SPLIT_FREE_WORK - 1) // depth))
    for r in range(0, a.shape[0], tile):
        rows = a[r : r + tile]
        for c in range(0, cols, tile):
            blocks[r : r + tile, c : c + tile] = rows @ b[:, c : c + tile]
    return blocks

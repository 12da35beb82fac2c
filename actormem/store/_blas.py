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

So the library runs a product of at most :data:`SINGLE_THREAD_MAX_ROWS`
rows on one thread and leaves larger ones to the BLAS library's setting.

A split product also costs after it returns: OpenBLAS's worker thread spins
(busy-waits for more work, ``blas_thread_server``) for about 60 ms before it
sleeps.  Measured here (OpenBLAS 0.3.31, numpy's wheel): one 2,000 x 256
matrix-vector product, then nothing -- 59 ms of CPU by the worker; the
journaled ``ReActAgent.reply`` benchmark spent 2.5 ms of such CPU per turn
at load 8.6, a core taken from the turn and the store's threads on a
two-core machine.  The products that left it spinning were a write's
near-duplicate check (the namespace's rows against 20 new memories) and
the soft term match of the second stage.

One thread, how: the thread count threadpoolctl sets is process-wide (the
host application's too, while it is set), and it does not hold in every
thread: once OpenBLAS's threads have run, a count set from any thread but
the process's main one is ignored (measured with this build: set to 1 from
a worker thread, read back 2; from the main thread it holds), so a search
or a write on a worker thread (the recorder's, ``asyncio.to_thread``'s) ran
split products under the earlier limit.  :func:`unsplit_matmul` instead
computes a product in blocks of rows each within :data:`SPLIT_FREE_WORK`,
which OpenBLAS runs on the calling thread whatever its setting: any thread,
nothing process-wide changed, the same numbers (each row's product is
computed alone either way).  Its cost, alternated at load 12: a 5,000 x 256
matrix-vector product 0.18-0.20 ms against 0.17 ms as one product on one
thread; 32,768 x 256 1.4-3.3 ms against 1.2-6.3 ms.
"""

from __future__ import annotations

import math
from typing import Any, Final

import numpy as np
import numpy.typing as npt

__all__ = ["SINGLE_THREAD_MAX_ROWS", "SPLIT_FREE_WORK", "unsplit_matmul"]

#: Products over at most this many rows run on one thread (:func:`unsplit_matmul`).
SINGLE_THREAD_MAX_ROWS: Final = 32_768
#: Multiply-adds up to which OpenBLAS runs a product on the calling thread.
#: Measured (0.3.31, 256 dimensions): a matrix-vector product was split from
#: ~1,800 rows (460k), a matrix product from 2,048 result cells (524k, its
#: ``m * n * k`` threshold); half the smaller leaves a margin.
SPLIT_FREE_WORK: Final = 262_144


def unsplit_matmul(a: npt.NDArray[Any], b: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """``a @ b`` (``a`` 2-D) in blocks of rows OpenBLAS never splits over its threads.

    Each block's multiply-adds stay within :data:`SPLIT_FREE_WORK`, so every
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

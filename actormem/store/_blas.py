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

Scope: the limit is taken around the index's own search (threadpoolctl
sets OpenBLAS's process-wide thread count, there is no per-thread one) and
given back when the last concurrent search of the process leaves it, so the
host application's setting is what it was after every search.  While a
small search runs, a BLAS call made by another thread of the host at that
very moment runs single-threaded too; a host that changes its own setting
during a search has that change undone when the search ends.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final

import structlog
from threadpoolctl import ThreadpoolController

__all__ = ["SINGLE_THREAD_MAX_ROWS", "blas_threads_for"]

log = structlog.get_logger(__name__)

#: Products over at most this many rows run on one BLAS thread.
SINGLE_THREAD_MAX_ROWS: Final = 32_768

_lock = threading.Lock()
_controller: ThreadpoolController | None = None
_limiter: Any = None
_depth = 0


def _start_limit() -> None:
    global _controller, _limiter, _depth
    with _lock:
        if _depth == 0:
            try:
                if _controller is None:
                    _controller = ThreadpoolController()
                _limiter = _controller.limit(limits=1, user_api="blas")
            except Exception as exc:  # pragma: no cover - an exotic BLAS build
                log.debug("store.blas_limit_failed", error=str(exc))
                _limiter = None
        _depth += 1


def _end_limit() -> None:
    global _limiter, _depth
    with _lock:
        _depth -= 1
        if _depth == 0 and _limiter is not None:
            _limiter.restore_original_limits()
            _limiter = None


@contextmanager
def blas_threads_for(rows: int) -> Iterator[None]:
    """Run the block on one BLAS thread when its products span at most ``rows`` rows.

    Args:
        rows: Rows of the largest matrix product the block computes.
    """
    if rows > SINGLE_THREAD_MAX_ROWS:
        yield
        return
    _start_limit()
    try:
        yield
    finally:
        _end_limit()

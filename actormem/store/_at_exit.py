"""DuckDB stores a program left open are closed at interpreter exit, after the runtimes.

The stores' flusher and the actors' threads are daemon threads: at
interpreter exit, one caught inside a DuckDB call when Python tears daemon
threads down aborts the process ("terminate called without an active
exception", duckdb/duckdb#13904) -- a program (or test run) that forgot
``close()`` died with SIGABRT in up to half of its exits.  The handler here
closes them at exit instead: pending access counts are written, the threads
stop, the file is released.

It must run *after* the runtimes' own exit handler (``actormem.runtime``),
which flushes their recorders into these stores.  ``atexit`` runs the
handler registered last first, so this one is registered when
``actormem.store`` is imported -- which the runtime module does before it
registers its own.  It cannot live in ``_duckdb``: DuckDB is imported on
first use (an agent on PostgreSQL never loads it), so ``_duckdb`` may be
imported after the runtime, and its handler would then close the stores
before the runtimes' last turns were committed.
"""

from __future__ import annotations

import atexit
import weakref
from typing import TYPE_CHECKING

import structlog

if TYPE_CHECKING:
    from actormem.store._duckdb import DuckDBStore

__all__ = ["OPEN_STORES"]

log = structlog.get_logger("actormem.store._duckdb")

#: DuckDB stores not closed yet (a store adds itself as it opens, leaves as it closes).
OPEN_STORES: weakref.WeakSet[DuckDBStore] = weakref.WeakSet()


@atexit.register
def _close_open_stores() -> None:
    for store in list(OPEN_STORES):
        try:
            store.close()
        except Exception as exc:  # exit anyway; say what went wrong
            log.error("store.close_at_exit_failed", path=store.path, error=repr(exc))

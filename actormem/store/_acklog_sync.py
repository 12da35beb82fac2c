"""A record of the acknowledgement log synced in the background instead of on the caller's path.

Since the start slot (:mod:`actormem.store._acklog_start`), a DuckDB store
with a log keeps a turn's start there and no longer writes unsynced records
to the log; :meth:`AckLog.append` still takes ``sync=False`` (what follows
says how it keeps the log's rule), for a log used without a slot.

Why: an agent's turn with the journal acknowledges two records of the store's
log, the turn's start (NOW in flight, the user's message) and its end (the
reply, NOW done), and waited for two ``fdatasync`` calls -- 3.5-4 ms each on
a disk shared with other work, most of the turn's time.  What a turn promises
is that what ``reply()`` returns is synced; its start only has to survive the
process being killed during the model call (for the resume), which the page
cache already gives once the record is written.  So the start's record is
written with ``sync=False``: the write returns after ``pwrite``, and this
thread syncs it while the turn goes on (while the model thinks).

What it keeps: nothing is appended after a record until that record is synced
(the log's reader tells damage from a torn tail by that rule, see
:mod:`actormem.store._acklog`), so the next append first waits for this
thread, or syncs itself when the thread has not started yet; the turn's end
is then synced as before.  The store writes its commit record
(:mod:`actormem.store._commits`) only for synced records, so the record
never runs ahead of what is on disk.  A failed background sync is raised to
every later writer (and logged) until the applier has moved every pending
record into DuckDB and cut the log (:meth:`BackgroundSync.clear`): retrying
``fdatasync`` after an error proves nothing on Linux, and a record appended
after one that never reached the disk would make the log read as damaged
after a power cut.  So, from a failed background sync until that cut, every
write to the log is refused ("not stored"); nothing acknowledged is lost.

A forked child gets the state of the parent's object but not its thread:
:func:`_after_fork` resets every instance in the child so that nothing waits
for a thread that does not exist there.
"""

from __future__ import annotations

import os
import threading
import weakref

import structlog

from actormem.store._types import StoreError

__all__ = ["BackgroundSync"]

log = structlog.get_logger(__name__)


_INSTANCES: weakref.WeakSet[BackgroundSync] = weakref.WeakSet()


def _after_fork() -> None:
    for sync in list(_INSTANCES):
        sync._reset_in_child()


os.register_at_fork(after_in_child=_after_fork)


class BackgroundSync:
    """Syncs one file descriptor's unsynced appends on a thread of its own (started lazily)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._cond = threading.Condition()
        self._fd: int | None = None
        self._pending = False  # written, not yet synced, and nobody syncs it yet
        self._busy = False  # a sync runs (here or on a caller's thread)
        self._error: OSError | None = None
        self._stop = False
        self._thread: threading.Thread | None = None
        _INSTANCES.add(self)

    @property
    def unsynced(self) -> bool:
        """Whether an append is not synced yet (or its sync failed)."""
        with self._cond:
            return self._pending or self._busy or self._error is not None

    def clear(self) -> None:
        """Forget a failed sync: every record it concerned is now in DuckDB (the log was cut)."""
        with self._cond:
            self._error = None

    def _reset_in_child(self) -> None:
        self._cond = threading.Condition()
        self._pending = self._busy = self._stop = False
        self._thread = None

    def request(self, fd: int) -> None:
        """Have ``fd`` synced in the background (an append to it returned unsynced)."""
        with self._cond:
            self._fd = fd
            self._pending = True
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run,
                    name=f"actormem-acklog-sync:{os.path.basename(self.path)}",
                    daemon=True,
                )
                self._thread.start()
            self._cond.notify_all()

    def settle(self) -> None:
        """Return once every earlier append is synced (syncing here if nobody has begun).

        Raises:
            StoreError: The background sync of an earlier append failed.
        """
        with self._cond:
            while self._busy:
                self._cond.wait()
            fd = self._fd if self._pending else None
            if fd is not None:
                self._pending = False
                self._busy = True
        if fd is not None:
            self._sync(fd)
        with self._cond:
            error = self._error  # kept until the log is cut: see the module
        if error is not None:
            raise StoreError(
                f"syncing {self.path} failed ({error}): a write acknowledged before its sync "
                "(a journal turn's start) may be lost at a power cut; this write was not stored"
            ) from error

    def close(self) -> None:
        """Sync what is unsynced and stop the thread (a failure is logged)."""
        try:
            self.settle()
        except StoreError as exc:
            log.error("store.acklog_sync_failed", path=self.path, error=str(exc))
        with self._cond:
            self._stop = True
            self._cond.notify_all()
            thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        with self._cond:
            self._stop = False

    def _sync(self, fd: int) -> None:
        """``fdatasync(fd)`` with ``_busy`` set by the caller; clears it."""
        try:
            os.fdatasync(fd)
        except OSError as exc:
            log.error("store.acklog_sync_failed", path=self.path, error=str(exc))
            with self._cond:
                self._error = exc
        finally:
            with self._cond:
                self._busy = False
                self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._stop:
                    self._cond.wait()
                if not self._pending:
                    return  # stopping, nothing to sync
                fd = self._fd
                self._pending = False
                self._busy = True
            assert fd is not None
            self._sync(fd)

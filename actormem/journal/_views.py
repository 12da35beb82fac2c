"""The journal's view writer: NOW.md and LOG.md are written off the caller's thread.

Why: replacing a file (temp file, write, rename) costs 1-5 ms on a loaded
machine, and an agent's turn replaced NOW.md and LOG.md twice each; a LOG
compaction (a summary, a memory, a store transaction) landed on the turn
that crossed the threshold, 50-250 ms.  The files are views -- what they show
is acknowledged in the store (synced in its log) before the journal call
returns -- so they may be written a little later:

- each file has at most one queued job and the latest wins (a LOG.md
  rewrite queued behind another replaces it: only the newest text is
  written); jobs run in order on one thread, ``DELAY`` after the first one
  was queued, so the two updates of an agent's turn (task start, final
  reply) usually make one write of each file;
- a compaction runs on a second thread of its own, so neither a turn nor
  the NOW.md writes wait for it (a model summary can take seconds);
- :meth:`ViewWriter.flush` waits for every queued job and the compaction;
  :meth:`ViewWriter.close` flushes first, so nothing queued is lost at close;
  after close, jobs run on the caller's thread.

A process killed before a job ran leaves a file older than the record.
LOG.md is rendered from the record at every start; NOW.md is checked
against the hashes of every version acknowledged since the one on disk
(see :class:`~actormem.journal.Journal`), so an old NOW.md is rewritten, never
imported as a person's edit.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Final

import structlog

from actormem import _pace

__all__ = ["ViewWriter"]

log = structlog.get_logger(__name__)

Job = Callable[[], None]

#: Seconds the writer waits after a job is queued, so later ones replace it.
DELAY: Final = 0.05
#: Seconds ``close()`` waits for queued jobs and a compaction before it gives up
#: (a model summary has its own timeout, ``JournalConfig.model_timeout``).
CLOSE_WAIT: Final = 300.0


class ViewWriter:
    """One thread writing the journal's views, one for its compactions.

    Args:
        label: names the threads (``actormem-journal-views:<label>``).
    """

    def __init__(self, label: str, delay: float = DELAY) -> None:
        self.label = label
        self.delay = delay
        self._urgent = 0  # flushes waiting: the writer does not wait out the delay
        self._cond = threading.Condition()
        self._jobs: dict[str, Job] = {}
        self._running: str | None = None  # the key of the job running
        self._side: threading.Thread | None = None
        self._thread: threading.Thread | None = None
        self._closed = False
        #: Jobs that raised (logged as errors) since the writer was made.
        self.failures = 0

    def put(self, key: str, job: Job) -> None:
        """Queue ``job`` as the next write of ``key``, replacing one not started yet."""
        with self._cond:
            if not self._closed:
                self._jobs.pop(key, None)  # the newest goes last, in order of the calls
                self._jobs[key] = job
                if self._thread is None:
                    self._thread = threading.Thread(
                        target=self._loop, name=f"actormem-journal-views:{self.label}", daemon=True
                    )
                    self._thread.start()
                self._cond.notify_all()
                return
        self._run(key, job)  # closed: on the caller's thread

    def pending(self, key: str) -> bool:
        """Whether a job of ``key`` is queued (not started yet)."""
        with self._cond:
            return key in self._jobs

    def start_side(self, job: Job) -> bool:
        """Run ``job`` on the side thread unless one is running; False when one is."""
        with self._cond:
            if self._side is not None:
                return False
            if self._closed:
                side = None
            else:
                side = threading.Thread(
                    target=self._side_main,
                    args=(job,),
                    name=f"actormem-journal-compact:{self.label}",
                    daemon=True,
                )
                self._side = side
        if side is None:
            self._run("compaction", job)
        else:
            side.start()
        return True

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until no job is queued or running and no side job runs; False on timeout."""
        me = threading.current_thread()

        def busy() -> bool:
            side = self._side is not None and self._side is not me
            return bool(self._jobs) or self._running is not None or side

        with self._cond:
            if me is self._thread:  # a job waiting for itself would never return
                return not busy() or not self._jobs
            return self._wait_while(busy, timeout)

    def flush_key(self, key: str, timeout: float | None = None) -> bool:
        """Wait until no job of ``key`` is queued or running; False on timeout."""
        with self._cond:
            if threading.current_thread() is self._thread:
                return key not in self._jobs
            return self._wait_while(lambda: key in self._jobs or self._running == key, timeout)

    def _wait_while(self, busy: Callable[[], bool], timeout: float | None) -> bool:
        """With ``_cond`` held: mark the wait urgent (the writer skips its delay) and
        wait until ``busy()`` is false; False on timeout."""
        end = None if timeout is None else time.monotonic() + timeout
        self._urgent += 1
        self._cond.notify_all()
        try:
            while busy():
                left = None if end is None else end - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cond.wait(left)
        finally:
            self._urgent -= 1
        return True

    def may_wait(self) -> bool:
        """Whether a job may wait a little: on the writer's thread, with no flush waiting."""
        return threading.current_thread() is self._thread and not self._urgent and not self._closed

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called (jobs now run on the caller's thread)."""
        return self._closed

    def close(self, timeout: float = CLOSE_WAIT) -> bool:
        """Flush, then stop the threads (later jobs run on the caller's thread).

        The writer is marked closed in the same critical section that sees it
        idle, so no job queued by another thread meanwhile runs on the writer's
        thread after close, next to one run on a caller's thread.

        Returns:
            False when queued work was still running after ``timeout`` (logged).
        """
        end = time.monotonic() + timeout
        me = threading.current_thread()
        with self._cond:
            self._urgent += 1
            self._cond.notify_all()
            try:
                while True:
                    if me is self._thread:  # a job closing its own writer
                        done = not self._jobs
                        break
                    done = (
                        not self._jobs
                        and self._running is None
                        and (self._side is None or self._side is me)
                    )
                    left = end - time.monotonic()
                    if done or left <= 0:
                        break
                    self._cond.wait(left)
                self._closed = True
                self._cond.notify_all()
            finally:
                self._urgent -= 1
            thread = self._thread
        if thread is not None and thread is not me:
            thread.join(timeout if done else 0.1)
        if not done:
            log.error("journal.views_not_flushed", label=self.label, seconds=timeout)
        return done

    # -- threads ---------------------------------------------------------------------------------

    def _loop(self) -> None:
        _pace.mark_background()  # the store's and the summarizer's pace() pause here
        while True:
            with self._cond:
                while not self._jobs and not self._closed:
                    self._cond.wait()
                if not self._jobs:
                    return  # closed and nothing left
                end = time.monotonic() + self.delay
                while not self._urgent and not self._closed:
                    left = end - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(left)
            while True:  # everything queued by now, in order
                with self._cond:
                    if not self._jobs:
                        break
                    key = next(iter(self._jobs))
                    job = self._jobs.pop(key)
                    self._running = key
                try:
                    self._run(key, job)
                    _pace.pace()
                finally:
                    with self._cond:
                        self._running = None
                        self._cond.notify_all()
            _pace.rest()  # the queued jobs are done: another thread's turn (see _pace)

    def _side_main(self, job: Job) -> None:
        _pace.mark_background()
        try:
            self._run("compaction", job)
        finally:
            _pace.rest()
            with self._cond:
                self._side = None
                self._cond.notify_all()

    def _run(self, key: str, job: Job) -> None:
        try:
            job()
        except Exception as exc:  # a view is rebuilt from the record; never kill the thread
            self.failures += 1
            log.error("journal.view_write_failed", label=self.label, view=key, error=repr(exc))

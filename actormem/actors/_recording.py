"""The recorder's commands and caller-side accounting (split from ``actors.recorder``).

Why a module of its own: these are the pieces that the *caller's* threads
touch -- the command structs the runtime tells the actor and the
:class:`RecordingTracker` that counts submitted and committed turns,
applies back-pressure and serves ``flush()``.  The actor module keeps the
actor's own pipeline (batching, extraction, reconciliation, commits).
Everything here is re-exported by :mod:`actormem.actors.recorder`; import
it from there.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import msgspec
import structlog

from actormem.actors._supervisor import ActorUnavailableError
from actormem.messages import Msg

__all__ = [
    "CutBatch",
    "EndSession",
    "ProcessBatch",
    "RecordTurn",
    "RecordingError",
    "RecordingTracker",
    "RunMaintenance",
]

log = structlog.get_logger("actormem.actors.recorder")


class RecordingError(RuntimeError):
    """Turns that were submitted could not be committed, or the store refused some of their
    memories (the message, the log and the events say which).

    Attributes:
        report: What ``on_session_end`` did store when the store refused some of the
            session's memories (``{"messages", "summary_id", "promoted", "refused"}``);
            None for ``flush()``.
    """

    report: dict[str, Any] | None = None


# -- commands ----------------------------------------------------------------------------


class RecordTurn(msgspec.Struct, frozen=True, tag=True, tag_field="cmd"):
    """One turn to record (messages already validated by the runtime)."""

    msgs: tuple[Msg, ...]


class ProcessBatch(msgspec.Struct, frozen=True, tag=True, tag_field="cmd"):
    """A batch closed by the Rx buffer: extract, reconcile and commit it."""

    turns: tuple[RecordTurn, ...]


class EndSession(msgspec.Struct, frozen=True, tag=True, tag_field="cmd"):
    """Summarize the short-term memory and promote its important messages."""


class RunMaintenance(msgspec.Struct, frozen=True, tag=True, tag_field="cmd"):
    """Run the configured store maintenance on the namespace."""

    reason: str = "manual"


class CutBatch(msgspec.Struct, frozen=True, tag=True, tag_field="cmd"):
    """Close the open batch now instead of at its timer (``flush`` sends it)."""


# -- caller-side accounting ------------------------------------------------------------------


class RecordingTracker:
    """Counts submitted and committed turns; back-pressure, backlog warnings and flush.

    Thread-safe.  The runtime calls :meth:`submit` per turn on the caller's
    thread, the actor calls :meth:`done` per batch.

    Args:
        max_pending: :meth:`submit` waits while this many turns are pending
            (None: never waits).
        backlog_limit: pending count that triggers ``on_backlog(pending, limit)``
            (again at each doubling; re-armed below half the limit).
        on_backlog: the warning callback (called outside the lock).
    """

    def __init__(
        self,
        *,
        max_pending: int | None,
        backlog_limit: int,
        on_backlog: Callable[[int, int], None] | None = None,
    ) -> None:
        self._cond = threading.Condition()
        self._max = max_pending
        self._limit = backlog_limit
        self._warn_at = backlog_limit
        self._on_backlog = on_backlog
        self.submitted = 0
        self.finished = 0
        self.failed = 0
        self.refused = 0
        self.last_error = ""
        self.last_refusal = ""

    @property
    def pending(self) -> int:
        """Turns submitted and not yet committed (or failed)."""
        return self.submitted - self.finished

    def submit(self, alive: Callable[[], bool] | None = None) -> int:
        """Count one more turn, waiting while ``max_pending`` turns are pending.

        Args:
            alive: checked while waiting; when it returns False the wait ends
                with :class:`ActorUnavailableError`.

        Returns:
            The turn's sequence number (1-based).

        Raises:
            ActorUnavailableError: the recorder stopped while we waited.
        """
        fire = 0
        with self._cond:
            if self._max is not None and self.submitted - self.finished >= self._max:
                log.warning("recorder.backpressure", pending=self.pending, max_pending=self._max)
                while self.submitted - self.finished >= self._max:
                    self._cond.wait(0.25)
                    if alive is not None and not alive():
                        raise ActorUnavailableError("the recorder stopped while record() waited")
            self.submitted += 1
            seq = self.submitted
            pending = self.submitted - self.finished
            if pending >= self._warn_at:
                fire = pending
                self._warn_at *= 2
        if fire and self._on_backlog is not None:
            self._on_backlog(fire, self._limit)
        return seq

    def cancel(self) -> None:
        """Undo one :meth:`submit` whose turn could not be sent."""
        with self._cond:
            self.submitted -= 1
            self._cond.notify_all()

    def done(self, n: int, *, failed: bool = False, error: str = "", refused: int = 0) -> None:
        """``n`` turns were committed (or, with ``failed``, given up).

        ``refused``: memories of those turns the store refused (a turn whose
        memories were written but one of them refused is committed, not
        failed: its other memories are stored); ``error`` then says which.
        """
        with self._cond:
            self.finished += n
            if failed:
                self.failed += n
                self.last_error = error
            if refused:
                self.refused += refused
                self.last_refusal = error
            if self.submitted - self.finished < self._limit // 2:
                self._warn_at = self._limit
            self._cond.notify_all()

    def wait(self, target: int, timeout: float | None) -> bool:
        """Wait until ``target`` turns are finished; False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: self.finished >= target, timeout)

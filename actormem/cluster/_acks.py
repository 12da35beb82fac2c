"""What a handle's returned calls acknowledged, and what a failover must report.

A :class:`~actormem.cluster.RemoteRuntime` keeps, per handle, whether it has
short-term changes not yet saved and recorded turns not yet flushed, and the
incarnation of the agent its last answer came from.  While it has either, its
calls name that incarnation, and a restarted actor refuses them once
(:class:`~actormem.cluster.AgentRestartedError`): the handle never continues
silently after a loss.  Kept apart from the handle's calls because the rules
are subtle -- a flush acknowledges only when no changing call of the handle
ran beside it, and a cancelled or interrupted call counts as run -- and each
has its own test (``tests/cluster/test_cluster_acks.py``).
"""

from __future__ import annotations

import threading
from typing import Any

from actormem.cluster._calls import Call
from actormem.cluster._connect import _ray
from actormem.cluster._spec import AgentSpec

__all__ = ["Acknowledgements"]


class Acknowledgements:
    """The acknowledgement bookkeeping of one handle (a base of ``RemoteRuntime``)."""

    _spec: AgentSpec
    _incarnation: str | None

    def _init_acks(self) -> None:
        #: short-term changes not yet saved (acknowledged by save_session or flush)
        self._unsaved = False
        #: turns handed to the recorder and not yet committed (acknowledged by flush only)
        self._unflushed = False
        #: changing calls (changes/records) sent so far, and those not yet answered: a
        #: flush or save acknowledges only when none ran beside it (``_quiet_since``)
        self._marks = threading.Lock()
        self._sent_changes = 0
        self._open_changes = 0

    @property
    def _dirty(self) -> bool:
        return self._unsaved or self._unflushed

    def _expect(self) -> str | None:
        return self._incarnation if self._dirty else None

    def _change_mark(self) -> tuple[int, int]:
        """``(changing calls sent, changing calls in flight)``, taken before a call is sent."""
        with self._marks:
            return self._sent_changes, self._open_changes

    def _sending(self, call: Call) -> bool:
        """Count a changing call as sent (and in flight); whether it is one."""
        if not (call.changes or call.records):
            return False
        with self._marks:
            self._sent_changes += 1
            self._open_changes += 1
        return True

    def _done(self) -> None:
        with self._marks:
            self._open_changes -= 1

    def _quiet_since(self, mark: tuple[int, int]) -> bool:
        """Whether no changing call of this handle was in flight when ``mark`` was taken
        nor was sent since: then a flush or save answered after it covers every change.

        Another thread's ``add`` may run in the actor after a flush that was sent
        before its answer came back; that flush must not acknowledge it.  When
        one may have, the handle stays unacknowledged (a later flush settles it).
        """
        with self._marks:
            return mark[1] == 0 and self._sent_changes == mark[0]

    def _answered(
        self,
        name: str,
        call: Call,
        incarnation: str,
        args: tuple[Any, ...],
        mark: tuple[int, int],
    ) -> None:
        self._incarnation = incarnation
        if name == "flush":
            if self._quiet_since(mark):
                self._unsaved = self._unflushed = False
        elif name == "save_session" and args[0] in (None, self._spec.session_id):
            self._saved(mark)
        elif not self._spec.write_through:
            self._unsaved = self._unsaved or call.changes
            self._unflushed = self._unflushed or call.records

    def _saved(self, mark: tuple[int, int]) -> None:
        """The agent's own session was saved: the short-term changes before it are
        acknowledged (unless a changing call ran beside the save); turns still being
        recorded are not, until ``flush()`` commits them."""
        if self._quiet_since(mark):
            self._unsaved = False

    def _in_doubt(self, call: Call, exc: BaseException) -> None:
        """A changing call ended without its answer: count it as unacknowledged when
        it may have run in the actor.

        A cancelled ``aadd`` (or a sync call interrupted by ``KeyboardInterrupt``)
        was sent, and the actor carries it out whatever the caller does next; so
        may a call whose answer Ray could not bring back.  Unless a later flush
        or save covers it, a failover that loses it must be reported.  An error
        the runtime itself raised (a refused argument) changed nothing.
        """
        ray = _ray()
        unknown = not isinstance(exc, Exception) or (
            isinstance(exc, ray.exceptions.RayError)
            and not isinstance(exc, ray.exceptions.RayTaskError)
        )
        if unknown and not self._spec.write_through:
            self._unsaved = self._unsaved or call.changes
            self._unflushed = self._unflushed or call.records

    def _restarted(self) -> None:
        """The agent restarted: this handle's unacknowledged changes are gone (it was told)."""
        self._unsaved = self._unflushed = False
        self._incarnation = None

"""The short-term memory actor: the session's message list.

AgentScope's ``InMemoryMemory`` semantics (add, add many, get all, delete
by index or id, clear, size), held by one actor thread so that every change
is serialised without locks.  Every change bumps ``version`` and publishes
an event.  A message whose id is already stored is skipped (AgentScope's
``allow_duplicates=False``), checked in O(1) against an id set.

``ReplaceMessages`` is how the compressor applies its result: it names the
version it read and how many leading messages it replaces.  If only appends
happened since that version, the replacement is applied and the appended
messages are kept; if anything else changed the list (a delete, a clear,
another replacement), it answers -1 and the compressor retries on the new
base.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
import structlog

from actormem.actors._supervisor import SupervisedActor, Supervisor
from actormem.events import (
    AddMessages,
    ClearMessages,
    DeleteMessages,
    Event,
    GetMessages,
    GetSize,
    GetState,
    LoadState,
    MemoryCleared,
    MessageAdded,
    MessagesDeleted,
    MessagesReplaced,
    ReplaceMessages,
)
from actormem.messages import Msg

__all__ = ["SHORT_TERM", "ShortTermMemoryActor", "ShortTermState"]

log = structlog.get_logger(__name__)

#: The actor's name: the ``source`` of its events.
SHORT_TERM = "short_term"


class ShortTermState(msgspec.Struct):
    """The actor's saved state."""

    messages: list[Msg] = msgspec.field(default_factory=list)
    version: int = 0


class ShortTermMemoryActor(SupervisedActor):
    """Holds the message list; see the module docstring.

    Args:
        supervisor: restarts this actor when a command fails.
        publish: where events go (called on this actor's thread).
        state: the state to start from (after a restart or a load).
    """

    def __init__(
        self,
        supervisor: Supervisor | None,
        publish: Callable[[Event], None],
        state: ShortTermState | None = None,
    ) -> None:
        super().__init__(supervisor)
        self._publish = publish
        st = state or ShortTermState()
        self._msgs: list[Msg] = list(st.messages)
        self._ids: set[str] = {m.id for m in self._msgs}
        self._version = st.version
        # The version of the last change that was not an append.
        self._reshaped_at = st.version

    def restart_state(self) -> ShortTermState:
        return ShortTermState(messages=list(self._msgs), version=self._version)

    def handle(self, cmd: Any) -> Any:
        match cmd:
            case AddMessages(msgs=msgs):
                return self._add(msgs)
            case GetMessages():
                return self._version, list(self._msgs)
            case GetSize():
                return len(self._msgs)
            case DeleteMessages(indices=indices, ids=ids):
                return self._delete(indices, ids)
            case ClearMessages():
                return self._clear()
            case ReplaceMessages():
                return self._replace(cmd)
            case GetState():
                return self.restart_state()
            case LoadState(state=state):
                return self._load(state)
        raise TypeError(f"short-term memory got an unknown command {type(cmd).__name__}")

    def _append(self, msg: Msg) -> bool:
        if msg.id in self._ids:
            return False
        self._msgs.append(msg)
        self._ids.add(msg.id)
        self._version += 1
        return True

    def _add(self, msgs: tuple[Msg, ...]) -> int:
        added = 0
        publish = self._publish
        for m in msgs:
            if self._append(m):
                added += 1
                publish(
                    MessageAdded(
                        source=SHORT_TERM, msg=m, index=len(self._msgs) - 1, version=self._version
                    )
                )
        return added

    def _delete(self, indices: tuple[int, ...], ids: tuple[str, ...]) -> int:
        n = len(self._msgs)
        for i in indices:
            if not -n <= i < n:
                raise IndexError(f"message index {i} out of range (memory holds {n} messages)")
        drop = {i % n for i in indices}
        wanted = set(ids)
        keep: list[Msg] = []
        removed: list[str] = []
        for i, m in enumerate(self._msgs):
            if i in drop or m.id in wanted:
                removed.append(m.id)
            else:
                keep.append(m)
        if not removed:
            return 0
        self._msgs = keep
        self._ids.difference_update(removed)
        self._version += 1
        self._reshaped_at = self._version
        self._publish(MessagesDeleted(source=SHORT_TERM, ids=tuple(removed), version=self._version))
        return len(removed)

    def _clear(self) -> int:
        count = len(self._msgs)
        self._msgs = []
        self._ids = set()
        self._version += 1
        self._reshaped_at = self._version
        self._publish(MemoryCleared(source=SHORT_TERM, count=count, version=self._version))
        return count

    def _replace(self, cmd: ReplaceMessages) -> int:
        if cmd.expected_version < self._reshaped_at or cmd.expected_version > self._version:
            return -1
        if not 0 <= cmd.count <= len(self._msgs):
            return -1
        removed = self._msgs[: cmd.count]
        self._msgs = [*cmd.replacement, *self._msgs[cmd.count :]]
        self._ids = {m.id for m in self._msgs}
        self._version += 1
        self._reshaped_at = self._version
        self._publish(
            MessagesReplaced(
                source=SHORT_TERM,
                removed_ids=tuple(m.id for m in removed),
                added_ids=tuple(m.id for m in cmd.replacement),
                version=self._version,
                reason=cmd.reason,
            )
        )
        return self._version

    def _load(self, state: Any) -> int:
        st = state if isinstance(state, ShortTermState) else msgspec.convert(state, ShortTermState)
        ids = {m.id for m in st.messages}
        if len(ids) != len(st.messages):
            raise ValueError("the short-term state holds two messages with the same id")
        old = [m.id for m in self._msgs]
        self._msgs = list(st.messages)
        self._ids = ids
        # Versions only grow, so a compressor holding an old version retries.
        self._version = max(self._version + 1, st.version)
        self._reshaped_at = self._version
        self._publish(
            MessagesReplaced(
                source=SHORT_TERM,
                removed_ids=tuple(old),
                added_ids=tuple(m.id for m in self._msgs),
                version=self._version,
                reason="state loaded",
            )
        )
        return self._version

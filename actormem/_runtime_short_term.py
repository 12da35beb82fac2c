"""The short-term memory and compressor calls of :class:`~actormem.runtime.MemoryRuntime`.

``add``, ``messages``, ``delete`` and the rest only validate on the caller's
thread and forward one command to the short-term actor (or the AutoContext
compressor); the runtime module keeps the wiring, the recorder calls and the
lifecycle.  A mixin kept apart so ``runtime.py`` stays under the file-size
limit and reads as the wiring.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from actormem._door import check_msg, check_msgs
from actormem._runtime_args import delete_args
from actormem._settings import check_arg
from actormem.actors.autocontext import CompressNow, GetHistory, ReloadOffload
from actormem.events import AddMessages, ClearMessages, DeleteMessages, GetMessages, GetSize
from actormem.messages import MessageError, Msg

if TYPE_CHECKING:
    from actormem.actors._supervisor import Supervisor
    from actormem.compress import CompressionOutcome
    from actormem.models.gate import TurnGate

__all__ = ["ShortTermCalls"]


class ShortTermCalls:
    """The short-term memory reads and writes, and the compressor's calls."""

    max_msg_bytes: int
    turns: TurnGate
    _stm: Supervisor
    _compressor: Supervisor | None
    _closed: bool
    _turn_open: bool
    _last_activity: float

    # -- short-term memory (sync) ---------------------------------------------------

    def add(self, msg: Msg | Sequence[Msg]) -> None:
        """Append a message (or several, in order) to the short-term memory.

        Returns as soon as the message is queued to the actor; the next read
        by the same caller sees it.

        Raises:
            MessageError: the message is malformed or over ``max_msg_bytes``.
        """
        if isinstance(msg, Msg):
            msgs: tuple[Msg, ...] = (check_msg(msg, "messages[0]", max_bytes=self.max_msg_bytes),)
        else:
            msgs = self._check_seq(msg)
        if self._closed:
            raise RuntimeError("the memory runtime is closed")
        self._stm.tell(AddMessages(msgs=msgs))
        self._last_activity = time.monotonic()
        if not self._turn_open and any(m.role == "user" for m in msgs):
            self._turn_open = True
            self.turns.begin()

    def _check_seq(self, msgs: object) -> tuple[Msg, ...]:
        if isinstance(msgs, list | tuple):
            return check_msgs(msgs, max_bytes=self.max_msg_bytes)
        raise MessageError(f"add() takes a Msg or a list of Msg, got {type(msgs).__name__}")

    def add_many(self, msgs: Sequence[Msg]) -> None:
        """Append several messages in order (one command to the actor)."""
        if isinstance(msgs, Msg):
            raise MessageError("add_many() takes a list of Msg; use add() for one message")
        self.add(msgs)

    def messages(self) -> list[Msg]:
        """The current working messages, in order."""
        return list(self._stm.ask(GetMessages())[1])

    def snapshot(self) -> tuple[int, list[Msg]]:
        """The version and the messages, read together."""
        version, msgs = self._stm.ask(GetMessages())
        return int(version), list(msgs)

    def size(self) -> int:
        """How many working messages there are."""
        return int(self._stm.ask(GetSize()))

    def delete(self, index: int | Sequence[int] = (), *, ids: Sequence[str] = ()) -> int:
        """Delete messages by index (negative counts from the end) and/or id.

        Returns:
            How many messages were removed.

        Raises:
            IndexError: an index is out of range (nothing is deleted).
        """
        indices, id_list = delete_args(index, ids)
        return int(self._stm.ask(DeleteMessages(indices=indices, ids=id_list)))

    def clear(self) -> int:
        """Remove every working message; return how many there were."""
        return int(self._stm.ask(ClearMessages()))

    # -- compression ----------------------------------------------------------------

    @property
    def compressor_enabled(self) -> bool:
        """Whether this runtime runs the AutoContext compressor."""
        return self._compressor is not None

    def _need_compressor(self) -> Supervisor:
        if self._compressor is None:
            raise RuntimeError(
                "this runtime has no compressor: create it with MemoryRuntime(autocontext=True)"
            )
        return self._compressor

    def compress_now(self, timeout: float | None = 120.0) -> CompressionOutcome | None:
        """Run a compression pass now if the context is over budget, and wait for it.

        Returns:
            The outcome, or None when the context was within budget.

        Raises:
            ValueError: ``timeout`` is not None or a number of seconds (0 to a week).
        """
        check_arg("MemoryRuntime.compress_now", "timeout", timeout)
        result: CompressionOutcome | None = self._need_compressor().ask(CompressNow(), timeout)
        return result

    def reload(self, offload_id: str) -> list[Msg]:
        """The original messages behind an offload id (from a summary or reference).

        Raises:
            OffloadNotFoundError: no offload has that id.
        """
        return list(self._need_compressor().ask(ReloadOffload(offload_id=offload_id)))

    def history(self) -> list[Msg]:
        """The whole conversation as it was added, compressed parts expanded."""
        if self._compressor is None:
            return self.messages()
        return list(self._compressor.ask(GetHistory()))

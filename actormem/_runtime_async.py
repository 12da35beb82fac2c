"""The asyncio twins of :class:`~actormem.runtime.MemoryRuntime`'s calls.

Each ``a``-prefixed method awaits the same work as its synchronous twin
without blocking the event loop: actor requests through
``asyncio.wrap_future`` of the actor's concurrent future (awaiting a pykka
future would block the loop), blocking store, file or database work in a
worker thread.  A mixin kept apart so ``runtime.py`` reads as the wiring.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from actormem._runtime_args import delete_args
from actormem.events import ClearMessages, DeleteMessages, GetMessages, GetSize
from actormem.messages import MessageError, Msg

if TYPE_CHECKING:
    from actormem.actors._supervisor import Supervisor
    from actormem.actors.recorder import RecordingTracker
    from actormem.compress import CompressionOutcome
    from actormem.journal import DreamReport, NowStatus
    from actormem.recorder import RecorderConfig
    from actormem.store import LogRecord, SearchHit

__all__ = ["AsyncTwins"]


class AsyncTwins:
    """The ``a``-prefixed methods; the runtime supplies the synchronous ones."""

    if TYPE_CHECKING:
        _stm: Supervisor
        _tracker: RecordingTracker
        _recorder_config: RecorderConfig

        def add(self, msg: Msg | Sequence[Msg]) -> None: ...
        def save_session(self, session_id: str) -> Path | str: ...
        def load_session(self, session_id: str) -> bool: ...
        def retrieve(self, query: str, limit: int = 5) -> list[SearchHit]: ...
        def format_for_injection(self, query: str, max_tokens: int = 800) -> str: ...
        def record(self, msgs: Msg | Sequence[Msg]) -> None: ...
        def flush(self, timeout: float | None = 60) -> None: ...
        def call_tool(self, name: str, arguments: Mapping[str, Any]) -> str: ...
        def save_fact(self, key: str, value: str, category: str = "general") -> None: ...
        def get_fact(self, key: str) -> str | None: ...
        def on_session_end(self, timeout: float | None = 120) -> dict[str, Any]: ...
        def on_idle(self, timeout: float | None = 120) -> dict[str, Any]: ...
        def on_turn_end(self) -> None: ...
        def snapshot(self) -> tuple[int, list[Msg]]: ...
        def compress_now(self, timeout: float | None = 120.0) -> CompressionOutcome | None: ...
        def reload(self, offload_id: str) -> list[Msg]: ...
        def history(self) -> list[Msg]: ...
        def context_reload(self, offload_id: str) -> str: ...
        def close(self, timeout: float | None = 120) -> None: ...
        def update_now(
            self,
            objective: str,
            next_steps: Sequence[str] = (),
            *,
            state: str = "in_flight",
            note: str = "",
            also_log: Sequence[tuple[str, str, dict[str, Any]]] = (),
            sync: bool = True,
        ) -> NowStatus: ...
        def sync_journal(self) -> None: ...
        def now(self) -> NowStatus: ...
        def log(self, entry_type: str, content: str, **metadata: Any) -> LogRecord: ...
        def log_many(
            self, entries: Sequence[tuple[str, str, dict[str, Any]]]
        ) -> list[LogRecord]: ...
        def working_memory(self, max_tokens: int | None = None) -> str: ...
        def dream(
            self, lookback_days: int | None = None, *, force: bool = False
        ) -> DreamReport: ...

    @classmethod
    async def aopen(cls, *args: Any, **kwargs: Any) -> Self:
        """Build the runtime in a worker thread: ``async with await MemoryRuntime.aopen(...)``.

        Takes the constructor's arguments.  Opening a store reads its file,
        checks or rebuilds its index and starts the actors; built on the event
        loop (``async with MemoryRuntime(...)``) that blocks the loop for as
        long (``bench_runtime``'s loop-lag table: a 169 ms tick against 25 ms
        when built in a thread, medians of 7 runs in one run).
        """
        return await asyncio.to_thread(lambda: cls(*args, **kwargs))

    async def aadd(self, msg: Msg | Sequence[Msg]) -> None:
        """Async :meth:`add` (enqueueing never blocks)."""
        self.add(msg)

    async def aadd_many(self, msgs: Sequence[Msg]) -> None:
        """Async :meth:`add_many` (enqueueing never blocks)."""
        if isinstance(msgs, Msg):
            raise MessageError("add_many() takes a list of Msg; use add() for one message")
        self.add(msgs)

    async def asnapshot(self) -> tuple[int, list[Msg]]:
        """Async :meth:`snapshot`."""
        version, msgs = await asyncio.wrap_future(self._stm.request(GetMessages()))
        return int(version), list(msgs)

    async def amessages(self) -> list[Msg]:
        """Async :meth:`messages`."""
        _, msgs = await asyncio.wrap_future(self._stm.request(GetMessages()))
        return list(msgs)

    async def asize(self) -> int:
        """Async :meth:`size`."""
        return int(await asyncio.wrap_future(self._stm.request(GetSize())))

    async def adelete(self, index: int | Sequence[int] = (), *, ids: Sequence[str] = ()) -> int:
        """Async :meth:`delete`."""
        indices, id_list = delete_args(index, ids)
        return int(
            await asyncio.wrap_future(
                self._stm.request(DeleteMessages(indices=indices, ids=id_list))
            )
        )

    async def aclear(self) -> int:
        """Async :meth:`clear`."""
        return int(await asyncio.wrap_future(self._stm.request(ClearMessages())))

    async def asave_session(self, session_id: str) -> Path | str:
        """Async :meth:`save_session` (file or database I/O runs in a worker thread)."""
        return await asyncio.to_thread(self.save_session, session_id)

    async def aload_session(self, session_id: str) -> bool:
        """Async :meth:`load_session` (file I/O runs in a worker thread)."""
        return await asyncio.to_thread(self.load_session, session_id)

    async def aretrieve(self, query: str, limit: int = 5) -> list[SearchHit]:
        """Async :meth:`retrieve` (the search runs in a worker thread)."""
        return await asyncio.to_thread(self.retrieve, query, limit)

    async def aformat_for_injection(self, query: str, max_tokens: int = 800) -> str:
        """Async :meth:`format_for_injection`."""
        return await asyncio.to_thread(self.format_for_injection, query, max_tokens)

    async def arecord(self, msgs: Msg | Sequence[Msg]) -> None:
        """Async :meth:`record`: enqueues at once; waits in a worker thread under back-pressure."""
        limit = self._recorder_config.max_pending
        if limit is not None and self._tracker.pending >= limit:
            await asyncio.to_thread(self.record, msgs)
        else:
            self.record(msgs)

    async def aflush(self, timeout: float | None = 60) -> None:
        """Async :meth:`flush`."""
        await asyncio.to_thread(self.flush, timeout)

    async def acall_tool(self, name: str, arguments: Mapping[str, Any]) -> str:
        """Async :meth:`call_tool` (the tool runs in a worker thread)."""
        return await asyncio.to_thread(self.call_tool, name, arguments)

    async def asave_fact(self, key: str, value: str, category: str = "general") -> None:
        """Async :meth:`save_fact`."""
        await asyncio.to_thread(self.save_fact, key, value, category)

    async def aget_fact(self, key: str) -> str | None:
        """Async :meth:`get_fact`."""
        return await asyncio.to_thread(self.get_fact, key)

    async def aon_session_end(self, timeout: float | None = 120) -> dict[str, Any]:
        """Async :meth:`on_session_end`."""
        return await asyncio.to_thread(self.on_session_end, timeout)

    async def aon_idle(self, timeout: float | None = 120) -> dict[str, Any]:
        """Async :meth:`on_idle`."""
        return await asyncio.to_thread(self.on_idle, timeout)

    async def aon_turn_end(self) -> None:
        """Async :meth:`on_turn_end` (clears in-memory state: never blocks)."""
        self.on_turn_end()

    async def aclose(self, timeout: float | None = 120) -> None:
        """Async :meth:`close` (the recorder's last commit runs in a worker thread)."""
        await asyncio.to_thread(self.close, timeout)

    # -- compression ------------------------------------------------------------------

    async def acompress_now(self, timeout: float | None = 120.0) -> CompressionOutcome | None:
        """Async :meth:`compress_now` (the pass, and a model's summary, in a worker thread)."""
        return await asyncio.to_thread(self.compress_now, timeout)

    async def areload(self, offload_id: str) -> list[Msg]:
        """Async :meth:`reload`."""
        return await asyncio.to_thread(self.reload, offload_id)

    async def ahistory(self) -> list[Msg]:
        """Async :meth:`history`."""
        return await asyncio.to_thread(self.history)

    async def acontext_reload(self, offload_id: str) -> str:
        """Async :meth:`context_reload`."""
        return await asyncio.to_thread(self.context_reload, offload_id)

    # -- journal: each writes to the store and syncs, so in a worker thread -----------

    async def aupdate_now(
        self,
        objective: str,
        next_steps: Sequence[str] = (),
        *,
        state: str = "in_flight",
        note: str = "",
        also_log: Sequence[tuple[str, str, dict[str, Any]]] = (),
        sync: bool = True,
    ) -> NowStatus:
        """Async :meth:`update_now`."""
        return await asyncio.to_thread(
            lambda: self.update_now(
                objective, next_steps, state=state, note=note, also_log=also_log, sync=sync
            )
        )

    async def async_journal(self) -> None:
        """Async :meth:`sync_journal`."""
        await asyncio.to_thread(self.sync_journal)

    async def anow(self) -> NowStatus:
        """Async :meth:`now` (reads NOW.md for a hand edit)."""
        return await asyncio.to_thread(self.now)

    async def alog(self, entry_type: str, content: str, **metadata: Any) -> LogRecord:
        """Async :meth:`log`."""
        return await asyncio.to_thread(lambda: self.log(entry_type, content, **metadata))

    async def alog_many(
        self, entries: Sequence[tuple[str, str, dict[str, Any]]]
    ) -> list[LogRecord]:
        """Async :meth:`log_many`."""
        return await asyncio.to_thread(self.log_many, entries)

    async def aworking_memory(self, max_tokens: int | None = None) -> str:
        """Async :meth:`working_memory`."""
        return await asyncio.to_thread(self.working_memory, max_tokens)

    async def adream(self, lookback_days: int | None = None, *, force: bool = False) -> DreamReport:
        """Async :meth:`dream` (consolidation and the files, in a worker thread)."""
        return await asyncio.to_thread(lambda: self.dream(lookback_days, force=force))

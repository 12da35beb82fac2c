"""MemoryRuntime: starts, wires, supervises and stops the memory actors.

This is the one place that knows the topology.  Today it runs the
short-term memory actor and the event bus; the compressor and the recorder
plug in here as they land.

Threading model (the README says the same):

* Each actor is a pykka thread that owns its state; nothing else touches it.
* ``add`` validates the message on the caller's thread, then enqueues it
  (a ``tell``) and returns; reads are requests answered through a future.
  Everything one caller sends is handled in the order it was sent, so a
  caller reads back what it added, in order.
* Actors publish events on their own thread to the :class:`EventBus`, which
  queues them per subscriber; each subscription has its own delivery thread.
* The ``a``-prefixed methods are the asyncio twins: they await the same
  futures through ``asyncio.wrap_future`` and never block the event loop.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import msgspec
import reactivex
import structlog
from reactivex import abc as rx_abc

from actormem.actors._supervisor import Supervisor
from actormem.actors.autocontext import (
    AUTOCONTEXT,
    AutoContextActor,
    CompressNow,
    CompressorState,
    GetHistory,
    ReloadOffload,
    context_reload_tool,
)
from actormem.actors.short_term import SHORT_TERM, ShortTermMemoryActor, ShortTermState
from actormem.compress import AutoContextConfig, CompressionOutcome, render_transcript
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
    SessionLoaded,
    SessionSaved,
)
from actormem.messages import DEFAULT_MAX_MSG_BYTES, MessageError, Msg, validate_msg
from actormem.models.base import ChatModel, ToolSpec
from actormem.session import DEFAULT_SESSIONS_DIR, JsonSession
from actormem.state import StateError, StateModule
from actormem.streams import EventBus

__all__ = ["RUNTIME", "ActorStateModule", "MemoryRuntime"]

log = structlog.get_logger(__name__)

#: ``source`` of the runtime's own events (session saved/loaded).
RUNTIME = "runtime"


class ActorStateModule(StateModule):
    """The StateModule face of an actor: state is fetched from / sent to its thread.

    Args:
        supervisor: the actor's supervisor.
        state_type: the msgspec Struct of the actor's state (``GetState``
            answers one, ``LoadState`` takes one); JSON decodes straight into it.
        name: the component name.
    """

    def __init__(
        self,
        supervisor: Supervisor,
        state_type: type[msgspec.Struct],
        name: str,
    ) -> None:
        super().__init__()
        self._sup = supervisor
        self._type = state_type
        self._decoder: msgspec.json.Decoder[Any] = msgspec.json.Decoder(state_type)
        self._name = name

    @property
    def component_name(self) -> str:
        return self._name

    def state_dict(self) -> dict[str, Any]:
        state = self._sup.ask(GetState())
        return {f: getattr(state, f) for f in state.__struct_fields__}

    def load_state_dict(self, state: dict[str, Any], strict: bool = True) -> None:
        try:
            decoded = msgspec.convert(state, self._type)
        except msgspec.ValidationError as exc:
            raise StateError(f"{self._name}: invalid state: {exc}") from None
        self._sup.ask(LoadState(state=decoded))

    def load_state_json(self, data: bytes | msgspec.Raw, strict: bool = True) -> None:
        try:
            decoded = self._decoder.decode(data)
        except msgspec.DecodeError as exc:
            raise StateError(f"{self._name}: invalid state: {exc}") from None
        self._sup.ask(LoadState(state=decoded))


class MemoryRuntime(StateModule):
    """An agent's memory: the actors, their event stream and session files.

    Use it as a context manager (sync or async) or call :meth:`close`.

    Args:
        session_dir: folder of JSON session files (default ``sessions/``).
        autocontext: run the AutoContext compressor: True for the default
            budget, or an :class:`~actormem.compress.AutoContextConfig`.
        model: the chat model the compressor summarizes with (the offline
            extractive summarizer when None).
        max_msg_bytes: messages larger than this (JSON) are refused.
        max_restarts: supervised restarts allowed per actor per minute.

    Example::

        with MemoryRuntime() as rt:
            rt.events.subscribe(print)
            rt.add(Msg.user("Hello, I'm Ada."))
            rt.save_session("ada")
    """

    def __init__(
        self,
        *,
        session_dir: str | os.PathLike[str] = DEFAULT_SESSIONS_DIR,
        autocontext: AutoContextConfig | bool = False,
        model: ChatModel | None = None,
        max_msg_bytes: int = DEFAULT_MAX_MSG_BYTES,
        max_restarts: int = 5,
    ) -> None:
        super().__init__()
        self.bus: EventBus = EventBus()
        self.session: JsonSession = JsonSession(session_dir)
        self.max_msg_bytes: int = max_msg_bytes
        self._closed: bool = False
        publish = self.bus.publish
        stm = Supervisor(
            SHORT_TERM,
            lambda sup, state: ShortTermMemoryActor.start(sup, publish, _unwrap(state)),
            publish,
            max_restarts=max_restarts,
        )
        self._stm: Supervisor = stm
        self.short_term = ActorStateModule(stm, ShortTermState, SHORT_TERM)
        self._compressor: Supervisor | None = None
        self._compressor_feed: rx_abc.DisposableBase | None = None
        if autocontext:
            config = (
                autocontext if isinstance(autocontext, AutoContextConfig) else AutoContextConfig()
            )
            comp = Supervisor(
                AUTOCONTEXT,
                lambda sup, state: AutoContextActor.start(sup, publish, stm, config, model, state),
                publish,
                max_restarts=max_restarts,
            )
            self._compressor = comp
            self.autocontext = ActorStateModule(comp, CompressorState, AUTOCONTEXT)
            feed_types = (MessageAdded, MessagesReplaced, MessagesDeleted, MemoryCleared)
            self._compressor_feed = self.bus.observable(
                lambda e: e.source == SHORT_TERM and isinstance(e, feed_types), name=AUTOCONTEXT
            ).subscribe(comp.tell)

    @property
    def component_name(self) -> str:
        return RUNTIME

    # -- streams ------------------------------------------------------------------

    @property
    def events(self) -> reactivex.Observable[Event]:
        """Every event of every actor, as a hot Observable."""
        return self.bus.observable(name="events")

    def stream(self, *sources: str) -> reactivex.Observable[Event]:
        """The events of the named actors only (e.g. ``stream("short_term")``)."""
        wanted = frozenset(sources)
        return self.bus.observable(lambda e: e.source in wanted, name="+".join(sources))

    def subscribe(
        self, on_next: Callable[[Event], Any], *event_types: type[Event]
    ) -> rx_abc.DisposableBase:
        """Call ``on_next`` for every event (or only those of ``event_types``)."""
        types = tuple(event_types)
        accept = (lambda e: isinstance(e, types)) if types else None
        return self.bus.observable(
            accept, name=getattr(on_next, "__name__", "subscriber")
        ).subscribe(on_next)

    # -- short-term memory (sync) ---------------------------------------------------

    def _check(self, msgs: Iterable[object]) -> tuple[Msg, ...]:
        return tuple(validate_msg(m, max_bytes=self.max_msg_bytes) for m in msgs)

    def add(self, msg: Msg | Sequence[Msg]) -> None:
        """Append a message (or several, in order) to the short-term memory.

        Returns as soon as the message is queued to the actor; the next read
        by the same caller sees it.

        Raises:
            MessageError: the message is malformed or over ``max_msg_bytes``.
        """
        if isinstance(msg, Msg):
            msgs: tuple[Msg, ...] = (validate_msg(msg, max_bytes=self.max_msg_bytes),)
        else:
            msgs = self._check_seq(msg)
        if self._closed:
            raise RuntimeError("the memory runtime is closed")
        self._stm.tell(AddMessages(msgs=msgs))

    def _check_seq(self, msgs: object) -> tuple[Msg, ...]:
        if isinstance(msgs, list | tuple):
            return self._check(msgs)
        raise MessageError(f"add() takes a Msg or a list of Msg, got {type(msgs).__name__}")

    def add_many(self, msgs: Sequence[Msg]) -> None:
        """Append several messages in order (one command to the actor)."""
        self._stm.tell(AddMessages(msgs=self._check_seq(msgs)))

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
        indices = (index,) if isinstance(index, int) else tuple(index)
        return int(self._stm.ask(DeleteMessages(indices=indices, ids=tuple(ids))))

    def clear(self) -> int:
        """Remove every working message; return how many there were."""
        return int(self._stm.ask(ClearMessages()))

    # -- compression ----------------------------------------------------------------

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
        """
        result: CompressionOutcome | None = self._need_compressor().ask(CompressNow(), timeout)
        return result

    def reload(self, offload_id: str) -> list[Msg]:
        """The original messages behind an offload id (from a summary or reference).

        Raises:
            OffloadNotFoundError: no offload has that id.
        """
        return list(self._need_compressor().ask(ReloadOffload(offload_id=offload_id)))

    def context_reload(self, offload_id: str) -> str:
        """The ``context_reload`` tool: the originals rendered as a transcript.

        Unknown ids give an error message (for the model) instead of raising.
        """
        try:
            msgs = self.reload(offload_id)
        except KeyError as exc:
            return f"Error: {exc}"
        return f"Original content of {offload_id} ({len(msgs)} message(s)):\n" + render_transcript(
            msgs
        )

    def history(self) -> list[Msg]:
        """The whole conversation as it was added, compressed parts expanded."""
        if self._compressor is None:
            return self.messages()
        return list(self._compressor.ask(GetHistory()))

    def tools(self) -> list[ToolSpec]:
        """The tool definitions the agent should offer the model for this runtime."""
        return [context_reload_tool()] if self._compressor is not None else []

    # -- sessions -------------------------------------------------------------------

    def save_session(self, session_id: str) -> Path:
        """Save the whole runtime state to ``<session_dir>/<session_id>.json`` atomically."""
        t0 = time.perf_counter()
        path = self.session.save(session_id, {RUNTIME: self})
        ms = (time.perf_counter() - t0) * 1e3
        self.bus.publish(
            SessionSaved(
                source=RUNTIME,
                session_id=session_id,
                path=str(path),
                nbytes=path.stat().st_size,
                duration_ms=ms,
            )
        )
        return path

    def load_session(self, session_id: str) -> bool:
        """Restore the runtime from a session; return False if it does not exist.

        Raises:
            SessionError: the file is corrupt, foreign or newer; the runtime is unchanged.
        """
        t0 = time.perf_counter()
        found = self.session.load(session_id, {RUNTIME: self})
        path = self.session.path(session_id)
        self.bus.publish(
            SessionLoaded(
                source=RUNTIME,
                session_id=session_id,
                path=str(path),
                found=found,
                duration_ms=(time.perf_counter() - t0) * 1e3,
            )
        )
        return found

    # -- asyncio twins ------------------------------------------------------------------

    async def aadd(self, msg: Msg | Sequence[Msg]) -> None:
        """Async :meth:`add` (enqueueing never blocks)."""
        self.add(msg)

    async def amessages(self) -> list[Msg]:
        """Async :meth:`messages`."""
        _, msgs = await asyncio.wrap_future(self._stm.request(GetMessages()))
        return list(msgs)

    async def asize(self) -> int:
        """Async :meth:`size`."""
        return int(await asyncio.wrap_future(self._stm.request(GetSize())))

    async def adelete(self, index: int | Sequence[int] = (), *, ids: Sequence[str] = ()) -> int:
        """Async :meth:`delete`."""
        indices = (index,) if isinstance(index, int) else tuple(index)
        return int(
            await asyncio.wrap_future(
                self._stm.request(DeleteMessages(indices=indices, ids=tuple(ids)))
            )
        )

    async def aclear(self) -> int:
        """Async :meth:`clear`."""
        return int(await asyncio.wrap_future(self._stm.request(ClearMessages())))

    async def asave_session(self, session_id: str) -> Path:
        """Async :meth:`save_session` (file I/O runs in a worker thread)."""
        return await asyncio.to_thread(self.save_session, session_id)

    async def aload_session(self, session_id: str) -> bool:
        """Async :meth:`load_session` (file I/O runs in a worker thread)."""
        return await asyncio.to_thread(self.load_session, session_id)

    # -- lifecycle --------------------------------------------------------------------

    @property
    def restart_count(self) -> int:
        """Supervised restarts so far, over every actor."""
        return sum(s.restart_count for s in self._supervisors())

    def _supervisors(self) -> list[Supervisor]:
        return [s for s in (self._stm, self._compressor) if s is not None]

    def _check_keys(self, keys: Any, strict: bool) -> None:
        # Components this runtime does not run (a compressor's state in a session
        # loaded without one) are ignored; its own must be present when strict.
        known = {SHORT_TERM, AUTOCONTEXT}
        unexpected = set(keys) - known
        missing = {SHORT_TERM} - set(keys) if strict else set()
        if unexpected or missing:
            raise StateError(
                f"runtime state keys do not match (missing {sorted(missing)}, "
                f"unexpected {sorted(unexpected)})"
            )

    def close(self) -> None:
        """Stop the actors (after they handle what is queued) and complete the streams."""
        if self._closed:
            return
        self._closed = True
        if self._compressor_feed is not None:
            self._compressor_feed.dispose()
        if self._compressor is not None:
            self._compressor.stop()
        self._stm.stop()
        self.bus.close()

    def __enter__(self) -> MemoryRuntime:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    async def __aenter__(self) -> MemoryRuntime:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        await asyncio.to_thread(self.close)


def _unwrap(state: Any) -> ShortTermState | None:
    if state is None or isinstance(state, ShortTermState):
        return state
    raise TypeError(f"unexpected short-term state {type(state).__name__}")

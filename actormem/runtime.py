"""MemoryRuntime: starts, wires, supervises and stops the memory actors.

This is the one place that knows the topology: the short-term memory
actor, the AutoContext compressor (which watches the short-term stream), the
long-term recorder (fed turns by :meth:`MemoryRuntime.record`, asking the
short-term actor for the session at its end) and the event bus.

Threading model (the README says the same):

* Each actor is a pykka thread that owns its state; nothing else touches it.
* ``add`` validates the message on the caller's thread, then enqueues it
  (a ``tell``) and returns; reads are requests answered through a future.
  Everything one caller sends is handled in the order it was sent, so a
  caller reads back what it added, in order.
* Actors publish events on their own thread to the :class:`EventBus`, which
  queues them per subscriber; each subscription has its own delivery thread.
* The ``a``-prefixed methods are the asyncio twins: they await the same
  futures through ``asyncio.wrap_future`` (or run blocking store calls in a
  worker thread) and never block the event loop.
* Long-term reads (``retrieve``, ``get_fact``) and synchronous writes
  (``save_fact``, the ``record_to_memory`` tool) run on the caller's thread
  against the store, which serialises writers itself; they never wait
  behind a recording batch.  ``record`` only enqueues.

Turns and idleness: a turn is *in flight* from the moment a ``user``
message is added until ``on_turn_end()`` or ``record()`` (of the finished
turn) is called.  Every call into the runtime counts as activity; when there
has been none for ``RecorderConfig.idle_seconds`` and no turn is in flight,
an Rx timer runs ``on_idle`` maintenance once (and again only after new
activity and another quiet period).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import hashlib
import os
import time
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import msgspec
import pykka
import reactivex
import structlog
from reactivex import abc as rx_abc
from reactivex.scheduler import EventLoopScheduler

from actormem.actors._supervisor import ActorUnavailableError, Supervisor
from actormem.actors.autocontext import (
    AUTOCONTEXT,
    AutoContextActor,
    CompressNow,
    CompressorState,
    GetHistory,
    ReloadOffload,
    context_reload_tool,
)
from actormem.actors.recorder import (
    RECORDER,
    CutBatch,
    EndSession,
    RecorderActor,
    RecordingError,
    RecordingTracker,
    RecordTurn,
    RunMaintenance,
)
from actormem.actors.short_term import SHORT_TERM, ShortTermMemoryActor, ShortTermState
from actormem.compress import AutoContextConfig, CompressionOutcome, render_transcript
from actormem.events import (
    AddMessages,
    ClearMessages,
    DeleteMessages,
    Event,
    FactReconciled,
    GetMessages,
    GetSize,
    GetState,
    LoadState,
    MemoryCleared,
    MemoryRecorded,
    MemoryRetrieved,
    MessageAdded,
    MessagesDeleted,
    MessagesReplaced,
    RecordingBacklog,
    SessionLoaded,
    SessionSaved,
)
from actormem.journal import DreamReport, Journal, JournalConfig, NowStatus
from actormem.messages import DEFAULT_MAX_MSG_BYTES, MessageError, Msg, validate_msg
from actormem.models.base import ChatModel, Embedder, ToolSpec
from actormem.models.gate import TurnGate
from actormem.recorder import (
    FACTS_SUFFIX,
    RECORD_TOOL,
    RETRIEVE_TOOL,
    FleetingMemory,
    KeyedFacts,
    LongTermMemoryMode,
    RecorderConfig,
    UnknownToolError,
    format_for_injection,
    parse_record_args,
    parse_retrieve_args,
    record_to_memory_tool,
    render_recorded,
    render_retrieved,
    retrieve_from_memory_tool,
)
from actormem.session import DEFAULT_SESSIONS_DIR, JsonSession, SessionStorage, open_sessions
from actormem.session._common import check_session_dir
from actormem.state import StateError, StateModule
from actormem.store import (
    InvalidMemoryError,
    LogRecord,
    MemoryStore,
    Namespace,
    NewMemory,
    SearchHit,
    open_store,
)
from actormem.streams import EventBus

if TYPE_CHECKING:
    from actormem.ui import UIConfig, UIServer

__all__ = ["DEFAULT_NAMESPACE", "LONG_TERM_FILE", "RUNTIME", "ActorStateModule", "MemoryRuntime"]

log = structlog.get_logger(__name__)

#: ``source`` of the runtime's own events (session saved/loaded).
RUNTIME = "runtime"
#: The namespace of long-term memories when none is given.
DEFAULT_NAMESPACE = Namespace(user_id="default", agent_id="agent")
#: The long-term store file (inside ``session_dir``) when ``long_term`` is set without ``store``.
LONG_TERM_FILE = "long_term.duckdb"
_CONTEXT_RELOAD = "context_reload"
_MAX_RETRIEVE = 1_000


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
        session_dir: folder of JSON session files (default ``sessions/``);
            also the root of the default long-term file and journal folders.
        sessions: where sessions live instead of ``session_dir``: a
            ``postgresql://`` URL (a :class:`~actormem.session.PostgresSession`
            that :meth:`close` closes; several workers can share it), a
            folder, or a session storage object (the caller keeps ownership).
        autocontext: run the AutoContext compressor: True for the default
            budget, or an :class:`~actormem.compress.AutoContextConfig`.
        model: the chat model the compressor summarizes with (the offline
            extractive summarizer when None).
        max_msg_bytes: messages larger than this (JSON) are refused.
        max_restarts: supervised restarts allowed per actor per minute.
        store: the long-term store: a :class:`~actormem.store.MemoryStore`
            (the caller keeps ownership and closes it); a path, which opens
            a :class:`~actormem.store.DuckDBStore` (one process per file);
            or a ``postgresql://`` URL, which opens a ``PostgresStore`` that
            any number of worker processes can share (the ``postgres``
            extra).  A store opened here is closed by :meth:`close`.
            Giving a store turns the recorder on.
        long_term: the long-term memory mode.  None with a store means
            ``STATIC_CONTROL``; a mode without a store opens
            ``<session_dir>/long_term.duckdb``.  Neither: no long-term memory.
        namespace: whose memories these are (default
            ``Namespace(user_id="default", agent_id="agent")``); reads and
            writes never leave it.
        recorder: batching, extraction, promotion and maintenance settings.
        embedder: the embedder of a store opened from a path or URL
            (default: the bundled WordLlama model).
        journal: keep the human-readable memory files (NOW.md, LOG.md, the
            daily journal, MEMORY.md, DREAMS.md) in the namespace's folder:
            True for the defaults (``<session_dir>/memory/<user>/<agent>/``)
            or a :class:`~actormem.journal.JournalConfig`.  Needs long-term
            memory (``store=`` or ``long_term=``).
        ui: serve the memory explorer web page from this agent (live view
            included): True for ``http://127.0.0.1:8765/`` (another free port
            when that one is taken), or a :class:`~actormem.ui.UIConfig`.
            Same as calling :meth:`serve_ui`; needs ``actormem[ui]``.

    ``model`` also extracts and reconciles facts when given; without it the
    offline rule extractor is used.

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
        store: MemoryStore | str | os.PathLike[str] | None = None,
        long_term: LongTermMemoryMode | str | None = None,
        namespace: Namespace | None = None,
        recorder: RecorderConfig | None = None,
        embedder: Embedder | None = None,
        journal: JournalConfig | bool | None = None,
        sessions: str | os.PathLike[str] | SessionStorage | None = None,
        ui: UIConfig | bool | None = None,
    ) -> None:
        super().__init__()
        self._ui: UIServer | None = None
        check_session_dir(session_dir)
        mode, lt_config, ns = _long_term_args(store, long_term, namespace, recorder, embedder)
        journal_config = _journal_args(journal, mode)
        # The store opens before any actor starts, so a bad path leaves nothing running.
        self._store: MemoryStore | None = None
        self._own_store = False
        if mode is not None:
            self._store, self._own_store = _open_store(store, session_dir, embedder)
        self._mode: LongTermMemoryMode | None = mode
        self._namespace: Namespace = ns
        self._recorder_config: RecorderConfig = lt_config
        self.bus: EventBus = EventBus()
        self.session: SessionStorage
        self._own_session = sessions is not None and not isinstance(sessions, SessionStorage)
        try:
            self.session = JsonSession(session_dir) if sessions is None else open_sessions(sessions)
        except BaseException:  # nothing is running yet: leave nothing open either
            if self._own_store and self._store is not None:
                self._store.close()
            raise
        self.max_msg_bytes: int = max_msg_bytes
        self._closed: bool = False
        publish = self.bus.publish
        self.journal: Journal | None = None
        self._journal_feed: rx_abc.DisposableBase | None = None
        if journal_config is not None and self._store is not None:
            try:
                self.journal = Journal(
                    self._store,
                    ns,
                    journal_config,
                    journal_config.folder_root(session_dir),
                    publish=publish,
                    model=model,
                )
            except BaseException:  # nothing is running yet: leave nothing open either
                if self._own_store:
                    self._store.close()
                if self._own_session:
                    self.session.close()
                raise
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
            on_offload = self._offload_to_store if self._store is not None else None
            comp = Supervisor(
                AUTOCONTEXT,
                lambda sup, state: AutoContextActor.start(
                    sup, publish, stm, config, model, state, on_offload
                ),
                publish,
                max_restarts=max_restarts,
            )
            self._compressor = comp
            self.autocontext = ActorStateModule(comp, CompressorState, AUTOCONTEXT)
            feed_types = (MessageAdded, MessagesReplaced, MessagesDeleted, MemoryCleared)
            self._compressor_feed = self.bus.observable(
                lambda e: e.source == SHORT_TERM and isinstance(e, feed_types), name=AUTOCONTEXT
            ).subscribe(comp.tell)
        self.fleeting: FleetingMemory = FleetingMemory()
        self._last_activity: float = time.monotonic()
        self._turn_open: bool = False
        # Background model work (the recorder's) runs between turns and gives way to one.
        self.turns: TurnGate = TurnGate()
        self._idle_ran_for: float = -1.0
        self._failed_seen: int = 0
        self._recorder: Supervisor | None = None
        self._keyed: KeyedFacts | None = None
        self._scheduler: EventLoopScheduler | None = None
        self._tracker: RecordingTracker = RecordingTracker(
            max_pending=lt_config.max_pending,
            backlog_limit=lt_config.backlog_limit,
            on_backlog=lambda pending, limit: publish(
                RecordingBacklog(source=RECORDER, pending=pending, limit=limit)
            ),
        )
        if self._store is not None:
            self._start_recorder(self._store, stm, model, max_restarts)
        if self.journal is not None:
            self._journal_feed = self.bus.observable(self.journal.accept, name="journal").subscribe(
                self.journal.on_recorded
            )
        _OPEN.add(self)
        if ui:
            try:
                self.serve_ui(None if ui is True else ui)
            except BaseException:
                self.close()
                raise

    def _start_recorder(
        self, store: MemoryStore, stm: Supervisor, model: ChatModel | None, max_restarts: int
    ) -> None:
        publish = self.bus.publish
        config, ns, tracker = self._recorder_config, self._namespace, self._tracker
        scheduler = EventLoopScheduler()
        self._scheduler = scheduler
        self._recorder = Supervisor(
            RECORDER,
            lambda sup, state: RecorderActor.start(
                sup,
                publish,
                store=store,
                namespace=ns,
                config=config,
                tracker=tracker,
                scheduler=scheduler,
                stm=stm,
                model=model,
                state=state,
                gate=self.turns,
            ),
            publish,
            max_restarts=max_restarts,
        )
        self._keyed = KeyedFacts(store, ns)
        if config.idle_seconds is not None:
            scheduler.schedule_relative(config.idle_seconds, self._idle_check)

    @property
    def component_name(self) -> str:
        return RUNTIME

    # -- memory explorer ----------------------------------------------------------

    def serve_ui(self, config: UIConfig | None = None, **options: Any) -> UIServer:
        """Serve the memory explorer (store pages plus the live view) on a thread.

        Args:
            config: a :class:`~actormem.ui.UIConfig`; default: 127.0.0.1:8765,
                another free port when that one is taken, read-only.
            **options: fields of ``UIConfig`` to set instead (``port=0``,
                ``allow_edits=True``, ...).

        Returns:
            The running server (``.url``); :meth:`close` stops it.

        Raises:
            UIError: it is already serving, or the address is refused.
        """
        from actormem.ui import UIConfig, UIError, UIServer

        if self._ui is not None:
            raise UIError(f"the memory explorer already serves at {self._ui.url}")
        if config is None:
            config = UIConfig(**{"port_fallback": True, **options})
        elif options:
            config = msgspec.structs.replace(config, **options)
        self._ui = UIServer(self._store, runtime=self, config=config).start()
        return self._ui

    @property
    def ui(self) -> UIServer | None:
        """The memory explorer this runtime serves, if any."""
        return self._ui

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
        self._last_activity = time.monotonic()
        if not self._turn_open and any(m.role == "user" for m in msgs):
            self._turn_open = True
            self.turns.begin()

    def _check_seq(self, msgs: object) -> tuple[Msg, ...]:
        if isinstance(msgs, list | tuple):
            return self._check(msgs)
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
        indices, id_list = _delete_args(index, ids)
        return int(self._stm.ask(DeleteMessages(indices=indices, ids=id_list)))

    def clear(self) -> int:
        """Remove every working message; return how many there were."""
        return int(self._stm.ask(ClearMessages()))

    # -- compression ----------------------------------------------------------------

    def _offload_to_store(self, offload_id: str, originals: tuple[Msg, ...]) -> None:
        """Copy compressed-away messages to the long-term store (searchable, durable)."""
        store = self._store
        if store is None:
            return
        # One offload is one memory: its id follows from the offload id, so a
        # compression repeated after a restart (the session was saved before
        # the offload reached the store, or the process died in between)
        # finds the memory it already wrote instead of adding a second one.
        memory_id = hashlib.sha256(f"{self._namespace.key()}\x00{offload_id}".encode()).hexdigest()[
            :32
        ]
        if store.get(self._namespace, memory_id, include_deleted=True) is not None:
            return
        item = NewMemory(
            content=f"Offloaded conversation {offload_id}:\n{render_transcript(originals)}",
            kind="offload",
            importance=0.3,
            tags=("offload",),
            source_ids=tuple(m.id for m in originals),
            metadata={"offload_id": offload_id, "messages": len(originals)},
            created_at=originals[0].created_at if originals else None,
            id=memory_id,
        )
        try:
            store.add(self._namespace, item)
        except InvalidMemoryError:
            # Another runtime on this namespace wrote the same offload first.
            if store.get(self._namespace, memory_id, include_deleted=True) is None:
                raise

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
        """The tool definitions the agent should offer the model for this runtime.

        ``context_reload`` when the compressor runs; ``record_to_memory`` and
        ``retrieve_from_memory`` in ``AGENT_CONTROL`` and ``BOTH`` modes.
        """
        out: list[ToolSpec] = []
        if self._compressor is not None:
            out.append(context_reload_tool())
        if self._mode is not None and self._mode.agent_tools:
            out.extend((record_to_memory_tool(), retrieve_from_memory_tool()))
        return out

    def call_tool(self, name: str, arguments: Mapping[str, Any]) -> str:
        """Run one of :meth:`tools` and return the text the model reads back.

        Args:
            name: the tool name.
            arguments: its arguments (the decoded JSON object of the call).

        Returns:
            The tool's result text.

        Raises:
            UnknownToolError: (a KeyError) the runtime does not offer ``name``.
            ValueError: the arguments are missing, unknown or mistyped (named).
        """
        handlers = self._tool_handlers()
        handler = handlers.get(name) if isinstance(name, str) else None
        if handler is None:
            offered = ", ".join(sorted(handlers)) or "none"
            hint = ""
            if name in (RECORD_TOOL, RETRIEVE_TOOL):
                mode = self._mode.name if self._mode is not None else "no long-term memory"
                hint = f" (memory tools need AGENT_CONTROL or BOTH mode; this runtime has {mode})"
            raise UnknownToolError(f"unknown tool {name!r}{hint}; this runtime offers: {offered}")
        if not isinstance(arguments, Mapping):
            raise ValueError(
                f"{name}: arguments must be a JSON object, got {type(arguments).__name__}"
            )
        self._last_activity = time.monotonic()
        return handler(arguments)

    def _tool_handlers(self) -> dict[str, Callable[[Mapping[str, Any]], str]]:
        handlers: dict[str, Callable[[Mapping[str, Any]], str]] = {}
        if self._compressor is not None:
            handlers[_CONTEXT_RELOAD] = self._context_reload_tool
        if self._mode is not None and self._mode.agent_tools:
            handlers[RECORD_TOOL] = self._record_tool
            handlers[RETRIEVE_TOOL] = self._retrieve_tool
        return handlers

    def _context_reload_tool(self, arguments: Mapping[str, Any]) -> str:
        missing = {"offload_id"} - set(arguments)
        unknown = set(arguments) - {"offload_id"}
        if missing or unknown:
            raise ValueError(
                f"{_CONTEXT_RELOAD}: missing {sorted(missing)} / unknown {sorted(unknown)} "
                "argument(s); it takes exactly 'offload_id'"
            )
        oid = arguments["offload_id"]
        if not isinstance(oid, str) or not oid:
            raise ValueError(f"{_CONTEXT_RELOAD}: 'offload_id' must be a non-empty string")
        return self.context_reload(oid)

    def _record_tool(self, arguments: Mapping[str, Any]) -> str:
        thinking, items = parse_record_args(arguments)
        store = self._need_store()
        t0 = time.perf_counter()
        meta = {"thinking": thinking[:2_000]} if thinking else {}
        news = [
            NewMemory(
                content=item,
                kind="fact",
                importance=0.7,
                tags=("agent-recorded",),
                metadata=meta,
            )
            for item in items
        ]
        results = store.add_many(self._namespace, news)
        self.bus.publish(
            MemoryRecorded(
                source=RECORDER,
                ids=tuple(r.id for r in results),
                added=sum(1 for r in results if r.op == "ADD"),
                unchanged=sum(1 for r in results if r.op != "ADD"),
                duration_ms=(time.perf_counter() - t0) * 1e3,
            )
        )
        return render_recorded(items, results)

    def _retrieve_tool(self, arguments: Mapping[str, Any]) -> str:
        keywords, limit = parse_retrieve_args(arguments)
        return render_retrieved(keywords, self.retrieve(" ".join(keywords), limit))

    # -- long-term memory -------------------------------------------------------------

    @property
    def long_term_mode(self) -> LongTermMemoryMode | None:
        """The long-term memory mode (None: this runtime has no long-term memory)."""
        return self._mode

    @property
    def store(self) -> MemoryStore | None:
        """The long-term store (None: no long-term memory)."""
        return self._store

    @property
    def namespace(self) -> Namespace:
        """Whose long-term memories this runtime reads and writes."""
        return self._namespace

    @property
    def recorder_config(self) -> RecorderConfig:
        """The recorder's settings."""
        return self._recorder_config

    def _need_store(self) -> MemoryStore:
        if self._store is None:
            raise RuntimeError(
                "this runtime has no long-term memory: create it with "
                "MemoryRuntime(store='memory.duckdb') or long_term=LongTermMemoryMode.BOTH"
            )
        return self._store

    def _need_recorder(self) -> Supervisor:
        self._need_store()
        assert self._recorder is not None
        return self._recorder

    def retrieve(self, query: str, limit: int = 5) -> list[SearchHit]:
        """Search the long-term memory (keyed facts included), best first.

        Runs on the caller's thread; emits ``MemoryRetrieved``.

        Args:
            query: what to look for.
            limit: how many hits at most (1 to 1,000).

        Raises:
            RuntimeError: the runtime has no long-term memory.
            ValueError: ``query`` is not a string or ``limit`` is out of range.
        """
        store = self._need_store()
        if not isinstance(query, str):
            raise ValueError(f"query must be a str, got {type(query).__name__}")
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= _MAX_RETRIEVE:
            raise ValueError(f"limit must be an int from 1 to {_MAX_RETRIEVE}, got {limit!r}")
        self._last_activity = time.monotonic()
        t0 = time.perf_counter()
        hits = store.search(query, self._namespace, limit)
        if self._keyed is not None:
            keyed = store.search(query, self._keyed.namespace, limit)
            if keyed:
                hits = sorted([*hits, *keyed], key=lambda h: -h.score)[:limit]
        ms = (time.perf_counter() - t0) * 1e3
        self.bus.publish(
            MemoryRetrieved(
                source=RECORDER,
                query=query,
                hit_ids=tuple(h.memory.id for h in hits),
                scores=tuple(h.score for h in hits),
                latency_ms=ms,
            )
        )
        return hits

    def format_for_injection(self, query: str, max_tokens: int = 800) -> str:
        """The ``<long_term_memory>`` block for ``query`` within ``max_tokens`` ("" when no hits).

        Retrieves ``RecorderConfig.inject_limit`` memories and keeps the best
        that fit, each with its date and kind.
        """
        hits = self.retrieve(query, self._recorder_config.inject_limit)
        return format_for_injection(hits, max_tokens)

    def record(self, msgs: Msg | Sequence[Msg]) -> None:
        """Submit one turn (its messages, in order) for long-term recording.

        Returns at once: the turn is queued to the recorder, which batches,
        extracts and commits in the background.  It is acknowledged (on disk
        and retrievable) once :meth:`flush` returns.  Only when
        ``RecorderConfig.max_pending`` turns are waiting does this wait for
        room (back-pressure; nothing is dropped).  Ends the turn in flight.

        Raises:
            MessageError: a message is malformed, or ``msgs`` is empty.
            RuntimeError: no long-term memory, or the runtime is closed.
        """
        rec = self._need_recorder()
        msgs_t = (msgs,) if isinstance(msgs, Msg) else msgs
        checked = self._check_seq(msgs_t)
        if not checked:
            raise MessageError("record() needs at least one message")
        if self._closed:
            raise RuntimeError("the memory runtime is closed")
        self._tracker.submit(alive=lambda: rec.alive)
        try:
            rec.tell(RecordTurn(msgs=checked))
        except BaseException:
            self._tracker.cancel()
            raise
        self._turn_open = False
        self.turns.end()
        self._last_activity = time.monotonic()

    def flush(self, timeout: float | None = 60) -> None:
        """Wait until every turn submitted before this call is committed to the store.

        Raises:
            TimeoutError: not everything was committed within ``timeout`` seconds.
            RecordingError: some turns could not be committed since the last flush
                (the events and log say why).
        """
        if self._recorder is None:
            return
        tracker = self._tracker
        target = tracker.submitted
        if tracker.finished < target:
            # Close the open batch now rather than waiting out batch_seconds.
            with contextlib.suppress(ActorUnavailableError):
                self._need_recorder().tell(CutBatch())
        if not tracker.wait(target, timeout):
            raise TimeoutError(
                f"the recorder committed {tracker.finished} of {target} submitted turns "
                f"within {timeout}s ({tracker.pending} pending)"
            )
        if self.journal is not None and not self.journal.sync(timeout if timeout else 60.0):
            log.warning("runtime.journal_behind", reason="daily journal lines still queued")
        failed = tracker.failed
        if failed > self._failed_seen:
            n = failed - self._failed_seen
            self._failed_seen = failed
            raise RecordingError(
                f"{n} turn(s) could not be committed to the long-term store: {tracker.last_error}"
            )

    def recording_stats(self) -> dict[str, int]:
        """Turns submitted, committed (or failed), failed and pending."""
        t = self._tracker
        return {
            "submitted": t.submitted,
            "finished": t.finished,
            "failed": t.failed,
            "pending": t.pending,
        }

    def save_fact(self, key: str, value: str, category: str = "general") -> None:
        """Store an exact fact under ``key`` (a later save replaces it; history is kept).

        Synchronous: when it returns, the fact is on disk.

        Raises:
            ValueError: an argument is empty, too long or not a string.
            RuntimeError: no long-term memory.
        """
        self._need_store()
        assert self._keyed is not None
        self._last_activity = time.monotonic()
        res = self._keyed.save(key, value, category)
        op = {"ADD": "ADD", "UPDATE": "UPDATE"}.get(res.op, "NONE")
        self.bus.publish(
            FactReconciled(source=RECORDER, op=op, memory_id=res.id, new=f"{key}: {value}")
        )

    def get_fact(self, key: str) -> str | None:
        """The exact value saved under ``key`` in this namespace, or None.

        Raises:
            ValueError: ``key`` is empty or not a string.
            RuntimeError: no long-term memory.
        """
        self._need_store()
        assert self._keyed is not None
        self._last_activity = time.monotonic()
        return self._keyed.get(key)

    @property
    def facts(self) -> KeyedFacts:
        """The keyed facts (``items()``, ``history(key)``, ``delete(key)``)."""
        self._need_store()
        assert self._keyed is not None
        return self._keyed

    # -- lifecycle hooks ------------------------------------------------------------------

    def on_turn_end(self) -> None:
        """End the turn: clear the fleeting scratchpad; the idle timer may run again."""
        self.fleeting.clear()
        self._turn_open = False
        self.turns.end()
        self._last_activity = time.monotonic()

    def on_session_end(self, timeout: float | None = 120) -> dict[str, Any]:
        """Flush recording, store a summary of the short-term memory and promote its
        important messages (``metadata["importance"] >= promote_importance`` or
        ``metadata["access_count"] >= promote_access_count``), clear the fleeting tier.

        Returns:
            ``{"messages", "summary_id", "promoted"}`` (empty without long-term memory).
        """
        self.fleeting.clear()
        self._turn_open = False
        self.turns.end()
        self._last_activity = time.monotonic()
        if self._recorder is None:
            return {}
        try:
            self.flush(timeout)
        except RecordingError as exc:
            log.warning("runtime.session_end_flush_failed", error=str(exc))
        report: dict[str, Any] = self._recorder.ask(EndSession(), timeout)
        return report

    def on_idle(self, timeout: float | None = 120) -> dict[str, Any]:
        """Run the store's maintenance now (decay, dedup, consolidation, caps).

        The runtime also runs it by itself after ``RecorderConfig.idle_seconds``
        of quiet when no turn is in flight.

        Returns:
            What each action did (empty without long-term memory).
        """
        if self._recorder is None:
            return {}
        report: dict[str, Any] = self._recorder.ask(RunMaintenance(reason="manual"), timeout)
        if self.journal is not None:
            dream = self._dream_if_due()
            report["dream"] = msgspec.to_builtins(dream) if dream is not None else None
        return report

    def _dream_if_due(self) -> DreamReport | None:
        if self.journal is None:
            return None
        try:
            return self.journal.dream_if_due()
        except Exception as exc:  # a failed dream must not stop maintenance
            log.exception("runtime.dream_failed", error=repr(exc))
            return None

    def _idle_check(self, scheduler: Any, state: Any = None) -> None:
        """Timer callback: run maintenance after a quiet period, then re-arm."""
        idle = self._recorder_config.idle_seconds
        if self._closed or idle is None:
            return
        try:
            quiet = time.monotonic() - self._last_activity
            delay = idle - quiet
            if delay <= 0:
                delay = idle
                stamp = self._last_activity
                if not self._turn_open and self._idle_ran_for != stamp and self._recorder:
                    self._idle_ran_for = stamp
                    self._recorder.tell(RunMaintenance(reason="idle"))
                    self._dream_if_due()
            if not self._closed and self._scheduler is not None:
                self._scheduler.schedule_relative(max(delay, 0.005), self._idle_check)
        except Exception as exc:  # the timer must survive (a stopped recorder at close)
            log.warning("runtime.idle_check_failed", error=repr(exc))

    # -- human-readable memory (journal) ----------------------------------------------

    def _need_journal(self) -> Journal:
        if self.journal is None:
            raise RuntimeError(
                "this runtime keeps no journal: create it with "
                "MemoryRuntime(store=..., journal=True) or journal=JournalConfig(...)"
            )
        return self.journal

    def update_now(
        self,
        objective: str,
        next_steps: Sequence[str] = (),
        *,
        state: str = "in_flight",
        note: str = "",
    ) -> NowStatus:
        """Replace the working status (NOW.md, session state, DuckDB); emits ``NowUpdated``.

        Args:
            objective: what the agent is working on.
            next_steps: the immediate next steps, in order.
            state: ``in_flight``, ``done``, ``error``, ``idle`` (or another word).
            note: a free note (an error, a hint for whoever resumes).

        Raises:
            RuntimeError: the runtime keeps no journal.
            ValueError: an argument has the wrong type.
        """
        self._last_activity = time.monotonic()
        return self._need_journal().update_now(objective, next_steps, state=state, note=note)

    def now(self) -> NowStatus:
        """The working status (a hand edit of NOW.md is imported first).

        Raises:
            RuntimeError: the runtime keeps no journal.
        """
        return self._need_journal().now()

    def log(self, entry_type: str, content: str, **metadata: Any) -> LogRecord:
        """Append a typed entry (TOOL_USE, THOUGHT, USER_FEEDBACK, ERROR, SYSTEM) to the
        activity log: DuckDB first, then LOG.md; past the threshold the log is compacted.

        Raises:
            RuntimeError: the runtime keeps no journal.
            ValueError: an unknown type or empty text.
        """
        self._last_activity = time.monotonic()
        return self._need_journal().log(entry_type, content, **metadata)

    def working_memory(self, max_tokens: int | None = None) -> str:
        """The ``<working_memory>`` block (NOW and the latest LOG entries) for the model,
        within ``max_tokens`` (default ``JournalConfig.context_max_tokens``); "" without a
        journal or when there is nothing to say."""
        if self.journal is None:
            return ""
        return self.journal.context(max_tokens)

    def dream(self, lookback_days: int | None = None, *, force: bool = False) -> DreamReport:
        """Deep dream now: consolidate, rewrite MEMORY.md, add a diary entry to DREAMS.md.

        Idempotent: unchanged input (memories and journal days, by content
        hash) gives a skipped report and writes nothing unless ``force``.

        Raises:
            RuntimeError: the runtime keeps no journal.
        """
        journal = self._need_journal()
        self._last_activity = time.monotonic()
        if self._recorder is not None:
            self.flush()
        return journal.dream(lookback_days, force=force)

    # -- sessions -------------------------------------------------------------------

    def save_session(self, session_id: str) -> Path | str:
        """Save the whole runtime state atomically.

        Returns:
            The file (``<session_dir>/<session_id>.json``) for JSON sessions;
            the location string for PostgreSQL ones.

        Raises:
            SessionError: bad id or state; ``SessionConflictError`` when
                another worker saved the PostgreSQL session meanwhile.
        """
        t0 = time.perf_counter()
        info = self.session.put(session_id, {RUNTIME: self.state_dict()})
        ms = (time.perf_counter() - t0) * 1e3
        self.bus.publish(
            SessionSaved(
                source=RUNTIME,
                session_id=session_id,
                path=info.path,
                nbytes=info.nbytes,
                duration_ms=ms,
            )
        )
        return Path(info.path) if isinstance(self.session, JsonSession) else info.path

    def load_session(self, session_id: str) -> bool:
        """Restore the runtime from a session; return False if it does not exist.

        Raises:
            SessionError: the file is corrupt, foreign or newer; the runtime is unchanged.
        """
        t0 = time.perf_counter()
        found = self.session.load(session_id, {RUNTIME: self})
        self.bus.publish(
            SessionLoaded(
                source=RUNTIME,
                session_id=session_id,
                path=self.session.location(session_id),
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
        indices, id_list = _delete_args(index, ids)
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

    # -- lifecycle --------------------------------------------------------------------

    @property
    def restart_count(self) -> int:
        """Supervised restarts so far, over every actor."""
        return sum(s.restart_count for s in self._supervisors())

    def _supervisors(self) -> list[Supervisor]:
        return [s for s in (self._stm, self._compressor, self._recorder) if s is not None]

    def _check_keys(self, keys: Any, strict: bool) -> None:
        # Components this runtime does not run (a compressor's state in a session
        # loaded without one) are ignored; its own must be present when strict.
        known = {SHORT_TERM, AUTOCONTEXT, "fleeting", "journal"}
        unexpected = set(keys) - known
        missing = {SHORT_TERM} - set(keys) if strict else set()
        if unexpected or missing:
            raise StateError(
                f"runtime state keys do not match (missing {sorted(missing)}, "
                f"unexpected {sorted(unexpected)})"
            )

    def close(self, timeout: float | None = 120) -> None:
        """Flush the recorder, stop the actors (after they handle what is queued),
        complete the streams and close a store the runtime opened itself.

        Args:
            timeout: how long to wait for the recorder's flush.  When the flush
                does not finish in time, stopping the recorder still commits
                everything it was given (its last batch is processed as it
                stops); that stop waits at least ``_STOP_GRACE`` seconds, so a
                short ``timeout`` never drops recorded turns.  If even that is
                exceeded, the error is logged and a store the runtime opened is
                left open for the recorder to finish with.
        """
        if self._closed:
            return
        self._closed = True
        _OPEN.discard(self)
        if self._ui is not None:
            self._ui.stop()
        recorder_stopped = True
        if self._recorder is not None:
            try:
                self.flush(timeout)
            except Exception as exc:  # close anyway; the stop below commits the rest
                log.warning("runtime.close_flush_incomplete", error=str(exc))
            grace = max(timeout, _STOP_GRACE) if timeout is not None else 3600.0
            try:
                self._recorder.stop(timeout=grace)
            except pykka.Timeout:
                recorder_stopped = False
                log.error("runtime.recorder_stop_timeout", seconds=grace)
        if self._scheduler is not None:
            self._scheduler.dispose()
        if self._compressor_feed is not None:
            self._compressor_feed.dispose()
        if self.journal is not None and not self.journal.sync(5.0):
            log.warning("runtime.journal_behind", reason="closing with journal lines queued")
        if self._compressor is not None:
            self._compressor.stop()
        self._stm.stop()
        self.bus.close()
        if self._own_store and self._store is not None and recorder_stopped:
            try:
                self._store.close()
            except Exception as exc:
                log.error("runtime.store_close_failed", error=repr(exc))
        if self._own_session:
            try:
                self.session.close()
            except Exception as exc:
                log.error("runtime.sessions_close_failed", error=repr(exc))

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


#: Least time ``close()`` gives the recorder to commit its last batch as it stops.
_STOP_GRACE = 60.0

#: Runtimes not closed yet.  The actors run on daemon threads, so a program that
#: forgets ``close()`` still exits; this closes them at exit (recorded turns are
#: flushed, an owned store is closed) while those threads are still running.
_OPEN: weakref.WeakSet[MemoryRuntime] = weakref.WeakSet()
_EXIT_TIMEOUT = 30.0


@atexit.register
def _close_open_runtimes() -> None:
    for rt in list(_OPEN):
        try:
            rt.close(timeout=_EXIT_TIMEOUT)
        except Exception as exc:  # exit anyway; say what went wrong
            log.error("runtime.close_at_exit_failed", error=repr(exc))


def _delete_args(index: object, ids: object) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """Check ``delete()``'s arguments: integer indices (not bools) and string ids."""
    raw = (index,) if isinstance(index, int) else index
    if not isinstance(raw, list | tuple) or not all(
        isinstance(i, int) and not isinstance(i, bool) for i in raw
    ):
        raise TypeError(f"delete() takes an int index or a list of ints, got {index!r}")
    if isinstance(ids, str) or not isinstance(ids, list | tuple):
        raise TypeError(f"delete(ids=...) takes a list of message ids, got {ids!r}")
    if not all(isinstance(i, str) for i in ids):
        raise TypeError(f"delete(ids=...) takes strings, got {ids!r}")
    return tuple(raw), tuple(ids)


def _unwrap(state: Any) -> ShortTermState | None:
    if state is None or isinstance(state, ShortTermState):
        return state
    raise TypeError(f"unexpected short-term state {type(state).__name__}")


def _long_term_args(
    store: object,
    long_term: object,
    namespace: object,
    recorder: object,
    embedder: object,
) -> tuple[LongTermMemoryMode | None, RecorderConfig, Namespace]:
    """Check the long-term arguments; return the mode (None: off), config and namespace."""
    if namespace is not None and not isinstance(namespace, Namespace):
        raise TypeError(f"namespace must be an actormem.store.Namespace, got {type(namespace)}")
    if namespace is not None:
        for field, value in namespace.items():
            if "#" in value:
                raise ValueError(
                    f"namespace {field} {value!r}: '#' is reserved (keyed facts live in "
                    f"'<id>{FACTS_SUFFIX}' namespaces, which no runtime may read as its own)"
                )
    if recorder is not None and not isinstance(recorder, RecorderConfig):
        raise TypeError(f"recorder must be a RecorderConfig, got {type(recorder).__name__}")
    if embedder is not None and not isinstance(embedder, Embedder):
        raise TypeError(f"embedder must implement the Embedder protocol, got {type(embedder)}")
    mode: LongTermMemoryMode | None = None
    if long_term is not None:
        if not isinstance(long_term, LongTermMemoryMode | str):
            raise TypeError(
                f"long_term must be a LongTermMemoryMode, got {type(long_term).__name__}"
            )
        mode = LongTermMemoryMode.parse(long_term)
    elif store is not None:
        mode = LongTermMemoryMode.STATIC_CONTROL
    else:
        given = [
            name
            for name, value in (
                ("namespace", namespace),
                ("recorder", recorder),
                ("embedder", embedder),
            )
            if value is not None
        ]
        if given:
            raise ValueError(
                f"{', '.join(given)} only apply to long-term memory: also pass store= "
                "(a path or a MemoryStore) or long_term=LongTermMemoryMode..."
            )
    return mode, recorder or RecorderConfig(), namespace or DEFAULT_NAMESPACE


def _journal_args(journal: object, mode: LongTermMemoryMode | None) -> JournalConfig | None:
    """The journal's config (None: no journal); it needs long-term memory."""
    if journal is None or journal is False:
        return None
    if journal is True:
        config = JournalConfig()
    elif isinstance(journal, JournalConfig):
        config = journal
    else:
        raise TypeError(f"journal must be True or a JournalConfig, got {type(journal).__name__}")
    if mode is None:
        raise ValueError(
            "journal= keeps its record in the long-term store: also pass store= "
            "(a path, a postgresql:// URL or a store) or long_term=LongTermMemoryMode..."
        )
    return config


def _open_store(
    store: object, session_dir: str | os.PathLike[str], embedder: Embedder | None
) -> tuple[MemoryStore, bool]:
    """The store to use and whether the runtime opened it (and so must close it)."""
    if store is None:
        store = Path(session_dir) / LONG_TERM_FILE
    if isinstance(store, str | os.PathLike):
        return open_store(store, embedder=embedder), True
    if isinstance(store, MemoryStore):
        if embedder is not None and embedder is not getattr(store, "embedder", None):
            log.warning(
                "runtime.embedder_ignored",
                reason="embedder= applies only to a store the runtime opens from a path or URL",
            )
        return store, False
    raise TypeError(
        f"store must be a MemoryStore, a path or a postgresql:// URL, got {type(store).__name__}"
    )

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

The calls that only forward to one part live in private mixins beside this
module, so this one reads as the wiring: the short-term memory and
compressor calls (``_runtime_short_term``), the asyncio twins
(``_runtime_async``), the long-term reads and keyed facts
(``_runtime_long_term``), the model's tools (``_runtime_tools``, with the
memory tool handlers in :mod:`actormem.recorder`), the journal calls
(``_runtime_journal``) and the argument checks (``_runtime_args``); what
enters from outside is checked by the door, :mod:`actormem._door`.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import time
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final

import msgspec
import pykka
import reactivex
import structlog
from reactivex import abc as rx_abc
from reactivex.scheduler import EventLoopScheduler

from actormem._door import RUNTIME_SETTINGS, check_settings
from actormem._runtime_args import (
    DEFAULT_NAMESPACE,
    LONG_TERM_FILE,
    journal_args,
    long_term_args,
    open_store,
    unwrap_short_term,
)
from actormem._runtime_async import AsyncTwins
from actormem._runtime_journal import JournalCalls
from actormem._runtime_long_term import LongTermCalls
from actormem._runtime_short_term import ShortTermCalls
from actormem._runtime_tools import ToolCalls
from actormem._settings import check_arg
from actormem.actors._recording import CutBatch
from actormem.actors._state_module import ActorStateModule
from actormem.actors._supervisor import ActorUnavailableError, Supervisor
from actormem.actors.autocontext import (
    AUTOCONTEXT,
    AutoContextActor,
    CompressorState,
)
from actormem.actors.recorder import (
    RECORDER,
    EndSession,
    RecorderActor,
    RecordingError,
    RecordingTracker,
    RecordTurn,
    RunMaintenance,
)
from actormem.actors.short_term import SHORT_TERM, ShortTermMemoryActor, ShortTermState
from actormem.compress import AutoContextConfig
from actormem.events import (
    Event,
    MemoryCleared,
    MessageAdded,
    MessagesDeleted,
    MessagesReplaced,
    RecordingBacklog,
    SessionLoaded,
    SessionSaved,
)
from actormem.journal import DreamReport, Journal, JournalConfig
from actormem.logs import _configure_default
from actormem.messages import DEFAULT_MAX_MSG_BYTES, MessageError, Msg
from actormem.models.base import ChatModel, Embedder
from actormem.models.gate import TurnGate
from actormem.recorder import (
    FleetingMemory,
    KeyedFacts,
    LongTermMemoryMode,
    MemoryToolHandlers,
    RecorderConfig,
)
from actormem.session import (
    DEFAULT_SESSIONS_DIR,
    JsonSession,
    PostgresSession,
    SessionStorage,
    SessionVersions,
    open_sessions,
)
from actormem.session._common import check_session_dir
from actormem.state import StateError, StateModule
from actormem.store import MemoryStore, Namespace
from actormem.streams import EventBus

if TYPE_CHECKING:
    from actormem.ui import UIConfig, UIServer

__all__ = ["DEFAULT_NAMESPACE", "LONG_TERM_FILE", "RUNTIME", "ActorStateModule", "MemoryRuntime"]

#: Key of the runtime's state that records the namespace its long-term memory used.
STATE_NAMESPACE: Final = "namespace"

log = structlog.get_logger(__name__)
_configure_default()  # quiet logging unless the application configured structlog

#: ``source`` of the runtime's own events (session saved/loaded).
RUNTIME = "runtime"


class MemoryRuntime(
    ShortTermCalls, AsyncTwins, LongTermCalls, ToolCalls, JournalCalls, StateModule
):
    """An agent's memory: the actors, their event stream and session files.

    Use it as a context manager (sync or async) or call :meth:`close`.

    Args:
        session_dir: folder of JSON session files (default ``sessions/``);
            also the root of the default long-term file and journal folders.
        sessions: where sessions live instead of ``session_dir``: a
            ``postgresql://`` URL (a :class:`~actormem.session.PostgresSession`
            that :meth:`close` closes; several workers can share it), a
            folder, or a session storage object (the caller keeps ownership;
            several runtimes may share one: each checks its saves against
            the version it loaded itself, kept in ``session_versions``).
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
        check_settings(
            {"max_msg_bytes": max_msg_bytes, "max_restarts": max_restarts},
            RUNTIME_SETTINGS,
            "MemoryRuntime",
        )
        check_session_dir(session_dir)
        mode, lt_config, ns = long_term_args(store, long_term, namespace, recorder, embedder)
        journal_config = journal_args(journal, mode)
        # The store opens before any actor starts, so a bad path leaves nothing running.
        self._store: MemoryStore | None = None
        self._own_store = False
        if mode is not None:
            self._store, self._own_store = open_store(store, session_dir, embedder)
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
        #: The PostgreSQL session versions this runtime loaded or saved: its saves are
        #: checked against them, not against another user of a storage object it was
        #: given.  A storage it opened itself has no other user: the storage's record.
        self.session_versions: SessionVersions = (
            self.session.versions
            if self._own_session and isinstance(self.session, PostgresSession)
            else SessionVersions()
        )
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
            lambda sup, state: ShortTermMemoryActor.start(sup, publish, unwrap_short_term(state)),
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
        self._refused_seen: int = 0
        self._recorder: Supervisor | None = None
        self._keyed: KeyedFacts | None = None
        self._memory_tools: MemoryToolHandlers | None = None
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
        if self._mode is not None and self._mode.agent_tools:
            self._memory_tools = MemoryToolHandlers(store, ns, publish, self.retrieve, RECORDER)
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

    # -- long-term memory -------------------------------------------------------------

    def _need_recorder(self) -> Supervisor:
        self._need_store()
        assert self._recorder is not None
        return self._recorder

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
            ValueError: ``timeout`` is not None or a number of seconds (0 to a week).
        """
        check_arg("MemoryRuntime.flush", "timeout", timeout)
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
        failed, refused = tracker.failed, tracker.refused
        problems: list[str] = []
        if failed > self._failed_seen:
            problems.append(
                f"{failed - self._failed_seen} turn(s) could not be committed to the long-term "
                f"store: {tracker.last_error}"
            )
        if refused > self._refused_seen:
            problems.append(
                f"the store refused {refused - self._refused_seen} memory(ies) of committed "
                f"turns (their other memories were recorded): {tracker.last_refusal}"
            )
        self._failed_seen, self._refused_seen = failed, refused
        if problems:
            raise RecordingError("; and ".join(problems))

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

        Raises:
            RecordingError: the store refused some of the session's memories (a
                value past one of its limits); the others were stored. The error
                names the refused ones and its ``report`` holds the return value
                (with ``"refused"``, their descriptions).
            StoreError: nothing could be stored (the store is down).
            ValueError: ``timeout`` is not None or a number of seconds (0 to a week).
        """
        check_arg("MemoryRuntime.on_session_end", "timeout", timeout)
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
        refused = report.get("refused")
        if refused:
            err = RecordingError(
                f"the store refused {len(refused)} memory(ies) of the session's end "
                f"(the others were recorded): {'; '.join(refused)}"
            )
            err.report = report
            raise err
        return report

    def on_idle(self, timeout: float | None = 120) -> dict[str, Any]:
        """Run the store's maintenance now (decay, dedup, consolidation, caps).

        The runtime also runs it by itself after ``RecorderConfig.idle_seconds``
        of quiet when no turn is in flight.

        Returns:
            What each action did (empty without long-term memory).

        Raises:
            ValueError: ``timeout`` is not None or a number of seconds (0 to a week).
        """
        check_arg("MemoryRuntime.on_idle", "timeout", timeout)
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

    # -- sessions -------------------------------------------------------------------

    def save_session(self, session_id: str) -> Path | str:
        """Save the whole runtime state atomically.

        Returns:
            The file (``<session_dir>/<session_id>.json``) for JSON sessions;
            the location string for PostgreSQL ones.

        Raises:
            SessionError: bad id or state; ``SessionConflictError`` when
                another worker (or another runtime sharing this storage)
                saved the PostgreSQL session since this runtime loaded or
                saved it, or deleted it, or deleted and created it again.
        """
        t0 = time.perf_counter()
        states = {RUNTIME: self.state_dict()}
        if isinstance(self.session, PostgresSession):  # checked against what this runtime loaded
            info = self.session.put(session_id, states, versions=self.session_versions)
        else:
            info = self.session.put(session_id, states)
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

    # -- lifecycle --------------------------------------------------------------------

    @property
    def restart_count(self) -> int:
        """Supervised restarts so far, over every actor."""
        return sum(s.restart_count for s in self._supervisors())

    def _supervisors(self) -> list[Supervisor]:
        return [s for s in (self._stm, self._compressor, self._recorder) if s is not None]

    def state_dict(self) -> dict[str, Any]:
        """The runtime's state; with long-term memory, also the namespace it used
        (``namespace``: its four key fields), so whoever loads the session can tell
        whose agent it was (a cluster agent of another namespace refuses it)."""
        out = super().state_dict()
        if self._mode is not None:
            out[STATE_NAMESPACE] = list(self._namespace.key())
        return out

    def _check_keys(self, keys: Any, strict: bool) -> None:
        # Components this runtime does not run (a compressor's state in a session
        # loaded without one) are ignored; its own must be present when strict.
        # The recorded namespace is information, not state: loading never changes
        # the runtime's own (sessions saved before it was recorded load as before).
        known = {SHORT_TERM, AUTOCONTEXT, "fleeting", "journal", STATE_NAMESPACE}
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

        Raises:
            ValueError: ``timeout`` is not None or a number of seconds (0 to a week);
                the runtime stays open.
        """
        check_arg("MemoryRuntime.close", "timeout", timeout)
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
        if self.journal is not None:
            if not self.journal.sync(5.0):
                log.warning("runtime.journal_behind", reason="closing with journal lines queued")
            self.journal.close()  # NOW.md, LOG.md and a compaction still queued are written
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

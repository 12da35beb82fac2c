"""RemoteRuntime: the handle to an agent's runtime hosted in a Ray actor.

It has the runtime's calls, sync and asyncio (the table in ``_calls``), each
one a round trip to the actor (``ray.get``, or an awaited ``ObjectRef`` for
the ``a``-prefixed twins, so the event loop never blocks).  Errors raised by
the runtime in the actor are raised here as themselves (a ``MessageError``
is a ``MessageError``), not wrapped in Ray's task error.

**Failover.**  When the actor is lost while a call is in flight (its node
died; Ray restarts it elsewhere and it restores itself, see ``_host``):

* a call marked ``retry`` in the table (reads, ``add`` -- deduplicated by
  message id --, ``flush``, ``save_session``, ``save_fact``) is sent again
  to the restarted actor, until ``failover_timeout``;
* any other call raises :class:`AgentRestartedError`: it may or may not
  have taken effect, and it is not sent again -- except when the
  incarnation it was sent to ended by an idle release (a release runs
  between calls, so the call never ran there): then it goes to the
  incarnation that said so, and is sent on only if that one too was
  released, never after a loss that may have run it;
* a handle with unacknowledged changes (short-term changes since its last
  returned ``flush()``/``save_session()``, turns recorded since its last
  ``flush()``) never continues silently on a restarted agent: the actor
  refuses the call -- the session saves and loads of
  :class:`RemoteSessions`, a ``ReActAgent``'s included -- and the handle
  raises :class:`AgentRestartedError` once, then carries on from the
  restored state.

An actor that ended for good (``stop()`` by any handle) is created again,
from its session, by the next call or ``connect`` of any handle -- never by
a subscription to its events (``_events``).  A ``connect`` that meets an
actor ending (released or stopped between Ray's get-or-create and its first
answer) looks it up again (:func:`~actormem.cluster._connect._reach`).
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import reactivex
import structlog
from reactivex import abc as rx_abc
from reactivex.disposable import Disposable

from actormem.cluster import _connect, _stop
from actormem.cluster._acks import Acknowledgements
from actormem.cluster._calls import ASYNC_TWINS, CALLS, HOST_CALLS, NOT_FORWARDED, Call
from actormem.cluster._capacity import wait_started
from actormem.cluster._connect import (
    _MAX_BACKOFF,
    _lost_errors,
    _ray,
    _unwrapped,
    ray_worker_connected,
)
from actormem.cluster._events import EventPump
from actormem.cluster._remote_state import RemoteFleeting, RemoteSessions
from actormem.cluster._spec import (
    RAY_NAMESPACE,
    AgentRestartedError,
    AgentSpec,
    ClusterConfigError,
    ClusterError,
    actor_name,
    check_actor_options,
    check_backends,
    make_spec,
)
from actormem.cluster._wire import pack, unpack, unsendable
from actormem.events import Event
from actormem.runtime import RUNTIME, MemoryRuntime

if TYPE_CHECKING:
    import os

    from actormem.recorder import LongTermMemoryMode, RecorderConfig
    from actormem.store import Namespace

__all__ = ["RemoteJournal", "RemoteRuntime", "RemoteSessions"]

log = structlog.get_logger(__name__)


class RemoteJournal:
    """Stands for the journal of a remote agent: its calls are the handle's
    (``update_now``, ``now``, ``log``, ``log_many``, ``working_memory``, ``dream``)."""

    def __repr__(self) -> str:
        return "RemoteJournal()"


class RemoteRuntime(Acknowledgements):
    """A :class:`~actormem.runtime.MemoryRuntime` hosted in a Ray actor, reached by name.

    Make one with :meth:`connect`; every caller that connects with the same
    namespace and session id reaches the same actor.  See the package
    docstring for what is acknowledged and what a failover does.
    """

    def __init__(
        self, actor: Any, spec: AgentSpec, info: dict[str, Any], connect: dict[str, Any]
    ) -> None:
        self._actor = actor
        self._spec = spec
        self._info = info
        self._connect_args = connect
        self._incarnation: str | None = info["incarnation"]
        self._init_acks()
        self._closed = False
        self._sessions = RemoteSessions(self)

    def __reduce__(self) -> tuple[Any, ...]:
        """A copy for another Ray task, actor or Serve replica (a task's argument,
        ``ray.put``): a new handle on the same agent, through the same Ray actor.

        The copy has sent nothing: what this handle has not had acknowledged
        stays this handle's to report (its own ``flush()`` acknowledges it).
        """
        if self._closed:
            raise ClusterError(
                "a closed RemoteRuntime handle cannot be sent to another process: "
                "send one that is open, or call RemoteRuntime.connect there"
            )
        info = dict(self._info, incarnation=self._incarnation)
        return (RemoteRuntime, (self._actor, self._spec, info, self._connect_args))

    # -- making one ----------------------------------------------------------------

    @classmethod
    def connect(
        cls,
        session_id: str,
        *,
        namespace: Namespace | None = None,
        store: str | os.PathLike[str] | None = None,
        sessions: str | os.PathLike[str] | None = None,
        write_through: bool = False,
        idle_release: float | None = None,
        max_restarts: int = -1,
        failover_timeout: float = 120.0,
        start_timeout: float = 120.0,
        actor_options: Mapping[str, Any] | None = None,
        adopt_session: bool = False,
        **options: Any,
    ) -> RemoteRuntime:
        """Reach the agent's actor, creating it (restored from its session) if needed.

        Needs a connected Ray driver or task (``ray.init(address=...)``).

        Args:
            session_id: the agent's session: the actor restores from it and
                saves to it.
            namespace: whose memories (default ``user_id="default", agent_id="agent"``).
            store: the long-term store: a ``postgresql://`` URL (a DuckDB
                path only on a one-node cluster), or None.
            sessions: the session storage: a ``postgresql://`` URL (a folder
                only on a one-node cluster).
            write_through: acknowledge every call as it returns (the session
                is saved after each short-term change, ``record`` flushes)
                instead of at ``flush()``/``save_session()`` only.
            idle_release: seconds without a call after which the actor saves
                everything and exits (its memory freed); the next call of any
                handle creates it again from its session.  None: never.
                The settings of the caller that created the actor apply.
            max_restarts: Ray restarts of the actor (-1: no limit); a setting
                of the agent, as ``write_through`` (a second connect must ask
                for the same).
            failover_timeout: how long this handle's calls wait for a
                restarted (or re-created, after an idle release) actor, a
                node with room for it included (the handle's own: each
                handle may wait another time).
            start_timeout: how long this connect waits for a node with room
                for a new actor (nodes bounded by Ray resources the agent
                asks for in ``actor_options``; see ``_capacity``); an actor
                that is starting then (its worker process boots, or its
                ``__init__`` runs) is given up to ``STARTING_GRACE`` (300 s)
                more and never removed.
            actor_options: more ``.options()`` of the Ray actor (``num_cpus``,
                ``scheduling_strategy``, ``resources``, ...); not those the
                handle sets (``name``, ``namespace``, ``lifetime``,
                ``get_if_exists``, ``max_restarts``, ``max_task_retries``,
                ``max_concurrency``, ``concurrency_groups``).  Ray checks
                each value here (a negative ``num_cpus`` is refused by name).
                Those of the caller that creates the actor apply.
            adopt_session: take over the agent's own session even when it was
                written outside the cluster (by a local ``MemoryRuntime``)
                without recording whose it is: a runtime without long-term
                memory, or one saved before runtimes recorded their namespace.
                A session whose runtime state records this namespace is taken
                over without it; one recording another namespace never is.
            **options: the other ``MemoryRuntime`` arguments (``autocontext``,
                ``model``, ``recorder``, ``embedder``, ``long_term``, ...);
                they must be picklable.

        Raises:
            ClusterConfigError: settings this cluster cannot keep (a local
                DuckDB file or session folder on a multi-node cluster), an
                ``actor_options`` key the handle sets, or the agent already
                runs with other settings (each one named).
            ClusterError: Ray is not connected, or the actor could not start
                (Ray's error, holding the actor's traceback, is the cause; a
                refusal of the agent's settings is a ClusterConfigError), or
                no node had room for it within ``start_timeout`` (the message
                names what it asks for and what is free; the pending actor is
                removed, so the next connect starts afresh), or it was still
                starting ``STARTING_GRACE`` past it (not removed).
        """
        ray = _ray()
        if not ray.is_initialized():
            raise ClusterError(
                "RemoteRuntime.connect needs a Ray connection: call ray.init(address=...) first"
            )
        for arg, value in (
            ("failover_timeout", failover_timeout),
            ("start_timeout", start_timeout),
        ):
            if (
                not isinstance(value, int | float)
                or isinstance(value, bool)
                or not 0 < value <= 86_400
            ):
                raise ClusterConfigError(
                    f"RemoteRuntime.connect({arg}=...) must be seconds from 0 to a day, "
                    f"got {value!r}"
                )
        spec = make_spec(
            session_id,
            namespace,
            store,
            sessions,
            write_through,
            options,
            idle_release,
            max_restarts=max_restarts,
            adopt_session=adopt_session,
        )
        nodes = sum(1 for n in ray.nodes() if n.get("Alive"))
        check_backends(spec, nodes)
        connect = {
            "max_restarts": max_restarts,
            "failover_timeout": float(failover_timeout),
            "actor_options": check_actor_options(actor_options),
        }
        actor, info = _connect._reach(spec, connect, float(start_timeout))
        return cls(actor, spec, info, connect)

    @classmethod
    async def aconnect(cls, session_id: str, **kwargs: Any) -> RemoteRuntime:
        """Async :meth:`connect` (runs in a worker thread)."""
        return await asyncio.to_thread(lambda: cls.connect(session_id, **kwargs))

    # -- fixed properties (read once at connect) ---------------------------------------

    @property
    def session_id(self) -> str:
        """The agent's session: restored from on (re)start, saved by ``flush``."""
        return self._spec.session_id

    @property
    def namespace(self) -> Namespace:
        """Whose long-term memories the agent reads and writes."""
        ns: Namespace = self._info["namespace"]
        return ns

    @property
    def long_term_mode(self) -> LongTermMemoryMode | None:
        """The agent's long-term memory mode (None: none)."""
        mode: LongTermMemoryMode | None = self._info["long_term_mode"]
        return mode

    @property
    def compressor_enabled(self) -> bool:
        """Whether the agent runs the AutoContext compressor."""
        return bool(self._info["compressor_enabled"])

    @property
    def recorder_config(self) -> RecorderConfig:
        """The recorder's settings."""
        cfg: RecorderConfig = self._info["recorder_config"]
        return cfg

    @property
    def max_msg_bytes(self) -> int:
        """Messages larger than this are refused."""
        return int(self._info["max_msg_bytes"])

    @property
    def write_through(self) -> bool:
        """Whether every returned call is acknowledged (see :meth:`connect`)."""
        return self._spec.write_through

    @property
    def journal(self) -> RemoteJournal | None:
        """A :class:`RemoteJournal` when the agent keeps a journal, else None."""
        return RemoteJournal() if self._info["has_journal"] else None

    @property
    def store(self) -> None:
        """Always None: the store lives in the actor (use ``retrieve``, ``save_fact``...)."""
        return None

    @property
    def component_name(self) -> str:
        """The agent's runtime is component ``runtime`` of its session."""
        return RUNTIME

    @property
    def restart_count(self) -> int:
        """Supervised restarts of the agent's actors (in its current incarnation)."""
        return int(self._call("restart_count"))

    @property
    def session(self) -> RemoteSessions:
        """The agent's session storage, as a ``ReActAgent`` uses it (saves run in the actor)."""
        return self._sessions

    @property
    def fleeting(self) -> RemoteFleeting:
        """The agent's fleeting memory (a per-turn scratchpad saved with the session), as a
        mapping whose every read and write is a call to the actor."""
        return RemoteFleeting(self)

    def __getattr__(self, name: str) -> Any:
        # only for names not found otherwise: say why a runtime member is not here
        why = NOT_FORWARDED.get(name)
        if why is not None:
            raise AttributeError(f"RemoteRuntime has no {name!r}: {why}")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def acknowledged(self) -> bool:
        """Whether this handle has no unacknowledged changes (see :meth:`flush`)."""
        return not self._dirty

    # -- event streams ----------------------------------------------------------------

    @property
    def events(self) -> reactivex.Observable[Event]:
        """Every event of the agent's runtime, as an Observable (long-polled from the actor).

        Each subscription is registered before ``subscribe`` returns; from then
        on nothing is dropped while it stays connected, in the order the
        runtime published.  Delivered on a thread of the subscription's own.
        It completes when the agent is stopped (after its last event) and, at
        once, when the agent's actor is not running (stopped or released: a
        subscription never creates one); it ends with ``EventsLostError`` when
        the actor is lost (``_events``).
        """
        return self._observable(None)

    def stream(self, *sources: str) -> reactivex.Observable[Event]:
        """The events of the named actors only (e.g. ``stream("short_term")``)."""
        wanted = frozenset(sources)
        return self._observable(lambda e: e.source in wanted)

    def subscribe(
        self, on_next: Callable[[Event], Any], *event_types: type[Event]
    ) -> rx_abc.DisposableBase:
        """Call ``on_next`` for every event (or only those of ``event_types``)."""
        types = tuple(event_types)
        accept = (lambda e: isinstance(e, types)) if types else None
        return self._observable(accept).subscribe(on_next)

    def _observable(self, accept: Callable[[Event], bool] | None) -> reactivex.Observable[Event]:
        def start(observer: rx_abc.ObserverBase[Event], scheduler: Any = None) -> Disposable:
            pump = EventPump(self, accept, observer)
            return Disposable(pump.dispose)

        return reactivex.create(start)

    def where(self) -> dict[str, Any]:
        """The Ray node id and process id hosting the agent now, and its incarnation."""
        result: dict[str, Any] = self._attempt(lambda: self._actor.where.remote(), "where")
        return result

    # -- acknowledgement -----------------------------------------------------------------

    def flush(self, timeout: float | None = 60) -> None:
        """Commit every turn recorded so far and save the agent's session.

        When it returns, everything this handle did before it is acknowledged:
        a restarted agent (its node died) starts from exactly this state.

        Raises:
            TimeoutError, RecordingError, ValueError: as ``MemoryRuntime.flush``.
            AgentRestartedError: the agent restarted before this could run.
        """
        self._call("flush", timeout)

    async def aflush(self, timeout: float | None = 60) -> None:
        """Async :meth:`flush`."""
        await self._acall("flush", timeout)

    def save_session(self, session_id: str | None = None) -> Path | str:
        """Save the runtime state (the agent's own session when ``session_id`` is None).

        A returned save of the agent's own session acknowledges every
        short-term change before it (not turns still being recorded: see
        :meth:`flush`).

        Returns:
            As ``MemoryRuntime.save_session``: the file (a ``Path``) for JSON
            sessions (one-node clusters), the location string for PostgreSQL.
        """
        result: Path | str = self._call("save_session", session_id)
        return result

    async def asave_session(self, session_id: str | None = None) -> Path | str:
        """Async :meth:`save_session`."""
        result: Path | str = await self._acall("save_session", session_id)
        return result

    # -- ending ----------------------------------------------------------------------------

    def close(self, timeout: float | None = 120) -> None:
        """Acknowledge everything (:meth:`flush`) and let go of the agent.

        The actor keeps running for other callers; :meth:`stop` ends it.
        """
        if self._closed:
            return
        self.flush(timeout)
        self._closed = True

    async def aclose(self, timeout: float | None = 120) -> None:
        """Async :meth:`close`."""
        if self._closed:
            return
        await self.aflush(timeout)
        self._closed = True

    def stop(self, timeout: float | None = 120) -> None:
        """Flush, save and end the agent's actor for good (the next connect restores it).

        Returns once an incarnation of the agent answered that it saved
        everything (its own state, every handle's changes on it) and ended,
        and no restarted one of the same actor is left: when the node dies
        around the stop, Ray's restart of the agent elsewhere is stopped too
        (one still waiting for a node with room, which never ran, is removed).

        Raises:
            AgentRestartedError: the agent's actor was lost (its node died)
                with this handle's unacknowledged changes before a stop could
                save them: they are lost.  The agent is stopped all the same,
                from its last acknowledged state.
            ClusterError: no incarnation of the agent answered the stop within
                ``failover_timeout`` (it may still be restarting).
        """
        _stop.stop(self, timeout)

    def __enter__(self) -> RemoteRuntime:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    async def __aenter__(self) -> RemoteRuntime:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return (
            f"RemoteRuntime(session_id={self._spec.session_id!r}, "
            f"namespace={self._spec.namespace!r}, write_through={self._spec.write_through})"
        )

    # -- the round trip ----------------------------------------------------------------

    def _get(self, ref: Any) -> Any:
        ray = _ray()
        if not ray_worker_connected():  # ray.get would start a Ray of its own (host network)
            raise ClusterError("this RemoteRuntime's Ray connection is gone (ray.shutdown()?)")
        try:
            return ray.get(ref)
        except ray.exceptions.RayTaskError as exc:
            raise _unwrapped(exc) from None

    def _send(
        self,
        name: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        expect: str | None,
        retry: bool,
    ) -> Any:
        """Send one runtime call, pickled in one argument (``_wire``); its answer is packed too."""
        try:
            payload = pack((name, args, kwargs, expect, retry))
        except Exception as exc:  # refused before it is sent, naming the argument
            raise unsendable(name, args, kwargs, exc) from None
        return self._actor.call_packed.remote(payload)

    def _check_open(self, name: str) -> None:
        if self._closed:
            raise RuntimeError(f"this RemoteRuntime handle is closed ({name}() refused)")

    def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        self._check_open(name)
        call = CALLS[name]
        mark = self._change_mark()
        changing = self._sending(call)
        try:
            inc, result = unpack(self._get(self._send(name, args, kwargs, self._expect(), False)))
        except AgentRestartedError:
            self._restarted()
            raise
        except _lost_errors() as exc:
            inc, result = self._after_loss(name, call, args, kwargs, exc)
        except BaseException as exc:
            if changing:
                self._in_doubt(call, exc)
            raise
        finally:
            if changing:
                self._done()
        self._answered(name, call, inc, args, mark)
        return result

    async def _acall(self, name: str, *args: Any, **kwargs: Any) -> Any:
        self._check_open(name)
        call = CALLS[name]
        ray = _ray()
        mark = self._change_mark()
        changing = self._sending(call)
        try:
            inc, result = unpack(await self._send(name, args, kwargs, self._expect(), False))
        except ray.exceptions.RayTaskError as exc:
            cause = _unwrapped(exc)
            if isinstance(cause, AgentRestartedError):
                self._restarted()
            raise cause from None
        except AgentRestartedError:
            self._restarted()
            raise
        except _lost_errors() as exc:
            inc, result = await asyncio.to_thread(self._after_loss, name, call, args, kwargs, exc)
        except BaseException as exc:
            if changing:
                self._in_doubt(call, exc)
            raise
        finally:
            if changing:
                self._done()
        self._answered(name, call, inc, args, mark)
        return result

    def _after_loss(
        self,
        name: str,
        call: Call,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        exc: BaseException,
    ) -> tuple[str, Any]:
        """The actor was lost during ``name``: resend it to the restarted one, or say so.

        A call that is not safe to repeat is sent again only while the
        incarnation it was sent to is known to have ended by an idle release
        (the release runs between calls: the call never ran there), each
        time to the incarnation that said so.  Lost anywhere else, it may
        have run: :class:`AgentRestartedError`, and it is not sent again.
        """
        if call.retry:
            expect = self._expect()
            result: tuple[str, Any] = unpack(
                self._attempt(lambda: self._send(name, args, kwargs, expect, True), name, first=exc)
            )
            return result
        sent_to = self._incarnation
        deadline = time.monotonic() + float(self._connect_args["failover_timeout"])
        while True:
            answering = self._released_by(sent_to)
            if answering is None or time.monotonic() >= deadline:
                raise self._lost_during(name, exc)
            try:
                once: tuple[str, Any] = unpack(
                    self._get(self._send(name, args, kwargs, self._expect(), False))
                )
            except AgentRestartedError:
                self._restarted()
                raise
            except _lost_errors() as again:
                exc, sent_to = again, answering
                continue
            return once

    def _lost_during(self, name: str, exc: BaseException) -> AgentRestartedError:
        self._restarted()
        return AgentRestartedError(
            f"the agent {self.session_id!r} was lost while {name}() ran "
            f"({type(exc).__name__}); it may or may not have taken effect, and changes "
            "since the last flush()/save_session() may be lost; continue from messages()",
            name,
        )

    def _released_by(self, incarnation: str | None) -> str | None:
        """Whether ``incarnation`` ended by an idle release: the incarnation answering now, if so.

        Then a call that found it gone never ran (the release ran between
        calls and saved everything), so it may be sent to the one answering.
        """
        if incarnation is None:
            return None
        self._reach_again()
        try:
            now, released = self._attempt(lambda: self._actor.released.remote(), "released")
        except ClusterError:
            return None
        return str(now) if incarnation in released else None

    def _attempt(
        self, send: Callable[[], Any], name: str, first: BaseException | None = None
    ) -> Any:
        """Send until the (restarted or re-created) actor answers, within ``failover_timeout``."""
        lost = _lost_errors()
        deadline = time.monotonic() + float(self._connect_args["failover_timeout"])
        pause = 0.02
        last = first
        if last is not None:
            self._reach_again()
        while True:
            try:
                return self._get(self._bounded(send(), deadline, name))
            except AgentRestartedError:
                self._restarted()
                raise
            except lost as exc:
                last = exc
            if time.monotonic() >= deadline:
                self._bounded(None, deadline, name)  # says so if it waits for room
                raise ClusterError(
                    f"the agent {self.session_id!r} did not come back within "
                    f"{self._connect_args['failover_timeout']}s for {name}(): {last}"
                ) from None
            time.sleep(pause)  # Ray gives no event for "restarted"; back off, bounded
            pause = min(pause * 2, _MAX_BACKOFF)
            self._reach_again()

    def _bounded(self, ref: Any, deadline: float, name: str) -> Any:
        """``ref``, once answered or once the actor has a process; by the deadline, a
        :class:`ClusterError` if it still waits for a node with room (``_capacity``).
        With ``ref`` None: only that check, now."""
        what = (
            f"did not come back for {name}() within "
            f"failover_timeout={self._connect_args['failover_timeout']:g}s"
        )
        wait_started(
            ref, self._actor, self._spec, self._connect_args["actor_options"], deadline, what
        )
        return ref

    def _session_op(self, method: str, *args: Any) -> Any:
        """A session save or load of ``RemoteSessions``, checked like a call.

        It names the incarnation this handle has unacknowledged changes on,
        so a restarted agent refuses it (:class:`AgentRestartedError`)
        instead of saving its restored state as if nothing were lost; sent
        again after losing the actor only with that same check.
        """
        self._check_open(method)

        def send() -> Any:
            return getattr(self._actor, method).remote(*args, self._expect())

        try:
            inc, result = self._get(send())
        except AgentRestartedError:
            self._restarted()
            raise
        except _lost_errors() as exc:
            inc, result = self._attempt(send, method, first=exc)
        self._incarnation = inc
        return result

    def _register_events(self) -> tuple[str, int] | None:
        """Register a subscriber with the agent's running actor: ``(id, after)``, or None
        when no actor of the agent runs (stopped, or released idle).

        Looked up by name, never created: a subscription neither brings back an
        agent that was stopped or released nor keeps one.  A restarting actor
        (its node died) is waited for, up to ``failover_timeout``.
        """
        ray = _ray()
        deadline = time.monotonic() + float(self._connect_args["failover_timeout"])
        pause = 0.02
        while True:
            try:
                actor = ray.get_actor(actor_name(self._spec), namespace=RAY_NAMESPACE)
            except ValueError:  # no actor of that name: the agent is not running
                return None
            self._actor = actor
            try:
                registered: tuple[str, int] = self._get(
                    self._bounded(actor.events_register.remote(), deadline, "subscribe")
                )
            except _lost_errors() as exc:  # ending (looked up again) or restarting
                if time.monotonic() >= deadline:
                    raise ClusterError(
                        f"the agent {self.session_id!r} did not come back within "
                        f"{self._connect_args['failover_timeout']}s to subscribe: {exc}"
                    ) from None
                time.sleep(pause)  # Ray gives no event for "restarted"; back off, bounded
                pause = min(pause * 2, _MAX_BACKOFF)
                continue
            return registered

    def _reach_again(self) -> None:
        """Look the actor up again (Ray restarts it; after a stop, this creates it)."""
        try:
            self._actor = _connect._get_or_create(self._spec, self._connect_args)
        except _lost_errors():
            pass  # still restarting: the next attempt looks again


def _forward(name: str) -> Callable[..., Any]:
    def call(self: RemoteRuntime, *args: Any, **kwargs: Any) -> Any:
        return self._call(name, *args, **kwargs)

    return functools.wraps(getattr(MemoryRuntime, name))(call)


def _forward_async(twin: str, name: str) -> Callable[..., Any]:
    async def call(self: RemoteRuntime, *args: Any, **kwargs: Any) -> Any:
        return await self._acall(name, *args, **kwargs)

    return functools.wraps(getattr(MemoryRuntime, twin))(call)


def _call_tool(self: RemoteRuntime, name: str, arguments: Mapping[str, Any]) -> str:
    if not isinstance(arguments, Mapping):
        raise ValueError(f"{name}.arguments must be a JSON object, got {type(arguments).__name__}")
    result: str = self._call("call_tool", name, dict(arguments))
    return result


async def _acall_tool(self: RemoteRuntime, name: str, arguments: Mapping[str, Any]) -> str:
    if not isinstance(arguments, Mapping):
        raise ValueError(f"{name}.arguments must be a JSON object, got {type(arguments).__name__}")
    result: str = await self._acall("call_tool", name, dict(arguments))
    return result


_OWN = {"flush", "save_session", "restart_count", "close", *HOST_CALLS}
for _name in CALLS:
    if _name not in _OWN:
        setattr(RemoteRuntime, _name, _forward(_name))
for _twin, _name in ASYNC_TWINS.items():
    if _name not in _OWN:
        setattr(RemoteRuntime, _twin, _forward_async(_twin, _name))
RemoteRuntime.call_tool = functools.wraps(MemoryRuntime.call_tool)(_call_tool)  # type: ignore[attr-defined]
RemoteRuntime.acall_tool = functools.wraps(MemoryRuntime.acall_tool)(_acall_tool)  # type: ignore[attr-defined]

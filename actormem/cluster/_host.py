"""The Ray actor that hosts one agent's :class:`~actormem.runtime.MemoryRuntime`.

One actor per agent (namespace + session id), named so any caller in the
cluster reaches it, detached so it outlives the caller that created it, and
restarted by Ray on another node when its node dies (``max_restarts``).
A plain class here; ``_handle`` turns it into a Ray actor class, so this
module imports Ray only for ``exit_actor``.

**Restart = restore.**  ``__init__`` (which Ray runs again on a restart)
builds the runtime from the spec and loads the agent's session
(``spec.session_id``) from the shared session storage; the long-term store
is shared too.  So a restarted agent holds exactly what was acknowledged:

* a returned :meth:`save_session` of the agent's own session, or a returned
  :meth:`flush` (which commits the recorded turns *and* saves the session);
* with ``spec.write_through``, every returned call: the calls that change the
  short-term memory save the session before they return, ``record`` flushes.

Everything else since then (short-term changes, turns recorded but not
flushed) is lost with the node.  Each incarnation has its own id, sent with
every answer; a handle that has unacknowledged changes names the
incarnation it expects, and an actor that is another one refuses the call
(:class:`AgentRestartedError`, nothing done), so a handle never mistakes a
restarted agent for the one it was talking to.

**Events**: the runtime's events are kept numbered in an
:class:`~actormem.cluster._events.EventBuffer` that subscribers in other
processes long-poll (``events_poll`` runs in its own concurrency group).

**Idle release** (``spec.idle_release``): after that long without a call,
the actor queues a release to itself (so it runs between calls, never
during one), which flushes, saves the session, closes the runtime and ends
the process.  The session records the released incarnation: a handle whose
changes were on it lost nothing, and the re-created actor accepts it; a
call that was queued behind the release never ran, so the handle sends it
again.


**Fencing.**  Each incarnation takes the session over at start: it loads
it and saves it back at once with ``epoch`` one higher, a save checked
against the version it loaded (PostgreSQL's optimistic check), so no older
incarnation's save can land after it unseen.  A save refused by that check
reads the stored epoch: higher means a newer incarnation owns the agent
(this one is stale: it refuses the call, closes and ends its actor);
otherwise a writer outside the agent saved, and this incarnation saves its
own state (everything it acknowledged) over it.  Every call, and the
session saves and loads of :class:`~actormem.cluster.RemoteSessions`, name
the incarnation their caller has unacknowledged changes on.  JSON
sessions (one-node clusters only) have no version check, so no fencing.

**The store's fence.**  The long-term store is written by the agent's calls
(``save_fact``, ``record_to_memory``...) and by background writers (the
recorder's batches, the compressor's offloads, the journal, access
counters), none of which goes through the session.  So each incarnation
also takes the agent's write fence in a PostgreSQL store
(:mod:`actormem.store._pg_fence`) at its epoch, *before* it saves the
session back: from then on every write transaction of an older
incarnation's store is refused (:class:`~actormem.store.StoreFencedError`),
ordered by PostgreSQL against the take-over, so each either committed
before it (and the new incarnation reads it) or is refused, nothing of it
written.  The epoch is one past both the session's and the store's (a
take-over that died after raising the fence, or a deleted session, leaves
the store's ahead).  A refused write ends the incarnation as a refused
session save does (:meth:`_supersede`): the call that met it, or the next
call after a background writer met it, raises
:class:`AgentRestartedError`.  The recorder neither retries nor splits a
refused batch; a refused offload is logged; refused access counts are
dropped.  A DuckDB store (one-node clusters only: one process holds the
file) has no fence.

Components saved beside the runtime in the agent's session (a
``ReActAgent``'s ``agent`` state) are kept: every save of the session
writes them back as they were last given, so a save by the actor never
drops them.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import msgspec
import structlog

from actormem.cluster._calls import CALLS, HOST_CALLS
from actormem.cluster._events import DRAIN, EventBuffer
from actormem.cluster._host_sessions import OWNER, SessionCalls, _decoded, epoch_of
from actormem.cluster._spec import (
    AgentRestartedError,
    AgentSpec,
    ClusterConfigError,
    ClusterError,
    differing_settings,
)
from actormem.cluster._wire import pack, unpack
from actormem.events import SessionLoaded
from actormem.messages import Msg
from actormem.runtime import RUNTIME, MemoryRuntime
from actormem.session import (
    SessionConflictError,
    SessionError,
    SessionInfo,
)
from actormem.store import StoreFencedError

if TYPE_CHECKING:
    from actormem.store import PostgresStore

__all__ = ["MemoryHost"]

log = structlog.get_logger(__name__)

#: Released incarnations a session remembers.
_KEEP_RELEASED = 16
#: Times a save (or the take-over at start) is tried again after another writer's save.
_CONFLICT_TRIES = 5


def _ray_connected(*, as_actor: bool = False) -> bool:
    """Whether this process is connected to Ray (``as_actor``: as an actor's worker),
    asked without any call that would start Ray: ``get_runtime_context`` runs
    ``ray.init`` when nothing is connected, and that Ray binds the host's external
    interface (a test's in-process host, with ``ray.is_initialized`` stood in for,
    started one that way)."""
    from ray._private import worker

    w = worker.global_worker
    return bool(w.connected) and (not as_actor or w.mode == worker.WORKER_MODE)


def _exit_if_actor() -> None:
    """End this process's actor for good when running as one (Ray does not restart it)."""
    import ray

    if _ray_connected(as_actor=True):
        ray.actor.exit_actor()  # type: ignore[no-untyped-call]


class MemoryHost(SessionCalls):
    """One agent's runtime, served to the handles (run as a Ray actor)."""

    def __init__(self, spec: AgentSpec) -> None:
        self._spec = spec
        self.incarnation = uuid.uuid4().hex
        self._last_call = time.monotonic()
        #: other components of the agent's session (name -> state), written back on every save
        self._extras: dict[str, Any] = {}
        #: incarnations that ended by an idle release (everything saved): their callers lost nothing
        self._released: list[str] = []
        #: this incarnation's fencing epoch: one more than the session's when it took it over
        self._epoch = 0
        #: the newer epoch that took the session over from this incarnation (it then ends)
        self._superseded: int | None = None
        self._closed = False
        #: stop() saved everything and answered: the actor ends at the next call (``exit``)
        self._stopped = False
        self._watch_stop = threading.Event()
        #: the last release was refused because a subscriber was connected
        self._held = False
        kwargs: dict[str, Any] = dict(spec.options)
        if spec.store is not None:
            kwargs["store"] = spec.store
        if spec.sessions is not None:
            kwargs["sessions"] = spec.sessions
        if spec.store is not None or spec.options.get("long_term") is not None:
            kwargs["namespace"] = spec.namespace
        # else short-term memory only: the namespace names the session's owner (below), and
        # the runtime refuses one without long-term memory
        self._rt = MemoryRuntime(**kwargs)
        self._buffer = EventBuffer()
        self._rt.events.subscribe(self._buffer.append)
        try:
            self.restored = self._restore()
        except BaseException:
            self._rt.close()
            raise
        if spec.idle_release is not None:
            threading.Thread(
                target=self._watch_idle, args=(spec.idle_release,), daemon=True, name="idle-release"
            ).start()
        log.info(
            "cluster.agent_started",
            session_id=spec.session_id,
            namespace=spec.namespace.key(),
            incarnation=self.incarnation,
            epoch=self._epoch,
            restored=self.restored,
        )

    def _mine(self) -> list[str]:
        return list(self._spec.namespace.key())

    def _restore(self) -> bool:
        """Load the agent's session and take it over: stamp it with the next epoch.

        The take-over is a save checked against the version just loaded, so
        an older incarnation still writing (a node cut off from the cluster)
        either saved before it (and this one loads that save: it is tried
        again) or finds the newer epoch when its next save is refused.
        """
        sid = self._spec.session_id
        for _ in range(_CONFLICT_TRIES):
            # one read: whose it is checked on the document loaded, before it is applied
            # (never another namespace's state, even for a moment); the version loaded is
            # the one the take-over's save is checked against
            t0 = time.perf_counter()
            found, stored, owner = self._load_checked(
                sid, RUNTIME, strict=True, allow_missing=True, own=True, start=True
            )
            self._rt.bus.publish(
                SessionLoaded(
                    source=RUNTIME,
                    session_id=sid,
                    path=self._rt.session.location(sid),
                    found=found,
                    duration_ms=(time.perf_counter() - t0) * 1e3,
                )
            )
            released = owner.get("released", []) if owner else []
            self._released = [str(r) for r in released if isinstance(r, str)][-_KEEP_RELEASED:]
            fenced = self._fenced_store()
            # past the session's epoch and the store's fence (which a take-over that
            # failed after raising it, or a deleted session, leaves ahead)
            floor = fenced.fence_epoch(self._holder()) if fenced is not None else 0
            self._epoch = max(epoch_of(owner), floor) + 1
            mine = {"namespace": self._mine(), "released": self._released, "epoch": self._epoch}
            self._extras = {
                **{k: v for k, v in stored.items() if k not in (RUNTIME, OWNER)},
                OWNER: mine,
            }
            try:
                if fenced is not None:  # the store first: older incarnations write no more
                    fenced.fence(self._holder(), self._epoch)
                self._rt.session.put(sid, {**self._extras, RUNTIME: self._rt.state_dict()})
            except SessionConflictError as exc:
                log.warning("cluster.takeover_raced", session_id=sid, saved_by=exc.saved_by)
                continue
            except StoreFencedError as exc:  # another incarnation raised it meanwhile
                log.warning("cluster.takeover_raced", session_id=sid, fence=exc.newer)
                continue
            return found
        raise ClusterError(
            f"the agent {sid!r} could not take its session over: it was saved by another "
            f"writer {_CONFLICT_TRIES} times while it loaded"
        )

    def _fenced_store(self) -> PostgresStore | None:
        """The long-term store when it can be fenced (PostgreSQL; DuckDB: one process)."""
        store = self._rt.store
        if store is None or type(store).__name__ != "PostgresStore":
            return None  # (no import: a DuckDB-only agent never loads psycopg)
        from actormem.store._postgres import PostgresStore

        return store if isinstance(store, PostgresStore) else None

    def _holder(self) -> str:
        """This agent's name in the store's write fence (its namespace and session id)."""
        return json.dumps([self._mine(), self._spec.session_id])

    def _store_fenced_out(self) -> int | None:
        """The newer epoch that refused one of this incarnation's store writes, if any."""
        fenced = self._fenced_store()
        return None if fenced is None else fenced.fenced_out

    def _refused_by_store(self, name: str) -> None:
        """After a failed call: when the store refused a write of this incarnation (a
        newer one took the agent over), end as superseded (AgentRestartedError)."""
        newer = self._store_fenced_out()
        if newer is not None and self._superseded is None:
            self._supersede(newer, name)

    # -- what the handle asks ---------------------------------------------------------

    def describe(self, spec: AgentSpec) -> dict[str, Any]:
        """The agent's fixed properties, after checking the caller means this agent.

        Raises:
            ClusterConfigError: the caller's (namespace, session id) is not this
                agent's (two identities whose actor names collide), or the agent
                runs with other settings (``differing_settings``: the message
                names each one).
        """
        self._end_if_stopped()
        mine = self._spec
        if spec.identity() != mine.identity():
            raise ClusterConfigError(
                f"the actor named for {spec.identity()!r} hosts {mine.identity()!r}: refusing "
                "to answer for another namespace"
            )
        differ = differing_settings(spec, mine)
        if differ:
            raise ClusterConfigError(
                f"the agent {mine.session_id!r} of {mine.namespace.key()!r} already runs with "
                f"{', '.join('another ' + d for d in differ)}: connect with the settings it was "
                "created with (or stop() it first)"
            )
        rt = self._rt
        return {
            "incarnation": self.incarnation,
            "restored": self.restored,
            "released": list(self._released),
            "namespace": self._spec.namespace,
            "long_term_mode": rt.long_term_mode,
            "compressor_enabled": rt.compressor_enabled,
            "has_journal": rt.journal is not None,
            "recorder_config": rt.recorder_config,
            "max_msg_bytes": rt.max_msg_bytes,
            "session_location": rt.session.location(self._spec.session_id),
            "write_through": self._spec.write_through,
            "options": sorted(self._spec.options),
        }

    def call(
        self,
        name: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        expect: str | None,
        retry: bool,
    ) -> tuple[str, Any]:
        """Run one runtime call; answer ``(incarnation, result)``.

        Args:
            name: a call of :data:`~actormem.cluster._calls.CALLS`.
            expect: the incarnation the caller has unacknowledged changes on
                (None: any); another one refuses the call, doing nothing.
            retry: the caller sends this again after losing the actor; an
                ``add`` then skips messages (by id) that are already there.

        Raises:
            AgentRestartedError: ``expect`` is not this incarnation.
            AttributeError: ``name`` is not a forwarded call.
        """
        self._last_call = time.monotonic()
        try:
            return self._call(name, args, kwargs, expect, retry)
        except Exception:
            self._refused_by_store(name)
            raise
        finally:
            self._last_call = time.monotonic()  # idle counts from the end of a call

    def call_packed(self, payload: bytes) -> bytes:
        """:meth:`call`, its arguments and its answer pickled (``_wire``): the handle's path."""
        name, args, kwargs, expect, retry = unpack(payload)
        return pack(self.call(name, args, kwargs, expect, retry))

    def _check_expect(self, expect: str | None, name: str) -> None:
        """Refuse a caller with changes on another incarnation (or any caller, once
        superseded: a session save or a store write of this incarnation was refused).

        A call that arrives after :meth:`stop` answered (before the stopping
        handle's ``exit``) ends the actor at once: its caller meets an ended
        actor, as one queued behind the stop did when the stop ended it.
        """
        self._end_if_stopped()
        if self._superseded is None:
            self._refused_by_store(name)  # e.g. a recorder batch refused between calls
        if self._superseded is not None:
            raise AgentRestartedError(
                f"this incarnation of the agent {self._spec.session_id!r} (epoch {self._epoch}) "
                f"was superseded by a newer one (epoch {self._superseded}) and ended; "
                f"{name}() was not run: reach the agent again",
                name,
            )
        if expect is not None and expect != self.incarnation and expect not in self._released:
            raise AgentRestartedError(
                f"the agent {self._spec.session_id!r} restarted from its last acknowledged "
                f"state (incarnation {self.incarnation[:8]}, the caller expected "
                f"{expect[:8]}): its changes since its last flush()/save_session() are lost "
                f"and {name}() was not run; continue from messages()",
                name,
            )

    def _call(
        self,
        name: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        expect: str | None,
        retry: bool,
    ) -> tuple[str, Any]:
        self._check_expect(expect, name)
        spec = CALLS.get(name)
        if spec is None:
            raise AttributeError(f"{name!r} is not a call a remote agent answers")
        rt = self._rt
        if name == "flush":
            rt.flush(*args, **kwargs)
            self._save()
            return self.incarnation, None
        if name == "save_session":
            return self.incarnation, self._save_session(*args, **kwargs)
        if name == "restart_count":
            return self.incarnation, rt.restart_count
        if name == "load_session":
            target = args[0] if len(args) == 1 and not kwargs else kwargs.get("session_id")
            if isinstance(target, str) and len(args) + len(kwargs) == 1:
                if not self._load_session(target):  # absent, or not this namespace's
                    return self.incarnation, False
                if self._spec.write_through:
                    self._save()
                return self.incarnation, True
        if name in HOST_CALLS:
            return self.incarnation, self._fleeting(name, args)
        if retry and name in ("add", "add_many"):
            # sent again after a loss: what the restored state already holds is not added twice
            (msgs,) = (*args, *kwargs.values())  # add(msg) / add_many(msgs): one argument
            args, kwargs = (self._not_yet_added(msgs),), {}
            if not args[0]:
                return self.incarnation, None
        result = getattr(rt, name)(*args, **kwargs)
        if self._spec.write_through:
            if spec.records:
                rt.flush()
            if spec.changes or spec.records:
                self._save()
        return self.incarnation, result

    def _fleeting(self, name: str, args: tuple[Any, ...]) -> Any:
        """The runtime's fleeting memory, for ``handle.fleeting`` (a mapping of the handle)."""
        fleeting = self._rt.fleeting
        if name == "fleeting_get":
            (key,) = args
            if key is None:  # the keys, in order
                return list(fleeting)
            return (True, fleeting[key]) if key in fleeting else (False, None)
        if name == "fleeting_set":
            (items,) = args
            fleeting.update(items)
        else:
            (key,) = args
            if key is None:
                fleeting.clear()
            else:
                del fleeting[key]  # KeyError when missing, as a dict
        if self._spec.write_through:
            self._save()
        return None

    def _not_yet_added(self, msgs: Msg | list[Msg] | tuple[Msg, ...]) -> list[Msg]:
        batch = [msgs] if isinstance(msgs, Msg) else list(msgs)
        present = {m.id for m in self._rt.messages()}
        return [m for m in batch if getattr(m, "id", None) not in present]

    def _save(self) -> str:
        return self._put_own({**self._extras, RUNTIME: self._rt.state_dict()}).path

    def _put_own(self, states: dict[str, Any]) -> SessionInfo:
        """Save the agent's own session, fenced by epoch.

        A save refused by the version check means someone else saved since:
        a newer incarnation (its epoch is higher: this one is stale, refuses
        and ends, see :meth:`_supersede`) or a writer outside the agent (an
        older incarnation cannot: the take-over moved the version past it).
        Then this incarnation is still the agent: its state, which holds
        everything it acknowledged, is saved over the other writer's.
        """
        sid = self._spec.session_id
        storage = self._rt.session
        for _ in range(_CONFLICT_TRIES):
            try:
                return storage.put(sid, states)
            except SessionConflictError as exc:
                conflict = exc
            self._take_stored_version(sid)
            log.warning(
                "cluster.session_saved_over_another_writer",
                session_id=sid,
                saved_by=conflict.saved_by,
                stored_version=conflict.stored_version,
                epoch=self._epoch,
            )
        raise ClusterError(
            f"the agent {sid!r} could not save its session: another writer saved it "
            f"{_CONFLICT_TRIES} times in a row"
        )

    def _take_stored_version(self, sid: str) -> None:
        """After a refused save of the agent's own session: take the stored version (this
        incarnation's state is kept and saved over it) -- unless that very document, read
        once, names a newer epoch of this namespace's agent: then this one is stale and
        ends.  (On two reads, a newer incarnation's take-over between them would have its
        version taken without its epoch seen, and be saved over.)"""
        newer: list[int] = []

        def check(raw: Mapping[str, msgspec.Raw]) -> None:
            # another namespace's agent saved the id after this agent's session was
            # deleted (or a local runtime not known to be this namespace's did): saving
            # over it would overwrite their acknowledged state -- the save is refused
            # (ClusterConfigError, not naming the owner) and nothing is recorded
            owner = self._owner_of(sid, _decoded(raw, RUNTIME))
            if owner is not None:
                newer.append(epoch_of(owner))

        self._storage().load(sid, {}, strict=False, check=check)
        if newer and newer[0] > self._epoch:
            self._supersede(newer[0])

    def _supersede(self, newer: int, name: str = "save") -> None:
        """A newer incarnation took the agent over (its session save, or its store's fence,
        says so): refuse ``name``, end this one (never save again)."""
        self._superseded = newer
        log.error(
            "cluster.incarnation_superseded",
            session_id=self._spec.session_id,
            incarnation=self.incarnation,
            epoch=self._epoch,
            newer_epoch=newer,
        )
        self._closed = True
        self._watch_stop.set()
        try:
            self._rt.close(10)
        except Exception as exc:  # ending anyway
            log.warning("cluster.superseded_close_failed", error=repr(exc))
        _exit_if_actor()
        self._check_expect(None, name)  # not in a Ray actor (tests): raise for the caller

    def where(self) -> dict[str, Any]:
        """The node, process and its resident memory hosting the agent (placement, costs)."""
        self._end_if_stopped()
        import os

        import psutil  # a dependency of Ray
        import ray

        return {
            # outside an actor (a test's host) None: get_runtime_context would start Ray
            "node_id": ray.get_runtime_context().get_node_id() if _ray_connected() else None,
            "pid": os.getpid(),
            "rss_bytes": psutil.Process().memory_info().rss,
            "incarnation": self.incarnation,
            "idle_seconds": time.monotonic() - self._last_call,
        }

    # -- event streams (polled in their own concurrency group) ---------------------------

    def events_register(self) -> tuple[str, int]:
        """A new subscriber: its id and the number its events start after."""
        return self._buffer.register()

    def events_poll(self, sub: str, after: int, wait: float) -> list[tuple[int, Any]]:
        """The events after number ``after`` (long poll; ``(n, None)`` ends a stopped
        agent's stream: see ``_events``)."""
        return self._buffer.poll(sub, after, wait)

    def events_unregister(self, sub: str) -> None:
        """The subscriber is gone."""
        self._buffer.unregister(sub)

    def released(self) -> tuple[str, list[str]]:
        """This incarnation, and those that ended by an idle release (oldest first)."""
        self._end_if_stopped()
        return self.incarnation, list(self._released)

    def _watch_idle(self, seconds: float) -> None:
        """Queue a release to this actor once it has had no call for ``seconds``."""
        period = min(max(seconds / 4, 0.05), 5.0)
        asked = 0.0
        while not self._watch_stop.wait(period):
            idle = time.monotonic() - self._last_call
            # asked again while a subscriber held the agent: it may have gone since
            if idle >= seconds and (asked != self._last_call or self._held):
                asked, self._held = self._last_call, False
                try:
                    import ray

                    if not _ray_connected(as_actor=True):  # never let Ray start one here
                        continue
                    me = ray.get_runtime_context().current_actor
                    me.release_if_idle.remote()
                except Exception as exc:  # the watcher must not die: try again later
                    log.warning("cluster.idle_release_not_queued", error=repr(exc))

    def release_if_idle(self) -> bool:
        """Save everything and end the actor if it is still idle (queued by the watcher).

        Runs between calls like any call, so no call is cut short; one queued
        after it never runs and its handle sends it to the re-created actor.
        A release whose save fails (the database failing over) leaves the agent
        running, not recorded released, and the watcher asks again.
        """
        seconds = self._spec.idle_release
        if seconds is None or time.monotonic() - self._last_call < seconds or self._closed:
            return False
        if self._buffer.connected():  # a subscriber is listening: the agent stays
            self._held = True  # the watcher asks again: released once nobody listens
            return False
        try:
            self._save_all("release")
        except SessionError as exc:  # not saved: it stays, and is asked again
            self._held = True
            log.warning(
                "cluster.idle_release_not_saved", session_id=self._spec.session_id, error=str(exc)
            )
            return False
        log.info("cluster.agent_released", session_id=self._spec.session_id, idle_s=seconds)
        self._close()
        _exit_if_actor()
        return True  # in an actor, not reached: exit_actor raises

    def _save_released(self) -> str:
        """Save the session recording that this incarnation ended with everything saved
        (an idle release or a stop: both run between calls), so a handle with changes
        on it lost nothing and the next incarnation accepts it.

        Recorded here only once that save returned: a failed one (the database
        failing over) leaves the incarnation running and *not* released, so no
        later save persists a record that would make a restarted agent accept
        the changes its handles go on making on it.
        """
        released = [*self._released, self.incarnation][-_KEEP_RELEASED:]
        extras = dict(self._extras)
        if OWNER in extras:  # an agent with a session (the record goes with it)
            extras[OWNER] = {**extras[OWNER], "released": released}
        where = self._put_own({**extras, RUNTIME: self._rt.state_dict()}).path
        self._released, self._extras = released, extras
        return where

    def _close(self, timeout: float | None = 120) -> None:
        self._closed = True
        self._watch_stop.set()
        self._rt.close(timeout)

    def _save_all(self, name: str, timeout: float | None = 120, expect: str | None = None) -> str:
        """Flush and save the session, recording this incarnation as released.

        A superseded incarnation (a newer one took the agent over: its session
        save or one of its store writes was refused) saves nothing and ends
        with :class:`AgentRestartedError`, as any call of it does.
        """
        self._check_expect(expect, name)
        try:
            self._rt.flush(timeout)
            return self._save_released()
        except Exception:
            self._refused_by_store(name)  # the store's fence refused the flush: superseded
            raise

    def shutdown(self, timeout: float | None = 120, expect: str | None = None) -> str:
        """Flush, save the session and close the runtime; answer where it was saved.

        Refused like any call when ``expect`` names another incarnation (its
        caller's unacknowledged changes are not here to save).
        """
        where = self._save_all("shutdown", timeout, expect)
        self._close(timeout)
        return where

    def stop(self, timeout: float | None = 120, expect: str | None = None) -> str:
        """:meth:`shutdown`, then answer: the stopping handle's ``exit`` ends the actor.

        The answer is the stop's acknowledgement -- everything saved, this
        incarnation recorded released -- which the actor's death cannot give
        (a node dying looks the same to the caller), so the actor ends at
        the next call instead: :meth:`exit`, or any other call that comes
        first (its caller meets an ended actor and reaches the agent again).

        The connected subscribers' streams complete first: the buffer ends
        after the runtime's last event, and the stop waits up to ``DRAIN``
        seconds for each subscriber to take what is left (polls run in their
        own concurrency group, beside this call).
        """
        where = self.shutdown(timeout, expect)
        self._buffer.end()
        if not self._buffer.drained(DRAIN):
            log.warning("cluster.subscribers_not_drained", session_id=self._spec.session_id)
        self._stopped = True
        return where

    def exit(self) -> bool:
        """End the actor for good (Ray does not restart it) if this incarnation was
        stopped; False when it was not (a restarted one: the handle stops it first)."""
        if not self._stopped:
            return False
        _exit_if_actor()
        return True  # in an actor, not reached: exit_actor raises

    def _end_if_stopped(self) -> None:
        if self._stopped:
            _exit_if_actor()
            raise ClusterError(f"the agent {self._spec.session_id!r} was stopped")  # not an actor

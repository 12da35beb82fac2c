"""The session calls of the hosting actor: whose a session is, and the ids not the agent's own.

Split from :mod:`actormem.cluster._host` (which keeps the agent's life:
start, take-over, fencing, the forwarded calls, release and stop) because
these calls answer one question the rest does not ask -- may this agent
see or write this session id -- and every one of them must answer it the
same way.  :class:`SessionCalls` is a mixin of
:class:`~actormem.cluster._host.MemoryHost`: the handle's
:class:`~actormem.cluster.RemoteSessions` reaches it through
``session_put``, ``session_load`` and ``session_call``.

**Owners.**  A session id names one agent: every session written through
the cluster keeps its writer's namespace (component ``cluster``, which a
caller cannot set), and an agent of another namespace refuses to start
from it or save over it (:class:`ClusterConfigError`, which does not name
the owner); to its reads (``exists``, ``read``, ``delete``, loads) such a
session is absent, and it lists only its own namespace's sessions.  A
session written outside the cluster (no owner: a local ``MemoryRuntime``)
is this namespace's only when its runtime state records this namespace (a
runtime with long-term memory records the one it used); one that records
none is taken over only as the agent's own session and only when the
caller opted in (``adopt_session=True``); otherwise it is another
namespace's.  The take-over at start stamps it.

**One read.**  Whose a session is, is decided on the document that is then
used -- loaded, answered, deleted -- never on an earlier read: another
namespace's first save of an id can land between any two reads, and would
then be loaded into this agent (or deleted by it).  Loads pass the owner
check to the storage's ``load(check=...)``, which runs it on the document
read before any component is applied; ``read``/``exists`` answer from one
read; a delete checks inside the storage's ``delete(check=...)`` (on
PostgreSQL in the delete's transaction, the row locked).  A save of another
id reads the owner once and is then checked by PostgreSQL's version check
(a save since that read is a conflict, nothing written).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from actormem.cluster._spec import AgentSpec, ClusterConfigError
from actormem.events import SessionLoaded, SessionSaved
from actormem.runtime import RUNTIME, STATE_NAMESPACE, MemoryRuntime
from actormem.session import (
    JsonSession,
    PostgresSession,
    SessionError,
    SessionInfo,
    SessionStorageError,
    validate_session_id,
)

__all__ = ["OWNER", "SessionCalls", "Superseded", "epoch_of"]

#: Session component naming the namespace whose agent the session is: a session
#: id is one PostgreSQL row, so two namespaces must never share one.
OWNER = "cluster"


def epoch_of(owner: dict[str, Any] | None) -> int:
    """The fencing epoch an owner record holds (0: none, or not an integer)."""
    epoch = owner.get("epoch") if owner else None
    return epoch if isinstance(epoch, int) and not isinstance(epoch, bool) else 0


class Superseded(Exception):
    """The agent's own session names a newer epoch than this incarnation's (raised by a
    check, before anything is loaded; the caller ends the incarnation)."""

    def __init__(self, newer: int) -> None:
        super().__init__(newer)
        self.newer = newer


class _Hidden(Exception):
    """To this agent the session is absent: another namespace's, or another id whose
    document cannot be read (whose it is cannot be told)."""


def _decoded(raw: Mapping[str, msgspec.Raw], applied: str | None) -> dict[str, Any]:
    """A stored session's components, decoded; the one a load applies (``applied``)
    only as far as the owner check looks into it (the namespace its runtime recorded)."""
    out: dict[str, Any] = {}
    for name, value in raw.items():
        if name != applied:
            out[name] = msgspec.json.decode(value)
            continue
        try:
            state = msgspec.json.decode(value, type=dict[str, msgspec.Raw])
        except (msgspec.DecodeError, msgspec.ValidationError):  # not an object: records none
            out[name] = None
            continue
        recorded = state.get(STATE_NAMESPACE)
        out[name] = {} if recorded is None else {STATE_NAMESPACE: msgspec.json.decode(recorded)}
    return out


class SessionCalls:
    """Owner checks and the session calls of one agent (a mixin of ``MemoryHost``)."""

    _spec: AgentSpec
    _rt: MemoryRuntime
    incarnation: str
    _epoch: int
    _last_call: float
    #: other components of the agent's session (name -> state), written back on every save
    _extras: dict[str, Any]

    if TYPE_CHECKING:  # MemoryHost's

        def _mine(self) -> list[str]: ...

        def _check_expect(self, expect: str | None, name: str) -> None: ...

        def _end_if_stopped(self) -> None: ...

        def _save(self) -> str: ...

        def _put_own(self, states: dict[str, Any]) -> SessionInfo: ...

        def _supersede(self, newer: int, name: str = "save") -> None: ...

    def _owner_of(self, session_id: str, stored: dict[str, Any]) -> dict[str, Any] | None:
        """The stored session's owner record (None: written outside the cluster, and
        this namespace's: see :meth:`_adoptable`).

        Raises:
            ClusterConfigError: another namespace's agent owns it, or it was
                written outside the cluster and is not known to be this
                namespace's (the message never names whose it is).
        """
        owner = stored.get(OWNER)
        if not isinstance(owner, dict):
            if self._adoptable(session_id, stored):
                return None
            raise ClusterConfigError(
                f"session {session_id!r} was written outside the cluster and is not known to "
                f"be {self._spec.namespace.key()!r}'s: an agent takes over a session a local "
                "MemoryRuntime saved only when its runtime state records this namespace (a "
                "runtime with long-term memory records it), or, for the agent's own session "
                "id, when connected with adopt_session=True; it neither reads nor writes "
                "another namespace's sessions"
            )
        if owner.get("namespace") != self._mine():
            raise ClusterConfigError(
                f"session {session_id!r} belongs to another namespace's agent, not to "
                f"{self._spec.namespace.key()!r}: a session id names one agent, and an agent "
                "neither reads nor writes another namespace's sessions"
            )
        return owner

    def _adoptable(self, session_id: str, stored: dict[str, Any]) -> bool:
        """Whether a session written outside the cluster (no owner) is this namespace's.

        It is when its runtime state records this namespace (a local runtime
        with long-term memory records the namespace it used); one recording
        another namespace never is.  One that records none (no long-term
        memory, or saved before runtimes recorded it) is taken over only as
        the agent's own session, and only when the caller opted in
        (``adopt_session=True``: a user moving their own local agent).
        """
        state = stored.get(RUNTIME)
        recorded = state.get(STATE_NAMESPACE) if isinstance(state, dict) else None
        if recorded is not None:
            return bool(recorded == self._mine())
        return session_id == self._spec.session_id and self._spec.adopt_session

    def _storage(self) -> JsonSession | PostgresSession:
        """The agent's session storage (the cluster opens one of these two from its spec)."""
        storage = self._rt.session
        if not isinstance(storage, JsonSession | PostgresSession):  # pragma: no cover
            raise ClusterConfigError(f"a cluster agent cannot use {storage!r} for its sessions")
        return storage

    def _load_checked(
        self,
        session_id: str,
        runtime_as: str,
        *,
        strict: bool,
        allow_missing: bool,
        own: bool,
        start: bool = False,
    ) -> tuple[bool, dict[str, Any], dict[str, Any] | None]:
        """Restore the runtime (as ``runtime_as``) from ``session_id`` in ONE read: whose
        the session is -- and, for the agent's own session after its start, its epoch --
        is checked on the document the load is about to apply, before anything is
        applied.  (Checked on an earlier read, another namespace's first save of the id
        landing between the two reads would be loaded into this agent.)  The version
        loaded is recorded as for any load, so a later save of the id by this agent is
        checked against it.

        Args:
            own: the agent's own session id (a damaged document raises its
                :class:`SessionError`; another id's is absent: ``_Hidden``); after
                the start, a newer epoch than this incarnation's raises
                :class:`Superseded`.
            start: the agent's start (``_restore``): a session not this
                namespace's raises :class:`ClusterConfigError` (the start is
                refused); otherwise such a session is absent (``_Hidden``).

        Returns:
            (found, the stored components -- ``runtime_as`` only as far as the
            check looked --, the owner record).
        """
        seen: dict[str, Any] = {}
        checked: list[dict[str, Any] | None] = []

        def check(raw: Mapping[str, msgspec.Raw]) -> None:
            stored = _decoded(raw, runtime_as)
            owner = self._owner_of(session_id, stored)
            if own and not start and epoch_of(owner) > self._epoch:
                raise Superseded(epoch_of(owner))
            seen.update(stored)
            checked.append(owner)

        try:
            found = self._storage().load(
                session_id,
                {runtime_as: self._rt},
                strict=strict,
                allow_missing=allow_missing,
                check=check,
            )
        except ClusterConfigError:
            if start:
                raise
            raise _Hidden from None
        except SessionStorageError:  # the database failed: say so, never guess
            raise
        except SessionError:
            if own or checked:  # the agent's own, or a visible session its state refused
                raise
            # another id, missing or damaged: whose it is cannot be told -- absent
            raise _Hidden from None
        return found, seen, (checked[0] if checked else None)

    def _read_visible(self, session_id: str) -> dict[str, Any] | None:
        """One read of the session: its components when stored and this namespace's;
        None when absent to this agent (another namespace's, missing, or another id
        whose document cannot be read).

        Raises:
            SessionError: the agent's own session is missing or damaged.
            SessionStorageError: the database failed (never read as "absent").
        """
        try:
            stored = self._rt.session.read(session_id)
        except SessionStorageError:
            raise
        except SessionError:
            if session_id == self._spec.session_id:
                raise
            return None
        try:
            self._owner_of(session_id, stored)
        except ClusterConfigError:
            return None
        return stored

    def _delete_visible(self, session_id: str) -> bool:
        """Delete the session if it is this namespace's, checked on the document the
        delete removes (PostgreSQL: one transaction, the row locked)."""
        storage = self._storage()

        def check(raw: Mapping[str, msgspec.Raw]) -> None:
            self._owner_of(session_id, _decoded(raw, RUNTIME))

        try:
            return storage.delete(session_id, check=check)
        except ClusterConfigError:
            return False
        except SessionStorageError:
            raise
        except SessionError:
            if session_id != self._spec.session_id:
                return False  # whose it is cannot be told: never deleted
            # the agent's own, damaged: it is the agent's to delete
            return storage.delete(session_id)

    def _load_session(self, session_id: str) -> bool:
        """``load_session`` of the runtime (the handle's call): the owner checked on the
        document loaded; a session absent to this agent answers False."""
        sid = validate_session_id(session_id)
        own = sid == self._spec.session_id
        t0 = time.perf_counter()
        try:
            found, _, _ = self._load_checked(sid, RUNTIME, strict=True, allow_missing=True, own=own)
        except _Hidden:
            return False
        except Superseded as newer:
            self._supersede(newer.newer, "load_session")
            raise  # not reached: _supersede raises (or ends the actor)
        if found:
            self._rt.bus.publish(
                SessionLoaded(
                    source=RUNTIME,
                    session_id=sid,
                    path=self._rt.session.location(sid),
                    found=True,
                    duration_ms=(time.perf_counter() - t0) * 1e3,
                )
            )
        return found

    def _put_other(self, session_id: str, states: dict[str, Any]) -> SessionInfo:
        """Save a session that is not the agent's own, stamped with this namespace as owner.

        Raises:
            ClusterConfigError: another namespace's agent owns ``session_id``.
        """
        storage = self._rt.session
        owner: dict[str, Any] = {"namespace": self._mine()}
        try:
            stored: dict[str, Any] | None = storage.read(session_id)
        except SessionStorageError:
            raise
        except SessionError:
            if storage.exists(session_id):  # stored but damaged: whose it is cannot be told
                raise
            stored = None
        # (the save is checked against the version this agent last loaded or saved:
        # another writer's save since this read is a SessionConflictError, not a crossing)
        if stored is not None:
            kept = self._owner_of(session_id, stored)
            if kept is not None:
                # the agent of that id keeps its epoch and released incarnations: without
                # them a cut-off older incarnation of it would pass the fencing check
                owner = {**kept, "namespace": self._mine()}
        t0 = time.perf_counter()
        info = storage.put(session_id, {**states, OWNER: owner})
        self._rt.bus.publish(
            SessionSaved(
                source=RUNTIME,
                session_id=session_id,
                path=info.path,
                nbytes=info.nbytes,
                duration_ms=(time.perf_counter() - t0) * 1e3,
            )
        )
        return info

    def _save_session(self, session_id: str | None = None) -> Path | str:
        if session_id is None or session_id == self._spec.session_id:
            where = self._save()
        else:
            where = self._put_other(session_id, {RUNTIME: self._rt.state_dict()}).path
        # as MemoryRuntime.save_session: the file for JSON sessions, the location otherwise
        return Path(where) if isinstance(self._rt.session, JsonSession) else where

    def session_put(
        self,
        session_id: str,
        states: dict[str, Any],
        runtime_as: str | None,
        expect: str | None = None,
    ) -> tuple[str, SessionInfo]:
        """Save the caller's components with the runtime (as ``runtime_as``, when given).

        Refused like any call when ``expect`` names another incarnation.  The
        caller cannot set the owner component: it is always this agent's.
        """
        self._last_call = time.monotonic()
        self._check_expect(expect, "save_session")
        if runtime_as == OWNER:
            raise SessionError(f"component name {OWNER!r} is the cluster's own: use another name")
        full = {k: v for k, v in states.items() if k != OWNER}
        if runtime_as is not None:
            full[runtime_as] = self._rt.state_dict()
        if session_id != self._spec.session_id:
            return self.incarnation, self._put_other(session_id, full)
        if RUNTIME not in full:  # the agent restores from it: never drop it
            full[RUNTIME] = self._rt.state_dict()
        full[OWNER] = self._extras[OWNER]
        info = self._put_own(full)
        self._extras = {k: v for k, v in full.items() if k != RUNTIME}
        return self.incarnation, info

    def session_load(
        self,
        session_id: str,
        runtime_as: str,
        strict: bool,
        allow_missing: bool,
        expect: str | None = None,
    ) -> tuple[str, tuple[bool, dict[str, Any]]]:
        """Restore the runtime from a session; answer (found, the other components)."""
        self._last_call = time.monotonic()
        self._check_expect(expect, "load_session")
        own = session_id == self._spec.session_id
        try:
            found, stored, _ = self._load_checked(
                session_id, runtime_as, strict=strict, allow_missing=allow_missing, own=own
            )
        except _Hidden:  # loaded as if it were absent (never its owner, nor its state)
            if not allow_missing:
                raise SessionError(
                    f"session {session_id!r} not found ({self._rt.session.location(session_id)})"
                ) from None
            return self.incarnation, (False, {})
        except Superseded as newer:
            self._supersede(newer.newer, "load_session")
            raise  # not reached: _supersede raises (or ends the actor)
        if not found:
            return self.incarnation, (False, {})
        others = {k: v for k, v in stored.items() if k not in (runtime_as, OWNER)}
        if own:
            self._extras = {**others, OWNER: self._extras[OWNER]}
        return self.incarnation, (True, others)

    def session_call(self, name: str, args: tuple[Any, ...]) -> Any:
        """``location``, ``exists``, ``read``, ``list`` or ``delete`` of the session storage.

        Only this namespace's sessions: to this agent, a session it may not
        read (another namespace's, or written outside the cluster and not
        known to be this namespace's) is absent -- ``exists`` and ``delete``
        answer False, ``read`` raises the storage's "not found"
        :class:`SessionError` -- so its owner, and that it is stored, are
        never revealed; ``list`` names only this namespace's sessions.
        (A save over such a session is refused: :meth:`_put_other`.)
        """
        self._end_if_stopped()
        if name not in ("location", "exists", "read", "list", "delete"):
            raise AttributeError(f"{name!r} is not a session storage call")
        storage = self._rt.session
        if name == "list":
            return [info for info in storage.list() if self._is_mine(info.session_id)]
        sid = validate_session_id(args[0])
        # each answered from one read (or, for delete, one transaction): whose the session
        # is is checked on the document answered, never on an earlier read
        if name == "location":
            return storage.location(sid)
        if name == "delete":
            return self._delete_visible(sid)
        try:
            stored = self._read_visible(sid)
        except SessionStorageError:
            raise
        except SessionError:  # the agent's own session, missing or damaged
            if name == "read":
                raise
            return storage.exists(sid)
        if name == "exists":
            return stored is not None
        if stored is None:
            raise SessionError(f"session {sid!r} not found ({storage.location(sid)})")
        return stored

    def _is_mine(self, session_id: str) -> bool:
        try:
            stored = self._rt.session.read(session_id)
            self._owner_of(session_id, stored)
        except (SessionError, ClusterConfigError):  # gone or unreadable, or not this namespace's
            return False
        return True

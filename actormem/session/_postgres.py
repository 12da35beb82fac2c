"""Sessions in PostgreSQL: one row per session, shared by any number of workers.

A :class:`PostgresSession` keeps the same versioned JSON document as a
:class:`~actormem.session.JsonSession` file (validated the same way on load)
in one table, so several processes on several hosts can save and resume any
session.  psycopg is imported only when one is opened (the ``postgres``
extra).

Layout (table name configurable, default ``actormem_sessions``)::

    session_id      text primary key
    version         bigint   -- 1 on the first save, +1 on every save
    schema_version  int      -- the document's
    document        bytea    -- the JSON document, exactly as JsonSession writes it
    nbytes          int
    saved_at        timestamptz
    saved_by        text     -- host:pid of the writer
    save_id         uuid     -- identifies one save (see "faults" below)
    generation      uuid     -- drawn when the row is created, kept by its saves

and ``<table>_schema`` holding the layout version.  Opening runs the pending
migrations in one transaction under an advisory lock (two workers starting
at once migrate once); a layout newer than this actormem is refused.  The
layout, its migrations and the check of a table found are in
:mod:`actormem.session._pg_layout`; this module reads and writes the rows.

**Two workers saving one session at once** (``on_conflict="raise"``, the
default): optimistic concurrency.  Each ``PostgresSession`` remembers, per
session id, the version it last loaded or saved; a save is one statement
that writes only if the stored version is still that one
(``UPDATE ... WHERE version = $expected AND generation = $generation``, or
``INSERT ... ON CONFLICT DO NOTHING`` when it believes the session does not
exist yet).  The version alone would not do: a session deleted and created
again starts at version 1 once more, so a writer remembering version 1 of
the old row would overwrite the new one (A saves, B deletes, C creates and
saves, A saves again).  The ``generation`` is drawn afresh with every new
row and a save must match it too, so a remembered version names one
incarnation of the row only.  The first
writer wins; the other gets :class:`SessionConflictError` naming who saved
meanwhile, and nothing is written.  It continues by loading the session
again.  A session this loader never loaded counts as "should not exist":
saving over another worker's session without reading it first is a
conflict too.  ``on_conflict="overwrite"`` is last-writer-wins instead
(every save is an upsert; each is still whole).

**Who remembered the version** (:class:`SessionVersions`): the loader of
the state being saved.  Direct calls use this object's own record.  A
``MemoryRuntime`` keeps a record of its own and passes it (``versions=``);
:meth:`save` and :meth:`load` also use the record of any component that
keeps one (the runtime among a ``ReActAgent``'s components, or added to a
``SessionManager``).  So several runtimes may share one ``PostgresSession``
(one connection) and each is checked against what it loaded itself: two
runtimes that loaded version 3 cannot both save over it.  This object's own
record follows every load and save made through it, whoever's.  A runtime
that opened its storage itself (``sessions=`` a URL) is its only user and
uses the object's record (:attr:`versions`).

**Faults.**  Every save is a single statement in its own transaction: it
commits whole or not at all, the previous version stays intact otherwise.
When the connection drops during a save, the outcome is checked on a new
connection by the save's ``save_id``: committed means done; not committed
means the save is retried once (still with the version check).  Reads are
retried once on a new connection.  Anything else raises
:class:`SessionStorageError` naming the database (never its password) and
the cause.  A process that forks drops the inherited connection and opens
its own.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, Literal, TypeVar

import structlog

from actormem.session._common import (
    DOC_DECODER,
    RAW_DOC_DECODER,
    SCHEMA_VERSION,
    DocumentCheck,
    RawDocument,
    SessionConflictError,
    SessionError,
    SessionInfo,
    SessionStorageError,
    SessionVersions,
    apply_components,
    decode_document,
    encode_document,
    validate_session_id,
)
from actormem.session._pg_layout import LAYOUT_VERSION, migrate
from actormem.state import StateModule
from actormem.store._pg_conn import SaysDriverErrors, is_lost, redacted, secrets_of

if TYPE_CHECKING:
    import psycopg

__all__ = ["LAYOUT_VERSION", "PostgresSession"]

log = structlog.get_logger("actormem.session")

T = TypeVar("T")
_TABLE_RE: Final = re.compile(r"[a-z_][a-z0-9_]{0,40}")
_INSTALL_HINT: Final = "pip install 'actormem[postgres]'"


def _import_psycopg() -> Any:
    try:
        import psycopg
    except ImportError as exc:
        raise ImportError(
            f"PostgreSQL sessions need the postgres extra (psycopg): {_INSTALL_HINT}"
        ) from exc
    return psycopg


class PostgresSession(SaysDriverErrors):
    """Sessions stored in a PostgreSQL table, safe for many workers.

    Args:
        dsn: a ``postgresql://`` URL (libpq's environment variables and
            ``~/.pgpass`` apply, so the password need not be in it).
        table: the sessions table (lower-case letters, digits, ``_``);
            ``<table>_schema`` holds its layout version.
        on_conflict: ``"raise"`` (optimistic version check, the default) or
            ``"overwrite"`` (last writer wins); see the module docstring.
        connect_timeout: seconds to wait for the server when connecting.

    Raises:
        ImportError: the ``postgres`` extra is not installed.
        SessionStorageError: the server cannot be reached, the login or the
            database is wrong, or the table's layout is newer than this
            actormem.
        SessionError: bad ``table`` or ``on_conflict``.
    """

    def __init__(
        self,
        dsn: str,
        *,
        table: str = "actormem_sessions",
        on_conflict: Literal["raise", "overwrite"] = "raise",
        connect_timeout: float = 10.0,
    ) -> None:
        if not isinstance(table, str) or not _TABLE_RE.fullmatch(table):
            raise SessionError(
                f"sessions table name {table!r} is not allowed: use 1-41 lower-case letters, "
                "digits or _, starting with a letter or _"
            )
        if on_conflict not in ("raise", "overwrite"):
            raise SessionError(f"on_conflict must be 'raise' or 'overwrite', got {on_conflict!r}")
        self._pg = _import_psycopg()
        from psycopg import sql

        self._sql = sql
        self.dsn = dsn
        self.table = table
        self.on_conflict: Literal["raise", "overwrite"] = on_conflict
        self.connect_timeout = connect_timeout
        self.url = redacted(dsn)
        self._secrets = secrets_of(dsn)  # hidden in the driver's messages
        self._t = sql.Identifier(table)
        self._lock = threading.RLock()
        self._conn: psycopg.Connection[Any] | None = None
        #: The server process of ``_conn`` and when it started (see :meth:`_end_orphan`).
        self._backend: tuple[int, Any] | None = None
        self._pid = os.getpid()
        self._closed = False
        self._versions = SessionVersions()  # this object's own, for direct calls
        self._writer = f"{socket.gethostname()}:{os.getpid()}"
        with self._lock:
            self._migrate(self._connection())

    def __repr__(self) -> str:
        return f"PostgresSession({self.url!r}, table={self.table!r})"

    def location(self, session_id: str) -> str:
        """``postgresql://user@host:port/db#table/session_id`` (never the password)."""
        return f"{self.url}#{self.table}/{validate_session_id(session_id)}"

    def _where(self, session_id: str) -> str:
        return f"session {session_id!r} in {self.url} (table {self.table})"

    @property
    def versions(self) -> SessionVersions:
        """This object's own record, used by direct calls (see :class:`SessionVersions`)."""
        return self._versions

    def version(self, session_id: str) -> int | None:
        """The version this object last loaded or saved (0: known absent; None: never seen)."""
        with self._lock:
            return self._versions.version(self.location(session_id))

    # -- connection -----------------------------------------------------------------

    def _connection(self) -> psycopg.Connection[Any]:
        if self._closed:
            raise SessionStorageError(f"{self!r} is closed")
        if self._pid != os.getpid():  # forked: the socket belongs to the parent
            self._conn, self._pid = None, os.getpid()
            self._writer = f"{socket.gethostname()}:{self._pid}"
        old = self._conn
        if old is not None and not old.closed and not old.broken:
            return old
        self._conn = None
        conn: psycopg.Connection[Any] | None = None
        try:
            conn = self._pg.connect(
                self.dsn, autocommit=True, connect_timeout=max(1, round(self.connect_timeout))
            )
            row = conn.execute(
                "SELECT pid, backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()"
            ).fetchone()
        except self._pg.Error as exc:
            if conn is not None:  # connected, then the first query failed: not kept, so closed
                with contextlib.suppress(Exception):
                    conn.close()
            raise SessionStorageError(
                f"cannot connect to the sessions database {self.url}: {self._say(exc)}"
            ) from None
        self._conn = conn
        self._backend = None if row is None else (int(row[0]), row[1])
        return conn

    def _end_orphan(self, conn: psycopg.Connection[Any], orphan: tuple[int, Any] | None) -> None:
        """End the server process of a connection this object lost, and wait until it has.

        Losing the client's side of a connection does not stop its server
        process: a save may still be running there (waiting on a row lock, say)
        and commit later.  Checking the save's id before that process ends could
        miss a commit still to come, and a retry would then queue behind it and
        fail its version check (or, overwriting, count the save twice).  Matched
        by process id and start time, so a later process reusing the id is left
        alone.  Waits up to 5 s; a process still there by then makes the outcome
        unknowable and raises.
        """
        if orphan is None:
            return
        row = conn.execute(
            "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity "
            "WHERE pid = %s AND backend_start = %s",
            orphan,
        ).fetchone()
        if row is not None and not row[0]:
            raise SessionStorageError(
                f"the server process {orphan[0]} of the lost connection did not end within 5 s"
            )

    def _drop(self) -> None:
        conn, self._conn, self._backend = self._conn, None, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # already gone
                log.debug("session.pg_close_failed", exc_info=True)

    def _lost(self, exc: BaseException) -> bool:
        """Whether ``exc`` means the connection is gone (the operation may be retried)."""
        return is_lost(self._pg, exc, self._conn)

    def _run(self, what: str, op: Callable[[psycopg.Connection[Any]], T], *, retry: bool) -> T:
        """Run ``op`` on the connection; on a lost connection reconnect (and retry once)."""
        with self._lock:
            for attempt in (1, 2):
                conn = self._connection()
                try:
                    return op(conn)
                except SessionError:
                    raise
                except self._pg.Error as exc:
                    lost = self._lost(exc)
                    if lost:
                        self._drop()
                    if lost and retry and attempt == 1:
                        log.warning("session.pg_retry", op=what, error=self._say(exc))
                        continue
                    raise SessionStorageError(
                        f"sessions database {self.url}: {what} failed"
                        f"{' (connection lost)' if lost else ''}: {self._say(exc)}"
                    ) from None
            raise AssertionError("unreachable")

    def _migrate(self, conn: psycopg.Connection[Any]) -> None:
        try:
            migrate(conn, self.table, self.url)
        except SessionError:
            raise
        except self._pg.Error as exc:
            self._drop()
            raise SessionStorageError(
                f"cannot prepare the sessions table {self.table} in {self.url}: {self._say(exc)}"
            ) from None

    def close(self) -> None:
        """Close the connection; later calls raise :class:`SessionStorageError`."""
        with self._lock:
            self._closed = True
            if self._pid == os.getpid():
                self._drop()
            self._conn = None

    def __enter__(self) -> PostgresSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing --------------------------------------------------------------------

    def save(
        self,
        session_id: str,
        components: Mapping[str, StateModule],
        *,
        versions: SessionVersions | None = None,
    ) -> str:
        """Save the state of ``components`` (name -> module) in one transaction.

        Checked against the version recorded by ``versions``, or by the
        components that keep a record (a ``MemoryRuntime``), or else by this
        object (see "Who remembered the version" in the module docstring).

        Returns:
            The session's location (see :meth:`location`).

        Raises:
            SessionConflictError: another writer saved or deleted it since this
                loader loaded or saved it (``on_conflict="raise"``).
            SessionStorageError: the database failed; the stored session is unchanged.
            SessionError: bad id, a state that cannot be encoded as JSON, or
                components loaded from different versions of the session.
        """
        states = {name: module.state_dict() for name, module in components.items()}
        return self._put(session_id, states, _records(versions, components)).path

    def save_state(
        self,
        session_id: str,
        states: Mapping[str, Any],
        *,
        versions: SessionVersions | None = None,
    ) -> str:
        """Save already-collected component states (see :meth:`save`)."""
        return self._put(session_id, states, _records(versions, {})).path

    def put(
        self,
        session_id: str,
        states: Mapping[str, Any],
        *,
        versions: SessionVersions | None = None,
    ) -> SessionInfo:
        """Save already-collected states in one transaction; describe what was stored.

        Checked against the version ``versions`` recorded (this object's own
        record when None); see :meth:`save`.

        Raises:
            SessionConflictError, SessionStorageError, SessionError: see :meth:`save`.
        """
        return self._put(session_id, states, _records(versions, {}))

    def _put(
        self, session_id: str, states: Mapping[str, Any], records: list[SessionVersions]
    ) -> SessionInfo:
        sid = validate_session_id(session_id)
        where = self.location(sid)
        data = encode_document(sid, states)
        save_id = uuid.uuid4()
        t0 = time.perf_counter()
        with self._lock:
            seen = {record.get(where) for record in records or [self._versions]}
            if len(seen) > 1:
                raise SessionError(
                    f"{self._where(sid)}: the components saved together were loaded from "
                    "different versions of it; nothing was written (load them together "
                    "again, or save them separately)"
                )
            last = seen.pop()
            expected, generation = (0, None) if last is None else last
            row: tuple[Any, ...] | None = None
            for attempt in (1, 2):
                conn = self._connection()
                try:
                    row = self._write(conn, sid, data, expected, generation, save_id)
                    break
                except self._pg.Error as exc:
                    lost = self._lost(exc)
                    orphan = self._backend
                    self._drop()
                    failed = f"sessions database {self.url}: saving session {sid!r} failed"
                    if not lost:  # the server refused the statement: rolled back
                        raise SessionStorageError(
                            f"{failed}: {self._say(exc)}; the stored session is unchanged"
                        ) from None

                    # Did the save commit?  Once its server process has ended (it
                    # may run on without us), the save_id says.
                    def settled(c: psycopg.Connection[Any], gone: Any = orphan) -> Any:
                        self._end_orphan(c, gone)
                        return self._saved(c, sid, save_id)

                    try:
                        row = self._run("checking a save", settled, retry=True)
                    except SessionStorageError as check:
                        raise SessionStorageError(
                            f"{failed} (connection lost: {self._say(exc)}) and whether it "
                            f"committed could not be checked: {check}"
                        ) from None
                    if row is not None:
                        break
                    if attempt == 2:
                        raise SessionStorageError(
                            f"{failed} (connection lost): {self._say(exc)}; "
                            "the stored session is unchanged"
                        ) from None
                    log.warning("session.pg_retry", op="save", session_id=sid, error=self._say(exc))
            if row is None:
                raise self._conflict(sid, expected, generation)
            version, saved_at = int(row[0]), float(row[2])
            for record in (self._versions, *records):
                record.note(where, version, row[1])
        log.debug(
            "session.saved",
            session_id=sid,
            version=version,
            nbytes=len(data),
            ms=round((time.perf_counter() - t0) * 1e3, 3),
        )
        return SessionInfo(
            session_id=sid,
            path=self.location(sid),
            nbytes=len(data),
            modified_at=saved_at,
            version=version,
        )

    def _write(
        self,
        conn: psycopg.Connection[Any],
        sid: str,
        data: bytes,
        expected: int,
        generation: uuid.UUID | None,
        save_id: uuid.UUID,
    ) -> tuple[Any, ...] | None:
        """One statement: the new (version, generation, saved_at epoch), or None on a
        conflict (the stored version or generation is not the expected one)."""
        sql = self._sql
        returning = "RETURNING version, generation, extract(epoch FROM saved_at)::float8"
        values = (sid, SCHEMA_VERSION, data, len(data), self._writer, save_id)
        insert = (
            "INSERT INTO {t} (session_id, schema_version, document, nbytes, saved_by, save_id, "
            "version, saved_at) VALUES (%s, %s, %b, %s, %s, %s, 1, clock_timestamp()) "
        )
        if self.on_conflict == "overwrite":
            query = sql.SQL(
                insert + "ON CONFLICT (session_id) DO UPDATE SET version = {t}.version + 1, "
                "schema_version = EXCLUDED.schema_version, document = EXCLUDED.document, "
                "nbytes = EXCLUDED.nbytes, saved_by = EXCLUDED.saved_by, "
                "save_id = EXCLUDED.save_id, saved_at = EXCLUDED.saved_at " + returning
            ).format(t=self._t)
            return conn.execute(query, values).fetchone()
        if expected == 0:
            query = sql.SQL(insert + "ON CONFLICT (session_id) DO NOTHING " + returning).format(
                t=self._t
            )
            return conn.execute(query, values).fetchone()
        query = sql.SQL(
            "UPDATE {t} SET version = version + 1, schema_version = %s, document = %b, "
            "nbytes = %s, saved_by = %s, save_id = %s, saved_at = clock_timestamp() "
            "WHERE session_id = %s AND version = %s AND generation IS NOT DISTINCT FROM %s "
            + returning
        ).format(t=self._t)
        params = (SCHEMA_VERSION, data, len(data), self._writer, save_id, sid, expected, generation)
        return conn.execute(query, params).fetchone()

    def _saved(
        self, conn: psycopg.Connection[Any], sid: str, save_id: uuid.UUID
    ) -> tuple[Any, ...] | None:
        query = self._sql.SQL(
            "SELECT version, generation, extract(epoch FROM saved_at)::float8 FROM {t} "
            "WHERE session_id = %s AND save_id = %s"
        ).format(t=self._t)
        return conn.execute(query, (sid, save_id)).fetchone()

    def _conflict(
        self, sid: str, expected: int, generation: uuid.UUID | None
    ) -> SessionConflictError:
        query = self._sql.SQL(
            "SELECT version, saved_by, saved_at, generation FROM {t} WHERE session_id = %s"
        ).format(t=self._t)
        row = self._run(
            "reading a conflict", lambda c: c.execute(query, (sid,)).fetchone(), retry=True
        )
        where = self._where(sid)
        if row is None:
            message = (
                f"{where} was deleted by another writer since this worker loaded or saved "
                f"version {expected}; nothing was written (load it again, or save under a new id)"
            )
            stored, by = None, None
        else:
            stored, by = int(row[0]), str(row[1])
            when = row[2].isoformat(timespec="seconds")
            if expected == 0:
                message = (
                    f"{where} already exists (version {stored}, saved by {by} at {when}) and "
                    "this worker has not loaded it; nothing was written (load it first to "
                    "continue it, or use on_conflict='overwrite' for last-writer-wins)"
                )
            elif row[3] != generation:
                message = (
                    f"{where} was deleted and created again by another writer since this "
                    f"worker loaded or saved version {expected} of the deleted one (the stored "
                    f"session is another: version {stored}, saved by {by} at {when}); nothing "
                    "was written (load it again to continue from the stored version)"
                )
            else:
                message = (
                    f"{where} was saved by another writer ({by} at {when}, now version "
                    f"{stored}) since this worker loaded or saved version {expected}; nothing "
                    "was written (load it again to continue from the stored version)"
                )
        log.warning(
            "session.conflict", session_id=sid, expected=expected, stored=stored, saved_by=by
        )
        return SessionConflictError(
            message, session_id=sid, expected_version=expected, stored_version=stored, saved_by=by
        )

    # -- reading --------------------------------------------------------------------

    def _fetch(self, sid: str) -> tuple[int, uuid.UUID, bytes] | None:
        query = self._sql.SQL(
            "SELECT version, generation, document FROM {t} WHERE session_id = %s"
        ).format(t=self._t)

        def op(conn: psycopg.Connection[Any]) -> tuple[int, uuid.UUID, bytes] | None:
            with conn.cursor(binary=True) as cur:
                row = cur.execute(query, (sid,)).fetchone()
            return None if row is None else (int(row[0]), row[1], bytes(row[2]))

        return self._run(f"reading session {sid!r}", op, retry=True)

    def exists(self, session_id: str) -> bool:
        """Whether the session is stored."""
        sid = validate_session_id(session_id)
        query = self._sql.SQL("SELECT 1 FROM {t} WHERE session_id = %s").format(t=self._t)
        return self._run(
            "checking a session",
            lambda c: c.execute(query, (sid,)).fetchone() is not None,
            retry=True,
        )

    def read(self, session_id: str) -> dict[str, Any]:
        """Read and validate a session; return its components (name -> state).

        Raises:
            SessionError: missing, corrupt, foreign-format or newer-version document.
            SessionStorageError: the database failed.
        """
        sid = validate_session_id(session_id)
        found = self._fetch(sid)
        if found is None:
            raise SessionError(f"session {sid!r} not found ({self.location(sid)})")
        components: dict[str, Any] = decode_document(
            found[2], self._where(sid), DOC_DECODER
        ).components
        return components

    def load(
        self,
        session_id: str,
        components: Mapping[str, StateModule],
        *,
        strict: bool = True,
        allow_missing: bool = True,
        versions: SessionVersions | None = None,
        check: DocumentCheck | None = None,
    ) -> bool:
        """Restore ``components`` from the session; all or nothing.

        Remembers the version read -- in ``versions``, in the record of each
        component that keeps one (a ``MemoryRuntime``'s) and in this
        object's -- so the next save of this session by the same loader
        succeeds only if nobody saved it in between (``on_conflict="raise"``).

        Args:
            session_id: the session to read.
            components: name -> module to restore.
            strict: passed to each ``load_state_dict``; also, a component
                named here but absent from the session is an error.
            allow_missing: return False (instead of raising) when the
                session does not exist.
            versions: the loader's record (see :class:`SessionVersions`).
            check: called with the stored components as read, before any
                component is changed; what it raises propagates, nothing is
                loaded and no version is recorded (see
                :data:`~actormem.session.DocumentCheck`).

        Returns:
            True if the session existed and was loaded.

        Raises:
            SessionError: the document is unusable or a component rejected
                its state; every component keeps (or gets back) its prior state.
            SessionStorageError: the database failed; nothing was changed.
        """
        sid = validate_session_id(session_id)
        where, records = self.location(sid), (self._versions, *_records(versions, components))
        with self._lock:
            found = self._fetch(sid)
            if found is None:
                if not allow_missing:
                    raise SessionError(f"session {sid!r} not found ({where})")
                for record in records:
                    record.note(where, 0, None)
                return False
            version, generation, data = found
            said = self._where(sid)
            doc: RawDocument = decode_document(data, said, RAW_DOC_DECODER)
            if check is not None:
                check(doc.components)
            apply_components(said, doc.components, components, strict=strict)
            for record in records:
                record.note(where, version, generation)
            return True

    def list(self) -> list[SessionInfo]:
        """The stored sessions, newest first."""
        query = self._sql.SQL(
            "SELECT session_id, nbytes, extract(epoch FROM saved_at)::float8, version FROM {t} "
            "ORDER BY saved_at DESC, session_id"
        ).format(t=self._t)
        rows = self._run("listing sessions", lambda c: c.execute(query).fetchall(), retry=True)
        return [
            SessionInfo(
                session_id=str(sid),
                path=f"{self.url}#{self.table}/{sid}",
                nbytes=int(nbytes),
                modified_at=float(at),
                version=int(version),
            )
            for sid, nbytes, at, version in rows
        ]

    def delete(self, session_id: str, *, check: DocumentCheck | None = None) -> bool:
        """Delete the session; return whether it existed.

        A delete retried after a lost connection reports False if the first
        attempt had committed (the session is gone either way).

        Args:
            check: called with the stored components first, in the delete's
                transaction with the row locked, so the document checked is
                the one deleted (no writer replaces it in between); what it
                raises -- or a damaged document's :class:`SessionError` --
                propagates and nothing is deleted.
        """
        sid = validate_session_id(session_id)
        query = self._sql.SQL("DELETE FROM {t} WHERE session_id = %s RETURNING 1").format(t=self._t)
        lock = self._sql.SQL("SELECT document FROM {t} WHERE session_id = %s FOR UPDATE").format(
            t=self._t
        )

        def checked(conn: psycopg.Connection[Any]) -> bool:
            assert check is not None
            with conn.transaction():
                with conn.cursor(binary=True) as cur:
                    row = cur.execute(lock, (sid,)).fetchone()
                if row is None:
                    return False
                doc: RawDocument = decode_document(bytes(row[0]), self._where(sid), RAW_DOC_DECODER)
                check(doc.components)  # raising rolls the transaction back: nothing deleted
                return conn.execute(query, (sid,)).fetchone() is not None

        def plain(conn: psycopg.Connection[Any]) -> bool:
            return conn.execute(query, (sid,)).fetchone() is not None

        with self._lock:
            gone = self._run(
                f"deleting session {sid!r}", plain if check is None else checked, retry=True
            )
            self._versions.note(self.location(sid), 0, None)
        return gone


def _records(
    versions: SessionVersions | None, components: Mapping[str, Any]
) -> list[SessionVersions]:
    """The loaders' records a save is checked against and a load updates: ``versions``
    and those the components keep (``session_versions``: a ``MemoryRuntime``'s)."""
    found = [] if versions is None else [versions]
    for module in components.values():
        record = getattr(module, "session_versions", None)
        if isinstance(record, SessionVersions) and all(record is not f for f in found):
            found.append(record)
    return found

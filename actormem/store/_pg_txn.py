"""PostgresStore's connections and transactions: the pool, schema set-up at open, reads
retried once, and write transactions planned again after a deadlock, a serialization
failure, an id taken meanwhile or a lost connection (the outcome of a commit whose
reply was lost is read back with ``pg_xact_status``).

Kept apart from :mod:`actormem.store._postgres` (what the store does: writes, search,
maintenance) because this is how it talks to the server, whatever it does; the
"Faults" and "Concurrency" sections of that module's docstring describe the rules
implemented here.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, TypeVar

import structlog

from actormem.store._pg_ann import EF_SEARCH
from actormem.store._pg_conn import SaysDriverErrors, is_lost
from actormem.store._pg_feed import FEED_VERSION, GONE_KEEP_SECONDS, trim_gone
from actormem.store._pg_fence import FENCE_LOCK, FENCE_READ
from actormem.store._pg_schema import declare_writer, ensure_schema
from actormem.store._types import InvalidMemoryError, StoreError

__all__ = ["PgConnections"]

log = structlog.get_logger(__name__)

T = TypeVar("T")
Key = tuple[str, str, str, str]

#: Attempts of a write transaction before it fails.
_ATTEMPTS: Final = 3


class PgConnections(SaysDriverErrors):
    """The connection pool and transaction machinery of :class:`PostgresStore` (a mixin)."""

    _pg: Any
    dsn: str
    url: str
    _dim: int
    _connect_timeout: int
    _pool_size: int
    _pid: int
    _pool_lock: threading.Lock
    _pool: Any
    _pool_cls: Any
    _secrets: tuple[str, ...]
    _register_vector: Callable[[Any], None]

    def _check_open(self) -> None:  # pragma: no cover - the store's own
        raise NotImplementedError

    if TYPE_CHECKING:  # PgFence's (a mixin of the same store)

        def _fence_params(self, what: str) -> tuple[str, str] | None: ...

        def _check_fence(self, what: str, stored: Any) -> None: ...

    # -- connections ----------------------------------------------------------------------

    def _connect(self) -> Any:
        try:
            return self._pg.connect(
                self.dsn, autocommit=True, connect_timeout=self._connect_timeout
            )
        except self._pg.Error as exc:
            raise StoreError(
                f"cannot connect to the store database {self.url}: {self._say(exc)}"
            ) from None

    def _prepare_database(self) -> None:
        """Check the server, enable pgvector and create or migrate the schema."""
        conn = self._connect()
        try:
            row = conn.execute(
                "SELECT installed_version FROM pg_available_extensions WHERE name = 'vector'"
            ).fetchone()
            if row is None:
                raise StoreError(
                    f"the PostgreSQL server of {self.url} has no pgvector extension "
                    "('vector' is not available): install pgvector on the server"
                )
            if row[0] is None:
                try:
                    conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
                except self._pg.Error as exc:
                    # another process enabled it at the same moment (IF NOT EXISTS is not
                    # atomic: the loser's insert fails on pg_extension's unique name)
                    if not self._vector_installed(conn):
                        raise StoreError(
                            f"database {self.url} has no pgvector extension and this login "
                            f"cannot enable it ({self._say(exc)}); run CREATE EXTENSION vector "
                            "as its owner or a superuser"
                        ) from None
            self._register_vector(conn)
            _, version = ensure_schema(conn, self._dim, self.url)
            if version >= FEED_VERSION:  # the change feed's hard deletes (_pg_feed)
                trim_gone(conn, GONE_KEEP_SECONDS)
        except self._pg.Error as exc:
            raise StoreError(f"cannot set up the store in {self.url}: {self._say(exc)}") from None
        finally:
            conn.close()

    def _vector_installed(self, conn: Any) -> bool:
        row = conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone()
        return row is not None

    def _new_pool(self) -> Any:
        def configure(conn: Any) -> None:
            self._register_vector(conn)
            declare_writer(conn)  # the schema's guard refuses writers of older versions
            # only HNSW scans read these: the partial indexes of large scopes
            conn.execute("SET hnsw.iterative_scan = relaxed_order")
            conn.execute(f"SET hnsw.ef_search = {int(EF_SEARCH)}")

        pool = self._pool_cls(
            self.dsn,
            # two: a large scope's search runs its vector side on a second one (_pg_gather)
            min_size=min(2, self._pool_size),
            max_size=self._pool_size,
            kwargs={"autocommit": True, "connect_timeout": self._connect_timeout},
            configure=configure,
            open=False,
            name=f"actormem-store-{os.getpid()}",
        )
        try:
            pool.open(wait=True, timeout=float(self._connect_timeout) + 5)
        except Exception as exc:
            pool.close()
            raise StoreError(
                f"cannot open connections to the store database {self.url}: {self._say(exc)}"
            ) from None
        return pool

    def _conn(self) -> Any:
        """A pooled connection context (a forked child opens a pool of its own)."""
        self._check_open()
        if self._pid != os.getpid():
            with self._pool_lock:
                if self._pid != os.getpid():
                    self._pool = self._new_pool()  # the parent's sockets are the parent's
                    self._pid = os.getpid()
        return self._pool.connection(timeout=float(self._connect_timeout))

    def _check_pool(self) -> None:
        """After a lost connection: test the pool's idle connections, replace dead ones.

        What ended one connection (a server restart, a failover, an
        administrator) usually ended them all; without this, each retry would
        take the next dead connection from the pool.
        """
        try:
            self._pool.check()
        except Exception as exc:  # the retry will say what is wrong
            log.warning("store.pg_pool_check_failed", where=self.url, error=self._say(exc))

    def _lost(self, exc: BaseException) -> bool:
        return is_lost(self._pg, exc)

    def _read(self, what: str, fn: Callable[[Any], T]) -> T:
        """Run ``fn(conn)`` (reads, autocommit); a lost connection is retried once."""
        for attempt in (1, 2):
            try:
                with self._conn() as conn:
                    return fn(conn)
            except StoreError:
                raise
            except Exception as exc:
                if not isinstance(exc, self._pg.Error) and not self._lost(exc):
                    raise
                if self._lost(exc) and attempt == 1:
                    log.warning("store.pg_retry", op=what, error=self._say(exc))
                    self._check_pool()
                    continue
                raise StoreError(f"{what} in {self.url} failed: {self._say(exc)}") from None
        raise AssertionError("unreachable")  # pragma: no cover

    def _transaction(self, what: str, body: Callable[[Any, set[Key]], T]) -> T:
        """Run ``body(conn, locked_keys)`` in one write transaction, planned again on a
        deadlock, serialization failure, duplicate id or lost connection (see module doc).

        A fenced store's transaction first takes its fence's lock (shared) with the
        transaction id, reads the fence row, and goes on only while the epoch is its own
        (:mod:`actormem.store._pg_fence`; a refusal raises ``StoreFencedError``).
        """
        pg = self._pg
        last: BaseException | None = None
        for attempt in range(1, _ATTEMPTS + 1):
            xid: str | None = None
            pid: int | None = None
            done = False
            out: Any = None
            fence = self._fence_params(what)  # None: not fenced (no lock, no extra column)
            try:
                with self._conn() as conn:
                    pid = conn.info.backend_pid
                    with conn.transaction():
                        if fence is None:
                            xid = str(conn.execute("SELECT pg_current_xact_id()").fetchone()[0])
                        else:
                            xid = str(conn.execute(FENCE_LOCK, fence[:1]).fetchone()[0])
                            row = conn.execute(FENCE_READ, fence[1:]).fetchone()
                            self._check_fence(what, None if row is None else row[0])
                        out = body(conn, set())
                        done = True
                        self._before_commit(conn)
                return out  # type: ignore[no-any-return]
            except (pg.errors.DeadlockDetected, pg.errors.SerializationFailure) as exc:
                last = exc
            except pg.errors.UniqueViolation as exc:  # an id taken meanwhile: plan again
                last = exc
            except pg.DataError as exc:
                raise InvalidMemoryError(
                    f"{what}: PostgreSQL refused a value ({self._say(exc)}); nothing was stored"
                ) from None
            except Exception as exc:
                if not self._lost(exc):
                    if isinstance(exc, pg.Error):
                        raise StoreError(
                            f"{what} in {self.url} failed and was rolled back: {self._say(exc)}"
                        ) from None
                    raise
                last = exc
                self._check_pool()
                status = self._outcome(xid, pid) if xid is not None else "aborted"
                if status == "committed" and done:
                    log.warning("store.pg_commit_confirmed", op=what, error=self._say(exc))
                    return out  # type: ignore[no-any-return]
                if status not in ("aborted", None):
                    raise StoreError(
                        f"{what} in {self.url}: the connection was lost and the outcome of "
                        f"transaction {xid} is {status!r}: {self._say(exc)}"
                    ) from None
            log.warning("store.pg_txn_retry", op=what, attempt=attempt, error=self._say(last))
        assert last is not None
        raise StoreError(
            f"{what} in {self.url} failed after {_ATTEMPTS} attempts and was rolled back: "
            f"{self._say(last)}"
        ) from None

    def _before_commit(self, conn: Any) -> None:
        """Called inside each write transaction just before it commits (a test hook)."""

    def _outcome(self, xid: str, pid: int | None) -> str | None:
        """What became of transaction ``xid`` whose connection was lost."""
        for _ in range(2):
            try:
                with self._conn() as conn:
                    row = conn.execute("SELECT pg_xact_status(%s::xid8)", (xid,)).fetchone()
                    status = None if row is None else row[0]
                    if status != "in progress" or pid is None:
                        return "aborted" if status is None else str(status)
                    # Our client is gone but its backend has not noticed yet: end it.
                    conn.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))
                    row = conn.execute("SELECT pg_xact_status(%s::xid8)", (xid,)).fetchone()
                    return "aborted" if row is None or row[0] is None else str(row[0])
            except Exception as exc:
                if not self._lost(exc):
                    raise
        return "unknown"

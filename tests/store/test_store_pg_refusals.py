"""A statement PostgreSQL refuses is not a lost connection.

``is_lost`` treated every ``OperationalError`` as a lost connection: a row
past a btree's size limit (``ProgramLimitExceeded``), a full disk or a
cancelled statement was retried three times and sessions said "(connection
lost)" (pgprobe finding 2).  Only connection loss is retried now.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
import structlog

from actormem.models.embedders import HashEmbedder
from actormem.session import PostgresSession, SessionStorageError
from actormem.store import Namespace, StoreError
from actormem.store._pg_conn import is_lost
from tests._postgres import namespace_past_the_limit

E = psycopg.errors


@pytest.mark.parametrize(
    ("exc", "lost"),
    [
        (E.ProgramLimitExceeded("index row size 4032 exceeds btree maximum"), False),
        (E.DiskFull("could not extend file"), False),
        (E.QueryCanceled("canceling statement due to statement timeout"), False),
        (E.DeadlockDetected("deadlock detected"), False),
        (E.AdminShutdown("terminating connection due to administrator command"), True),
        (E.CrashShutdown("terminating connection because of crash"), True),
        (E.CannotConnectNow("the database system is starting up"), True),
        (E.ConnectionFailure("connection failure"), True),
        (E.ConnectionException("connection exception"), True),
        (psycopg.OperationalError("server closed the connection unexpectedly"), True),
        (psycopg.InterfaceError("the connection is closed"), True),
        (E.UniqueViolation("duplicate key"), False),
        (ValueError("not a database error"), False),
    ],
)
def test_only_connection_loss_is_lost(exc: BaseException, lost: bool) -> None:
    assert is_lost(psycopg, exc) is lost


def test_a_refused_row_is_not_retried_as_a_lost_connection(pg_dsn: str) -> None:
    from actormem.store._postgres import PostgresStore

    # 3 x 256 random four-byte characters: past a btree's 2,704-byte key in PostgreSQL
    # (Namespace refuses it since the namespace byte limit; built as a stored row's is)
    ns = namespace_past_the_limit(7)
    with (
        PostgresStore(pg_dsn, embedder=HashEmbedder(32), touch_flush_interval=None) as store,
        structlog.testing.capture_logs() as logs,
    ):
        with pytest.raises(StoreError, match="rolled back") as err:
            store.add(ns, "a memory")
        assert "attempts" not in str(err.value)
        assert not [e for e in logs if e["event"] in ("store.pg_txn_retry", "store.pg_retry")]
        ok = Namespace(user_id="fine")
        store.add(ok, "the store still works")
        assert [m.content for m in store.list(ok)] == ["the store still works"]


def test_a_cancelled_session_statement_does_not_say_connection_lost(pg_dsn: str) -> None:
    sessions = PostgresSession(pg_dsn)
    sessions.put("s", {"c": {"v": 1}})
    locker = psycopg.connect(pg_dsn)
    try:
        locker.execute("SELECT 1 FROM actormem_sessions WHERE session_id = 's' FOR UPDATE")
        conn: Any = sessions._connection()
        conn.execute("SET statement_timeout = 50")  # the save waits on the lock: cancelled
        with (
            structlog.testing.capture_logs() as logs,
            pytest.raises(SessionStorageError) as err,
        ):
            sessions.put("s", {"c": {"v": 2}})
        assert "connection lost" not in str(err.value)
        assert "statement timeout" in str(err.value)
        assert not [e for e in logs if e["event"] == "session.pg_retry"]
    finally:
        locker.close()
    assert sessions.put("s", {"c": {"v": 3}}).version == 2
    sessions.close()

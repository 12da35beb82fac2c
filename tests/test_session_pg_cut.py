"""PostgresSession: a save whose reply was lost counts once (pgprobe finding 4).

The client's side of the connection is cut while the save's UPDATE waits on
a row lock another transaction holds: the save's backend runs on.  The
check of the save's id ran while that orphan still waited, found nothing,
and the retry queued behind it; when the lock was released the orphan
committed and the retry failed its version check, so a committed save was
reported as "saved by another writer" and the object kept the old version.
The save now ends the orphaned backend before checking.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from actormem.session import PostgresSession
from tests._pgproxy import CutProxy


def _until(what: str, check: Callable[[], Any], timeout: float = 60.0) -> Any:
    """Poll ``check`` until it returns something truthy (the event), else fail."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.01)
    pytest.fail(f"timed out waiting for {what}")


@pytest.fixture
def proxy(pg_dsn: str) -> Iterator[CutProxy]:
    px = CutProxy(pg_dsn)
    yield px
    px.close()


def _waiting(watch: psycopg.Connection[Any]) -> set[int]:
    rows = watch.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
        "AND wait_event_type = 'Lock' AND query LIKE '%actormem_sessions%'"
    ).fetchall()
    return {int(r[0]) for r in rows}


@pytest.mark.parametrize("on_conflict", ["raise", "overwrite"])
def test_a_save_whose_reply_was_lost_counts_once(
    pg_dsn: str, proxy: CutProxy, on_conflict: str
) -> None:
    sessions = PostgresSession(proxy.dsn, on_conflict=on_conflict)  # type: ignore[arg-type]
    assert sessions.put("x", {"c": {"v": 1}}).version == 1
    watch = psycopg.connect(pg_dsn, autocommit=True)
    locker = psycopg.connect(pg_dsn)
    try:
        locker.execute("SELECT 1 FROM actormem_sessions WHERE session_id = 'x' FOR UPDATE")
        out: dict[str, Any] = {}

        def save() -> None:
            try:
                out["version"] = sessions.put("x", {"c": {"v": 2}}).version
            except Exception as exc:  # the test reports it
                out["error"] = exc

        saver = threading.Thread(target=save)
        saver.start()
        (orphan,) = _until("the save to wait on the row lock", lambda: _waiting(watch))
        proxy.cut()
        # the save goes on on a new connection: its retry (or its check) waits on the lock
        _until("the save to go on", lambda: _waiting(watch) - {orphan})
        locker.commit()
        saver.join(60)
        assert not saver.is_alive()
        assert out == {"version": 2}
    finally:
        locker.close()
    row = watch.execute(
        "SELECT version, convert_from(document, 'UTF8') FROM actormem_sessions"
    ).fetchone()
    assert row is not None and row[0] == 2 and '"v":2' in row[1].replace(" ", "")
    assert sessions.version("x") == 2
    assert sessions.put("x", {"c": {"v": 3}}).version == 3
    watch.close()
    sessions.close()

"""PostgresSession: the JsonSession contract on a real PostgreSQL, plus what a
shared database adds (version conflicts between workers, migrations, faults).

Every test gets a fresh database from the ``pg_dsn`` fixture.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import psycopg
import pytest

from actormem.session import (
    JsonSession,
    PostgresSession,
    SessionConflictError,
    SessionError,
    SessionManager,
    SessionStorage,
    SessionStorageError,
    open_sessions,
)
from actormem.session import _pg_layout as layout
from actormem.session import _postgres as pgmod
from actormem.state import StateModule
from tests._postgres import pg_url

ROOT = Path(__file__).resolve().parents[1]


class Counter(StateModule):
    def __init__(self, value: int = 0, notes: list[str] | None = None) -> None:
        super().__init__()
        self.value = value
        self.notes = notes or []
        self.register_state("value")
        self.register_state("notes")


def _nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth):
        value = [value]
    return value


@pytest.fixture(params=["json", "postgres"])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionStorage]:
    """Each storage, for the tests of the contract they share."""
    if request.param == "json":
        yield JsonSession(tmp_path / "sessions")
        return
    dsn = request.getfixturevalue("pg_dsn")
    with PostgresSession(dsn) as s:
        yield s


@pytest.fixture
def pg(pg_dsn: str) -> Iterator[PostgresSession]:
    with PostgresSession(pg_dsn) as s:
        yield s


def _write_raw(
    dsn: str, session_id: str, document: bytes, table: str = "actormem_sessions"
) -> None:
    """Put bytes in a session's row by hand (what a bug or a person could leave there)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            f"UPDATE {table} SET document = %b WHERE session_id = %s", (document, session_id)
        )


def _row(dsn: str, session_id: str) -> tuple[Any, ...] | None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(
            "SELECT version, document, saved_by FROM actormem_sessions WHERE session_id = %s",
            (session_id,),
        ).fetchone()


# -- the contract both storages share ------------------------------------------------------


def test_round_trip_exists_list_read_delete(storage: SessionStorage) -> None:
    assert not storage.exists("a") and storage.list() == []
    storage.save("a", {"counter": Counter(5, ["x"])})
    assert storage.exists("a")
    c = Counter()
    assert storage.load("a", {"counter": c}) and (c.value, c.notes) == (5, ["x"])
    assert storage.read("a") == {"counter": {"value": 5, "notes": ["x"]}}
    assert storage.load("missing", {"counter": c}) is False
    with pytest.raises(SessionError, match="not found"):
        storage.load("missing", {"counter": c}, allow_missing=False)
    with pytest.raises(SessionError, match="not found"):
        storage.read("missing")
    storage.save("b", {"counter": Counter(1)})
    listed = storage.list()
    assert [i.session_id for i in listed] == ["b", "a"]  # newest first
    assert all(i.nbytes > 0 and i.modified_at > 0 for i in listed)
    assert storage.delete("a") and not storage.delete("a") and not storage.exists("a")
    assert [i.session_id for i in storage.list()] == ["b"]


@pytest.mark.parametrize("bad", ["", "../x", "a/b", "x\x00y", ".hidden", "a" * 200, 5])
def test_bad_ids_are_refused_before_anything_is_stored(storage: SessionStorage, bad: Any) -> None:
    with pytest.raises(SessionError):
        storage.save(bad, {"c": Counter()})
    with pytest.raises(SessionError):
        storage.load(bad, {"c": Counter()})
    assert storage.list() == []


def test_unencodable_state_is_refused_and_the_old_session_kept(storage: SessionStorage) -> None:
    storage.save("s", {"c": Counter(1)})
    bad = Counter(2)
    bad.notes = [object()]  # type: ignore[list-item]
    with pytest.raises(SessionError, match="not JSON-serialisable"):
        storage.save("s", {"c": bad})
    c = Counter()
    assert storage.load("s", {"c": c}) and c.value == 1


@pytest.mark.parametrize(
    ("notes", "names"),
    [
        ([1.0, float("nan")], r"state value c\.notes\[1\] is not a finite number"),
        ([{"deep": {"x": float("-inf")}}], r"c\.notes\[0\]\.deep\.x is not a finite number"),
        (["ok", "\ud800"], "not valid Unicode"),
        ([_nested(3000)], "nested too deeply"),
    ],
    ids=["nan", "infinity", "lone-surrogate", "too-deep"],
)
def test_a_state_json_would_change_is_refused_naming_it(
    storage: SessionStorage, notes: list[Any], names: str
) -> None:
    """NaN and infinity would come back as null, a lone surrogate and a state
    nested past the encoder's depth cannot be written: each is a SessionError
    naming the problem (not a raw UnicodeEncodeError / RecursionError, not a
    silent null), the same on both backends, and the old session stays."""
    storage.save("s", {"c": Counter(1, ["kept"])})
    with pytest.raises(SessionError, match=names):
        storage.save("s", {"c": Counter(2, notes)})
    c = Counter()
    assert storage.load("s", {"c": c}) and (c.value, c.notes) == (1, ["kept"])


def test_a_state_with_null_but_finite_numbers_saves_and_loads_equal(
    storage: SessionStorage,
) -> None:
    """The NaN check runs when the document holds a null; a null beside finite
    floats is saved as before."""
    notes: list[Any] = [None, 0.5, -0.0, 1e308, {"k": None}]
    storage.save("s", {"c": Counter(3, notes)})
    c = Counter()
    assert storage.load("s", {"c": c}) and c.notes == notes


def test_json_normalises_tuples_sets_keys_and_bytes_as_the_readme_says(
    storage: SessionStorage,
) -> None:
    notes: list[Any] = [(1, 2), {"b", "a"}, {1: "one"}, b"\x00\xff"]
    storage.save("s", {"c": Counter(1, notes)})
    c = Counter()
    assert storage.load("s", {"c": c})
    assert c.notes[0] == [1, 2] and sorted(c.notes[1]) == ["a", "b"]
    assert c.notes[2] == {"1": "one"} and c.notes[3] == "AP8="  # base64 of the bytes


def test_a_manager_loads_a_session_saved_before_a_component_existed_only_when_told(
    storage: SessionStorage,
) -> None:
    SessionManager.for_session("s").with_session(storage).add_component(Counter(5), "a").save()
    a, b = Counter(), Counter(9)
    manager = (
        SessionManager.for_session("s").with_session(storage).add_component(a, "a")
    ).add_component(b, "b")
    with pytest.raises(SessionError, match=r"no state for component\(s\) \['b'\]"):
        manager.load_if_exists()
    assert (a.value, b.value) == (0, 9)  # strict: nothing restored
    assert manager.load_if_exists(strict=False)
    assert (a.value, b.value) == (5, 9)  # what the session has; b as it was


def test_a_rejected_component_leaves_every_component_as_it_was(storage: SessionStorage) -> None:
    storage.save_state("s", {"a": {"value": 7, "notes": []}, "b": {"wrong": 1}})
    a, b = Counter(1, ["keep"]), Counter(2)
    with pytest.raises(SessionError, match="component 'b' rejected its state"):
        storage.load("s", {"a": a, "b": b})
    assert (a.value, a.notes, b.value) == (1, ["keep"], 2)
    with pytest.raises(SessionError, match="no state for component"):
        storage.load("s", {"a": Counter(), "zzz": Counter()})


# The same document refused by both storages with the same words.
DOCS = [
    (b"{not json", "corrupt or not JSON"),
    (b'{"format": "other.thing", "schema_version": 1}', "not an actormem session"),
    (
        b'{"format": "actormem.session", "schema_version": 99, "session_id": "s",'
        b' "saved_at": "", "components": {}}',
        "newer than this actormem supports",
    ),
    (b'{"format": "actormem.session", "schema_version": 1}', "malformed"),
    (b'{"format": "actormem.session", "schema_version": 0}', "invalid schema version"),
]


@pytest.mark.parametrize(("document", "words"), DOCS)
def test_bad_documents_are_refused_like_json_files(
    pg_dsn: str, tmp_path: Path, document: bytes, words: str
) -> None:
    js = JsonSession(tmp_path)
    js.save("s", {"c": Counter(3)})
    js.path("s").write_bytes(document)
    with PostgresSession(pg_dsn) as ps:
        ps.save("s", {"c": Counter(3)})
        _write_raw(pg_dsn, "s", document)
        for storage in (js, ps):
            c = Counter(1, ["mine"])
            with pytest.raises(SessionError, match=words) as info:
                storage.load("s", {"c": c})
            assert (c.value, c.notes) == (1, ["mine"])  # nothing changed
            with pytest.raises(SessionError, match=words):
                storage.read("s")
            if storage is ps:
                assert "'s'" in str(info.value) and "actormem_sessions" in str(info.value)


def test_the_stored_document_is_the_json_sessions_document(
    pg: PostgresSession, pg_dsn: str
) -> None:
    pg.save("s", {"counter": Counter(4, ["n"])})
    row = _row(pg_dsn, "s")
    assert row is not None
    doc = msgspec.json.decode(bytes(row[1]))
    assert doc["format"] == "actormem.session" and doc["schema_version"] == 1
    assert doc["session_id"] == "s" and doc["components"] == {
        "counter": {"value": 4, "notes": ["n"]}
    }
    # A file and a row are interchangeable: the bytes of one load as the other.
    assert row[2].endswith(f":{__import__('os').getpid()}")


# -- versions and two writers ---------------------------------------------------------


def test_versions_count_saves_and_the_location_hides_the_password(pg_dsn: str) -> None:
    with PostgresSession(pg_dsn) as s:
        info = s.put("v", {"c": {"value": 1, "notes": []}})
        assert info.version == 1 and s.version("v") == 1
        assert s.put("v", {"c": {"value": 2, "notes": []}}).version == 2
        assert [i.version for i in s.list()] == [2]
        assert info.path.startswith("postgresql://") and info.path.endswith("#actormem_sessions/v")
    secret = psycopg.conninfo.make_conninfo(pg_dsn, password="hunter2")
    with PostgresSession(secret) as s2:
        assert "hunter2" not in s2.location("v") and "hunter2" not in repr(s2)


def test_a_stale_writer_gets_a_conflict_and_nothing_is_written(pg_dsn: str) -> None:
    with PostgresSession(pg_dsn) as a, PostgresSession(pg_dsn) as b:
        a.save("s", {"c": Counter(1)})
        ca, cb = Counter(), Counter()
        assert a.load("s", {"c": ca}) and b.load("s", {"c": cb})
        ca.value, cb.value = 10, 20
        a.save("s", {"c": ca})
        with pytest.raises(SessionConflictError, match="saved by another writer") as info:
            b.save("s", {"c": cb})
        err = info.value
        assert (err.expected_version, err.stored_version) == (1, 2)
        assert err.saved_by is not None and err.session_id == "s"
        assert a.read("s")["c"]["value"] == 10  # the winner's state, whole
        # b continues by loading again, then its save goes through.
        assert b.load("s", {"c": cb}) and cb.value == 10
        cb.value = 21
        b.save("s", {"c": cb})
        assert a.read("s")["c"]["value"] == 21
        with pytest.raises(SessionConflictError):
            a.save("s", {"c": ca})  # now a is the stale one


def test_saving_over_a_session_never_loaded_is_a_conflict(pg_dsn: str) -> None:
    with PostgresSession(pg_dsn) as a, PostgresSession(pg_dsn) as b:
        a.save("s", {"c": Counter(1)})
        with pytest.raises(SessionConflictError, match="has not loaded it") as info:
            b.save("s", {"c": Counter(99)})
        assert info.value.expected_version == 0 and info.value.stored_version == 1
        assert a.read("s")["c"]["value"] == 1
        # "known absent" after a load that found nothing: a creator racing it wins.
        assert b.load("t", {"c": Counter()}) is False and b.version("t") == 0
        a.save("t", {"c": Counter(5)})
        with pytest.raises(SessionConflictError):
            b.save("t", {"c": Counter(6)})


def test_a_session_deleted_by_another_writer_is_not_silently_recreated(pg_dsn: str) -> None:
    with PostgresSession(pg_dsn) as a, PostgresSession(pg_dsn) as b:
        a.save("s", {"c": Counter(1)})
        assert b.load("s", {"c": Counter()})
        assert a.delete("s")
        with pytest.raises(SessionConflictError, match="deleted by another writer") as info:
            b.save("s", {"c": Counter(2)})
        assert info.value.stored_version is None and not a.exists("s")
        a.save("s", {"c": Counter(3)})  # the deleter may create it again
        assert b.load("s", {"c": Counter()}) and b.version("s") == 1


def test_overwrite_mode_is_last_writer_wins(pg_dsn: str) -> None:
    with (
        PostgresSession(pg_dsn, on_conflict="overwrite") as a,
        PostgresSession(pg_dsn, on_conflict="overwrite") as b,
    ):
        a.save("s", {"c": Counter(1)})
        b.save("s", {"c": Counter(2)})  # never loaded: still allowed
        a.save("s", {"c": Counter(3)})
        assert b.read("s")["c"]["value"] == 3 and a.version("s") == 3
    with pytest.raises(SessionError, match="on_conflict"):
        PostgresSession(pg_dsn, on_conflict="sometimes")  # type: ignore[arg-type]


_INCREMENTER = textwrap.dedent(
    """
    import sys, time
    from actormem.session import PostgresSession, SessionConflictError
    from actormem.state import StateModule

    class Counter(StateModule):
        def __init__(self):
            super().__init__()
            self.value = 0
            self.by = []
            self.register_state("value")
            self.register_state("by")

    dsn, me, n, gate = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    s = PostgresSession(dsn)
    c = Counter()
    print("ready", flush=True)
    while not __import__("os").path.exists(gate):
        time.sleep(0.005)
    done = conflicts = 0
    while done < n:
        s.load("shared", {"c": c})
        c.value += 1
        c.by.append(me)
        try:
            s.save("shared", {"c": c})
        except SessionConflictError:
            conflicts += 1
            continue
        done += 1
    print(f"done {done} {conflicts}", flush=True)
    """
)


def test_concurrent_processes_never_lose_an_update(pg_dsn: str, tmp_path: Path) -> None:
    """4 processes do read-modify-save of one session as fast as they can: with the
    version check every acknowledged save is in the final state, none twice."""
    workers, each = 4, 15
    with PostgresSession(pg_dsn) as s:
        s.save_state("shared", {"c": {"value": 0, "by": []}})
    script = tmp_path / "inc.py"
    script.write_text(_INCREMENTER)
    gate = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), pg_dsn, f"w{i}", str(each), str(gate)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        for i in range(workers)
    ]
    try:
        for p in procs:
            assert p.stdout is not None
            assert p.stdout.readline().strip() == "ready", p.stderr.read() if p.stderr else ""
        gate.touch()  # all start at once
        outs = [p.communicate(timeout=300) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
        assert out.split()[:2] == ["done", str(each)]
    with PostgresSession(pg_dsn) as s:
        state = s.read("shared")["c"]
        assert state["value"] == workers * each
        assert sorted(state["by"]) == sorted(f"w{i}" for i in range(workers) for _ in range(each))
        assert s.list()[0].version == workers * each + 1


# -- schema and migrations ------------------------------------------------------------------


def test_the_layout_version_is_recorded_and_a_newer_one_refused(pg_dsn: str) -> None:
    PostgresSession(pg_dsn).close()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        row = conn.execute("SELECT version FROM actormem_sessions_schema").fetchone()
        assert row == (layout.LAYOUT_VERSION,)
        conn.execute("UPDATE actormem_sessions_schema SET version = 99")
    with pytest.raises(SessionStorageError, match="layout version 99, newer than this actormem"):
        PostgresSession(pg_dsn)


def test_pending_migrations_run_once_when_workers_open_at_once(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with PostgresSession(pg_dsn) as s:  # layout 1, with a session in it
        s.save("old", {"c": Counter(8)})
    step = (
        "ALTER TABLE {t} ADD COLUMN note text NOT NULL DEFAULT ''",
        "INSERT INTO migration_log VALUES (clock_timestamp())",
    )
    monkeypatch.setattr(layout, "MIGRATIONS", [*layout.MIGRATIONS, step])
    monkeypatch.setattr(layout, "LAYOUT_VERSION", len(layout.MIGRATIONS))
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE migration_log (at timestamptz)")
    opened: list[PostgresSession] = []
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def open_one() -> None:
        start.wait()
        try:
            opened.append(PostgresSession(pg_dsn))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(opened) == 4
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM migration_log").fetchone() == (1,)
        row = conn.execute("SELECT version FROM actormem_sessions_schema").fetchone()
        assert row == (len(layout.MIGRATIONS),)
    c = Counter()
    assert opened[0].load("old", {"c": c}) and c.value == 8  # data kept across the step
    for s in opened:
        s.close()


def test_table_names_are_checked_and_tables_are_separate(pg_dsn: str) -> None:
    with pytest.raises(SessionError, match="table name"):
        PostgresSession(pg_dsn, table="x; DROP TABLE y")
    with PostgresSession(pg_dsn, table="team_a") as a, PostgresSession(pg_dsn, table="team_b") as b:
        a.save("s", {"c": Counter(1)})
        assert not b.exists("s") and b.list() == []


# -- faults ------------------------------------------------------------------------------------


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_an_unreachable_server_is_a_clear_error() -> None:
    dsn = f"postgresql://ada:s3cret@127.0.0.1:{_closed_port()}/memories"
    with pytest.raises(SessionStorageError, match="cannot connect to the sessions database") as i:
        PostgresSession(dsn, connect_timeout=2)
    assert "127.0.0.1" in str(i.value) and "/memories" in str(i.value)
    assert "s3cret" not in str(i.value)


def test_a_missing_database_is_a_clear_error(pg_dsn: str) -> None:
    wrong = psycopg.conninfo.make_conninfo(pg_dsn, dbname="no_such_db_here")
    with pytest.raises(SessionStorageError, match="no_such_db_here"):
        PostgresSession(wrong)


def test_the_postgres_extra_is_needed_only_for_a_dsn(tmp_path: Path) -> None:
    code = textwrap.dedent(
        f"""
        import sys
        sys.modules["psycopg"] = None          # as if the extra were not installed
        from actormem import MemoryRuntime, PostgresSession
        with MemoryRuntime(session_dir={str(tmp_path)!r}) as rt:
            rt.save_session("fine")
        try:
            PostgresSession("postgresql://localhost/x")
        except ImportError as exc:
            print("ERR", exc)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert "pip install 'actormem[postgres]'" in out.stdout
    assert (tmp_path / "fine.json").is_file()


def _backend_pid(s: PostgresSession) -> int:
    conn = s._connection()
    return int(conn.info.backend_pid)


def _wait_for(cond: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def _new_backend(s: PostgresSession, old: int) -> int:
    """Wait until ``s`` has reconnected after ``old`` died; the new backend's pid."""
    pids: list[int] = []

    def reconnected() -> bool:
        conn = s._conn
        if conn is not None and not conn.closed and conn.info.backend_pid != old:
            pids.append(conn.info.backend_pid)
        return bool(pids)

    _wait_for(reconnected, "a reconnect")
    return pids[0]


class _RowLock:
    """Holds the session's row lock from another connection, so a save waits on it."""

    def __init__(self, dsn: str, session_id: str) -> None:
        self.conn = psycopg.connect(dsn)
        self.conn.execute(
            "SELECT 1 FROM actormem_sessions WHERE session_id = %s FOR UPDATE", (session_id,)
        )

    def waiting(self, pid: int) -> bool:
        with psycopg.connect(self.conn.info.dsn, autocommit=True) as c:
            row = c.execute(
                "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,)
            ).fetchone()
        return row is not None and row[0] == "Lock"

    def kill(self, pid: int) -> None:
        with psycopg.connect(self.conn.info.dsn, autocommit=True) as c:
            assert c.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone() == (True,)

    def release(self) -> None:
        self.conn.rollback()
        self.conn.close()


def test_a_connection_killed_mid_save_is_retried_once_and_saves_once(pg_dsn: str) -> None:
    s = PostgresSession(pg_dsn)
    s.save("s", {"c": Counter(1)})
    lock = _RowLock(pg_dsn, "s")
    pid = _backend_pid(s)
    result: list[Any] = []
    t = threading.Thread(target=lambda: result.append(s.put("s", {"c": {"value": 2, "notes": []}})))
    t.start()
    _wait_for(lambda: lock.waiting(pid), "the save to wait on the row lock")
    lock.kill(pid)  # the save's backend dies mid-statement
    _new_backend(s, pid)
    lock.release()
    t.join(60)
    assert result and result[0].version == 2  # saved exactly once
    assert s.read("s")["c"]["value"] == 2
    s.close()


def test_a_connection_killed_on_every_attempt_keeps_the_old_session_whole(pg_dsn: str) -> None:
    s = PostgresSession(pg_dsn)
    s.save("s", {"c": Counter(1, ["old"])})
    old = _row(pg_dsn, "s")
    lock = _RowLock(pg_dsn, "s")
    errors: list[BaseException] = []

    def save() -> None:
        try:
            s.save("s", {"c": Counter(2, ["new" * 1000])})
        except BaseException as exc:
            errors.append(exc)

    pid = _backend_pid(s)
    t = threading.Thread(target=save)
    t.start()
    _wait_for(lambda: lock.waiting(pid), "the save to wait on the row lock")
    lock.kill(pid)  # the first attempt dies...
    retry_pid = _new_backend(s, pid)
    _wait_for(lambda: lock.waiting(retry_pid), "the retry to wait on the row lock")
    lock.kill(retry_pid)  # ...and so does its retry
    t.join(60)
    lock.release()
    assert len(errors) == 1 and isinstance(errors[0], SessionStorageError)
    msg = str(errors[0])
    assert "connection lost" in msg and "unchanged" in msg and "'s'" in msg
    assert _row(pg_dsn, "s") == old  # the old version, byte for byte
    c = Counter()
    assert s.load("s", {"c": c}) and (c.value, c.notes) == (1, ["old"])
    s.save("s", {"c": Counter(3)})  # the session works again
    assert s.version("s") == 2
    s.close()


def test_a_commit_whose_reply_was_lost_counts_once(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The connection dies after the save committed but before the reply arrived:
    the save must not be retried into a false conflict or a second version."""
    s = PostgresSession(pg_dsn)
    s.save("s", {"c": Counter(1)})
    real = PostgresSession._write
    calls = []

    def commit_then_die(self: PostgresSession, conn: psycopg.Connection[Any], *a: Any) -> Any:
        calls.append(1)
        real(self, conn, *a)  # committed (autocommit)
        with psycopg.connect(pg_dsn, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))
        return conn.execute("SELECT 1").fetchone()  # the reply never comes

    monkeypatch.setattr(PostgresSession, "_write", commit_then_die)
    info = s.put("s", {"c": {"value": 2, "notes": []}})
    monkeypatch.undo()
    assert calls == [1] and info.version == 2 and s.version("s") == 2
    assert s.read("s")["c"]["value"] == 2
    s.save("s", {"c": Counter(3)})  # the remembered version is right
    s.close()


def test_a_closed_session_storage_says_so(pg: PostgresSession) -> None:
    pg.close()
    with pytest.raises(SessionStorageError, match="closed"):
        pg.list()


# -- who takes it: the runtime, SessionManager, the agent, the CLI ---------------------------------


def test_open_sessions_picks_the_backend(pg_dsn: str, tmp_path: Path) -> None:
    assert isinstance(open_sessions(tmp_path), JsonSession)
    pg = open_sessions(pg_url(pg_dsn))
    assert isinstance(pg, PostgresSession)
    assert open_sessions(pg_url(pg_dsn).replace("postgresql://", "postgres://", 1)).list() == []
    assert open_sessions(pg) is pg
    pg.close()
    with pytest.raises(TypeError, match="postgresql:// URL"):
        open_sessions(42)  # type: ignore[arg-type]


def test_session_manager_with_postgres(pg_dsn: str) -> None:
    with PostgresSession(pg_dsn) as s:
        m = SessionManager.for_session("u1").with_session(s).add_component(Counter(4), "c")
        assert m.load_if_exists() is False
        where = m.save()
        assert isinstance(where, str) and where.endswith("/u1")
        c = Counter()
        m2 = SessionManager.for_session("u1").with_session(s).add_component(c, "c")
        assert m2.load_if_exists() and c.value == 4
    with pytest.raises(SessionError, match="session storage"):
        SessionManager("x").with_session(object())  # type: ignore[arg-type]


def test_runtimes_share_sessions_through_postgres(pg_dsn: str, tmp_path: Path) -> None:
    from actormem import MemoryRuntime, Msg
    from actormem.events import SessionLoaded, SessionSaved

    url = pg_url(pg_dsn)
    with MemoryRuntime(session_dir=tmp_path, sessions=url) as rt:
        events: list[Any] = []
        rt.subscribe(events.append, SessionSaved)
        rt.add([Msg.user("I'm Ada, flying to Lisbon."), Msg.assistant("Noted.")])
        where = rt.save_session("ada")
        assert isinstance(where, str) and where.endswith("#actormem_sessions/ada")
        _wait_for(lambda: bool(events), "SessionSaved")
        assert events[0].path == where and events[0].nbytes > 100
        owned = rt.session
    with pytest.raises(SessionStorageError, match="closed"):
        owned.list()  # the runtime opened it from the URL, so close() closed it
    assert list(tmp_path.iterdir()) == []  # nothing went to the folder
    with MemoryRuntime(session_dir=tmp_path, sessions=url) as rt2:
        loaded: list[Any] = []
        rt2.subscribe(loaded.append, SessionLoaded)
        assert rt2.load_session("ada")
        assert [m.text for m in rt2.messages()] == ["I'm Ada, flying to Lisbon.", "Noted."]
        _wait_for(lambda: bool(loaded), "SessionLoaded")
        assert loaded[0].path.endswith("#actormem_sessions/ada")
        rt2.add(Msg.user("And back on the 20th."))
        rt2.save_session("ada")
    with PostgresSession(pg_dsn) as s:  # a storage given as an object stays open
        with MemoryRuntime(session_dir=tmp_path, sessions=s) as rt3:
            assert rt3.load_session("ada") and rt3.size() == 3
        assert s.list()[0].version == 2


def test_a_bad_sessions_dsn_leaves_nothing_running(tmp_path: Path) -> None:
    import pykka

    from actormem import MemoryRuntime

    dsn = f"postgresql://ada@127.0.0.1:{_closed_port()}/memories"
    with pytest.raises(SessionStorageError, match="cannot connect"):
        MemoryRuntime(session_dir=tmp_path, sessions=dsn)
    assert pykka.ActorRegistry.get_all() == []
    with pytest.raises(SessionError, match="sessions='postgresql://"):
        MemoryRuntime(session_dir=dsn)


def test_an_agent_resumes_in_another_worker_and_a_stale_agent_cannot_clobber_it(
    pg_dsn: str, tmp_path: Path
) -> None:
    from actormem import MemoryRuntime, ReActAgent
    from actormem.models.scripted import ScriptedModel

    url = pg_url(pg_dsn)
    with (
        MemoryRuntime(session_dir=tmp_path / "w1", sessions=url) as m1,
        MemoryRuntime(session_dir=tmp_path / "w2", sessions=url) as m2,
    ):
        a1 = ReActAgent("bot", ScriptedModel.echo("one: "), m1, session_id="trip")
        a1.reply("first question")
        a2 = ReActAgent("bot", ScriptedModel.echo("two: "), m2, session_id="trip")
        assert a2.load_session()  # worker 2 resumes what worker 1 saved
        assert [m.text for m in m2.messages()][-2:] == ["first question", "one: first question"]
        a2.reply("second question")
        # worker 1 still holds the old version: its save is refused, not merged over.
        with pytest.raises(SessionConflictError):
            a1.save_session()
        with PostgresSession(pg_dsn) as s:
            texts = [
                b["text"]
                for m in s.read("trip")["runtime"]["short_term"]["messages"]
                for b in m["content"]
            ]
        assert texts[-2:] == ["second question", "two: second question"]
        assert a1.load_session() and m1.messages()[-1].text == "two: second question"


def test_cli_sessions_commands_on_postgres(pg_dsn: str, tmp_path: Path) -> None:
    import json

    from actormem import MemoryRuntime, Msg

    url = pg_url(pg_dsn)
    with MemoryRuntime(session_dir=tmp_path, sessions=url) as rt:
        rt.add([Msg.user("remember the milk"), Msg.assistant("ok")])
        rt.save_session("s1")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "actormem.cli", "sessions", *args, "--sessions", url],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=120,
        )

    listed = run("list", "--json")
    assert listed.returncode == 0, listed.stderr
    [item] = json.loads(listed.stdout)
    assert item["session_id"] == "s1" and item["version"] == 1 and item["bytes"] > 0
    table = run("list")
    assert table.returncode == 0 and "s1" in table.stdout and "version" in table.stdout
    shown = run("show", "s1")
    assert shown.returncode == 0 and "remember the milk" in shown.stdout
    assert run("delete", "s1").returncode == 0
    gone = run("delete", "s1")
    assert gone.returncode == 2 and "no session 's1'" in gone.stderr
    assert "actormem_sessions" in gone.stderr
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "actormem.cli",
            "sessions",
            "list",
            "--sessions",
            f"postgresql://x@127.0.0.1:{_closed_port()}/db",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "cannot connect to the sessions database" in bad.stderr
    assert "Traceback" not in bad.stderr and list(tmp_path.iterdir()) == []


def test_an_idle_connection_killed_between_calls_is_replaced(pg_dsn: str) -> None:
    """A server restart or a pooler can close an idle connection: the next read
    and the next save go through on a new one (each retried once, safely)."""
    s = PostgresSession(pg_dsn)
    s.save("s", {"c": Counter(1)})
    for op in ("load", "save", "list"):
        pid = _backend_pid(s)
        with psycopg.connect(pg_dsn, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            _wait_for(
                lambda p=pid: (  # type: ignore[misc]
                    admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (p,)).fetchone()
                    is None
                ),
                "the backend to exit",
            )
        c = Counter()
        if op == "load":
            assert s.load("s", {"c": c}) and c.value == 1
        elif op == "save":
            s.save("s", {"c": Counter(2)})
            assert s.version("s") == 2  # saved once, no false conflict
        else:
            assert [i.session_id for i in s.list()] == ["s"]
        assert _backend_pid(s) != pid
    s.close()


def test_a_forked_worker_opens_its_own_connection(pg_dsn: str) -> None:
    """gunicorn --preload forks workers after the app (and its session storage) exists:
    the child must not talk on the parent's socket."""
    code = textwrap.dedent(
        f"""
        import os, sys
        from actormem.session import PostgresSession
        s = PostgresSession({pg_dsn!r}, on_conflict="overwrite")
        s.save_state("parent", {{"c": 1}})
        parent_pid = s._connection().info.backend_pid
        child = os.fork()
        if child == 0:
            s.save_state("child", {{"c": 2}})
            ok = s._connection().info.backend_pid != parent_pid and s.read("parent") == {{"c": 1}}
            os._exit(0 if ok else 3)
        _, status = os.waitpid(child, 0)
        assert os.waitstatus_to_exitcode(status) == 0, status
        assert s._connection().info.backend_pid == parent_pid  # the parent keeps its connection
        assert sorted(i.session_id for i in s.list()) == ["child", "parent"]
        print("ok")
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_a_save_whose_outcome_cannot_be_checked_says_so(pg_dsn: str, pg_server_dsn: str) -> None:
    """The connection dies mid-save and the database refuses new connections: the
    error must not claim the session is unchanged (it cannot know)."""
    from psycopg.conninfo import conninfo_to_dict

    dbname = conninfo_to_dict(pg_dsn)["dbname"]
    s = PostgresSession(pg_dsn, connect_timeout=2)
    s.save("s", {"c": Counter(1)})
    lock = _RowLock(pg_dsn, "s")
    errors: list[BaseException] = []

    def save() -> None:
        try:
            s.save("s", {"c": Counter(2)})
        except BaseException as exc:
            errors.append(exc)

    pid = _backend_pid(s)
    t = threading.Thread(target=save)
    t.start()
    _wait_for(lambda: lock.waiting(pid), "the save to wait on the row lock")
    with psycopg.connect(pg_server_dsn, autocommit=True) as admin:
        admin.execute(f'ALTER DATABASE "{dbname}" WITH ALLOW_CONNECTIONS false')
        try:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            t.join(60)
        finally:
            admin.execute(f'ALTER DATABASE "{dbname}" WITH ALLOW_CONNECTIONS true')
    lock.release()
    assert len(errors) == 1 and isinstance(errors[0], SessionStorageError), errors
    msg = str(errors[0])
    assert "could not be checked" in msg and "unchanged" not in msg
    c = Counter()
    assert s.load("s", {"c": c}) and c.value == 1  # (it had not committed)
    s.close()


def test_a_connection_whose_first_query_fails_is_closed_not_leaked(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Connecting succeeds, then the query that reads the server process's id fails:
    the error is a SessionStorageError and the connection is closed, not left open
    for the garbage collector (each retry would leak another one)."""
    opened: list[psycopg.Connection[Any]] = []
    real_connect = psycopg.connect

    class _FirstQueryFails:
        Error = psycopg.Error

        @staticmethod
        def connect(*args: Any, **kwargs: Any) -> Any:
            conn = real_connect(*args, **kwargs)
            opened.append(conn)

            def refuse(*_a: Any, **_k: Any) -> Any:
                raise psycopg.OperationalError("the first query failed")

            conn.execute = refuse  # type: ignore[method-assign]
            return conn

    monkeypatch.setattr(pgmod, "_import_psycopg", lambda: _FirstQueryFails)
    try:
        with pytest.raises(SessionStorageError, match="the first query failed"):
            PostgresSession(pg_dsn).list()
        assert opened and all(conn.closed for conn in opened)
    finally:
        for conn in opened:
            conn.close()

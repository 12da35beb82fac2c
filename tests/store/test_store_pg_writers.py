"""PostgreSQL: workers of an older actormem that are still running during and after a
migration.

The migration's advisory lock holds off only the workers that open the store
after it.  A worker started before keeps writing: during the migration its
writes wait for the migration's table lock (none lands between a step's read
of ``memories`` and the triggers it sets up), and afterwards the schema's
writer-version guard refuses them with an error that tells it to upgrade.
The races are driven from a hook inside the migration, waiting on the other
backend's lock wait as the server reports it (no sleeps).
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from actormem.models.embedders import HashEmbedder
from actormem.store import Namespace, SearchFilters, StoreError
from actormem.store import _pg_open_groups as open_groups
from actormem.store import _pg_schema as schema
from actormem.store._pg_groups import GROUP_SETTING
from actormem.store._postgres import PostgresStore
from tests.store._pg_old_writers import as_old_writer, insert_rows_v7

psycopg = pytest.importorskip("psycopg")

ROW = (
    "INSERT INTO memories (id, kind, content, content_hash, importance, created_at, "
    "updated_at, last_accessed, terms, tfs, doclen) VALUES (%s, 'fact', 'kiwi', 'h', 0.5, "
    "0, 0, 0, '{kiwi}', %s::int[], %s)"
)
LIVE = "deleted_at IS NULL AND superseded_by IS NULL"
EVERYTHING = SearchFilters(min_importance=0.0)  # BM25 from the rows, not the postings


def _open(dsn: str, **kwargs: Any) -> PostgresStore:
    return PostgresStore(
        dsn,
        embedder=HashEmbedder(16),
        near_duplicate_threshold=None,
        touch_flush_interval=None,
        hnsw_min_rows=None,
        **kwargs,
    )


class _Hooked:
    """A connection whose ``execute`` calls ``hook`` before a statement containing ``at``."""

    def __init__(self, conn: Any, at: str, hook: Any) -> None:
        self._conn, self._at, self._hook = conn, at, hook

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)

    def execute(self, query: Any, *args: Any) -> Any:
        if isinstance(query, str) and self._at in query:
            self._hook()
        return self._conn.execute(query, *args)


class _Writer(threading.Thread):
    """A worker's connection, opened before the migration, inserting one row."""

    def __init__(self, dsn: str, row_id: str, version: str | None) -> None:
        super().__init__(daemon=True)
        self.conn = psycopg.connect(dsn, autocommit=True)
        if version is not None:
            self.conn.execute("SELECT set_config(%s, %s, false)", (schema.WRITER_SETTING, version))
            # and, as that version's insert path does, its posting group (version 8
            # refuses an insert without one); its postings are not written here
            self.conn.execute("SELECT set_config(%s, '1', false)", (GROUP_SETTING,))
        self.pid = self.conn.info.backend_pid
        self.row_id = row_id
        self.error: BaseException | None = None
        self.finished = threading.Event()

    def run(self) -> None:
        try:
            self.conn.execute(ROW, (self.row_id, [9], 9))
        except BaseException as exc:
            self.error = exc
        finally:
            self.finished.set()


def _wait_blocked_or_done(watch: Any, writer: _Writer) -> str:
    """Until ``writer`` has finished or its backend waits on a lock; which one."""
    for _ in range(24_000):  # a 120 s bound, never reached unless the server hangs
        if writer.finished.wait(0.005):
            return "done"
        row = watch.execute(
            "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (writer.pid,)
        ).fetchone()
        if row is not None and row[0] == "Lock":
            return "blocked"
    raise AssertionError("the writer neither finished nor waited on a lock")


def test_writers_already_running_wait_for_the_migration_then_are_posted_or_refused(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        with monkeypatch.context() as m:
            m.setattr(schema, "PG_SCHEMA_VERSION", 3)
            schema.ensure_schema(conn, 4, "test")
        conn.execute(ROW, ("before", [2], 2))
    # two workers already running: one of the old version (declares nothing), one that
    # declares the version being installed
    old = _Writer(pg_dsn, "old-worker", None)
    new = _Writer(pg_dsn, "new-worker", str(schema.PG_SCHEMA_VERSION))
    seen: dict[str, str] = {}
    watch = psycopg.connect(pg_dsn, autocommit=True)

    def between_reading_and_the_triggers() -> None:
        # the v3 -> v4 step has copied the live rows' postings and not yet created
        # its triggers: both workers insert now
        for w in (old, new):
            w.start()
            seen[w.row_id] = _wait_blocked_or_done(watch, w)

    try:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            found, now = schema.ensure_schema(
                _Hooked(conn, "CREATE INDEX postings_key", between_reading_and_the_triggers),
                4,
                "test",
            )
            assert (found, now) == (3, schema.PG_SCHEMA_VERSION)
            assert seen == {"old-worker": "blocked", "new-worker": "blocked"}
            old.join()
            new.join()
            assert new.error is None
            assert isinstance(old.error, psycopg.Error)
            message = str(old.error)
            assert f"schema version {schema.PG_SCHEMA_VERSION}" in message
            assert "declares no version" in message and "older actormem" in message
            ids = [r[0] for r in conn.execute(f"SELECT id FROM memories WHERE {LIVE} ORDER BY 1")]
            assert ids == ["before", "new-worker"]  # the old worker's row is not stored
            # the row in the table when the step read it is posted (a row inserted by
            # hand after it is not: since version 5 the store's writer posts new rows)
            posted = conn.execute("SELECT id, tf FROM postings ORDER BY 1").fetchall()
            assert posted == [("before", 2)]
    finally:
        for w in (old, new):
            w.conn.close()
        watch.close()


def test_a_store_of_the_previous_version_still_open_is_refused_writes_after_a_migration(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ns = Namespace(user_id="u")
    monkeypatch.setattr(schema, "PG_SCHEMA_VERSION", schema.PG_SCHEMA_VERSION - 1)
    # one pooled connection: it declared the previous version when it was opened; it
    # inserts as the previous version's writer did (version 11's open posting groups
    # switched off: the insert path of version 10)
    monkeypatch.setattr(open_groups, "SMALL_BATCH", 0)
    old = _open(pg_dsn, pool_size=1, search_cache_bytes=None)
    try:
        kept = old.add(ns, "kiwi written before the upgrade").id
        monkeypatch.undo()
        new = _open(pg_dsn)  # a worker of the current version migrates
        try:
            with pytest.raises(StoreError) as err:
                old.add(ns, "kiwi written by the old worker after the upgrade")
            message = str(err.value)
            assert "rolled back" in message and "older actormem" in message
            assert f"declares {schema.PG_SCHEMA_VERSION - 1}" in message
            with pytest.raises(StoreError, match="older actormem"):
                old.update(ns, kept, content="changed by the old worker")
            # reads go on; nothing of the refused writes is stored
            assert [h.memory.id for h in old.search("kiwi", ns, 5, touch=False)] == [kept]
            assert [r.content for r in new.list(ns)] == ["kiwi written before the upgrade"]
            # the current version writes, updates and deletes as before
            added = new.add(ns, "kiwi written after the upgrade").id
            new.update(ns, kept, content="kiwi changed after the upgrade")
            new.delete(ns, added)
            assert [r.content for r in new.list(ns)] == ["kiwi changed after the upgrade"]
        finally:
            new.close()
    finally:
        old.close()


def test_a_connection_that_declares_nothing_or_garbage_cannot_write(pg_dsn: str) -> None:
    store = _open(pg_dsn)
    store.close()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        for declared in (None, "", "6x", "99999999999"):
            if declared is not None:
                conn.execute("SELECT set_config(%s, %s, false)", (schema.WRITER_SETTING, declared))
            with pytest.raises(psycopg.Error, match="older actormem"):
                conn.execute(ROW, ("x", [1], 1))
            with pytest.raises(psycopg.Error, match="older actormem"):
                conn.execute("UPDATE memories SET importance = 1")
        assert conn.execute("SELECT count(*) FROM memories").fetchone() == (0,)
        conn.execute(
            "SELECT set_config(%s, %s, false)",
            (schema.WRITER_SETTING, str(schema.PG_SCHEMA_VERSION)),
        )
        # the version is right, but rows enter only through the store's insert path
        with pytest.raises(psycopg.Error, match="only through the actormem store"):
            conn.execute(ROW, ("x", [1], 1))
        conn.execute("SELECT set_config(%s, '1', false)", (GROUP_SETTING,))
        conn.execute(ROW, ("x", [1], 1))
        assert conn.execute("SELECT count(*) FROM memories").fetchone() == (1,)


def test_a_database_with_doubled_postings_migrates_to_unique_ones(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a database at the shipped version 5 (its step dropped the statistics' insert
    # trigger only; the postings' one is still there), written by the build that
    # called "postings written by the writer" version 5 too: every new row is posted
    # twice, by the trigger and by the writer
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        with monkeypatch.context() as m:
            m.setattr(schema, "PG_SCHEMA_VERSION", 4)
            schema.ensure_schema(conn, 16, "test")
        conn.execute("DROP TRIGGER memories_stats_insert ON memories")
        conn.execute("DROP FUNCTION actormem_stats_insert()")
        conn.execute("INSERT INTO schema_version (version) VALUES (5)")
    monkeypatch.setattr(schema, "PG_SCHEMA_VERSION", 5)
    ns = Namespace(user_id="u")
    old = as_old_writer(_open(pg_dsn), insert_rows_v7)
    ids = [r.id for r in old.add_many(ns, ["kiwi pie", "kiwi tart", "plum jam"], dedup=False)]
    old.close()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        doubled = conn.execute(
            "SELECT count(*) FROM (SELECT 1 FROM postings GROUP BY term, user_id, agent_id, "
            "run_id, session_id, id HAVING count(*) > 1) d"
        ).fetchone()
        assert doubled == (6,)
    monkeypatch.undo()
    store = _open(pg_dsn)
    try:
        store.add(ns, "kiwi after the migration")
        store.delete(ns, ids[1])
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            assert conn.execute("SELECT max(version) FROM schema_version").fetchone() == (
                schema.PG_SCHEMA_VERSION,
            )
            want = conn.execute(
                f"SELECT u.term, id, u.tf FROM memories, unnest(terms, tfs) AS u(term, tf) "
                f"WHERE {LIVE} ORDER BY 1, 2"
            ).fetchall()
            got = conn.execute("SELECT term, id, tf FROM postings ORDER BY 1, 2").fetchall()
            assert got == want
            # a posting group written twice fails loudly (version 8 keeps the postings
            # by groups, unique per term, namespace and group)
            with pytest.raises(psycopg.errors.UniqueViolation):
                conn.execute("INSERT INTO posting_groups SELECT * FROM posting_groups LIMIT 1")
        # the postings' scores equal BM25 from the rows themselves (a doubled posting
        # would double a term's count)
        hits = store.search("kiwi", ns, 5, mode="keyword", touch=False)
        rows = store.search("kiwi", ns, 5, mode="keyword", touch=False, filters=EVERYTHING)
        assert len(hits) == 2
        assert [h.bm25 for h in hits] == pytest.approx([h.bm25 for h in rows], rel=1e-9)
    finally:
        store.close()


def test_a_row_inserted_by_hand_written_sql_is_refused_naming_why(pg_dsn: str) -> None:
    # rows get their keyword statistics and postings from the store's insert path only
    # (a trigger reading inserted rows would make COPY store them one at a time): an
    # INSERT or COPY of other SQL is refused instead of storing a row keyword search
    # cannot find; updates and deletes by SQL stay allowed (triggers keep them in step)
    store = _open(pg_dsn)
    ns = Namespace(user_id="u")
    kept = store.add(ns, "kiwi stored by the store").id
    try:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(
                "SELECT set_config(%s, %s, false)",
                (schema.WRITER_SETTING, str(schema.PG_SCHEMA_VERSION)),
            )
            with pytest.raises(psycopg.Error) as err:
                conn.execute(ROW, ("by-hand", [1], 1))
            message = str(err.value)
            assert "only through the actormem store" in message
            assert "nothing was inserted" in message and "keyword" in message
            copy_sql = (
                "COPY memories (id, kind, content, content_hash, importance, created_at, "
                "updated_at, last_accessed) FROM STDIN"
            )
            with (
                pytest.raises(psycopg.Error, match="only through the actormem store"),
                conn.cursor() as cur,
                cur.copy(copy_sql) as copy,
            ):
                copy.write_row(("copied", "fact", "kiwi", "h", 0.5, 0, 0, 0))
            assert conn.execute("SELECT id FROM memories").fetchall() == [(kept,)]
            conn.execute(
                "UPDATE memories SET content = 'kiwi by hand', terms = '{kiwi,hand}', "
                "tfs = '{1,1}', doclen = 2 WHERE id = %s",
                (kept,),
            )
        # the store's own writes go on; the hand-written update is found by keyword
        store.add(ns, "plum stored after the refusal")
        assert [h.memory.id for h in store.search("hand", ns, 5, mode="keyword")] == [kept]
        assert len(store.list(ns)) == 2
    finally:
        store.close()

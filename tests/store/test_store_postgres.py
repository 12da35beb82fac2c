"""PostgreSQL-only behaviour of the store: several stores on one database, faults.

The shared suite (``test_store_suite.py``) runs every store test on both
backends; these tests cover what only a server database has: two
``PostgresStore`` objects (two workers) on one database, concurrent writers,
connection failures and a database that lacks pgvector.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from actormem.models.embedders import HashEmbedder
from actormem.store import (
    EmbedderMismatchError,
    Namespace,
    NewMemory,
    SchemaVersionError,
    StoreError,
)
from actormem.store._postgres import PostgresStore
from actormem.store._records import query_text

psycopg = pytest.importorskip("psycopg")
register_vector = pytest.importorskip("pgvector.psycopg").register_vector


def _open(dsn: str, **kwargs: Any) -> PostgresStore:
    kwargs.setdefault("embedder", HashEmbedder(64))
    kwargs.setdefault("touch_flush_interval", None)
    kwargs.setdefault("near_duplicate_threshold", None)
    return PostgresStore(dsn, **kwargs)


@pytest.fixture
def two(pg_dsn: str) -> Iterator[tuple[PostgresStore, PostgresStore]]:
    a, b = _open(pg_dsn), _open(pg_dsn)
    yield a, b
    a.close()
    b.close()


NS = Namespace(user_id="alice", agent_id="assistant")


def test_a_write_by_one_store_is_found_by_the_other_stores_next_search(
    two: tuple[PostgresStore, PostgresStore],
) -> None:
    a, b = two
    for i in range(20):
        writer, reader = (a, b) if i % 2 else (b, a)
        res = writer.add(NS, f"note {i} mentions code zq{i}x")
        hits = reader.search(f"zq{i}x", NS, limit=3)
        assert hits and hits[0].memory.id == res.id, i
        assert reader.get(NS, res.id) is not None
    b.delete(NS, hits[0].memory.id)
    assert a.get(NS, hits[0].memory.id) is None
    assert all(h.memory.id != hits[0].memory.id for h in a.search("zq19x", NS))


def test_two_stores_adding_the_same_facts_at_once_store_each_once(
    two: tuple[PostgresStore, PostgresStore],
) -> None:
    texts = [f"the meeting {i} is in room {i}" for i in range(30)]
    start = threading.Barrier(2)
    results: dict[int, list[Any]] = {}
    errors: list[BaseException] = []

    def worker(k: int, store: PostgresStore) -> None:
        try:
            start.wait(timeout=60)
            order = texts if k == 0 else texts[::-1]
            results[k] = [store.add(NS, t) for t in order]
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k, s)) for k, s in enumerate(two)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    a, _ = two
    assert a.count(NS) == len(texts)
    ops = [r.op for rs in results.values() for r in rs]
    assert ops.count("ADD") == len(texts) and ops.count("MERGE") == len(texts)
    # every MERGE names the row the other worker added
    ids = {r.id for rs in results.values() for r in rs}
    assert ids == {m.id for m in a.list(NS, limit=1000)}
    assert len(a.history(NS)) == 2 * len(texts)  # one ADD and one MERGE row per text


class _Hooked(PostgresStore):
    """Runs ``hook(conn)`` inside each write transaction just before it commits."""

    hook: Any = None

    def _before_commit(self, conn: Any) -> None:
        if self.hook is not None:
            self.hook(conn)


def _blocked_on_advisory_lock(dsn: str) -> bool:
    with psycopg.connect(dsn, autocommit=True) as admin:
        row = admin.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
        ).fetchone()
    return bool(row and row[0])


def test_a_duplicate_added_while_the_first_is_uncommitted_is_merged(pg_dsn: str) -> None:
    # A is held inside its transaction (row inserted, not committed) until B
    # either reaches its own commit (no locking: both rows would be stored) or
    # waits on A's namespace lock.  Then A commits and B must merge.
    a = _Hooked(pg_dsn, embedder=HashEmbedder(64), touch_flush_interval=None)
    b = _Hooked(pg_dsn, embedder=HashEmbedder(64), touch_flush_interval=None)
    a_in, b_in = threading.Event(), threading.Event()

    def hold_a(conn: Any) -> None:
        a_in.set()
        for _ in range(3000):
            if b_in.wait(0.01) or _blocked_on_advisory_lock(pg_dsn):
                return
        raise AssertionError("B neither committed nor waited")

    a.hook, b.hook = hold_a, lambda conn: b_in.set()
    text = "the launch review is on friday in room nine"
    out: dict[str, Any] = {}

    def run_b() -> None:
        assert a_in.wait(60)
        out["b"] = b.add(NS, text)

    try:
        thread = threading.Thread(target=run_b)
        thread.start()
        out["a"] = a.add(NS, text)
        a.hook = None
        thread.join(60)
        assert out["a"].op == "ADD"
        assert out["b"].op == "MERGE" and out["b"].id == out["a"].id
        assert b.count(NS) == 1
    finally:
        a.close()
        b.close()


def test_a_near_duplicate_added_while_the_first_is_uncommitted_is_merged(pg_dsn: str) -> None:
    a = _Hooked(
        pg_dsn, embedder=HashEmbedder(64), touch_flush_interval=None, near_duplicate_threshold=0.5
    )
    b = _Hooked(
        pg_dsn, embedder=HashEmbedder(64), touch_flush_interval=None, near_duplicate_threshold=0.5
    )
    a_in, b_in = threading.Event(), threading.Event()

    def hold_a(conn: Any) -> None:
        a_in.set()
        for _ in range(3000):
            if b_in.wait(0.01) or _blocked_on_advisory_lock(pg_dsn):
                return
        raise AssertionError("B neither committed nor waited")

    a.hook, b.hook = hold_a, lambda conn: b_in.set()
    out: dict[str, Any] = {}

    def run_b() -> None:
        assert a_in.wait(60)
        out["b"] = b.add(NS, "the launch review is on friday in room nine today")

    try:
        thread = threading.Thread(target=run_b)
        thread.start()
        out["a"] = a.add(NS, "the launch review is on friday in room nine")
        a.hook = None
        thread.join(60)
        assert out["a"].op == "ADD" and out["b"].op == "MERGE"
        assert b.count(NS) == 1
    finally:
        a.close()
        b.close()


def test_concurrent_updates_and_access_counts_add_up(
    two: tuple[PostgresStore, PostgresStore],
) -> None:
    a, b = two
    mid = a.add(NS, "shared counter memory").id
    start = threading.Barrier(2)

    def worker(store: PostgresStore, k: int) -> None:
        start.wait(timeout=60)
        for i in range(10):
            store.search("shared counter", NS)
            # values of its own: an update to the value already stored is a NOOP
            # without history, so equal values would make the outcome a race
            store.update(NS, mid, importance=(20 * k + i + 1) / 100, reason=f"w{k}")
        store.flush()

    threads = [threading.Thread(target=worker, args=(s, k)) for k, s in enumerate(two)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    rec = b.get(NS, mid)
    assert rec is not None and rec.access_count == 20
    updates = [h for h in a.history(NS, mid) if h.op == "UPDATE"]
    assert sorted(h.reason for h in updates) == ["w0"] * 10 + ["w1"] * 10


def test_maintenance_and_writers_of_one_namespace_never_lose_a_write(
    two: tuple[PostgresStore, PostgresStore],
) -> None:
    a, b = two
    for i in range(10):
        a.add(NS, f"old note {i} about topic {i}")
    start = threading.Barrier(2)
    added: list[str] = []

    def writer() -> None:
        start.wait(timeout=60)
        added.extend(b.add(NS, f"new note {i} about subject {i}").id for i in range(20))

    def maintainer() -> None:
        start.wait(timeout=60)
        for _ in range(5):
            a.consolidate(Namespace(user_id="alice"), threshold=0.99)
            a.enforce_cap(Namespace(user_id="alice"), 1000)

    threads = [threading.Thread(target=writer), threading.Thread(target=maintainer)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert len(added) == 20
    assert all(a.get(NS, mid) is not None for mid in added)
    assert a.count(NS) == 30


def test_an_unreachable_server_is_a_clear_error() -> None:
    with pytest.raises(StoreError, match=r"cannot connect to the store database .*127\.0\.0\.1"):
        _open("postgresql://nobody@127.0.0.1:9/none", connect_timeout=2)


def test_a_missing_database_is_a_clear_error(pg_server_dsn: str) -> None:
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    params = conninfo_to_dict(pg_server_dsn)
    params["dbname"] = "no_such_db_" + uuid.uuid4().hex[:8]
    with pytest.raises(StoreError, match=r"cannot connect .*does not exist"):
        _open(make_conninfo(**params))


def test_a_database_without_pgvector_that_the_login_cannot_enable(
    pg_dsn: str,
) -> None:
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    role = "r_" + uuid.uuid4().hex[:10]
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE ROLE "{role}" LOGIN')
        conn.execute(f'GRANT CREATE, USAGE ON SCHEMA public TO "{role}"')
    try:
        params = conninfo_to_dict(pg_dsn)
        params["user"] = role
        with pytest.raises(StoreError, match=r"no pgvector extension.*CREATE EXTENSION vector"):
            _open(make_conninfo(**params))
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f'REVOKE ALL ON SCHEMA public FROM "{role}"')
            conn.execute(f'DROP ROLE "{role}"')


def test_a_newer_schema_is_refused_and_left_alone(pg_dsn: str) -> None:
    _open(pg_dsn).close()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO schema_version (version) VALUES (99)")
    with pytest.raises(SchemaVersionError, match="99"):
        _open(pg_dsn)


class _Killer(PostgresStore):
    """Terminates its own backend just before commit, ``kills`` times."""

    kills = 1
    server_dsn = ""

    def _before_commit(self, conn: Any) -> None:
        if self.kills > 0:
            self.kills -= 1
            pid = conn.info.backend_pid
            with psycopg.connect(self.server_dsn, autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))


def test_a_connection_killed_mid_transaction_is_retried_and_written_once(
    pg_dsn: str,
) -> None:
    store = _Killer(pg_dsn, embedder=HashEmbedder(64), touch_flush_interval=None)
    store.server_dsn = pg_dsn
    try:
        store.kills = 1
        res = store.add(NS, "written once despite a dropped connection")
        assert res.op == "ADD"
        assert store.count(NS) == 1
        assert [h.op for h in store.history(NS)] == ["ADD"]
        assert store.search("dropped connection", NS)[0].memory.id == res.id
    finally:
        store.close()


def test_a_connection_killed_on_every_attempt_is_a_clear_error_with_nothing_written(
    pg_dsn: str,
) -> None:
    store = _Killer(pg_dsn, embedder=HashEmbedder(64), touch_flush_interval=None)
    store.server_dsn = pg_dsn
    try:
        store.kills = 10
        with pytest.raises(StoreError, match="failed after 3 attempts"):
            store.add(NS, "never written")
        store.kills = 0
        assert store.count(NS) == 0
        assert store.history(NS) == []
    finally:
        store.close()


def test_namespaces_are_isolated_between_stores(two: tuple[PostgresStore, PostgresStore]) -> None:
    a, b = two
    a.add(Namespace(user_id="u1"), "secret of user one")
    b.add(Namespace(user_id="u2"), "secret of user two")
    for store in two:
        for mode in ("hybrid", "keyword", "vector"):
            hits = store.search("secret of user", Namespace(user_id="u2"), mode=mode)
            assert [h.memory.content for h in hits] == ["secret of user two"]


def test_tenant_search_stays_exact_when_an_hnsw_index_exists(pg_dsn: str) -> None:
    # The trap measured in issue 13: with an HNSW index on the table, the plain
    # ``WHERE tenant ORDER BY embedding <=> q LIMIT k`` walks the graph first and
    # filters after, returning a fraction of the tenant's nearest rows.  The
    # store's ``(embedding <=> q) + 0`` keeps the planner on the tenant's rows.
    dim = 64
    store = _open(pg_dsn, embedder=HashEmbedder(dim))
    try:
        tenants = [Namespace(user_id=f"t{i}") for i in range(40)]
        vecs: dict[str, np.ndarray] = {}
        rng = np.random.default_rng(7)
        vocab = [f"w{i}" for i in range(300)]

        def text() -> str:
            return " ".join(rng.choice(vocab, size=6, replace=False))

        for ns in tenants:
            items = [NewMemory(content=text()) for _ in range(50)]
            for res, item in zip(store.add_many(ns, items, dedup=False), items, strict=True):
                vecs[res.id] = store._embed([item.content])[0]
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(
                "CREATE INDEX memories_hnsw ON memories USING hnsw (embedding vector_cosine_ops)"
            )
            conn.execute("ANALYZE memories")
            # what the planner does on a large table: an ordered index scan beats a sort
            dbname = conn.info.dbname
            conn.execute(f'ALTER DATABASE "{dbname}" SET enable_sort = off')
        reader = _open(pg_dsn, embedder=HashEmbedder(dim))  # new connections: the setting
        target = tenants[3]
        own = {r.id for r in store.list(target, limit=1000)}
        found_plain = 0
        for _ in range(10):
            query = text()
            qvec = store._embed([query_text(query)])[0]  # what the store embeds
            exact = sorted(own, key=lambda mid: -float(vecs[mid] @ qvec))[:10]
            hits = reader.search(query, target, limit=10, mode="vector", touch=False)
            assert {h.memory.id for h in hits} == set(exact)  # recall 1.0
            with psycopg.connect(pg_dsn, autocommit=True) as conn:
                register_vector(conn)
                rows = conn.execute(
                    "SELECT id FROM memories WHERE user_id = %s ORDER BY embedding <=> %s LIMIT 10",
                    (target.user_id, qvec),
                ).fetchall()
            found_plain += len({r[0] for r in rows} & set(exact))
        # the test sees the trap: the plain query misses most of the tenant's neighbours
        assert found_plain < 50, found_plain
        reader.close()
    finally:
        store.close()


def test_embedder_change_is_detected_and_reembed_fixes_it(pg_dsn: str) -> None:
    with _open(pg_dsn) as store:
        store.add_many(NS, ["green tea", "black coffee", "red wine"])
    with pytest.raises(EmbedderMismatchError) as err:
        _open(pg_dsn, embedder=HashEmbedder(32))
    assert "hash-64" in str(err.value) and "hash-32" in str(err.value)
    seen: list[tuple[int, int]] = []
    with _open(
        pg_dsn,
        embedder=HashEmbedder(32),
        on_embedder_mismatch="reembed",
        progress=lambda d, t: seen.append((d, t)),
    ) as store:
        assert store.dim == 32
        assert store.search("coffee", NS, mode="vector")[0].memory.content == "black coffee"
    assert seen and seen[-1][1] == 3
    with _open(pg_dsn, embedder=HashEmbedder(32)) as store:  # now the stored embedder
        report = store.reembed(embedder=HashEmbedder(48))
        assert (report.previous_embedder, report.embedder) == ("hash-32", "hash-48")
        assert report.memories == 3
        assert store.search("wine", NS, mode="vector")[0].memory.content == "red wine"
    with pytest.raises(EmbedderMismatchError):
        _open(pg_dsn, embedder=HashEmbedder(32))


def test_a_keyed_fact_saved_by_two_processes_at_once_stays_one_fact(
    two: tuple[PostgresStore, PostgresStore],
) -> None:
    from actormem.recorder import KEYED_KIND, KeyedFacts

    a, b = (KeyedFacts(s, NS) for s in two)  # two workers: no lock of this process is shared
    keys = [f"k{i}" for i in range(40)]
    start = threading.Barrier(2)

    def saves(facts: KeyedFacts, value: str) -> None:
        start.wait()
        for key in keys:
            facts.save(key, value)

    threads = [threading.Thread(target=saves, args=(f, v)) for f, v in ((a, "a"), (b, "b"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    live = [r for r in two[0].list(a.namespace, kinds=[KEYED_KIND], limit=1000)]
    assert sorted(r.metadata["key"] for r in live) == sorted(keys)  # one live row per key
    for key in keys:
        assert a.get(key) == b.get(key) in ("a", "b")
    assert b.delete("k0") and a.get("k0") is None and b.get("k0") is None


def test_keyword_statistics_kept_by_triggers_match_the_live_rows(pg_dsn: str) -> None:
    # scope_stats / term_stats replace reading the scope on every search: after adds,
    # merges, updates, deletes, maintenance and forget they must equal a recount.
    store = _open(pg_dsn, near_duplicate_threshold=0.95)
    try:
        a, b = Namespace(user_id="a"), Namespace(user_id="b", agent_id="x")
        ids = [r.id for r in store.add_many(a, [f"alpha beta note {i}" for i in range(30)])]
        store.add_many(b, [NewMemory(content=f"gamma talk {i}", kind="episode") for i in range(9)])
        store.add(a, "alpha beta note 3")  # an exact duplicate: merged
        store.update(a, ids[0], content="rewritten delta words")
        store.delete(a, ids[1])
        store.flush()
        store.decay(a, rate=0.5, threshold=0.0)
        store.forget(Namespace(user_id="b"))
        store.add(b, "after forget gamma")
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            live = "deleted_at IS NULL AND superseded_by IS NULL"
            ns = "user_id, agent_id, run_id, session_id"
            want = conn.execute(
                f"SELECT {ns}, count(*), sum(doclen), count(*) FILTER (WHERE kind = 'episode') "
                f"FROM memories WHERE {live} GROUP BY {ns} ORDER BY {ns}"
            ).fetchall()
            got = conn.execute(
                f"SELECT {ns}, docs, doclen, episodes FROM scope_stats WHERE docs <> 0 "
                f"ORDER BY {ns}"
            ).fetchall()
            assert got == want
            want_t = conn.execute(
                f"SELECT t, {ns}, count(*) FROM memories, unnest(terms) AS t WHERE {live} "
                f"GROUP BY t, {ns} ORDER BY t, {ns}"
            ).fetchall()
            got_t = conn.execute(
                f"SELECT term, {ns}, df FROM term_stats WHERE df <> 0 ORDER BY term, {ns}"
            ).fetchall()
            assert got_t == want_t
            assert ("delta", "a", "", "", "", 1) in got_t
    finally:
        store.close()


def test_a_wrong_password_is_a_clear_error_that_never_shows_the_password(pg_dsn: str) -> None:
    # The suite's server trusts local logins; this test makes one role need a
    # password (scram-sha-256) through a line of its own at the top of pg_hba.conf.
    import time

    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    _open(pg_dsn).close()  # the schema and the vector extension, as the owner
    role = "pw_" + uuid.uuid4().hex[:10]
    secret = "right-" + uuid.uuid4().hex[:8]
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        hba = str(conn.execute("SHOW hba_file").fetchone()[0])
        conn.execute(f"CREATE ROLE \"{role}\" LOGIN PASSWORD '{secret}'")
        conn.execute(f'GRANT ALL ON ALL TABLES IN SCHEMA public TO "{role}"')
        conn.execute(f'GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO "{role}"')
        conn.execute(f'GRANT CREATE, USAGE ON SCHEMA public TO "{role}"')
    try:
        with open(hba, encoding="utf-8") as fh:
            before = fh.read()
        with open(hba, "w", encoding="utf-8") as fh:
            fh.write(f"local all {role} scram-sha-256\n{before}")
    except OSError as exc:
        pytest.skip(f"cannot edit the server's pg_hba.conf ({exc}): ACTORMEM_PG_DSN server?")
    params = conninfo_to_dict(pg_dsn)
    params["user"] = role
    try:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute("SELECT pg_reload_conf()")
        deadline = time.monotonic() + 30
        while True:  # the postmaster reloads on its own schedule: wait until it asks
            try:
                psycopg.connect(make_conninfo(**params, password="wrong")).close()
            except psycopg.OperationalError as exc:
                if "password" in str(exc):
                    break
            assert time.monotonic() < deadline, "pg_hba.conf was not reloaded"
            time.sleep(0.05)
        with pytest.raises(StoreError, match="password authentication failed") as err:
            _open(make_conninfo(**params, password="wrong-" + secret))
        assert secret not in str(err.value) and role in str(err.value)
        _open(make_conninfo(**params, password=secret)).close()  # the right one works
    finally:
        with open(hba, "w", encoding="utf-8") as fh:
            fh.write(before)
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute("SELECT pg_reload_conf()")
            conn.execute(f'REVOKE ALL ON ALL TABLES IN SCHEMA public FROM "{role}"')
            conn.execute(f'REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM "{role}"')
            conn.execute(f'REVOKE ALL ON SCHEMA public FROM "{role}"')
            conn.execute(f'DROP ROLE "{role}"')


def test_a_bulk_load_leaves_the_planner_statistics_of_the_loaded_table(pg_dsn: str) -> None:
    # Loaded faster than autovacuum looks, the table would have no statistics and
    # the planner would plan a batch's duplicate check (and a tenant's search) for
    # an empty table; the store analyzes each time its inserts may have doubled it.
    store = _open(pg_dsn)
    try:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            assert (
                conn.execute(
                    "SELECT reltuples FROM pg_class WHERE oid = 'memories'::regclass"
                ).fetchone()[0]
                < 1
            )  # never analyzed (-1) or empty
        store.add_many(NS, [f"bulk note {i} zq{i}" for i in range(600)])
        store._planner_stats.wait()
        assert store._planner_stats.analyzed == 0  # not due yet (< 1,000 rows)
        store.add_many(NS, [f"bulk note {i} zq{i}" for i in range(600, 1500)])
        store._planner_stats.wait()
        assert store._planner_stats.analyzed == 1
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            reltuples, analyzed = conn.execute(
                "SELECT c.reltuples, s.last_analyze FROM pg_class c JOIN pg_stat_user_tables s "
                "ON s.relid = c.oid WHERE c.oid = 'memories'::regclass"
            ).fetchone()
        assert reltuples == 1500 and analyzed is not None
        # the next analysis waits for the table to double again
        store.add_many(NS, [f"more note {i}" for i in range(1000)])
        store._planner_stats.wait()
        assert store._planner_stats.analyzed == 1
        store.add_many(NS, [f"more note {i}" for i in range(1000, 1600)])
        store._planner_stats.wait()
        assert store._planner_stats.analyzed == 2
        assert store.count(NS) == 3100
    finally:
        store.close()


def test_every_column_of_a_copied_row_reads_back_exactly(pg_dsn: str) -> None:
    # New rows go in as one hand-encoded binary COPY stream: every type and the
    # awkward values (quotes, backslashes, braces, commas, empty arrays, non-ASCII,
    # nested JSON) must read back as written, and the vector bit for bit.
    from actormem.store._pg_search import term_counts

    emb = HashEmbedder(64)
    store = _open(pg_dsn, embedder=emb)
    odd = ['a"b', "c\\d", "{e,f}", "ünï ⟨x⟩", "NULL"]
    items = [
        NewMemory(
            content='Grüße, "quoted" \\ back {brace} 😀 café café',
            kind="preference",
            importance=0.3,
            tags=tuple(odd),
            source_ids=("m1", "m,2"),
            metadata={"n": 1, "s": 'ä"\\', "l": [1, {"x": None}], "f": 0.1},
            created_at=1_700_000_000.123456,
        ),
        NewMemory(content="plain", tags=(), source_ids=(), metadata={}),
    ]
    try:
        ids = [r.id for r in store.add_many(NS, items)]
        for mid, item in zip(ids, items, strict=True):
            rec = store.get(NS, mid)
            assert rec is not None
            assert (rec.content, rec.kind, rec.tags, rec.source_ids, rec.metadata) == (
                item.content,
                item.kind,
                item.tags,
                item.source_ids,
                item.metadata,
            )
            assert rec.importance == item.importance
            assert rec.superseded_by is None and rec.deleted_at is None
        first = store.get(NS, ids[0])
        assert first is not None and first.created_at == 1_700_000_000.123456
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            register_vector(conn)
            want = store._embed([item.content for item in items])  # as add_many embeds them
            for mid, item, wvec in zip(ids, items, want, strict=True):
                vec, terms, tfs, doclen = conn.execute(
                    "SELECT embedding, terms, tfs, doclen FROM memories WHERE id = %s", (mid,)
                ).fetchone()
                assert np.array_equal(vec.to_numpy(), wvec)
                assert (terms, tfs, doclen) == tuple(term_counts(item.content))
    finally:
        store.close()


def _kill_other_backends(dsn: str) -> int:
    """Terminate every other connection to the database (and wait until each is gone)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchall()
    assert all(r[0] for r in rows)
    return len(rows)


def test_reads_and_writes_go_on_after_every_pooled_connection_was_killed(pg_dsn: str) -> None:
    # A server restart or failover ends every connection a worker holds idle; the
    # next read and the next write must get fresh ones, not fail on each dead one.
    store = _open(pg_dsn, pool_size=4)
    try:
        mid = store.add(NS, "survives the connections dropping zqkillx").id
        barrier = threading.Barrier(4)
        errors: list[BaseException] = []

        def hold() -> None:  # four searches at once: the pool opens four connections
            try:
                with store._conn():
                    barrier.wait(timeout=30)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=hold) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not errors
        assert _kill_other_backends(pg_dsn) >= 4
        hits = store.search("zqkillx", NS, limit=1)
        assert hits and hits[0].memory.id == mid
        assert _kill_other_backends(pg_dsn) >= 1
        res = store.add(NS, "written after the second drop zqagainx")
        assert res.op == "ADD"
        assert store.count(NS) == 2
        assert [h.op for h in store.history(NS, res.id)] == ["ADD"]
    finally:
        store.close()


class _LostReply(PostgresStore):
    """Commits, then loses the connection before the commit's reply reaches it."""

    lose = 0
    server_dsn = ""

    def _before_commit(self, conn: Any) -> None:
        if self.lose > 0:
            self.lose -= 1
            conn.execute("COMMIT")  # the server commits the transaction here ...
            with psycopg.connect(self.server_dsn, autocommit=True) as admin:
                # ... and the connection dies before the client hears back
                admin.execute("SELECT pg_terminate_backend(%s, 10000)", (conn.info.backend_pid,))


def test_a_commit_whose_reply_was_lost_counts_once(pg_dsn: str) -> None:
    store = _LostReply(
        pg_dsn, embedder=HashEmbedder(64), touch_flush_interval=None, near_duplicate_threshold=None
    )
    store.server_dsn = pg_dsn
    try:
        store.lose = 1
        res = store.add(NS, "committed but the reply was lost")
        assert store.lose == 0 and res.op == "ADD"
        # not planned and written again (that would be an ADD then a MERGE of itself)
        assert store.count(NS) == 1
        assert [h.op for h in store.history(NS)] == ["ADD"]
        store.lose = 1
        batch = store.add_many(NS, [f"lost reply batch item {i}" for i in range(50)])
        assert [r.op for r in batch] == ["ADD"] * 50
        assert store.count(NS) == 51
        assert len(store.history(NS)) == 51
    finally:
        store.close()

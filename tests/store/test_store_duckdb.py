"""DuckDB-specific behaviour: files, locks, migrations, embedder changes, threads."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pytest

from actormem.models.embedders import HashEmbedder, WordLlamaEmbedder
from actormem.store import (
    SCHEMA_VERSION,
    DuckDBStore,
    EmbedderMismatchError,
    Namespace,
    SchemaVersionError,
    StoreClosedError,
)
from actormem.store import _duckdb as duckdb_module

NS = Namespace(user_id="alice")


def _open(path: Path, **kwargs: object) -> DuckDBStore:
    kwargs.setdefault("embedder", HashEmbedder(64))
    kwargs.setdefault("touch_flush_interval", None)
    return DuckDBStore(path, **kwargs)  # type: ignore[arg-type]


def test_second_process_is_refused_with_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "locked.duckdb"
    with _open(path) as store:
        store.add(NS, "held by this process")
        script = textwrap.dedent(
            f"""
            import sys
            from actormem.models.embedders import HashEmbedder
            from actormem.store import DuckDBStore, StoreLockedError
            try:
                DuckDBStore({str(path)!r}, embedder=HashEmbedder(64))
            except StoreLockedError as exc:
                print("LOCKED:", exc)
                sys.exit(3)
            sys.exit(0)
            """
        )
        proc = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 3, proc.stderr
        assert "LOCKED:" in proc.stdout
        assert str(path) in proc.stdout
        # the holder is named by its pid, and the way out is named too
        assert f"held by process {os.getpid()}" in proc.stdout
        assert "PostgreSQL backend" in proc.stdout
        assert "postgresql://" in proc.stdout
    # once closed, another opener succeeds
    with _open(path) as again:
        assert again.count(NS) == 1


def _make_v1_file(path: Path, dim: int) -> None:
    con = duckdb.connect(str(path))
    con.execute(
        f"""CREATE TABLE memories (
            id VARCHAR PRIMARY KEY, user_id VARCHAR NOT NULL DEFAULT '',
            agent_id VARCHAR NOT NULL DEFAULT '', run_id VARCHAR NOT NULL DEFAULT '',
            kind VARCHAR NOT NULL, content VARCHAR NOT NULL, content_hash VARCHAR NOT NULL,
            embedding FLOAT[{dim}], importance DOUBLE NOT NULL,
            tags VARCHAR[] NOT NULL DEFAULT [], source_ids VARCHAR[] NOT NULL DEFAULT [],
            created_at TIMESTAMP NOT NULL, updated_at TIMESTAMP NOT NULL,
            last_accessed TIMESTAMP NOT NULL, access_count BIGINT NOT NULL DEFAULT 0,
            superseded_by VARCHAR, deleted_at TIMESTAMP)"""
    )
    con.execute(
        """CREATE TABLE history (id VARCHAR NOT NULL, memory_id VARCHAR NOT NULL,
            op VARCHAR NOT NULL, old_content VARCHAR, new_content VARCHAR,
            ts TIMESTAMP NOT NULL)"""
    )
    vec = HashEmbedder(dim).embed(["Alice likes tea"])[0].tolist()
    con.execute(
        "INSERT INTO memories VALUES ('m1', 'alice', 'bot', '', 'fact', 'Alice likes tea', "
        "'h', ?::FLOAT[" + str(dim) + "], 0.5, ['drink'], [], TIMESTAMP '2024-01-01', "
        "TIMESTAMP '2024-01-01', TIMESTAMP '2024-01-01', 2, NULL, NULL)",
        [vec],
    )
    con.execute(
        "INSERT INTO history VALUES ('h1', 'm1', 'ADD', NULL, 'Alice likes tea', "
        "TIMESTAMP '2024-01-01')"
    )
    con.close()


def test_migration_from_version_1(tmp_path: Path) -> None:
    path = tmp_path / "old.duckdb"
    _make_v1_file(path, 64)
    with _open(path) as store:
        rec = store.get(NS, "m1")
        assert rec is not None
        assert rec.content == "Alice likes tea"
        assert rec.namespace == Namespace(user_id="alice", agent_id="bot")
        assert rec.metadata == {}
        assert rec.access_count == 2
        assert store.search("tea", NS)[0].memory.id == "m1"
        hist = store.history(NS, "m1")
        assert [h.op for h in hist] == ["ADD"]  # history got the namespace columns
        store.add(NS, "new memory after migration", metadata={"v": 2})
    con = duckdb.connect(str(path))
    rows = con.execute("SELECT version FROM schema_version ORDER BY 1").fetchall()
    con.close()
    assert [r[0] for r in rows] == list(range(2, SCHEMA_VERSION + 1))


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "future.duckdb"
    _open(path).close()
    con = duckdb.connect(str(path))
    con.execute("INSERT INTO schema_version (version) VALUES (99)")
    con.close()
    with pytest.raises(SchemaVersionError, match="99"):
        _open(path)


def test_embedder_change_is_detected_and_reembed_fixes_it(tmp_path: Path) -> None:
    path = tmp_path / "emb.duckdb"
    with _open(path) as store:
        store.add_many(NS, ["green tea", "black coffee", "red wine"])
    with pytest.raises(EmbedderMismatchError) as err:
        _open(path, embedder=HashEmbedder(32))
    assert "hash-64" in str(err.value) and "hash-32" in str(err.value)
    seen: list[tuple[int, int]] = []
    with _open(
        path,
        embedder=HashEmbedder(32),
        on_embedder_mismatch="reembed",
        progress=lambda d, t: seen.append((d, t)),
    ) as store:
        assert store.dim == 32
        assert store.search("coffee", NS, mode="vector")[0].memory.content == "black coffee"
    assert seen and seen[-1][1] == 3
    with _open(path, embedder=HashEmbedder(32)) as store:  # now the stored embedder
        assert store.count(NS) == 3
        report = store.reembed(embedder=HashEmbedder(48))
        assert (report.previous_embedder, report.embedder) == ("hash-32", "hash-48")
        assert report.memories == 3
        assert store.search("wine", NS, mode="vector")[0].memory.content == "red wine"
    with pytest.raises(EmbedderMismatchError):
        _open(path, embedder=HashEmbedder(32))


def test_closed_store_refuses_use(tmp_path: Path) -> None:
    store = _open(tmp_path / "c.duckdb")
    store.close()
    store.close()  # idempotent
    with pytest.raises(StoreClosedError):
        store.add(NS, "late")
    with pytest.raises(StoreClosedError):
        store.search("late", NS)


def test_path_is_a_directory(tmp_path: Path) -> None:
    from actormem.store import StoreError

    with pytest.raises(StoreError, match="directory"):
        _open(tmp_path)


def test_threads_read_while_one_writes(tmp_path: Path) -> None:
    store = _open(tmp_path / "threads.duckdb", touch_flush_interval=0.05)
    errors: list[BaseException] = []
    stop = threading.Event()

    def writer() -> None:
        try:
            for i in range(40):
                res = store.add(NS, f"threaded note {i} code q{i}z")
                hits = store.search(f"q{i}z", NS, mode="keyword")
                assert hits and hits[0].memory.id == res.id
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            stop.set()

    def reader() -> None:
        try:
            while not stop.is_set():
                store.search("threaded note", NS)
                store.list(NS, limit=5)
                store.count(NS)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer)] + [
        threading.Thread(target=reader) for _ in range(3)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    store.close()
    assert not errors, errors
    with _open(tmp_path / "threads.duckdb") as again:
        assert again.count(NS) == 40


def test_index_matches_file_after_many_changes(tmp_path: Path) -> None:
    path = tmp_path / "consistency.duckdb"
    with _open(path, near_duplicate_threshold=0.97) as store:
        ids = [r.id for r in store.add_many(NS, [f"memo {i} about {i * 7}" for i in range(300)])]
        for mid in ids[:50]:
            store.delete(NS, mid)
        for mid in ids[50:80]:
            store.update(NS, mid, content=f"rewritten {mid}")
        store.consolidate(NS, threshold=0.99)
        live_before = {h.memory.id for h in store.search("memo", NS, limit=1000, mode="vector")}
    with _open(path) as store:
        live_after = {h.memory.id for h in store.search("memo", NS, limit=1000, mode="vector")}
        assert live_before == live_after
        assert len(live_after) == store.count(NS)


def test_wordllama_store_end_to_end(tmp_path: Path) -> None:
    embedder = WordLlamaEmbedder()
    with DuckDBStore(tmp_path / "wl.duckdb", embedder=embedder, touch_flush_interval=None) as store:
        store.add_many(
            NS,
            [
                "Alice adopted a golden retriever puppy last spring",
                "The quarterly budget review is scheduled for Thursday",
                "Alice is allergic to peanuts",
            ],
        )
        hits = store.search("what pet does Alice have?", NS, mode="vector")
        assert "retriever" in hits[0].memory.content
        hits = store.search("when is the finance meeting", NS)
        assert "budget" in hits[0].memory.content
        # exact near-duplicate with the real model
        res = store.add(NS, "Alice is allergic to peanuts.")
        assert res.op == "MERGE"


def test_wordllama_default_embedder_is_used(tmp_path: Path) -> None:
    with DuckDBStore(tmp_path / "default.duckdb", touch_flush_interval=None) as store:
        assert store.embedder.name == "wordllama-l2-supercat-256"
        assert store.dim == 256
        store.add(NS, "the default embedder works offline")
        vec = store.search("offline embedder", NS)
        assert vec and vec[0].cosine > 0.3
        assert np.isfinite(vec[0].score)


def test_reembed_with_rich_progress(tmp_path: Path) -> None:
    from actormem.store import rich_progress

    with _open(tmp_path / "rp.duckdb") as store:
        store.add_many(NS, ["one", "two", "three"])
        with rich_progress("re-embedding") as progress:
            report = store.reembed(progress=progress)
        assert report.memories == 3
        assert report.previous_embedder == report.embedder == "hash-64"
        assert store.search("two", NS, mode="keyword")[0].memory.content == "two"


def test_search_rows_stay_valid_when_a_concurrent_write_compacts_the_index(
    tmp_path: Path,
) -> None:
    """Regression: a write that compacted the index between scoring and reading the
    records renumbered the rows, and an alice-scoped search returned bob's memories."""
    store = DuckDBStore(
        tmp_path / "m.duckdb",
        embedder=HashEmbedder(16),
        near_duplicate_threshold=None,
        touch_flush_interval=None,
    )
    alice, bob = Namespace(user_id="alice"), Namespace(user_id="bob")
    ra = store.add_many(alice, [f"alice note {i}" for i in range(3000)], dedup=False)
    store.add_many(bob, [f"bob secret number {i}" for i in range(4100)], dedup=False)
    junk = Namespace(user_id="junk")
    store.add_many(junk, [f"junk {i}" for i in range(2990)], dedup=False)
    store.forget(junk)  # 2,990 of 10,090 rows dead: just under the compaction trigger (30%)
    assert store._index.dead_fraction < 0.3
    victims = [r.id for r in ra[:60]]
    writer = threading.Thread(target=lambda: [store.delete(alice, m) for m in victims])
    original = store._index.touch

    def touch_while_another_thread_writes(rows: Any, now: float) -> None:
        writer.start()  # these deletes push the dead fraction over the compaction trigger
        writer.join(timeout=1.0)
        original(rows, now)

    store._index.touch = touch_while_another_thread_writes  # type: ignore[method-assign]
    hits = store.search("alice note 2999", alice, limit=5)
    writer.join()
    assert hits and all(h.memory.namespace.user_id == "alice" for h in hits)
    store.close()


def test_every_id_add_many_returns_exists(tmp_path: Path) -> None:
    """Regression: an exact duplicate pointing at an earlier insert that a near-duplicate
    merge then dropped returned an id that was never stored."""
    with DuckDBStore(tmp_path / "m.duckdb", embedder=WordLlamaEmbedder()) as store:
        ns = Namespace(user_id="u")
        res = store.add_many(
            ns, ["User likes green tea", "User likes green tea.", "user likes  GREEN tea."]
        )
        assert all(store.get(ns, r.id) is not None for r in res)
        assert len({r.id for r in res}) == store.count(ns)


def test_reader_cursors_of_finished_threads_are_released(tmp_path: Path) -> None:
    with DuckDBStore(tmp_path / "m.duckdb", embedder=HashEmbedder(16)) as store:
        ns = Namespace(user_id="u")
        mid = store.add(ns, "x").id
        for _ in range(20):  # a thread per request, as in a web server
            t = threading.Thread(target=lambda: store.get(ns, mid))
            t.start()
            t.join()
        store.get(ns, mid)
        assert len(store._cursors) <= 2


def test_reads_leave_no_open_transaction_behind(tmp_path: Path) -> None:
    """Regression: ``get``/``count`` read with ``fetchone()``, which keeps an auto-commit
    query's transaction open until that thread's cursor runs its next statement.  A
    thread that read once and went quiet then blocked every checkpoint (the WAL grew
    past its threshold) and kept later commits' undo data in memory."""
    with DuckDBStore(tmp_path / "m.duckdb", embedder=HashEmbedder(16)) as store:
        ns = Namespace(user_id="u")
        mid = store.add(ns, "first memory").id

        def reads() -> None:  # a thread that reads once, then stays alive and idle
            assert store.get(ns, "missing") is None
            assert store.count(ns) == 1
            assert store.get(ns, mid) is not None
            done.set()
            release.wait(60)

        done, release = threading.Event(), threading.Event()
        idle = threading.Thread(target=reads)
        idle.start()
        try:
            assert done.wait(60)
            store.add(ns, "a later write")  # commits after the idle reader's reads
            store.update(ns, mid, content="first memory, changed")
            with store._write_lock:
                store.flush()  # the logged writes into DuckDB: the applier has nothing left
                store._wcur.execute("CHECKPOINT")  # raises if another transaction is open
        finally:
            release.set()
            idle.join()


@pytest.mark.duckdb_only("reads DuckDB's rowid through the writer cursor")
def test_an_update_that_keeps_the_lists_updates_the_row_in_place(
    make_store: Any, ns: Namespace
) -> None:
    # DuckDB rewrites a row (delete + insert, a new rowid) when one of its LIST
    # columns is set; an update that leaves tags and sources alone must not.
    store = make_store()
    res = store.add(ns, "likes jazz", tags=("music",))
    store.flush()

    def rowid() -> int:
        row = store._wcur.execute("SELECT rowid FROM memories WHERE id = ?", [res.id]).fetchall()
        return int(row[0][0])

    before = rowid()
    store.update(ns, res.id, importance=0.9, metadata={"src": "chat"})
    assert rowid() == before
    rec = store.get(ns, res.id)
    assert rec.importance == pytest.approx(0.9) and rec.metadata == {"src": "chat"}
    assert rec.tags == ("music",)
    store.update(ns, res.id, tags=["music", "jazz"])
    assert store.get(ns, res.id).tags == ("music", "jazz")


def test_a_store_never_closed_is_closed_at_exit(tmp_path: Path) -> None:
    """A program that forgets close(): exit status 0 (no SIGABRT from a daemon thread
    inside DuckDB at teardown) and the pending access counts are written."""
    import subprocess
    import sys
    import textwrap

    db = tmp_path / "m.duckdb"
    child = textwrap.dedent(
        f"""
        import threading
        from actormem.models.embedders import HashEmbedder
        from actormem.store import DuckDBStore, Namespace

        ns = Namespace(user_id="u")
        store = DuckDBStore({str(db)!r}, embedder=HashEmbedder(16), touch_flush_interval=3600)
        store.add(ns, "the ferry leaves at nine")
        assert store.search("ferry", ns, 1)  # one access, pending (flushed hourly)

        def busy() -> None:  # a daemon thread still inside the store as Python exits
            while True:
                store.search("ferry", ns, 1, touch=False)

        threading.Thread(target=busy, daemon=True).start()
        print("exiting", flush=True)
        """
    )
    for _ in range(3):
        r = subprocess.run(
            [sys.executable, "-c", child], capture_output=True, text=True, timeout=120
        )
        assert r.returncode == 0, r.stderr[-2000:]
        assert "exiting" in r.stdout
    with DuckDBStore(db, embedder=HashEmbedder(16)) as store:
        (rec,) = store.list(Namespace(user_id="u"))
        assert rec.access_count == 3  # each run's pending count was written at exit


def _storage_version(store: DuckDBStore) -> str:
    row = store._wcur.execute(
        "SELECT tags['storage_version'] FROM duckdb_databases() WHERE database_name = "
        "current_database()"
    ).fetchone()
    assert row is not None
    return str(row[0])


def test_new_files_use_the_storage_format_of_duckdb_1_2_and_old_ones_keep_theirs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """New files skip converting the primary key's index to the old layout at checkpoints."""
    with _open(tmp_path / "new.duckdb") as store:
        assert _storage_version(store) == "v1.2.0+"
    old = tmp_path / "old.duckdb"
    with monkeypatch.context() as m:
        m.setattr(duckdb_module, "STORAGE_VERSION", "v1.0.0")
        with _open(old) as store:
            assert _storage_version(store) == "v1.0.0+"
            kept = store.add(NS, "written in the old format").id
    with _open(old) as store:  # opened by this version: readable, writable, same format
        assert _storage_version(store) == "v1.0.0+"
        assert store.get(NS, kept) is not None
        store.add(NS, "written after the reopen")
        store.flush()
    with _open(old) as store:
        assert store.count(NS) == 2

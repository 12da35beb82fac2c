"""The DuckDB store's small-write path (SQL literals) and group commit.

Small batches are written as SQL text with literal values
(:mod:`actormem.store._duckdb_sql`); concurrent writes to different
namespaces share one transaction (:mod:`actormem.store._group_commit`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import duckdb
import numpy as np
import pytest

from actormem.models.embedders import HashEmbedder
from actormem.store import DuckDBStore, InvalidMemoryError, Namespace, NewMemory
from actormem.store._duckdb_sql import UnsafeLiteral, lit, vector_lit

NASTY = [
    "plain",
    "it's",
    "''",
    "'; DROP TABLE memories; --",
    "back\\slash \\' and \\n",
    "line\nbreak\ttab\r",
    "$$dollar$$ ? $1 %s {x}",
    "unicode é 中文 🙂",
    "",
]


def test_literals_read_back_exactly_from_duckdb() -> None:
    con = duckdb.connect()
    for text in NASTY:
        assert con.execute(f"SELECT {lit(text)}").fetchall() == [(text,)]
    for value in (None, True, False, 0, -7, 2**62, 0.1, -1e-300, 1.5e300):
        assert con.execute(f"SELECT {lit(value)}").fetchall() == [(value,)]
    vec = np.random.default_rng(3).standard_normal(64).astype(np.float32)
    (got,) = con.execute(f"SELECT {vector_lit(vec, 64)}").fetchall()[0]
    assert np.array_equal(np.frombuffer(got, dtype="<f4"), vec)  # the stored bytes (schema 5)


@pytest.mark.parametrize(
    "bad", ["a\x00b", float("nan"), float("inf"), b"bytes", [1], np.float32(1.0)]
)
def test_values_without_a_safe_literal_are_refused(bad: object) -> None:
    with pytest.raises(UnsafeLiteral):
        lit(bad)
    with pytest.raises(UnsafeLiteral):
        vector_lit(np.array([1.0, float("nan")], dtype=np.float32), 2)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[DuckDBStore]:
    with DuckDBStore(
        tmp_path / "w.duckdb",
        embedder=HashEmbedder(64),
        touch_flush_interval=None,
        near_duplicate_threshold=None,
    ) as s:
        yield s


def test_single_writes_of_nasty_text_round_trip_through_the_file(
    store: DuckDBStore, tmp_path: Path
) -> None:
    ns = Namespace(user_id="o'brien", agent_id="a\\b")
    ids = {}
    for i, text in enumerate(t for t in NASTY if t):
        res = store.add(
            ns,
            f"{text} #{i}",
            tags=[text or "x", "t'2"],
            source_ids=[f"m'{i}"],
            metadata={"q": text, "n": i},
        )
        ids[res.id] = text
    some = next(iter(ids))
    store.update(ns, some, content="updated 'text' \\ again", tags=["new'tag"])
    store.close()
    with DuckDBStore(
        tmp_path / "w.duckdb", embedder=HashEmbedder(64), touch_flush_interval=None
    ) as again:
        for mid, text in ids.items():
            rec = again.get(ns, mid)
            assert rec is not None
            if mid == some:
                assert rec.content == "updated 'text' \\ again" and rec.tags == ("new'tag",)
                assert [h.op for h in again.history(ns, mid)] == ["ADD", "UPDATE"]
            else:
                assert rec.content.startswith(text) and rec.tags == (text, "t'2")
                assert rec.metadata["q"] == text and rec.source_ids[0].startswith("m'")


def test_a_string_with_a_nul_is_refused_not_written(store: DuckDBStore) -> None:
    """DuckDB could keep a NUL (through bound parameters); PostgreSQL cannot, so both
    refuse it at the door and a store moves between backends (was: stored here)."""
    ns = Namespace(user_id="u")
    with pytest.raises(InvalidMemoryError, match="content holds a NUL"):
        store.add(ns, "nul \x00 inside")
    with pytest.raises(InvalidMemoryError, match=r"metadata\.raw holds a NUL"):
        store.add(ns, "text", metadata={"raw": "a\x00b"})
    store.flush()
    assert store._wcur.execute("SELECT count(*) FROM memories").fetchall() == [(0,)]


def test_pending_access_counts_go_into_the_next_applied_write(
    store: DuckDBStore, tmp_path: Path
) -> None:
    """A single write is acknowledged in the store's log; the transaction that moves it
    into DuckDB (here on ``flush``) also writes the pending access counts, in one call."""
    ns = Namespace(user_id="u")
    first = store.add(ns, "the user drinks green tea")
    assert store.search("green tea", ns, limit=1)[0].memory.id == first.id  # a touch
    assert store._pending
    calls: list[str] = []
    real = store._wcur

    class Spy:
        def execute(self, sql: str, *args: object) -> object:
            calls.append(sql)
            return real.execute(sql, *args)

        def __getattr__(self, name: str) -> object:
            return getattr(real, name)

    store._wcur = Spy()
    try:
        store.add(ns, "the user walks to work")
        assert calls == []  # acknowledged once synced in the log
        store.flush()
    finally:
        store._wcur = real
    # one call: begin, the insert, its history row, the access counts, the count, commit
    assert len(calls) == 1 and "access_count = least(memories.access_count + t.n, " in calls[0]
    assert not store._pending
    store.close()
    with DuckDBStore(tmp_path / "w.duckdb", embedder=HashEmbedder(64)) as again:
        rec = again.get(ns, first.id)
        assert rec is not None and rec.access_count == 1


def test_a_batch_mixes_literal_statements_and_arrow_tables_in_order(store: DuckDBStore) -> None:
    ns = Namespace(user_id="u")
    kept = store.add(ns, "an old memory to update").id
    texts = [f"memory number {i} of a batch" for i in range(12)]  # > LITERAL_INSERTS
    results = store.add_many(ns, texts)
    store.update(ns, kept, content="an updated memory", reason="it's changed")
    for res, text in zip(results, texts, strict=True):
        rec = store.get(ns, res.id)
        assert rec is not None and rec.content == text
    store.flush()  # the update was acknowledged in the log; the raw cursor reads DuckDB
    ops = store._wcur.execute("SELECT op, count(*) FROM history GROUP BY op ORDER BY op").fetchall()
    assert ops == [("ADD", 13), ("UPDATE", 1)]
    row = store._wcur.execute("SELECT content FROM memories WHERE id = ?", [kept]).fetchall()
    assert row == [("an updated memory",)]


def test_a_long_text_is_written_through_arrow_and_reads_back_whole(
    store: DuckDBStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DuckDB parses SQL with the GIL held: a text past LITERAL_CHARS (an offloaded
    conversation) is bound through Arrow tables (the memory and its history row),
    not parsed as a literal."""
    from actormem.store import _duckdb_logged, _duckdb_rows

    tables: list[str] = []
    real_insert, real_history = _duckdb_logged.execute_insert, _duckdb_logged.execute_history

    def spy_insert(cur: object, insert: tuple[object, str, str]) -> None:
        tables.append("memories")
        real_insert(cur, insert)  # type: ignore[arg-type]

    def spy_history(cur: object, tbl: object) -> None:
        tables.append("history")
        real_history(cur, tbl)  # type: ignore[arg-type]

    monkeypatch.setattr(_duckdb_logged, "execute_insert", spy_insert)
    monkeypatch.setattr(_duckdb_logged, "execute_history", spy_history)
    ns = Namespace(user_id="u")
    piece = "it's 'quoted' \\ é 中文 🙂 line\nbreak; "
    long_text = piece * (_duckdb_rows.LITERAL_CHARS // len(piece) + 50)
    short = store.add(ns, "a short memory beside it").id
    store.flush()
    assert tables == []  # a short text: literals
    long_id = store.add(ns, long_text).id
    store.flush()
    assert tables == ["memories", "history"]  # the ADD's history row holds the text too
    store.close()
    with DuckDBStore(
        tmp_path / "w.duckdb", embedder=HashEmbedder(64), touch_flush_interval=None
    ) as again:
        rec = again.get(ns, long_id)
        assert rec is not None and rec.content == long_text
        assert again.get(ns, short) is not None
        added = again.history(ns, long_id)
        assert [(h.op, h.old_content, h.new_content) for h in added] == [("ADD", None, long_text)]
        hits = again.search("quoted", ns, limit=2, mode="keyword")
        assert [h.memory.id for h in hits] == [long_id]


def _hold_and_queue(store: DuckDBStore, jobs: list[threading.Thread]) -> None:
    """Start ``jobs`` while the writer lock is held; release once all are queued."""
    queued = threading.Condition()
    group = store._group
    original = group._queue.append

    class Queue(list):  # type: ignore[type-arg]
        def append(self, item: object) -> None:
            super().append(item)
            with queued:
                queued.notify_all()

    with store._write_lock:
        group._queue = Queue(group._queue)
        for job in jobs:
            job.start()
        with queued:
            assert queued.wait_for(lambda: len(group._queue) == len(jobs), timeout=60)
    del original


def test_concurrent_writes_to_different_namespaces_share_one_commit(store: DuckDBStore) -> None:
    before = store._group.groups
    errors: list[BaseException] = []

    def add(i: int) -> None:
        try:
            store.add(Namespace(user_id=f"user{i}"), f"memory of user {i}")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    jobs = [threading.Thread(target=add, args=(i,)) for i in range(6)]
    _hold_and_queue(store, jobs)
    for job in jobs:
        job.join(60)
    assert not errors
    assert store._group.groups - before == 1  # one transaction for all six
    for i in range(6):
        hits = store.search(f"memory of user {i}", Namespace(user_id=f"user{i}"))
        assert [h.memory.content for h in hits] == [f"memory of user {i}"]


def test_same_namespace_writes_are_not_grouped_and_still_deduplicate(
    store: DuckDBStore,
) -> None:
    ns = Namespace(user_id="same")
    results: list[str] = []

    def add() -> None:
        results.append(store.add(ns, "the very same fact").op)

    jobs = [threading.Thread(target=add) for _ in range(4)]
    before = store._group.groups
    _hold_and_queue(store, jobs)
    for job in jobs:
        job.join(60)
    assert sorted(results) == ["ADD", "MERGE", "MERGE", "MERGE"]
    assert store._group.groups - before == 4
    assert store.count(ns) == 1


def test_one_failing_request_does_not_fail_its_group(store: DuckDBStore) -> None:
    store.add(Namespace(user_id="owner"), NewMemory(content="taken", id="fixed-id"))
    outcome: dict[int, str] = {}

    def add(i: int) -> None:
        ns = Namespace(user_id=f"g{i}")
        item = NewMemory(content=f"item {i}", id="fixed-id" if i == 2 else None)
        try:
            store.add(ns, item)
            outcome[i] = "ok"
        except InvalidMemoryError as exc:
            outcome[i] = str(exc)

    jobs = [threading.Thread(target=add, args=(i,)) for i in range(4)]
    _hold_and_queue(store, jobs)
    for job in jobs:
        job.join(60)
    assert outcome[0] == outcome[1] == outcome[3] == "ok"
    assert "fixed-id" in outcome[2]
    for i in (0, 1, 3):
        assert store.count(Namespace(user_id=f"g{i}")) == 1
    assert store.count(Namespace(user_id="g2")) == 0


def test_a_failed_shared_commit_is_retried_request_by_request(
    store: DuckDBStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = store._group._commit
    calls: list[int] = []

    def flaky(batch: object, now: float) -> None:
        calls.append(len(batch.inserts))  # type: ignore[attr-defined]
        if len(batch.inserts) > 1:  # type: ignore[attr-defined]
            raise RuntimeError("shared transaction failed")
        real(batch, now)  # type: ignore[arg-type]

    monkeypatch.setattr(store._group, "_commit", flaky)
    jobs = [
        threading.Thread(target=store.add, args=(Namespace(user_id=f"r{i}"), f"fact {i}"))
        for i in range(3)
    ]
    _hold_and_queue(store, jobs)
    for job in jobs:
        job.join(60)
    assert calls == [3, 1, 1, 1]
    assert all(store.count(Namespace(user_id=f"r{i}")) == 1 for i in range(3))


def test_journal_rows_of_hostile_text_round_trip(store: DuckDBStore) -> None:
    ns = Namespace(user_id="o'neil", session_id="s\\1")
    texts = [t for t in NASTY if t and "\x00" not in t]
    for text in texts:
        store.log_append(ns, "SYSTEM", text, metadata={"t": text})
    got = store.log_entries(ns)
    assert [e.content for e in got] == texts and [e.seq for e in got] == list(
        range(1, len(texts) + 1)
    )
    assert [e.metadata["t"] for e in got] == texts
    state = {f"k'{i}": text for i, text in enumerate(texts)}
    store.set_journal_state(ns, state)
    store.set_journal_state(ns, {"k'0": "replaced ''"})
    assert store.journal_state(ns) == {**state, "k'0": "replaced ''"}
    assert store.journal_state(Namespace(user_id="o'neil")) == {}  # exact namespace only


def test_open_warms_the_embedder_and_word_vectors_in_the_background(tmp_path: Path) -> None:
    warmed = threading.Event()
    seen: list[str] = []

    class Tracking(HashEmbedder):
        warm_on_open = True

        def embed(self, texts):  # type: ignore[no-untyped-def]
            seen.append(f"embed:{threading.current_thread().name}")
            return super().embed(texts)

        def word_vectors(self, words):  # type: ignore[no-untyped-def]
            seen.append(f"words:{threading.current_thread().name}")
            warmed.set()
            return super().embed(words)

    with DuckDBStore(tmp_path / "warm.duckdb", embedder=Tracking(64), touch_flush_interval=None):
        assert warmed.wait(60)  # nobody searched: the store's own thread did it
    assert seen[:2] == [
        "embed:actormem-store-warmup:warm.duckdb",
        "words:actormem-store-warmup:warm.duckdb",
    ]

    class Quiet(Tracking):
        warm_on_open = False  # e.g. a remote embedder: no call at open

    seen.clear()
    with DuckDBStore(tmp_path / "cold.duckdb", embedder=Quiet(64)) as store:
        store.add(Namespace(user_id="u"), "no warm-up for embedders that do not ask")
    assert seen == [f"embed:{threading.current_thread().name}"]


def test_close_waits_for_the_warm_up_so_no_store_thread_outlives_it(tmp_path: Path) -> None:
    # A warm-up left running after close() was killed inside native code at
    # interpreter exit (SIGABRT, "FATAL: exception not rethrown" while loading
    # the model's weights) in 1 of 5 loaded runs of a short `actormem chat`.
    entered, release = threading.Event(), threading.Event()
    seen: list[str] = []

    class Slow(HashEmbedder):
        warm_on_open = True

        def embed(self, texts):  # type: ignore[no-untyped-def]
            if threading.current_thread().name.startswith("actormem-store-warmup"):
                entered.set()
                release.wait(60)  # a model load in progress
            return super().embed(texts)

        def word_vectors(self, words):  # type: ignore[no-untyped-def]
            seen.append("words")
            return super().embed(words)

    store = DuckDBStore(tmp_path / "w.duckdb", embedder=Slow(64), touch_flush_interval=None)
    assert entered.wait(60)
    (warmer,) = [t for t in threading.enumerate() if t.name.startswith("actormem-store-warmup")]
    alive_after_close: list[bool] = []

    def close() -> None:
        store.close()
        alive_after_close.append(warmer.is_alive())

    closer = threading.Thread(target=close)
    closer.start()
    # Give a close() that does not wait the time to return (only the power to
    # catch that bug depends on it; a close() that waits passes either way).
    closer.join(0.5)
    release.set()
    closer.join(60)
    assert alive_after_close == [False]
    assert seen == []  # the steps after the one in progress were skipped

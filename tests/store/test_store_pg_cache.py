"""The PostgreSQL search cache: a per-process copy of searched scopes that answers each
search exactly as the SQL path does, and stays exact through the database's change feed.

The reference is a second store on the same database with the cache off
(``search_cache_bytes=None``): every search is run on both after every kind of
write -- by the cached store itself and by another store (another worker) --
and must return the same rows in the same order with the same scores.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import psycopg
import pytest

from actormem.models.embedders import HashEmbedder
from actormem.store import Namespace, NewMemory, SearchConfig, SearchFilters, SearchMode
from actormem.store import _pg_open_groups as open_groups
from actormem.store import _pg_schema as schema
from actormem.store._pg_feed import trim_gone
from actormem.store._postgres import PostgresStore

DIM = 32
USER = Namespace(user_id="u")
SESSIONS = [Namespace(user_id="u", agent_id="a", session_id=f"s{i}") for i in range(3)]
OTHER = Namespace(user_id="v")
NO_CONTEXT = SearchConfig(context_prev_weight=0, context_next_weight=0, context_prev2_weight=0)
BASE = float(int(time.time()) - 401 * 86_400)  # the corpus spans the last 400 days
WORDS = [f"w{i}" for i in range(60)] + ["tea", "green", "alice", "paris", "river"]


def _open(dsn: str, **kwargs: Any) -> PostgresStore:
    kwargs.setdefault("embedder", HashEmbedder(DIM))
    kwargs.setdefault("touch_flush_interval", None)
    return PostgresStore(dsn, **kwargs)


@pytest.fixture
def pair(pg_dsn: str) -> Iterator[tuple[PostgresStore, PostgresStore]]:
    cached = _open(pg_dsn, search_cache_bytes=2**26)
    ref = _open(pg_dsn, search_cache_bytes=None)
    yield cached, ref
    cached.close()
    ref.close()


def _text(rng: random.Random) -> str:
    n = rng.randint(3, 12)
    p = [1.0 / (i + 1) for i in range(len(WORDS))]
    return " ".join(rng.choices(WORDS, weights=p, k=n))


def _same(got: list[Any], want: list[Any], what: str) -> None:
    assert [h.memory.id for h in got] == [h.memory.id for h in want], what
    for a, b in zip(got, want, strict=True):
        assert a.score == pytest.approx(b.score, abs=1e-6), what
        assert a.cosine == pytest.approx(b.cosine, abs=1e-6), what
        assert a.bm25 == pytest.approx(b.bm25, abs=1e-6), what
        assert a.memory == b.memory, what


_MODES: tuple[SearchMode, ...] = ("hybrid", "vector", "keyword")
_FILTERS = [
    None,
    SearchFilters(kinds=("fact",)),
    SearchFilters(tags_any=("t1", "t2")),
    SearchFilters(tags_all=("t0",)),
    SearchFilters(min_importance=0.5),
    SearchFilters(session_id="s1"),
    SearchFilters(created_after=BASE + 200 * 86_400),
]


def _compare(cached: PostgresStore, ref: PostgresStore, rng: random.Random, step: str) -> int:
    """Every scope, mode and filter on both stores; returns the searches the copy served."""
    assert cached._cache is not None
    before = cached._cache.hits
    combos = [
        (scope, mode, filters, config)
        for scope in (USER, SESSIONS[0], SESSIONS[2])
        for mode in _MODES
        for filters in _FILTERS
        for config in (NO_CONTEXT, None)
    ]
    # every scope and mode unfiltered, and a random share of the rest
    picked = [c for c in combos if c[2] is None] + rng.sample(combos, 24)
    for scope, mode, filters, config in picked:
        query = _text(rng)
        got = cached.search(query, scope, 7, filters, mode=mode, config=config, touch=False)
        want = ref.search(query, scope, 7, filters, mode=mode, config=config, touch=False)
        _same(got, want, f"{step}: {scope} {mode} {filters} {config} {query!r}")
    return cached._cache.hits - before


def _fill(store: PostgresStore, rng: random.Random, n: int, ns: Namespace) -> list[str]:
    items = [
        NewMemory(
            content=_text(rng) + f" n{rng.randint(0, 10**9)}",
            kind=rng.choice(["fact", "fact", "preference"]),
            importance=rng.choice([0.2, 0.5, 0.9]),
            tags=tuple(rng.sample(["t0", "t1", "t2", "t3"], rng.randint(0, 2))),
            created_at=BASE + rng.randint(0, 400) * 86_400.0,
        )
        for _ in range(n)
    ]
    return [r.id for r in store.add_many(ns, items, dedup=False)]


def _live_ids(store: PostgresStore, ns: Namespace) -> list[str]:
    return [r.id for r in store.list(ns, limit=10_000)]


def _writes(
    writer: PostgresStore, reader: PostgresStore, ns: Namespace, rng: random.Random, path: Any
) -> list[tuple[str, Any]]:
    """One write of each kind into ``ns`` by ``writer``, as ``(name, thunk)``."""
    ids = _live_ids(writer, ns)
    return [
        ("adds", lambda: _fill(writer, rng, 15, ns)),
        ("update content", lambda: writer.update(ns, ids[0], content="green tea in paris")),
        ("update importance", lambda: writer.update(ns, ids[1], importance=0.95)),
        ("update tags", lambda: writer.update(ns, ids[2], tags=["t0", "t3"])),
        ("update kind", lambda: writer.update(ns, ids[3], kind="preference")),
        ("delete", lambda: writer.delete(ns, ids[4])),
        ("merge", lambda: writer.add(ns, reader.get(ns, ids[5]).content)),  # type: ignore[union-attr]
        ("consolidate", lambda: writer.consolidate(ns, threshold=0.6)),
        ("import", lambda: (writer.export(OTHER, path), writer.import_(path, namespace=ns))),
        ("decay", lambda: writer.decay(ns, rate=0.99, threshold=0.03)),
        ("auto forget", lambda: writer.auto_forget(ns, threshold=0.05)),
        ("cap", lambda: writer.enforce_cap(ns, 15)),
        # episodes appear in a scope the copy held without: a search blending them goes
        # the SQL way, decided once the copy is current (the other writer's too)
        (
            "episodes",
            lambda: writer.add_many(
                ns, [NewMemory(content=_text(rng), kind="episode") for _ in range(6)]
            ),
        ),
    ]


def test_cached_search_equals_the_sql_path_through_every_kind_of_write(
    pair: tuple[PostgresStore, PostgresStore], tmp_path: Any
) -> None:
    cached, ref = pair
    rng = random.Random(7)
    for ns in SESSIONS:
        _fill(cached, rng, 60, ns)
    _fill(cached, rng, 40, OTHER)
    for scope in (USER, SESSIONS[0], SESSIONS[2]):
        assert cached.warm_cache(scope)
    served = _compare(cached, ref, rng, "loaded")
    assert served > 0
    # each kind of change, by the cached store and by the other one (another worker)
    for round_ in range(2):
        writer = cached if round_ == 0 else ref
        ns = SESSIONS[2 * round_]
        steps = _writes(writer, cached, ns, rng, tmp_path / f"export{round_}.jsonl")
        if round_:
            steps.append(("forget", lambda: writer.forget(SESSIONS[1])))  # noqa: B023
        for name, step in steps:
            step()
            served = _compare(cached, ref, rng, f"round {round_} {name}")
            assert served > 0, name
    # a row deleted by hand in SQL, and one whose importance is changed by hand
    with psycopg.connect(cached.dsn, autocommit=True) as conn:
        victim, other = _live_ids(cached, SESSIONS[2])[:2]
        conn.execute("DELETE FROM memories WHERE id = %s", (victim,))
        conn.execute(
            "SELECT set_config('actormem.writer_version', %s, false)",
            (str(schema.PG_SCHEMA_VERSION),),
        )
        conn.execute("UPDATE memories SET importance = 0.01 WHERE id = %s", (other,))
    _compare(cached, ref, rng, "by hand")


def test_a_stale_copy_is_caught_even_without_the_statement_check(
    pair: tuple[PostgresStore, PostgresStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check is what keeps the copy exact: with catch-up disabled, the comparison fails
    (this is how the equivalence test above would notice a broken feed)."""
    cached, ref = pair
    rng = random.Random(3)
    _fill(cached, rng, 50, SESSIONS[0])
    assert cached.warm_cache(SESSIONS[0])
    assert cached._cache is not None
    monkeypatch.setattr(cached._cache, "_catch_up", lambda entry, seen: True)
    victim = _live_ids(ref, SESSIONS[0])[0]
    text = cached.get(SESSIONS[0], victim).content  # type: ignore[union-attr]
    ref.delete(SESSIONS[0], victim)
    # the copy still ranks the deleted row, the statement no longer returns it: the
    # search falls back (the copy is dropped), never answers with a stale row
    hits = cached.search(text, SESSIONS[0], 5, mode="keyword", config=NO_CONTEXT, touch=False)
    assert victim not in [h.memory.id for h in hits]
    monkeypatch.undo()
    assert not cached._cache.held(SESSIONS[0]) or cached._cache.hits == 0


def test_a_cold_scope_is_served_by_sql_and_loaded_once_it_is_searched_again(
    pg_dsn: str,
) -> None:
    rng = random.Random(2)
    store = _open(pg_dsn, search_cache_bytes=2**26)
    try:
        _fill(store, rng, 80, SESSIONS[0])
        assert store._cache is not None
        first = store.search("w1 tea", SESSIONS[0], 5, config=NO_CONTEXT, touch=False)
        assert store._cache.hits == 0  # the first search went the SQL way
        assert store._cache._thread is None  # one search is no demand: nothing loads
        second = store.search("w1 tea", SESSIONS[0], 5, config=NO_CONTEXT, touch=False)
        assert store._cache.hits == 0
        thread = store._cache._thread  # the second one asked for the copy
        assert thread is not None
        store._cache._queue.put(None)  # the loader stops after the queued load
        thread.join()
        assert store._cache.held(SESSIONS[0]) and store._cache.loads == 1
        again = store.search("w1 tea", SESSIONS[0], 5, config=NO_CONTEXT, touch=False)
        assert store._cache.hits == 1
        _same(second, first, "SQL twice")
        _same(again, first, "cold then cached")
    finally:
        store.close()


def test_a_copy_older_than_the_trimmed_feed_is_reloaded(
    pair: tuple[PostgresStore, PostgresStore],
) -> None:
    cached, ref = pair
    rng = random.Random(4)
    _fill(cached, rng, 30, SESSIONS[0])
    assert cached.warm_cache(SESSIONS[0])
    victim = _live_ids(ref, SESSIONS[0])[0]
    with psycopg.connect(cached.dsn, autocommit=True) as conn:
        conn.execute("DELETE FROM memories WHERE id = %s", (victim,))
        assert trim_gone(conn, 0.0) == 1  # the delete's feed row is gone
    hits = cached.search("w1", SESSIONS[0], 50, mode="keyword", config=NO_CONTEXT, touch=False)
    assert victim not in [h.memory.id for h in hits]
    assert cached._cache is not None and not cached._cache.held(SESSIONS[0])
    assert cached.warm_cache(SESSIONS[0])
    _compare(cached, ref, rng, "after the trim")


_WORKER = """
import json, sys
import psycopg
from actormem.models.embedders import HashEmbedder
from actormem.store import Namespace
from actormem.store._pg_schema import PG_SCHEMA_VERSION
from actormem.store._postgres import PostgresStore
dsn = sys.argv[1]
store = PostgresStore(dsn, embedder=HashEmbedder(DIM_), touch_flush_interval=None,
                      search_cache_bytes=None)
raw = psycopg.connect(dsn)
raw.execute("SELECT set_config('actormem.writer_version', %s, false)", (str(PG_SCHEMA_VERSION),))
raw.commit()
print("ready", flush=True)
for line in sys.stdin:
    op, *args = json.loads(line)
    out = None
    if op == "add":
        out = store.add(Namespace.from_key(args[0]), args[1]).id
    elif op == "update":
        out = store.update(Namespace.from_key(args[0]), args[1], content=args[2]).id
    elif op == "delete":
        store.delete(Namespace.from_key(args[0]), args[1])
    elif op == "forget":
        store.forget(Namespace.from_key(args[0]))
    elif op == "begin":  # a raw statement left uncommitted; its transaction id back
        raw.execute(args[0], args[1])
        out = raw.execute("SELECT pg_current_xact_id()::text").fetchone()[0]
    elif op == "commit":
        raw.commit()
    print(json.dumps(["ok", out]), flush=True)
store.close()
""".replace("DIM_", str(DIM))


class _Worker:
    """Another process writing the same database, driven line by line (no sleeps)."""

    def __init__(self, dsn: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _WORKER, dsn],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None and self.proc.stdout.readline() == "ready\n"

    def __call__(self, *cmd: Any) -> Any:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        status, out = json.loads(self.proc.stdout.readline())
        assert status == "ok"
        return out

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        assert self.proc.wait(60) == 0


def _ids_of(store: PostgresStore, query: str, scope: Namespace) -> list[str]:
    hits = store.search(query, scope, 100, mode="keyword", config=NO_CONTEXT, touch=False)
    return [h.memory.id for h in hits]


def test_each_commit_in_another_process_is_found_by_the_next_search(pg_dsn: str) -> None:
    store = _open(pg_dsn, search_cache_bytes=2**26)
    worker = _Worker(pg_dsn)
    try:
        _fill(store, random.Random(5), 40, SESSIONS[0])
        assert store.warm_cache(USER) and store._cache is not None
        hits = store._cache.hits
        s2 = list(SESSIONS[2].key())
        new = worker("add", s2, "zebra crossing")
        assert _ids_of(store, "zebra", USER) == [new]
        newer = worker("update", s2, new, "zebra stripes")
        assert _ids_of(store, "crossing", USER) == []
        assert _ids_of(store, "stripes", USER) == [newer]
        worker("delete", s2, newer)
        assert _ids_of(store, "zebra", USER) == []
        again = worker("add", s2, "zebra again")
        assert _ids_of(store, "zebra", USER) == [again]
        worker("forget", s2)  # a hard delete
        assert _ids_of(store, "zebra", USER) == []
        assert store._cache.hits - hits == 6  # every one answered by the copy
    finally:
        worker.close()
        store.close()


def test_a_lower_transaction_id_committing_last_is_caught_up_too(pg_dsn: str) -> None:
    """Two writer processes: the one whose transaction got the lower id commits last, after
    the reader's copy has caught up past the other's commit."""
    store = _open(pg_dsn, search_cache_bytes=2**26)
    early, late = _Worker(pg_dsn), _Worker(pg_dsn)
    try:
        # two namespaces: writers of one namespace queue on its statistics rows
        _fill(store, random.Random(6), 20, SESSIONS[0])
        _fill(store, random.Random(7), 20, SESSIONS[2])
        assert store.warm_cache(USER) and store._cache is not None
        a, b = _live_ids(store, SESSIONS[0])[0], _live_ids(store, SESSIONS[2])[0]
        hits = store._cache.hits
        gone = "UPDATE memories SET deleted_at = 1 WHERE id = %s"
        xa = early("begin", gone, [a])
        xb = late("begin", gone, [b])
        assert int(xa) < int(xb)
        everything = " ".join(WORDS)
        assert {a, b} <= set(_ids_of(store, everything, USER))
        late("commit")
        seen = _ids_of(store, everything, USER)
        assert b not in seen and a in seen
        early("commit")
        seen = _ids_of(store, everything, USER)
        assert a not in seen and b not in seen
        assert store._cache.hits - hits == 3
    finally:
        early.close()
        late.close()
        store.close()


def _child_search(store: PostgresStore, out: Any) -> None:
    try:
        hits = store.search("w1", SESSIONS[0], 5, config=NO_CONTEXT, touch=False)
        assert store._cache is not None
        out.put((os.getpid(), [h.memory.id for h in hits], store._cache.held(SESSIONS[0])))
    except BaseException as exc:  # pragma: no cover - reported to the parent
        out.put(repr(exc))


def test_a_forked_child_starts_with_an_empty_cache_and_searches_right(pg_dsn: str) -> None:
    rng = random.Random(8)
    store = _open(pg_dsn, search_cache_bytes=2**26)
    try:
        _fill(store, rng, 30, SESSIONS[0])
        assert store.warm_cache(SESSIONS[0])
        want = [
            h.memory.id for h in store.search("w1", SESSIONS[0], 5, config=NO_CONTEXT, touch=False)
        ]
        ctx = mp.get_context("fork")
        out = ctx.Queue()
        proc = ctx.Process(target=_child_search, args=(store, out))
        proc.start()
        got = out.get(timeout=60)
        proc.join(60)
        assert not isinstance(got, str), got
        assert got[1] == want and got[2] is False  # answered by SQL, no inherited copy
        assert store._cache is not None and store._cache.held(SESSIONS[0])
    finally:
        store.close()


def test_a_filled_v9_store_migrates_to_the_change_feed(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(schema, "PG_SCHEMA_VERSION", 9)
    monkeypatch.setattr(open_groups, "SMALL_BATCH", 0)  # version 9's insert path
    rng = random.Random(9)
    old = _open(pg_dsn, search_cache_bytes=None)
    ids = _fill(old, rng, 50, SESSIONS[0])
    old.delete(SESSIONS[0], ids[0])
    old.close()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        assert conn.execute("SELECT max(version) FROM schema_version").fetchone() == (9,)
    monkeypatch.undo()
    cached = _open(pg_dsn, search_cache_bytes=2**26)
    ref = _open(pg_dsn, search_cache_bytes=None)
    try:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            assert conn.execute("SELECT max(version) FROM schema_version").fetchone() == (
                schema.PG_SCHEMA_VERSION,
            )
            # the old rows carry no stamp; the feed starts empty
            assert conn.execute(
                "SELECT count(*) FROM memories WHERE chg IS NOT NULL"
            ).fetchone() == (0,)
            assert conn.execute("SELECT count(*) FROM memory_gone").fetchone() == (0,)
        assert cached.warm_cache(USER) and cached.warm_cache(SESSIONS[0])
        _compare(cached, ref, rng, "migrated")
        ref.update(SESSIONS[0], ids[1], content="river paris migrated")
        ref.delete(SESSIONS[0], ids[2])
        _fill(ref, rng, 5, SESSIONS[0])
        _compare(cached, ref, rng, "migrated, then written")
    finally:
        cached.close()
        ref.close()


def test_access_counter_flushes_do_not_stamp_rows(
    pair: tuple[PostgresStore, PostgresStore],
) -> None:
    cached, _ = pair
    ids = _fill(cached, random.Random(10), 10, SESSIONS[0])
    with psycopg.connect(cached.dsn, autocommit=True) as conn:
        before = conn.execute("SELECT id, chg::text FROM memories ORDER BY id").fetchall()
    cached.search("w1 w2", SESSIONS[0], 5)  # touches
    cached.flush()
    with psycopg.connect(cached.dsn, autocommit=True) as conn:
        after = conn.execute("SELECT id, chg::text FROM memories ORDER BY id").fetchall()
        touched = conn.execute("SELECT sum(access_count) FROM memories").fetchone()[0]  # type: ignore[index]
    assert touched > 0 and after == before and len(ids) == 10
    _ = np  # numpy is imported for the fixtures' embedder


def test_episodes_another_worker_adds_are_blended_by_the_next_search(
    pair: tuple[PostgresStore, PostgresStore],
) -> None:
    """The copy held the scope without episodes; whether the search blends neighbouring
    episodes (the SQL statement's blend) is decided once the copy is current."""
    cached, ref = pair
    rng = random.Random(11)
    _fill(cached, rng, 40, SESSIONS[0])
    assert cached.warm_cache(USER) and cached._cache is not None
    talk = [
        NewMemory(content=f"kayak meadow turn {i} " + _text(rng), kind="episode") for i in range(30)
    ]
    ref.add_many(SESSIONS[2], talk)
    got = cached.search("kayak meadow", USER, 7, touch=False)  # context on by default
    want = ref.search("kayak meadow", USER, 7, touch=False)
    _same(got, want, "episodes")
    plain = ref.search("kayak meadow", USER, 7, config=NO_CONTEXT, touch=False)
    assert [h.score for h in plain] != [h.score for h in want]  # the blend matters here


def test_a_reembed_to_another_size_elsewhere_drops_the_copy_and_sql_answers(
    pg_dsn: str,
) -> None:
    """Another process re-embedded the store with vectors of another size: the
    copy's catch-up could not take the rows (a raw ValueError on every later
    search of that scope, the copy half-updated).  The copy is dropped and the
    search answered like a store without the cache."""
    scope = Namespace(user_id="u")
    cached = _open(pg_dsn, search_cache_bytes=2**26)
    try:
        cached.add_many(
            scope, [NewMemory(content=f"alpha beta n{i}") for i in range(50)], dedup=False
        )
        assert cached.warm_cache(scope)
        other = _open(
            pg_dsn,
            embedder=HashEmbedder(DIM * 2),
            search_cache_bytes=None,
            on_embedder_mismatch="reembed",
        )
        try:
            want = [
                h.memory.id for h in other.search("alpha", scope, 5, mode="keyword", touch=False)
            ]
        finally:
            other.close()
        for _ in range(2):  # the first search drops the copy; the next is not stuck either
            got = cached.search("alpha", scope, 5, mode="keyword", touch=False)
            assert [h.memory.id for h in got] == want
    finally:
        cached.close()

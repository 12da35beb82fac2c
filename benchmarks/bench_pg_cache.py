"""The PostgreSQL search cache under real limits: ``python -m benchmarks.bench_pg_cache``.

Three measurements, each against a baseline taken in the same run (the machine is
shared: only ratios and the load average beside them mean anything):

* **xmin** -- cached keyword search p50/p99 over one scope of ``--rows`` rows, before
  and after another connection opened a transaction, wrote one row and stayed idle
  in it while ``--writes`` rows were written elsewhere (a pinned ``xmin``); the ratio
  after/before and the feed rows one search's check read (``feed_rows``), plus the
  plan of the feed read.
* **memory** -- one process loads a copy of a scope of ``--memory-rows`` rows at
  ``--dim`` dimensions: the growth of its resident memory and the bytes the cache
  counts (``bytes``), each per 100k rows held.
* **thrash** -- two scopes of ``--thrash-rows`` rows each, a budget that holds one of
  them; 200 searches alternating between them: copies loaded, searches the copies
  answered, and the wall time against a store without the cache (the SQL path).

Vectors are random unit vectors (looked up; embedding is not measured).  Writes a
table and ``benchmarks/results/bench_pg_cache.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import os
import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from actormem.store import Namespace, NewMemory
from actormem.store._postgres import PostgresStore
from benchmarks._common import print_table, summary, write_results
from benchmarks._pg import drop_database, fresh_database, postgres_server
from benchmarks.bench_store import _queries, corpus

F32 = npt.NDArray[np.float32]


class RandomEmbedder:
    """Random unit vectors: a fixed matrix for the corpus, a text-seeded one otherwise."""

    def __init__(self, texts: Sequence[str], dim: int) -> None:
        self.dim = dim
        self.name = f"random-{dim}"
        rng = np.random.default_rng(5)
        vecs = rng.standard_normal((len(texts), dim)).astype(np.float32)
        self._vecs = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
        self._row = {t: i for i, t in enumerate(texts)}

    def embed(self, texts: Sequence[str]) -> F32:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            row = self._row.get(text)
            if row is not None:
                out[i] = self._vecs[row]
            else:
                seed = int.from_bytes(hashlib.blake2b(text.encode()).digest()[:8], "little")
                v = np.random.default_rng(seed).standard_normal(self.dim).astype(np.float32)
                out[i] = v / np.linalg.norm(v)
        return out


def _budget(kwargs: dict[str, Any], byte_budget: int | None, rows: int | None) -> dict[str, Any]:
    """The cache-size argument this version of the store takes (bytes, or rows before)."""
    params = inspect.signature(PostgresStore).parameters
    if "search_cache_bytes" in params:
        kwargs["search_cache_bytes"] = byte_budget
    else:
        kwargs["search_cache_rows"] = rows
    return kwargs


def _open(url: str, embedder: RandomEmbedder, *, off: bool = False, **budget: Any) -> Any:
    kwargs: dict[str, Any] = {
        "embedder": embedder,
        "near_duplicate_threshold": None,
        "touch_flush_interval": None,
    }
    if off:
        _budget(kwargs, None, None)
    elif budget:
        kwargs.update(budget)
    return PostgresStore(url, **kwargs)


def _fill(store: Any, ns: Namespace, texts: Sequence[str]) -> None:
    for start in range(0, len(texts), 5_000):
        store.add_many(ns, [NewMemory(content=t) for t in texts[start : start + 5_000]])


def _latency(store: Any, ns: Namespace, queries: Sequence[str]) -> dict[str, float]:
    for q in queries[:10]:
        store.search(q, ns, 10, mode="keyword", touch=False)
    times = []
    for q in queries:
        t0 = time.perf_counter()
        store.search(q, ns, 10, mode="keyword", touch=False)
        times.append((time.perf_counter() - t0) * 1000)
    s = summary(times)
    return {
        "p50_ms": round(s["p50"], 3),
        "p99_ms": round(s["p99"], 3),
        "load_1m": round(os.getloadavg()[0], 2),
    }


def _feed_plan(url: str, snapshot: str) -> str:
    """The plan of the feed read for ``snapshot`` as this version's check sends it."""
    import psycopg

    from actormem.store import _pg_cache

    feed = getattr(_pg_cache, "_feed_sql", None)
    with psycopg.connect(url, autocommit=True) as conn:
        if feed is not None:
            from actormem.store._pg_feed import snapshot_unseen

            sql, args = feed("memories"), list(snapshot_unseen(snapshot))
        else:
            sql = _pg_cache._changed_sql("memories")
            args = [snapshot.split(":")[0], snapshot]
        rows = conn.execute("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) " + sql, args).fetchall()
    return " | ".join(str(r[0]).strip() for r in rows if "Planning" not in str(r[0]))


def _xmin(
    url: str, texts: list[str], writes: list[str], embedder: RandomEmbedder
) -> dict[str, Any]:
    import psycopg

    from actormem.store._pg_schema import PG_SCHEMA_VERSION

    scope, elsewhere = Namespace(user_id="x0"), Namespace(user_id="x1")
    store = _open(url, embedder)
    writer = _open(url, embedder, off=True)
    res: dict[str, Any] = {"rows": len(texts), "writes": len(writes)}
    try:
        _fill(store, scope, texts)
        _fill(writer, elsewhere, texts[:1])
        store.warm_cache(scope)
        queries = _queries(texts, 200)
        res["before"] = _latency(store, scope, queries)
        with psycopg.connect(url) as idle:
            idle.execute(
                "SELECT set_config('actormem.writer_version', %s, false)", (str(PG_SCHEMA_VERSION),)
            )
            idle.execute("UPDATE memories SET importance = 0.7 WHERE user_id = 'x1'")
            for start in range(0, len(writes), 1_000):
                writer.add_many(
                    elsewhere, [NewMemory(content=t) for t in writes[start : start + 1_000]]
                )
            store.search(queries[0], scope, 10, mode="keyword", touch=False)  # catches up
            cache = store._cache
            feed0 = getattr(cache, "feed_rows", None)
            res["after"] = _latency(store, scope, queries)
            if feed0 is not None:
                res["feed_rows_per_search"] = (cache.feed_rows - feed0) / (len(queries) + 10)
            entry = cache.entry(scope)
            res["feed_plan"] = _feed_plan(url, entry.snapshot)
            idle.rollback()
        res["after_over_before_p50"] = round(res["after"]["p50_ms"] / res["before"]["p50_ms"], 2)
    finally:
        store.close()
        writer.close()
    return res


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _memory(url: str, texts: list[str], embedder: RandomEmbedder) -> dict[str, Any]:
    scope = Namespace(user_id="m0")
    big = 4 * 2**30
    writer = _open(url, embedder, off=True)
    try:
        _fill(writer, scope, texts)
    finally:
        writer.close()
    store = _open(url, embedder, **_budget({}, big, 10**9))
    try:
        store.search("warm up", Namespace(user_id="none"), 1)
        rss = _rss_mb()
        t0 = time.perf_counter()
        store.warm_cache(scope)
        load_s = time.perf_counter() - t0
        grown = _rss_mb() - rss
        entry = store._cache.entry(scope)
        rows = entry.live
        held = entry.nbytes()
        per = 100_000 / rows
        return {
            "rows": rows,
            "dim": embedder.dim,
            "load_s": round(load_s, 2),
            "rss_mb_per_100k_rows": round(grown * per, 1),
            "counted_mb_per_100k_rows": round(held / 2**20 * per, 1),
            "rss_over_counted": round(grown * 2**20 / held, 2),
            "load_1m": round(os.getloadavg()[0], 2),
        }
    finally:
        store.close()


def _thrash(url: str, texts: list[str], embedder: RandomEmbedder, n: int) -> dict[str, Any]:
    a, b = Namespace(user_id="t0"), Namespace(user_id="t1")
    writer = _open(url, embedder, off=True)
    try:
        _fill(writer, a, texts[:n])
        _fill(writer, b, texts[n : 2 * n])
    finally:
        writer.close()
    probe = _open(url, embedder, **_budget({}, 4 * 2**30, 10**9))
    try:
        probe.warm_cache(a)
        one = probe._cache.entry(a)
        one_bytes, one_rows = one.nbytes(), one.rows
    finally:
        probe.close()
    # a budget that holds one copy and not two (1.5 copies)
    store = _open(url, embedder, **_budget({}, int(one_bytes * 1.5), int(one_rows * 1.5)))
    sql = _open(url, embedder, off=True)
    queries = _queries(texts[: 2 * n], 200, seed=3)
    res: dict[str, Any] = {"rows_per_scope": n}
    try:
        t0 = time.perf_counter()
        for i, q in enumerate(queries):
            store.search(q, a if i % 2 == 0 else b, 10, mode="keyword", touch=False)
        res["cached_s"] = round(time.perf_counter() - t0, 2)
        cache = store._cache
        thread = cache._thread
        res["loads"] = cache.loads
        res["hits"] = cache.hits
        t0 = time.perf_counter()
        for i, q in enumerate(queries):
            sql.search(q, a if i % 2 == 0 else b, 10, mode="keyword", touch=False)
        res["sql_s"] = round(time.perf_counter() - t0, 2)
        res["cached_over_sql"] = round(res["cached_s"] / res["sql_s"], 2)
        res["load_1m"] = round(os.getloadavg()[0], 2)
        if isinstance(thread, threading.Thread):
            res["loader_alive"] = thread.is_alive()
    finally:
        store.close()
        sql.close()
    return res


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--writes", type=int, default=20_000)
    ap.add_argument("--memory-rows", type=int, default=100_000)
    ap.add_argument("--thrash-rows", type=int, default=20_000)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--parts", default="xmin,memory,thrash")
    args = ap.parse_args(argv)
    parts = set(args.parts.split(","))
    n_texts = max(args.rows + args.writes, args.memory_rows, 2 * args.thrash_rows)
    texts = corpus(n_texts)
    embedder = RandomEmbedder(texts, args.dim)
    out: dict[str, Any] = {"args": vars(args)}
    with postgres_server() as server:
        for part in ("xmin", "memory", "thrash"):
            if part not in parts:
                continue
            url = fresh_database(server)
            try:
                if part == "xmin":
                    out["xmin"] = _xmin(
                        url,
                        texts[: args.rows],
                        texts[args.rows : args.rows + args.writes],
                        embedder,
                    )
                elif part == "memory":
                    out["memory"] = _memory(url, texts[: args.memory_rows], embedder)
                else:
                    out["thrash"] = _thrash(url, texts, embedder, args.thrash_rows)
            finally:
                drop_database(server, url)
    out["uptime_load"] = os.getloadavg()
    if "xmin" in out:
        x = out["xmin"]
        print_table(
            "cached keyword search, pinned xmin",
            ["case", "p50 ms", "p99 ms", "load"],
            [
                ["before", x["before"]["p50_ms"], x["before"]["p99_ms"], x["before"]["load_1m"]],
                ["after", x["after"]["p50_ms"], x["after"]["p99_ms"], x["after"]["load_1m"]],
            ],
        )
        print("after/before p50:", x["after_over_before_p50"], "feed plan:", x["feed_plan"])
        print("feed rows per search:", x.get("feed_rows_per_search"))
    for part in ("memory", "thrash"):
        if part in out:
            print(part, out[part])
    write_results("bench_pg_cache", out)
    return out


if __name__ == "__main__":
    main()

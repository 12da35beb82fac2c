"""DuckDB beside PostgreSQL in one run: ``python -m benchmarks.bench_store --backend postgres``.

Kept apart from ``bench_store.py`` (which measures DuckDB in depth: FTS,
approximate recall, reopen) because this comparison needs a server and
client processes.  For each size N and each backend, on the same corpus,
vectors and queries:

* **batched ingest** (memories/s): ``add_many`` of each tenant's 1% of N
  (100 tenants; batches of N/100, at most 5,000), embedding excluded
  (vectors are looked up).
* **one-at-a-time add** (adds/s, p50/p99 ms): 500 ``add`` calls into a fresh
  tenant, one transaction each, embedding excluded.
* **hybrid search** p50/p99 (ms, query embedding included) over the scope
  holding all N memories and over one tenant of 100 (1% of N).
* **clients**: 1 and then 4 concurrent clients, each running 200 hybrid
  searches over random tenants: searches/s of all of them together and the
  p99 of one search.  PostgreSQL clients are separate processes, each with
  its own store (connection pool), as workers are.  DuckDB clients are
  threads of one process sharing one store: a DuckDB file cannot be opened
  by a second process, so that is the best it can do.
* **numpy floor**: exact cosine top-10 over the same vectors, before and after.
* **PostgreSQL index build** (``ann_index_build_s``): past ``hnsw_min_rows``
  live rows the scope of all N gets a partial HNSW index; it is built (and
  timed) right after the load, before the searches.
* **PostgreSQL search cache** (:mod:`actormem.store._pg_cache`): the searches
  above are answered from the process's copies of the two scopes, each
  search checked against the database's change feed; ``sql_hybrid_all`` /
  ``sql_hybrid_tenant`` are the same searches by a store without the cache
  (the SQL path, same minutes).  ``cold``: a fresh store's first search
  (answered by SQL; a scope's second search starts the copy's load), the
  seconds from the first search until the background load of the scope of
  all N is done, and the process's resident memory
  grown by that load per 100k rows held.  Client processes load the 100
  tenants' copies before they start (their steady state).
"""

from __future__ import annotations

import contextlib
import functools
import multiprocessing as mp
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from actormem.models.embedders import WordLlamaEmbedder
from actormem.store import Namespace, NewMemory, open_store
from benchmarks._common import summary
from benchmarks._pg import drop_database, fresh_database
from benchmarks.bench_store import (
    BATCH,
    TENANTS,
    LookupEmbedder,
    _latency,
    _queries,
    _search,
    corpus,
)

__all__ = ["BACKENDS", "run_backends"]

BACKENDS = ("duckdb", "postgres")
SOLO_ADDS = 500
CLIENT_QUERIES = 200


def _ingest_tenants(store: Any, texts: Sequence[str]) -> float:
    """Seconds to store ``texts`` as 100 tenants of equal size (``u0`` .. ``u99``)."""
    per = -(-len(texts) // TENANTS)
    t0 = time.perf_counter()
    for t in range(TENANTS):
        ns = Namespace(user_id=f"u{t}", agent_id="bench")
        chunk = texts[t * per : (t + 1) * per]
        for start in range(0, len(chunk), BATCH):
            store.add_many(ns, [NewMemory(content=x) for x in chunk[start : start + BATCH]])
    return time.perf_counter() - t0


def _analyze(url: str) -> float:
    """``ANALYZE`` the tables (seconds it took).

    Right after a bulk load the planner's statistics still describe an empty
    table and it picks whole-table index scans for one tenant (measured at
    10k: 61 ms per tenant search before, 21 ms after).  A live server's
    autovacuum analyzes once about 10% of a table changed, within a minute;
    the benchmark does it at once so that the searches measure a steady state.
    """
    import psycopg

    t0 = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ANALYZE")
    return round(time.perf_counter() - t0, 2)


def _open(backend: str, target: str, embedder: Any) -> Any:
    if backend == "duckdb":
        return open_store(
            target, embedder=embedder, near_duplicate_threshold=None, touch_flush_interval=1.0
        )
    return open_store(target, embedder=embedder, near_duplicate_threshold=None)


def _client_run(store: Any, queries: Sequence[str], seed: int) -> tuple[float, float, list[float]]:
    """``(start, end, latencies_ms)`` of hybrid searches over random tenants."""
    rng = np.random.default_rng(seed)
    tenants = rng.integers(0, TENANTS, size=len(queries))
    for q in queries[:5]:  # warm up (connections, caches)
        store.search(q, Namespace(user_id="u0"), 10)
    times = []
    start = time.monotonic()
    for q, t in zip(queries, tenants, strict=True):
        t0 = time.perf_counter()
        store.search(q, Namespace(user_id=f"u{t}"), 10)
        times.append((time.perf_counter() - t0) * 1000)
    return start, time.monotonic(), times


def _client_process(url: str, queries: list[str], seed: int, ready: Any, go: Any, out: Any) -> None:
    """One PostgreSQL client process: its own embedder and store, then the searches."""
    embedder = WordLlamaEmbedder()
    embedder.embed(["warm up"])
    with contextlib.closing(open_store(url, embedder=embedder)) as store:
        if hasattr(store, "warm_cache"):  # PostgreSQL: the steady state, copies loaded
            for t in range(TENANTS):
                store.warm_cache(Namespace(user_id=f"u{t}"))
        store.search(queries[0], Namespace(user_id="u0"), 10)
        ready.release()
        go.wait()
        out.put(_client_run(store, queries, seed))


def _throughput(runs: Sequence[tuple[float, float, list[float]]]) -> dict[str, float]:
    start = min(r[0] for r in runs)
    end = max(r[1] for r in runs)
    times = [t for r in runs for t in r[2]]
    s = summary(times)
    return {
        "clients": len(runs),
        "searches_per_s": round(len(times) / (end - start), 1),
        "p50_ms": round(s["p50"], 3),
        "p99_ms": round(s["p99"], 3),
    }


def _clients_postgres(url: str, queries: list[str], n: int) -> dict[str, float]:
    ctx = mp.get_context("spawn")  # no inherited connections or threads
    ready, go, out = ctx.Semaphore(0), ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(target=_client_process, args=(url, queries, seed, ready, go, out))
        for seed in range(n)
    ]
    for p in procs:
        p.start()
    for _ in procs:
        if not ready.acquire(timeout=300):
            raise RuntimeError("a client process did not start")
    go.set()
    runs = [out.get(timeout=600) for _ in procs]
    for p in procs:
        p.join(60)
    return _throughput(runs)


def _clients_threads(store: Any, queries: list[str], n: int) -> dict[str, float]:
    runs: list[tuple[float, float, list[float]]] = []
    barrier = threading.Barrier(n)

    def run(seed: int) -> None:
        barrier.wait()
        runs.append(_client_run(store, queries, seed))

    threads = [threading.Thread(target=run, args=(seed,)) for seed in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return _throughput(runs)


def _solo_adds(store: Any, texts: Sequence[str]) -> dict[str, float]:
    ns = Namespace(user_id="solo", agent_id="bench")
    times = []
    t0 = time.perf_counter()
    for text in texts:
        t1 = time.perf_counter()
        store.add(ns, text)
        times.append((time.perf_counter() - t1) * 1000)
    secs = time.perf_counter() - t0
    s = summary(times)
    return {
        "adds_per_s": round(len(texts) / secs, 1),
        "p50_ms": round(s["p50"], 3),
        "p99_ms": round(s["p99"], 3),
    }


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _sql_and_cold(
    store: Any, target: str, lookup: LookupEmbedder, queries: list[str]
) -> dict[str, Any]:
    """The SQL path's latencies (a store without the cache), then ``store``'s cold start."""
    everyone, tenant = Namespace(agent_id="bench"), Namespace(user_id="u7")
    res: dict[str, Any] = {}
    sql: Any = open_store(
        target, embedder=lookup, near_duplicate_threshold=None, search_cache_bytes=None
    )
    try:
        res["sql_hybrid_all"] = _latency(
            functools.partial(_search, sql, everyone, "hybrid"), queries
        )
        res["sql_hybrid_tenant"] = _latency(
            functools.partial(_search, sql, tenant, "hybrid"), queries
        )
    finally:
        sql.close()
    rss = _rss_mb()
    t0 = time.perf_counter()
    store.search(queries[0], everyone, 10)  # cold: SQL
    first_ms = (time.perf_counter() - t0) * 1000
    store.search(queries[1], everyone, 10)  # searched again: the copy starts loading
    while not store._cache.held(everyone):  # the background load (benchmark: polled)
        time.sleep(0.02)
    load_s = time.perf_counter() - t0
    rows = store._cache.rows
    grown = _rss_mb() - rss
    res["cold"] = {
        "first_search_ms": round(first_ms, 1),
        "load_s": round(load_s, 2),
        "rows": rows,
        "rss_mb_per_100k_rows": round(grown / rows * 100_000, 1) if rows else None,
        "arrays_mb_per_100k_rows": round(
            store._cache.entry(everyone).nbytes() / 2**20 / rows * 100_000, 1
        )
        if rows
        else None,
    }
    store.warm_cache(tenant)
    return res


def _one_backend(
    backend: str,
    target: str,
    texts: list[str],
    solo: list[str],
    lookup: LookupEmbedder,
    queries: list[str],
    floor: Callable[[str], Any],
) -> dict[str, Any]:
    res: dict[str, Any] = {"backend": backend}
    store = _open(backend, target, lookup)
    try:
        secs = _ingest_tenants(store, texts)
        res["ingest_excl_embed_per_s"] = round(len(texts) / secs)
        res["one_at_a_time_add"] = _solo_adds(store, solo)
        if backend == "postgres":
            res["analyze_s"] = _analyze(target)
            # the scope of all N gets its partial HNSW index once past hnsw_min_rows
            # (a search would start the build in the background; here it is built
            # first, and timed, so that the searches measure the steady state)
            everyone = Namespace(agent_id="bench")
            if store.count(everyone) >= (store._ann.min_rows or 10**18):
                t0 = time.perf_counter()
                store.build_vector_index(everyone)
                res["ann_index_build_s"] = round(time.perf_counter() - t0, 1)
        res["numpy_floor_before"] = _latency(floor, queries)
        everyone = Namespace(agent_id="bench")
        if backend == "postgres":
            res.update(_sql_and_cold(store, target, lookup, queries))
        res["hybrid_all"] = _latency(functools.partial(_search, store, everyone, "hybrid"), queries)
        res["hybrid_tenant"] = _latency(
            functools.partial(_search, store, Namespace(user_id="u7"), "hybrid"), queries
        )
        res["numpy_floor_after"] = _latency(floor, queries)
        if backend == "duckdb":
            res["clients_1"] = _clients_threads(store, queries[:CLIENT_QUERIES], 1)
            res["clients_4"] = _clients_threads(store, queries[:CLIENT_QUERIES], 4)
            res["clients_are"] = "threads of one process (one process per DuckDB file)"
    finally:
        store.close()
    if backend == "postgres":
        res["clients_1"] = _clients_postgres(target, queries[:CLIENT_QUERIES], 1)
        res["clients_4"] = _clients_postgres(target, queries[:CLIENT_QUERIES], 4)
        res["clients_are"] = "processes, each with its own store"
    one, four = res["clients_1"]["searches_per_s"], res["clients_4"]["searches_per_s"]
    res["clients_4_over_1"] = round(four / one, 2) if one else None
    return res


def run_backends(
    n: int,
    tmp: Path,
    embedder: WordLlamaEmbedder,
    server_dsn: str | None,
    backends: Sequence[str],
) -> dict[str, Any]:
    """Every backend at size ``n`` on the same corpus, vectors and queries."""
    texts = corpus(n + SOLO_ADDS)
    vectors = np.concatenate(
        [embedder.embed(texts[i : i + 10_000]) for i in range(0, len(texts), 10_000)]
    )
    lookup = LookupEmbedder(texts, vectors, embedder)
    queries = _queries(texts[:n], 200)
    qvecs = {q: embedder.embed([q])[0] for q in queries}
    stored = vectors[:n]

    def floor(q: str) -> Any:
        scores = stored @ qvecs[q]
        top = np.argpartition(-scores, 9)[:10]
        return top[np.argsort(-scores[top])]

    out: dict[str, Any] = {"n": n, "backends": {}}
    for backend in backends:
        if backend == "duckdb":
            target = str(tmp / f"cmp_{n}.duckdb")
        else:
            assert server_dsn is not None
            target = fresh_database(server_dsn)
        try:
            out["backends"][backend] = _one_backend(
                backend, target, texts[:n], texts[n:], lookup, queries, floor
            )
        finally:
            if backend == "postgres":
                assert server_dsn is not None
                drop_database(server_dsn, target)
    return out


def table_rows(results: Sequence[dict[str, Any]]) -> tuple[list[str], list[list[Any]]]:
    """Columns and rows of the comparison table."""
    cols = [
        "N",
        "backend",
        "ingest/s",
        "adds/s",
        "add p99",
        "all p50",
        "all p99",
        "tnt p50",
        "tnt p99",
        "floor",
        "1 cl/s",
        "4 cl/s",
        "4/1",
        "4cl p99",
        "SQL all p50",
        "SQL tnt p50",
    ]
    rows = []
    for r in results:
        for name, b in r["backends"].items():
            rows.append(
                [
                    f"{r['n']:,}",
                    name,
                    f"{b['ingest_excl_embed_per_s']:,}",
                    b["one_at_a_time_add"]["adds_per_s"],
                    b["one_at_a_time_add"]["p99_ms"],
                    b["hybrid_all"]["p50_ms"],
                    b["hybrid_all"]["p99_ms"],
                    b["hybrid_tenant"]["p50_ms"],
                    b["hybrid_tenant"]["p99_ms"],
                    b["numpy_floor_before"]["p50_ms"],
                    b["clients_1"]["searches_per_s"],
                    b["clients_4"]["searches_per_s"],
                    b["clients_4_over_1"],
                    b["clients_4"]["p99_ms"],
                    b["sql_hybrid_all"]["p50_ms"] if "sql_hybrid_all" in b else "-",
                    b["sql_hybrid_tenant"]["p50_ms"] if "sql_hybrid_tenant" in b else "-",
                ]
            )
    return cols, rows

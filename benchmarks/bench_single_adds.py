"""PostgreSQL: a namespace filled one add at a time beside the same rows added in batches.

``python -m benchmarks.bench_single_adds [--sizes 1000,10000]``

An agent records its memories one at a time (the recorder turn by turn,
``save_fact``, ``on_session_end``): every ``add`` is its own transaction.  On
PostgreSQL each inserted batch used to get posting groups of its own (schema
v9), so such a namespace held one group per add and term, and every search
summed a query term's document frequency over all of them.  For each size N,
in one run on one private server and one database:

* **single adds**: N ``add`` calls into the namespace ``solo`` (one
  transaction each, dedup on, embedding excluded: vectors are looked up):
  adds/s and the p50/p99 of one add;
* **batched baseline**: the same N texts with ``add_many`` in batches of
  1,000 into the namespace ``batch``;
* **search**, both namespaces, the same queries: hybrid and keyword p50/p99
  on the SQL path (a store without the per-process search cache: what a cold
  scope, a process that does not hold it and the cache's fallback run) and
  hybrid with the cache; the ratio ``solo / batch`` of each is the figure
  that matters (1.0: a namespace filled one add at a time searches as fast
  as one filled in batches);
* **groups**: posting-group rows per query term in each namespace (mean and
  largest), the whole namespace's group rows, and the buffers the database
  touches to sum a query's terms' statistics over their groups (``EXPLAIN
  (ANALYZE, BUFFERS)``: a count, independent of the load).

The load average is recorded beside every latency.  Results:
``benchmarks/results/bench_single_adds.json``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any

from actormem.models.embedders import WordLlamaEmbedder
from actormem.store import Namespace, NewMemory
from actormem.store._postgres import PostgresStore
from actormem.store._tokenize import tokenize
from benchmarks._backends import _solo_adds
from benchmarks._common import print_table, write_results
from benchmarks._pg import drop_database, fresh_database, postgres_server
from benchmarks.bench_store import LookupEmbedder, _latency, _queries, corpus

QUERIES = 200
BATCH = 1000
SOLO = Namespace(user_id="solo", agent_id="bench")
BATCHED = Namespace(user_id="batch", agent_id="bench")


def _adds(store: PostgresStore, texts: list[str]) -> dict[str, float]:
    """One ``add`` at a time into ``SOLO`` (``_backends``' measurement), with the load."""
    return {**_solo_adds(store, texts), "load_1m": round(os.getloadavg()[0], 2)}


def _groups(store: PostgresStore, ns: Namespace, queries: list[str]) -> dict[str, float]:
    terms = sorted({t for q in queries for t in tokenize(q)})
    with store._pool.connection() as conn:
        per = conn.execute(
            "SELECT q.t, (SELECT count(*) FROM posting_groups g WHERE g.term = q.t "
            "AND g.user_id = %s AND g.agent_id = %s) FROM unnest(%s::text[]) AS q(t)",
            (ns.user_id, ns.agent_id, terms),
        ).fetchall()
        total = conn.execute(
            "SELECT count(*) FROM posting_groups WHERE user_id = %s AND agent_id = %s",
            (ns.user_id, ns.agent_id),
        ).fetchone()
    counts = [int(n) for _, n in per if n]
    return {
        "per_query_term_mean": round(statistics.fmean(counts), 1) if counts else 0.0,
        "per_query_term_max": max(counts, default=0),
        "namespace_rows": int(total[0]) if total else 0,
    }


def _stats_buffers(store: PostgresStore, ns: Namespace, queries: list[str]) -> dict[str, float]:
    """Buffers the database touches to sum each query's terms' ``df`` and bounds over their
    groups in ``ns`` (what every keyword search and its pruning read first): mean and
    largest over the queries, from ``EXPLAIN (ANALYZE, BUFFERS)`` -- a count, not a time,
    so it does not move with the machine's load."""
    hits = []
    with store._pool.connection() as conn:
        for q in queries:
            plan = conn.execute(
                "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) SELECT q.t, sum(g.df), max(g.max_tf), "
                "min(g.min_doclen) FROM unnest(%s::text[]) AS q(t) JOIN posting_groups g "
                "ON g.term = q.t AND g.user_id = %s AND g.agent_id = %s GROUP BY q.t",
                (sorted(set(tokenize(q))), ns.user_id, ns.agent_id),
            ).fetchone()[0][0]["Plan"]
            hits.append(int(plan["Shared Hit Blocks"]) + int(plan["Shared Read Blocks"]))
    return {"mean": round(statistics.fmean(hits), 1), "max": max(hits)}


def _search(store: PostgresStore, ns: Namespace, mode: str, queries: list[str]) -> Any:
    return _latency(
        lambda q: store.search(q, ns, 10, mode=mode, touch=False),  # type: ignore[arg-type]
        queries,
    )


def run_size(server: str, n: int, embedder: WordLlamaEmbedder) -> dict[str, Any]:
    texts = corpus(n, seed=23)
    lookup = LookupEmbedder(texts, embedder.embed(texts), embedder)
    queries = _queries(texts, QUERIES)
    url = fresh_database(server, "singles")
    out: dict[str, Any] = {"n": n}
    try:
        sql = PostgresStore(url, embedder=lookup, search_cache_bytes=None)
        try:
            t0 = time.perf_counter()
            for start in range(0, n, BATCH):
                sql.add_many(BATCHED, [NewMemory(content=t) for t in texts[start : start + BATCH]])
            out["batched_per_s"] = round(n / (time.perf_counter() - t0), 1)
            out["single_adds"] = _adds(sql, texts)
            with sql._pool.connection() as conn:
                conn.execute("ANALYZE")
            for label, ns in (("solo", SOLO), ("batch", BATCHED)):
                out[f"groups_{label}"] = _groups(sql, ns, queries)
                out[f"stats_buffers_{label}"] = _stats_buffers(sql, ns, queries)
            # alternate the namespaces so that a change of load hits both
            for mode in ("hybrid", "keyword"):
                for label, ns in (("solo", SOLO), ("batch", BATCHED)):
                    out[f"sql_{mode}_{label}"] = _search(sql, ns, mode, queries)
        finally:
            sql.close()
        cached = PostgresStore(url, embedder=lookup)
        try:
            for label, ns in (("solo", SOLO), ("batch", BATCHED)):
                cached.warm_cache(ns)
                out[f"cached_hybrid_{label}"] = _search(cached, ns, "hybrid", queries)
        finally:
            cached.close()
    finally:
        drop_database(server, url)
    for key in ("sql_hybrid", "sql_keyword", "cached_hybrid"):
        solo, batch = out[f"{key}_solo"]["p50_ms"], out[f"{key}_batch"]["p50_ms"]
        out[f"{key}_p50_ratio"] = round(solo / batch, 2) if batch else None
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000", help="comma-separated sizes")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    embedder = WordLlamaEmbedder()
    embedder.embed(["warm up"])
    results = []
    with postgres_server() as server:
        for n in sizes:
            results.append(run_size(server, n, embedder))
    rows = []
    for r in results:
        for key in ("sql_hybrid", "sql_keyword", "cached_hybrid"):
            solo, batch = r[f"{key}_solo"], r[f"{key}_batch"]
            rows.append(
                [
                    f"{r['n']:,} {key}",
                    solo["p50_ms"],
                    solo["p99_ms"],
                    batch["p50_ms"],
                    batch["p99_ms"],
                    r[f"{key}_p50_ratio"],
                    solo["load_1m"],
                ]
            )
    print_table(
        "search of a namespace filled by single adds beside one filled in batches (ms)",
        ["N / path", "solo p50", "solo p99", "batch p50", "batch p99", "p50 solo/batch", "load"],
        rows,
    )
    print_table(
        "single adds and posting groups",
        [
            "N",
            "adds/s",
            "add p50 ms",
            "add p99 ms",
            "batched/s",
            "groups/term solo mean / max",
            "batch mean / max",
            "group rows solo / batch",
            "df buffers solo / batch (mean)",
        ],
        [
            [
                f"{r['n']:,}",
                r["single_adds"]["adds_per_s"],
                r["single_adds"]["p50_ms"],
                r["single_adds"]["p99_ms"],
                r["batched_per_s"],
                f"{r['groups_solo']['per_query_term_mean']} / "
                f"{r['groups_solo']['per_query_term_max']}",
                f"{r['groups_batch']['per_query_term_mean']} / "
                f"{r['groups_batch']['per_query_term_max']}",
                f"{r['groups_solo']['namespace_rows']:,} / {r['groups_batch']['namespace_rows']:,}",
                f"{r['stats_buffers_solo']['mean']} / {r['stats_buffers_batch']['mean']}",
            ]
            for r in results
        ],
    )
    payload = {"benchmark": "single_adds", "sizes": sizes, "results": results}
    write_results("bench_single_adds", payload)
    return payload


if __name__ == "__main__":
    main(sys.argv[1:])

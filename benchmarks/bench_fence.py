"""PostgreSQL: what the write fence costs one durable ``add`` (fenced beside unfenced).

``python -m benchmarks.bench_fence [--adds 2000] [--rounds 3]``

A cluster agent's store is fenced (:mod:`actormem.store._pg_fence`): every
write transaction first takes the fence's advisory lock (shared, in the
statement that reads the transaction id anyway) and reads the fence row
``FOR SHARE`` in a statement of its own.  This measures one ``add`` (its own
transaction, committed and durable when it returns; dedup on) by a fenced
store beside the same ``add`` by an unfenced store, in one run on one private
server and one database, the two interleaved add by add (their order swapped
every add, so a change of load hits both), each in a namespace of its own.
The embedder is a cheap hash (``HashEmbedder(64)``): the figure is the
database round trip, not the embedding.  Reported per round: p50 / p99 /
mean of each and the ratio fenced / unfenced of the p50 and the mean, with
the load average; then the medians over the rounds.  Results:
``benchmarks/results/bench_fence.json``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any

from actormem.models.embedders import HashEmbedder
from actormem.store import Namespace
from actormem.store._postgres import PostgresStore
from benchmarks._common import print_table, summary, write_results
from benchmarks._pg import drop_database, fresh_database, postgres_server, server_settings

FENCED = Namespace(user_id="fenced", agent_id="bench")
PLAIN = Namespace(user_id="plain", agent_id="bench")
HOLDER = '[["fenced", "bench", "", ""], "bench"]'


def _round(fenced: PostgresStore, plain: PostgresStore, n: int, r: int) -> dict[str, Any]:
    times: dict[str, list[float]] = {"fenced": [], "plain": []}
    order = [("fenced", fenced, FENCED), ("plain", plain, PLAIN)]
    load0 = os.getloadavg()[0]
    for i in range(n):
        text = f"round {r} note {i}: the user mentioned item {i * 7919 % 10007} today"
        for label, store, ns in order if i % 2 else order[::-1]:
            t0 = time.perf_counter()
            store.add(ns, text)
            times[label].append((time.perf_counter() - t0) * 1e3)
    out: dict[str, Any] = {
        k: {m: round(v, 3) for m, v in summary(t).items()} for k, t in times.items()
    }
    for m in ("p50", "mean"):
        out[f"{m}_ratio"] = round(out["fenced"][m] / out["plain"][m], 3)
    out["load_1m"] = [round(load0, 2), round(os.getloadavg()[0], 2)]
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--adds", type=int, default=2000, help="adds per store and round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    rounds: list[dict[str, Any]] = []
    with postgres_server() as server:
        url = fresh_database(server, "fence")
        try:
            settings = server_settings(url)
            kw: dict[str, Any] = {"embedder": HashEmbedder(64), "touch_flush_interval": None}
            fenced, plain = PostgresStore(url, **kw), PostgresStore(url, **kw)
            try:
                fenced.fence(HOLDER, 1)
                _round(fenced, plain, 50, -1)  # warm up: pools, plans, caches
                for r in range(args.rounds):
                    rounds.append(_round(fenced, plain, args.adds, r))
            finally:
                fenced.close()
                plain.close()
        finally:
            drop_database(server, url)
    rows = [
        [
            f"round {i + 1}",
            r["plain"]["p50"],
            r["fenced"]["p50"],
            r["p50_ratio"],
            r["plain"]["p99"],
            r["fenced"]["p99"],
            r["mean_ratio"],
            f"{r['load_1m'][0]} / {r['load_1m'][1]}",
        ]
        for i, r in enumerate(rounds)
    ]
    med = {k: statistics.median(r[k] for r in rounds) for k in ("p50_ratio", "mean_ratio")}
    print_table(
        f"one durable add on PostgreSQL, fenced beside unfenced ({args.adds} each per round, ms)",
        [
            "round",
            "unfenced p50",
            "fenced p50",
            "p50 ratio",
            "unfenced p99",
            "fenced p99",
            "mean ratio",
            "load start / end",
        ],
        rows,
    )
    print(f"median over rounds: p50 ratio {med['p50_ratio']}, mean ratio {med['mean_ratio']}")
    payload = {
        "benchmark": "fence",
        "adds": args.adds,
        "server": settings,
        "rounds": rounds,
        "median_p50_ratio": med["p50_ratio"],
        "median_mean_ratio": med["mean_ratio"],
    }
    write_results("bench_fence", payload)
    return payload


if __name__ == "__main__":
    main(sys.argv[1:])

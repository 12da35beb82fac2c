"""actormem's long-term store beside LangGraph's SqliteStore (sqlite-vec), same run, same embedder.

Per size (``--sizes``, default 10k and 100k), on both sides: fill the store
with batched puts of 1,000 (the WordLlama embedding included, timed), then
``--single`` puts one call at a time (each durable when it returns: a
DuckDB commit / a SQLite autocommit), then ``--queries`` searches (top 10;
actormem's default hybrid search and its vector-only mode, LangGraph's
semantic search).  The peer runs in its own virtualenv
(``benchmarks/peers/langgraph_peer.py``; ``make bench`` installs it); without
it the peer column says n/a.  Ratios are actormem / peer in this run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from actormem.models.embedders import WordLlamaEmbedder
from actormem.store import DuckDBStore, Namespace
from benchmarks._common import print_table, summary, write_results

PEER_PYTHON = Path(__file__).resolve().parent.parent / ".venv-peers" / "bin" / "python"
PEER_SCRIPT = Path(__file__).resolve().parent / "peers" / "langgraph_peer.py"


def _texts(n: int, offset: int = 0) -> list[str]:
    """The peer script's corpus (the same sentences on both sides)."""
    topics = ["tea", "trains", "Lisbon", "hiking", "jazz", "python", "gardens", "chess"]
    return [
        f"memory {i}: the user talked about {topics[i % 8]} and {topics[(i * 7) % 8]} "
        f"on day {i % 97}"
        for i in range(offset, offset + n)
    ]


def actormem_side(size: int, single: int, queries: int) -> dict[str, Any]:
    embedder = WordLlamaEmbedder()
    embedder.embed(["warm up"])
    ns = Namespace(user_id="bench", agent_id="memories")
    with tempfile.TemporaryDirectory() as d:
        store = DuckDBStore(Path(d) / "a.duckdb", embedder=embedder, touch_flush_interval=None)
        try:
            texts = _texts(size)
            t0 = time.perf_counter()
            for start in range(0, size, 1_000):
                store.add_many(ns, texts[start : start + 1_000], dedup=False)
            batch_s = time.perf_counter() - t0
            one = []
            for text in _texts(single, offset=size):
                t0 = time.perf_counter()
                store.add(ns, text)
                one.append((time.perf_counter() - t0) * 1000)
            out: dict[str, Any] = {
                "put_batch_per_s": size / batch_s,
                "put_one_per_s": single / (sum(one) / 1000),
                "put_one_ms": summary(one),
            }
            for mode in ("hybrid", "vector"):
                times = []
                for i in range(queries):
                    q = f"what did the user say about tea on day {i % 97}"
                    t0 = time.perf_counter()
                    hits = store.search(q, ns, limit=10, mode=mode)
                    times.append((time.perf_counter() - t0) * 1000)
                    assert hits
                out[f"search_{mode}_ms"] = summary(times)
        finally:
            store.close()
    return out


def peer_side(sizes: list[int], single: int, queries: int) -> dict[str, Any] | None:
    py = os.environ.get("ACTORMEM_PEER_PYTHON") or str(PEER_PYTHON)
    if not Path(py).exists():
        return None
    arg = ",".join(map(str, sizes))
    try:
        out = subprocess.run(
            [py, str(PEER_SCRIPT), arg, str(single), str(queries)],
            capture_output=True,
            text=True,
            timeout=3_600,
            check=True,
        ).stdout
        result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
        return result
    except (subprocess.SubprocessError, json.JSONDecodeError, IndexError) as exc:
        return {"error": repr(exc)[:300]}


def _load() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--single", type=int, default=200, help="one-at-a-time puts per size")
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--quick", action="store_true", help="2,000 memories, 30 puts, 20 queries")
    args = ap.parse_args(argv)
    if args.quick:
        args.sizes, args.single, args.queries = "2000", 30, 20
    sizes = [int(s) for s in args.sizes.split(",")]
    load_before = _load()
    ours = {str(n): actormem_side(n, args.single, args.queries) for n in sizes}
    peer = peer_side(sizes, args.single, args.queries)
    res: dict[str, Any] = {"sizes": sizes, "actormem": ours, "langgraph_sqlite": peer}
    res["load_average"] = [load_before, _load()]
    p_all = peer if peer and "error" not in peer else {}
    rows = []
    for n in sizes:
        a, p = ours[str(n)], p_all.get(str(n), {})

        def row(label: str, mine: float, theirs: float | None) -> list[Any]:
            return [
                label,
                mine,
                "n/a" if theirs is None else theirs,
                "-" if not theirs else mine / theirs,
            ]

        rows += [
            row(
                f"{n:,}: put-batch, per s (embedding incl.)",
                a["put_batch_per_s"],
                p.get("put_batch_per_s"),
            ),
            row(f"{n:,}: put-one, durable, per s", a["put_one_per_s"], p.get("put_one_per_s")),
            row(f"{n:,}: put-one p50 ms", a["put_one_ms"]["p50"], p.get("put_one_ms_p50")),
            row(
                f"{n:,}: search p50 ms (hybrid / peer semantic)",
                a["search_hybrid_ms"]["p50"],
                p.get("search_ms_p50"),
            ),
            row(
                f"{n:,}: search p99 ms (hybrid / peer semantic)",
                a["search_hybrid_ms"]["p99"],
                p.get("search_ms_p99"),
            ),
            row(
                f"{n:,}: search p50 ms (vector / peer semantic)",
                a["search_vector_ms"]["p50"],
                p.get("search_ms_p50"),
            ),
        ]
    print_table(
        "actormem DuckDBStore vs LangGraph SqliteStore + sqlite-vec, WordLlama both, same run "
        f"(load average {load_before:.1f} -> {_load():.1f})",
        ["measure", "actormem", "LangGraph SqliteStore", "actormem / peer"],
        rows,
    )
    if peer and "error" in peer:
        print(f"peer failed: {peer['error']}")
    print(f"results: {write_results('bench_peers', res)}")
    return res


if __name__ == "__main__":
    main()

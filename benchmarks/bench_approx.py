"""The index's approximate first pass against exact search: recall and time.

Two corpora embedded with the bundled WordLlama embedder: ``bench_store``'s
synthetic sentences with its queries, and LoCoMo text (the conversations'
turns, then random 6-30-word windows of them up to the size) with the
LoCoMo questions as queries (read from ``../shared/data/locomo_dev.json``;
skipped when absent).  For each size, one :class:`MemoryIndex` holding the
vectors answers every query's nearest ``k`` both ways (``nearest`` and
``nearest(exact=True)``), with the index's default projection, re-score
depth and, for the timing, threshold 1 (so the approximate path runs at
every size):

* **recall@10 / @50 / @100**: mean share of the exact top-k the first pass
  returns (the hybrid search takes ``SearchConfig.candidates`` = 100 vector
  candidates; its second stage re-ranks the best 50);
* **p50 ms**: the exact and approximate ``nearest`` (k = 100) and the numpy
  floor (one product and ``argpartition`` of the top 10), alternated per
  query, with the 1-minute load average.

Usage::

    python -m benchmarks.bench_approx [--sizes 20000,50000,100000] [--queries 200]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from actormem.models.embedders import WordLlamaEmbedder
from actormem.store._index import MemoryIndex
from actormem.store._types import MemoryRecord, Namespace
from benchmarks._common import print_table, write_results
from benchmarks.bench_store import _queries, corpus

__all__ = ["main"]

F32 = npt.NDArray[np.float32]
LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo_dev.json"
NS = Namespace(user_id="bench")


def _embed(embedder: WordLlamaEmbedder, texts: list[str]) -> F32:
    parts = [embedder.embed(texts[i : i + 10_000]) for i in range(0, len(texts), 10_000)]
    return np.concatenate(parts).astype(np.float32)


def _locomo(n: int) -> tuple[list[str], list[str]] | None:
    """LoCoMo turns, then random windows of them, up to ``n`` texts; and the questions."""
    if not LOCOMO.exists():
        return None
    turns: list[str] = []
    questions: list[str] = []
    for conv in json.loads(LOCOMO.read_text()):
        for key, value in conv["conversation"].items():
            if re.fullmatch(r"session_\d+", key):
                turns.extend(t["text"] for t in value)
        questions.extend(q["question"] for q in conv["qa"])
    words = " ".join(turns).split()
    out = list(turns)
    rng = np.random.default_rng(3)
    while len(out) < n:
        size = int(rng.integers(6, 30))
        start = int(rng.integers(0, len(words) - size))
        out.append(" ".join(words[start : start + size]))
    return out[:n], questions


def _index(vectors: F32) -> MemoryIndex:
    index = MemoryIndex(vectors.shape[1], approx_min_rows=1)
    records = [
        MemoryRecord(
            id=f"m{i}", namespace=NS, kind="fact", content="x", content_hash=f"h{i}", importance=0.5
        )
        for i in range(len(vectors))
    ]
    index.add(records, vectors)
    if not index.approximate:  # the projection's check refused it: "approx" would be exact
        raise SystemExit(
            f"the index kept its {len(vectors)} vectors exact (the first pass's projection "
            "check refused them): nothing approximate to measure"
        )
    return index


def _measure(vectors: F32, queries: F32) -> dict[str, Any]:
    index = _index(vectors)
    hits = {10: 0.0, 50: 0.0, 100: 0.0}
    times: dict[str, list[float]] = {"exact": [], "approx": [], "floor": []}

    def floor(q: F32) -> Any:
        return np.argpartition(-(vectors @ q), 9)[:10]

    calls = {
        "exact": lambda q: index.nearest(NS, q, 100, exact=True),
        "approx": lambda q: index.nearest(NS, q, 100),
        "floor": floor,
    }
    for q in queries[:10]:  # warm up
        for fn in calls.values():
            fn(q)
    for q in queries:
        for name, fn in calls.items():
            t0 = time.perf_counter()
            fn(q)
            times[name].append((time.perf_counter() - t0) * 1000)
        exact = index.nearest(NS, q, 100, exact=True).tolist()
        approx = index.nearest(NS, q, 100).tolist()
        for k in hits:
            hits[k] += len(set(exact[:k]) & set(approx[:k])) / k
    out: dict[str, Any] = {f"recall_at{k}": round(v / len(queries), 4) for k, v in hits.items()}
    out.update({f"{name}_p50_ms": round(float(np.median(t)), 3) for name, t in times.items()})
    out["load_1m"] = round(os.getloadavg()[0], 2)
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the benchmark, print a table and write ``results/bench_approx.json``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="20000,50000,100000")
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    embedder = WordLlamaEmbedder()
    top = max(sizes)
    texts = corpus(top)
    sets: dict[str, tuple[F32, F32]] = {
        "bench_store": (_embed(embedder, texts), _embed(embedder, _queries(texts, args.queries)))
    }
    locomo = _locomo(top)
    if locomo is not None:
        sets["locomo"] = (_embed(embedder, locomo[0]), _embed(embedder, locomo[1][: args.queries]))
    results = []
    for name, (vectors, queries) in sets.items():
        queries = queries[np.linalg.norm(queries, axis=1) > 0]
        for n in sizes:
            res = {"corpus": name, "n": n, **_measure(np.ascontiguousarray(vectors[:n]), queries)}
            results.append(res)
    rows = [
        [
            r["corpus"],
            f"{r['n']:,}",
            r["recall_at10"],
            r["recall_at50"],
            r["recall_at100"],
            r["exact_p50_ms"],
            r["approx_p50_ms"],
            r["floor_p50_ms"],
            round(r["approx_p50_ms"] / r["exact_p50_ms"], 2),
            r["load_1m"],
        ]
        for r in results
    ]
    print_table(
        "approximate first pass against exact search (nearest 100)",
        [
            "corpus",
            "N",
            "recall@10",
            "recall@50",
            "recall@100",
            "exact p50",
            "approx p50",
            "floor p50",
            "approx / exact",
            "load 1m",
        ],
        rows,
    )
    payload = {"benchmark": "approx", "sizes": sizes, "results": results}
    write_results("bench_approx", payload)
    return payload


if __name__ == "__main__":
    main(sys.argv[1:])

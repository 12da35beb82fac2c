"""Peer measurement: LangGraph's SqliteStore with sqlite-vec and the same WordLlama embedder.

Runs inside the peer virtualenv (``make bench`` installs ``langgraph``,
``langgraph-checkpoint-sqlite``, ``sqlite-vec``, ``pysqlite3-binary`` and
``wordllama`` there) and prints one JSON object; ``bench_peers.py`` runs it
beside actormem in the same benchmark run.  The interpreter's own ``sqlite3``
here cannot load extensions (pyenv builds it without), so the connection
comes from ``pysqlite3``, which can.

Same work as actormem's side, per size: fill the store with put-batch (the
embedding included, timed), then ``--single`` puts one call at a time (each
commits on its own), then ``--queries`` semantic searches (top 10).
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path
from typing import Any


def _embedder() -> Any:
    """The packaged WordLlama model, built from its files (``load()`` goes online)."""
    import numpy as np
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer
    from wordllama.inference import WordLlamaInference

    root = resources.files("wordllama")
    with resources.as_file(root / "tokenizers/l2_supercat_tokenizer_config.json") as tok:
        tokenizer = Tokenizer.from_file(str(tok))
    with resources.as_file(root / "weights/l2_supercat_256.safetensors") as weights:
        matrix = np.asarray(load_file(str(weights))["embedding.weight"], dtype=np.float32)
    model = WordLlamaInference(matrix, tokenizer)

    def embed(texts: list[str]) -> list[list[float]]:
        return [list(map(float, row)) for row in model.embed(texts, norm=True)]

    return embed


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _texts(n: int, offset: int = 0) -> list[str]:
    topics = ["tea", "trains", "Lisbon", "hiking", "jazz", "python", "gardens", "chess"]
    return [
        f"memory {i}: the user talked about {topics[i % 8]} and {topics[(i * 7) % 8]} "
        f"on day {i % 97}"
        for i in range(offset, offset + n)
    ]


def run(size: int, single: int, queries: int) -> dict[str, Any]:
    import pysqlite3.dbapi2 as sqlite
    import sqlite_vec
    from langgraph.store.base import PutOp
    from langgraph.store.sqlite import SqliteStore

    embed = _embedder()
    embed(["warm up"])
    with tempfile.TemporaryDirectory() as d:
        conn = sqlite.connect(
            str(Path(d) / "peer.sqlite"), check_same_thread=False, isolation_level=None
        )
        conn.enable_load_extension(True)
        sqlite_vec.load(conn)
        conn.enable_load_extension(False)
        store = SqliteStore(conn, index={"dims": 256, "embed": embed, "fields": ["text"]})
        store.setup()
        ns = ("bench", "memories")
        texts = _texts(size)
        t0 = time.perf_counter()
        for start in range(0, size, 1_000):
            store.batch(
                [
                    PutOp(ns, f"k{start + j}", {"text": t})
                    for j, t in enumerate(texts[start : start + 1_000])
                ]
            )
        batch_s = time.perf_counter() - t0
        one = []
        for i, text in enumerate(_texts(single, offset=size)):
            t0 = time.perf_counter()
            store.put(ns, f"single{i}", {"text": text})
            one.append((time.perf_counter() - t0) * 1000)
        search = []
        for i in range(queries):
            t0 = time.perf_counter()
            query = f"what did the user say about tea on day {i % 97}"
            hits = store.search(ns, query=query, limit=10)
            search.append((time.perf_counter() - t0) * 1000)
            assert hits
        conn.close()
    return {
        "put_batch_per_s": size / batch_s,
        "put_one_per_s": single / (sum(one) / 1000),
        "put_one_ms_p50": statistics.median(one),
        "put_one_ms_p99": _pct(one, 0.99),
        "search_ms_p50": statistics.median(search),
        "search_ms_p99": _pct(search, 0.99),
    }


if __name__ == "__main__":
    sizes = [int(s) for s in sys.argv[1].split(",")]
    single, queries = int(sys.argv[2]), int(sys.argv[3])
    print(json.dumps({str(n): run(n, single, queries) for n in sizes}))

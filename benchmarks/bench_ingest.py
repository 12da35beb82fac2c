"""Batched ingest at 100k and 1M, excluding embedding, against an empty store in the same run.

``bench_store`` measures ingest as part of a long run per size (embedding the
corpus, searches, FTS, reopen); at 1M that run takes far longer than a
figure needs on a shared machine.  This one measures only ingest, on
``bench_store``'s corpus and WordLlama vectors computed once and kept in
``--corpus-dir`` (``texts_<n>.json``, ``vecs_<n>.npy``):

* **empty store** (the baseline): one ``add_many`` of 5,000 memories into a
  new store, repeated 5 times (fresh stores), median;
* **fill to N** for each size: ``add_many`` in batches of 5,000 over 100
  tenants from empty, as ``bench_store`` does (exact-hash dedup on,
  near-duplicate detection off), with the rate of the whole fill and of its
  last 100,000 memories (the store then holds 0.9 N or more); close is timed
  apart (it checkpoints DuckDB and writes the index snapshot).

Every figure carries the process's CPU seconds and the 1-minute load
average; compare the ratios to the baseline.

Usage::

    python -m benchmarks.bench_ingest --corpus-dir /tmp/duckbig --sizes 100000,1000000
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from actormem.store import DuckDBStore, Namespace, NewMemory
from benchmarks._common import print_table, write_results
from benchmarks.bench_store import BATCH, TENANTS, corpus

__all__ = ["main"]

F32 = npt.NDArray[np.float32]
_NAME = "wordllama-l2-supercat-256"


class _Lookup:
    """The precomputed vectors of the corpus (embedding costs a dict lookup)."""

    name = _NAME
    dim = 256

    def __init__(self, texts: Sequence[str], vectors: F32) -> None:
        self._row = {t: i for i, t in enumerate(texts)}
        self._vectors = vectors

    def embed(self, texts: Sequence[str]) -> F32:
        out: F32 = self._vectors[[self._row[t] for t in texts]]
        return out


def _corpus(folder: Path, n: int) -> tuple[list[str], F32]:
    """``n`` texts and their WordLlama vectors, computed once per folder."""
    folder.mkdir(parents=True, exist_ok=True)
    have = sorted(
        int(p.stem.split("_")[1]) for p in folder.glob("vecs_*.npy") if p.stem[5:].isdigit()
    )
    size = next((m for m in have if m >= n), None)
    if size is None:
        from actormem.models.embedders import WordLlamaEmbedder

        texts = corpus(n)
        emb = WordLlamaEmbedder()
        vecs = np.concatenate([emb.embed(texts[i : i + 10_000]) for i in range(0, n, 10_000)])
        np.save(folder / f"vecs_{n}.npy", vecs)
        (folder / f"texts_{n}.json").write_text(json.dumps(texts))
        size = n
    texts = json.loads((folder / f"texts_{size}.json").read_text())[:n]
    vecs = np.ascontiguousarray(np.load(folder / f"vecs_{size}.npy", mmap_mode="r")[:n])
    return texts, vecs


def _open(path: Path, texts: Sequence[str], vecs: F32) -> DuckDBStore:
    return DuckDBStore(
        path,
        embedder=_Lookup(texts, vecs),
        near_duplicate_threshold=None,
        touch_flush_interval=1.0,
    )


def _load() -> float:
    return round(os.getloadavg()[0], 1)


def _empty(tmp: Path, texts: Sequence[str], vecs: F32, runs: int = 5) -> dict[str, Any]:
    rates, cpu = [], []
    for r in range(runs):
        with _open(tmp / f"empty{r}.duckdb", texts, vecs) as store:
            c0, t0 = time.process_time(), time.perf_counter()
            store.add_many(
                Namespace(user_id="u0", agent_id="bench"),
                [NewMemory(content=t) for t in texts[:BATCH]],
            )
            rates.append(BATCH / (time.perf_counter() - t0))
            cpu.append((time.process_time() - c0) / BATCH * 1e6)
    return {
        "per_s": round(statistics.median(rates)),
        "cpu_us_per_memory": round(statistics.median(cpu), 1),
        "load": _load(),
    }


def _fill(tmp: Path, n: int, texts: Sequence[str], vecs: F32) -> dict[str, Any]:
    path = tmp / f"fill_{n}.duckdb"
    store = _open(path, texts, vecs)
    batches = []
    c0, t0 = time.process_time(), time.perf_counter()
    for b, start in enumerate(range(0, n, BATCH)):
        ns = Namespace(user_id=f"u{b % TENANTS}", agent_id="bench")
        t1 = time.perf_counter()
        store.add_many(ns, [NewMemory(content=t) for t in texts[start : start + BATCH]])
        batches.append(time.perf_counter() - t1)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    load = _load()
    t1 = time.perf_counter()
    store.close()
    close = time.perf_counter() - t1
    last = batches[-(100_000 // BATCH) :]
    out = {
        "n": n,
        "per_s": round(n / wall),
        "last_100k_per_s": round(BATCH * len(last) / sum(last)),
        "cpu_us_per_memory": round(cpu / n * 1e6, 1),
        "close_s": round(close, 1),
        "file_mb": round(path.stat().st_size / 2**20),
        "load": load,
    }
    for p in tmp.glob(f"{path.name}*"):
        p.unlink()
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus-dir", type=Path, required=True)
    parser.add_argument("--sizes", default="100000,1000000")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    texts, vecs = _corpus(args.corpus_dir, max(sizes))
    res: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(dir=args.corpus_dir, prefix="ingest-") as tmp:
        res["empty"] = _empty(Path(tmp), texts, vecs)
        res["fills"] = [_fill(Path(tmp), n, texts[:n], vecs[:n]) for n in sizes]
        res["empty_after"] = _empty(Path(tmp), texts, vecs)
    base = (res["empty"]["per_s"] + res["empty_after"]["per_s"]) / 2
    first = res["fills"][0]["per_s"]
    rows: list[list[Any]] = [
        ["5,000 into an empty store (baseline, before)", res["empty"]["per_s"], "", 1.0, "",
         res["empty"]["cpu_us_per_memory"], res["empty"]["load"]],
        ["5,000 into an empty store (baseline, after)", res["empty_after"]["per_s"], "", 1.0, "",
         res["empty_after"]["cpu_us_per_memory"], res["empty_after"]["load"]],
    ]  # fmt: skip
    for f in res["fills"]:
        rows.append(
            [
                f"fill to {f['n']:,} (close {f['close_s']} s, file {f['file_mb']} MB)",
                f["per_s"],
                f["last_100k_per_s"],
                round(f["per_s"] / base, 3),
                round(f["per_s"] / first, 3),
                f["cpu_us_per_memory"],
                f["load"],
            ]
        )
    print_table(
        "Batched ingest excluding embedding (memories/s)",
        ["ingest", "per s", "last 100k per s", "x empty", f"x {sizes[0]:,}", "CPU us/mem", "load"],
        rows,
    )
    write_results("ingest", res)
    return res


if __name__ == "__main__":
    main()

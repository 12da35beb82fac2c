"""Large-store sessions: reopen, first search, writes after a reopen, close.

What a long-lived agent meets at every start and stop with a big store: the
index comes from its snapshot (``<db>.index``) plus the delta of the later
sessions (``<db>.index.delta``), and close writes only the delta.  On a copy
of a prepared store of N memories (``--store``; built once with ``--build``,
which takes minutes at 1M), one run measures, in order:

* **close, whole snapshot** (the baseline of close): a session that adds one
  memory and is made to rewrite the whole snapshot, as every close did
  before the delta;
* **reopen** from the snapshot alone; the **first search** and the p50 of 20
  more (hybrid over all N memories, query embedding excluded);
* **ingest after reopen**: ``add_many`` of 5,000 new memories in one batch
  into the reopened store, against the same batch into an empty store
  measured in the same run (the baseline of ingest);
* **close, delta** after those writes and searches, and after a session of
  searches only;
* **reopen** from the snapshot and its delta;
* with ``--crash``: **reopen after a crash** -- a child process opens the
  store, adds a 5,000-memory batch and 200 single memories, leaves 50 more
  acknowledged but pending in the acknowledgement log and is SIGKILLed; the
  open that follows catches the snapshot up from ``<db>.index.since``
  (see :mod:`actormem.store._index_since`).  Its baseline is the open of a
  copy of the same crashed files without the since-file (the index rebuilt
  from DuckDB, what every crash cost before), measured in the same run.

Every figure carries the 1-minute load average when it was taken; the
machine is shared, so compare the ratios.

Usage::

    python -m benchmarks.bench_reopen --build --store /tmp/bigstore/base_1000000.duckdb --n 1000000
    python -m benchmarks.bench_reopen --store /tmp/bigstore/base_1000000.duckdb [--crash]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from actormem.store import DuckDBStore, Namespace, NewMemory
from benchmarks._common import print_table, write_results

__all__ = ["main"]

F32 = npt.NDArray[np.float32]
EVERYONE = Namespace(agent_id="bench")
BATCH = 5_000


class RandomEmbedder:
    """Seeded random unit vectors (reopen costs do not depend on what vectors mean)."""

    def __init__(self, name: str = "bench-random-256", dim: int = 256, seed: int = 1) -> None:
        self.name = name
        self.dim = dim
        self._rng = np.random.default_rng(seed)

    def embed(self, texts: Sequence[str]) -> F32:
        v = self._rng.standard_normal((len(texts), self.dim)).astype(np.float32)
        out: F32 = v / np.linalg.norm(v, axis=1, keepdims=True)
        return out


def _open(path: Path, embedder: RandomEmbedder) -> DuckDBStore:
    return DuckDBStore(
        path, embedder=embedder, touch_flush_interval=None, near_duplicate_threshold=None
    )


def build(path: Path, n: int, embedder: RandomEmbedder) -> None:
    """Fill a new store with ``n`` synthetic memories of 100 tenants and close it."""
    from benchmarks.bench_store import corpus

    texts = corpus(n)
    with _open(path, embedder) as store:
        for b, start in enumerate(range(0, n, BATCH)):
            ns = Namespace(user_id=f"u{b % 100}", agent_id="bench")
            store.add_many(ns, [NewMemory(content=t) for t in texts[start : start + BATCH]])


def _load() -> float:
    return round(os.getloadavg()[0], 1)


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    value = fn()
    return time.perf_counter() - t0, value


def _fresh(tag: str, count: int) -> list[NewMemory]:
    return [
        NewMemory(content=f"{tag} fresh memory {i} about item{i} zq{tag}{i}") for i in range(count)
    ]


def _searches(store: DuckDBStore, tag: str) -> dict[str, float]:
    first, _ = _timed(lambda: store.search(f"Alice likes item{len(tag)}", EVERYONE, 10))
    more = []
    for i in range(20):
        t0 = time.perf_counter()
        store.search(f"Bob visited item{i} {tag}", EVERYONE, 10)
        more.append(time.perf_counter() - t0)
    return {"first_search_s": first, "search_p50_s": statistics.median(more)}


_CRASH_CHILD = """
import os, signal, sys
from pathlib import Path
from actormem.store import Namespace, NewMemory
from benchmarks.bench_reopen import RandomEmbedder, _open, _fresh
store = _open(Path(sys.argv[1]), RandomEmbedder(sys.argv[2], seed=5))
ns = Namespace(user_id="u3", agent_id="bench")
store.add_many(ns, _fresh("k", 5000))
for i in range(200):
    store.add(ns, f"crash session single memory {i} zqk{i}")
store.flush()
store._apply_lock.acquire()  # the records below stay pending in the log
for i in range(50):
    store.add(ns, f"crash session pending memory {i} zqp{i}")
os.kill(os.getpid(), signal.SIGKILL)
"""


def crash(path: Path, work: Path, embedder: RandomEmbedder) -> dict[str, Any]:
    """Reopen after a SIGKILL with records pending, against a rebuild of the same files."""
    import signal
    import sys

    res: dict[str, Any] = {}
    proc = subprocess.run(
        [sys.executable, "-c", _CRASH_CHILD, str(path), embedder.name],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    if proc.returncode != -signal.SIGKILL:
        raise RuntimeError(f"the crashing session did not die as planned: {proc.stderr}")
    copy = work / "rebuilt" / path.name
    copy.parent.mkdir()
    for suffix in ("", ".wal", ".acklog", ".commits", ".index", ".index.delta"):
        if Path(f"{path}{suffix}").exists():
            subprocess.run(
                ["cp", "--sparse=always", f"{path}{suffix}", f"{copy}{suffix}"], check=True
            )
    secs, store = _timed(lambda: _open(path, embedder))
    res["crash_reopen_s"], res["crash_reopen_load"] = secs, _load()
    res["crash_caught_up"] = store._snapshot_seq not in (-1, store.change_counter)
    res["crash_memories"] = len(store._index)
    res["after_crash"] = _searches(store, "dd")
    store.close()
    secs, store = _timed(lambda: _open(copy, embedder))  # no since-file: a rebuild
    res["crash_rebuild_s"], res["crash_rebuild_load"] = secs, _load()
    if len(store._index) != res["crash_memories"]:
        raise RuntimeError("the caught-up index and the rebuilt one differ in size")
    store.close()
    return res


def run(
    src: Path, work: Path, embedder: RandomEmbedder, *, crashed: bool = False
) -> dict[str, Any]:
    """The sessions on a copy of ``src`` (see the module docstring)."""
    path = work / src.name
    for part in src.parent.glob(f"{src.name}*"):  # the WAL, commit record, snapshot, delta
        subprocess.run(["cp", "--sparse=always", str(part), str(work / part.name)], check=True)
    res: dict[str, Any] = {}

    # baseline of ingest: the same batch into an empty store
    with _open(work / "empty.duckdb", embedder) as empty:
        secs, _ = _timed(lambda: empty.add_many(EVERYONE, _fresh("e", BATCH)))
    res["ingest_empty_per_s"] = round(BATCH / secs)

    # baseline of close: rewrite the whole snapshot (as every close did)
    store = _open(path, embedder)
    res["memories"] = len(store._index)
    store.add(EVERYONE, "one memory that makes the snapshot stale")
    store._index._base_rows = -1  # no delta: the whole snapshot
    secs, _ = _timed(store.close)
    res["close_whole_s"], res["close_whole_load"] = secs, _load()

    secs, store = _timed(lambda: _open(path, embedder))
    res["reopen_snapshot_s"], res["reopen_snapshot_load"] = secs, _load()
    res["after_snapshot"] = _searches(store, "a")
    secs, _ = _timed(lambda: store.add_many(EVERYONE, _fresh("b", BATCH)))
    res["ingest_after_reopen_per_s"] = round(BATCH / secs)
    res["ingest_after_reopen_load"] = _load()
    secs, _ = _timed(store.close)
    res["close_delta_after_writes_s"], res["close_delta_after_writes_load"] = secs, _load()

    secs, store = _timed(lambda: _open(path, embedder))
    res["reopen_delta_s"], res["reopen_delta_load"] = secs, _load()
    res["after_delta"] = _searches(store, "cc")
    secs, _ = _timed(store.close)
    res["close_delta_after_searches_s"], res["close_delta_after_searches_load"] = secs, _load()
    if crashed:
        res.update(crash(path, work, embedder))
    return res


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", required=True, type=Path, help="the prepared store")
    parser.add_argument("--n", type=int, default=1_000_000, help="memories (with --build)")
    parser.add_argument("--build", action="store_true", help="build the store first")
    parser.add_argument("--embedder-name", default="bench-random-256")
    parser.add_argument("--crash", action="store_true", help="also reopen after a SIGKILL")
    args = parser.parse_args(argv)
    embedder = RandomEmbedder(args.embedder_name)
    if args.build:
        build(args.store, args.n, embedder)
    with tempfile.TemporaryDirectory(dir=args.store.parent, prefix="reopen-") as tmp:
        res = run(args.store, Path(tmp), embedder, crashed=args.crash)
        shutil.rmtree(tmp, ignore_errors=True)
    rows = [
        ("close: whole snapshot (baseline)", res["close_whole_s"], 1.0, res["close_whole_load"]),
        (
            "close: delta after 5k writes + 21 searches",
            res["close_delta_after_writes_s"],
            res["close_delta_after_writes_s"] / res["close_whole_s"],
            res["close_delta_after_writes_load"],
        ),
        (
            "close: delta after 21 searches",
            res["close_delta_after_searches_s"],
            res["close_delta_after_searches_s"] / res["close_whole_s"],
            res["close_delta_after_searches_load"],
        ),
        ("reopen: snapshot", res["reopen_snapshot_s"], None, res["reopen_snapshot_load"]),
        ("reopen: snapshot + delta", res["reopen_delta_s"], None, res["reopen_delta_load"]),
        ("first search after reopen", res["after_snapshot"]["first_search_s"], None, None),
        ("search p50 after reopen", res["after_snapshot"]["search_p50_s"], None, None),
        ("first search after reopen (delta)", res["after_delta"]["first_search_s"], None, None),
        ("search p50 after reopen (delta)", res["after_delta"]["search_p50_s"], None, None),
    ]
    print_table(
        f"Reopen and close at {res['memories']:,} memories (seconds)",
        ["measure", "s", "ratio to whole-snapshot close", "load"],
        [
            (m, round(s, 3), "" if r is None else round(r, 3), "" if ld is None else ld)
            for m, s, r, ld in rows
        ],
    )
    print_table(
        "Ingest of one 5,000-memory batch (memories/s)",
        ["into", "per s", "ratio to empty store", "load"],
        [
            ("an empty store (baseline)", res["ingest_empty_per_s"], 1.0, ""),
            (
                f"the reopened {res['memories']:,}-memory store",
                res["ingest_after_reopen_per_s"],
                round(res["ingest_after_reopen_per_s"] / res["ingest_empty_per_s"], 3),
                res["ingest_after_reopen_load"],
            ),
        ],
    )
    if args.crash:
        print_table(
            f"Reopen after a SIGKILL with 50 records pending ({res['crash_memories']:,} memories)",
            ["open", "s", "ratio to the rebuild", "load"],
            [
                (
                    "rebuild from DuckDB (baseline; every crash before)",
                    round(res["crash_rebuild_s"], 3),
                    1.0,
                    res["crash_rebuild_load"],
                ),
                (
                    "snapshot caught up from the since-file"
                    + ("" if res["crash_caught_up"] else " (NOT caught up: rebuilt)"),
                    round(res["crash_reopen_s"], 3),
                    round(res["crash_reopen_s"] / res["crash_rebuild_s"], 3),
                    res["crash_reopen_load"],
                ),
                (
                    "first search after it / p50 of 20 more",
                    "{first_search_s:.3f} / {search_p50_s:.3f}".format(**res["after_crash"]),
                    "",
                    "",
                ),
            ],
        )
    write_results("reopen", res)
    return res


if __name__ == "__main__":
    main()

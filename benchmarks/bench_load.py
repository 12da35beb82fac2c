"""Load: many agents on one long-term store, then several processes with their own files.

Phase 1 (one process): ``--runtimes`` (32) MemoryRuntimes share one
DuckDBStore object, each in its own namespace (``user_id=u<i>``), each on its
own thread driving ``--turns`` (2,000) turns: add the user message, retrieve
long-term memories (every ``--retrieve-every`` turns), add the reply, record
the turn.  Then every runtime flushes.

Phase 2: ``--procs`` (4) processes, each with its own store file and
``runtimes / procs`` runtimes doing the same.

Reported: turns/s, p50/p99 of ``add()`` and ``retrieve()`` under that load,
peak RSS (VmHWM) of each process, and correctness: every turn's episode is
stored in its own namespace (lost = 0) and no retrieval or listing ever
showed another namespace's memory (crossed = 0).

The store runs with exact dedup only (``near_duplicate_threshold=None``):
near-duplicate merging is consolidation by design, and would make "every
turn is stored" unverifiable.  ``--embedder wordllama`` uses the bundled
model instead of the fast hash embedder.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from actormem import MemoryRuntime, Msg
from actormem.models.base import Embedder
from actormem.recorder import RecorderConfig
from actormem.store import DuckDBStore, Namespace
from benchmarks._common import print_table, summary, write_results

_WORDS = [
    "amber",
    "basil",
    "cedar",
    "delta",
    "ember",
    "fjord",
    "garnet",
    "harbor",
    "indigo",
    "juniper",
    "kelvin",
    "lagoon",
    "mosaic",
    "nectar",
    "orchid",
    "pepper",
    "quartz",
    "raven",
    "saffron",
    "tundra",
    "umber",
    "velvet",
    "willow",
    "xenon",
    "yarrow",
    "zephyr",
    "ferry",
    "island",
    "market",
    "glacier",
    "canyon",
    "meadow",
    "lantern",
    "compass",
    "beacon",
    "summit",
]
_TOKEN = re.compile(r"\bR(\d+)T(\d+)\b")


def _embedder(name: str) -> Embedder:
    if name == "wordllama":
        from actormem.models.embedders import WordLlamaEmbedder

        return WordLlamaEmbedder()
    from actormem.models.embedders import HashEmbedder

    return HashEmbedder(64)


def peak_rss_mb() -> float:
    """Peak resident set size of this process (VmHWM), in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")  # pragma: no cover - not Linux


def _agent(
    rt: MemoryRuntime, idx: int, turns: int, every: int, seed: int, out: dict[str, Any]
) -> None:
    rng = random.Random(seed)
    adds: list[float] = []
    gets: list[float] = []
    crossed = 0
    own = rt.namespace
    facts_ns = rt.facts.namespace
    for t in range(turns):
        words = " ".join(rng.sample(_WORDS, 5))
        user = Msg.user(f"R{idx}T{t} tell me about the {words}")
        t0 = time.perf_counter()
        rt.add(user)
        adds.append((time.perf_counter() - t0) * 1e3)
        if t % every == 0:
            t0 = time.perf_counter()
            hits = rt.retrieve(f"{rng.choice(_WORDS)} {rng.choice(_WORDS)}", limit=5)
            gets.append((time.perf_counter() - t0) * 1e3)
            for h in hits:
                ns = h.memory.namespace
                if ns not in (own, facts_ns) or any(
                    int(m.group(1)) != idx for m in _TOKEN.finditer(h.memory.content)
                ):
                    crossed += 1
        reply = Msg.assistant(f"Here is what I know about the {words}.")
        rt.add(reply)
        rt.record([user, reply])
        if t % 200 == 199:
            rt.clear()  # keep the short-term memory small; long-term keeps everything
    out.update(adds=adds, gets=gets, crossed=crossed)


def _check(store: DuckDBStore, namespaces: dict[int, Namespace], turns: int) -> dict[str, int]:
    lost = crossed = 0
    for idx, ns in namespaces.items():
        found: set[int] = set()
        for rec in store.list(ns, kinds=["episode"], limit=100_000):
            for m in _TOKEN.finditer(rec.content):
                if int(m.group(1)) != idx or rec.namespace != ns:
                    crossed += 1
                else:
                    found.add(int(m.group(2)))
        lost += turns - len(found)
    return {"lost": lost, "crossed": crossed}


def run_shared(
    store_path: Path, runtimes: int, turns: int, every: int, embedder: str, offset: int = 0
) -> dict[str, Any]:
    """``runtimes`` agents on threads sharing one store; returns stats and checks."""
    store = DuckDBStore(
        store_path,
        embedder=_embedder(embedder),
        near_duplicate_threshold=None,
        touch_flush_interval=1.0,
    )
    config = RecorderConfig(batch_seconds=0.05, idle_seconds=None)
    rts: dict[int, MemoryRuntime] = {}
    try:
        for i in range(offset, offset + runtimes):
            rts[i] = MemoryRuntime(
                session_dir=store_path.parent / "sessions",
                store=store,
                namespace=Namespace(user_id=f"u{i}", agent_id="load"),
                recorder=config,
            )
        results: dict[int, dict[str, Any]] = {i: {} for i in rts}
        threads = [
            threading.Thread(target=_agent, args=(rt, i, turns, every, i, results[i]))
            for i, rt in rts.items()
        ]
        t0 = time.perf_counter()
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        submitted = time.perf_counter() - t0
        for rt in rts.values():
            rt.flush(600)
        elapsed = time.perf_counter() - t0
        checks = _check(store, {i: rt.namespace for i, rt in rts.items()}, turns)
        if any("adds" not in r for r in results.values()):
            raise RuntimeError("an agent thread failed (see its traceback above)")
    finally:
        for rt in rts.values():
            rt.close()
        store.close()
    adds = [v for r in results.values() for v in r["adds"]]
    gets = [v for r in results.values() for v in r["gets"]]
    return {
        "runtimes": runtimes,
        "turns": runtimes * turns,
        "seconds": elapsed,
        "submit_seconds": submitted,
        "turns_per_s": runtimes * turns / elapsed,
        "add_ms": summary(adds),
        "retrieve_ms": summary(gets),
        "lost": checks["lost"],
        "crossed": checks["crossed"] + sum(r["crossed"] for r in results.values()),
        "peak_rss_mb": peak_rss_mb(),
    }


def run_procs(
    tmp: Path, procs: int, runtimes: int, turns: int, every: int, embedder: str
) -> dict[str, Any]:
    """``procs`` processes, each with its own store file and ``runtimes`` agents."""
    children = []
    t0 = time.perf_counter()
    for p in range(procs):
        args = [
            sys.executable,
            "-m",
            "benchmarks.bench_load",
            "--child",
            str(tmp / f"proc{p}" / "m.duckdb"),
            "--runtimes",
            str(runtimes),
            "--turns",
            str(turns),
            "--retrieve-every",
            str(every),
            "--embedder",
            embedder,
        ]
        cwd = Path(__file__).resolve().parent.parent
        children.append(subprocess.Popen(args, stdout=subprocess.PIPE, text=True, cwd=cwd))
    outs = []
    for c in children:
        stdout, _ = c.communicate()
        if c.returncode != 0:
            raise RuntimeError(f"load child failed with exit code {c.returncode}")
        outs.append(json.loads(stdout.strip().splitlines()[-1]))
    elapsed = time.perf_counter() - t0
    total = sum(o["turns"] for o in outs)
    return {
        "procs": procs,
        "runtimes": procs * runtimes,
        "turns": total,
        "seconds": elapsed,
        "turns_per_s": total / elapsed,
        "add_ms_p50": max(o["add_ms"]["p50"] for o in outs),
        "add_ms_p99": max(o["add_ms"]["p99"] for o in outs),
        "retrieve_ms_p50": max(o["retrieve_ms"]["p50"] for o in outs),
        "retrieve_ms_p99": max(o["retrieve_ms"]["p99"] for o in outs),
        "lost": sum(o["lost"] for o in outs),
        "crossed": sum(o["crossed"] for o in outs),
        "peak_rss_mb": max(o["peak_rss_mb"] for o in outs),
        "per_process": outs,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    ap.add_argument("--runtimes", type=int, default=32)
    ap.add_argument("--turns", type=int, default=2_000)
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--retrieve-every", type=int, default=1)
    ap.add_argument("--embedder", choices=("hash", "wordllama"), default="hash")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--no-write", action="store_true", help="do not write benchmarks/results")
    args = ap.parse_args(argv)
    if args.child:
        path = Path(args.child)
        path.parent.mkdir(parents=True, exist_ok=True)
        res = run_shared(path, args.runtimes, args.turns, args.retrieve_every, args.embedder)
        print(json.dumps(res))
        return res
    runtimes, turns, procs = args.runtimes, args.turns, args.procs
    if args.quick:
        runtimes, turns, procs = min(runtimes, 8), min(turns, 150), min(procs, 2)
    with tempfile.TemporaryDirectory(prefix="actormem-load-") as d:
        tmp = Path(d)
        shared = run_shared(
            tmp / "shared" / "m.duckdb", runtimes, turns, args.retrieve_every, args.embedder
        )
        multi = run_procs(
            tmp, procs, max(1, runtimes // procs), turns, args.retrieve_every, args.embedder
        )
    rows = [
        [
            f"1 process, {shared['runtimes']} runtimes, 1 store",
            shared["turns"],
            shared["turns_per_s"],
            shared["add_ms"]["p50"],
            shared["add_ms"]["p99"],
            shared["retrieve_ms"]["p50"],
            shared["retrieve_ms"]["p99"],
            shared["peak_rss_mb"],
            shared["lost"],
            shared["crossed"],
        ],
        [
            f"{multi['procs']} processes x {multi['runtimes'] // multi['procs']} runtimes",
            multi["turns"],
            multi["turns_per_s"],
            multi["add_ms_p50"],
            multi["add_ms_p99"],
            multi["retrieve_ms_p50"],
            multi["retrieve_ms_p99"],
            multi["peak_rss_mb"],
            multi["lost"],
            multi["crossed"],
        ],
    ]
    print_table(
        "load: recording + retrieval under concurrency",
        [
            "setup",
            "turns",
            "turns/s",
            "add p50 ms",
            "add p99 ms",
            "retrieve p50 ms",
            "retrieve p99 ms",
            "peak RSS MB",
            "lost",
            "crossed",
        ],
        rows,
    )
    result = {
        "config": {
            "runtimes": runtimes,
            "turns": turns,
            "procs": procs,
            "retrieve_every": args.retrieve_every,
            "embedder": args.embedder,
            "quick": args.quick,
        },
        "shared_store": shared,
        "processes": multi,
    }
    if not args.no_write:
        write_results("load_quick" if args.quick else "load", result)
    return result


if __name__ == "__main__":
    _res = main()
    if "shared_store" in _res:  # the parent run: fail when anything was lost or crossed
        _bad = sum(_res[k]["lost"] + _res[k]["crossed"] for k in ("shared_store", "processes"))
        raise SystemExit(1 if _bad else 0)

"""Where does a long-running runtime's memory go? RSS vs the Python heap.

The 10-minute soak (``make soak``) found RSS growing linearly while threads
and open files stay flat.  This probe records N turns with the soak's
traffic and prints RSS and the tracemalloc total (Python heap, numpy
included) at one third and at the end, plus the top Python allocation sites
that grew.  Run: ``.venv/bin/python -m benchmarks.memprobe --turns 6000``.
"""

from __future__ import annotations

import argparse
import gc
import random
import tempfile
import tracemalloc
from pathlib import Path
from typing import Any

from actormem import AutoContextConfig, MemoryRuntime, Msg, Namespace, RecorderConfig
from actormem.models.embedders import HashEmbedder
from actormem.store import DuckDBStore

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
    "lagoon",
]


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    return float("nan")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--turns", type=int, default=6000)
    args = ap.parse_args(argv)
    tracemalloc.start(5)
    folder = Path(tempfile.mkdtemp(prefix="actormem-memprobe-"))
    rng = random.Random(0)
    store = DuckDBStore(folder / "s.duckdb", embedder=HashEmbedder(64))
    rt = MemoryRuntime(
        session_dir=folder / "sessions",
        store=store,
        namespace=Namespace(user_id="probe", agent_id="a"),
        autocontext=AutoContextConfig(msg_threshold=40, last_keep=6),
        recorder=RecorderConfig(batch_seconds=0.1, idle_seconds=5.0),
    )
    mark = args.turns // 3
    snap: Any = None
    rss0 = heap0 = 0.0
    for i in range(args.turns):
        w = " ".join(rng.sample(_WORDS, 3))
        user = Msg.user(f"turn {i}: I like {w}. What about {rng.choice(_WORDS)}?")
        reply = Msg.assistant(f"About {w}: noted ({i}).")
        rt.add([user, reply])
        rt.record([user, reply])
        rt.on_turn_end()
        if i % 3 == 0:
            rt.format_for_injection(w)
        if i % 25 == 0:
            rt.flush(60)
            rt.save_session("probe")
        if i % 40 == 0:
            rt.compress_now()
        if i % 200 == 199:
            rt.on_session_end()
            rt.clear()
        if i == mark:
            gc.collect()
            snap = tracemalloc.take_snapshot()
            rss0, heap0 = _rss_mb(), tracemalloc.get_traced_memory()[0] / 2**20
    rt.flush(60)
    gc.collect()
    rss1, heap1 = _rss_mb(), tracemalloc.get_traced_memory()[0] / 2**20
    print(
        f"after {mark} and {args.turns} turns: RSS {rss0:.0f} -> {rss1:.0f} MB, "
        f"Python heap {heap0:.0f} -> {heap1:.0f} MB"
    )
    for stat in tracemalloc.take_snapshot().compare_to(snap, "lineno")[:10]:
        print("  ", stat)
    rt.close()
    store.close()
    return {"rss_mb": [rss0, rss1], "heap_mb": [heap0, heap1]}


if __name__ == "__main__":
    main()

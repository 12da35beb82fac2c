"""Peer measurement: AgentScope 1.0.21's InMemoryMemory and JSONSession.

Runs inside its own virtualenv (see the Makefile's ``bench`` target) and
prints one JSON object; ``bench_runtime.py`` runs it beside actormem in the
same benchmark run.  Same work as actormem's side: 10,000 text messages
added one call at a time, then a session of them saved and loaded.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time


async def main(n: int, repeats: int) -> dict[str, float]:
    from agentscope.memory import InMemoryMemory
    from agentscope.message import Msg
    from agentscope.session import JSONSession

    msgs = [Msg("user", f"message number {i} " + "lorem ipsum " * 20, "user") for i in range(n)]
    mem = InMemoryMemory()
    t0 = time.perf_counter()
    for m in msgs:
        await mem.add(m)
    add_s = time.perf_counter() - t0
    d = tempfile.mkdtemp()
    sess = JSONSession(save_dir=d)
    saves, loads = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        await sess.save_session_state("bench", memory=mem)
        saves.append(time.perf_counter() - t0)
        fresh = InMemoryMemory()
        t0 = time.perf_counter()
        await sess.load_session_state("bench", memory=fresh)
        loads.append(time.perf_counter() - t0)
    assert await fresh.size() == n
    return {
        "adds_per_s": n / add_s,
        "save_ms_p50": statistics.median(saves) * 1e3,
        "load_ms_p50": statistics.median(loads) * 1e3,
    }


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    print(json.dumps(asyncio.run(main(n, repeats))))

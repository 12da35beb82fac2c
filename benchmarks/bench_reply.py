"""``ReActAgent.reply`` overhead per turn with an instant scripted model.

Three set-ups in one run, 200 turns each (``--turns``): no long-term store;
a DuckDB store with AutoContext (STATIC_CONTROL: retrieve before the turn,
record after it); the same with ``journal=True`` (NOW and LOG kept in
DuckDB and in files).  The model answers at once, so each turn's time is
the memory's overhead.  Also counts the failed ``import pandas`` look-ups
(``sys.meta_path`` finders asked for ``pandas``) per turn: DuckDB's Python
client asks for pandas for each bound parameter and pandas is not a
dependency, so each one walks ``sys.path``.  And the process's CPU time per
turn (every thread: the store's applier, the journal's threads, DuckDB's and
BLAS's own): on a shared two-core machine the wall times move with the load,
the CPU a turn costs much less, and it is what the next turn waits for.

With the journal a turn acknowledges two writes (the task start, the final
reply), one ``fdatasync`` of the store's log each, so the disk's sync time
bounds it from below: the run also measures that floor (a small append and
``fdatasync``, 200 times, in the same folder) and reports it beside the
set-ups.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from actormem import MemoryRuntime
from actormem.agent import ReActAgent
from actormem.models.scripted import ScriptedModel
from actormem.store import Namespace
from benchmarks._common import print_table, summary, write_results


class _PandasSpy:
    """A meta-path finder that only counts look-ups of ``pandas``."""

    def __init__(self) -> None:
        self.count = 0

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            self.count += 1


def _sync_floor(folder: Path, n: int = 200) -> dict[str, float]:
    """The disk's ``fdatasync`` of a small append, in ms (what one acknowledgement waits for)."""
    fd = os.open(folder / "sync-floor", os.O_RDWR | os.O_CREAT, 0o600)
    times = []
    try:
        for i in range(n):
            os.pwrite(fd, b"x" * 512, i * 512)
            t0 = time.perf_counter()
            os.fdatasync(fd)
            times.append((time.perf_counter() - t0) * 1000)
    finally:
        os.close(fd)
    return summary(times)


def _run(kind: str, turns: int, folder: Path) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"session_dir": folder / kind}
    if kind != "no store":
        kwargs["store"] = folder / f"{kind.replace(' ', '_')}.duckdb"
        kwargs["namespace"] = Namespace(user_id="bench", agent_id="agent")
    if kind == "store + autocontext + journal":
        kwargs["journal"] = True
    spy = _PandasSpy()
    with MemoryRuntime(**kwargs) as rt:
        agent = ReActAgent("bench", ScriptedModel(lambda *_: "Noted.", cycle=True), rt)
        for i in range(5):  # warm-up: embedder, caches, files
            agent.reply(f"warm-up message {i}")
        times = []
        sys.meta_path.insert(0, spy)  # type: ignore[arg-type]
        cpu0 = time.process_time()
        try:
            for i in range(turns):
                t0 = time.perf_counter()
                agent.reply(f"turn {i}: I like green tea and trains to Lisbon number {i}")
                times.append((time.perf_counter() - t0) * 1000)
        finally:
            sys.meta_path.remove(spy)  # type: ignore[arg-type]
        rt.flush()  # the turns' background work (applier, journal files) is theirs
        cpu = (time.process_time() - cpu0) * 1000 / turns
    return {
        "ms": summary(times),
        "pandas_lookups_per_turn": spy.count / turns,
        "process_cpu_ms_per_turn": cpu,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="30 turns")
    args = parser.parse_args(argv)
    if args.quick:
        args.turns = 30
    res: dict[str, Any] = {"turns": args.turns}
    with tempfile.TemporaryDirectory() as d:
        res["fdatasync"] = _sync_floor(Path(d))
        for kind in ("no store", "store + autocontext", "store + autocontext + journal"):
            res[kind] = _run(kind, args.turns, Path(d))
        res["fdatasync after"] = _sync_floor(Path(d))
    res["load"] = os.getloadavg()
    base = res["no store"]["ms"]["p50"]
    rows = [
        [
            kind,
            res[kind]["ms"]["p50"],
            res[kind]["ms"]["p99"],
            res[kind]["ms"]["p50"] / base,
            res[kind]["process_cpu_ms_per_turn"],
            res[kind]["pandas_lookups_per_turn"],
        ]
        for kind in ("no store", "store + autocontext", "store + autocontext + journal")
    ]
    for key in ("fdatasync", "fdatasync after"):
        rows.append([f"disk: one {key}", res[key]["p50"], res[key]["p99"], "", "", ""])
    print_table(
        f"ReActAgent.reply overhead per turn, scripted model, {args.turns} turns "
        f"(load {res['load'][0]:.1f})",
        [
            "set-up",
            "p50 ms",
            "p99 ms",
            "x no store (p50)",
            "process CPU ms/turn",
            "pandas look-ups/turn",
        ],
        rows,
    )
    print(f"results: {write_results('bench_reply', res)}")
    return res


if __name__ == "__main__":
    main()

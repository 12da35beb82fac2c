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
reply); the start is kept unsynced in the store's start slot and the end's
record carries it, so one ``fdatasync`` of the store's log acknowledges the
turn, and the disk's sync time bounds it from below: the run also measures
that floor (a small append and ``fdatasync``, 200 times, in the same folder)
and reports it beside the set-ups, and counts the syncs the library makes
from Python (``fdatasync``, ``fsync``, ``RWF_DSYNC`` writes; not DuckDB's own
WAL syncs) per turn, the five warm-up turns and the close included.

``--baseline <checkout>`` (e.g. ``git worktree add /tmp/b <commit>``) runs the
journaled set-up ``--runs`` times for this tree and that one alternately,
each in a fresh process, so both see the same machine; it reports each
run and the medians.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from actormem import MemoryRuntime
from actormem.agent import ReActAgent
from actormem.models.scripted import ScriptedModel
from actormem.store import Namespace
from benchmarks._common import print_table, summary, write_results
from benchmarks._reply_breakdown import Tracer, classify


class _PandasSpy:
    """A meta-path finder that only counts look-ups of ``pandas``."""

    def __init__(self) -> None:
        self.count = 0

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            self.count += 1


@contextmanager
def _counting_syncs() -> Iterator[list[int]]:
    """Count ``os.fdatasync``, ``os.fsync`` and ``RWF_DSYNC`` writes while inside."""
    count = [0]
    real: dict[str, Callable[..., Any]] = {
        name: getattr(os, name) for name in ("fdatasync", "fsync", "pwritev")
    }

    def synced(name: str) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            if name != "pwritev" or (len(args) > 3 and args[3]):
                count[0] += 1
            return real[name](*args)

        return call

    for name in real:
        setattr(os, name, synced(name))
    try:
        yield count
    finally:
        for name, fn in real.items():
            setattr(os, name, fn)


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


def _run(kind: str, turns: int, folder: Path, *, breakdown: bool = False) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"session_dir": folder / kind}
    if kind != "no store":
        kwargs["store"] = folder / f"{kind.replace(' ', '_')}.duckdb"
        kwargs["namespace"] = Namespace(user_id="bench", agent_id="agent")
    if kind == "store + autocontext + journal":
        kwargs["journal"] = True
    spy = _PandasSpy()
    tracer = Tracer() if breakdown else None
    if tracer is not None:
        tracer.install()
    try:
        with _counting_syncs() as syncs, MemoryRuntime(**kwargs) as rt:
            agent = ReActAgent("bench", ScriptedModel(lambda *_: "Noted.", cycle=True), rt)
            for i in range(5):  # warm-up: embedder, caches, files
                agent.reply(f"warm-up message {i}")
            if tracer is not None:
                tracer.watch_locks(rt._store)
                tracer.spans.clear()
            spans = []
            sys.meta_path.insert(0, spy)
            cpu0 = time.process_time()
            try:
                for i in range(turns):
                    t0 = time.perf_counter()
                    agent.reply(f"turn {i}: I like green tea and trains to Lisbon number {i}")
                    spans.append((t0, time.perf_counter()))
            finally:
                sys.meta_path.remove(spy)
            rt.flush()  # the turns' background work (applier, journal files) is theirs
            cpu = (time.process_time() - cpu0) * 1000 / turns
    finally:
        if tracer is not None:
            tracer.remove()
    times = [(b - a) * 1000 for a, b in spans]
    out = {
        "ms": summary(times),
        "turns_over_10_ms": sum(t > 10 for t in times),
        "turns_over_20_ms": sum(t > 20 for t in times),
        "pandas_lookups_per_turn": spy.count / turns,
        "process_cpu_ms_per_turn": cpu,
        "syncs_per_turn": syncs[0] / turns,
    }
    if tracer is not None:
        out["breakdown"] = classify(spans, tracer.spans)
    return out


ROOT = Path(__file__).resolve().parent.parent
_JOURNAL = "store + autocontext + journal"


_CHILD = """
import json, os, sys, tempfile
from pathlib import Path
count = [0]
real = {name: getattr(os, name) for name in ("fdatasync", "fsync", "pwritev")}
def synced(name):
    def call(*args):
        if name != "pwritev" or (len(args) > 3 and args[3]):
            count[0] += 1
        return real[name](*args)
    return call
for name in real:
    setattr(os, name, synced(name))
import time
from actormem.agent import ReActAgent
times = []
reply = ReActAgent.reply
def timed(self, msg):
    t0 = time.perf_counter()
    try:
        return reply(self, msg)
    finally:
        times.append((time.perf_counter() - t0) * 1000)
ReActAgent.reply = timed
from benchmarks.bench_reply import _run
turns = int(sys.argv[2])
with tempfile.TemporaryDirectory() as d:
    r = _run(sys.argv[1], turns, Path(d))
r["syncs_per_turn"] = count[0] / turns
measured = times[-turns:]  # after the five warm-up turns
r["turns_over_10_ms"] = sum(t > 10 for t in measured)
r["turns_over_20_ms"] = sum(t > 20 for t in measured)
print(json.dumps(r))
"""


def _child(tree: Path, turns: int) -> dict[str, Any]:
    """The journaled set-up in a fresh interpreter running ``tree``'s code.

    Syncs are counted by the child script itself (the same for both trees).
    """
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, _JOURNAL, str(turns)],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        timeout=900,
        check=True,
    ).stdout
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def ab_journal(baseline: Path, turns: int, runs: int) -> dict[str, Any]:
    """The journaled set-up, this tree and ``baseline`` alternately, ``runs`` times each."""
    trees = {"this tree": ROOT, "baseline": baseline.resolve()}
    raw: dict[str, list[dict[str, Any]]] = {label: [] for label in trees}
    loads = []
    for i in range(runs):
        order = list(trees.items()) if i % 2 == 0 else list(reversed(trees.items()))
        for label, tree in order:
            raw[label].append(_child(tree, turns))
            loads.append(os.getloadavg()[0])
    out: dict[str, Any] = {"turns": turns, "runs": runs, "load_1min": loads}
    for label, results in raw.items():
        out[label] = {
            "p50_each": [round(r["ms"]["p50"], 2) for r in results],
            "p99_each": [round(r["ms"]["p99"], 2) for r in results],
            "over_20_each": [r["turns_over_20_ms"] for r in results],
            "cpu_each": [round(r["process_cpu_ms_per_turn"], 2) for r in results],
            "syncs_each": [round(r["syncs_per_turn"], 2) for r in results],
            "p50": statistics.median(r["ms"]["p50"] for r in results),
            "p99": statistics.median(r["ms"]["p99"] for r in results),
            "over_20": statistics.median(r["turns_over_20_ms"] for r in results),
            "cpu": statistics.median(r["process_cpu_ms_per_turn"] for r in results),
            "syncs": statistics.median(r["syncs_per_turn"] for r in results),
        }
    return out


def _breakdown(turns: int) -> dict[str, Any]:
    """The journaled set-up once, instrumented: what its turns over 10 and 20 ms waited for."""
    with tempfile.TemporaryDirectory() as d:
        r = _run(_JOURNAL, turns, Path(d), breakdown=True)
    r["load"] = os.getloadavg()
    b = r["breakdown"]
    rows = []
    for floor in ("over 10 ms", "over 20 ms"):
        part = b[floor]
        for kind in ("main cause", "overlapping"):
            for what, n in sorted(part[kind].items(), key=lambda x: -x[1]):
                rows.append([floor, kind, what, n])
    print_table(
        f"Journaled turns over 10 / 20 ms of {turns} (instrumented, load {r['load'][0]:.1f}): "
        f"{b['over 10 ms']['turns']} / {b['over 20 ms']['turns']}; p50 {r['ms']['p50']:.2f} "
        f"ms, p99 {r['ms']['p99']:.2f} ms; log syncs by thread {b['log syncs by thread']}",
        ["turns", "counted by", "what", "turns"],
        rows,
    )
    print(f"results: {write_results('bench_reply_breakdown', r)}")
    return r


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="30 turns, one journaled run")
    parser.add_argument("--baseline", type=Path, help="another checkout, run alternately")
    parser.add_argument(
        "--runs", type=int, default=3, help="journaled runs (per tree with --baseline)"
    )
    parser.add_argument(
        "--breakdown", action="store_true", help="what the slow journaled turns wait for"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.turns, args.runs = 30, 1
    if args.breakdown:
        return _breakdown(args.turns)
    if args.baseline is not None:
        ab = ab_journal(args.baseline, args.turns, args.runs)
        keys = ("p50", "p99", "over_20", "cpu", "syncs")
        print_table(
            f"ReActAgent.reply with the journal, {args.turns} turns, {args.runs} runs per tree "
            f"alternately (load {min(ab['load_1min']):.1f}-{max(ab['load_1min']):.1f})",
            [
                "tree",
                "p50 ms",
                "p99 ms",
                "turns > 20 ms",
                "process CPU ms/turn",
                "syncs/turn",
                "p99 each run",
                "> 20 ms each run",
            ],
            [
                [
                    label,
                    *(ab[label][k] for k in keys),
                    str(ab[label]["p99_each"]),
                    str(ab[label]["over_20_each"]),
                ]
                for label in ("this tree", "baseline")
            ]
            + [
                [
                    "this tree / baseline",
                    *(ab["this tree"][k] / max(ab["baseline"][k], 1e-9) for k in keys),
                    "",
                    "",
                ]
            ],
        )
        print(f"results: {write_results('bench_reply_ab', ab)}")
        return ab
    res: dict[str, Any] = {"turns": args.turns, "runs": args.runs}
    with tempfile.TemporaryDirectory() as d:
        res["fdatasync"] = _sync_floor(Path(d))
        for kind in ("no store", "store + autocontext"):
            res[kind] = _run(kind, args.turns, Path(d))
        runs = []
        for i in range(args.runs):
            runs.append(_run(_JOURNAL, args.turns, Path(d) / f"run{i}"))
        res["fdatasync after"] = _sync_floor(Path(d))
    res[_JOURNAL] = _median_run(runs)
    res["journal runs"] = runs
    res["load"] = os.getloadavg()
    base = res["no store"]["ms"]["p50"]
    kinds = ("no store", "store + autocontext", _JOURNAL)
    rows = [
        [
            kind if kind != _JOURNAL else f"{kind} (median of {args.runs})",
            res[kind]["ms"]["p50"],
            res[kind]["ms"]["p99"],
            res[kind]["turns_over_20_ms"],
            res[kind]["ms"]["p50"] / base,
            res[kind]["process_cpu_ms_per_turn"],
            res[kind]["pandas_lookups_per_turn"],
            res[kind]["syncs_per_turn"],
        ]
        for kind in kinds
    ]
    rows += [
        [f"  journal run {i + 1}", r["ms"]["p50"], r["ms"]["p99"], r["turns_over_20_ms"]] + [""] * 4
        for i, r in enumerate(runs)
    ]
    for key in ("fdatasync", "fdatasync after"):
        rows.append([f"disk: one {key}", res[key]["p50"], res[key]["p99"], *[""] * 5])
    print_table(
        f"ReActAgent.reply overhead per turn, scripted model, {args.turns} turns "
        f"(load {res['load'][0]:.1f})",
        [
            "set-up",
            "p50 ms",
            "p99 ms",
            "turns > 20 ms",
            "x no store (p50)",
            "process CPU ms/turn",
            "pandas look-ups/turn",
            "syncs/turn",
        ],
        rows,
    )
    print(f"results: {write_results('bench_reply', res)}")
    return res


def _median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The journaled runs' medians, per figure."""
    med = statistics.median
    return {
        "ms": {k: med(r["ms"][k] for r in runs) for k in ("p50", "p99", "mean", "n")},
        **{
            k: med(r[k] for r in runs)
            for k in (
                "turns_over_10_ms",
                "turns_over_20_ms",
                "pandas_lookups_per_turn",
                "process_cpu_ms_per_turn",
                "syncs_per_turn",
            )
        },
    }


if __name__ == "__main__":
    main()

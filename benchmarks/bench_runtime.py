"""Foundation benchmark: adds through the runtime, add-to-visible latency, sessions.

Side by side in one run:

* actormem ``runtime.add`` one call at a time (N messages, timed until the
  last is visible to a reader) vs a bare pykka actor doing the same work
  (tell an append, ask for the list);
* add-to-visible latency: ``add`` then ``size()`` (a read of your write)
  vs a bare pykka ``tell`` then ``ask``; median and p99;
* save and load of a 10,000-message session (median of several runs);
* AgentScope 1.0.21 doing the same (InMemoryMemory.add, JSONSession), when
  the peer virtualenv exists (``make bench`` creates ``.venv-peers``).
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
from pathlib import Path
from typing import Any

import pykka

from actormem import MemoryRuntime, Msg
from benchmarks._common import print_table, summary, write_results

PEER_PYTHON = Path(__file__).resolve().parent.parent / ".venv-peers" / "bin" / "python"


class _Bare(pykka.ThreadingActor):
    def __init__(self) -> None:
        super().__init__()
        self.items: list[Any] = []

    def on_receive(self, message: Any) -> Any:
        if message is None:
            return len(self.items)
        self.items.append(message)
        return None


def _msgs(n: int) -> list[Msg]:
    return [Msg.user(f"message number {i} " + "lorem ipsum " * 20) for i in range(n)]


def bench_adds(n: int, repeats: int) -> dict[str, Any]:
    ours, bare = [], []
    for _ in range(repeats):
        msgs = _msgs(n)
        with tempfile.TemporaryDirectory() as d, MemoryRuntime(session_dir=d) as rt:
            t0 = time.perf_counter()
            for m in msgs:
                rt.add(m)
            assert rt.size() == n
            ours.append(n / (time.perf_counter() - t0))
        ref = _Bare.start()
        t0 = time.perf_counter()
        for m in msgs:
            ref.tell(m)
        assert ref.ask(None) == n
        bare.append(n / (time.perf_counter() - t0))
        ref.stop()
    return {"actormem_adds_per_s": summary(ours), "bare_pykka_adds_per_s": summary(bare)}


def bench_latency(n: int) -> dict[str, Any]:
    ours, bare = [], []
    msgs = _msgs(n)
    with tempfile.TemporaryDirectory() as d, MemoryRuntime(session_dir=d) as rt:
        for m in msgs:
            t0 = time.perf_counter()
            rt.add(m)
            rt.size()
            ours.append((time.perf_counter() - t0) * 1e6)
    ref = _Bare.start()
    for m in msgs:
        t0 = time.perf_counter()
        ref.tell(m)
        ref.ask(None)
        bare.append((time.perf_counter() - t0) * 1e6)
    ref.stop()
    return {"actormem_add_visible_us": summary(ours), "bare_pykka_tell_ask_us": summary(bare)}


def bench_sessions(n: int, repeats: int) -> dict[str, Any]:
    saves, loads = [], []
    nbytes = 0
    with tempfile.TemporaryDirectory() as d:
        with MemoryRuntime(session_dir=d) as rt:
            rt.add(_msgs(n))
            for _ in range(repeats):
                t0 = time.perf_counter()
                path = rt.save_session("bench")
                saves.append((time.perf_counter() - t0) * 1e3)
            nbytes = Path(path).stat().st_size
        with MemoryRuntime(session_dir=d) as rt2:
            for _ in range(repeats):
                t0 = time.perf_counter()
                assert rt2.load_session("bench")
                loads.append((time.perf_counter() - t0) * 1e3)
            assert rt2.size() == n
    return {"save_ms": summary(saves), "load_ms": summary(loads), "file_bytes": nbytes}


def bench_add_during_compression(n: int) -> dict[str, Any]:
    """add() and add-to-visible latency with the compressor idle vs compressing."""
    from actormem.compress import AutoContextConfig
    from actormem.events import CompressionStarted, ContextCompressed

    cfg = AutoContextConfig.for_window(32_768)
    filler = "The build log says: " + "step ok; " * 60
    out: dict[str, Any] = {}
    for label, enabled in (("compressor_off", False), ("compressing", True)):
        calls: list[float] = []
        visible: list[float] = []
        busy = [0]
        passes = [0]
        with (
            tempfile.TemporaryDirectory() as d,
            MemoryRuntime(session_dir=d, autocontext=cfg if enabled else False) as rt,
        ):

            def on_event(e: Any, busy: list[int] = busy, passes: list[int] = passes) -> None:
                if isinstance(e, CompressionStarted):
                    busy[0] += 1
                elif isinstance(e, ContextCompressed):
                    passes[0] += 1

            rt.subscribe(on_event, CompressionStarted, ContextCompressed)
            for i in range(n):
                m = Msg.user(f"{i}: {filler}") if i % 2 else Msg.assistant(f"{i}: noted")
                t0 = time.perf_counter()
                rt.add(m)
                t1 = time.perf_counter()
                if i % 10 == 0:
                    rt.size()
                    visible.append((time.perf_counter() - t0) * 1e6)
                calls.append((t1 - t0) * 1e6)
            out[label] = {
                "add_call_us": summary(calls),
                "add_visible_us": summary(visible),
                "passes_started": busy[0],
                "strategies_applied": passes[0],
            }
    return out


def bench_peer(n: int, repeats: int) -> dict[str, Any] | None:
    py = os.environ.get("ACTORMEM_PEER_PYTHON") or str(PEER_PYTHON)
    if not Path(py).exists():
        return None
    script = Path(__file__).parent / "peers" / "agentscope_peer.py"
    try:
        out = subprocess.run(
            [py, str(script), str(n), str(repeats)],
            capture_output=True,
            text=True,
            timeout=600,
            check=True,
        ).stdout
        result: dict[str, Any] = json.loads(out.strip().splitlines()[0])
        return result
    except (subprocess.SubprocessError, json.JSONDecodeError, IndexError) as exc:
        return {"error": repr(exc)[:200]}


async def _loop_lag(n: int, mode: str) -> dict[str, Any]:
    """Lag of a 1 ms ticker while one asyncio application uses the runtime.

    ``mode``: ``"idle"`` (the ticker alone: the baseline of this run),
    ``"open in loop"`` (the runtime built on the loop, as ``async with
    MemoryRuntime(...)`` does) or ``"open in thread"`` (built with
    ``asyncio.to_thread``).  Then ``n`` messages are added with AutoContext
    compressing, a recording every 20 messages and a retrieve at the end.
    """
    import asyncio

    from actormem.compress import AutoContextConfig
    from actormem.store import Namespace

    lags: list[float] = []
    stop = asyncio.Event()

    async def ticker() -> None:
        loop = asyncio.get_running_loop()
        while not stop.is_set():
            t0 = loop.time()
            await asyncio.sleep(0.001)
            lags.append((loop.time() - t0 - 0.001) * 1000)

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0.05)
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as d:
        if mode == "idle":
            await asyncio.sleep(max(0.5, n / 2_000))
            out["work"] = summary(lags) | {"max": max(lags)}
        else:
            kwargs: dict[str, Any] = {
                "session_dir": d,
                "store": Path(d) / "lag.duckdb",
                "namespace": Namespace(user_id="lag"),
                "autocontext": AutoContextConfig.for_window(32_768),
            }
            first = len(lags)
            if mode == "open in thread":
                rt = await MemoryRuntime.aopen(**kwargs)
            else:
                rt = MemoryRuntime(**kwargs)
            await asyncio.sleep(0.01)  # the tick that waited for the open lands
            opened = lags[first:] or [0.0]
            out["open_max_ms"] = max(opened)
            filler = "The build log says: " + "step ok; " * 60
            async with rt:
                start = len(lags)
                out["work_span"] = [time.perf_counter()]
                batch: list[Msg] = []
                for i in range(n):
                    m = Msg.user(f"{filler} message {i}") if i % 2 else Msg.assistant(f"ok {i}")
                    await rt.aadd(m)
                    batch.append(m)
                    if len(batch) == 20:
                        await rt.arecord(batch)
                        batch = []
                    if i % 4 == 0:
                        await asyncio.sleep(0)  # an application yields now and then
                await rt.aretrieve("what did the build log say?")
                await rt.aflush()
                out["work_span"].append(time.perf_counter())
                work = lags[start:] or [0.0]
                out["work"] = summary(work) | {"max": max(work)}
    stop.set()
    await task
    return out


ROOT = Path(__file__).resolve().parent.parent
LAG_MODES = ("idle", "open in loop", "open in thread")


def _lag_child(tree: Path, n: int, mode: str) -> dict[str, Any]:
    """One :func:`_loop_lag` in a fresh interpreter running ``tree``'s code.

    A fresh process per measurement: the model loads once per process, so in
    one process only the first mode would pay for it.
    """
    code = (
        "import asyncio, json; from benchmarks.bench_runtime import _loop_lag; "
        f"print(json.dumps(asyncio.run(_loop_lag({n}, {mode!r}))))"
    )
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    ).stdout
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def bench_loop_lag(n: int, runs: int = 1, baseline: Path | None = None) -> dict[str, Any]:
    """asyncio loop lag per mode (see :func:`_loop_lag`), each in a fresh process.

    ``runs`` rounds; in each, every mode runs once for this tree and, when
    ``baseline`` names another checkout (e.g. ``git worktree add /tmp/b <commit>``),
    once for it right after, so both see the same machine.  Per mode: the median
    over the rounds of lag p50, p99 and max (and of the tick that waited for the
    open), and every round's p99 and max.
    """
    trees = {"this tree": ROOT} | ({"baseline": baseline.resolve()} if baseline else {})
    raw: dict[str, dict[str, list[dict[str, Any]]]] = {
        label: {mode: [] for mode in LAG_MODES} for label in trees
    }
    for _ in range(runs):
        for mode in LAG_MODES:
            for label, tree in trees.items():
                if mode == "idle" and label != "this tree":
                    continue  # the ticker alone is the same for both
                raw[label][mode].append(_lag_child(tree, n, mode))
    out: dict[str, Any] = {"runs": runs, "load_average": os.getloadavg()}
    for label, modes in raw.items():
        for mode, results in modes.items():
            if not results:
                continue
            work = [r["work"] for r in results]
            opened = [r["open_max_ms"] for r in results if "open_max_ms" in r]
            out[f"{label}: {mode}"] = {
                "p50": statistics.median(w["p50"] for w in work),
                "p99": statistics.median(w["p99"] for w in work),
                "max": statistics.median(w["max"] for w in work),
                "open_max_ms": statistics.median(opened) if opened else None,
                "p99_each": [round(w["p99"], 2) for w in work],
                "max_each": [round(w["max"], 2) for w in work],
            }
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="small sizes (smoke run)")
    args = ap.parse_args(argv)
    n = 1_000 if args.quick else 10_000
    repeats = 2 if args.quick else 7
    adds = bench_adds(n, repeats)
    lat = bench_latency(min(n, 5_000))
    sess = bench_sessions(n, repeats)
    during = bench_add_during_compression(2_000 if args.quick else 10_000)
    peer = bench_peer(n, 3 if args.quick else 5)
    lag = bench_loop_lag(2_000)
    res = {
        "n": n,
        "adds": adds,
        "latency": lat,
        "sessions": sess,
        "add_during_compression": during,
        "agentscope_1_0_21": peer,
        "loop_lag_ms": lag,
    }
    p = peer if peer and "error" not in peer else {}
    rows = [
        [
            "adds/s, one call at a time (p50)",
            adds["actormem_adds_per_s"]["p50"],
            adds["bare_pykka_adds_per_s"]["p50"],
            p.get("adds_per_s", "n/a"),
            "50,000",
        ],
        [
            "add-to-visible p50 (us)",
            lat["actormem_add_visible_us"]["p50"],
            lat["bare_pykka_tell_ask_us"]["p50"],
            "-",
            "<= 2x bare",
        ],
        [
            "add-to-visible p99 (us)",
            lat["actormem_add_visible_us"]["p99"],
            lat["bare_pykka_tell_ask_us"]["p99"],
            "-",
            "-",
        ],
        [
            f"save {n:,}-msg session p50 (ms)",
            sess["save_ms"]["p50"],
            "-",
            p.get("save_ms_p50", "n/a"),
            "8",
        ],
        [f"save {n:,}-msg session p99 (ms)", sess["save_ms"]["p99"], "-", "-", "-"],
        [
            f"load {n:,}-msg session p50 (ms)",
            sess["load_ms"]["p50"],
            "-",
            p.get("load_ms_p50", "n/a"),
            "35",
        ],
        [f"load {n:,}-msg session p99 (ms)", sess["load_ms"]["p99"], "-", "-", "-"],
    ]
    off, on = during["compressor_off"], during["compressing"]
    print_table(
        f"add() while the compressor works ({on['passes_started']} passes, "
        f"{on['strategies_applied']} strategies applied) vs no compressor, same run",
        ["measure", "compressing", "compressor off"],
        [
            ["add() call p50 (us)", on["add_call_us"]["p50"], off["add_call_us"]["p50"]],
            ["add() call p99 (us)", on["add_call_us"]["p99"], off["add_call_us"]["p99"]],
            ["add-to-visible p50 (us)", on["add_visible_us"]["p50"], off["add_visible_us"]["p50"]],
            ["add-to-visible p99 (us)", on["add_visible_us"]["p99"], off["add_visible_us"]["p99"]],
        ],
    )
    print_table(
        "actormem runtime vs bare pykka vs AgentScope 1.0.21 (same run)",
        ["measure", "actormem", "bare pykka", "AgentScope", "goal"],
        rows,
    )
    print_lag(lag)
    print(f"session file: {sess['file_bytes']:,} bytes; results: {write_results('runtime', res)}")
    if peer and "error" in peer:
        print(f"peer failed: {peer['error']}", file=sys.stderr)
    return res


def print_lag(lag: dict[str, Any]) -> None:
    rows = {k: v for k, v in lag.items() if isinstance(v, dict)}
    idle = rows["this tree: idle"]["p50"] or 1e-9
    load = ", ".join(f"{x:.1f}" for x in lag["load_average"])
    print_table(
        "asyncio loop lag (1 ms ticker), 2,000 messages with compression, recording and a "
        f"retrieve, each mode in a fresh process; medians of {lag['runs']} runs; "
        f"idle = the ticker alone, same run; load average at the end {load}",
        ["tree: mode", "open max ms", "lag p50 ms", "p99 ms", "max ms", "p99 each", "max each"],
        [
            [
                name,
                r["open_max_ms"] if r["open_max_ms"] is not None else "-",
                r["p50"],
                r["p99"],
                r["max"],
                " ".join(f"{x:.1f}" for x in r["p99_each"]),
                " ".join(f"{x:.0f}" for x in r["max_each"]),
            ]
            for name, r in rows.items()
        ],
    )
    print(f"lag p50 x idle: {rows['this tree: open in thread']['p50'] / idle:.2f}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--loop-lag-probe"]:  # which code the late ticks wait for
        from benchmarks._lag_probe import probe

        ap = argparse.ArgumentParser(description="name the code behind late ticks")
        ap.add_argument("--loop-lag-probe", action="store_true")
        ap.add_argument("--mode", default="open in thread", choices=LAG_MODES[1:])
        ap.add_argument("--threshold", type=float, default=5.0, help="late tick, ms")
        opts = ap.parse_args()
        found = probe(2_000, opts.mode, opts.threshold)
        print(f"results: {write_results('runtime_loop_lag_probe', found)}")
    elif sys.argv[1:2] == ["--loop-lag"]:  # only this table
        ap = argparse.ArgumentParser(description="asyncio loop lag only")
        ap.add_argument("--loop-lag", action="store_true")
        ap.add_argument("--runs", type=int, default=1, help="rounds (medians are reported)")
        ap.add_argument("--baseline", type=Path, help="another checkout measured alongside")
        opts = ap.parse_args()
        lag = bench_loop_lag(2_000, opts.runs, opts.baseline)
        print_lag(lag)
        print(f"results: {write_results('runtime_loop_lag', {'loop_lag_ms': lag})}")
    else:
        main()

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
            nbytes = path.stat().st_size
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
    res = {
        "n": n,
        "adds": adds,
        "latency": lat,
        "sessions": sess,
        "add_during_compression": during,
        "agentscope_1_0_21": peer,
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
    print(f"session file: {sess['file_bytes']:,} bytes; results: {write_results('runtime', res)}")
    if peer and "error" in peer:
        print(f"peer failed: {peer['error']}", file=sys.stderr)
    return res


if __name__ == "__main__":
    main()

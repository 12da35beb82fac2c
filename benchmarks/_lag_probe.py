"""Which code an asyncio loop's late ticks wait for (``bench_runtime --loop-lag-probe``).

``bench_runtime --loop-lag`` says how late a 1 ms ticker is while one
application adds 2,000 messages with compression, recording and a retrieve;
this names the code.  One run of the same work, in this process, seen two ways:

* **late ticks**: a watchdog thread notes every thread's stack and CPU clock
  (``pthread_getcpuclockid``) every 0.5 ms.  For each tick of a second 1 ms
  ticker more than ``threshold`` late, the CPU every thread used in that
  window and what it was running; summed over the late windows per thread and
  code.  A window with little CPU in any thread waited for a core (the machine),
  not for the process;
* **unpaced stretches**: the CPU a library background thread used between two
  of its ``pace()`` calls (``actormem._pace._observer``), the longest ones,
  with the code at both ends and what the watchdog saw the thread run
  meanwhile.  Pure Python longer than the switch interval (5 ms) makes a
  waiting loop wait the interval; a C call that keeps the GIL, its whole length.

The watchdog wants the GIL every 0.5 ms too, so it disturbs what it measures:
figures come from ``--loop-lag``; this points at code.
"""

from __future__ import annotations

import asyncio
import bisect
import collections
import gc
import os
import sys
import threading
import time
from types import FrameType
from typing import Any

from actormem import _pace

_SAMPLE = 0.0005
Ticks = list[tuple[float, float]]


def _where(frame: FrameType | None, depth: int = 6) -> tuple[str, ...]:
    out: list[str] = []
    while frame is not None and len(out) < depth:
        name = frame.f_code.co_filename
        if "/actormem/" in name:
            name = name.split("/actormem/")[-1]
        else:
            name = name.split("site-packages/")[-1].rsplit("/", 1)[-1]
        out.append(f"{name}:{frame.f_lineno} {frame.f_code.co_name}")
        frame = frame.f_back
    return tuple(out)


def _label(stack: tuple[str, ...]) -> str:
    """The innermost actormem frame of ``stack`` (or its innermost frame)."""
    for frame in stack:
        if frame.split(":", 1)[0].endswith(".py") and "/" in frame.split(":", 1)[0]:
            return frame
    return stack[0] if stack else "?"


def _kind(name: str, main: bool) -> str:
    if main:
        return "loop"
    base = name.split(":", 1)[0].rstrip("0123456789").rstrip("-_")
    return base or name


class _Watch:
    def __init__(self) -> None:
        self.samples: list[tuple[float, dict[int, tuple[float, tuple[str, ...]]]]] = []
        self.names: dict[int, str] = {}
        self.stretches: list[tuple[int, float, float, float, tuple[str, ...], tuple[str, ...]]] = []
        self._stop = threading.Event()
        self._clocks: dict[int, int] = {}
        self._local = threading.local()
        self._thread = threading.Thread(target=self._run, name="lag-probe", daemon=True)
        self.collections: list[tuple[float, float, int, str]] = []  # start, end, generation
        self._gc_start = 0.0

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        """``gc.callbacks``: when the collector ran, how long, which generation, where."""
        now = time.perf_counter()
        if phase == "start":
            self._gc_start = now
        else:
            where = threading.current_thread().name
            self.collections.append((self._gc_start, now, info["generation"], where))

    def _cpu(self, tid: int) -> float:
        clk = self._clocks.get(tid)
        if clk is None:
            try:
                clk = self._clocks[tid] = time.pthread_getcpuclockid(tid)
            except (OSError, OverflowError):
                clk = self._clocks[tid] = -1
        if clk == -1:
            return 0.0
        try:
            return time.clock_gettime(clk)
        except OSError:
            return 0.0

    def _run(self) -> None:
        me = threading.get_ident()
        while not self._stop.is_set():
            now = time.perf_counter()
            frames = sys._current_frames()
            for t in threading.enumerate():
                if t.ident is not None and t.ident not in self.names:
                    self.names[t.ident] = t.name
            snap = {tid: (self._cpu(tid), _where(f)) for tid, f in frames.items() if tid != me}
            self.samples.append((now, snap))
            time.sleep(_SAMPLE)

    def observe(self) -> None:
        """``_pace._observer``: the CPU since this thread's previous ``pace()``."""
        cpu, now = time.thread_time(), time.perf_counter()
        here = _where(sys._getframe(2), 3)  # pace()'s caller (no source lines read)
        prev = getattr(self._local, "prev", None)
        if prev is not None and cpu - prev[0] > 0.002:
            self.stretches.append(
                (threading.get_ident(), prev[1], now, (cpu - prev[0]) * 1000, prev[2], here)
            )
        self._local.prev = (time.thread_time(), time.perf_counter(), here)

    def start(self) -> None:
        self._thread.start()
        _pace._observer = self.observe
        gc.callbacks.append(self._on_gc)

    def stop(self) -> None:
        _pace._observer = None
        gc.callbacks.remove(self._on_gc)
        self._stop.set()
        self._thread.join()


async def _run(
    n: int, mode: str, watch: _Watch
) -> tuple[dict[str, Any], list[tuple[float, float]]]:
    from benchmarks.bench_runtime import _loop_lag

    ticks: Ticks = []
    stop = asyncio.Event()

    async def ticker() -> None:
        while not stop.is_set():
            t0 = time.perf_counter()
            await asyncio.sleep(0.001)
            ticks.append((t0, time.perf_counter()))

    watch.start()
    task = asyncio.create_task(ticker())
    try:
        result = await _loop_lag(n, mode)
    finally:
        stop.set()
        await task
        watch.stop()
    return result, ticks


def probe(
    n: int = 2_000, mode: str = "open in thread", threshold_ms: float = 5.0, top: int = 25
) -> dict[str, Any]:
    """Run the loop-lag work once with the watchdog; print and return both views."""
    watch = _Watch()
    result, ticks = asyncio.run(_run(n, mode, watch))
    main = threading.main_thread().ident
    times = [s[0] for s in watch.samples]
    # Only the ticks --loop-lag counts: those of the work, after the open.
    w0, w1 = result.get("work_span", (float("-inf"), float("inf")))
    late = [(a, b) for a, b in ticks if (b - a - 0.001) * 1000 > threshold_ms and w0 <= b <= w1]
    by_code: collections.defaultdict[tuple[str, str], float] = collections.defaultdict(float)
    seen_in: collections.Counter[tuple[str, str]] = collections.Counter()
    starved = 0
    worst: list[tuple[float, float, list[tuple[float, str, str]]]] = []
    for t0, t1 in late:
        i = bisect.bisect_right(times, t0 + 0.001) - 1
        j = bisect.bisect_left(times, t1)
        if i < 0 or j >= len(watch.samples):
            continue
        before, after = watch.samples[i][1], watch.samples[j][1]
        window = (watch.samples[j][0] - watch.samples[i][0]) * 1000
        used = 0.0
        threads: list[tuple[float, str, str]] = []
        for tid, (cpu, _stack) in after.items():
            ms = (cpu - before.get(tid, (cpu, ()))[0]) * 1000
            if ms < 0.3:
                continue
            used += ms
            stacks = [watch.samples[k][1].get(tid, (0.0, ()))[1] for k in range(i + 1, j + 1)]
            code = collections.Counter(_label(s) for s in stacks if s).most_common(1)
            key = (_kind(watch.names.get(tid, str(tid)), tid == main), code[0][0] if code else "?")
            by_code[key] += ms
            seen_in[key] += 1
            threads.append((ms, *key))
        if used < window / 4:
            starved += 1
        for a, b, gen, where in watch.collections:
            if a < t1 and b > t0 and b - a > 0.0005:
                kind = _kind(where, where == "MainThread")
                threads.append(((b - a) * 1000, kind, f"gc gen{gen}"))
        worst.append(((t1 - t0 - 0.001) * 1000, (t0 - w0) * 1000, sorted(threads, reverse=True)))
    lag_rows = [
        [kind, code, round(ms, 1), seen_in[(kind, code)]]
        for (kind, code), ms in sorted(by_code.items(), key=lambda kv: -kv[1])[:top]
    ]
    print(
        f"\nlate ticks (> {threshold_ms:g} ms): {len(late)} of {len(ticks)}; {starved} of them "
        "with the process's threads using < 1/4 of the window (waiting for a core); "
        f"load {os.getloadavg()[0]:.1f}.  CPU per thread and code in those windows:"
    )
    for row_kind, row_code, spent, windows in lag_rows:
        print(f"  {spent:8.1f} ms in {windows:4d} windows  {row_kind:28s} {row_code}")
    worst.sort(key=lambda w: -w[0])
    slow_gc = sorted(((b - a) * 1000, g, w) for a, b, g, w in watch.collections if b - a > 0.002)
    print(
        f"\ngarbage collections: {len(watch.collections)}; longer than 2 ms: "
        + (", ".join(f"gen{g} {ms:.1f} ms ({w})" for ms, g, w in slow_gc[::-1][:top]) or "none")
    )
    print(f"\nthe {min(top, len(worst))} latest ticks of the work (ms after its start):")
    for lag, at, threads in worst[:top]:
        print(f"  {lag:6.1f} ms late at +{at:7.1f} ms")
        for cpu_ms, thread_kind, thread_code in threads[:4]:
            print(f"      {cpu_ms:6.1f} ms CPU  {thread_kind:26s} {thread_code}")
    stretch_rows = []
    for tid, a, b, cpu, start, end in sorted(watch.stretches, key=lambda s: -s[3])[:top]:
        i, j = bisect.bisect_left(times, a), bisect.bisect_right(times, b)
        inside = collections.Counter(
            _label(watch.samples[k][1].get(tid, (0.0, ()))[1]) for k in range(i, j)
        ).most_common(2)
        stretch_rows.append(
            [
                _kind(watch.names.get(tid, str(tid)), False),
                round(cpu, 1),
                round((b - a) * 1000, 1),
                start[0] if start else "?",
                end[0] if end else "?",
                "; ".join(f"{c}x {code}" for code, c in inside),
            ]
        )
    print("\nlongest unpaced stretches of library threads (CPU between two pace() calls):")
    for row_kind, busy, wall, first, last, seen in stretch_rows:
        print(f"  {busy:6.1f} ms CPU / {wall:7.1f} ms wall  {row_kind}")
        print(f"      from {first}  to {last}")
        if seen:
            print(f"      seen meanwhile: {seen}")
    return {
        "result": result,
        "late_ticks": len(late),
        "ticks": len(ticks),
        "starved_windows": starved,
        "worst_ticks": [
            {"late_ms": round(lag, 2), "at_ms": round(at, 1), "threads": threads[:4]}
            for lag, at, threads in worst[:top]
        ],
        "by_code_ms": [
            dict(zip(("thread", "code", "cpu_ms", "windows"), r, strict=True)) for r in lag_rows
        ],
        "stretches": [
            dict(zip(("thread", "cpu_ms", "wall_ms", "from", "to", "seen"), r, strict=True))
            for r in stretch_rows
        ],
        "load_average": os.getloadavg(),
    }

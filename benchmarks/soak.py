"""Soak: a runtime under mixed traffic for N minutes; RSS, threads and open files must not grow.

``python -m benchmarks.soak --minutes 10`` (``make soak``).  One runtime with
the AutoContext compressor and the long-term recorder (DuckDB file) runs a
steady agent-like load: adds, compressions, recorded turns with flushes,
retrievals, keyed facts, session saves, and a session end + clear every
``--session-turns`` turns (so the working set stays bounded the way a real
agent's does).  A sampler thread reads ``/proc/self/status`` (VmRSS, Threads)
and ``/proc/self/fd`` once a second, with the turns done so far and the
number of live memories in the store.

Steady state.  Memories are meant to accumulate, and a store that keeps
them grows with them: the in-memory index holds each live memory's vector,
postings and record, DuckDB caches the file's blocks, and ``history`` keeps
every change.  That growth is not a leak, but it hides one.  So by default
the store forgets each session's memories (and their history) when the
session ends: after warm-up the retained data stops growing while the
traffic goes on, and any RSS growth that remains is memory the traffic
keeps, i.e. a leak.  ``--max-memories N`` caps the store instead (the least
relevant are evicted; history still grows), ``--keep-sessions`` with no cap
runs as before.

Pass/fail, comparing the start of the second half with the end (medians of
10 % windows): threads and open files may not grow beyond a small slack
(2 threads, 4 files); RSS may grow at most

    ``--rss-slack-mb`` (default 32 MB) + ``--kb-per-memory`` (default 4 KB)
    x the growth in live memories over the same span

The second term is the retained data's own footprint; it is ~0 in the
steady states (measured: a capped and an uncapped run of 6,000 turns ended
3.9 MB apart for 5,000 more live memories, 0.8 KB each with the soak's 64-d
vectors; 4 KB leaves room for 256-d ones).  With ``--keep-sessions`` it is not
~0: there each retained memory costs ~13-16 KB of RSS in this traffic
(``benchmarks/rssparts.py``; DuckDB ~9 KB of it, most of which its
``duckdb_memory()`` does not report: the file's cached blocks ~2 KB, plus
~2.8 KB kept per row DuckDB rewrites, delete + insert, when a LIST or ARRAY
column is updated, which merges and reconciled preferences do about once per
memory here; Python ~4.5 KB: the index, the rerank and token-count caches
filling to their bounds).  Such a run needs ``--kb-per-memory 16``, and its
leak check then ``--inject-leak-kb 32`` or more.  The slack absorbs what is
bounded but fills slowly: allocator arenas, the token-count cache (bounded
at 8M characters), the index's dead rows until it compacts (at 10,000 rows),
DuckDB's WAL/checkpoint cycle.  The output states the growth per 1,000 turns
and the allowance.  The check still fails on a leak: ``--inject-leak-kb N``
(or ``ACTORMEM_SOAK_LEAK_KB=N``) keeps N KB per turn alive on purpose, and
a run with N=16 fails.

The plot is a PNG written with zlib (no matplotlib: it is not a dependency
and cannot be installed offline here; three line panels need no more): RSS
(MB), threads and open files over time, top to bottom, each scaled to its
own range, with the half-way mark as a grey vertical line.  The values are in
the JSON results and in the PNG's ``tEXt`` chunk.
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import statistics
import struct
import tempfile
import threading
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from actormem import MemoryRuntime, Msg
from actormem.compress import AutoContextConfig
from actormem.events import ContextCompressed
from actormem.recorder import RecorderConfig
from actormem.store import DuckDBStore, Namespace
from benchmarks._common import RESULTS, write_results


def sample() -> tuple[float, int, int]:
    """(RSS in MB, threads, open file descriptors) of this process, from /proc."""
    rss, threads = 0.0, 0
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) / 1024
        elif line.startswith("Threads:"):
            threads = int(line.split()[1])
    return rss, threads, len(os.listdir("/proc/self/fd"))


# -- a minimal PNG line chart ---------------------------------------------------------------


def _png(width: int, height: int, pixels: bytearray, text: str) -> bytes:
    def chunk(tag: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data))
            + tag
            + data
            + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)
        )

    rows = b"".join(
        b"\x00" + bytes(pixels[y * width * 3 : (y + 1) * width * 3]) for y in range(height)
    )
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
        + chunk(b"tEXt", b"Comment\x00" + text.encode("latin-1", "replace"))
        + chunk(b"IDAT", zlib.compress(rows, 9))
        + chunk(b"IEND", b"")
    )


def plot(path: Path, t: list[float], series: list[list[float]], text: str) -> None:
    """One panel per series, stacked; lines in blue, frames in black, half-way in grey."""
    width, panel, pad = 900, 200, 12
    height = panel * len(series)
    px = bytearray(b"\xff" * (width * height * 3))

    def put(x: int, y: int, rgb: tuple[int, int, int]) -> None:
        if 0 <= x < width and 0 <= y < height:
            i = (y * width + x) * 3
            px[i : i + 3] = bytes(rgb)

    def line(x0: int, y0: int, x1: int, y1: int, rgb: tuple[int, int, int]) -> None:
        dx, dy = abs(x1 - x0), -abs(y1 - y0)
        sx, sy = (1 if x0 < x1 else -1), (1 if y0 < y1 else -1)
        err = dx + dy
        while True:
            put(x0, y0, rgb)
            if x0 == x1 and y0 == y1:
                return
            e2 = 2 * err
            if e2 >= dy:
                err += dy
                x0 += sx
            if e2 <= dx:
                err += dx
                y0 += sy

    t_max = max(t[-1], 1e-9) if t else 1.0
    for k, values in enumerate(series):
        top, bottom = k * panel + pad, (k + 1) * panel - pad
        left, right = pad, width - pad
        for x0, y0, x1, y1 in (
            (left, top, right, top),
            (left, bottom, right, bottom),
            (left, top, left, bottom),
            (right, top, right, bottom),
        ):
            line(x0, y0, x1, y1, (0, 0, 0))
        mid = left + (right - left) // 2
        line(mid, top + 1, mid, bottom - 1, (190, 190, 190))
        if not values:
            continue
        lo, hi = min(values), max(values)
        span = (hi - lo) or 1.0
        pts = [
            (
                left + round((tt / t_max) * (right - left)),
                bottom - round(((v - lo) / span) * (bottom - top - 4)) - 2,
            )
            for tt, v in zip(t, values, strict=True)
        ]
        for (x0, y0), (x1, y1) in itertools.pairwise(pts):
            line(x0, y0, x1, y1, (30, 90, 200))
    path.write_bytes(_png(width, height, px, text))


# -- the run ----------------------------------------------------------------------------------

#: What ``--inject-leak-kb`` keeps alive (a deliberate leak).
_LEAKED: list[bytes] = []


class Sampler(threading.Thread):
    def __init__(self, interval: float = 1.0) -> None:
        super().__init__(name="soak-sampler", daemon=True)
        self.interval = interval
        self.stop = threading.Event()
        self.t: list[float] = []
        self.rss: list[float] = []
        self.threads: list[float] = []
        self.fds: list[float] = []
        self.turns: list[float] = []
        self.live: list[float] = []
        #: Set by the traffic: the turns done so far and the store's live memories.
        self.progress: Callable[[], tuple[int, int]] = lambda: (0, 0)

    def run(self) -> None:
        t0 = time.monotonic()
        while not self.stop.is_set():
            rss, th, fd = sample()
            try:
                turns, live = self.progress()
            except Exception:  # the store is closing: keep the last figures
                turns, live = (int(self.turns[-1]), int(self.live[-1])) if self.turns else (0, 0)
            self.t.append(time.monotonic() - t0)
            self.rss.append(rss)
            self.threads.append(th)
            self.fds.append(fd)
            self.turns.append(turns)
            self.live.append(live)
            self.stop.wait(self.interval)


def traffic(
    folder: Path,
    seconds: float,
    rate: float,
    session_turns: int,
    *,
    max_memories: int | None = None,
    forget_sessions: bool = True,
    leak_kb: int = 0,
    sampler: Sampler | None = None,
) -> dict[str, int]:
    """Mixed traffic on one runtime for ``seconds`` at about ``rate`` turns per second.

    ``forget_sessions`` makes the store forget the memories (and their history)
    of each session when it ends, ``max_memories`` caps the store per
    namespace: either keeps the retained data bounded (steady state).
    ``leak_kb`` keeps that many KB per turn alive on purpose (to show the
    verdict fails).
    """
    from actormem.models.embedders import HashEmbedder

    rng = random.Random(1)
    words = [
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
    store = DuckDBStore(
        folder / "soak.duckdb", embedder=HashEmbedder(64), max_memories=max_memories
    )
    counts = {"turns": 0, "retrievals": 0, "facts": 0, "saves": 0, "compressions": 0}
    scope = Namespace(user_id="soak")
    if sampler is not None:
        sampler.progress = lambda: (counts["turns"], store.count(scope))
    rt = MemoryRuntime(
        session_dir=folder / "sessions",
        store=store,
        namespace=Namespace(user_id="soak", agent_id="agent"),
        autocontext=AutoContextConfig(msg_threshold=40, last_keep=6),
        recorder=RecorderConfig(batch_seconds=0.1, idle_seconds=5.0),
    )
    rt.subscribe(
        lambda e: counts.__setitem__("compressions", counts["compressions"] + 1), ContextCompressed
    )
    try:
        end = time.monotonic() + seconds
        i = 0
        while time.monotonic() < end:
            t_next = time.monotonic() + 1.0 / rate
            w = " ".join(rng.sample(words, 3))
            user = Msg.user(f"turn {i}: I like {w}. What about {rng.choice(words)}?")
            rt.add(user)
            if i % 3 == 0:
                rt.format_for_injection(w)
                counts["retrievals"] += 1
            reply = Msg.assistant(f"About {w}: noted ({i}).")
            rt.add(reply)
            rt.record([user, reply])
            rt.on_turn_end()
            if leak_kb:
                _LEAKED.append(os.urandom(leak_kb * 1024))
            counts["turns"] += 1
            if i % 20 == 0:
                rt.save_fact(f"k{i % 50}", w)
                counts["facts"] += 1
            if i % 25 == 0:
                rt.flush(60)
                rt.save_session("soak")
                counts["saves"] += 1
            if i % 40 == 0:
                rt.compress_now()
            if i % session_turns == session_turns - 1:
                rt.on_session_end()
                rt.clear()
                rt.save_session("soak")
                if forget_sessions:
                    rt.flush(60)
                    store.forget(scope)
            i += 1
            delay = t_next - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        rt.flush(60)
    finally:
        rt.close()
        store.close()
    return counts


def verdict(s: Sampler, rss_slack_mb: float, kb_per_memory: float = 4.0) -> dict[str, Any]:
    """Compare the start of the second half with the end (medians of 10 % windows).

    RSS may grow by ``rss_slack_mb`` plus ``kb_per_memory`` for each live memory
    gained over the same span (the retained data's own footprint).
    """
    n = len(s.t)
    if n < 10:
        return {"pass": False, "why": f"only {n} samples"}
    w = max(1, n // 10)

    def at_half(v: list[float]) -> float:
        return statistics.median(v[n // 2 : n // 2 + w])

    def at_end(v: list[float]) -> float:
        return statistics.median(v[-w:])

    rss0, rss1 = at_half(s.rss), at_end(s.rss)
    th0, th1 = at_half(s.threads), at_end(s.threads)
    fd0, fd1 = at_half(s.fds), at_end(s.fds)
    turns0, turns1 = at_half(s.turns), at_end(s.turns)
    live0, live1 = at_half(s.live), at_end(s.live)
    allowance = max(0.0, live1 - live0) * kb_per_memory / 1024
    limit = rss_slack_mb + allowance
    rss_ok = rss1 - rss0 <= limit
    th_ok = th1 - th0 <= 2
    fd_ok = fd1 - fd0 <= 4
    per_kturn = (rss1 - rss0) / (turns1 - turns0) * 1000 if turns1 > turns0 else float("nan")
    return {
        "pass": rss_ok and th_ok and fd_ok,
        "rss_mb": {
            "start": s.rss[0],
            "half": rss0,
            "end": rss1,
            "max": max(s.rss),
            "growth": rss1 - rss0,
            "growth_pct": 100 * (rss1 - rss0) / rss0 if rss0 else float("nan"),
            "mb_per_1000_turns": per_kturn,
            "allowance_for_retained_data": allowance,
            "limit": limit,
            "ok": rss_ok,
        },
        "turns": {"half": turns0, "end": turns1},
        "live_memories": {"half": live0, "end": live1, "max": max(s.live)},
        "threads": {"half": th0, "end": th1, "max": max(s.threads), "ok": th_ok},
        "open_files": {"half": fd0, "end": fd1, "max": max(s.fds), "ok": fd_ok},
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--rate", type=float, default=50.0, help="turns per second")
    ap.add_argument("--session-turns", type=int, default=500)
    ap.add_argument("--rss-slack-mb", type=float, default=32.0)
    ap.add_argument(
        "--keep-sessions",
        action="store_true",
        help="keep every session's memories (default: forget them when the session ends)",
    )
    ap.add_argument(
        "--max-memories",
        type=int,
        default=0,
        help="cap of the store per namespace (another steady state); 0 = uncapped",
    )
    ap.add_argument(
        "--kb-per-memory",
        type=float,
        default=4.0,
        help="RSS allowed per live memory gained in the second half (retained data)",
    )
    ap.add_argument(
        "--inject-leak-kb",
        type=int,
        default=int(os.environ.get("ACTORMEM_SOAK_LEAK_KB", "0")),
        help="keep this many KB per turn alive on purpose (the verdict must then fail)",
    )
    ap.add_argument("--png", default=str(RESULTS / "soak.png"))
    args = ap.parse_args(argv)
    sampler = Sampler()
    sampler.start()
    with tempfile.TemporaryDirectory(prefix="actormem-soak-") as d:
        counts = traffic(
            Path(d),
            args.minutes * 60,
            args.rate,
            args.session_turns,
            max_memories=args.max_memories or None,
            forget_sessions=not args.keep_sessions,
            leak_kb=args.inject_leak_kb,
            sampler=sampler,
        )
    time.sleep(1.5)
    sampler.stop.set()
    sampler.join()
    result = verdict(sampler, args.rss_slack_mb, args.kb_per_memory)
    png = Path(args.png)
    png.parent.mkdir(parents=True, exist_ok=True)
    text = (
        f"actormem soak {args.minutes} min: panels RSS MB "
        f"{min(sampler.rss):.0f}-{max(sampler.rss):.0f}, threads "
        f"{min(sampler.threads):.0f}-{max(sampler.threads):.0f}, open files "
        f"{min(sampler.fds):.0f}-{max(sampler.fds):.0f}"
    )
    plot(png, sampler.t, [sampler.rss, sampler.threads, sampler.fds], text)
    out = {
        "config": vars(args),
        "traffic": counts,
        "samples": len(sampler.t),
        "verdict": result,
        "series": {
            "t": sampler.t,
            "rss_mb": sampler.rss,
            "threads": sampler.threads,
            "turns": sampler.turns,
            "live_memories": sampler.live,
        },
        "png": str(png),
    }
    write_results("soak", out)
    print(text)
    print(f"traffic: {counts}")
    for k in ("rss_mb", "turns", "live_memories", "threads", "open_files"):
        print(f"{k}: {result.get(k)}")
    rss = result.get("rss_mb")
    if rss:
        print(
            f"rule: RSS growth over the second half {rss['growth']:+.1f} MB "
            f"({rss['mb_per_1000_turns']:+.2f} MB per 1,000 turns) <= slack "
            f"{args.rss_slack_mb:.0f} MB + retained data "
            f"{rss['allowance_for_retained_data']:.1f} MB "
            f"({args.kb_per_memory:g} KB x live memories gained; sessions "
            f"{'kept' if args.keep_sessions else 'forgotten at their end'}; cap "
            f"{args.max_memories or 'none'}; injected leak {args.inject_leak_kb} KB/turn)"
        )
    print("SOAK PASS" if result["pass"] else "SOAK FAIL")
    return out


if __name__ == "__main__":
    raise SystemExit(0 if main()["verdict"]["pass"] else 1)

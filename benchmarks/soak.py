"""Soak: a runtime under mixed traffic for N minutes; RSS, threads and open files must not grow.

``python -m benchmarks.soak --minutes 10`` (``make soak``).  One runtime with
the AutoContext compressor and the long-term recorder (DuckDB file) runs a
steady agent-like load: adds, compressions, recorded turns with flushes,
retrievals, keyed facts, session saves, and a session end + clear every
``--session-turns`` turns (so the working set stays bounded the way a real
agent's does).  A sampler thread reads ``/proc/self/status`` (VmRSS, Threads)
and ``/proc/self/fd`` once a second.

Pass/fail on growth, comparing the second half of the run (after warm-up):
threads and open files may not grow at all beyond a small slack, RSS may
grow at most ``--rss-slack-mb`` (default 48 MB) or 15 %, whichever is larger
(the long-term index legitimately grows with every recorded turn).

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


class Sampler(threading.Thread):
    def __init__(self, interval: float = 1.0) -> None:
        super().__init__(name="soak-sampler", daemon=True)
        self.interval = interval
        self.stop = threading.Event()
        self.t: list[float] = []
        self.rss: list[float] = []
        self.threads: list[float] = []
        self.fds: list[float] = []

    def run(self) -> None:
        t0 = time.monotonic()
        while not self.stop.is_set():
            rss, th, fd = sample()
            self.t.append(time.monotonic() - t0)
            self.rss.append(rss)
            self.threads.append(th)
            self.fds.append(fd)
            self.stop.wait(self.interval)


def traffic(folder: Path, seconds: float, rate: float, session_turns: int) -> dict[str, int]:
    """Mixed traffic on one runtime for ``seconds`` at about ``rate`` turns per second."""
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
    store = DuckDBStore(folder / "soak.duckdb", embedder=HashEmbedder(64))
    counts = {"turns": 0, "retrievals": 0, "facts": 0, "saves": 0, "compressions": 0}
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
            i += 1
            delay = t_next - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        rt.flush(60)
    finally:
        rt.close()
        store.close()
    return counts


def verdict(s: Sampler, rss_slack_mb: float) -> dict[str, Any]:
    """Compare the start of the second half with the end (medians of 10 % windows)."""
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
    rss_ok = rss1 - rss0 <= max(rss_slack_mb, 0.15 * rss0)
    th_ok = th1 - th0 <= 2
    fd_ok = fd1 - fd0 <= 4
    return {
        "pass": rss_ok and th_ok and fd_ok,
        "rss_mb": {"half": rss0, "end": rss1, "max": max(s.rss), "ok": rss_ok},
        "threads": {"half": th0, "end": th1, "max": max(s.threads), "ok": th_ok},
        "open_files": {"half": fd0, "end": fd1, "max": max(s.fds), "ok": fd_ok},
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--rate", type=float, default=50.0, help="turns per second")
    ap.add_argument("--session-turns", type=int, default=500)
    ap.add_argument("--rss-slack-mb", type=float, default=48.0)
    ap.add_argument("--png", default=str(RESULTS / "soak.png"))
    args = ap.parse_args(argv)
    sampler = Sampler()
    sampler.start()
    with tempfile.TemporaryDirectory(prefix="actormem-soak-") as d:
        counts = traffic(Path(d), args.minutes * 60, args.rate, args.session_turns)
    time.sleep(1.5)
    sampler.stop.set()
    sampler.join()
    result = verdict(sampler, args.rss_slack_mb)
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
        "series": {"t": sampler.t, "rss_mb": sampler.rss, "threads": sampler.threads},
        "png": str(png),
    }
    write_results("soak", out)
    print(text)
    print(f"traffic: {counts}")
    for k in ("rss_mb", "threads", "open_files"):
        print(f"{k}: {result.get(k)}")
    print("SOAK PASS" if result["pass"] else "SOAK FAIL")
    return out


if __name__ == "__main__":
    raise SystemExit(0 if main()["verdict"]["pass"] else 1)

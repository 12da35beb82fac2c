"""The memory explorer's cost to the agent: ``add()`` with and without browsers watching.

Three set-ups, measured in rounds that alternate so a busy neighbour hits
them alike: no explorer (the baseline), the explorer with two live browsers
reading the event stream, and the explorer with one browser that opened the
stream and never reads (its socket buffers fill at once).  Each round adds
``n`` messages of ~1 KB one call at a time and times every ``add()``; the
live browsers' figure is the time until they had received every event.
Reported: median over rounds of adds/s, add p50 and p99, and each ratio to
the baseline of the same round set, with the 1-minute load average.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from actormem import MemoryRuntime, Msg
from actormem.ui import UIConfig
from benchmarks._common import pct, print_table, write_results

_BODY = "lorem ipsum dolor sit amet " * 38  # ~1 KB


def _reader(url: str, until: int, done: threading.Event, seen: list[int]) -> None:
    with httpx.stream("GET", url, timeout=120) as resp:
        for line in resp.iter_lines():
            if line.startswith("id: "):
                seen[0] = int(line[4:])
                if seen[0] >= until:
                    break
    done.set()


def _round(setup: str, n: int, folder: Path) -> dict[str, float]:
    ui = UIConfig(port=0) if setup != "baseline" else None
    rt = MemoryRuntime(session_dir=folder, ui=ui)
    readers: list[tuple[threading.Thread, threading.Event, list[int]]] = []
    stalled: socket.socket | None = None
    try:
        if setup == "live_browsers":
            assert rt.ui is not None
            for _ in range(2):
                done, seen = threading.Event(), [0]
                t = threading.Thread(
                    target=_reader, args=(rt.ui.url + "events?since=0", n, done, seen), daemon=True
                )
                t.start()
                readers.append((t, done, seen))
        elif setup == "stalled_browser":
            assert rt.ui is not None
            stalled = socket.socket()
            stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            stalled.connect(("127.0.0.1", rt.ui.port))
            stalled.sendall(
                f"GET /events?since=0 HTTP/1.1\r\nHost: 127.0.0.1:{rt.ui.port}\r\n\r\n".encode()
            )
            stalled.recv(64)
        msgs = [Msg.user(f"{i} {_BODY}") for i in range(n)]
        lat: list[float] = []
        start = time.perf_counter()
        for m in msgs:
            t0 = time.perf_counter()
            rt.add(m)
            lat.append(time.perf_counter() - t0)
        elapsed = time.perf_counter() - start
        delivered = float("nan")
        if readers:
            for _, done, _ in readers:
                done.wait(120)
            delivered = time.perf_counter() - start
            assert all(seen[0] >= n for _, _, seen in readers), "a reader missed events"
        return {
            "adds_per_s": n / elapsed,
            "add_p50_us": statistics.median(lat) * 1e6,
            "add_p99_us": pct(lat, 99) * 1e6,
            "delivered_s": delivered,
        }
    finally:
        if stalled is not None:
            stalled.close()
        rt.close()


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="small sizes (smoke run)")
    args = ap.parse_args(argv)
    n = 1_000 if args.quick else 5_000
    rounds = 2 if args.quick else 5
    setups = ["baseline", "live_browsers", "stalled_browser"]
    runs: dict[str, list[dict[str, float]]] = {s: [] for s in setups}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds):
            order = setups if r % 2 == 0 else setups[::-1]
            for s in order:
                runs[s].append(_round(s, n, Path(tmp) / f"{s}-{r}"))
    load = os.getloadavg()[0]
    med = {s: {k: statistics.median(x[k] for x in runs[s]) for k in runs[s][0]} for s in setups}
    base = med["baseline"]
    rows = []
    for s in setups:
        m = med[s]
        rows.append(
            [
                s,
                m["adds_per_s"],
                m["adds_per_s"] / base["adds_per_s"],
                m["add_p50_us"],
                m["add_p99_us"],
                m["add_p99_us"] / base["add_p99_us"],
                "-" if m["delivered_s"] != m["delivered_s"] else f"{m['delivered_s']:.2f} s",
            ]
        )
    print_table(
        f"add() with the explorer watching ({n:,} x 1 KB messages, median of {rounds} rounds, "
        f"load {load:.2f})",
        ["setup", "adds/s", "x baseline", "add p50 us", "add p99 us", "p99 x baseline", "all seen"],
        rows,
    )
    res = {"n": n, "rounds": rounds, "load_1min": load, "median": med, "runs": runs}
    write_results("bench_ui", res)
    return res


if __name__ == "__main__":
    main()

"""The live feed: order, bounded memory, and a slow browser never reaching the agent."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable
from pathlib import Path

import httpx

from actormem import MemoryRuntime, Msg
from actormem.events import MessageAdded
from actormem.ui import LiveFeed, UIConfig, describe


def _sse(url: str, stop: threading.Event, until_seq: int, timeout: float = 60) -> list[dict]:  # type: ignore[type-arg]
    """Read data events of an SSE stream until ``until_seq`` (or the stream ends)."""
    got: list[dict] = []  # type: ignore[type-arg]
    with httpx.stream("GET", url, timeout=timeout) as resp:
        assert resp.headers["content-type"].startswith("text/event-stream")
        for line in resp.iter_lines():
            if line.startswith("data: {") and '"seq"' in line:
                ev = json.loads(line[6:])
                got.append(ev)
                if ev["seq"] >= until_seq:
                    break
            if stop.is_set():
                break
    return got


def _until(cond: Callable[[], bool], timeout: float = 60.0) -> None:
    """Wait for ``cond`` (checked every 10 ms); fail after ``timeout`` seconds."""
    tick = threading.Event()
    for _ in range(int(timeout * 100)):
        if cond():
            return
        tick.wait(0.01)
    raise AssertionError("condition not reached in time")


def _events_added(rt: MemoryRuntime, n: int) -> threading.Event:
    """An Event set once ``n`` MessageAdded events were published (waits without sleeping)."""
    done = threading.Event()
    count = [0]

    def on(e: object) -> None:
        count[0] += 1
        if count[0] >= n:
            done.set()

    rt.subscribe(on, MessageAdded)
    return done


def test_ring_is_bounded_and_reports_what_a_reader_missed(tmp_path: Path) -> None:
    with MemoryRuntime(session_dir=tmp_path) as rt:
        feed = LiveFeed(rt, ring=10)
        done = _events_added(rt, 25)
        rt.add([Msg.user(f"m{i}") for i in range(25)])
        assert done.wait(60)
        # The feed's own delivery thread may still be catching up: wait for its last event.
        _until(lambda: feed.seq >= 25)
        items, missed = feed.since(0)
        assert [s for s, _ in items] == list(range(16, 26)) and missed == 15
        items, missed = feed.since(20)
        assert [s for s, _ in items] == [21, 22, 23, 24, 25] and missed == 0
        last = json.loads(items[-1][1])
        assert last["type"] == "MessageAdded" and last["data"]["msg"]["content"][0]["text"] == "m24"
        assert last["summary"] == "#24 user: m24"
        feed.close()


def test_every_browser_gets_every_event_once_in_order(tmp_path: Path) -> None:
    with MemoryRuntime(session_dir=tmp_path, ui=UIConfig(port=0)) as rt:
        assert rt.ui is not None
        url = rt.ui.url + "events?since=0"
        stop = threading.Event()
        results: list[list[dict]] = [[], []]  # type: ignore[type-arg]

        def read(i: int) -> None:
            results[i] = _sse(url, stop, 300)

        readers = [threading.Thread(target=read, args=(i,)) for i in range(2)]
        for t in readers:
            t.start()
        for i in range(300):
            rt.add(Msg.user(f"message {i}"))
        for t in readers:
            t.join(90)
        for got in results:
            assert [e["seq"] for e in got] == list(range(1, 301))
            assert [e["data"]["index"] for e in got] == list(range(300))


def test_a_stalled_browser_never_slows_the_agent(tmp_path: Path) -> None:
    """A client that opens the stream and never reads: the agent's adds all return,
    the feed keeps up (its ring stays bounded) and another browser still gets
    every new event."""
    n = 3000
    big = "x" * 4000  # ~4 KB per event: the stalled socket's buffers fill quickly
    with MemoryRuntime(session_dir=tmp_path, ui=UIConfig(port=0, ring=200)) as rt:
        assert rt.ui is not None
        port = rt.ui.port
        stalled = socket.socket()
        stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stalled.connect(("127.0.0.1", port))
        stalled.sendall(f"GET /events?since=0 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        head = stalled.recv(256)
        assert head.startswith(b"HTTP/1.1 200")
        try:
            done = _events_added(rt, n)
            for i in range(n):
                rt.add(Msg.user(f"{i} {big}"))  # must return although a browser is stuck
            assert rt.size() == n
            assert done.wait(60)
            feed = rt.ui.feed
            assert feed is not None
            _until(lambda: feed.seq >= n)  # the feed kept up with the agent
            assert len(feed.recent(10_000)) == 200  # and its memory stayed bounded
            # A second browser still gets the newest events at once.
            stop = threading.Event()
            got = _sse(rt.ui.url + f"events?since={n - 5}", stop, n)
            assert [e["seq"] for e in got] == list(range(n - 4, n + 1))
            # and one that is further behind than the ring is told what it missed
            with httpx.stream("GET", rt.ui.url + "events?since=1", timeout=60) as resp:
                lines = resp.iter_lines()
                first = [next(lines) for _ in range(4)]
            assert "event: gap" in first and f"data: {n - 200 - 1}" in first
        finally:
            stalled.close()


def test_closing_the_agent_ends_open_streams(tmp_path: Path) -> None:
    rt = MemoryRuntime(session_dir=tmp_path, ui=UIConfig(port=0))
    assert rt.ui is not None
    lines: list[str] = []
    opened = threading.Event()

    def read() -> None:
        with httpx.stream("GET", rt.ui.url + "events", timeout=60) as resp:  # type: ignore[union-attr]
            for line in resp.iter_lines():
                lines.append(line)
                if line.startswith("event: context"):
                    opened.set()

    t = threading.Thread(target=read)
    t.start()
    assert opened.wait(60)
    rt.close()
    t.join(60)
    assert not t.is_alive() and "event: closed" in lines


def test_each_event_type_has_a_readable_summary() -> None:
    from actormem.events import (
        ContextCompressed,
        FactReconciled,
        MemoryRecorded,
        SessionSaved,
    )

    cases = {
        ContextCompressed(
            pass_id="p",
            strategy="summarize_rounds",
            tokens_before=1000,
            tokens_after=250,
            messages_replaced=12,
        ): ("summarize_rounds: 1,000 → 250 tokens (-75%), 12 message(s) replaced", "compress"),
        FactReconciled(op="UPDATE", memory_id="m", old="lives in Paris", new="lives in Berlin"): (
            "UPDATE: lives in Paris → lives in Berlin",
            "memory",
        ),
        MemoryRecorded(ids=("a",), added=1, turns=1): (
            "1 turn(s) recorded: +1 added, 0 updated, 0 deleted, 0 kept",
            "memory",
        ),
        SessionSaved(session_id="s", path="p", nbytes=2048, duration_ms=1.0): (
            "session 's' saved (2,048 bytes)",
            "session",
        ),
    }
    for event, expected in cases.items():
        assert describe(event) == expected

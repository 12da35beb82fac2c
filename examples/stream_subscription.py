"""Subscribe to the memory's event stream and watch compression and recall live.

Every actor publishes typed msgspec events; ``runtime.events`` is a reactivex
Observable of all of them, so reactivex operators work on it. Each
subscription runs on its own thread: a slow or failing subscriber never
blocks the memory.

Run: python examples/stream_subscription.py
"""

from __future__ import annotations

import tempfile
import threading
from pathlib import Path

from reactivex import operators as ops

from actormem import Event, MemoryRuntime, MessageAdded, Msg, encode_event
from actormem.compress import AutoContextConfig
from actormem.events import ContextCompressed, MemoryRecorded, MemoryRetrieved

folder = Path(tempfile.mkdtemp(prefix="actormem-stream-"))
cfg = AutoContextConfig.for_window(8192)
batched = threading.Event()


def live(e: Event) -> None:
    """Print what the memory does, as it happens."""
    if isinstance(e, ContextCompressed):
        print(f"[compressed] {e.strategy}: {e.tokens_before} -> {e.tokens_after} tokens")
    elif isinstance(e, MemoryRecorded):
        print(f"[recorded]   {e.turns} turn(s), {e.added} added, {e.updated} updated")
    elif isinstance(e, MemoryRetrieved):
        print(f"[retrieved]  {e.query!r}: {len(e.hit_ids)} hit(s) in {e.latency_ms:.2f} ms")


with MemoryRuntime(session_dir=folder, autocontext=cfg, store=folder / "memory.duckdb") as rt:
    rt.subscribe(live, ContextCompressed, MemoryRecorded, MemoryRetrieved)
    # Every event as a JSON line, e.g. for a log pipeline (first 3 only here).
    rt.events.pipe(ops.take(3)).subscribe(lambda e: print("json:", encode_event(e).decode()[:90]))
    # Reactivex operators: user messages, batched in tens.
    rt.events.pipe(
        ops.filter(lambda e: isinstance(e, MessageAdded) and e.msg.role == "user"),
        ops.buffer_with_count(10),
        ops.take(1),
    ).subscribe(lambda batch: (print(f"[batch]      {len(batch)} user messages"), batched.set()))

    for day in range(1, 31):
        turn = [
            Msg.user(f"Day {day}: I ran {day + 3} km along the river in {20 + day % 9} minutes."),
            Msg.assistant(f"Logged day {day}: {day + 3} km. " + "Keep hydrated and stretch. " * 20),
        ]
        rt.add(turn)
        rt.record(turn)
    rt.compress_now()
    rt.flush()
    rt.retrieve("how far did I run on day 12?")
    assert batched.wait(5)

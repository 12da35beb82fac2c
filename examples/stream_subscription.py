"""Subscribe to the memory's event stream and watch it live.

Every actor publishes typed msgspec events; ``runtime.events`` is a reactivex
Observable of all of them, so reactivex operators work on it. Each
subscription runs on its own thread: a slow or failing subscriber never
blocks the memory.

Run: python examples/stream_subscription.py
"""

from __future__ import annotations

import tempfile
import threading

from reactivex import operators as ops

from actormem import MemoryRuntime, MessageAdded, Msg, encode_event

done = threading.Event()

with MemoryRuntime(session_dir=tempfile.mkdtemp()) as rt:
    # 1. Every event, as a JSON line (what you would ship to a log pipeline).
    rt.events.subscribe(lambda e: print("event:", encode_event(e).decode()[:100]))

    # 2. Only user messages, batched in threes with a reactivex operator.
    rt.events.pipe(
        ops.filter(lambda e: isinstance(e, MessageAdded) and e.msg.role == "user"),
        ops.map(lambda e: e.msg.text),  # type: ignore[attr-defined]
        ops.buffer_with_count(3),
    ).subscribe(lambda batch: (print("batch of user messages:", batch), done.set()))

    for i in range(3):
        rt.add(Msg.user(f"question {i}"))
        rt.add(Msg.assistant(f"answer {i}"))
    assert done.wait(5), "the batch did not arrive"

"""The remote event buffer: numbered, ordered, kept for connected subscribers only.

In this process (the actor's side of ``actormem/cluster/_events.py``); the
cluster test has a subscriber in another process.
"""

from __future__ import annotations

import threading

import pytest

from actormem.cluster._events import EventBuffer, EventsLostError
from actormem.events import MessageAdded
from actormem.messages import Msg


def _event(i: int) -> MessageAdded:
    return MessageAdded(source="short_term", msg=Msg.user(f"m{i}"), index=i, version=i)


def _texts(items: list[tuple[int, MessageAdded]]) -> list[str]:
    return [e.msg.text for _, e in items]


def test_a_subscriber_gets_everything_after_it_registered_in_order() -> None:
    buf = EventBuffer()
    buf.append(_event(-1))  # before: not for it
    sub, after = buf.register()
    for i in range(5):
        buf.append(_event(i))
    items = buf.poll(sub, after, 0)
    assert _texts(items) == [f"m{i}" for i in range(5)]
    assert [s for s, _ in items] == list(range(after + 1, after + 6))
    assert buf.poll(sub, items[-1][0], 0) == []


def test_nothing_is_dropped_while_a_slow_subscriber_is_connected() -> None:
    buf = EventBuffer(limit=1000)
    slow, s_after = buf.register()
    fast, f_after = buf.register()
    for i in range(300):
        buf.append(_event(i))
        f_after = buf.poll(fast, f_after, 0)[-1][0]  # the fast one keeps acknowledging
    got: list[str] = []
    while len(got) < 300:
        items = buf.poll(slow, s_after, 0)
        got += _texts(items)
        s_after = items[-1][0]
    assert got == [f"m{i}" for i in range(300)]


def test_a_subscriber_past_the_limit_is_told_it_lost_events() -> None:
    buf = EventBuffer(limit=10)
    sub, after = buf.register()
    for i in range(25):
        buf.append(_event(i))
    with pytest.raises(EventsLostError, match="were dropped"):
        buf.poll(sub, after, 0)
    with pytest.raises(EventsLostError, match="not connected"):
        buf.poll(sub, after, 0)


def test_events_are_kept_only_for_connected_subscribers() -> None:
    buf = EventBuffer(disconnect_after=0.0)
    sub, after = buf.register()
    buf.append(_event(1))
    with pytest.raises(EventsLostError, match="not connected"):
        buf.poll(sub, after, 0)  # it did not poll within disconnect_after
    assert buf.connected() == 0
    keep = EventBuffer()
    one, _ = keep.register()
    keep.append(_event(1))
    keep.unregister(one)
    assert keep.connected() == 0
    assert len(keep._events) == 0  # nobody needs it


def test_a_poll_waits_for_the_next_event() -> None:
    buf = EventBuffer()
    sub, after = buf.register()
    started = threading.Event()
    out: list[list[tuple[int, MessageAdded]]] = []

    def poll() -> None:
        started.set()
        out.append(buf.poll(sub, after, 60))

    t = threading.Thread(target=poll)
    t.start()
    started.wait(10)
    buf.append(_event(7))
    t.join(60)
    assert _texts(out[0]) == ["m7"]


def test_a_poll_waiting_when_its_subscriber_is_unregistered_says_so() -> None:
    buf = EventBuffer()
    sub, after = buf.register()
    waiting = threading.Event()
    out: list[BaseException] = []

    def poll() -> None:
        waiting.set()
        try:
            buf.poll(sub, after, 60)
        except EventsLostError as exc:
            out.append(exc)

    t = threading.Thread(target=poll)
    t.start()
    waiting.wait(10)
    buf.unregister(sub)  # disposed as its poll waits (or just before it began)
    buf.append(_event(1))  # nobody keeps it: it is dropped at once
    t.join(60)
    assert not t.is_alive()
    # told it is not connected (the poll used to fail on the emptied buffer instead)
    assert len(out) == 1
    assert "ended while it waited" in str(out[0]) or "not connected" in str(out[0])


def test_after_the_end_each_subscriber_gets_what_is_left_then_the_end() -> None:
    buf = EventBuffer()
    sub, after = buf.register()
    for i in range(3):
        buf.append(_event(i))
    buf.end()
    assert not buf.drained(0)  # the subscriber has not taken its events yet
    items = buf.poll(sub, after, 60)
    assert _texts(items) == ["m0", "m1", "m2"]
    end = buf.poll(sub, items[-1][0], 60)  # at once, not after the wait
    assert end == [(items[-1][0] + 1, None)]
    # until the subscriber confirms it has the end, a stop must not end the actor:
    # Ray fails an answer the ending actor has not sent yet
    assert not buf.drained(0)
    buf.unregister(sub)
    assert buf.drained(0) and buf.connected() == 0
    assert buf.register() == ("", items[-1][0])  # after the end: complete, nothing kept
    assert buf.connected() == 0

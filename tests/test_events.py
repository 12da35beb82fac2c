from __future__ import annotations

import msgspec
import pytest

from actormem import events as ev
from actormem.messages import Msg


def _samples() -> list[ev.Event]:
    m = Msg.user("hi")
    return [
        ev.MessageAdded(source="short_term", msg=m, index=0, version=1),
        ev.MessagesDeleted(ids=("a",), version=2),
        ev.MemoryCleared(count=3, version=4),
        ev.MessagesReplaced(removed_ids=("a",), added_ids=("b",), version=5, reason="x"),
        ev.ActorRestarted(actor="short_term", error="boom", restarts=1),
        ev.SessionSaved(session_id="s", path="/p", nbytes=1, duration_ms=1.5),
        ev.ContextCompressed(
            pass_id="p",
            strategy="offload",
            tokens_before=10,
            tokens_after=5,
            messages_replaced=2,
            offload_ids=("o",),
        ),
        ev.MemoryRetrieved(query="q", hit_ids=("m",), scores=(0.5,), latency_ms=1.0),
        ev.MaintenanceRan(report={"decayed": 3}),
    ]


@pytest.mark.parametrize("event", _samples(), ids=lambda e: type(e).__name__)
def test_event_round_trip_is_typed(event: ev.Event) -> None:
    data = ev.encode_event(event)
    assert msgspec.json.decode(data)["event"] == type(event).__name__
    assert ev.decode_event(data) == event


def test_unknown_event_tag_is_refused() -> None:
    with pytest.raises(msgspec.ValidationError):
        ev.decode_event(b'{"event": "Nope"}')


def test_a_slow_subscriber_is_warned_about_at_each_power_of_ten_and_loses_nothing() -> None:
    """The README's "a warning is logged from 10,000 pending": a subscriber
    held on its first event while 20,480 more are published gets one
    ``stream.subscriber_backlog`` warning at 10,000 (the next at 100,000),
    then receives every event in order; a subscriber whose filter raises is
    logged as ``stream.filter_error`` and skips that event only."""
    import threading

    from structlog.testing import capture_logs

    from actormem.streams import EventBus

    bus = EventBus()
    release, first = threading.Event(), threading.Event()
    got: list[int] = []

    def slow(e: ev.Event) -> None:
        first.set()
        assert release.wait(60)
        got.append(int(e.source))

    filtered: list[int] = []

    def picky(e: ev.Event) -> bool:
        if e.source == "3":
            raise ValueError("bad filter")
        return True

    bus.observable(name="slow").subscribe(slow)
    bus.observable(picky, name="picky").subscribe(lambda e: filtered.append(int(e.source)))
    with capture_logs() as logs:
        bus.publish(ev.Event(source="0"))
        assert first.wait(60)
        for i in range(1, 20_481):
            bus.publish(ev.Event(source=str(i)))
        release.set()
        bus.close(timeout=60)
    # ("picky" may lag by 10,000 too while the loop publishes: not asserted)
    backlog = [
        e for e in logs if e["event"] == "stream.subscriber_backlog" and e["subscriber"] == "slow"
    ]
    assert [e["log_level"] for e in backlog] == ["warning"]
    assert backlog[0]["pending"] >= 10_000
    assert got == list(range(20_481))
    assert filtered == [i for i in range(20_481) if i != 3]
    assert [e["subscriber"] for e in logs if e["event"] == "stream.filter_error"] == ["picky"]

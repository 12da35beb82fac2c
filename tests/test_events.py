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

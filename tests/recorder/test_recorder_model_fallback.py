"""A model never makes memory worse than no model, over a real HTTP model server.

The model is the strict OpenAI-compatible test server on 127.0.0.1 with a
scripted brain (the only fake: what the model says).  Reconciliation
requests are told apart from extraction requests by their system prompt.
An unusable reply after its retry gives way to the offline rules for that
batch and a ``ModelFallback`` event; a fact, or a reconciliation text, that
the conversation does not support is never stored.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from actormem import MemoryRuntime, Msg, RecorderConfig
from actormem.events import Event, ModelFallback
from actormem.models.embedders import HashEmbedder
from actormem.models.openai import OpenAIChatModel
from actormem.recorder import RECONCILE_PROMPT
from tests._strict_openai import Answer, Request, StrictOpenAIServer

CFG = RecorderConfig(batch_seconds=0.02, idle_seconds=None, record_episodes=False)
SAID = "Hi! I'm Ada, I live in Porto and I'm allergic to peanuts."
OFFLINE = {"User's name is Ada", "User lives in Porto", "User is allergic to peanuts"}


class Script:
    """Replies per kind of request, in order; the last one repeats."""

    def __init__(self, extraction: list[str], reconciliation: list[str] | None = None) -> None:
        self.replies = {"extraction": list(extraction), "reconciliation": reconciliation or []}
        self.asked = {"extraction": 0, "reconciliation": 0}

    def __call__(self, req: Request) -> Answer:
        reconcile = RECONCILE_PROMPT.splitlines()[0] in req.prompt_text
        kind = "reconciliation" if reconcile else "extraction"
        replies = self.replies[kind]
        n = self.asked[kind]
        self.asked[kind] += 1
        return Answer(text=replies[min(n, len(replies) - 1)] if replies else "{}")


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[[Script], tuple[MemoryRuntime, list[Event]]]]:
    servers: list[StrictOpenAIServer] = []
    runtimes: list[MemoryRuntime] = []

    def start(script: Script) -> tuple[MemoryRuntime, list[Event]]:
        srv = StrictOpenAIServer(script).start()
        servers.append(srv)
        rt = MemoryRuntime(
            session_dir=tmp_path / "s",
            store=tmp_path / "m.duckdb",
            embedder=HashEmbedder(64),
            model=OpenAIChatModel(srv.url, "small", max_retries=0),
            recorder=CFG,
        )
        runtimes.append(rt)
        events: list[Event] = []
        rt.subscribe(events.append)
        return rt, events

    yield start
    for rt in runtimes:
        rt.close()
    for srv in servers:
        srv.close()


def _turn(text: str) -> list[Msg]:
    return [Msg.user(text), Msg.assistant("Noted.")]


def _live(rt: MemoryRuntime) -> set[str]:
    assert rt.store is not None
    return {m.content for m in rt.store.list(rt.namespace)}


def _fallbacks(events: list[Event]) -> list[ModelFallback]:
    end = time.monotonic() + 30
    while time.monotonic() < end:  # events are delivered on the bus thread
        found = [e for e in list(events) if isinstance(e, ModelFallback)]
        if found:
            return found
        time.sleep(0.01)
    return []


@pytest.mark.parametrize(
    "replies",
    [
        ["Sure! Here are the facts you asked for.", "I cannot comply."],
        ['{"facts": "Ada, Porto"}', '{"memories": []}'],
        ["[1, 2, 3]", '{"facts": [42]}'],
        ['{"facts": [{"fact": "User lives in Porto"}]}', '{"facts": [{"content": ""}]}'],
    ],
    ids=["junk", "wrong-shape", "wrong-items", "items-without-content"],
)
def test_an_unusable_extraction_gives_the_offline_facts_and_an_event(
    serve: Callable[[Script], tuple[MemoryRuntime, list[Event]]], replies: list[str]
) -> None:
    script = Script(replies)
    rt, events = serve(script)
    rt.record(_turn(SAID))
    rt.flush()
    assert script.asked["extraction"] == 2  # the reply, then its one retry
    assert _live(rt) == OFFLINE  # what the rules find without a model
    fallbacks = _fallbacks(events)
    assert [f.component for f in fallbacks] == ["recorder.extraction"]
    assert "offline" in fallbacks[0].fallback and fallbacks[0].error


def test_facts_the_turn_does_not_support_are_dropped(
    serve: Callable[[Script], tuple[MemoryRuntime, list[Event]]],
) -> None:
    reply = json.dumps(
        {
            "facts": [
                {"content": "User lives in Porto"},
                {"content": "User is allergic to peanuts"},
                {"content": "User has a cat named Whiskers"},  # nobody said it
                {"content": "User is 52 years old"},  # a number nobody said
                {"content": "User works at Google as a pilot"},
            ]
        }
    )
    rt, events = serve(Script([reply]))
    rt.record(_turn(SAID))
    rt.flush()
    assert _live(rt) == {"User lives in Porto", "User is allergic to peanuts"}
    assert not [e for e in events if isinstance(e, ModelFallback)]  # a usable reply


MOVED = "We moved last month, I live in Braga now."
FIRST = json.dumps({"facts": [{"content": "User lives in Porto"}]})
SECOND = json.dumps({"facts": [{"content": "User lives in Braga"}]})


@pytest.mark.parametrize(
    "reply",
    [
        "Let me think about how these facts relate.",
        '{"memory": "UPDATE"}',
        '[{"fact": 0, "event": "MERGE", "id": 0}]',
        '{"memory": [{"fact": 0, "event": "UPDATE", "id": 7, "text": "User lives in Braga"}]}',
        '{"memory": [{"fact": 3, "event": "ADD"}]}',
        '{"memory": [{"fact": 0, "event": "DELETE"}]}',
    ],
    ids=["junk", "wrong-shape", "unknown-event", "unknown-id", "unknown-fact", "no-id"],
)
def test_an_unusable_reconciliation_gives_the_offline_path_and_an_event(
    serve: Callable[[Script], tuple[MemoryRuntime, list[Event]]], reply: str
) -> None:
    script = Script([FIRST, SECOND], [reply])
    rt, events = serve(script)
    rt.record(_turn("I live in Porto."))
    rt.flush()
    assert script.asked["reconciliation"] == 0  # nothing stored yet: nothing to reconcile
    rt.record(_turn(MOVED))
    rt.flush()
    assert script.asked["reconciliation"] == 2  # the reply, then its one retry
    assert "User lives in Braga" in _live(rt)  # the offline rules read the batch
    fallbacks = _fallbacks(events)
    assert [f.component for f in fallbacks] == ["recorder.reconciliation"]


@pytest.mark.parametrize(
    ("text", "stored"),
    [
        # made up: a husband and a boat nobody mentioned -> the fact's own text
        ("User lives in Braga with her husband Tomasz on a yacht", "User lives in Braga"),
        # a rewrite from the turn and the memory it updates is kept as written
        ("User moved from Porto to Braga last month", "User moved from Porto to Braga last month"),
    ],
    ids=["invented", "supported"],
)
def test_a_reconciliation_text_the_turn_does_not_support_is_not_stored(
    serve: Callable[[Script], tuple[MemoryRuntime, list[Event]]], text: str, stored: str
) -> None:
    update = json.dumps({"memory": [{"fact": 0, "event": "UPDATE", "id": 0, "text": text}]})
    rt, events = serve(Script([FIRST, SECOND], [update]))
    rt.record(_turn("I live in Porto."))
    rt.flush()
    rt.record(_turn(MOVED))
    rt.flush()
    assert _live(rt) == {stored}  # the Porto memory was updated in place
    assert rt.store is not None
    ops = [h.op for h in rt.store.history(rt.namespace)]
    assert ops.count("UPDATE") == 1
    assert not [e for e in events if isinstance(e, ModelFallback)]

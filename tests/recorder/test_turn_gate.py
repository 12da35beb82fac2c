"""Memory model work never delays the next turn (a server that answers one request at a time).

The strict server runs one generation at a time, like llama.cpp's, and stops a
streamed generation when another request waits.  Extraction answers are long
(~480 tokens at 5 ms each); the agent's are short.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from actormem import MemoryRuntime, Msg, ReActAgent, RecorderConfig
from actormem.events import Event, MemoryRecorded, ModelFallback
from actormem.models.embedders import HashEmbedder
from actormem.models.gate import TurnGate, TurnStartedError, call_between_turns
from actormem.models.openai import OpenAIChatModel
from actormem.store import DuckDBStore, Namespace
from tests._strict_openai import Answer, Request, strict_server

NS = Namespace(user_id="ada", agent_id="chat")
FACTS = json.dumps({"facts": [{"content": "The user's name is Ada", "importance": 0.8}]})
LONG_FACTS = FACTS + " " * 1900  # about 480 tokens of generation


def is_extraction(req: Request) -> bool:
    return "Conversation:" in req.last_user


def make_brain() -> Callable[[Request], Answer]:
    """The first extraction is long (~2.4 s of generation), later ones are short."""
    extractions = 0

    def brain(req: Request) -> Answer:
        nonlocal extractions
        if is_extraction(req):
            extractions += 1
            return Answer(text=LONG_FACTS if extractions == 1 else FACTS, token_delay=0.005)
        return Answer(text=f"ok: {req.last_user[:30]}")

    return brain


@pytest.mark.parametrize("gated", [True, False], ids=["yield_to_turns", "no_gate"])
def test_extraction_gives_way_to_the_next_turn(tmp_path: Path, gated: bool) -> None:
    events: list[Event] = []
    with strict_server(make_brain(), serial=True) as srv:
        model = OpenAIChatModel(srv.url, "m", max_retries=0)
        store = DuckDBStore(tmp_path / "m.duckdb", embedder=HashEmbedder())
        cfg = RecorderConfig(batch_seconds=0.01, yield_to_turns=gated, idle_seconds=None)
        with MemoryRuntime(
            session_dir=tmp_path / "s", store=store, namespace=NS, model=model, recorder=cfg
        ) as rt:
            rt.events.subscribe(events.append)
            agent = ReActAgent("bot", model, rt)
            agent.reply("My name is Ada.")
            # The extraction of turn 1 is now generating on the server.
            assert srv.wait_requests(2)
            assert is_extraction(Request(srv.requests[1]["messages"], None, None, None, True, {}))
            second = agent.reply("What is my name?")
            assert second.text.startswith("ok: What is my name?")
            rt.flush(60)
        store.close()
    done = [g for g in srv.generations]
    turn2 = next(i for i, g in enumerate(done) if g[0].startswith("What is my name?"))
    first_extraction = next(g for g in done if g[0].startswith("Conversation:"))
    if gated:
        # Turn 2 did not wait for the extraction: it was stopped after a few tokens,
        # and extraction ran again after the turn.
        assert first_extraction[1] < first_extraction[2] // 2
        assert srv.interrupted >= 1
        assert any(g[0].startswith("Conversation:") for g in done[turn2 + 1 :])
        assert srv.requests[1]["stream"] is True
    else:
        # The old behaviour, for contrast: turn 2 queued behind the whole extraction.
        assert first_extraction[1] == first_extraction[2]
        assert done.index(first_extraction) < turn2
    assert srv.max_concurrent == 1 and srv.refused == []
    assert any(isinstance(e, MemoryRecorded) for e in events)


def test_a_call_abandoned_twice_falls_back_to_offline_rules(tmp_path: Path) -> None:
    """The recorder's retry also gives way: the batch then goes to the offline extractor."""
    gate = TurnGate()
    started = threading.Event()

    def slow(req: Request) -> Answer:
        started.set()
        return Answer(text=LONG_FACTS, token_delay=0.01)

    with strict_server(slow, serial=True) as srv:
        model = OpenAIChatModel(srv.url, "m", max_retries=0)
        box: dict[str, BaseException] = {}

        def call() -> None:
            try:
                call_between_turns(model, [Msg.user("x")], 30, gate)
            except BaseException as exc:
                box["error"] = exc

        worker = threading.Thread(target=call)
        worker.start()
        assert started.wait(60)
        gate.begin()  # the user's next turn
        worker.join(60)
        assert isinstance(box.get("error"), TurnStartedError)
        assert "a conversation turn started" in str(box["error"])
        # A call waits while a turn is active; it gives up after its timeout.
        with pytest.raises(TurnStartedError, match="no pause between conversation turns"):
            call_between_turns(model, [Msg.user("x")], 0.05, gate)
        gate.end()

    events: list[Event] = []
    with strict_server(make_brain(), serial=True) as srv:
        model = OpenAIChatModel(srv.url, "m", max_retries=0)
        store = DuckDBStore(tmp_path / "m.duckdb", embedder=HashEmbedder())
        cfg = RecorderConfig(batch_seconds=0.01, idle_seconds=None, model_retries=0)
        with MemoryRuntime(
            session_dir=tmp_path / "s", store=store, namespace=NS, model=model, recorder=cfg
        ) as rt:
            rt.events.subscribe(events.append)
            agent = ReActAgent("bot", model, rt)
            agent.reply("My name is Ada and I live in Porto.")
            assert srv.wait_requests(2)
            agent.reply("Thanks.")
            rt.flush(60)
            fallbacks = [e for e in events if isinstance(e, ModelFallback)]
            assert fallbacks and fallbacks[0].component == "recorder.extraction"
            assert "conversation turn started" in fallbacks[0].error
            # The offline rules still stored the facts of that turn.
            hits = rt.retrieve("where does the user live", 10)
            assert any("Porto" in h.memory.content for h in hits)
        store.close()

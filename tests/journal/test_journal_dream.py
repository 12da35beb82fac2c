"""Deep dream: MEMORY.md from consolidated memory, history for every change, idempotence."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from actormem import Msg
from actormem.events import DreamCompleted, Event, ModelFallback
from actormem.journal import CORE_TAG, PINNED_TAG, parse_memory_md
from actormem.models.scripted import ScriptedModel
from actormem.store import NewMemory

from .conftest import NS, MakeRuntime


def _tell(rt: Any, *lines: str) -> None:
    for line in lines:
        turn = [Msg.user(line), Msg.assistant("Noted.")]
        rt.add(turn)
        rt.record(turn)
    rt.flush()


def _wait(seen: list[Event], kind: type, n: int = 1) -> list[Any]:
    deadline = time.monotonic() + 60
    while sum(isinstance(e, kind) for e in seen) < n and time.monotonic() < deadline:
        time.sleep(0.01)
    return [e for e in seen if isinstance(e, kind)]


def test_dream_writes_memory_md_with_history_and_is_idempotent(make_runtime: MakeRuntime) -> None:
    rt = make_runtime()
    store = rt.store
    assert store is not None and rt.journal is not None
    seen: list[Event] = []
    rt.subscribe(seen.append, DreamCompleted)
    _tell(rt, "Hi, I'm Ada. I live in Lisbon.", "I'm allergic to peanuts.")
    report = rt.dream()
    assert not report.skipped and report.items >= 3 and len(report.promoted) == report.items
    md = rt.journal.path("MEMORY.md").read_text()
    items = parse_memory_md(md)
    assert {i.memory_id for i in items} == set(report.promoted)
    assert any("allergic to peanuts" in i.text for i in items)
    for mid in report.promoted:
        rec = store.get(NS, mid)
        assert rec is not None and CORE_TAG in rec.tags
        assert any(h.reason == "dream: into MEMORY.md" for h in store.history(NS, mid))
    diary = rt.journal.path("DREAMS.md").read_text()
    assert "## Dream" in diary and all(f"id:{mid}" in diary for mid in report.promoted)

    history = len(store.history(NS))
    again = rt.dream()  # unchanged input: nothing is written
    assert again.skipped and again.changes == 0
    assert len(store.history(NS)) == history
    assert rt.journal.path("MEMORY.md").read_text() == md
    assert rt.journal.path("DREAMS.md").read_text() == diary
    events = _wait(seen, DreamCompleted, 2)
    assert [e.skipped for e in events] == [False, True]

    _tell(rt, "Actually I live in Porto now.")  # new input: the dream runs again
    third = rt.dream()
    assert not third.skipped
    texts = [i.text for i in parse_memory_md(rt.journal.path("MEMORY.md").read_text())]
    assert "User lives in Porto" in texts and "User lives in Lisbon" not in texts


def test_consolidation_never_deletes_without_history(make_runtime: MakeRuntime) -> None:
    rt = make_runtime()
    store = rt.store
    assert store is not None and rt.journal is not None
    store.add_many(
        NS,
        [
            NewMemory(content="User likes green tea", importance=0.6),
            NewMemory(content="User really likes green tea", importance=0.5),
            NewMemory(content="User works as a pilot", importance=0.7),
        ],
        dedup=False,
    )
    report = rt.dream()
    assert len(report.merged) == 1
    gone = [r for r in store.list(NS, limit=100, include_deleted=True) if not r.alive]
    assert gone
    for rec in gone:
        assert any(
            h.op in ("MERGE", "DELETE")
            for h in store.history(NS)
            if h.memory_id == rec.superseded_by or h.memory_id == rec.id
        )
    assert "merged:" in rt.journal.path("DREAMS.md").read_text()
    assert rt.dream().skipped  # consolidated input is stable


def test_hand_edited_memory_md_is_imported(make_runtime: MakeRuntime) -> None:
    rt = make_runtime()
    store = rt.store
    assert store is not None and rt.journal is not None
    _tell(rt, "I live in Lisbon.", "I'm allergic to peanuts.")
    rt.dream()
    path = rt.journal.path("MEMORY.md")
    items = parse_memory_md(path.read_text())
    lisbon = next(i for i in items if "Lisbon" in i.text)
    peanuts = next(i for i in items if "peanuts" in i.text)
    text = path.read_text().replace("User lives in Lisbon", "User lives in Lisbon, near the river")
    text = "\n".join(ln for ln in text.splitlines() if "peanuts" not in ln)
    text += "\n## Preferences\n- User prefers aisle seats\n"
    path.write_text(text)

    report = rt.dream()
    assert lisbon.memory_id in report.rewritten and peanuts.memory_id in report.dropped
    assert report.created
    edited = store.get(NS, lisbon.memory_id or "")
    assert edited is not None and edited.content == "User lives in Lisbon, near the river"
    assert PINNED_TAG in edited.tags
    assert any(h.reason == "hand-edited MEMORY.md" for h in store.history(NS, edited.id))
    dropped = store.get(NS, peanuts.memory_id or "")
    assert dropped is not None and CORE_TAG not in dropped.tags  # still in the store
    aisle = store.get(NS, report.created[0])
    assert aisle is not None and aisle.kind == "preference" and PINNED_TAG in aisle.tags
    final = parse_memory_md(path.read_text())
    assert {i.text for i in final} >= {
        "User lives in Lisbon, near the river",
        "User prefers aisle seats",
    }
    assert all(i.memory_id for i in final)  # rewritten with ids
    assert not any("peanuts" in i.text for i in final)


def test_model_dream_and_fallback(make_runtime: MakeRuntime) -> None:
    answers: list[str] = []

    def dreamer(messages: Sequence[Msg], tools: Any) -> str:
        prompt = messages[-1].text
        if "MEMORY.md" in messages[0].text and answers:
            return answers.pop(0)
        return "Noted." if "Candidate" not in prompt else "{}"

    rt = make_runtime(model=ScriptedModel(dreamer, cycle=True))
    store = rt.store
    assert store is not None and rt.journal is not None
    seen: list[Event] = []
    rt.subscribe(seen.append, ModelFallback)
    rec = store.add(NS, "User lives in Lisbon")
    answers.append(
        json.dumps(
            {
                "items": [
                    {"id": rec.id, "kind": "fact", "text": "User lives in Lisbon"},
                    {"id": None, "kind": "procedure", "text": "Confirm bookings by email"},
                ]
            }
        )
    )
    report = rt.dream()
    assert report.dreamer.startswith("model:") and len(report.created) == 1
    created = store.get(NS, report.created[0])
    assert created is not None and created.kind == "procedure" and CORE_TAG in created.tags
    texts = [i.text for i in parse_memory_md(rt.journal.path("MEMORY.md").read_text())]
    assert texts == ["User lives in Lisbon", "Confirm bookings by email"]

    store.add(NS, "User works as a pilot")
    answers.append("I am not JSON")
    fallback = rt.dream()
    assert fallback.dreamer == "offline" and not fallback.skipped
    assert _wait(seen, ModelFallback) and "pilot" in rt.journal.path("MEMORY.md").read_text()


def test_on_idle_dreams_on_schedule(make_runtime: MakeRuntime) -> None:
    rt = make_runtime(dream_interval_seconds=0)
    assert rt.journal is not None
    _tell(rt, "I live in Lisbon.")
    report = rt.on_idle()
    assert report["dream"] is not None and report["dream"]["items"] >= 1
    assert rt.journal.path("MEMORY.md").exists()
    rt2 = make_runtime(dream_interval_seconds=None)
    assert rt2.on_idle()["dream"] is None

from __future__ import annotations

import json

import pytest

from actormem.models.scripted import ScriptedModel
from actormem.recorder import (
    ExtractedFact,
    ExtractionError,
    ModelReconciler,
    decisions_from_json,
    reconcile_by_slot,
)
from actormem.store import MemoryRecord, Namespace

NS = Namespace(user_id="u")


def rec(mid: str, content: str) -> MemoryRecord:
    return MemoryRecord(
        id=mid, namespace=NS, kind="fact", content=content, content_hash="h", importance=0.5
    )


FACTS = [ExtractedFact(content=c) for c in ("User lives in Berlin", "User has a dog", "x", "y")]
EXISTING = [rec("m-paris", "User lives in Paris"), rec("m-cat", "User has a cat")]


def test_decisions_map_temporary_ids_to_real_ones() -> None:
    reply = {
        "memory": [
            {"fact": 0, "event": "update", "id": "0", "text": "User lives in Berlin"},
            {"fact": 1, "event": "ADD", "text": "User has a dog"},
            {"fact": 2, "event": "DELETE", "id": 1},
            {"fact": "3", "event": "NONE", "id": "0"},
        ]
    }
    out = decisions_from_json(reply, FACTS, EXISTING)
    assert [(d.op, d.memory_id) for d in out] == [
        ("UPDATE", "m-paris"),
        ("ADD", None),
        ("DELETE", "m-cat"),
        ("NONE", "m-paris"),
    ]
    assert out[0].old == "User lives in Paris" and out[0].content == "User lives in Berlin"


def test_unanswered_facts_are_added() -> None:
    out = decisions_from_json({"memory": []}, FACTS[:2], EXISTING)
    assert [d.op for d in out] == ["ADD", "ADD"]


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        ({"memories": []}, "expected"),
        ({"memory": ["ADD"]}, "expected an object"),
        ({"memory": [{"fact": 0, "event": "MERGE"}]}, "unknown event"),
        ({"memory": [{"fact": 9, "event": "ADD"}]}, "names no new fact"),
        ({"memory": [{"fact": 0, "event": "UPDATE", "id": "7"}]}, "needs the id"),
        ({"memory": [{"fact": 0, "event": "DELETE", "id": "m-paris"}]}, "needs the id"),
    ],
)
def test_malformed_decisions_are_errors(reply: object, message: str) -> None:
    with pytest.raises(ExtractionError, match=message):
        decisions_from_json(reply, FACTS, EXISTING)


def test_model_reconciler_skips_the_call_when_nothing_is_stored() -> None:
    model = ScriptedModel([])
    out = ModelReconciler(model).decide(FACTS[:2], [])
    assert [d.op for d in out] == ["ADD", "ADD"] and model.call_count == 0
    assert ModelReconciler(model).decide([], EXISTING) == []


def test_model_reconciler_prompt_and_retry() -> None:
    good = json.dumps({"memory": [{"fact": 0, "event": "NONE", "id": "1"}]})
    model = ScriptedModel(['{"memory": [{"fact": 0, "event": "UPDATE", "id": "99"}]}', good])
    r = ModelReconciler(model, retries=1)
    out = r.decide(FACTS[:1], EXISTING)
    assert out[0].op == "NONE" and out[0].memory_id == "m-cat"
    prompt = model.calls[0].messages[1].text
    assert '"id": "0"' in prompt and "m-paris" not in prompt  # the model never sees real ids
    assert r.calls == 2
    with pytest.raises(ExtractionError):
        ModelReconciler(ScriptedModel(["no", "no"]), retries=1).decide(FACTS[:1], EXISTING)


def test_reconcile_by_slot() -> None:
    facts = [
        ExtractedFact(content="User lives in Paris", slot="location"),
        ExtractedFact(content="User likes tea", slot="pref:tea"),
        ExtractedFact(content="User lives in Berlin", slot="location"),
        ExtractedFact(content="User has two cats"),
        ExtractedFact(content="User's name is Ada", slot="name"),
    ]
    held = {"location": rec("m1", "User lives in Rome"), "name": rec("m2", "user's name is ada")}
    out = reconcile_by_slot(facts, held)
    assert [(d.op, d.fact.content, d.memory_id) for d in out] == [
        ("ADD", "User likes tea", None),
        ("UPDATE", "User lives in Berlin", "m1"),  # the last statement of a slot wins
        ("ADD", "User has two cats", None),
        ("NONE", "User's name is Ada", "m2"),
    ]
    assert out[1].old == "User lives in Rome"

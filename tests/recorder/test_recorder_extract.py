from __future__ import annotations

import json

import pytest

from actormem.messages import Msg
from actormem.models.base import ModelError
from actormem.models.scripted import ScriptedModel
from actormem.recorder import (
    ExtractionError,
    ModelExtractor,
    RuleExtractor,
    facts_from_json,
    parse_json_reply,
    render_turn,
)


def rules(text: str) -> list[tuple[str, str]]:
    return [(f.content, f.slot) for f in RuleExtractor().extract([[Msg.user(text)]])]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("My name is Ada Lovelace.", [("User's name is Ada Lovelace", "name")]),
        ("Call me Bob.", [("User's name is Bob", "name")]),
        (
            "Hi, I'm Ada. I live in Paris and I work at Acme Corp.",
            [
                ("User's name is Ada", "name"),
                ("User lives in Paris", "location"),
                ("User works at Acme Corp", "employer"),
            ],
        ),
        ("I moved to Berlin last month.", [("User lives in Berlin", "location")]),
        ("I'm from Lyon, France.", [("User is from Lyon", "origin")]),
        ("I work as a nurse.", [("User works as a nurse", "occupation")]),
        (
            "I really love green tea, but I don't like coffee.",
            [("User likes green tea", "pref:green tea"), ("User dislikes coffee", "pref:coffee")],
        ),
        ("I am allergic to peanuts.", [("User is allergic to peanuts", "allergy:peanuts")]),
        ("My favorite color is blue.", [("User's favorite color is blue", "my:favorite color")]),
        ("Please remember that my parking spot is B12.", [("User's parking spot is B12", "")]),
        ("I have two cats.", [("User has two cats", "")]),
        (
            "I have a dentist appointment on May 3rd.",
            [("User has a dentist appointment on May 3rd", "")],
        ),
        ("We fly to Rome next friday.", [("User flies to Rome next friday", "")]),
    ],
)
def test_rules_find_first_person_facts(text: str, expected: list[tuple[str, str]]) -> None:
    assert rules(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "I'm tired.",
        "I'm Sorry.",
        "I have a question about Python.",
        "My problem is that it crashes.",
        "What is the weather like?",
        "The meeting is on Monday.",  # a date but not about the user
    ],
)
def test_rules_ignore_small_talk(text: str) -> None:
    assert rules(text) == []


def test_rules_read_only_the_user_and_drop_repeats() -> None:
    turns = [
        [Msg.user("I live in Oslo."), Msg.assistant("I live in a datacenter.")],
        [Msg.user("i live in oslo")],
        [Msg.system("My name is System.")],
    ]
    facts = RuleExtractor().extract(turns)
    assert [f.content for f in facts] == ["User lives in Oslo"]
    assert facts[0].source_ids == (turns[0][0].id,)
    assert RuleExtractor(min_confidence=0.99).extract(turns) == []


def test_render_turn_abbreviates_tools_and_clips() -> None:
    call = Msg.tool_call("search", {"q": "cats"}, call_id="c1")
    result = Msg.tool_result("c1", "x" * 1000, name="search")
    text = render_turn([Msg.system("sys"), Msg.user("find cats"), call, result])
    assert text.startswith("user: find cats\nassistant called search(")
    assert "tool search returned: xxx" in text and " ... " in text
    assert "sys" not in text
    long = render_turn([Msg.user("word " * 2000)], max_chars=300)
    assert len(long) <= 300 and " ... " in long


def test_parse_json_reply_tolerates_fences_and_chatter() -> None:
    assert parse_json_reply('```json\n{"facts": []}\n```') == {"facts": []}
    assert parse_json_reply('Sure! Here it is: {"facts": [1]} hope it helps') == {"facts": [1]}
    assert parse_json_reply("[1, 2]") == [1, 2]
    with pytest.raises(ExtractionError, match="not valid JSON"):
        parse_json_reply("{broken")
    with pytest.raises(ExtractionError, match="no JSON"):
        parse_json_reply("nothing here")


def test_facts_from_json_validates_shape() -> None:
    facts = facts_from_json(
        {
            "facts": [
                {"content": " A ", "importance": 2, "confidence": "0.4", "tags": "x"},
                "plain string fact",
                {"content": ""},
            ]
        }
    )
    assert [(f.content, f.importance, f.confidence, f.tags) for f in facts] == [
        ("A", 1.0, 0.4, ("x",)),
        ("plain string fact", 0.5, 1.0, ()),
    ]
    with pytest.raises(ExtractionError, match="expected"):
        facts_from_json({"memories": []})
    with pytest.raises(ExtractionError, match="not a number"):
        facts_from_json({"facts": [{"content": "a", "confidence": "high"}]})
    with pytest.raises(ExtractionError, match="expected an object"):
        facts_from_json({"facts": [3]})


def test_model_extractor_prompt_and_retry() -> None:
    good = json.dumps({"facts": [{"content": "User lives in Rome", "kind": "fact"}]})
    model = ScriptedModel(["not json", good])
    ex = ModelExtractor(model, retries=1)
    facts = ex.extract([[Msg.user("I live in Rome."), Msg.assistant("Nice.")]])
    assert [f.content for f in facts] == ["User lives in Rome"]
    assert ex.calls == 2 and model.call_count == 2
    first = model.calls[0]
    assert "Reply with only this JSON object" in first.messages[0].text
    assert "user: I live in Rome." in first.messages[1].text
    assert "could not be used" in model.calls[1].messages[-1].text


def test_model_extractor_gives_up_after_retries_and_on_failures() -> None:
    ex = ModelExtractor(ScriptedModel(["x", "y", "z"]), retries=1)
    with pytest.raises(ExtractionError, match="after 2 attempt"):
        ex.extract([[Msg.user("hello")]])
    failing = ModelExtractor(ScriptedModel.failing(ModelError("down")), retries=0)
    with pytest.raises(ExtractionError, match="model call failed"):
        failing.extract([[Msg.user("hello")]])
    assert ModelExtractor(ScriptedModel([])).extract([[Msg.system("only system")]]) == []

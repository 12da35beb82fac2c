"""Made-up facts: a model's fact must be supported by the conversation it came from."""

from __future__ import annotations

import json

import pytest

from actormem.messages import Msg
from actormem.models.scripted import ScriptedModel
from actormem.recorder import ModelExtractor
from actormem.recorder._support import SupportChecker, is_supported

SOURCE = (
    "Hi! We moved from Paris to Lyon last week with my two kids. I don't eat meat "
    "anymore, and my daughter Ines starts school on March 3. Can you book a table for Friday?"
)


@pytest.mark.parametrize(
    "fact",
    [
        "User lives in Lyon",
        "User moved from Paris to Lyon",
        "User has 2 kids",  # a number in words in the text, in digits in the fact
        "User does not eat meat",
        "User's daughter is named Ines",
        "User's daughter Ines starts school on 2027-03-03",  # dates may be resolved
        "User's daughter starts school on March 3",
        "User booked a table for Friday",  # "booked" is a form of "book"
        "Lyon is where the user lives now",
    ],
)
def test_facts_the_text_supports_are_kept(fact: str) -> None:
    assert is_supported(fact, SOURCE)


@pytest.mark.parametrize(
    "fact",
    [
        "User has a cat named Whiskers",  # a name nobody said
        "User works at Google",
        "User is 40 years old",  # a number nobody said
        "User has 5 kids",
        "User's favorite color is blue",
        "User enjoys skiing in Switzerland",
        "User's daughter Ines starts school on March 3 in Boston",  # one invented place
    ],
)
def test_made_up_facts_are_not_supported(fact: str) -> None:
    assert not is_supported(fact, SOURCE)


def test_speakers_may_start_a_fact() -> None:
    checker = SupportChecker("I moved to Lyon.", subjects=("Andrew Smith",))
    assert checker.supported("Andrew Smith moved to Lyon")
    assert checker.supported("Andrew's home is Lyon")
    assert not checker.supported("Bernard moved to Lyon")


def test_model_extractor_drops_invented_facts_and_keeps_the_rest() -> None:
    reply = {
        "facts": [
            {"content": "User lives in Lyon", "kind": "fact"},
            {"content": "User has a golden retriever named Max", "kind": "fact"},
            {"content": "User's favourite band is Radiohead", "kind": "preference"},
            {"content": "User has two kids", "kind": "fact"},
        ]
    }
    ex = ModelExtractor(ScriptedModel([json.dumps(reply)]))
    facts = ex.extract([[Msg.user(SOURCE), Msg.assistant("Sure, booked for Friday.")]])
    assert [f.content for f in facts] == ["User lives in Lyon", "User has two kids"]
    assert ex.unsupported == 2


def test_a_reply_of_only_invented_facts_gives_nothing() -> None:
    reply = {"facts": [{"content": "User is a pilot for Lufthansa in Frankfurt"}]}
    ex = ModelExtractor(ScriptedModel([json.dumps(reply)]))
    assert ex.extract([[Msg.user("What's the weather like today?")]]) == []
    assert ex.unsupported == 1

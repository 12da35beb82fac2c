"""The offline fact extractor: broad first-person facts, questions never facts, corrections."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from actormem import MemoryRuntime, Msg
from actormem.models.embedders import HashEmbedder
from actormem.recorder import RecorderConfig, RuleExtractor
from actormem.recorder._rules import CATEGORIES, third_person

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.fact_corpus import CORPUS, evaluate, load  # noqa: E402

SETS = [CORPUS.parent / f"{name}.tsv" for name in ("facts_heldout", "facts_heldout2")]
UNSEEN = CORPUS.parent / "facts_heldout3.tsv"  # never used to change the rules


def facts(text: str, subject: str = "User") -> list[tuple[str, str]]:
    return [(f.content, f.tags[0]) for f in RuleExtractor().from_text(text, subject)]


@pytest.mark.parametrize("path", [CORPUS, *SETS, UNSEEN], ids=lambda p: p.stem)
def test_labelled_statements_meet_the_goals(path: Path) -> None:
    res = evaluate(load(path))
    assert res["statements"] >= 60
    assert res["recall"] >= 0.8, res["misses"]
    assert res["precision"] >= 0.95, res["wrong"]


def test_the_corpus_is_broad_and_hand_written() -> None:
    statements = load(CORPUS)
    assert len(statements) >= 300
    assert len({text for _, _, text in statements}) == len(statements)  # no repeats
    labelled = {cat for cat, _, _ in statements}
    assert labelled - {"none"} <= set(CATEGORIES)
    assert len(labelled) >= 18


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "I'm a nurse and my husband Tom works from home.",
            [
                ("User is a nurse", "work"),
                ("User's husband Tom works from home", "family"),
            ],
        ),
        ("I don't eat meat anymore.", [("User does not eat meat", "diet")]),
        ("We have a beagle called Rufus.", [("User has a beagle called Rufus", "pet")]),
        (
            "I speak Dutch and I'm learning Korean.",
            [
                ("User speaks Dutch", "language"),
                ("User is learning Korean", "language"),
            ],
        ),
        (
            "Please always reply in French.",
            [
                ("User asked the assistant: Please always reply in French", "assistant"),
            ],
        ),
    ],
)
def test_facts_keep_the_users_words_in_the_third_person(
    text: str, expected: list[tuple[str, str]]
) -> None:
    assert facts(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "Do I live in Berlin?",
        "do you remember where I work",
        "What's my dog's name?",
        "Should I move to Lisbon or stay in Leeds?",
        "Can you tell me if I'm allergic to anything",
        "I wonder if I should get a cat.",
        "If I lived in Oslo, I'd ski every day.",
        "Book me a table for two on Friday.",
    ],
)
def test_questions_and_requests_never_become_facts(text: str) -> None:
    assert facts(text) == []


def test_a_named_speaker_is_the_subject() -> None:
    assert facts("I have two kids and my wife is a doctor.", "Andrew") == [
        ("Andrew has two kids", "family"),
        ("Andrew's wife is a doctor", "family"),
    ]


@pytest.mark.parametrize(
    ("clause", "expected"),
    [
        ("I go hiking with my sister", "User goes hiking with User's sister"),
        ("we've got two cats", "User has got two cats"),
        ("I really enjoy pottery", "User really enjoys pottery"),
        ("I'm training for a marathon", "User is training for a marathon"),
        ("I don't drink coffee", "User does not drink coffee"),
        ("I try to study every day", "User tries to study every day"),
    ],
)
def test_third_person(clause: str, expected: str) -> None:
    assert third_person(clause) == expected


@pytest.mark.parametrize(
    ("before", "after", "old", "new"),
    [
        (
            "I live in Denver.",
            "We packed up and left Denver, we live in Tucson now.",
            "Denver",
            "Tucson",
        ),
        ("I'm based in Leeds.", "Not in Leeds anymore, we're in York now.", "Leeds", "York"),
        ("I work at Shopify.", "I left Shopify and joined Stripe.", "Shopify", "Stripe"),
        ("I'm vegetarian.", "I went vegan last month.", "vegetarian", "vegan"),
    ],
)
def test_a_correction_replaces_the_fact_and_is_found(
    tmp_path: Path, before: str, after: str, old: str, new: str
) -> None:
    with MemoryRuntime(
        session_dir=tmp_path,
        store=tmp_path / "m.duckdb",
        embedder=HashEmbedder(64),
        recorder=RecorderConfig(batch_seconds=0.02, idle_seconds=None),
    ) as rt:
        rt.record([Msg.user(before), Msg.assistant("Noted.")])
        rt.flush()
        rt.record([Msg.user("Tell me a joke."), Msg.assistant("Why did the chicken...")])
        rt.record([Msg.user(after), Msg.assistant("Got it.")])
        rt.flush()
        store = rt.store
        assert store is not None
        live = [m.content for m in store.list(rt.namespace, kinds=["fact"])]
        assert any(new in f for f in live), live
        assert not any(old in f and new not in f for f in live), live
        if "Denver" in before:  # the case: the new city is found, the old is gone
            hits = [h.memory.content for h in rt.retrieve("Where does the user live now?", 5)]
            assert any("lives in Tucson" in h for h in hits), hits

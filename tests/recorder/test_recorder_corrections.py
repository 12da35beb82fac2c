"""Offline corrections: a fact taken back or replaced does not stay live beside its correction.

End to end through ``MemoryRuntime`` with no model (the rule extractor and
``reconcile_by_slot``), on a real DuckDB file: the user states something,
later takes it back or replaces it in one of many phrasings, and only what
is true now is live; the old text is kept in the store's history.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from actormem import MemoryRuntime, Msg
from actormem.models.embedders import HashEmbedder
from actormem.recorder import RecorderConfig, RuleExtractor
from actormem.recorder._corrections import change_of, stem


@contextmanager
def runtime(tmp_path: Path) -> Iterator[MemoryRuntime]:
    with MemoryRuntime(
        session_dir=tmp_path,
        store=tmp_path / "m.duckdb",
        embedder=HashEmbedder(64),
        recorder=RecorderConfig(batch_seconds=0.02, idle_seconds=None),
    ) as rt:
        yield rt


def say(rt: MemoryRuntime, text: str, name: str = "") -> None:
    rt.record([Msg.user(text, name=name) if name else Msg.user(text), Msg.assistant("Noted.")])
    rt.flush()


def live(rt: MemoryRuntime) -> list[str]:
    assert rt.store is not None
    return [m.content for m in rt.store.list(rt.namespace, kinds=["fact", "preference"])]


def history_of(rt: MemoryRuntime) -> list[tuple[str, str | None, str | None, str]]:
    assert rt.store is not None
    return [(h.op, h.old_content, h.new_content, h.reason) for h in rt.store.history(rt.namespace)]


# (what was said, the fact it gave, the correction, a word of the new fact or None)
REPLACED = [
    # consuming
    (
        "I drink espresso every morning.",
        "I don't drink espresso anymore, I drink decaf now.",
        "decaf",
    ),
    ("I drink espresso every morning.", "Not espresso any more, now decaf.", "decaf"),
    ("I drink espresso every morning.", "I switched from espresso to decaf.", "decaf"),
    ("I drink coffee.", "No more coffee for me, I drink tea now.", "tea"),
    ("I drink coffee.", "I've replaced coffee with green tea.", "green tea"),
    ("I drink coffee.", "Coffee is out, rooibos is in.", "rooibos"),
    ("I drink beer.", "I drink wine instead of beer now.", "wine"),
    ("I drink cow's milk.", "I moved from milk to oat milk.", "oat milk"),
    ("I eat meat.", "I don't eat meat anymore.", None),
    ("I drink espresso every morning.", "I used to drink espresso, now I drink decaf.", "decaf"),
    ("I drink espresso every morning.", "Decaf now, not espresso.", "decaf"),
    ("I drink espresso every morning.", "I've gone from espresso to decaf.", "decaf"),
    ("I eat eggs.", "No more eggs.", None),
    ("I eat sugar.", "I've given up sugar completely.", None),
    ("I drink coffee.", "I never drink coffee anymore.", None),
    ("I drink coffee.", "I quit coffee.", None),
    ("I drink soda every day.", "I gave up soda last month.", None),
    ("I drink coffee.", "I no longer drink coffee.", None),
    ("I drink coffee.", "I'm not drinking coffee any more.", None),
    ("I eat red meat.", "I stopped eating meat.", None),
    ("I eat cheese.", "I cut out cheese.", None),
    ("I drink wine.", "I'm off wine these days.", None),
    # hobbies
    ("I play tennis on weekends.", "I stopped playing tennis, I play padel now.", "padel"),
    ("I go climbing twice a week.", "I quit climbing, I go bouldering now.", "bouldering"),
    ("I play the guitar.", "I gave up the guitar and now I play the drums.", "drums"),
    ("I do yoga every morning.", "I stopped doing yoga, I do pilates now.", "pilates"),
    ("I play football.", "I swapped football for rugby.", "rugby"),
    ("I play tennis on weekends.", "Tennis is history, it's padel now.", "padel"),
    ("I knit in the evenings.", "I stopped knitting.", None),
    ("I play tennis on weekends.", "I used to play tennis.", None),
    ("I play the violin.", "I haven't played the violin in years.", None),
    ("I go running every morning.", "I stopped running.", None),
    ("I play chess online every night.", "I don't play chess any more.", None),
    ("I play golf.", "I'm done with golf.", None),
    # owning, driving
    ("I drive a Volvo.", "I sold the Volvo, I drive a Tesla now.", "Tesla"),
    ("I own a Honda.", "I sold my Honda and bought a Mazda.", "Mazda"),
    ("I drive a Prius.", "I traded in my Prius for a Tesla.", "Tesla"),
    ("I have an iPhone.", "I switched from iPhone to a Pixel.", "Pixel"),
    ("I drive a Volvo.", "The Volvo is gone, I drive a Tesla now.", "Tesla"),
    ("I have a road bike.", "I got rid of my bike.", None),
    ("I drive a Volvo.", "We sold our Volvo.", None),
    ("I own a Kindle.", "I gave away my Kindle.", None),
    ("I have a car.", "I don't have a car anymore.", None),
    # liking
    ("I love jazz.", "Not jazz anymore, now I love techno.", "techno"),
    ("I love jazz.", "I've moved on from jazz to techno.", "techno"),
    ("I love jazz.", "I'm not a fan of jazz anymore.", None),
    ("I love sushi.", "I'm not into sushi anymore.", None),
    ("I like country music.", "I don't like country music any more.", None),
]


#: What a fact that takes something back says (in the user's words, third person).
TAKEN_BACK = (
    "not",
    "no longer",
    "stopped",
    "quit",
    "gave up",
    "given up",
    "cut out",
    "off",
    "done",
    "got rid",
    "dislikes",
    "used to",
    "hasn't",
    "gave away",
    "sold",
)


@pytest.mark.parametrize(("before", "after", "new"), REPLACED, ids=lambda v: str(v)[:40])
def test_a_correction_leaves_only_what_is_true_now(
    tmp_path: Path, before: str, after: str, new: str | None
) -> None:
    with runtime(tmp_path) as rt:
        say(rt, before)
        (old,) = live(rt)  # the fact the first statement gave
        say(rt, "Tell me a joke.")
        say(rt, after)
        now = live(rt)
        assert old not in now, now
        assert len(now) == 1, now  # the correction, not the correction beside the old fact
        if new is not None:
            assert new.casefold() in now[0].casefold(), now
        else:  # taken back: what is live says so
            assert any(w in now[0] for w in TAKEN_BACK), now
        # the old text is in the history: updated (superseded) or deleted with a reason
        changed = [h for h in history_of(rt) if h[0] in ("UPDATE", "DELETE") and h[1] == old]
        assert changed and all(h[3] for h in changed), history_of(rt)


def test_the_old_fact_is_not_retrieved_after_the_correction(tmp_path: Path) -> None:
    with runtime(tmp_path) as rt:
        say(rt, "I drink espresso every morning.")
        hits = [h.memory.content for h in rt.retrieve("what does the user drink?", 5)]
        assert "User drinks espresso every morning" in hits, hits
        say(rt, "I don't drink espresso anymore, I drink decaf now.")
        hits = [h.memory.content for h in rt.retrieve("what does the user drink?", 5)]
        assert "User drinks decaf" in hits, hits
        assert "User drinks espresso every morning" not in hits, hits
        assert "User drinks espresso every morning" not in rt.format_for_injection(
            "what does the user drink?"
        )


# (what was said, a later sentence that corrects nothing of it)
UNRELATED = [
    ("I drink coffee.", "I stopped by the shop."),
    ("I drink coffee.", "I stopped at the bank on the way home."),
    ("I drink coffee.", "I don't eat pork."),
    ("I play tennis.", "I gave up on the project."),
    ("I like jazz.", "I quit my job at Google."),
    ("I drink coffee.", "I sold my old laptop."),
    ("I drive a Volvo.", "I don't drink coffee."),
    ("I love jazz.", "Not in Leeds anymore, we're in York now."),
    ("I play tennis.", "No more excuses, I start running tomorrow."),
    ("I drink coffee.", "I don't think so."),
    ("I play tennis.", "I stopped working at the bank."),
    ("I love techno.", "I don't like jazz anymore."),
    ("I drink tea.", "Not coffee anymore, now decaf."),
    ("I play the piano.", "I quit smoking."),
    ("I eat meat.", "I'm off to Paris next week."),
    ("I drink coffee.", "I'm done with work for today."),
    ("I own a bike.", "I don't have time for this."),
    ("I play tennis.", "The sun is out, it's lovely."),
    ("I drink coffee.", "I haven't had coffee today."),
    ("I drink coffee.", "I used to live in Denver."),
    ("I play tennis.", "I'm over the moon."),
    ("I drink coffee.", "I don't drink tea anymore."),
    ("I drive a Volvo.", "I sold the Audi."),
]


@pytest.mark.parametrize(("before", "after"), UNRELATED, ids=lambda v: str(v)[:40])
def test_what_corrects_nothing_held_removes_nothing(
    tmp_path: Path, before: str, after: str
) -> None:
    with runtime(tmp_path) as rt:
        say(rt, before)
        (old,) = live(rt)
        say(rt, after)
        assert old in live(rt), live(rt)
        assert not [h for h in history_of(rt) if h[0] != "ADD"], history_of(rt)


def test_a_negation_with_nothing_held_stays_a_negative_fact(tmp_path: Path) -> None:
    with runtime(tmp_path) as rt:
        say(rt, "I don't eat pork.")
        assert live(rt) == ["User does not eat pork"]
        say(rt, "I don't own a car.")
        assert sorted(live(rt)) == ["User does not eat pork", "User does not own a car"]
        say(rt, "Actually I eat pork again now.")  # the negation itself is corrected
        assert sorted(live(rt)) == ["User does not own a car", "User eats pork again"]


def test_a_speakers_correction_is_about_that_speaker(tmp_path: Path) -> None:
    with runtime(tmp_path) as rt:
        say(rt, "I drink espresso every morning.")
        say(rt, "I drink espresso every morning.", name="Andrew")
        say(rt, "I switched from espresso to decaf.", name="Andrew")
        assert sorted(live(rt)) == ["Andrew drinks decaf", "User drinks espresso every morning"]


def test_keyed_facts_and_episodes_are_never_corrected(tmp_path: Path) -> None:
    with runtime(tmp_path) as rt:
        rt.save_fact("coffee", "espresso every morning")
        say(rt, "I drink espresso every morning.")
        say(rt, "I don't drink espresso anymore, I drink decaf now.")
        assert rt.get_fact("coffee") == "espresso every morning"
        assert rt.store is not None
        episodes = [m.content for m in rt.store.list(rt.namespace, kinds=["episode"])]
        assert any("I drink espresso every morning." in e for e in episodes), episodes


def test_a_correction_in_the_same_batch_as_the_fact(tmp_path: Path) -> None:
    with runtime(tmp_path) as rt:
        rt.record([Msg.user("I play tennis on weekends."), Msg.assistant("Nice.")])
        rt.record([Msg.user("Well, I stopped playing tennis, I play padel now.")])
        rt.flush()
        assert live(rt) == ["User plays padel"]


def test_a_correction_by_itself_in_a_message_keeps_its_negative_when_nothing_is_held(
    tmp_path: Path,
) -> None:
    with runtime(tmp_path) as rt:
        say(rt, "I don't drink espresso anymore, I drink decaf now.")
        assert sorted(live(rt)) == ["User does not drink espresso", "User drinks decaf"]


@pytest.mark.parametrize(
    "clause",
    [
        "I stopped by the shop",
        "I stopped at the bank",
        "I gave up on the project",
        "I quit my job",
        "I don't think so",
        "I don't know",
        "I'm off to Paris",
        "I'm done with work",
        "It's not in Leeds anymore",
        "I'm over the moon",
    ],
)
def test_not_a_retraction(clause: str) -> None:
    change = change_of(clause)
    assert change is None, clause


def test_object_keys_agree_across_forms() -> None:
    assert stem("knitting") == stem("knit")
    assert stem("hiking") == stem("hike")
    assert stem("eggs") == stem("egg")
    rx = RuleExtractor()
    (positive,) = rx.from_text("I play tennis on weekends.")
    (negative,) = rx.from_text("I don't play tennis any more.")
    assert positive.slot == negative.slot == "do:tennis"
    (drive,) = rx.from_text("I drive an old Volvo.")
    assert drive.slot == "own:volvo"
    (food,) = rx.from_text("I don't eat meat anymore.")
    assert food.slot == "consume:meat" and food.content == "User does not eat meat"

"""Neighbouring episodes as context in search (``context_prev_weight``, ``_next_weight``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from actormem.models.embedders import HashEmbedder
from actormem.store import DuckDBStore, InvalidMemoryError, Namespace, NewMemory, SearchConfig

NS = Namespace(user_id="u", session_id="s1")
OFF = SearchConfig(context_prev_weight=0.0, context_next_weight=0.0, context_prev2_weight=0.0)
ON = SearchConfig(context_prev_weight=1.0, context_next_weight=0.0, context_prev2_weight=0.0)
T0 = 1_700_000_000.0

QUESTION = "Anna: where did your sister move after the wedding?"
ANSWER = "Ben: Lisbon, last spring. She loves it there."
FILLER = [
    "Anna: the printer on the second floor is broken again",
    "Ben: I paid the electricity bill this morning",
    "Anna: the night bus was late",
    "Ben: we should repaint the kitchen",
    "Anna: my bike got a flat tyre",
    "Ben: the football match ended in a draw",
    "Anna: I baked bread with rosemary",
    "Ben: our neighbour plays the trumpet at night",
    "Anna: the library closes early on Fridays",
    "Ben: I lost my umbrella on the train",
]


@pytest.fixture(params=["duckdb", "postgres"])
def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], Any]:
    """``open_store()`` opens the test's store (the same file or database each call)."""
    kwargs: dict[str, Any] = {
        "embedder": HashEmbedder(64),
        "touch_flush_interval": None,
        "near_duplicate_threshold": None,
        "clock": lambda: T0,
    }
    if request.param == "duckdb":
        return lambda: DuckDBStore(tmp_path / "m.duckdb", **kwargs)
    from actormem.store._postgres import PostgresStore

    dsn = request.getfixturevalue("pg_dsn")
    return lambda: PostgresStore(dsn, **kwargs)


def _episodes(texts: list[str], ns: Namespace = NS) -> list[NewMemory]:
    # One creation time for all: their order is the order they were added in.
    return [
        NewMemory(content=t, kind="episode", id=f"{ns.session_id}-{i}", created_at=T0)
        for i, t in enumerate(texts)
    ]


def _ids(store: Any, query: str, cfg: SearchConfig, ns: Namespace = NS) -> list[str]:
    return [h.memory.id for h in store.search(query, ns, limit=3, config=cfg, touch=False)]


def test_a_reply_is_found_through_the_turn_it_answers(open_store: Callable[[], Any]) -> None:
    with open_store() as store:
        store.add_many(NS, _episodes([*FILLER[:2], QUESTION, ANSWER, *FILLER[2:]]), dedup=False)
        query = "Where did the sister move after the wedding?"
        assert "s1-3" not in _ids(store, query, OFF)  # the reply shares no word with it
        assert _ids(store, query, ON)[:2] == ["s1-2", "s1-3"]
        hit = next(h for h in store.search(query, NS, limit=3, config=ON) if h.memory.id == "s1-3")
        assert hit.bm25 == 0.0  # the hit reports the memory's own scores


def test_the_next_turn_lends_its_score_backwards(open_store: Callable[[], Any]) -> None:
    with open_store() as store:
        store.add_many(NS, _episodes([*FILLER[:2], QUESTION, ANSWER, *FILLER[2:]]), dedup=False)
        query = "Lisbon last spring"
        back = SearchConfig(
            context_prev_weight=0.0, context_next_weight=0.5, context_prev2_weight=0.0
        )
        assert "s1-2" not in _ids(store, query, OFF)
        assert _ids(store, query, back)[:2] == ["s1-3", "s1-2"]


def test_two_turns_back_lends_its_share(open_store: Callable[[], Any]) -> None:
    aside = "Anna: hang on, the doorbell"
    with open_store() as store:
        texts = [*FILLER[:4], QUESTION, aside, ANSWER, *FILLER[4:]]
        store.add_many(NS, _episodes(texts), dedup=False)
        query = "Where did the sister move after the wedding?"
        two = SearchConfig(
            context_prev_weight=0.0, context_next_weight=0.0, context_prev2_weight=0.5
        )
        assert "s1-6" not in _ids(store, query, ON)[:2]  # the aside took the previous share
        assert _ids(store, query, two)[:2] == ["s1-4", "s1-6"]


def test_memories_that_are_not_episodes_keep_their_scores(open_store: Callable[[], Any]) -> None:
    with open_store() as store:
        store.add_many(
            NS,
            [NewMemory(content=t, kind="fact", created_at=T0) for t in [*FILLER, QUESTION, ANSWER]],
            dedup=False,
        )
        for query in ("sister wedding", "Lisbon", "kitchen bill"):
            off = store.search(query, NS, limit=6, config=OFF, touch=False)
            on = store.search(query, NS, limit=6, config=ON, touch=False)
            assert [(h.memory.id, h.score) for h in off] == [(h.memory.id, h.score) for h in on]


def test_episodes_of_another_conversation_are_not_context(open_store: Callable[[], Any]) -> None:
    other = Namespace(user_id="u", session_id="s2")
    with open_store() as store:
        # Added one after the other, but in two sessions of the same user.
        store.add_many(NS, _episodes([*FILLER[:2], QUESTION]), dedup=False)
        store.add_many(other, _episodes([ANSWER, *FILLER[2:]], other), dedup=False)
        scope = Namespace(user_id="u")
        query = "Where did the sister move after the wedding?"
        assert "s2-0" not in _ids(store, query, ON, scope)
        # A fact added between two episodes of one session does not break their link.
        store.add(NS, NewMemory(content="the cat is called Tom", kind="fact", created_at=T0))
        store.add(NS, NewMemory(content=ANSWER, kind="episode", id="s1-late", created_at=T0))
        assert "s1-late" in _ids(store, query, ON, scope)


def test_links_follow_new_episodes_and_survive_a_reopen(open_store: Callable[[], Any]) -> None:
    query = "Where did the sister move after the wedding?"
    with open_store() as store:
        store.add_many(NS, _episodes([*FILLER, QUESTION]), dedup=False)
        before = _ids(store, query, ON)
        store.add(NS, NewMemory(content=ANSWER, kind="episode", id="s1-reply", created_at=T0))
        after = _ids(store, query, ON)
        assert "s1-reply" not in before and after[:2] == ["s1-10", "s1-reply"]
    with open_store() as store:  # the index is rebuilt from the file in the same order
        assert _ids(store, query, ON) == after


def test_an_episode_turned_into_a_fact_loses_its_context(open_store: Callable[[], Any]) -> None:
    with open_store() as store:
        store.add_many(NS, _episodes([*FILLER, QUESTION, ANSWER]), dedup=False)
        query = "Where did the sister move after the wedding?"
        assert "s1-11" in _ids(store, query, ON)
        store.update(NS, "s1-11", kind="fact")
        assert "s1-11" not in _ids(store, query, ON)


def test_context_weights_are_validated() -> None:
    with pytest.raises(InvalidMemoryError, match="context_prev_weight"):
        SearchConfig(context_prev_weight=-1.0)
    with pytest.raises(InvalidMemoryError, match="context_next_weight"):
        SearchConfig(context_next_weight=float("nan"))
    with pytest.raises(InvalidMemoryError, match="context_prev2_weight"):
        SearchConfig(context_prev2_weight=-0.1)


def test_keyword_and_vector_modes_rank_each_memory_alone(open_store: Callable[[], Any]) -> None:
    with open_store() as store:
        store.add_many(NS, _episodes([*FILLER, QUESTION, ANSWER]), dedup=False)
        query = "Where did the sister move after the wedding?"
        for mode in ("keyword", "vector"):
            on = store.search(query, NS, limit=5, mode=mode, config=ON, touch=False)
            off = store.search(query, NS, limit=5, mode=mode, config=OFF, touch=False)
            assert [(h.memory.id, h.score) for h in on] == [(h.memory.id, h.score) for h in off]

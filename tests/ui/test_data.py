"""The explorer's reads through the MemoryStore protocol alone (any backend)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from actormem.store import DuckDBStore, Namespace
from actormem.ui import Explorer
from tests.ui._seed import ADA, seed_store


class ProtocolOnly:
    """A store with only the MemoryStore protocol's methods (no namespaces(),
    no timeline_by_kind(), no journal tables)."""

    def __init__(self, inner: DuckDBStore) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        if name in ("namespaces", "timeline_by_kind", "log_entries", "journal_state"):
            raise AttributeError(name)
        return getattr(self._inner, name)


@pytest.fixture
def duck(tmp_path: Path) -> Any:
    s = DuckDBStore(tmp_path / "m.duckdb")
    seed_store(s)
    s.add(Namespace(user_id="ada", agent_id="travel#facts"), "seat: window", kind="keyed_fact")
    yield s
    s.close()


def test_namespaces_with_figures_facts_last(duck: DuckDBStore) -> None:
    rows = Explorer(duck).namespaces()
    names = [(str(r.stats.namespace), r.facts) for r in rows]
    assert names == [
        ("user_id=ada/agent_id=travel", False),
        ("user_id=bob/agent_id=travel", False),
        ("user_id=ada/agent_id=travel#facts", True),
    ]
    ada = rows[0].stats
    assert ada.live == 38 and ada.deleted == 1 and ada.kinds["episode"] == 28
    assert rows[0].query == "user=ada&agent=travel"


def test_a_store_with_only_the_protocol_still_works(duck: DuckDBStore) -> None:
    ex = Explorer(ProtocolOnly(duck))  # type: ignore[arg-type]
    assert ex.namespaces() == []  # cannot list them without a scope: the page says "none"
    timeline = ex.timeline(ADA)
    assert {k for _, k, _ in timeline} == {"all"}
    assert sum(n for _, _, n in timeline) == 38
    full = Explorer(duck).timeline(ADA)
    assert sum(n for _, _, n in full) == 38 and {k for _, k, _ in full} >= {"fact", "episode"}
    assert [r.metadata for r in ex.facts(ADA)] == [{}]
    assert ex.journal(ADA).entries == []


def test_pick_namespace_prefers_the_query_then_the_biggest(duck: DuckDBStore) -> None:
    ex = Explorer(duck)
    assert ex.pick_namespace({}) == ADA
    assert ex.pick_namespace({"user": "bob"}) == Namespace(user_id="bob")
    assert ex.pick_namespace({"user": "", "agent": "travel"}) == Namespace(agent_id="travel")

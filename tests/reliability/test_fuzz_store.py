"""Fuzzing long-term memory: random scopes, queries, filters and hostile strings.

Beside ``test_fuzz_foundation.py`` (sessions and messages).  Bounded for ``make
test`` by the "ci" hypothesis profile; ``make fuzz`` runs the "fuzz" profile.

Invariants: search never raises anything but the store's own validation
errors (no SQL error, no traceback from deep inside), never returns a memory
outside its scope; every user string that goes into the store, a keyed fact,
a memory tool or an export path either round-trips or gets a clear
``ValueError`` (the store's errors are ValueErrors too), and a refused write
changes nothing.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actormem import MemoryRuntime
from actormem.models.embedders import HashEmbedder
from actormem.recorder import LongTermMemoryMode, UnknownToolError
from actormem.session import JsonSession, SessionError
from actormem.store import (
    DuckDBStore,
    InvalidMemoryError,
    Namespace,
    NamespaceError,
    SearchFilters,
    StoreError,
)

#: Examples of the tests that open a DuckDB file per example: fewer than the profile's.
FEW = max(40, (settings.default.max_examples or 100) // 5)

HOSTILE = [
    "'; DROP TABLE memories; --",
    '" OR 1=1 --',
    "x') UNION SELECT * FROM history --",
    "%",
    "_",
    "\\",
    "../../etc/passwd",
    "..\\..\\windows",
    "/abs/path",
    "a\x00b",
    "\ud800 lone surrogate",
    "\udfff",
    "x" * 100_001,
    "\u202e right-to-left",
    "🙂" * 300,
    "NULL",
    "$1 ?",
    "\n\r\t",
]

# Namespace ids: printable text including SQL and path metacharacters.
ids = st.text(
    alphabet=st.characters(blacklist_categories=("Cc", "Cs")) | st.sampled_from("'\"%_\\/;-*"),
    min_size=1,
    max_size=12,
)
hostile_text = st.sampled_from(HOSTILE) | st.text(max_size=60)
USERS = ("alice", "bob", "o'brien", "100%", "a_b")
AGENTS = ("x", "y;--")


def _marker(ns: Namespace) -> str:
    return f"[{ns.user_id}|{ns.agent_id}]"


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DuckDBStore]:
    """A store with memories in 10 namespaces, each content marked with its namespace."""
    path = tmp_path_factory.mktemp("fuzzstore") / "m.duckdb"
    store = DuckDBStore(path, embedder=HashEmbedder(64), touch_flush_interval=None)
    words = ["tea", "coffee", "paris", "berlin", "dog", "cat", "plan", "meeting", "allergy"]
    for u, a in itertools.product(USERS, AGENTS):
        ns = Namespace(user_id=u, agent_id=a)
        store.add_many(
            ns,
            [
                f"{_marker(ns)} {w} {words[(i + 3) % len(words)]} note {i}"
                for i, w in enumerate(words)
            ],
        )
    yield store
    store.close()


def _in_scope(scope: Namespace, found: Namespace) -> bool:
    return scope.contains(found)


filters = st.builds(
    SearchFilters,
    kinds=st.none() | st.lists(hostile_text, max_size=3).map(tuple),
    tags_any=st.none() | st.lists(hostile_text, max_size=3).map(tuple),
    tags_all=st.none() | st.lists(hostile_text, max_size=2).map(tuple),
    created_after=st.none() | st.floats(allow_nan=True),
    created_before=st.none() | st.floats(allow_nan=True),
    agent_id=st.none() | st.sampled_from(AGENTS) | ids,
    run_id=st.none() | ids,
    session_id=st.none() | ids,
    min_importance=st.none() | st.floats(allow_nan=True),
)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    user=st.sampled_from(USERS) | ids,
    agent=st.none() | st.sampled_from(AGENTS) | ids,
    query=hostile_text,
    flt=st.none() | filters,
    mode=st.sampled_from(["hybrid", "keyword", "vector"]),
    limit=st.integers(min_value=-2, max_value=200),
)
def test_search_with_random_scopes_queries_and_filters(
    seeded: DuckDBStore,
    user: str,
    agent: str | None,
    query: str,
    flt: SearchFilters | None,
    mode: Any,
    limit: int,
) -> None:
    try:
        scope = Namespace(user_id=user, agent_id=agent)
    except NamespaceError:
        return
    try:
        hits = seeded.search(query, scope, limit, flt, mode=mode, touch=False)
    except InvalidMemoryError:
        return  # a clear validation error (bad limit, bad filter value)
    assert len(hits) <= limit
    for h in hits:
        assert _in_scope(scope, h.memory.namespace), (scope, h.memory.namespace)
        assert h.memory.content.startswith(_marker(h.memory.namespace))


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=FEW)
@given(user=ids, other=ids, content=hostile_text)
def test_hostile_content_and_namespaces_round_trip_and_stay_isolated(
    tmp_path_factory: pytest.TempPathFactory, user: str, other: str, content: str
) -> None:
    if user == other:
        return
    path = tmp_path_factory.mktemp("hostile") / "m.duckdb"
    with DuckDBStore(path, embedder=HashEmbedder(64), touch_flush_interval=None) as store:
        ns, ons = Namespace(user_id=user), Namespace(user_id=other)
        store.add(ons, "the other namespace's secret")
        try:
            res = store.add(ns, content)
        except (ValueError, StoreError) as exc:
            # refused: nothing changed (a clear InvalidMemoryError)
            assert store.count(ns) == 0, exc
            return
        assert store.get(ns, res.id) is not None
        assert store.get(ons, res.id) is None
        assert store.get(ns, res.id).content == content  # type: ignore[union-attr]
        for h in store.search(content, ns, 50):
            assert h.memory.namespace == ns
        for h in store.search(content, ons, 50):
            assert h.memory.namespace == ons


@pytest.fixture(scope="module")
def lt_runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MemoryRuntime]:
    d = tmp_path_factory.mktemp("ltrt")
    store = DuckDBStore(d / "m.duckdb", embedder=HashEmbedder(64), touch_flush_interval=None)
    rt = MemoryRuntime(
        session_dir=d,
        store=store,
        long_term=LongTermMemoryMode.BOTH,
        namespace=Namespace(user_id="fz"),
    )
    yield rt
    rt.close()
    store.close()


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=hostile_text, value=hostile_text)
def test_hostile_keyed_facts_round_trip_or_clear_error(
    lt_runtime: MemoryRuntime, key: str, value: str
) -> None:
    try:
        lt_runtime.save_fact(key, value)
    except ValueError as exc:
        assert str(exc)
        return
    assert lt_runtime.get_fact(key) == value


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    name=st.sampled_from(["record_to_memory", "retrieve_from_memory"]) | hostile_text,
    args=st.dictionaries(
        st.sampled_from(["thinking", "content", "keywords", "limit"]) | hostile_text,
        hostile_text
        | st.lists(hostile_text, max_size=3)
        | st.integers()
        | st.floats()
        | st.none()
        | st.booleans(),
        max_size=4,
    ),
)
def test_hostile_memory_tool_calls_answer_or_clear_error(
    lt_runtime: MemoryRuntime, name: str, args: dict[str, Any]
) -> None:
    try:
        out = lt_runtime.call_tool(name, args)
    except (ValueError, UnknownToolError) as exc:
        assert str(exc)
        return
    assert isinstance(out, str) and out


@given(session_id=hostile_text | ids)
def test_session_ids_never_leave_the_folder(
    tmp_path_factory: pytest.TempPathFactory, session_id: str
) -> None:
    d = tmp_path_factory.mktemp("sid")
    session = JsonSession(d)
    try:
        path = session.path(session_id)
    except SessionError:
        return
    assert path.resolve().parent == d.resolve()
    assert path.name == f"{session_id}.json" and not path.name.startswith(".")


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=FEW)
@given(name=hostile_text, suffix=st.sampled_from([".jsonl", ".parquet", ".txt", ""]))
def test_export_paths_are_checked_and_leave_no_stray_files(
    seeded: DuckDBStore, tmp_path_factory: pytest.TempPathFactory, name: str, suffix: str
) -> None:
    d = tmp_path_factory.mktemp("exp")
    target = os.path.join(d, name + suffix)
    try:
        rep = seeded.export(Namespace(user_id="alice"), target)
    except (InvalidMemoryError, OSError):
        # refused (a clear InvalidMemoryError); nothing left in the folder
        leftovers = [p for p in d.rglob("*") if p.is_file()]
        assert not leftovers, leftovers
        return
    assert Path(rep.path) == Path(target).expanduser()
    assert rep.memories == seeded.count(Namespace(user_id="alice"), include_deleted=True)
    assert not [p for p in Path(rep.path).parent.iterdir() if p.name.endswith(".tmp")]
    with contextlib.suppress(FileNotFoundError):
        Path(rep.path).unlink()


# -- regressions: store bugs found by this suite, now fixed --


def test_store_refuses_lone_surrogates_with_a_clear_error(tmp_path: Path) -> None:
    store = DuckDBStore(tmp_path / "m.duckdb", embedder=HashEmbedder(64))
    with store, pytest.raises(InvalidMemoryError, match="content"):
        store.add(Namespace(user_id="u"), "\ud800 lone")


def test_export_refuses_an_unencodable_path(tmp_path: Path) -> None:
    with DuckDBStore(tmp_path / "m.duckdb", embedder=HashEmbedder(64)) as store:
        store.add(Namespace(user_id="u"), "x")
        with pytest.raises(InvalidMemoryError):
            store.export(Namespace(user_id="u"), str(tmp_path / "\ud800.jsonl"))

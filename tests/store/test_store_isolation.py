"""Namespace isolation: a search never returns another namespace's memory."""

from __future__ import annotations

import itertools
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actormem.models.embedders import HashEmbedder
from actormem.store import DuckDBStore, Namespace, SearchFilters

USERS = [f"user{i}" for i in range(8)]
AGENTS = ["a", "b", "c"]
WORDS = ["tea", "coffee", "paris", "berlin", "cat", "dog", "item42", "jazz", "blue", "red"]

_STORES: dict[str, Any] = {}
_DATABASES: list[tuple[str, str]] = []
_EXAMPLE = itertools.count()


def _shared_store(request: pytest.FixtureRequest, backend: str) -> Any:
    # One store per backend for all examples keeps the test fast; every example
    # writes into fresh namespaces (a per-example prefix), so examples cannot
    # interfere.
    if backend not in _STORES:
        kwargs: dict[str, Any] = {
            "embedder": HashEmbedder(32),
            "touch_flush_interval": None,
            "near_duplicate_threshold": 0.9,
        }
        if backend == "duckdb":
            folder = request.getfixturevalue("tmp_path_factory").mktemp("iso")
            _STORES[backend] = DuckDBStore(Path(folder) / "iso.duckdb", **kwargs)
        else:
            import psycopg
            from psycopg.conninfo import conninfo_to_dict, make_conninfo

            from actormem.store._postgres import PostgresStore

            server = request.getfixturevalue("pg_server_dsn")
            name = "iso_" + uuid.uuid4().hex[:12]
            with psycopg.connect(server, autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE "{name}"')
            _DATABASES.append((server, name))
            params = conninfo_to_dict(server)
            params["dbname"] = name
            _STORES[backend] = PostgresStore(make_conninfo(**params), **kwargs)
    return _STORES[backend]


memory = st.tuples(
    st.sampled_from(USERS),
    st.sampled_from(AGENTS),
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join),
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    memories=st.lists(memory, min_size=1, max_size=30),
    query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join),
    scope_user=st.sampled_from(USERS),
    scope_agent=st.one_of(st.none(), st.sampled_from(AGENTS)),
    mode=st.sampled_from(["hybrid", "keyword", "vector"]),
    use_filter=st.booleans(),
)
@pytest.mark.parametrize("backend", ["duckdb", "postgres"])
def test_search_never_leaves_its_namespace(
    request: pytest.FixtureRequest,
    backend: str,
    memories: list[tuple[str, str, str]],
    query: str,
    scope_user: str,
    scope_agent: str | None,
    mode: str,
    use_filter: bool,
) -> None:
    store = _shared_store(request, backend)
    prefix = f"ex{next(_EXAMPLE)}"
    owner: dict[str, tuple[str, str]] = {}
    for user, agent, text in memories:
        ns = Namespace(user_id=f"{prefix}-{user}", agent_id=agent)
        res = store.add(ns, text)
        owner[res.id] = (ns.user_id or "", agent)
    scope = Namespace(user_id=f"{prefix}-{scope_user}", agent_id=scope_agent)
    filters = SearchFilters(agent_id="b") if use_filter else None
    hits = store.search(query, scope, limit=50, filters=filters, mode=mode)  # type: ignore[arg-type]
    expected = {
        mid
        for mid, (u, a) in owner.items()
        if u == scope.user_id
        and (scope_agent is None or a == scope_agent)
        and (not use_filter or a == "b")
        and store.get(scope, mid) is not None
    }
    for hit in hits:
        assert hit.memory.id in owner, "hit from an earlier example's namespace"
        assert scope.contains(hit.memory.namespace)
        assert hit.memory.id in expected
    if mode == "vector":
        # vector search ranks every memory in scope: all of them must come back
        assert {h.memory.id for h in hits} == expected


def teardown_module() -> None:
    for store in _STORES.values():
        store.close()
    _STORES.clear()
    if _DATABASES:
        import psycopg

        for server, name in _DATABASES:
            with psycopg.connect(server, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        _DATABASES.clear()

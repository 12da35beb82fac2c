"""Fixtures of the store suite: every backend runs the same tests.

``make_store`` is parametrised over backends: DuckDB (a file per store name)
and PostgreSQL (a database per store name on the suite's server, see
``tests/_postgres.py``; the same name in one test opens the same database).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from actormem.models.embedders import HashEmbedder
from actormem.store import DuckDBStore, MemoryStore, Namespace

BACKENDS = ["duckdb", "postgres"]


class FakeClock:
    """A settable clock (Unix seconds)."""

    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, days: float = 0.0, seconds: float = 0.0) -> None:
        self.now += days * 86_400 + seconds


StoreFactory = Callable[..., Any]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(params=BACKENDS)
def make_store(
    request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock
) -> Iterator[StoreFactory]:
    """A factory of stores of the parametrised backend (closed after the test)."""
    opened: list[Any] = []
    backend = request.param
    only = request.node.get_closest_marker("duckdb_only")
    if only is not None and backend != "duckdb":
        pytest.skip(f"DuckDB only: {only.args[0] if only.args else 'DuckDB internals'}")
    databases: dict[str, str] = {}

    def _pg_database(name: str) -> str:
        # Created and dropped here, not through ``pg_dsn``: a fixture requested
        # lazily is torn down before this one, i.e. before its stores close.
        if name not in databases:
            databases[name] = _extra_database(request.getfixturevalue("pg_server_dsn"))
        return databases[name]

    def _open(name: str = "mem", **kwargs: Any) -> Any:
        kwargs.setdefault("embedder", HashEmbedder(64))
        kwargs.setdefault("clock", clock)
        kwargs.setdefault("touch_flush_interval", None)
        kwargs.setdefault("near_duplicate_threshold", None)
        if backend == "duckdb":
            store = DuckDBStore(tmp_path / f"{name}.duckdb", **kwargs)
        elif backend == "postgres":
            from actormem.store._postgres import PostgresStore

            store = PostgresStore(_pg_database(name), **kwargs)
        else:  # pragma: no cover - future backends
            raise AssertionError(backend)
        assert isinstance(store, MemoryStore)
        opened.append(store)
        return store

    yield _open
    for store in opened:
        store.close()
    for dsn in databases.values():
        _drop_database(request.getfixturevalue("pg_server_dsn"), dsn)


def _extra_database(server_dsn: str) -> str:
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    name = "t_" + uuid.uuid4().hex[:16]
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    params = conninfo_to_dict(server_dsn)
    params["dbname"] = name
    return make_conninfo(**params)


def _drop_database(server_dsn: str, dsn: str) -> None:
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    name = conninfo_to_dict(dsn)["dbname"]
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def store(make_store: StoreFactory) -> Any:
    return make_store()


@pytest.fixture
def ns() -> Namespace:
    return Namespace(user_id="alice", agent_id="assistant")

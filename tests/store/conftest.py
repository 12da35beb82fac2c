"""Fixtures of the store suite: every backend runs the same tests.

``make_store`` is parametrised over backends; a later PostgreSQL backend adds
its name to ``BACKENDS`` and a branch in ``_open``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from actormem.models.embedders import HashEmbedder
from actormem.store import DuckDBStore, MemoryStore, Namespace

BACKENDS = ["duckdb"]


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

    def _open(name: str = "mem", **kwargs: Any) -> Any:
        kwargs.setdefault("embedder", HashEmbedder(64))
        kwargs.setdefault("clock", clock)
        kwargs.setdefault("touch_flush_interval", None)
        kwargs.setdefault("near_duplicate_threshold", None)
        if backend == "duckdb":
            store = DuckDBStore(tmp_path / f"{name}.duckdb", **kwargs)
        else:  # pragma: no cover - future backends
            raise AssertionError(backend)
        assert isinstance(store, MemoryStore)
        opened.append(store)
        return store

    yield _open
    for store in opened:
        store.close()


@pytest.fixture
def store(make_store: StoreFactory) -> Any:
    return make_store()


@pytest.fixture
def ns() -> Namespace:
    return Namespace(user_id="alice", agent_id="assistant")

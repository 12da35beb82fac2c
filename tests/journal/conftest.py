from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from actormem import MemoryRuntime
from actormem.journal import JournalConfig
from actormem.models.embedders import HashEmbedder
from actormem.recorder import RecorderConfig
from actormem.store import DuckDBStore, Namespace

NS = Namespace(user_id="ada", agent_id="helper")

MakeRuntime = Callable[..., MemoryRuntime]


@pytest.fixture
def make_runtime(tmp_path: Path) -> Iterator[MakeRuntime]:
    """Runtimes over one DuckDB file (HashEmbedder) and one memory folder; closed after."""
    opened: list[tuple[MemoryRuntime, DuckDBStore]] = []

    def make(namespace: Namespace = NS, model: Any = None, **journal: Any) -> MemoryRuntime:
        for rt, store in opened:  # one process, one open store per file
            rt.close()
            store.close()
        opened.clear()
        # no background flush of access counters: its write, when its 5 s timer fires
        # inside a turn on a loaded machine, is a synced record of its own, and the
        # tests count a turn's journal writes and syncs
        store = DuckDBStore(
            tmp_path / "mem.duckdb", embedder=HashEmbedder(), touch_flush_interval=None
        )
        rt = MemoryRuntime(
            session_dir=tmp_path / "sessions",
            store=store,
            namespace=namespace,
            recorder=RecorderConfig(batch_seconds=0.01, idle_seconds=None),
            journal=JournalConfig(memory_dir=tmp_path / "agents", **journal),
            model=model,
        )
        opened.append((rt, store))
        return rt

    yield make
    for rt, store in opened:
        rt.close()
        store.close()

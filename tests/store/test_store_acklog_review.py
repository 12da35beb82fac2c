"""The acknowledgement log under the faults a review found (issue 16 point 1).

Each test reproduces one way an acknowledged write could be lost, or a store
bricked, with real files: a value DuckDB refuses only when it applies the
record, a second store object on the same file, records damaged the way a
disk or a power cut damages them (the log's bytes are written by hand), and
a close whose drain fails.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest

from actormem.models.embedders import HashEmbedder
from actormem.store import DuckDBStore, InvalidMemoryError, Namespace

NS = Namespace(user_id="ada", agent_id="bot")


def _open(path: Path, **kwargs: object) -> DuckDBStore:
    kwargs.setdefault("embedder", HashEmbedder(64))
    kwargs.setdefault("touch_flush_interval", None)
    return DuckDBStore(path, **kwargs)  # type: ignore[arg-type]


BAD_TS = [1e13, -1.0, math.nan, math.inf, "2020-01-01", True]


@pytest.mark.parametrize("ts", BAD_TS, ids=repr)
def test_a_journal_timestamp_duckdb_cannot_store_is_refused_at_the_call(
    tmp_path: Path, ts: object
) -> None:
    """journal_write and log_append with a bad ts: refused naming ts, nothing acknowledged,
    later writes, reads, close and reopen unaffected (before: acknowledged, then every
    later record stuck behind it and the store would not reopen)."""
    path = tmp_path / "m.duckdb"
    store = _open(path)
    store.journal_write(NS, [("note", "first entry", {}, time.time())])
    log_size = store._acklog.size if store._acklog is not None else 0
    with pytest.raises(InvalidMemoryError, match=r"entries\[1\]\.ts"):
        store.journal_write(NS, [("note", "ok", {}, time.time()), ("note", "bad", {}, ts)])  # type: ignore[list-item]
    with pytest.raises(InvalidMemoryError, match="ts"):
        store.log_append(NS, "note", "bad", ts=ts)  # type: ignore[arg-type]
    assert store._acklog is not None and store._acklog.size in (0, log_size)
    good = store.add(NS, "an ordinary memory added afterwards").id
    store.journal_write(NS, [("note", "second entry", {}, time.time())])
    assert [e.content for e in store.log_entries(NS)] == ["first entry", "second entry"]
    store.flush()
    store.close()
    with _open(path) as again:
        assert again.get(NS, good) is not None
        assert len(again.log_entries(NS)) == 2


@pytest.mark.parametrize("meta", [[1, 2], "text", 3], ids=repr)
def test_journal_metadata_that_is_not_a_dict_is_refused_naming_it(
    tmp_path: Path, meta: object
) -> None:
    with _open(tmp_path / "m.duckdb") as store:
        with pytest.raises(InvalidMemoryError, match=r"entries\[0\]\.metadata"):
            store.journal_write(NS, [("note", "x", meta, time.time())])  # type: ignore[list-item]
        with pytest.raises(InvalidMemoryError, match="metadata"):
            store.log_append(NS, "note", "x", metadata=meta)  # type: ignore[arg-type]
        assert store.log_entries(NS) == []

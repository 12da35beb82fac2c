"""The acknowledgement log under the faults a review found (issue 16 point 1).

Each test reproduces one way an acknowledged write could be lost, or a store
bricked, with real files: a value DuckDB refuses only when it applies the
record, a second store object on the same file, records damaged the way a
disk or a power cut damages them (the log's bytes are written by hand), and
a close whose drain fails.
"""

from __future__ import annotations

import math
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from actormem.models.embedders import HashEmbedder
from actormem.store import (
    DuckDBStore,
    InvalidMemoryError,
    Namespace,
    StoreClosedError,
    StoreLockedError,
)

from .test_store_acklog import _FailingWrites

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


def test_a_second_store_object_on_an_open_file_is_refused(tmp_path: Path) -> None:
    """Two store objects on one file in one process: the second is refused, by any path
    to the file, and the first one's acknowledged writes survive a SIGKILL (before: the
    second open cut the first one's log and both appended over each other)."""
    path = tmp_path / "m.duckdb"
    link = tmp_path / "link.duckdb"
    script = textwrap.dedent(
        f"""
        import os, signal
        from actormem.models.embedders import HashEmbedder
        from actormem.store import DuckDBStore, Namespace
        ns = Namespace(user_id="ada", agent_id="bot")
        a = DuckDBStore({str(path)!r}, embedder=HashEmbedder(64), touch_flush_interval=None)
        a._stop.set(); a._apply_wake.set()  # applier idle: the records stay in the log only
        print("ACK", a.add(ns, "acknowledged by store A").id, flush=True)
        os.symlink({str(path)!r}, {str(link)!r})
        for p in ({str(path)!r}, {str(link)!r}):
            try:
                DuckDBStore(p, embedder=HashEmbedder(64), touch_flush_interval=None)
                print("SECOND OPEN ALLOWED", flush=True)
            except Exception as exc:
                print("REFUSED", type(exc).__name__, flush=True)
        print("ACK", a.add(ns, "second write through store A").id, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert proc.stdout.count("REFUSED StoreLockedError") == 2, proc.stdout
    acks = [line.split()[1] for line in proc.stdout.splitlines() if line.startswith("ACK")]
    assert len(acks) == 2
    with _open(path) as store:
        assert all(store.get(NS, m) is not None for m in acks)
        with pytest.raises(StoreLockedError, match="already open in this process"):
            _open(link)
    with _open(link) as again:  # closed: free again
        assert len(again.list(NS)) == 2


def test_close_closes_even_when_the_log_cannot_be_applied(tmp_path: Path) -> None:
    """DuckDB refusing the pending records at close (a full disk): close() logs it and
    still closes everything -- the file can be opened again in this process, and that
    open replays the acknowledged records (before: close raised and kept the file open)."""
    path = tmp_path / "c.duckdb"
    store = _open(path)
    store.add(NS, "in DuckDB")
    store.flush()
    store._wcur = _FailingWrites(store._wcur)
    store._acur = _FailingWrites(store._con.cursor())
    acked = [store.add(NS, f"only in the log {i}").id for i in range(3)]
    store.get(NS, acked[0])  # an access count pending: close would flush it
    store.close()
    assert store._closed
    with pytest.raises(StoreClosedError):
        store.add(NS, "after close")
    with _open(path) as again:
        assert all(again.get(NS, m) is not None for m in acked)
        assert len(again.list(NS)) == 4

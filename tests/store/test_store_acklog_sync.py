"""The acknowledgement log's background sync: a failure sticks, a fork starts clean.

Found by a read-only review with repros: a failed background ``fdatasync`` was
raised to the next writer only, after which later records were appended (and
synced) behind the one that never reached the disk -- a power cut then made
the log read as damaged and the store refused to open.  A forked child
inherited the sync's "busy" state without its thread and waited forever, and
its exit closed the parent's store, cutting the parent's log under pending
records.
"""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

import pytest

import actormem.store._acklog as acklog
from actormem.models.embedders import HashEmbedder
from actormem.store import DuckDBStore, Namespace, StoreError
from actormem.store._acklog import AckLog, encode

NS = Namespace(user_id="ada", agent_id="bot")


def _log(tmp_path: Path) -> AckLog:
    log = AckLog(str(tmp_path / "s.duckdb"))
    log.start("7" * 32)
    return log


def test_a_failed_background_sync_refuses_every_write_until_the_log_is_cut(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = _log(tmp_path)
    real = acklog.os.fdatasync
    fail = threading.Event()
    fail.set()

    def sync(fd: int) -> None:
        if fail.is_set():
            raise OSError(errno.EIO, "I/O error")
        real(fd)

    monkeypatch.setattr(acklog.os, "fdatasync", sync)
    monkeypatch.setattr("actormem.store._acklog_sync.os.fdatasync", sync)
    log.append(encode(1, ["SELECT 'start of a turn'"]), sync=False)
    for _ in range(2):  # sticky: every later writer is told, not only the first
        with pytest.raises(StoreError, match="syncing"):
            log.append(encode(2, ["SELECT 'end of the turn'"]))
        assert log.unsynced
    fail.clear()
    log.cut(1)  # the applier moved record 1 into DuckDB: it is durable there
    assert not log.unsynced
    log.append(encode(2, ["SELECT 'after the cut'"]))
    assert [r.seq for r in AckLog(str(tmp_path / "s.duckdb")).read(after=1)[1]] == [2]
    log.close(remove=False)


def _fork(child: object) -> int:
    """Run ``child()`` in a forked process; its exit status (0 when it returned)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            child()  # type: ignore[operator]
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def test_a_forked_child_does_not_wait_for_the_parents_sync_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = _log(tmp_path)
    in_sync, release = threading.Event(), threading.Event()
    real = acklog.os.fdatasync

    def slow_sync(fd: int) -> None:
        in_sync.set()
        release.wait(60)
        real(fd)

    monkeypatch.setattr("actormem.store._acklog_sync.os.fdatasync", slow_sync)
    log.append(encode(1, ["SELECT 'start'"]), sync=False)
    assert in_sync.wait(60)  # the parent's thread is inside its sync

    def child() -> None:
        done = threading.Event()
        threading.Thread(target=lambda: (log._bg.settle(), done.set()), daemon=True).start()
        if not done.wait(30):
            os._exit(3)  # waited for a thread that does not exist here

    try:
        assert _fork(child) == 0
    finally:
        release.set()
    log.close(remove=False)


def test_a_forked_child_never_closes_the_parents_store(tmp_path: Path) -> None:
    path = tmp_path / "p.duckdb"
    store = DuckDBStore(path, embedder=HashEmbedder(64), touch_flush_interval=None)
    try:
        # Hold the applier back so the records stay in the log: it takes only the
        # apply lock (not the writer lock, which alone let it cut the log when the
        # three adds outlasted its 0.2 s delay on a loaded machine).
        with store._write_lock, store._apply_lock:
            ids = [store.add(NS, f"pending memory {i}").id for i in range(3)]
            before = [r.seq for r in AckLog(str(path)).read()[1]]
            assert len(before) == 3, before
            assert _fork(store.close) == 0  # what a child's exit does for open stores
            assert [r.seq for r in AckLog(str(path)).read()[1]] == before
        assert all(store.get(NS, i) is not None for i in ids)
    finally:
        store.close()
    with DuckDBStore(path, embedder=HashEmbedder(64)) as again:
        assert all(again.get(NS, i) is not None for i in ids)

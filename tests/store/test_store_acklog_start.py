"""A turn's start kept in the start slot (``<db>.acklog.start``) until a record makes it durable.

The start (``journal_write(..., sync=False)``) must survive a killed process;
the next synced journal write carries its rows (one record, one sync), any
other write appends it to the log first, and the applier may apply it before
either.  Each way, a process SIGKILLed at that point must reopen with the
start's rows exactly once; a slot a power cut garbled (never acknowledged as
durable) is ignored.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

from actormem.models.embedders import HashEmbedder
from actormem.store import DuckDBStore, Namespace, StoreError
from actormem.store._acklog import AckLog
from actormem.store._acklog_start import HEADER_LEN

NS = Namespace(user_id="ada", agent_id="bot")
T0 = 1_700_000_000.0


def _open(path: Path) -> DuckDBStore:
    return DuckDBStore(path, embedder=HashEmbedder(64), touch_flush_interval=None)


def _killed(path: Path, steps: str) -> None:
    """Run ``steps`` on a store of ``path`` in a child, then SIGKILL it (after "ACK")."""
    script = (
        textwrap.dedent(
            f"""
        import os, signal
        from actormem.models.embedders import HashEmbedder
        from actormem.store import DuckDBStore, Namespace, StoreError
        store = DuckDBStore({str(path)!r}, embedder=HashEmbedder(64), touch_flush_interval=None)
        store._stop.set()  # no applier step: what is applied is what the steps apply
        ns = Namespace(user_id="ada", agent_id="bot")
        store.journal_write(ns, [("SYSTEM", "first", {{}}, {T0})], {{"now": "idle"}})
        store.journal_state(ns)  # applied: what follows is in the log or the slot only
        """
        )
        + textwrap.dedent(steps)
        + textwrap.dedent(
            """
        print("ACK", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        """
        )
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert proc.stdout.split() == ["ACK"]


START = f"""
store.journal_write(
    ns, [("USER_FEEDBACK", "the turn's start", {{}}, {T0 + 1})], {{"now": "in flight"}},
    sync=False,
)
"""


def test_a_start_only_in_the_slot_is_applied_at_reopen(tmp_path: Path) -> None:
    path = tmp_path / "s.duckdb"
    _killed(path, START)
    assert AckLog(str(path)).read()[1] == []  # not a record of the log
    with _open(path) as store:
        assert [e.content for e in store.log_entries(NS)] == ["first", "the turn's start"]
        assert store.journal_state(NS) == {"now": "in flight"}


def test_a_start_carried_by_the_turns_end_is_one_record_applied_once(tmp_path: Path) -> None:
    path = tmp_path / "s.duckdb"
    end = f"""
    store.journal_write(ns, [("THOUGHT", "the reply", {{}}, {T0 + 2})], {{"now": "done"}})
    """
    _killed(path, START + textwrap.dedent(end))
    records = AckLog(str(path)).read()[1]
    assert len(records) == 1  # the end's record holds the start's rows too
    with _open(path) as store:
        contents = [e.content for e in store.log_entries(NS)]
        assert contents == ["first", "the turn's start", "the reply"]
        assert [e.seq for e in store.log_entries(NS)] == [1, 2, 3]
        assert store.journal_state(NS) == {"now": "done"}


def test_another_write_carries_the_start_in_its_record(tmp_path: Path) -> None:
    """A recorded batch during the model call: one record and one sync for it and the start."""
    path = tmp_path / "s.duckdb"
    other = """
    store.add(ns, "a memory written during the model call", kind="fact")
    """
    _killed(path, START + textwrap.dedent(other))
    records = AckLog(str(path)).read()[1]
    assert len(records) == 1  # the memory's record holds the start's rows too
    with _open(path) as store:
        assert [e.content for e in store.log_entries(NS)] == ["first", "the turn's start"]
        assert store.journal_state(NS) == {"now": "in flight"}
        assert [m.content for m in store.list(NS)] == ["a memory written during the model call"]


def test_a_carried_start_then_the_turns_end_keep_their_order(tmp_path: Path) -> None:
    """The start carried by a memory write, then the end's own record: numbers consecutive."""
    path = tmp_path / "s.duckdb"
    steps = f"""
    store.add(ns, "a memory written during the model call", kind="fact")
    store.journal_write(ns, [("THOUGHT", "the reply", {{}}, {T0 + 2})], {{"now": "done"}})
    """
    _killed(path, START + textwrap.dedent(steps))
    records = AckLog(str(path)).read()[1]
    assert [r.seq for r in records] == [records[0].seq, records[0].seq + 1]
    with _open(path) as store:
        entries = store.log_entries(NS)
        assert [e.content for e in entries] == ["first", "the turn's start", "the reply"]
        assert [e.seq for e in entries] == [1, 2, 3]
        assert store.journal_state(NS) == {"now": "done"}
        assert len(store.list(NS)) == 1


def test_a_compaction_carries_the_start_and_sees_its_rows(tmp_path: Path) -> None:
    """A log compaction's statements after the start's rows, in one record."""
    path = tmp_path / "s.duckdb"
    steps = """
    first = store.log_entries(ns)[0]
    store.log_compact(ns, [first.id], summary_id="s1", summary="the first entry")
    """
    _killed(path, START + textwrap.dedent(steps))
    assert len(AckLog(str(path)).read()[1]) == 1
    with _open(path) as store:
        live = store.log_entries(NS)
        assert [e.content for e in live] == ["the turn's start"]  # "first" compacted
        assert [c.summary_id for c in store.log_compactions(NS)] == ["s1"]
        assert store.journal_state(NS) == {"now": "in flight"}


def test_a_start_the_applier_applied_is_not_applied_again(tmp_path: Path) -> None:
    path = tmp_path / "s.duckdb"
    applied = f"""
    store.journal_state(ns)  # applies the start: the slot's copy is stale
    store.journal_write(ns, [("THOUGHT", "the reply", {{}}, {T0 + 2})], {{"now": "done"}})
    """
    _killed(path, START + textwrap.dedent(applied))
    with _open(path) as store:
        contents = [e.content for e in store.log_entries(NS)]
        assert contents == ["first", "the turn's start", "the reply"]
        assert store.journal_state(NS) == {"now": "done"}


def test_sync_log_makes_a_pending_start_a_synced_record(tmp_path: Path) -> None:
    path = tmp_path / "s.duckdb"
    store = _open(path)
    try:
        store._stop.set()  # no applier step
        store.journal_write(NS, [("SYSTEM", "first", {}, T0)], {"now": "idle"})
        store.journal_state(NS)
        store.journal_write(NS, [("USER_FEEDBACK", "start", {}, T0 + 1)], {"now": "a"}, sync=False)
        assert store.log_unsynced
        store.sync_log()
        assert not store.log_unsynced
        assert store._acklog is not None
        assert [r.seq for r in store._acklog.read()[1]] == [store._seq]
        # a second start while one is pending: the first goes to the log first
        store.journal_write(NS, [("USER_FEEDBACK", "two", {}, T0 + 2)], {"now": "b"}, sync=False)
        store.journal_write(NS, [("USER_FEEDBACK", "three", {}, T0 + 3)], {"now": "c"}, sync=False)
        assert [r.seq for r in store._acklog.read()[1]] == [store._seq - 2, store._seq - 1]
        assert store.log_unsynced
    finally:
        store.close()
    with _open(path) as store:
        assert [e.content for e in store.log_entries(NS)] == ["first", "start", "two", "three"]
        assert store.journal_state(NS) == {"now": "c"}


class _NotingWait(threading.Condition):
    """The store's start condition, noting when a thread waits on it."""

    def __init__(self, lock: Any) -> None:
        super().__init__(lock)
        self.waiting = threading.Event()

    def wait(self, timeout: float | None = None) -> bool:
        self.waiting.set()
        return super().wait(timeout)


def test_sync_log_wait_lets_the_turns_end_carry_the_start(tmp_path: Path) -> None:
    """NOW.md's writer waits for the end instead of syncing the start as a record of its own."""
    path = tmp_path / "s.duckdb"
    store = _open(path)
    try:
        store._stop.set()  # no applier step
        store.journal_write(NS, [("SYSTEM", "first", {}, T0)], {"now": "idle"})
        store.journal_state(NS)
        cond = store._start_done = _NotingWait(store._logged_lock)
        store.journal_write(NS, [("USER_FEEDBACK", "start", {}, T0 + 1)], {"now": "a"}, sync=False)
        done = threading.Event()
        waiter = threading.Thread(target=lambda: (store._sync_log(60), done.set()))
        waiter.start()
        assert cond.waiting.wait(60)
        assert not done.is_set() and store.log_unsynced
        store.journal_write(NS, [("THOUGHT", "end", {}, T0 + 2)], {"now": "done"})
        waiter.join(60)
        assert done.is_set()
        assert store._acklog is not None
        assert len(store._acklog.read()[1]) == 1  # the end carried it: no record of its own
        # nothing carries it within the wait: synced as a record of its own
        store.journal_write(NS, [("USER_FEEDBACK", "two", {}, T0 + 3)], {"now": "b"}, sync=False)
        store._sync_log(0.001)
        assert not store.log_unsynced
        assert len(store._acklog.read()[1]) == 2
    finally:
        store.close()
    with _open(path) as store:
        assert [e.content for e in store.log_entries(NS)] == ["first", "start", "end", "two"]
        assert store.journal_state(NS) == {"now": "b"}


def test_sync_log_stops_waiting_once_its_caller_may_not(tmp_path: Path) -> None:
    """A flush waiting for NOW.md (the turn's own thread, perhaps) ends the writer's wait."""
    path = tmp_path / "s.duckdb"
    store = _open(path)
    try:
        store._stop.set()  # no applier step
        store.journal_write(NS, [("SYSTEM", "first", {}, T0)], {"now": "idle"})
        store.journal_state(NS)
        cond = store._start_done = _NotingWait(store._logged_lock)
        store.journal_write(NS, [("USER_FEEDBACK", "start", {}, T0 + 1)], {"now": "a"}, sync=False)
        flushing = threading.Event()
        waiter = threading.Thread(
            target=store._sync_log, args=(3600, lambda: not flushing.is_set())
        )
        waiter.start()
        assert cond.waiting.wait(60)
        flushing.set()  # no end comes: the start is synced as a record of its own
        waiter.join(60)
        assert not waiter.is_alive()
        assert not store.log_unsynced
        assert store._acklog is not None and len(store._acklog.read()[1]) == 1
    finally:
        store.close()


@pytest.mark.parametrize("damage", ["torn", "garbled", "other database", "missing"])
def test_a_damaged_or_foreign_slot_is_ignored(tmp_path: Path, damage: str) -> None:
    """What a power cut can leave of the unsynced slot: the start is lost, nothing else."""
    path = tmp_path / "s.duckdb"
    _killed(path, START)
    slot = Path(str(path) + ".acklog.start")
    raw = bytearray(slot.read_bytes())
    if damage == "torn":
        raw = raw[: len(raw) - 5]
    elif damage == "garbled":
        raw[HEADER_LEN + 30] ^= 0x01
    elif damage == "other database":
        other = tmp_path / "other.duckdb"
        _killed(other, START)
        raw = bytearray(Path(str(other) + ".acklog.start").read_bytes())
    if damage == "missing":
        slot.unlink()
    else:
        slot.write_bytes(bytes(raw))
    with _open(path) as store:
        assert [e.content for e in store.log_entries(NS)] == ["first"]
        assert store.journal_state(NS) == {"now": "idle"}
        store.journal_write(NS, [("THOUGHT", "after", {}, T0 + 5)], {"now": "later"})
    with _open(path) as store:  # and the store goes on as usual
        assert [e.content for e in store.log_entries(NS)] == ["first", "after"]


def test_a_slot_that_is_not_a_regular_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.duckdb"
    _open(path).close()
    slot = str(path) + ".acklog.start"
    os.unlink(slot)
    os.mkfifo(slot)
    with pytest.raises(StoreError, match=r"start slot .* not a regular file"):
        _open(path)
    os.unlink(slot)
    with _open(path) as store:
        assert store.log_entries(NS) == []

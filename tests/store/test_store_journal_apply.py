"""The journal's acknowledged writes applied together, and one history read per batch.

A turn with the journal acknowledges two records in the store's log (its log
entries and the NOW state).  The applier merges consecutive records' rows
into one insert and one upsert that keeps each key's last value; a record of
other statements between them (a compaction) must see exactly the rows written
before it.  The outcome must be what applying the records one at a time gives.
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
from actormem.store import DuckDBStore, Namespace
from actormem.store._acklog import AckLog, encode

NS = Namespace(user_id="ada", agent_id="bot")
OTHER = Namespace(user_id="ada", agent_id="other")


def _open(path: Path) -> DuckDBStore:
    return DuckDBStore(path, embedder=HashEmbedder(64), touch_flush_interval=None)


def _writes(store: DuckDBStore, *, drain_each: bool) -> None:
    """Journal writes with overlapping state keys and a statement record between them."""
    steps: list[tuple[Any, ...]] = [
        ("journal", NS, [("THOUGHT", "one", {}), ("SYSTEM", "two", {})], {"now": "a1", "h": "x"}),
        ("journal", OTHER, [("THOUGHT", "other ns", {})], {"now": "o1"}),
        ("script", "UPDATE activity_log SET content = content || ' (seen)'"),
        ("journal", NS, [("THOUGHT", "three", {})], {"now": "a2"}),
        ("journal", NS, [], {"now": "a3", "k2": "b"}),
        ("journal", NS, [("TOOL_USE", "four", {"tool": "t"})], {"h": "y"}),
        ("journal", OTHER, [], {"now": "o2"}),
    ]
    for step in steps:
        if step[0] == "script":
            with store._write_lock:
                store._write_script("a statement between journal writes", [str(step[1])])
        else:
            _, ns, entries, state = step
            rows = [(kind, text, meta, 1_700_000_000.0) for kind, text, meta in entries]
            store.journal_write(ns, rows, state)
        if drain_each:
            store.journal_state(NS)  # a read applies what is pending


def _start(store: DuckDBStore) -> None:
    """A first write in each namespace (it reads the namespace's last seq from DuckDB)."""
    for ns in (NS, OTHER):
        store.journal_write(ns, [("SYSTEM", "start", {}, 1_600_000_000.0)], {})
    store.journal_state(NS)


def _snapshot(store: DuckDBStore) -> Any:
    return tuple(
        (
            [(e.seq, e.entry_type, e.content, e.metadata) for e in store.log_entries(ns)],
            store.journal_state(ns),
        )
        for ns in (NS, OTHER)
    )


def test_merged_journal_records_leave_what_applying_them_one_by_one_leaves(
    tmp_path: Path,
) -> None:
    one_by_one = _open(tmp_path / "each.duckdb")
    try:
        _start(one_by_one)
        _writes(one_by_one, drain_each=True)
        expected = _snapshot(one_by_one)
    finally:
        one_by_one.close()
    assert [e[2] for e in expected[0][0]] == [
        "start (seen)",
        "one (seen)",
        "two (seen)",
        "three",
        "four",
    ]
    assert expected[0][1] == {"now": "a3", "h": "y", "k2": "b"}
    assert expected[1][1] == {"now": "o2"}

    merged = _open(tmp_path / "merged.duckdb")
    try:
        _start(merged)
        with merged._apply_lock:  # the applier waits: every record is applied in one step
            _writes(merged, drain_each=False)
            assert len(merged._logged) == 7
        assert _snapshot(merged) == expected
    finally:
        merged.close()
    reopened = _open(tmp_path / "merged.duckdb")
    try:
        assert _snapshot(reopened) == expected
    finally:
        reopened.close()


def test_last_ops_is_the_last_history_operation_of_each_memory(tmp_path: Path) -> None:
    store = _open(tmp_path / "ops.duckdb")
    try:
        added = store.add(NS, "the user likes green tea").id
        updated = store.add(NS, "the user lives in Porto").id
        store.update(NS, updated, content="the user lives in Lisbon")
        store.update(NS, updated, importance=0.9)
        deleted = store.add(NS, "the user has a cat").id
        store.delete(NS, deleted, reason="wrong")
        elsewhere = store.add(OTHER, "another agent's memory").id
        ids = [added, updated, deleted, elsewhere, "no-such-id", updated]
        expected = {mid: store.history(NS, mid)[-1].op for mid in ids if store.history(NS, mid)}
        assert store.last_ops(NS, ids) == expected
        assert set(expected) == {added, updated, deleted}
        assert expected[updated] == "UPDATE" and expected[deleted] == "DELETE"
        assert store.last_ops(NS, []) == {}
    finally:
        store.close()


def test_last_ops_reads_pending_writes_without_applying_them(tmp_path: Path) -> None:
    """The daily journal's history read after each recorded batch used to apply the
    store's pending writes first (a DuckDB commit on the journal's thread, a fifth
    of a journaled turn's CPU).  It reads their history rows from the log's records
    in memory instead, and answers what the history says once they are applied."""
    store = _open(tmp_path / "pending.duckdb")
    try:
        added = store.add(NS, "the user likes green tea").id
        updated = store.add(NS, "the user lives in Porto").id
        deleted = store.add(NS, "the user has a cat").id
        store.update(NS, updated, importance=0.9)
        store.journal_state(NS)  # a read: DuckDB holds everything so far
        assert not store._logged
        answers: dict[str, dict[str, str]] = {}
        with store._apply_lock:  # the applier waits: what follows stays pending
            store.update(NS, updated, content="the user lives in Lisbon")
            store.delete(NS, deleted, reason="wrong")
            fresh = store.add(NS, "the user rides trains").id
            elsewhere = store.add(OTHER, "another agent's memory").id
            pending = len(store._logged)
            assert pending >= 4
            ids = [added, updated, deleted, fresh, elsewhere, "no-such-id"]

            def read() -> None:
                answers["agent"] = store.last_ops(NS, ids)
                answers["user"] = store.last_ops(Namespace(user_id="ada"), ids)

            reader = threading.Thread(target=read)
            reader.start()
            reader.join(timeout=60)
            assert not reader.is_alive(), "last_ops waited to apply the pending writes"
            assert len(store._logged) == pending  # nothing was applied by the read
        for scope, key in ((NS, "agent"), (Namespace(user_id="ada"), "user")):
            expected = {mid: h[-1].op for mid in ids if (h := store.history(scope, mid))}
            assert answers[key] == expected
        assert answers["agent"][updated] == "UPDATE" and answers["agent"][deleted] == "DELETE"
        assert answers["agent"][fresh] == "ADD" and elsewhere not in answers["agent"]
        assert answers["user"][elsewhere] == "ADD"
    finally:
        store.close()


def test_an_unsynced_journal_write_survives_a_killed_process(tmp_path: Path) -> None:
    """``sync=False`` returns once the record is written: SIGKILL right after loses nothing."""
    path = tmp_path / "kill.duckdb"
    script = textwrap.dedent(
        f"""
        import os, signal
        from actormem.models.embedders import HashEmbedder
        from actormem.store import DuckDBStore, Namespace
        store = DuckDBStore({str(path)!r}, embedder=HashEmbedder(64), touch_flush_interval=None)
        ns = Namespace(user_id="ada", agent_id="bot")
        store.journal_write(ns, [("SYSTEM", "first", {{}}, 1_700_000_000.0)], {{"now": "a"}})
        store.journal_state(ns)  # applied: the next record stays in the log only
        store.journal_write(
            ns, [("USER_FEEDBACK", "the turn's start", {{}}, 1_700_000_001.0)],
            {{"now": "in flight"}}, sync=False,
        )
        print("ACK", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert proc.stdout.split() == ["ACK"]
    store = _open(path)
    try:
        assert [e.content for e in store.log_entries(NS)] == ["first", "the turn's start"]
        assert store.journal_state(NS) == {"now": "in flight"}
    finally:
        store.close()


def test_nothing_is_appended_after_an_unsynced_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The log's reader tells damage from a torn tail by this rule (see _acklog)."""
    log = AckLog(str(tmp_path / "x.duckdb"))
    log.start("0" * 32)
    events: list[tuple[str, int]] = []
    lock = threading.Lock()
    real_pwrite, real_sync = os.pwrite, os.fdatasync

    def pwrite(fd: int, data: bytes, at: int) -> int:
        with lock:
            events.append(("write", at + len(data)))
        return real_pwrite(fd, data, at)

    def fdatasync(fd: int) -> None:
        size = os.fstat(fd).st_size
        real_sync(fd)
        with lock:
            events.append(("sync", size))

    real_pwritev = getattr(os, "pwritev", None)

    def pwritev(fd: int, buffers: list[bytes], at: int, flags: int = 0) -> int:
        size = sum(len(b) for b in buffers)
        with lock:
            events.append(("write", at + size))
        assert real_pwritev is not None
        written: int = real_pwritev(fd, buffers, at, flags)
        if flags:  # RWF_DSYNC: written and synced in one call
            with lock:
                events.append(("sync", os.fstat(fd).st_size))
        return written

    monkeypatch.setattr(os, "pwrite", pwrite)
    monkeypatch.setattr(os, "fdatasync", fdatasync)
    if real_pwritev is not None:
        monkeypatch.setattr(os, "pwritev", pwritev)
    try:
        for i in range(20):
            log.append(encode(i + 1, [f"SELECT {i}"]), sync=i % 3 != 2 and i % 2 == 0)
        log.settle()
        assert not log.unsynced
    finally:
        log.close(remove=False)
    written = synced = 0  # the end of the last record written, of the last sync
    for kind, end in events:
        if kind == "write":  # the record before it was synced first
            assert written == 0 or synced >= written, events
            written = end
        else:
            synced = max(synced, end)
    assert synced >= written > 0


def test_two_compactions_of_the_same_entries_at_once_let_exactly_one_through(
    tmp_path: Path,
) -> None:
    """The entries are checked before the writer lock: a compaction that came
    between the check and the write is seen, and the second one refused."""
    from actormem.store import InvalidMemoryError

    store = _open(tmp_path / "race.duckdb")
    try:
        for round_ in range(15):
            recs = store.journal_write(
                NS, [("THOUGHT", f"r{round_} e{i}", {}, 1.7e9 + i) for i in range(3)]
            )
            ids = [r.id for r in recs]
            gate = threading.Barrier(2)
            outcome: list[str] = []

            def compact(
                name: str,
                ids: list[str] = ids,
                gate: threading.Barrier = gate,
                outcome: list[str] = outcome,
            ) -> None:
                gate.wait()
                try:
                    store.log_compact(NS, ids, summary_id=name, summary=name)
                    outcome.append("ok")
                except InvalidMemoryError:
                    outcome.append("refused")

            threads = [threading.Thread(target=compact, args=(n,)) for n in ("a", "b")]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert sorted(outcome) == ["ok", "refused"], round_
        assert len(store.log_compactions(NS)) == 15
        assert store.log_entries(NS) == []
    finally:
        store.close()


def test_a_compaction_between_the_check_and_the_write_is_seen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same race as above, with its window held open: compaction A has
    read its entries as uncompacted (outside the writer lock) and waits until
    compaction B of the same entries has committed; A must then be refused,
    not write a second compaction of entries B already took."""
    from actormem.store import InvalidMemoryError

    store = _open(tmp_path / "window.duckdb")
    try:
        recs = store.journal_write(NS, [("THOUGHT", f"e{i}", {}, 1.7e9) for i in range(3)])
        ids = [r.id for r in recs]
        a_has_read, b_done = threading.Event(), threading.Event()
        real_check = store._compaction_check

        def held_open(entry_ids: list[str], ns_where: str) -> Any:
            row = real_check(entry_ids, ns_where)
            if threading.current_thread().name == "A" and not a_has_read.is_set():
                a_has_read.set()
                assert b_done.wait(60), "compaction B never finished"
            return row

        monkeypatch.setattr(store, "_compaction_check", held_open)
        outcome: dict[str, str] = {}

        def compact(name: str) -> None:
            try:
                store.log_compact(NS, ids, summary_id=name, summary=name)
                outcome[name] = "ok"
            except InvalidMemoryError as exc:
                outcome[name] = f"refused: {exc}"

        a = threading.Thread(target=compact, args=("A",), name="A")
        a.start()
        assert a_has_read.wait(60)
        compact("B")  # on this thread, while A sits between its check and its write
        assert store.log_entries(NS) == []  # a read applies B's logged write: only the
        b_done.set()  # re-check under the writer lock can tell A now, not a pending record
        a.join(60)
        assert outcome["B"] == "ok"
        assert outcome["A"].startswith("refused"), outcome
        assert [c.summary_id for c in store.log_compactions(NS)] == ["B"]
    finally:
        store.close()


def test_the_applier_starts_early_once_many_records_are_pending(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past ``APPLY_SOON`` pending records the applier does not wait out ``APPLY_DELAY``."""
    import actormem.store._duckdb_logged as logged

    monkeypatch.setattr(logged, "APPLY_DELAY", 3600.0)  # only the early start can apply
    monkeypatch.setattr(logged, "APPLY_SOON", 5)
    store = _open(tmp_path / "s.duckdb")
    try:
        applied = threading.Event()
        real = store._applied

        def noted(n: int) -> None:
            real(n)
            if n:
                applied.set()

        store._applied = noted  # type: ignore[method-assign]
        for i in range(4):
            store.add(NS, f"memory number {i}")
        assert len(store._logged) == 4 and not applied.is_set()
        store.add(NS, "the fifth pending record")
        assert applied.wait(60)
        assert store.count(NS) == 5
    finally:
        store.close()

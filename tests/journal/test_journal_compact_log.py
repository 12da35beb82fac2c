"""``log_compact`` through the store's log: acknowledged, replayed after a kill, checked first.

A compaction is one record of ``<db>.acklog`` (no DuckDB transaction under
the writer lock, which a turn's journal write would wait for).  Its entries
are checked first: those still pending in the log from their records, the
others in DuckDB, without applying the pending writes (a DuckDB transaction
per compaction); a pending compaction that names one is applied first.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from actormem.models.embedders import HashEmbedder
from actormem.store import DuckDBStore, InvalidMemoryError

from .conftest import NS


def _open(path: Path) -> DuckDBStore:
    return DuckDBStore(path, embedder=HashEmbedder(64), touch_flush_interval=None)


def test_a_compaction_acknowledged_then_killed_is_replayed(tmp_path: Path) -> None:
    path = tmp_path / "m.duckdb"
    script = textwrap.dedent(
        f"""
        import os, signal
        from actormem.models.embedders import HashEmbedder
        from actormem.store import DuckDBStore, Namespace
        store = DuckDBStore({str(path)!r}, embedder=HashEmbedder(64), touch_flush_interval=None)
        ns = Namespace(user_id="ada", agent_id="helper")
        recs = store.journal_write(
            ns, [("THOUGHT", f"entry {{i}}", {{}}, 1.7e9 + i) for i in range(30)]
        )
        comp = store.log_compact(ns, [r.id for r in recs[:20]], summary_id="s1", summary="sum")
        print("ACK", comp.id, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    cid = proc.stdout.split()[1]
    with _open(path) as store:
        comps = store.log_compactions(NS)
        assert [c.id for c in comps] == [cid]
        assert (comps[0].entries, comps[0].first_seq, comps[0].last_seq) == (20, 1, 20)
        every = store.log_entries(NS, compacted=None)
        assert [e.compaction_id for e in every] == [cid] * 20 + [None] * 10
        assert [e.content for e in store.log_entries(NS)] == [f"entry {i}" for i in range(20, 30)]


def test_entries_still_pending_in_the_log_are_applied_before_the_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _open(tmp_path / "m.duckdb") as store:
        # Nothing is applied to DuckDB by the applier or a read from here on:
        # the entries below stay pending in the store's log.
        monkeypatch.setattr(store, "_apply_pending", lambda **_: None)
        recs = store.journal_write(NS, [("THOUGHT", f"e{i}", {}, 1.7e9 + i) for i in range(5)])
        assert store._logged  # pending
        comp = store.log_compact(NS, [r.id for r in recs[:3]], summary_id="s", summary="x")
        assert (comp.entries, comp.first_seq, comp.last_seq) == (3, 1, 3)
        with pytest.raises(InvalidMemoryError, match="1 of the 1 entries"):
            store.log_compact(NS, [recs[0].id], summary_id="s", summary="again")  # compacted
        monkeypatch.undo()
        assert [e.content for e in store.log_entries(NS)] == ["e3", "e4"]


def test_a_kill_right_after_journal_writes_keeps_the_pending_entries(tmp_path: Path) -> None:
    """The writes a compaction's check applies are the ones acknowledged before it."""
    path = tmp_path / "m.duckdb"
    script = textwrap.dedent(
        f"""
        import os, signal
        from actormem.models.embedders import HashEmbedder
        from actormem.store import DuckDBStore, Namespace
        store = DuckDBStore({str(path)!r}, embedder=HashEmbedder(64), touch_flush_interval=None)
        ns = Namespace(user_id="ada", agent_id="helper")
        recs = store.journal_write(ns, [("THOUGHT", f"e{{i}}", {{}}, 1.7e9 + i) for i in range(4)])
        store.log_compact(ns, [recs[0].id], summary_id="s", summary="x")
        store.journal_write(ns, [("THOUGHT", "after", {{}}, 1.8e9)])
        print("ACK", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == -signal.SIGKILL and proc.stdout.strip() == "ACK", proc.stderr
    with _open(path) as store:
        assert [e.content for e in store.log_entries(NS)] == ["e1", "e2", "e3", "after"]
        assert [e.seq for e in store.log_entries(NS)] == [2, 3, 4, 5]
    assert not os.path.exists(str(path) + ".acklog.rejected")


def test_a_compaction_applies_nothing_pending(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Entries in DuckDB and entries still pending are checked without a DuckDB transaction."""
    with _open(tmp_path / "m.duckdb") as store:
        store._stop.set()  # no applier step: what is applied is what the calls apply
        older = store.journal_write(NS, [("THOUGHT", f"old{i}", {}, 1.7e9 + i) for i in range(4)])
        store.log_entries(NS)  # a read applies them
        single = store.log_append(NS, "THOUGHT", "one by one", ts=1.7e9 + 5)
        newer = store.journal_write(
            NS, [("THOUGHT", f"new{i}", {}, 1.7e9 + 9 + i) for i in range(4)]
        )
        assert store._logged  # the newer entries are pending
        applies: list[int] = []
        real = store._apply

        def counting(cur: object, pending: list[object]) -> None:
            applies.append(len(pending))
            real(cur, pending)

        monkeypatch.setattr(store, "_apply", counting)
        ids = [r.id for r in (*older, single, *newer[:2])]
        comp = store.log_compact(NS, ids, summary_id="s", summary="x")
        assert applies == []  # nothing was applied to check the entries
        assert (comp.entries, comp.first_seq, comp.last_seq) == (7, 1, 7)
        with pytest.raises(InvalidMemoryError, match="1 of the 2 entries"):
            store.log_compact(NS, [newer[1].id, newer[2].id], summary_id="s", summary="again")
        with pytest.raises(InvalidMemoryError, match="1 of the 2 entries"):
            store.log_compact(NS, [newer[2].id, "no-such-entry"], summary_id="s", summary="x")
        comp2 = store.log_compact(NS, [newer[2].id], summary_id="s2", summary="y")
        assert (comp2.first_seq, comp2.last_seq) == (8, 8)
        monkeypatch.undo()
        assert [e.content for e in store.log_entries(NS)] == ["new3"]
        every = store.log_entries(NS, compacted=None)
        assert [e.compaction_id for e in every] == [comp.id] * 7 + [comp2.id, None]

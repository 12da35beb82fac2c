"""What one agent turn costs the journal: transactions, pandas look-ups, unsynced views.

Not timed (performance is measured in ``benchmarks/bench_reply.py``): these
count what a regression would bring back -- a transaction per log entry,
DuckDB's Python client looking for pandas (a bound parameter or an Arrow
table on the turn's path) -- and check that the views written without fsync
are repaired from the record.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

import pytest

from actormem.agent import ReActAgent
from actormem.models.scripted import ScriptedModel
from actormem.store import DuckDBStore

from .conftest import NS, MakeRuntime


class _PandasSpy:
    """A meta-path finder that counts look-ups of ``pandas`` on one thread and finds nothing.

    Only the thread that made it (the agent's turn): a background thread's
    first Arrow table (the applier's, or a drain's, past 8 pending inserts)
    imports ``pyarrow.dataset`` once per process, which looks for pandas once.
    """

    def __init__(self) -> None:
        self.count = 0
        self.thread = threading.current_thread()

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if threading.current_thread() is not self.thread:
            return
        if name == "pandas" or name.startswith("pandas."):
            self.count += 1


def _store(rt: Any) -> DuckDBStore:
    store = rt.store
    assert isinstance(store, DuckDBStore)
    return store


def test_update_now_and_its_entries_commit_in_one_transaction(make_runtime: MakeRuntime) -> None:
    rt = make_runtime()
    rt.update_now("first objective", ["a"])
    store = _store(rt)
    before = store.change_counter
    rt.update_now(
        "second objective",
        ["b", "c"],
        also_log=[("USER_FEEDBACK", "please do the second thing", {"msg_id": "m1"})],
    )
    assert store.change_counter == before + 1  # status, 3 entries, state: one commit
    assert rt.journal is not None
    entries = rt.journal.entries()
    tail = [(e.entry_type, e.content) for e in entries[-3:]]
    assert tail[0] == ("USER_FEEDBACK", "please do the second thing")  # what led to it first
    assert tail[1] == ("SYSTEM", "objective changed from: first objective")
    assert tail[2][1].startswith("NOW in_flight: second objective")
    seqs = [e.seq for e in entries]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    assert store.journal_state(NS)["now"].count("second objective") == 1
    before = store.change_counter
    recs = rt.log_many([("THOUGHT", "one", {}), ("TOOL_USE", "two", {"tool": "t"})])
    assert store.change_counter == before + 1
    assert [r.seq for r in recs] == [seqs[-1] + 1, seqs[-1] + 2]
    # no backend keeps a NUL character: the journal replaces it, as the door does
    nul = rt.log_many([("THOUGHT", "nul \x00 inside", {"raw": "\x00"})])
    assert store.log_entries(NS)[-1].content == "nul \ufffd inside" == nul[0].content
    assert nul[0].metadata == {"raw": "\ufffd"}
    assert nul[0].seq == recs[-1].seq + 1


def test_seq_numbers_continue_after_reopen_and_single_appends(make_runtime: MakeRuntime) -> None:
    rt = make_runtime()
    rt.log_many([("THOUGHT", f"entry {i}", {}) for i in range(3)])
    rt.log("THOUGHT", "a single append")  # log_append's own transaction path
    rt = make_runtime()  # reopens the store: the seq cache starts empty
    rt.log_many([("THOUGHT", "after reopen", {})])
    seqs = [e.seq for e in _store(rt).log_entries(NS)]
    assert seqs == sorted(set(seqs)) and len(seqs) == len(set(seqs))


def test_a_reply_without_tools_commits_two_journal_transactions(
    make_runtime: MakeRuntime,
) -> None:
    rt = make_runtime()
    agent = ReActAgent("helper", ScriptedModel(lambda *_: "Noted.", cycle=True), rt)
    agent.reply("warm-up")
    rt.flush()
    store = _store(rt)
    writes: list[tuple[str, bool]] = []
    real = store._write_journal_rows

    def counting(
        what: str, log_rows: list[str], state_rows: dict[str, str], *, sync: bool = True, **kw: Any
    ) -> None:
        writes.append((what, sync))
        real(what, log_rows, state_rows, sync=sync, **kw)

    # each journal write is one acknowledged write, applied to DuckDB later in
    # the applier's single transaction; the start's is kept in the start slot,
    # and the end's record carries it: one record and one sync of the log
    store._write_journal_rows = counting  # type: ignore[method-assign]
    assert store._acklog is not None
    log_fd = store._acklog._fd
    syncs: list[str] = []
    real_pwritev, real_fdatasync = os.pwritev, os.fdatasync

    def pwritev(fd: int, buffers: list[bytes], at: int, flags: int = 0) -> int:
        if fd == log_fd:
            syncs.append("pwritev+dsync" if flags else "pwritev")
        return real_pwritev(fd, buffers, at, flags)

    def fdatasync(fd: int) -> None:
        if fd == log_fd:
            syncs.append("fdatasync")
        real_fdatasync(fd)

    # no other writer between the turn's start and end: the recorder's batch
    # is handed off after the turn, and the applier waits until it returned
    # (either would make the start a record of its own, synced first)
    gate = threading.Event()
    real_apply = store._apply_pending

    def held_apply(*, stopping: bool = True) -> None:
        if threading.current_thread() is store._applier:
            gate.wait()
        real_apply(stopping=stopping)

    turns: list[Any] = []
    seq = store._seq
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(os, "pwritev", pwritev)
        mp.setattr(os, "fdatasync", fdatasync)
        mp.setattr(store, "_apply_pending", held_apply)
        mp.setattr(rt, "record", turns.append)
        try:
            agent.reply("what is the capital of Portugal?")
        finally:
            gate.set()
    assert len(turns) == 1
    assert writes == [("journal write", False), ("journal write", True)]
    assert len([s for s in syncs if s != "pwritev"]) == 1, syncs
    assert store._seq == seq + 1  # one record: the end carried the start
    assert not store.log_unsynced
    assert rt.journal is not None
    kinds = [(e.entry_type, e.content[:14]) for e in rt.journal.entries()[-5:]]
    assert kinds == [
        ("USER_FEEDBACK", "what is the ca"),
        ("SYSTEM", "objective chan"),
        ("SYSTEM", "NOW in_flight:"),
        ("THOUGHT", "Noted."),
        ("SYSTEM", "NOW done: what"),
    ]


def test_a_reply_whose_model_fails_returns_with_its_journal_writes_synced(
    make_runtime: MakeRuntime,
) -> None:
    """The turn's start is written unsynced; a turn that ends any other way
    (here the model raises) still returns only once it is synced."""
    rt = make_runtime()
    store = _store(rt)

    def broken(*_: Any) -> str:
        raise RuntimeError("the model is down")

    agent = ReActAgent("helper", ScriptedModel(broken), rt)
    synced_before_return: list[bool] = []
    real = rt.sync_journal

    def watching() -> None:
        real()
        synced_before_return.append(not store.log_unsynced)

    rt.sync_journal = watching  # type: ignore[method-assign]
    out = agent.reply("please do the thing")
    assert "model is down" in out.text or agent.status.state == "error"
    assert synced_before_return == [True]
    assert not store.log_unsynced
    assert rt.journal is not None and rt.journal.now().objective == "please do the thing"


def test_a_journaled_reply_never_looks_for_pandas(make_runtime: MakeRuntime) -> None:
    rt = make_runtime(log_max_entries=12, log_keep_entries=4)  # compactions happen too
    agent = ReActAgent("helper", ScriptedModel(lambda *_: "Noted.", cycle=True), rt)
    agent.reply("warm-up: I like green tea")
    rt.flush()
    spy = _PandasSpy()
    sys.meta_path.insert(0, spy)  # type: ignore[arg-type]
    try:
        for i in range(12):
            agent.reply(f"turn {i}: I like green tea and trains to Lisbon number {i}")
        rt.flush()  # the recorder's commits and the daily journal, too
    finally:
        sys.meta_path.remove(spy)  # type: ignore[arg-type]
    assert rt.journal is not None and rt.journal.last_compaction is not None
    assert spy.count == 0


def test_an_empty_now_file_is_rewritten_from_the_record(make_runtime: MakeRuntime) -> None:
    rt = make_runtime()
    rt.update_now("keep this objective", ["step one"])
    assert rt.journal is not None
    path = rt.journal.folder / "NOW.md"
    path.write_text("")  # what a power cut can leave of an unsynced replace
    rt = make_runtime()
    assert rt.now().objective == "keep this objective"
    assert "keep this objective" in path.read_text()

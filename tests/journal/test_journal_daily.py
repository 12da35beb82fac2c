"""The daily journal: what the recorder committed, each line traceable to the store."""

from __future__ import annotations

import re
from typing import Any

from actormem import Msg
from actormem.events import Event, JournalWritten, MemoryRecorded
from actormem.journal import parse_journal_ids
from actormem.store import content_hash

from .conftest import NS, MakeRuntime


def test_journal_lines_trace_to_store_ids(make_runtime: MakeRuntime) -> None:
    rt = make_runtime()
    seen: list[Event] = []
    rt.subscribe(seen.append, JournalWritten)
    turns = [
        [Msg.user("Hi, I'm Ada. I live in Lisbon."), Msg.assistant("Hello Ada.")],
        [Msg.user("I'm allergic to peanuts."), Msg.assistant("Noted.")],
        [Msg.user("Actually I live in Porto now."), Msg.assistant("Updated.")],
    ]
    for turn in turns:
        rt.add(turn)
        rt.record(turn)
        rt.flush()
    assert rt.journal is not None and rt.store is not None
    text = rt.journal.read_day()
    assert text.startswith(f"# Journal {rt.journal.today()}")
    pairs = parse_journal_ids(text)
    assert len(pairs) >= 6
    for line in (ln for ln in text.splitlines() if ln.startswith("- ")):
        mid, rev = re.search(r"id:(\S+) rev:(\w+)", line).groups()  # type: ignore[union-attr]
        rec = rt.store.get(NS, mid, include_deleted=True)
        assert rec is not None, line
        # The line shows one revision of the memory: now, or one its history records.
        history = rt.store.history(NS, mid)
        texts = {rec.content} | {t for h in history for t in (h.old_content, h.new_content) if t}
        assert rev in {content_hash(t)[:8] for t in texts}, line
        shown = {" ".join(t.split()) for t in texts if content_hash(t).startswith(rev)}
        assert any(t[:50] in line for t in shown), line
    assert any("User lives in Porto" in ln and "(updated)" in ln for ln in text.splitlines())
    assert any(isinstance(e, JournalWritten) and e.ids for e in seen)
    path = rt.journal.day_path(rt.journal.today())
    assert str(path).endswith(f"/ada/helper/memory/{rt.journal.today()}.md")


def test_a_recorded_batch_reads_the_store_s_history_once(make_runtime: MakeRuntime) -> None:
    """Each read of DuckDB first applies the store's pending writes (a commit):
    a batch's changed memories are labelled from one read, not one per memory."""
    rt = make_runtime()
    assert rt.journal is not None and rt.store is not None
    store = rt.store
    ids = [store.add(NS, f"the user owns {n} bicycles").id for n in ("two", "three", "four")]
    store.update(NS, ids[0], content="the user owns five bicycles")
    store.update(NS, ids[1], importance=0.9)
    calls: list[str] = []

    def counted(name: str) -> None:
        real = getattr(store, name)

        def call(*args: Any) -> Any:
            calls.append(name)
            return real(*args)

        setattr(store, name, call)

    counted("last_ops")
    counted("history")
    rt.journal.on_recorded(MemoryRecorded(ids=tuple(ids)))
    assert calls == ["last_ops"]
    lines = [ln for ln in rt.journal.read_day().splitlines() if ln.startswith("- ")]
    shown = {mid: ln for ln in lines for mid in ids if f"id:{mid}" in ln}
    assert set(shown) == set(ids)
    assert "(updated)" in shown[ids[0]] and "five bicycles" in shown[ids[0]]
    assert "(updated)" in shown[ids[1]] and "(updated)" not in shown[ids[2]]


def test_a_memory_is_journaled_once_per_state(make_runtime: MakeRuntime) -> None:
    rt = make_runtime()
    assert rt.journal is not None
    turn = [Msg.user("Remember that my locker code is 4412."), Msg.assistant("Saved.")]
    rt.record(turn)
    rt.flush()
    rt.record(turn)  # the same episode again: merged, not journaled twice
    rt.flush()
    rt2 = make_runtime()  # a restart re-reads today's file
    assert rt2.journal is not None
    rt2.record(turn)
    rt2.flush()
    text = rt2.journal.read_day()
    ids = [mid for mid, _ in parse_journal_ids(text)]
    assert len(ids) == len(set(ids))

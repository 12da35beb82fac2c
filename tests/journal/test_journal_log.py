"""LOG: typed entries in DuckDB and LOG.md, compaction at the threshold with nothing lost."""

from __future__ import annotations

import time

import pytest

from actormem.events import Event, LogCompacted

from .conftest import NS, MakeRuntime


def test_entries_go_to_duckdb_and_log_md(make_runtime: MakeRuntime) -> None:
    rt = make_runtime()
    rec = rt.log("TOOL_USE", "search_flights(city='LIS') -> 3 offers", tool="search_flights")
    assert rt.store is not None and rt.journal is not None
    assert rt.journal.flush()  # LOG.md is written by the view writer
    stored = rt.store.log_entries(NS)  # type: ignore[attr-defined]
    assert [e.id for e in stored] == [rec.id] and stored[0].metadata == {"tool": "search_flights"}
    text = (rt.journal.folder / "LOG.md").read_text()
    assert "· TOOL_USE · search_flights(city='LIS') -> 3 offers · #1" in text
    with pytest.raises(ValueError, match="entry_type"):
        rt.log("NOTE", "x")


def test_compaction_at_the_threshold_loses_nothing(make_runtime: MakeRuntime) -> None:
    rt = make_runtime(log_max_entries=100, log_keep_entries=10)
    assert rt.store is not None and rt.journal is not None
    seen: list[Event] = []
    rt.subscribe(seen.append, LogCompacted)
    kinds = ("TOOL_USE", "THOUGHT", "USER_FEEDBACK", "ERROR", "SYSTEM")
    ids = [
        rt.log(kinds[i % 5], f"step {i}: order {1000 + i} shipped to Lisbon").id for i in range(100)
    ]
    assert rt.journal.last_compaction is None and len(rt.journal.entries()) == 100
    ids.append(rt.log("SYSTEM", "step 100: the 101st entry").id)  # past 100 entries
    assert rt.journal.flush()  # the compaction runs off the caller's thread
    comp = rt.journal.last_compaction
    assert comp is not None and comp.entries == 91 and (comp.first_seq, comp.last_seq) == (1, 91)
    live = rt.journal.entries()
    assert [e.id for e in live] == ids[91:]
    # Nothing lost: every entry is in the store, the compacted ones point at the
    # compaction, and the summary memory lists them as its sources.
    every = rt.store.log_entries(NS, compacted=None)  # type: ignore[attr-defined]
    assert [e.id for e in every] == ids
    assert all(e.compaction_id == comp.id for e in every[:91])
    summary = rt.store.get(NS, comp.summary_id)
    assert summary is not None and summary.kind == "summary"
    assert set(ids[:91]) <= set(summary.source_ids)
    text = (rt.journal.folder / "LOG.md").read_text()
    assert text.index("## Summary of entries #1-#91") < text.index("## Entries")
    assert "step 99" in text and "· #92" in text and "· #91\n" not in text
    assert rt.store.log_compactions(NS)[0].bytes_after < comp.bytes_before  # type: ignore[attr-defined]
    deadline = time.monotonic() + 60
    while not seen and time.monotonic() < deadline:
        time.sleep(0.01)
    assert isinstance(seen[0], LogCompacted) and seen[0].summary_id == comp.summary_id


def test_size_threshold_and_rolling_summary(make_runtime: MakeRuntime) -> None:
    rt = make_runtime(log_max_bytes=4_000, log_keep_entries=2)
    assert rt.journal is not None
    for i in range(40):
        rt.log("TOOL_USE", f"fetch(page={i}) -> " + "x" * 150)
        assert rt.journal.flush()  # each compaction done before the next entry
    comps = rt.store.log_compactions(NS)  # type: ignore[union-attr]
    assert len(comps) >= 2
    assert (rt.journal.folder / "LOG.md").stat().st_size <= 4_000
    second = rt.store.get(NS, comps[1].summary_id)  # type: ignore[union-attr]
    assert second is not None and comps[0].summary_id in second.source_ids  # rolling


def test_log_survives_restart(make_runtime: MakeRuntime) -> None:
    rt = make_runtime()
    rt.log("THOUGHT", "the user wants a window seat")
    rt2 = make_runtime()
    assert rt2.journal is not None
    assert [e.content for e in rt2.journal.entries()] == ["the user wants a window seat"]
    assert "window seat" in rt2.working_memory()

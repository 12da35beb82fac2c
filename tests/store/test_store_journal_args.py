"""The journal's tables refuse bad arguments the same way on every backend.

Before, PostgreSQL's ``log_append`` took any ``ts`` and any metadata and left
the database to fail on them (a raw driver error), while DuckDB named the
field: both now share one check (``store/_journal_rows.py``).
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from actormem.store import InvalidMemoryError, Namespace

BAD_TS = [1e13, -1.0, math.nan, math.inf, "2020-01-01", True]


@pytest.mark.parametrize("ts", BAD_TS, ids=repr)
def test_log_append_refuses_a_timestamp_naming_ts(store: Any, ns: Namespace, ts: object) -> None:
    store.log_append(ns, "note", "kept", ts=1_700_000_000.0)
    with pytest.raises(InvalidMemoryError, match=r"\bts\b"):
        store.log_append(ns, "note", "refused", ts=ts)
    assert [e.content for e in store.log_entries(ns)] == ["kept"]
    after = store.log_append(ns, "note", "next")
    assert after.seq == 2


@pytest.mark.parametrize("meta", [[1, 2], "text", 3], ids=repr)
def test_log_append_refuses_metadata_that_is_not_a_dict(
    store: Any, ns: Namespace, meta: object
) -> None:
    with pytest.raises(InvalidMemoryError, match="metadata"):
        store.log_append(ns, "note", "x", metadata=meta)
    assert store.log_entries(ns) == []


@pytest.mark.parametrize("entry_type", ["", "x" * 33, 7, None], ids=repr)
def test_log_append_refuses_a_bad_entry_type(store: Any, ns: Namespace, entry_type: object) -> None:
    with pytest.raises(InvalidMemoryError, match="entry_type"):
        store.log_append(ns, entry_type, "x")
    assert store.log_entries(ns) == []


@pytest.mark.parametrize("values", [{"": "v"}, {"k": 1}, {3: "v"}], ids=repr)
def test_journal_state_takes_str_keys_and_values_only(
    store: Any, ns: Namespace, values: dict[Any, Any]
) -> None:
    store.set_journal_state(ns, {"kept": "yes"})
    with pytest.raises(InvalidMemoryError, match="journal state"):
        store.set_journal_state(ns, values)
    assert store.journal_state(ns) == {"kept": "yes"}


def test_log_entries_filters_and_limit_mean_the_same_everywhere(store: Any, ns: Namespace) -> None:
    for i in range(6):
        store.log_append(ns, "note", f"entry {i}", metadata={"i": i})
    assert [e.seq for e in store.log_entries(ns, after_seq=4)] == [5, 6]
    assert [e.seq for e in store.log_entries(ns, limit=2)] == [5, 6]  # the latest, oldest first
    assert [e.seq for e in store.log_entries(ns, after_seq=1, limit=10)] == [2, 3, 4, 5, 6]
    assert store.log_entries(ns, compacted=True) == []
    assert [e.metadata["i"] for e in store.log_entries(ns, compacted=None)] == list(range(6))
    with pytest.raises(InvalidMemoryError):
        store.log_entries(ns, limit=-1)


def test_a_str_subclass_is_stored_as_plain_text(store: Any, ns: Namespace) -> None:
    """A StrEnum summarizer took another write path on DuckDB (no literal for a str
    subclass), which skipped the compaction's re-check under the writer lock."""
    import enum

    class Who(enum.StrEnum):
        MODEL = "model-summarizer"

    entry = store.log_append(ns, "note", "to be compacted")
    store.log_compact(ns, [entry.id], summary_id=Who.MODEL, summary=Who.MODEL, summarizer=Who.MODEL)
    (done,) = store.log_compactions(ns)
    assert type(done.summarizer) is str and done.summarizer == "model-summarizer"

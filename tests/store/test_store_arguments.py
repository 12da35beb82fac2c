"""Every argument of every store call, refused the same way on every backend.

Found by calling each public method of DuckDBStore and PostgresStore with the
same bad values side by side.  Before: DuckDB *acknowledged* a ``delete``
with ``reason=None`` and a ``log_compact`` with ``summary=None`` or
``bytes_before=10**30``, then refused the record when applying it and set it
aside in the quarantine file (an acknowledged write lost); PostgreSQL raised
raw ``TypeError``/``UnicodeEncodeError``/driver errors where DuckDB named the
field; DuckDB kept NUL characters that PostgreSQL cannot store.  Each case
here: ``InvalidMemoryError`` naming the argument, nothing stored or changed,
and (DuckDB) nothing set aside after the log is applied.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from actormem.store import InvalidMemoryError, Namespace

NOT_TEXT: list[object] = [None, 3, 1.5, ["x"], {"k": 1}, b"x", True]
BAD_TEXT: list[object] = [*NOT_TEXT, "a\x00b", "\ud800"]
BAD_ID: list[object] = [*BAD_TEXT, "x" * 300]
BAD_COUNT: list[object] = [None, -1, 1.5, math.nan, math.inf, "1", True, 10**30]


def _state(store: Any, ns: Namespace) -> tuple[Any, ...]:
    return (
        [
            (r.id, r.content, r.kind, r.tags, r.metadata)
            for r in store.list(ns, include_deleted=True)
        ],
        [(h.memory_id, h.op, h.reason) for h in store.history(ns)],
        [(e.seq, e.content, e.compaction_id) for e in store.log_entries(ns, compacted=None)],
        store.log_compactions(ns),
        store.journal_state(ns),
    )


def _filled(store: Any, ns: Namespace) -> dict[str, Any]:
    mid = store.add(ns, "alice likes green tea", tags=("drink",)).id
    entry = store.log_append(ns, "note", "first entry")
    store.set_journal_state(ns, {"k": "v"})
    return {"memory_id": mid, "entry_id": entry.id}


# (method, argument, bad values, how the other arguments are made from _filled's ids)
CASES: list[tuple[str, str, list[object]]] = [
    ("delete", "reason", BAD_TEXT),
    ("delete", "memory_id", BAD_ID),
    ("update", "reason", BAD_TEXT),
    ("update", "memory_id", BAD_ID),
    ("update", "kind", [*BAD_TEXT[1:], "", "k" * 65]),
    ("update", "content", [*BAD_TEXT[1:], "", "  "]),
    ("update", "metadata", [["x"], "x", {"k": "a\x00"}, {"a\x00": 1}, {"k": math.nan}]),
    ("get", "memory_id", BAD_ID),
    ("history", "memory_id", [m for m in BAD_ID if m is not None]),
    ("add", "content", [*BAD_TEXT[1:], ""]),
    ("add", "kind", [*BAD_TEXT[1:], "", "k" * 65]),
    ("add", "tags", [("a\x00",), ("\ud800",), "tag", [3], [""], ["t" * 257], ["ok", "a\x00"]]),
    ("add", "source_ids", [("a\x00",), "id", [None], [""], ["s" * 257]]),
    ("add", "metadata", [{"k": "a\x00"}, {"k": ["\x00"]}, {"a\x00": 1}, ["x"]]),
    ("search", "config", [3, "x", {"candidates": 5}, ["x"]]),
    ("search", "touch", [None, "yes", 1, []]),
    ("log_append", "content", [*BAD_TEXT[1:], ""]),
    ("log_append", "entry_type", [*BAD_TEXT, "", "e" * 33]),
    ("log_append", "metadata", [{"k": "a\x00"}, ["x"], "x"]),
    ("log_entries", "after_seq", BAD_COUNT),
    ("log_entries", "compacted", ["yes", 1, []]),
    ("log_compact", "entry_ids", [None, 3, "id", [], [None], ["a\x00"], ["\ud800"]]),
    ("log_compact", "summary_id", [*BAD_TEXT, ""]),
    ("log_compact", "summary", BAD_TEXT),
    ("log_compact", "summarizer", BAD_TEXT),
    ("log_compact", "bytes_before", BAD_COUNT),
    ("log_compact", "bytes_after", BAD_COUNT),
    ("set_journal_state", "values", [None, {"k": None}, {"k": "a\x00"}, {"a\x00": "v"}, ["k"]]),
]


def _call(
    store: Any, ns: Namespace, method: str, arg: str, value: object, ids: dict[str, Any]
) -> Any:
    good: dict[str, dict[str, Any]] = {
        "delete": {"namespace": ns, "memory_id": ids["memory_id"], "reason": "r"},
        "update": {
            "namespace": ns,
            "memory_id": ids["memory_id"],
            "content": "bob likes tea",
            "reason": "r",
        },
        "get": {"namespace": ns, "memory_id": ids["memory_id"]},
        "history": {"namespace": ns, "memory_id": ids["memory_id"]},
        "add": {"namespace": ns, "content": "a new memory"},
        "search": {"query": "tea", "namespace": ns},
        "log_append": {"namespace": ns, "entry_type": "note", "content": "x"},
        "log_entries": {"namespace": ns},
        "log_compact": {
            "namespace": ns,
            "entry_ids": [ids["entry_id"]],
            "summary_id": "s1",
            "summary": "a summary",
            "summarizer": "test",
            "bytes_before": 10,
            "bytes_after": 5,
        },
        "set_journal_state": {"namespace": ns, "values": {"k2": "v2"}},
    }
    kwargs = dict(good[method])
    kwargs[arg] = value
    return getattr(store, method)(**kwargs)


@pytest.mark.parametrize(("method", "arg", "values"), CASES, ids=[f"{m}.{a}" for m, a, _ in CASES])
def test_a_bad_argument_is_refused_naming_it_and_nothing_changes(
    make_store: Any, ns: Namespace, tmp_path: Path, method: str, arg: str, values: list[object]
) -> None:
    store = make_store()
    ids = _filled(store, ns)
    before = _state(store, ns)
    for value in values:
        with pytest.raises(InvalidMemoryError) as err:
            _call(store, ns, method, arg, value, ids)
        named = {"values": "journal state", "memory_id": "memory_id"}.get(arg, arg)
        assert named in str(err.value), (value, str(err.value))
    store.flush()
    assert _state(store, ns) == before
    # The good call still works afterwards: the store is not wedged.
    _call(store, ns, method, arg, _call_default(method, arg, ids), ids)
    store.flush()
    assert not list(tmp_path.glob("*.rejected")), "an acknowledged write was set aside"


def _call_default(method: str, arg: str, ids: dict[str, Any]) -> object:
    defaults: dict[str, object] = {
        "reason": "r",
        "memory_id": ids["memory_id"],
        "kind": "preference",
        "content": "carol likes coffee",
        "metadata": {"k": "v"},
        "tags": ("t",),
        "source_ids": ("m1",),
        "config": None,
        "touch": False,
        "entry_type": "note",
        "after_seq": 0,
        "compacted": None,
        "entry_ids": [ids["entry_id"]],
        "summary_id": "s1",
        "summary": "a summary",
        "summarizer": "test",
        "bytes_before": 10,
        "bytes_after": 5,
        "values": {"k3": "v3"},
    }
    return defaults[arg]

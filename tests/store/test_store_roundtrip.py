"""What a memory reads back as on each backend (README "What differs on PostgreSQL").

pgprobe finding 8: PostgreSQL normalises ``metadata`` (jsonb) where DuckDB
returns it as written; both store timestamps in microseconds, and DuckDB's
process answers from its index, which holds a written value as given.  The README says
exactly this; these tests hold it to that.
"""

from __future__ import annotations

import json
from typing import Any

from actormem.store import Namespace, NewMemory

NS = Namespace(user_id="r")
META = {"z": 1, "a": [1.5, -0.0, 1e-7], "é": {"k": None}, "f": 1.0}


def test_timestamps_are_stored_in_microseconds(make_store: Any) -> None:
    store = make_store()
    store.add_many(
        NS, [NewMemory(id="a1", content="precise", created_at=1_700_000_000.1234567)], dedup=False
    )
    pg = type(store).__name__ == "PostgresStore"
    # DuckDB's process answers from its index, which holds the value as given
    assert store.get(NS, "a1").created_at == (1_700_000_000.123457 if pg else 1_700_000_000.1234567)
    store.close()
    assert make_store().get(NS, "a1").created_at == 1_700_000_000.123457  # stored: microseconds


def test_metadata_reads_back_equal_as_a_value(make_store: Any) -> None:
    store = make_store()
    store.add_many(NS, [NewMemory(id="m", content="meta", metadata=META)], dedup=False)
    got = store.get(NS, "m").metadata
    assert got == META
    if type(store).__name__ == "PostgresStore":  # jsonb's normal form
        assert list(got) == ["a", "f", "z", "é"]
        assert json.dumps(got["a"][1]) == "0.0"  # the sign of -0.0 is lost
    else:
        assert list(got) == list(META)
        assert json.dumps(got["a"][1]) == "-0.0"

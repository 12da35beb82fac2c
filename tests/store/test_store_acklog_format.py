"""The acknowledgement log's format 4: records hold a write's values, not SQL text.

A store left by the previous version with pending format-3 records (SQL text)
must still replay them; what this version writes must read back as the same
values, and render the same SQL the direct path runs.
"""

from __future__ import annotations

import re
import struct
import time
import zlib
from pathlib import Path

import duckdb
import numpy as np
import pytest

from actormem.models.embedders import HashEmbedder
from actormem.store import DuckDBStore, MemoryRecord, Namespace
from actormem.store._acklog import AckLog, encode
from actormem.store._content_hash import content_hash
from actormem.store._duckdb_rows import history_sql, insert_sql, write_statements
from actormem.store._wire import (
    WireError,
    WireMemory,
    WireWrite,
    decode_write,
    encode_write,
    literal_safe,
)
from tests.store.test_store_acklog import _write_then_die

NS = Namespace(user_id="ada", agent_id="bot")


def _open(path: Path) -> DuckDBStore:
    return DuckDBStore(path, embedder=HashEmbedder(64), touch_flush_interval=None)


def _meta(path: Path) -> tuple[str, int]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        meta = dict(con.execute("SELECT key, value FROM store_meta").fetchall())
    finally:
        con.close()
    return str(meta["store_id"]), int(meta["commit_seq"])


def _format3_log(store_id: str, base: int, records: list[tuple[int, list[str]]]) -> bytes:
    """A log as the previous version wrote it: line, base and its CRC, SQL records."""
    base_bytes = struct.pack("<Q", base)
    head = b"actormem-acklog 3 " + store_id.encode() + b"\n"
    head += base_bytes + struct.pack("<I", zlib.crc32(base_bytes))
    return head + b"".join(encode(seq, sql) for seq, sql in records) + bytes(4096)


def test_pending_records_of_the_previous_format_are_replayed(tmp_path: Path) -> None:
    """Format-3 records (SQL text) left by a crash of the previous version are applied
    at open, once; the log is then rewritten in format 4."""
    path = tmp_path / "old.duckdb"
    with _open(path) as store:
        store.add(NS, "written before the upgrade")
    store_id, seq = _meta(path)
    embedder = HashEmbedder(64)
    now = time.time()
    records, wanted = [], {}
    for k in range(1, 4):
        text = f"acknowledged by the previous version, number {k}"
        rec = MemoryRecord(
            id=f"old-{k}",
            namespace=NS,
            kind="fact",
            content=text,
            content_hash=content_hash(text),
            importance=0.5,
            tags=("upgrade",),
            created_at=now,
            updated_at=now,
            last_accessed=now,
            metadata={"k": k},
        )
        vec = embedder.embed([text])[0]
        sql = [
            insert_sql(64, [rec], [vec]),
            history_sql([(rec.id, NS, "ADD", None, text, "")], now),
        ]
        records.append((seq + k, sql))
        wanted[rec.id] = text
    log_path = Path(str(path) + ".acklog")
    log_path.write_bytes(_format3_log(store_id, seq, records))
    for _ in range(2):  # the second open finds them in DuckDB: nothing applied twice
        with _open(path) as store:
            assert store.lost_commits == 0
            for mid, text in wanted.items():
                got = store.get(NS, mid)
                assert got is not None and got.content == text
                assert got.tags == ("upgrade",) and got.metadata == {"k": int(mid[-1])}
                assert store.search(text, NS, limit=1)[0].memory.id == mid
                assert [h.op for h in store.history(NS, mid)] == ["ADD"]
            assert store.count(NS) == 4
            assert store.change_counter >= seq + 3
        # closed cleanly: no record left, and a header older versions read too
        assert log_path.read_bytes().startswith(b"actormem-acklog 3 ")
        assert AckLog(str(path)).read()[1] == []


def test_records_written_now_hold_values_that_render_the_same_sql(tmp_path: Path) -> None:
    """The records a killed process left are format 4: each decodes to the memory it
    acknowledged, and its SQL is what the direct path writes for it."""
    path = tmp_path / "new.duckdb"
    acks, _ = _write_then_die(path)
    assert Path(str(path) + ".acklog").read_bytes().startswith(b"actormem-acklog 4 ")
    records = AckLog(str(path)).read()[1]
    assert records, "the writes just before the kill are only in the log"
    seen = set()
    for r in records:
        assert not r.sql
        write = decode_write(r.payload)
        for m in write.inserts:
            assert len(m.vector) == 4 * 64
            if m.content.startswith("acknowledged memory number"):
                seen.add(m.id)
            else:  # the keyed facts the child saved beside them
                assert m.agent_id.startswith("facts") and m.content.startswith("key")
        # the same statements each time, but for the history rows' fresh ids
        assert _ids_out(r.statements()) == _ids_out(";\n".join(write_statements(write)))
        # (a change of a fact's text moves its row: "INSERT INTO memories SELECT", schema 5)
        assert ("INSERT INTO memories (" in r.statements()) == bool(write.inserts)
    assert seen and seen <= set(acks)
    with _open(path) as store:  # and replayed from them
        assert all(store.get(Namespace(user_id="ada"), m) is not None for m in acks)


def _ids_out(sql: str) -> str:
    return re.sub(r"'[0-9a-f]{32}-([0-9]+)'", r"'id-\1'", sql)


def _memory(**changes: object) -> WireMemory:
    values: dict[str, object] = {
        "id": "m1",
        "user_id": "ada",
        "agent_id": "",
        "run_id": "",
        "session_id": "",
        "kind": "fact",
        "content": "text",
        "content_hash": "h",
        "vector": np.ones(4, dtype=np.float32).tobytes(),
        "importance": 0.5,
        "tags": (),
        "source_ids": (),
        "created_at": 1.0,
        "updated_at": 1.0,
        "last_accessed": 1.0,
        "access_count": 0,
        "superseded_by": None,
        "deleted_at": None,
        "metadata": "{}",
    }
    values.update(changes)
    return WireMemory(**values)  # type: ignore[arg-type]


def test_a_write_that_would_not_read_back_is_never_logged() -> None:
    """Encoding checks the record decodes to the same values: a value of the wrong type
    (which the replay's decoder would refuse) fails here, before any acknowledgement."""
    good = WireWrite(1.0, inserts=[_memory()])
    assert decode_write(encode_write(good)) == good
    with pytest.raises(WireError):
        encode_write(WireWrite(1.0, inserts=[_memory(kind=5)]))
    with pytest.raises(WireError):
        decode_write(b"SELECT 1")


def test_only_values_with_a_sql_literal_are_logged() -> None:
    """A vector value that is not finite (whatever its place), a NUL, a non-finite time or
    a vector of another size takes the direct path; the finite rest is logged."""
    dim = 8
    vec = np.arange(1, dim + 1, dtype=np.float32) / 10

    def safe(**changes: object) -> bool:
        values: dict[str, object] = {"vector": vec.tobytes(), **changes}
        return literal_safe(WireWrite(1.0, inserts=[_memory(**values)]), dim)

    assert safe()
    with np.errstate(over="ignore"):  # finite values whose squares overflow: still finite
        assert safe(vector=np.full(dim, 3e38, dtype=np.float32).tobytes())
    for place in (0, dim - 1):
        for value in (np.nan, np.inf, -np.inf):
            bad = vec.copy()
            bad[place] = value
            assert not safe(vector=bad.tobytes()), (place, value)
    assert not safe(vector=vec[:-1].tobytes())
    assert not safe(content="a\x00b")
    assert not safe(updated_at=float("nan"))
    assert not safe(deleted_at=float("inf"))


def test_str_enum_values_are_written_as_their_text_and_survive_a_clean_close(
    tmp_path: Path,
) -> None:
    """A StrEnum kind, namespace id or reason was acknowledged, then the
    applier could not write it as a literal, every later read failed and a
    clean close() cut the log under the pending records: all of them lost,
    and the store refused to open.  Each is stored as its plain text."""
    import enum

    class K(enum.StrEnum):
        EPISODE = "episode"
        BOB = "bob"
        WHY = "user asked"
        FACT = "fact"

    path = tmp_path / "enum.duckdb"
    store = _open(path)
    ns = Namespace(user_id=K.BOB, agent_id="bot")
    acked = [store.add(NS, f"plain before {i}").id for i in range(3)]
    acked.append(store.add(NS, "an enum kind", kind=K.EPISODE).id)
    acked.append(store.add(ns, "an enum namespace").id)
    gone = store.add(NS, "deleted with an enum reason").id
    store.delete(NS, gone, reason=K.WHY)
    changed = store.add(NS, "kind changed by an enum").id
    store.update(NS, changed, kind=K.FACT, reason=K.WHY)
    acked += [store.add(NS, f"plain after {i}").id for i in range(3)]
    assert len(store.list(NS)) == 8  # a read applies the pending records
    store.close()
    store = _open(path)
    try:
        live = {m.id: m for m in [*store.list(NS), *store.list(Namespace(user_id="bob"))]}
        assert set(acked) <= set(live) and changed in live and gone not in live
        kinds = {live[i].kind for i in acked} | {live[changed].kind}
        assert kinds <= {"episode", "fact"} and all(type(k) is str for k in kinds)
        assert [h.reason for h in store.history(NS, gone)][-1] == "user asked"
    finally:
        store.close()

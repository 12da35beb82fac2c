"""Schema 3 -> 4 -> 5: a filled schema-3 file (tags and source ids in LIST columns,
vectors in a FLOAT[dim] column) opens, migrates in one transaction and reads back
every list, filter, analytic and vector alike."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from actormem.models.embedders import HashEmbedder
from actormem.store import (
    SCHEMA_VERSION,
    DuckDBStore,
    Namespace,
    SearchFilters,
    StoreError,
    _schema,
)

NS = Namespace(user_id="alice")
DIM = 64
N = 1_500
_SQL = Path(__file__).parent / "data" / "schema3.sql"


def _tags(i: int) -> list[str]:
    return [] if i % 3 == 0 else [f"t{i % 7}", "shared", 'quo"te é'][: 1 + i % 3]


def _sources(i: int) -> list[str]:
    return [] if i % 2 else [f"msg-{i}", f"msg-{i + 1}"]


def _make_v3_file(path: Path) -> None:
    """A schema-3 store with N memories (one deleted, one superseded), history and journal rows."""
    con = duckdb.connect(str(path))
    for stmt in _SQL.read_text().replace("{dim}", str(DIM)).split(";"):
        lines = [ln for ln in stmt.splitlines() if not ln.strip().startswith("--")]
        if "".join(lines).strip():
            con.execute("\n".join(lines))
    contents = [f"memory number {i} about topic {i % 11}" for i in range(N)]
    vecs = HashEmbedder(DIM).embed(contents).astype(np.float32)
    ts = pa.array(np.full(N, 1_700_000_000_000_000 + np.arange(N), dtype=np.int64)).cast(
        pa.timestamp("us")
    )
    tbl = pa.table(
        {
            "id": [f"m{i}" for i in range(N)],
            "user_id": ["alice"] * N,
            "kind": ["fact"] * N,
            "content": contents,
            "content_hash": [hashlib.sha256(c.encode()).hexdigest() for c in contents],
            "embedding": pa.FixedSizeListArray.from_arrays(pa.array(vecs.reshape(-1)), DIM),
            "importance": [0.5] * N,
            "tags": pa.array([_tags(i) for i in range(N)], type=pa.list_(pa.string())),
            "source_ids": pa.array([_sources(i) for i in range(N)], type=pa.list_(pa.string())),
            "created_at": ts,
            "updated_at": ts,
            "last_accessed": ts,
            "access_count": list(range(N)),
            "metadata": [json.dumps({"i": i}) for i in range(N)],
        }
    )
    con.register("_t", tbl)
    con.execute(
        "INSERT INTO memories (id, user_id, kind, content, content_hash, embedding, importance, "
        "tags, source_ids, created_at, updated_at, last_accessed, access_count, metadata) "
        "SELECT id, user_id, kind, content, content_hash, embedding, importance, tags, "
        "source_ids, created_at, updated_at, last_accessed, access_count, "
        "CAST(metadata AS JSON) FROM _t"
    )
    con.execute("UPDATE memories SET deleted_at = created_at WHERE id = 'm1'")
    con.execute("UPDATE memories SET superseded_by = 'm2' WHERE id = 'm4'")
    con.execute(
        "INSERT INTO history (id, memory_id, user_id, op, new_content, ts) "
        "SELECT 'h' || id, id, user_id, 'ADD', content, created_at FROM memories"
    )
    con.execute(
        "INSERT INTO activity_log (id, user_id, seq, ts, entry_type, content) "
        "VALUES ('l1', 'alice', 1, TIMESTAMP '2024-01-01', 'SYSTEM', 'kept')"
    )
    con.execute(
        "INSERT INTO store_meta VALUES ('embedder_name', ?), ('embedder_dim', ?)",
        [HashEmbedder(DIM).name, str(DIM)],
    )
    con.close()


def _open(path: Path) -> DuckDBStore:
    return DuckDBStore(
        path, embedder=HashEmbedder(DIM), touch_flush_interval=None, near_duplicate_threshold=None
    )


def test_filled_schema_3_store_migrates_to_5(tmp_path: Path) -> None:
    path = tmp_path / "v3.duckdb"
    _make_v3_file(path)
    con = duckdb.connect(str(path))
    con.execute("UPDATE memories SET embedding = NULL WHERE id = 'm9'")  # a row with no vector
    con.close()
    with _open(path) as store:
        assert store.count(NS) == N - 2
        assert store.count(NS, include_deleted=True) == N
        for i in (0, 2, 3, 5, 6, 7, 100, N - 1):
            rec = store.get(NS, f"m{i}")
            assert rec is not None
            assert list(rec.tags) == _tags(i) and list(rec.source_ids) == _sources(i)
            assert rec.metadata == {"i": i} and rec.access_count == i
        gone = store.get(NS, "m4", include_deleted=True)
        assert gone is not None and gone.superseded_by == "m2" and list(gone.tags) == _tags(4)
        # the index was built from the migrated text columns: tag filters work
        hits = store.search(
            "memory number", NS, limit=50, filters=SearchFilters(tags_all=["shared"])
        )
        assert hits and all("shared" in h.memory.tags for h in hits)
        expected = sum(1 for i in range(N) if i not in (1, 4) and "shared" in _tags(i))
        top = dict(store.top_tags(NS, limit=20))
        assert top["shared"] == expected
        assert top['quo"te é'] == sum(1 for i in range(N) if i not in (1, 4) and len(_tags(i)) == 3)
        assert len(store.history(NS, "m7")) == 1
        assert [e.content for e in store.log_entries(NS)] == ["kept"]
        # writes after the migration: new lists, and an update of an old row's lists
        store.update(NS, "m3", tags=["renamed"])
        new = store.add(NS, "written after the migration", tags=["after"], source_ids=["s1"])
    con = duckdb.connect(str(path))
    rows = con.execute("SELECT version FROM schema_version ORDER BY 1").fetchall()
    versions = [r[0] for r in rows]
    types = dict(
        con.execute(
            "SELECT column_name, data_type FROM information_schema.columns "
            "WHERE table_name = 'memories' AND column_name IN ('tags', 'source_ids')"
        ).fetchall()
    )
    con.close()
    assert versions == [1, 2, 3, 4, 5] and SCHEMA_VERSION == 5
    assert types == {"tags": "VARCHAR", "source_ids": "VARCHAR"}
    with _open(path) as store:  # reopened: everything read back from the text columns
        assert store.get(NS, "m3").tags == ("renamed",)  # type: ignore[union-attr]
        rec = store.get(NS, new.id)
        assert rec is not None and rec.tags == ("after",) and rec.source_ids == ("s1",)
        assert store.get(NS, "m6").source_ids == ("msg-6", "msg-7")  # type: ignore[union-attr]
        exported = tmp_path / "out.jsonl"
        store.export(NS, exported)
        rows = [json.loads(line) for line in exported.read_text().splitlines()]
        by_id = {r["id"]: r for r in rows if "id" in r}
        assert by_id["m5"]["tags"] == _tags(5) and by_id["m6"]["source_ids"] == _sources(6)


def test_failed_migration_leaves_the_schema_3_file_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "v3.duckdb"
    _make_v3_file(path)

    def broken(con: object) -> None:
        _schema._migrate_3_to_4(con)
        raise RuntimeError("disk on fire")

    monkeypatch.setitem(_schema.MIGRATIONS, 3, broken)
    with pytest.raises(StoreError, match="from schema version 3 to 4"):
        _open(path)
    con = duckdb.connect(str(path))
    assert con.execute("SELECT max(version) FROM schema_version").fetchall() == [(3,)]
    kinds = con.execute(
        "SELECT data_type FROM information_schema.columns "
        "WHERE table_name = 'memories' AND column_name = 'tags'"
    ).fetchall()
    assert kinds == [("VARCHAR[]",)]
    assert con.execute("SELECT tags FROM memories WHERE id = 'm2'").fetchall() == [(_tags(2),)]
    con.close()


def test_migrated_vectors_are_the_same_floats(tmp_path: Path) -> None:
    """Schema 5 stores each vector as its float32 bytes: every float survives the migration
    exactly, a NULL vector stays NULL, and search, reopen and export read them back."""
    path = tmp_path / "v3.duckdb"
    _make_v3_file(path)
    vecs = HashEmbedder(DIM).embed([f"memory number {i} about topic {i % 11}" for i in range(N)])
    con = duckdb.connect(str(path))
    con.execute("UPDATE memories SET embedding = NULL WHERE id = 'm9'")
    con.close()
    with _open(path) as store:
        hit = store.search("memory number 17 about topic 6", NS, limit=1, mode="vector")
        assert hit[0].memory.id == "m17"
        unit = vecs[17] / np.linalg.norm(vecs[17])
        np.testing.assert_allclose(store._index.vector("m17"), unit, atol=1e-6)
    con = duckdb.connect(str(path))
    kind = con.execute(
        "SELECT data_type FROM information_schema.columns "
        "WHERE table_name = 'memories' AND column_name = 'embedding'"
    ).fetchall()
    stored = dict(con.execute("SELECT id, embedding FROM memories").fetchall())
    con.close()
    assert kind == [("BLOB",)]
    assert stored["m9"] is None
    for i in (0, 1, 4, 17, N - 1):
        np.testing.assert_array_equal(np.frombuffer(stored[f"m{i}"], dtype="<f4"), vecs[i])
    (path.parent / (path.name + ".index")).unlink(missing_ok=True)  # rebuilt from the bytes
    with _open(path) as store:
        hit = store.search("memory number 17 about topic 6", NS, limit=1, mode="vector")
        assert hit[0].memory.id == "m17"
        unit = vecs[17] / np.linalg.norm(vecs[17])
        np.testing.assert_allclose(store._index.vector("m17"), unit, atol=1e-6)
        exported = tmp_path / "out.jsonl"
        store.export(NS, exported)
        rows = [json.loads(line) for line in exported.read_text().splitlines()]
    by_id = {r["id"]: r for r in rows if "id" in r}
    np.testing.assert_array_equal(np.asarray(by_id["m17"]["embedding"], dtype=np.float32), vecs[17])
    assert by_id["m9"]["embedding"] is None


def test_failed_vector_migration_leaves_the_file_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "v3.duckdb"
    _make_v3_file(path)

    def broken(con: object) -> None:
        _schema._migrate_4_to_5(con)
        raise RuntimeError("disk on fire")

    monkeypatch.setitem(_schema.MIGRATIONS, 4, broken)
    with pytest.raises(StoreError, match="from schema version 4 to 5"):
        _open(path)
    con = duckdb.connect(str(path))
    assert con.execute("SELECT max(version) FROM schema_version").fetchall() == [(3,)]
    kinds = con.execute(
        "SELECT data_type FROM information_schema.columns "
        "WHERE table_name = 'memories' AND column_name = 'embedding'"
    ).fetchall()
    assert kinds == [(f"FLOAT[{DIM}]",)]
    con.close()

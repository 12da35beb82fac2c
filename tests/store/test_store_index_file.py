"""The index snapshot beside the database file (``actormem.store._index_file``).

Every test opens a real DuckDB file, closes it (which writes the snapshot)
and reopens it; a loaded index must answer exactly like one rebuilt from the
file, and a snapshot that is damaged or stale must be rebuilt, with a
warning that names the reason.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import structlog

from actormem.models.embedders import HashEmbedder
from actormem.store import DuckDBStore, Namespace, NewMemory, SearchFilters

ALICE = Namespace(user_id="alice", agent_id="bot")
BOB = Namespace(user_id="bob", agent_id="bot")
WORDS = ["apple", "river", "stone", "music", "tiger", "garden"]
WORDS += ["pencil", "ocean", "violin", "castle", "lemon", "rocket"]


def _open(path: Path, **kwargs: Any) -> DuckDBStore:
    kwargs.setdefault("embedder", HashEmbedder(32))
    kwargs.setdefault("index_snapshot_min_rows", 0)
    kwargs.setdefault("touch_flush_interval", None)
    kwargs.setdefault("near_duplicate_threshold", None)
    kwargs.setdefault("clock", lambda: 1_700_000_000.0)  # scores depend on the time
    return DuckDBStore(path, **kwargs)


def _fill(store: DuckDBStore, n: int = 120) -> None:
    """Memories of two users, with tags, kinds, updates, deletes and retrievals."""
    for ns, offset in ((ALICE, 0), (BOB, 7)):
        store.add_many(
            ns,
            [
                NewMemory(
                    content=f"{WORDS[(i + offset) % 12]} {WORDS[(i * 5) % 12]} note {i} item{i}",
                    kind="episode" if i % 3 else "fact",
                    tags=("odd",) if i % 2 else (),
                    importance=(i % 10) / 10,
                )
                for i in range(n)
            ],
        )
    ids = [hit.memory.id for hit in store.search("apple river", ALICE, 20)]
    store.update(ALICE, ids[0], content="apple river rewritten by an update")
    store.update(ALICE, ids[1], tags=["odd", "changed"])
    store.delete(ALICE, ids[2])
    store.search("tiger garden", BOB, 5)  # counts retrievals


QUERIES: list[tuple[str, Namespace, SearchFilters | None, str]] = [
    ("apple river", ALICE, None, "hybrid"),
    ("tiger music item7", BOB, None, "keyword"),
    ("ocean violin", Namespace(agent_id="bot"), None, "vector"),
    ("castle lemon", ALICE, SearchFilters(tags_any=["odd"]), "hybrid"),
    ("stone", ALICE, SearchFilters(tags_all=["changed"]), "hybrid"),
    ("garden pencil", BOB, SearchFilters(kinds=["fact"], min_importance=0.3), "hybrid"),
]


def _answers(store: DuckDBStore) -> list[list[tuple[str, str, float, int]]]:
    out = []
    for query, ns, filters, mode in QUERIES:
        hits = store.search(query, ns, 8, filters, mode=mode, touch=False)  # type: ignore[arg-type]
        out.append(
            [
                (h.memory.id, h.memory.content, round(h.score, 6), h.memory.access_count)
                for h in hits
            ]
        )
    return out


def _rebuilt_answers(path: Path, tmp_path: Path, **kwargs: Any) -> Any:
    """The same file opened without its snapshot: the index rebuilt from DuckDB."""
    copy = tmp_path / "rebuilt" / path.name
    copy.parent.mkdir(exist_ok=True)
    shutil.copy(path, copy)
    with _open(copy, index_snapshot_min_rows=None, **kwargs) as store:
        assert not Path(str(copy) + ".index").exists()
        return _answers(store)


def _loaded(store: DuckDBStore) -> bool:
    """Whether the store took its index from the snapshot (info logs are filtered in tests)."""
    return store._snapshot_seq == store.change_counter


def _events(logs: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [e for e in logs if e["event"] == name]


def test_reopen_loads_the_snapshot_and_answers_like_a_rebuild(tmp_path: Path) -> None:
    path = tmp_path / "m.duckdb"
    with _open(path) as store:
        _fill(store)
        before = _answers(store)
    snapshot = Path(str(path) + ".index")
    assert snapshot.exists()
    assert snapshot.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in tmp_path.iterdir() if ".tmp-" in p.name] == []
    with structlog.testing.capture_logs() as logs, _open(path) as store:
        assert _loaded(store)
        assert not _events(logs, "store.index_snapshot_rebuilt")
        loaded = _answers(store)
        assert len(store._index) == 2 * 120 - 1
    assert loaded == _rebuilt_answers(path, tmp_path)
    assert [[h[:2] for h in q] for q in loaded] == [[h[:2] for h in q] for q in before]


def test_writes_after_a_loaded_snapshot_reach_the_next_one(tmp_path: Path) -> None:
    path = tmp_path / "m.duckdb"
    with _open(path) as store:
        _fill(store)
    with _open(path) as store:
        assert _loaded(store)
        loaded = store.search("music", ALICE, 3, touch=False)
        store.update(ALICE, loaded[0].memory.id, content="music changed after the reload")
        store.delete(ALICE, loaded[1].memory.id)
        store.add(ALICE, "a brand new rocket memory item9999", tags=["new"])
        again = store.add(BOB, f"{WORDS[7]} {WORDS[0]} note 0 item0", kind="fact")
        assert again.op in ("MERGE", "NOOP")  # exact duplicate found by the loaded hash map
        assert store.get(ALICE, loaded[1].memory.id) is None
        assert store.get(ALICE, loaded[2].memory.id) == store._index.record(loaded[2].memory.id)
        assert store.search("brand new rocket", ALICE, 1)[0].memory.content.startswith("a brand")
    with structlog.testing.capture_logs() as logs, _open(path) as store:
        assert _loaded(store) and not logs
        after = _answers(store)
        assert store._index.record(loaded[1].memory.id) is None
        assert store.search("music changed", ALICE, 1)[0].memory.id == loaded[0].memory.id
    # A snapshot holds live rows only, like a rebuild (BM25 statistics included).
    assert after == _rebuilt_answers(path, tmp_path)


def _truncate(snapshot: Path, stash: Path) -> None:
    data = snapshot.read_bytes()
    snapshot.write_bytes(data[: len(data) // 2])


def _garble_vectors(snapshot: Path, stash: Path) -> None:
    data = bytearray(snapshot.read_bytes())
    mid = len(data) // 3  # inside the sections (the vectors come first)
    data[mid : mid + 16] = bytes(255 - b for b in data[mid : mid + 16])
    snapshot.write_bytes(bytes(data))


def _garble_header(snapshot: Path, stash: Path) -> None:
    data = bytearray(snapshot.read_bytes())
    data[40:48] = b"\xff" * 8
    snapshot.write_bytes(bytes(data))


def _stale(snapshot: Path, stash: Path) -> None:
    shutil.copy(stash, snapshot)  # the snapshot from before the last session's writes


def _not_a_snapshot(snapshot: Path, stash: Path) -> None:
    snapshot.write_bytes(b"hello")


DAMAGE: dict[str, tuple[Callable[[Path, Path], None], str]] = {
    "truncated": (_truncate, "truncated"),
    "garbled vectors": (_garble_vectors, "checksum mismatch in section"),
    "garbled header": (_garble_header, "header checksum mismatch"),
    "stale counter": (_stale, "stale: snapshot has commit_seq="),
    "tiny file": (_not_a_snapshot, "truncated"),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_or_stale_snapshot_is_rebuilt_with_a_warning(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "m.duckdb"
    snapshot = Path(str(path) + ".index")
    stash = tmp_path / "old.index"
    with _open(path) as store:
        _fill(store)
    shutil.copy(snapshot, stash)
    with _open(path) as store:  # a later session changes the store
        store.add(BOB, "written in the second session item4242")
    expected = _rebuilt_answers(path, tmp_path)
    harm, reason = DAMAGE[damage]
    harm(snapshot, stash)
    with structlog.testing.capture_logs() as logs, _open(path) as store:
        warned = _events(logs, "store.index_snapshot_rebuilt")
        assert len(warned) == 1 and warned[0]["log_level"] == "warning"
        assert reason in warned[0]["reason"], warned[0]["reason"]
        assert not _loaded(store)
        assert not snapshot.exists()  # removed at once: never misread later
        assert _answers(store) == expected
        assert store.search("second session item4242", BOB, 1)[0].memory.content.startswith(
            "written in"
        )
    assert snapshot.exists()  # written anew on close
    with structlog.testing.capture_logs() as logs, _open(path) as store:
        assert _loaded(store) and not logs
        assert _answers(store) == expected


def test_a_fifo_in_place_of_the_snapshot_is_not_opened(tmp_path: Path) -> None:
    path = tmp_path / "m.duckdb"
    with _open(path, index_snapshot_min_rows=None) as store:
        _fill(store, 10)
    os.mkfifo(str(path) + ".index")
    with (
        structlog.testing.capture_logs() as logs,
        _open(path, index_snapshot_min_rows=None) as store,
    ):
        warned = _events(logs, "store.index_snapshot_rebuilt")
        assert warned and warned[0]["reason"] == "not a regular file"
        assert len(store._index) == 19
    assert Path(str(path) + ".index").is_fifo()  # left alone


def test_another_embedder_rebuilds_and_names_it(tmp_path: Path) -> None:
    path = tmp_path / "m.duckdb"
    with _open(path) as store:
        _fill(store)
    other = HashEmbedder(24)
    with (
        structlog.testing.capture_logs() as logs,
        _open(path, embedder=other, on_embedder_mismatch="reembed") as store,
    ):
        warned = _events(logs, "store.index_snapshot_rebuilt")
        assert warned and warned[0]["reason"].startswith("another embedder: ")
        assert "hash-24" in warned[0]["reason"]
        assert store._index.dim == 24
        answers = _answers(store)
    assert answers == _rebuilt_answers(path, tmp_path, embedder=other)


def test_other_approximate_setting_rebuilds(tmp_path: Path) -> None:
    path = tmp_path / "m.duckdb"
    with _open(path, approx_search_min_rows=100, embedder=HashEmbedder(64)) as store:
        _fill(store)
        assert store._index.approximate
    with _open(path, approx_search_min_rows=100, embedder=HashEmbedder(64)) as store:
        assert _loaded(store) and store._index.approximate  # the projection was loaded
        loaded = _answers(store)
    same = {"approx_search_min_rows": 100, "embedder": HashEmbedder(64)}
    assert loaded == _rebuilt_answers(path, tmp_path, **same)
    with (
        structlog.testing.capture_logs() as logs,
        _open(path, approx_search_min_rows=None, embedder=HashEmbedder(64)) as store,
    ):
        warned = _events(logs, "store.index_snapshot_rebuilt")
        assert warned and "approx min rows" in warned[0]["reason"]
        assert not store._index.approximate


def test_small_stores_write_no_snapshot_and_drop_a_stale_one(tmp_path: Path) -> None:
    path = tmp_path / "m.duckdb"
    snapshot = Path(str(path) + ".index")
    with _open(path, index_snapshot_min_rows=1000) as store:
        _fill(store, 20)
    assert not snapshot.exists()
    with _open(path) as store:
        store.add(ALICE, "one more")
    assert snapshot.exists()
    with _open(path, index_snapshot_min_rows=1000) as store:  # loads it (still valid) ...
        store.add(ALICE, "and another")  # ... then makes it stale
    assert not snapshot.exists()


def test_a_store_closed_unchanged_keeps_its_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "m.duckdb"
    with _open(path) as store:
        _fill(store, 10)
    snapshot = Path(str(path) + ".index")
    stamp = os.stat(snapshot).st_mtime_ns
    with _open(path) as store:
        store.search("apple", ALICE, 3, touch=False)
    assert os.stat(snapshot).st_mtime_ns == stamp


def test_key_maps_built_from_the_records_when_the_background_build_fails(tmp_path: Path) -> None:
    path = tmp_path / "m.duckdb"
    with _open(path) as store:
        _fill(store, 10)
    with _open(path) as store:
        assert _loaded(store)
        some = store.search("apple", ALICE, 1, touch=False)[0].memory

        def failing() -> Any:
            raise ValueError("garbled ids")

        with structlog.testing.capture_logs() as logs:
            store._index._build_maps_later(failing)
            assert store._index.record(some.id) is not None
        assert _events(logs, "index.key_maps_failed")
        assert store._index.find_hash(some.namespace.key(), some.content_hash) == some.id
        assert store.add(some.namespace, some.content).op in ("MERGE", "NOOP")

"""The index snapshot beside the database file (``actormem.store._index_file``).

Every test opens a real DuckDB file, closes it (which writes the snapshot)
and reopens it; a loaded index must answer exactly like one rebuilt from the
file, and a snapshot that is damaged or stale must be rebuilt, with a
warning that names the reason.
"""

from __future__ import annotations

import functools
import os
import shutil
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
import structlog

from actormem.models.embedders import HashEmbedder
from actormem.store import DuckDBStore, MemoryRecord, Namespace, NewMemory, SearchFilters
from actormem.store import _duckdb_open as open_mod
from actormem.store import _index_file as index_file
from actormem.store import _tokenize as tokenize_mod
from actormem.store._index import MemoryIndex
from actormem.store._index_keys import KeyRows
from tests.store._low_rank import LowRankEmbedder

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


@pytest.mark.parametrize("old", [2, 3])
def test_a_snapshot_from_before_the_term_cap_is_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, old: int
) -> None:
    """Format 4 cut terms to ``MAX_TERM_CHARS``: an older snapshot may hold a longer term
    (which a query, cut now, would never match), so it is rebuilt, never loaded."""
    path = tmp_path / "m.duckdb"
    long_run = "ab12" * 40  # one 160-character term before the cap
    with monkeypatch.context() as m:
        m.setattr(index_file, "FORMAT", old)
        m.setattr(tokenize_mod, "MAX_TERM_CHARS", 10_000)
        m.setattr(tokenize_mod, "_TERMS", tokenize_mod._TermCache())
        with _open(path) as store:
            _fill(store)
            store.add(ALICE, f"the signed token is {long_run}")
        m.setattr(index_file, "_READS", (old,))  # the file as it was written
        mapped = index_file.map_sections(
            str(path) + ".index", index_file._MAGIC, index_file._Header
        )
    assert mapped.header.format == old
    if old == 2:
        vecs = next(s for s in mapped.sections if s.name == "vecs")
        assert vecs.crc == zlib.crc32(mapped.parts["vecs"])
    with structlog.testing.capture_logs() as logs, _open(path) as store:
        assert not _loaded(store)
        assert _events(logs, "store.index_snapshot_rebuilt")
        hits = store.search(long_run, ALICE, 1, touch=False)
        assert hits and hits[0].memory.content.endswith(long_run) and hits[0].bm25 > 0
        assert _answers(store) == _rebuilt_answers(path, tmp_path)


def _truncate(snapshot: Path, stash: Path) -> None:
    data = snapshot.read_bytes()
    snapshot.write_bytes(data[: len(data) // 2])


def _garble_vectors(snapshot: Path, stash: Path) -> None:
    data = bytearray(snapshot.read_bytes())
    head_len = int.from_bytes(data[16:24], "little")
    at = -(-(28 + head_len) // 64) * 64 + 100  # the vectors are the first section
    data[at : at + 16] = bytes(255 - b for b in data[at : at + 16])
    snapshot.write_bytes(bytes(data))


def _garble_header(snapshot: Path, stash: Path) -> None:
    data = bytearray(snapshot.read_bytes())
    data[40:48] = b"\xff" * 8
    snapshot.write_bytes(bytes(data))


def _stale(snapshot: Path, stash: Path) -> None:
    # the snapshot from before the last session's writes, without the delta
    # that brings it up to date
    shutil.copy(stash, snapshot)
    Path(str(snapshot) + ".delta").unlink()


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
    with _open(path, approx_search_min_rows=100, embedder=LowRankEmbedder()) as store:
        _fill(store)
        assert store._index.approximate
    with _open(path, approx_search_min_rows=100, embedder=LowRankEmbedder()) as store:
        assert _loaded(store) and store._index.approximate  # the projection was loaded
        loaded = _answers(store)
    same = {"approx_search_min_rows": 100, "embedder": LowRankEmbedder()}
    assert loaded == _rebuilt_answers(path, tmp_path, **same)
    with (
        structlog.testing.capture_logs() as logs,
        _open(path, approx_search_min_rows=None, embedder=LowRankEmbedder()) as store,
    ):
        warned = _events(logs, "store.index_snapshot_rebuilt")
        assert warned and "approx min rows" in warned[0]["reason"]
        assert not store._index.approximate


def test_a_snapshot_with_the_narrower_projection_of_an_earlier_release_is_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Until session 11 the first pass projected to 32 dimensions (of 64 here); the file
    format did not change, so such a file is read -- and its projection refused: the
    store rebuilds and projects to a quarter of the dimensions, never mixes the two."""
    path = tmp_path / "m.duckdb"
    same = {"approx_search_min_rows": 100, "embedder": LowRankEmbedder()}
    with monkeypatch.context() as m:
        m.setattr(open_mod, "MemoryIndex", functools.partial(MemoryIndex, approx_dims=32))
        with _open(path, **same) as store:
            _fill(store)
            assert store._index._proj is not None and store._index._proj.shape == (64, 32)
    mapped = index_file.map_sections(str(path) + ".index", index_file._MAGIC, index_file._Header)
    assert {s.name: s.shape for s in mapped.sections}["proj"] == (64, 32)
    del mapped
    with structlog.testing.capture_logs() as logs, _open(path, **same) as store:
        warned = _events(logs, "store.index_snapshot_rebuilt")
        assert not _loaded(store)
        assert warned and "projection of shape (64, 32)" in warned[0]["reason"]
        assert store._index._proj is not None and store._index._proj.shape == (64, 16)
        answers = _answers(store)
    assert answers == _rebuilt_answers(path, tmp_path, **same)
    with _open(path, **same) as store:  # the snapshot written on close is loaded
        assert _loaded(store) and store._index._proj is not None
        assert _answers(store) == answers


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


def test_loaded_key_maps_follow_writes_without_a_build(tmp_path: Path) -> None:
    path = tmp_path / "m.duckdb"
    with _open(path) as store:
        _fill(store, 10)
    with _open(path) as store:
        assert _loaded(store)
        index = store._index
        assert isinstance(index._row_of, KeyRows)  # the snapshot's sorted arrays, no dict
        some = store.search("apple", ALICE, 2, touch=False)
        first, second = some[0].memory, some[1].memory
        assert index.find_hash(first.namespace.key(), first.content_hash) == first.id
        assert index.record("no-such-id") is None
        store.delete(ALICE, first.id)
        assert index.record(first.id) is None
        assert index.find_hash(first.namespace.key(), first.content_hash) is None
        again = store.add(ALICE, first.content)  # the same text again: a new memory
        assert again.op == "ADD" and again.id != first.id
        assert index.find_hash(first.namespace.key(), first.content_hash) == again.id
        store.update(ALICE, second.id, content="second one rewritten item5555")
        assert index.record(second.id) is None or index.record(second.id).content.endswith(  # type: ignore[union-attr]
            "item5555"
        )
        assert store.add(ALICE, second.content).op == "ADD"  # its old text is gone
    with _open(path) as store:
        assert _loaded(store)
        assert store._index.record(first.id) is None
        assert store._index.find_hash(first.namespace.key(), first.content_hash) == again.id
        assert _answers(store) == _rebuilt_answers(path, tmp_path)


# -- the delta: what changed since the snapshot (actormem.store._index_delta) ------------------


def _delta(path: Path) -> Path:
    return Path(str(path) + ".index.delta")


def _later_session(path: Path, n: int) -> None:
    """A session that loads the snapshot (and delta) and changes a few memories."""
    with _open(path) as store:
        assert _loaded(store)
        hits = store.search(f"{WORDS[n % 12]} note", ALICE, 3)  # counts retrievals
        store.update(ALICE, hits[0].memory.id, content=f"rewritten in session {n} item{n}xyz")
        store.update(ALICE, hits[1].memory.id, tags=["odd", f"session{n}"], importance=0.95)
        store.delete(ALICE, hits[2].memory.id)
        store.add(BOB, f"added in session {n} item{n}abc", tags=[f"s{n}"])


def test_close_after_a_few_changes_writes_a_delta_and_keeps_the_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "m.duckdb"
    snapshot = Path(str(path) + ".index")
    with _open(path) as store:
        _fill(store)
    assert not _delta(path).exists()
    stamp = os.stat(snapshot).st_mtime_ns
    for session in (2, 3, 4):  # each delta is cumulative from the same snapshot
        _later_session(path, session)
        assert os.stat(snapshot).st_mtime_ns == stamp  # not rewritten
        assert _delta(path).exists() and _delta(path).stat().st_mode & 0o777 == 0o600
        with structlog.testing.capture_logs() as logs, _open(path) as store:
            assert _loaded(store) and not logs
            loaded = _answers(store)
            assert store.search(f"rewritten in session {session}", ALICE, 1)[0].memory.content == (
                f"rewritten in session {session} item{session}xyz"
            )
            # the loaded key maps know the delta's rows and not its deleted ones
            again = store.add(BOB, f"added in session {session} item{session}abc")
            assert again.op in ("MERGE", "NOOP")
        # the exact duplicate changed access counts only: still a delta
        assert os.stat(snapshot).st_mtime_ns == stamp
        assert loaded == _rebuilt_answers(path, tmp_path)


def test_a_search_alone_costs_a_delta_of_its_touched_rows(tmp_path: Path) -> None:
    path = tmp_path / "m.duckdb"
    with _open(path) as store:
        _fill(store)
    stamp = os.stat(str(path) + ".index").st_mtime_ns
    with _open(path) as store:
        hits = store.search("ocean violin", BOB, 4)
    assert os.stat(str(path) + ".index").st_mtime_ns == stamp and _delta(path).exists()
    with _open(path) as store:
        assert _loaded(store)
        for hit in hits:  # (a hit carries its count after this retrieval)
            again = store.get(BOB, hit.memory.id)
            assert again is not None and again.access_count == hit.memory.access_count >= 1
        assert _answers(store) == _rebuilt_answers(path, tmp_path)


def _stale_delta(path: Path, stash: Path) -> None:
    shutil.copy(stash, _delta(path))  # the delta of the session before the last


def _torn_delta(path: Path, stash: Path) -> None:
    data = _delta(path).read_bytes()
    _delta(path).write_bytes(data[: len(data) - 100])


def _garbled_delta(path: Path, stash: Path) -> None:
    data = bytearray(_delta(path).read_bytes())
    data[-60:-50] = bytes(255 - b for b in data[-60:-50])
    _delta(path).write_bytes(bytes(data))


def _lost_snapshot(path: Path, stash: Path) -> None:
    Path(str(path) + ".index").unlink()


DELTA_DAMAGE: dict[str, tuple[Callable[[Path, Path], None], str]] = {
    "stale delta": (_stale_delta, "delta stale: snapshot has commit_seq="),
    "torn delta": (_torn_delta, "delta: truncated: section"),
    "garbled delta": (_garbled_delta, "checksum mismatch in section new_records"),
    "no snapshot": (_lost_snapshot, ""),
}


@pytest.mark.parametrize("damage", sorted(DELTA_DAMAGE))
def test_a_stale_torn_or_orphan_delta_is_rebuilt(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "m.duckdb"
    snapshot = Path(str(path) + ".index")
    stash = tmp_path / "old.delta"
    with _open(path) as store:
        _fill(store)
    _later_session(path, 2)
    shutil.copy(_delta(path), stash)
    _later_session(path, 3)
    expected = _rebuilt_answers(path, tmp_path)
    harm, reason = DELTA_DAMAGE[damage]
    harm(path, stash)
    with structlog.testing.capture_logs() as logs, _open(path) as store:
        warned = _events(logs, "store.index_snapshot_rebuilt")
        if reason:
            assert len(warned) == 1 and warned[0]["log_level"] == "warning"
            assert reason in warned[0]["reason"], warned[0]["reason"]
        assert not _loaded(store)
        assert not snapshot.exists() and not _delta(path).exists()  # never misread later
        assert _answers(store) == expected
        store.add(ALICE, "one more after the rebuild item777")
    assert snapshot.exists() and not _delta(path).exists()  # written whole on close
    with structlog.testing.capture_logs() as logs, _open(path) as store:
        assert _loaded(store) and not logs
        assert store.search("one more after the rebuild", ALICE, 1)[0].memory.content.endswith(
            "item777"
        )


def test_forget_rewrites_the_snapshot_without_the_forgotten_text(tmp_path: Path) -> None:
    path = tmp_path / "m.duckdb"
    snapshot = Path(str(path) + ".index")
    secret = Namespace(user_id="carol", agent_id="bot")
    with _open(path) as store:
        _fill(store)
        store.add(secret, "carol's secret passphrase zebra-quartz-9")
    assert b"zebra-quartz-9" in snapshot.read_bytes()
    _later_session(path, 2)  # a delta first: the forget must not leave the text in the base
    with _open(path) as store:
        store.forget(secret)
    assert not _delta(path).exists()
    assert b"zebra-quartz-9" not in snapshot.read_bytes()
    with _open(path) as store:
        assert _loaded(store)
        assert store.search("zebra quartz", secret, 3) == []
        assert _answers(store) == _rebuilt_answers(path, tmp_path)


def test_many_changes_rewrite_the_whole_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "m.duckdb"
    with _open(path) as store:
        _fill(store)
    with _open(path) as store:  # more new rows than a delta takes (DELTA_MIN_ROWS)
        store.add_many(ALICE, [NewMemory(content=f"bulk memory {i} item{i}q") for i in range(1100)])
    assert not _delta(path).exists()
    with _open(path) as store:
        assert _loaded(store) and len(store._index) == 2 * 120 - 1 + 1100


def test_a_rewritten_snapshot_holds_every_record_as_the_index_has_it(tmp_path: Path) -> None:
    """The records section is appended row by row into one buffer: loaded rows
    not read since are copied as loaded, rows read, changed or added since are
    encoded -- each must decode to the record the index answers with."""
    path = tmp_path / "m.duckdb"
    with _open(path) as store:
        _fill(store)
    with _open(path) as store:
        assert _loaded(store)
        index = store._index
        hits = store.search("apple river", ALICE, 5)  # access counts: loaded rows changed
        store.update(ALICE, hits[1].memory.id, tags=["retagged"])
        store.get(BOB, store.search("tiger", BOB, 1, touch=False)[0].memory.id)  # read only
        store.add_many(ALICE, [NewMemory(content=f"new row {i} item{i}z") for i in range(5)])
        live = [int(r) for r in range(index.rows) if index._alive[r]]
        assert any(r < index._records._base for r in live)  # loaded rows...
        assert any(r >= index._records._base for r in live)  # ...and rows added since
        blob, offsets = index._records.encode_rows(live)
        assert offsets[0] == 0 and offsets[-1] == len(blob)
        decode = msgspec.msgpack.Decoder(MemoryRecord).decode
        for i, row in enumerate(live):
            assert decode(blob[offsets[i] : offsets[i + 1]]) == index._records[row]
        ids = {index._current(r).id for r in live}
        index._base_rows = -1  # close writes the whole snapshot, not a delta
    with _open(path) as store:  # the whole snapshot written from that buffer
        assert _loaded(store)
        assert {store._index._current(r).id for r in range(store._index.rows)} == ids
        assert store.get(ALICE, hits[1].memory.id).tags == ("retagged",)  # type: ignore[union-attr]
    assert _answers_equal_rebuild(path, tmp_path)


def _answers_equal_rebuild(path: Path, tmp_path: Path) -> bool:
    with _open(path) as store:
        loaded = _answers(store)
    return loaded == _rebuilt_answers(path, tmp_path)


def test_snapshot_keys_are_encoded_as_the_lookups_encode_them() -> None:
    """A loaded key map finds a key by encoding it with id_key / hash_key: the
    snapshot's batch encoding must give the same bytes (non-ASCII, StrEnum parts)."""
    import enum

    from actormem.store._index_keys import encode_keys, hash_key, id_key

    class Who(enum.StrEnum):
        ADA = "ada"

    ids = ["0f" * 16, "mémoire-é", "x"]
    hashes = [(("u", "bot", "", ""), "ab" * 32), ((Who.ADA, "ботт", "r", "s"), "cd" * 32)]
    assert encode_keys(ids, id_key) == [id_key(k) for k in ids]
    assert encode_keys(hashes, hash_key) == [hash_key(k) for k in hashes]

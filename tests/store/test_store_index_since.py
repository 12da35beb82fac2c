"""Reopening after a crash catches the index snapshot up (``actormem.store._index_since``).

A child process opens a store whose snapshot is current, writes through
every path (a direct batch, logged single writes, an update, a delete,
retrievals whose counts are flushed), leaves acknowledged records pending in
the log and is SIGKILLed.  The next open must load the snapshot as of its
own commit and re-read only what the since-file names -- answering exactly
like an index rebuilt from a copy of the files -- and must rebuild instead
when the since-file is torn, garbled, missing, or does not describe a commit.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import msgspec
import pytest
import structlog

import actormem.store._index_since as since_module
from actormem.store import DuckDBStore, Namespace, NewMemory
from actormem.store._acklog import AckLog
from actormem.store._index_since import _HEAD, _MAGIC, SinceLog, read_since, since_cap
from tests.store.test_store_index_file import ALICE, BOB, _answers, _events, _fill, _open

EVERYONE = Namespace(agent_id="bot")


def _since(path: Path) -> Path:
    return Path(str(path) + ".index.since")


def _prepared(tmp_path: Path) -> Path:
    """A store with a current snapshot (closed cleanly)."""
    path = tmp_path / "m.duckdb"
    with _open(path) as store:
        _fill(store)
    assert Path(str(path) + ".index").exists()
    return path


def _session_then_kill(path: Path, *, forget: bool = False, cap: int | None = None) -> list[str]:
    """A child writes through every path, leaves records pending and is SIGKILLed.

    ``cap``: the since-file's least cap in the child (``SINCE_MIN_IDS``).
    Returns the ids of the memories it was told were stored.
    """
    script = textwrap.dedent(
        f"""
        import os, signal
        import actormem.store._index_since as since_module
        if {cap!r} is not None:
            since_module.SINCE_MIN_IDS = {cap!r}
        from actormem.models.embedders import HashEmbedder
        from actormem.store import DuckDBStore, Namespace, NewMemory
        alice = Namespace(user_id="alice", agent_id="bot")
        bob = Namespace(user_id="bob", agent_id="bot")
        store = DuckDBStore({str(path)!r}, embedder=HashEmbedder(32), index_snapshot_min_rows=0,
                            touch_flush_interval=None, near_duplicate_threshold=None,
                            clock=lambda: 1_700_000_000.0)
        assert store._snapshot_seq == store.change_counter  # the snapshot was current
        batch = store.add_many(alice, [NewMemory(content=f"batch river memory {{i}} zz{{i}}")
                                       for i in range(150)])           # direct: one commit
        for r in batch:
            print("ACK", r.id, flush=True)
        hits = store.search("apple river", alice, 5)                  # counts retrievals
        store.update(alice, hits[0].memory.id, content="apple river changed after the snapshot")
        store.delete(bob, store.search("tiger garden", bob, 3)[1].memory.id)
        if {forget!r}:
            store.forget(Namespace(user_id="bob"))
        store.flush()                                                 # all of it in DuckDB
        store._apply_lock.acquire()                                   # the applier stops here
        for i in range(3):
            r = store.add(bob, f"pending in the log {{i}} ocean{{i}}")  # acknowledged, logged
            print("ACK", r.id, flush=True)
        store.search("ocean violin", bob, 4)                          # counts never flushed
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    acks = [line.split()[1] for line in proc.stdout.splitlines() if line.startswith("ACK ")]
    assert len(acks) == 153
    assert len(AckLog(str(path)).read()[1]) == 3  # the records DuckDB did not get
    return acks


def _rebuilt(path: Path, tmp_path: Path) -> Any:
    """Answers of a copy of the files without the snapshot: replayed, then rebuilt."""
    copy = tmp_path / "rebuilt" / path.name
    copy.parent.mkdir(exist_ok=True)
    for suffix in ("", ".wal", ".acklog", ".commits"):
        if Path(str(path) + suffix).exists():
            shutil.copy(str(path) + suffix, str(copy) + suffix)
    with _open(copy, index_snapshot_min_rows=None) as store:
        return _answers(store), len(store._index)


def _all_found(store: DuckDBStore, acks: list[str]) -> None:
    for mid in acks:
        rec = store._index.record(mid)
        assert rec is not None, mid
        assert store.search(rec.content, rec.namespace, 1, touch=False)[0].memory.id == mid


def test_a_crash_with_pending_records_catches_the_snapshot_up(tmp_path: Path) -> None:
    path = _prepared(tmp_path)
    acks = _session_then_kill(path)
    since = read_since(str(_since(path)))
    assert since is not None and since.entries  # every commit of the session named its rows
    expected, live = _rebuilt(path, tmp_path)
    with structlog.testing.capture_logs() as logs, _open(path) as store:
        assert not _events(logs, "store.index_snapshot_rebuilt")
        # loaded as of the snapshot's commit, then caught up to the file's
        assert store._snapshot_seq == since.base_seq < store.change_counter
        assert len(store._index) == live == store.count(EVERYONE)
        assert _answers(store) == expected
        _all_found(store, acks)
        assert (
            "changed after the snapshot"
            in store.search("apple river", ALICE, 1, touch=False)[0].memory.content
        )
    # close wrote the snapshot's delta and started a new since-file: the next open loads it
    fresh = read_since(str(_since(path)))
    assert fresh is not None and fresh.entries == {}
    with structlog.testing.capture_logs() as logs, _open(path) as store:
        assert store._snapshot_seq == store.change_counter == fresh.base_seq
        assert not _events(logs, "store.index_snapshot_rebuilt")
        assert _answers(store) == expected


def _torn(since: Path) -> None:
    data = since.read_bytes()
    since.write_bytes(data[:-3])  # the last commit's entry is cut: a gap


def _garbled(since: Path) -> None:
    data = bytearray(since.read_bytes())
    data[len(data) // 2] ^= 0xFF  # an entry in the middle fails its checksum
    since.write_bytes(bytes(data))


def _missing(since: Path) -> None:
    since.unlink()


def _no_ids(since: Path) -> None:
    # every commit has an entry, but they name no rows: the caught-up index
    # lacks the new memories and the count check refuses it
    old = read_since(str(since))
    assert old is not None
    last = max(old.entries)
    since.unlink()
    log = SinceLog.start(str(since), old.store_id, old.base_seq)
    assert log is not None
    for seq in range(old.base_seq + 1, last + 1):
        log.note(seq, [])
    log.close()


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (_torn, "stale: snapshot has commit_seq="),
        (_garbled, "stale: snapshot has commit_seq="),
        (_missing, "stale: snapshot has commit_seq="),
        (_no_ids, "live memories, the file"),
    ],
    ids=["torn", "garbled", "missing", "no ids"],
)
def test_a_since_file_that_does_not_cover_the_crash_rebuilds(
    tmp_path: Path, damage: Any, reason: str
) -> None:
    path = _prepared(tmp_path)
    acks = _session_then_kill(path)
    expected, live = _rebuilt(path, tmp_path)
    damage(_since(path))
    with structlog.testing.capture_logs() as logs, _open(path) as store:
        warned = _events(logs, "store.index_snapshot_rebuilt")
        assert len(warned) == 1 and reason in warned[0]["reason"], warned
        assert store._snapshot_seq == -1  # rebuilt from DuckDB
        assert not _since(path).exists()
        assert len(store._index) == live
        assert _answers(store) == expected
        _all_found(store, acks)


def test_a_damaged_snapshot_found_during_the_catch_up_rebuilds(tmp_path: Path) -> None:
    """The checksums are verified while the catch-up runs: a mismatch still rebuilds."""
    path = _prepared(tmp_path)
    acks = _session_then_kill(path)
    expected, live = _rebuilt(path, tmp_path)
    snapshot = Path(str(path) + ".index")
    data = bytearray(snapshot.read_bytes())
    head_len = int.from_bytes(data[16:24], "little")
    at = -(-(28 + head_len) // 64) * 64 + 100  # in the vectors, the first section
    data[at : at + 16] = bytes(255 - b for b in data[at : at + 16])
    snapshot.write_bytes(bytes(data))
    with structlog.testing.capture_logs() as logs, _open(path) as store:
        warned = _events(logs, "store.index_snapshot_rebuilt")
        assert len(warned) == 1 and "checksum mismatch in section vecs" in warned[0]["reason"]
        assert store._snapshot_seq == -1
        assert len(store._index) == live
        assert _answers(store) == expected
        _all_found(store, acks)


def test_a_commit_that_cannot_name_its_rows_ends_the_since_file(tmp_path: Path) -> None:
    """``forget`` removes the since-file before it commits: the crash after it rebuilds."""
    path = _prepared(tmp_path)
    acks = _session_then_kill(path, forget=True)
    assert not _since(path).exists()
    expected, live = _rebuilt(path, tmp_path)
    with structlog.testing.capture_logs() as logs, _open(path) as store:
        assert _events(logs, "store.index_snapshot_rebuilt")
        assert store._snapshot_seq == -1
        assert len(store._index) == live
        assert _answers(store) == expected
        _all_found(store, acks)  # the three pending adds came after the forget
        assert store.count(BOB) == 3  # bob's older memories are gone for good


def _named(path: Path) -> int | None:
    since = read_since(str(_since(path)))
    return None if since is None else sum(map(len, since.entries.values()))


def test_the_since_file_is_bounded_by_its_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the cap the file is removed (not appended to without end); close starts a new one."""
    path = _prepared(tmp_path)  # 240 memories
    monkeypatch.setattr(since_module, "SINCE_MIN_IDS", 100)
    with _open(path) as store:
        before = store.count(ALICE)
        store.add_many(ALICE, [NewMemory(content=f"under the cap {i} qq{i}") for i in range(60)])
        store.flush()
        assert _named(path) == 60  # cap: max(100, 300 rows // 4)
        store.add_many(ALICE, [NewMemory(content=f"past the cap {i} qr{i}") for i in range(60)])
        store.flush()
        assert not _since(path).exists()  # 120 ids named > max(100, 360 // 4)
        store.add(ALICE, "written after the cap")
        store.flush()
        assert not _since(path).exists()  # not started again before a snapshot
        assert store.search("written after the cap", ALICE, 1)[0].memory.content == (
            "written after the cap"
        )
    assert _named(path) == 0  # close wrote the index and started an empty since-file
    with structlog.testing.capture_logs() as logs, _open(path) as store:
        assert not _events(logs, "store.index_snapshot_rebuilt")
        assert store._snapshot_seq == store.change_counter
        assert store.count(ALICE) == before + 121
    # the cap follows the index: a quarter of its rows once that is more
    assert since_cap(10_000_000) == 2_500_000 and since_cap(10) == 100


def test_a_crash_after_the_cap_rebuilds_like_a_fresh_index(tmp_path: Path) -> None:
    path = _prepared(tmp_path)
    acks = _session_then_kill(path, cap=100)  # its 150-memory batch passes the cap
    assert not _since(path).exists()
    expected, live = _rebuilt(path, tmp_path)
    with structlog.testing.capture_logs() as logs, _open(path) as store:
        warned = _events(logs, "store.index_snapshot_rebuilt")
        assert len(warned) == 1 and "stale: snapshot has commit_seq=" in warned[0]["reason"]
        assert store._snapshot_seq == -1  # rebuilt from DuckDB
        assert len(store._index) == live == store.count(EVERYONE)
        assert _answers(store) == expected
        _all_found(store, acks)


def test_entries_past_the_file_are_ignored_and_gaps_refused(tmp_path: Path) -> None:
    """The reading rules, on a since-file written by hand."""
    path = str(tmp_path / "x.index.since")
    log = SinceLog.start(path, "store-a", 10)
    assert log is not None
    log.note(11, ["a", "b"])
    log.note(12, [])
    log.note(12, ["c"])  # a failed commit's ids merge into the one that took its number
    log.note(14, ["z"])  # noted, never committed
    log.close()
    since = read_since(path)
    assert since is not None and (since.store_id, since.base_seq) == ("store-a", 10)
    assert since.ids_through(10) == set()
    assert since.ids_through(12) == {"a", "b", "c"}
    assert since.ids_through(13) is None  # commit 13 has no entry
    assert since.ids_through(9) is None
    with open(path, "ab") as f:
        f.write(b"\x05\x00")  # a torn tail ends the entries, the rest still reads
    assert read_since(path) is not None
    with open(path, "r+b") as f:
        f.write(b"garbage!")  # the magic
    assert read_since(path) is None
    os.unlink(path)
    assert read_since(path) is None


def _frames(data: bytes) -> list[tuple[int, int]]:
    """``(seq, end offset)`` of each whole entry of a since-file's bytes."""
    pos = len(_MAGIC)
    size, _ = _HEAD.unpack_from(data, pos)
    pos += _HEAD.size + size  # the header
    out = []
    while pos + _HEAD.size <= len(data):
        size, _ = _HEAD.unpack_from(data, pos)
        if pos + _HEAD.size + size > len(data):
            break
        seq, _ids = msgspec.msgpack.decode(data[pos + _HEAD.size : pos + _HEAD.size + size])
        pos += _HEAD.size + size
        out.append((seq, pos))
    return out


def _counts_session_then_kill(path: Path) -> tuple[str, str]:
    """A child counts a retrieval, adds (logged) and lets the applier commit both; SIGKILLed.

    Its ``os.fdatasync`` notes the since-file's size at each sync in
    ``<since>.synced``: what a power cut cannot take away.  Returns the ids
    of the touched memory and of the added one.
    """
    script = textwrap.dedent(
        f"""
        import os, signal
        from actormem.models.embedders import HashEmbedder
        from actormem.store import DuckDBStore, Namespace
        since = os.path.realpath({str(_since(path))!r})
        synced = open(since + ".synced", "w")
        real = os.fdatasync
        def fdatasync(fd):
            if os.readlink(f"/proc/self/fd/{{fd}}") == since:
                synced.write(f"{{os.fstat(fd).st_size}}\\n")
                synced.flush()
            real(fd)
        os.fdatasync = fdatasync
        alice = Namespace(user_id="alice", agent_id="bot")
        store = DuckDBStore({str(path)!r}, embedder=HashEmbedder(32), index_snapshot_min_rows=0,
                            touch_flush_interval=None, near_duplicate_threshold=None,
                            clock=lambda: 1_700_000_000.0)
        print("TOUCHED", store.search("apple river", alice, 1)[0].memory.id, flush=True)
        print("ADDED", store.add(alice, "a new memory about giraffes").id, flush=True)
        store.count(alice)  # a read of DuckDB: the record and the count committed together
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    said = dict(line.split() for line in proc.stdout.splitlines())
    return said["TOUCHED"], said["ADDED"]


def test_a_power_cut_that_loses_unsynced_entries_never_misleads_the_catch_up(
    tmp_path: Path,
) -> None:
    """The applier's access counts share the record's commit number (two entries).

    A power cut keeps the since-file only up to its last sync.  For every
    length it may have been cut to (each whole entry from the synced size
    on), the open must answer like a rebuild: the touched memory's count
    included.  Before the fix the file was never synced, and cutting the
    counts' entry alone left the number looking covered: accepted, count lost.
    """
    path = _prepared(tmp_path)
    touched, added = _counts_session_then_kill(path)
    data = _since(path).read_bytes()
    frames = _frames(data)
    last = frames[-1][0]
    assert [seq for seq, _ in frames].count(last) == 2  # the record's entry, then the counts'
    synced_text = Path(str(_since(path)) + ".synced").read_text().split()
    synced = max((int(s) for s in synced_text), default=0)
    cuts = [end for _, end in frames if end >= synced]
    assert cuts  # the whole file is one of them
    for cut in cuts:
        copy = tmp_path / f"cut{cut}" / path.name
        copy.parent.mkdir()
        for suffix in ("", ".wal", ".acklog", ".commits", ".index", ".index.delta"):
            if Path(str(path) + suffix).exists():
                shutil.copy(str(path) + suffix, str(copy) + suffix)
        _since(copy).write_bytes(data[:cut])
        with _open(copy) as store:
            rows = store._reader().execute(
                "SELECT id, access_count, content FROM memories WHERE id IN (?, ?)",
                [touched, added],
            )
            stored = {mid: (count, content) for mid, count, content in rows.fetchall()}
            assert len(stored) == 2
            for mid, (count, content) in stored.items():
                rec = store._index.record(mid)
                assert rec is not None and (rec.access_count, rec.content) == (count, content)


def test_a_sync_only_when_a_commit_number_gets_a_second_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Single writes never sync; a second entry for a number (counts, a retry) does."""
    synced: list[int] = []
    real = os.fdatasync

    def fdatasync(fd: int) -> None:
        synced.append(os.fstat(fd).st_size)
        real(fd)

    monkeypatch.setattr(os, "fdatasync", fdatasync)
    path = str(tmp_path / "x.index.since")
    log = SinceLog.start(path, "store-a", 10)
    assert log is not None
    log.note(11, ["a"])
    log.note(12, ["b"])
    assert synced == []
    log.note(12, ["c"])  # the applier's counts, or a retried commit
    assert synced == [os.path.getsize(path)]
    log.note(11, ["d"])  # anything not above the highest number noted
    assert len(synced) == 2
    log.note(13, ["e"])
    assert len(synced) == 2
    log.close()
    since = read_since(path)
    assert since is not None and since.last_seq == 13
    # reopened, the numbers already in the file count: a ghost entry of a
    # commit that never happened is a first entry the retry must not hide behind
    log2 = SinceLog.reopen(path, since)
    assert log2 is not None
    log2.note(13, ["f"])
    assert len(synced) == 3
    log2.note(14, ["g"])
    assert len(synced) == 3
    log2.close()


def test_a_torn_last_entry_is_cut_off_and_later_entries_read(tmp_path: Path) -> None:
    """A SIGKILL mid-append leaves part of an entry: the open cuts it before appending."""
    path = _prepared(tmp_path)
    _session_then_kill(path)
    with open(_since(path), "ab") as f:
        f.write(b"\x40\x00\x00\x00\x01\x02")  # the start of an entry, torn
    with structlog.testing.capture_logs() as logs, _open(path) as store:
        assert not _events(logs, "store.index_snapshot_rebuilt")
        base = store._snapshot_seq
        assert base < store.change_counter  # caught up
        new = store.add(ALICE, "written after the torn entry was cut")
        store.count(ALICE)  # into DuckDB
        since = read_since(str(_since(path)))
        assert since is not None and since.base_seq == base
        ids = since.ids_through(store.change_counter)
        assert ids is not None and new.id in ids  # the entries after the cut read
        assert since.end == _since(path).stat().st_size  # nothing unreadable is left


def test_a_memory_write_carrying_a_turns_start_is_caught_up(tmp_path: Path) -> None:
    """A turn's start carried by a memory write: its number's second entry names the rows."""
    path = _prepared(tmp_path)
    script = textwrap.dedent(
        f"""
        import os, signal
        from actormem.models.embedders import HashEmbedder
        from actormem.store import DuckDBStore, Namespace
        alice = Namespace(user_id="alice", agent_id="bot")
        store = DuckDBStore({str(path)!r}, embedder=HashEmbedder(32), index_snapshot_min_rows=0,
                            touch_flush_interval=None, near_duplicate_threshold=None,
                            clock=lambda: 1_700_000_000.0)
        store._apply_lock.acquire()                                   # the applier stops here
        store.journal_write(alice, [("USER_FEEDBACK", "the turn's start", {{}}, 1_700_000_000.0)],
                            {{"now": "in flight"}}, sync=False)
        r = store.add(alice, "carried with the start violin harbour")  # one record for both
        print("ACK", r.id, len(store._acklog.read()[1]), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    _, mid, records = proc.stdout.split()
    assert records == "1"
    since = read_since(str(_since(path)))
    assert since is not None and any(mid in ids for ids in since.entries.values())
    with structlog.testing.capture_logs() as logs, _open(path) as store:
        assert not _events(logs, "store.index_snapshot_rebuilt")
        assert store._snapshot_seq == since.base_seq < store.change_counter
        _all_found(store, [mid])
        assert [e.content for e in store.log_entries(ALICE)] == ["the turn's start"]

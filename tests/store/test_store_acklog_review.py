"""The acknowledgement log under the faults a review found (issue 16 point 1).

Each test reproduces one way an acknowledged write could be lost, or a store
bricked, with real files: a value DuckDB refuses only when it applies the
record, a second store object on the same file, records damaged the way a
disk or a power cut damages them (the log's bytes are written by hand), and
a close whose drain fails.
"""

from __future__ import annotations

import json
import math
import re
import signal
import struct
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from actormem.models.embedders import HashEmbedder
from actormem.store import (
    DuckDBStore,
    InvalidMemoryError,
    Namespace,
    StoreClosedError,
    StoreError,
    StoreLockedError,
)
from actormem.store._acklog import _HEADER_LEN, _REC, AckLog, encode

from .test_store_acklog import _FailingWrites

NS = Namespace(user_id="ada", agent_id="bot")


def _open(path: Path, **kwargs: object) -> DuckDBStore:
    kwargs.setdefault("embedder", HashEmbedder(64))
    kwargs.setdefault("touch_flush_interval", None)
    return DuckDBStore(path, **kwargs)  # type: ignore[arg-type]


BAD_TS = [1e13, -1.0, math.nan, math.inf, "2020-01-01", True]


@pytest.mark.parametrize("ts", BAD_TS, ids=repr)
def test_a_journal_timestamp_duckdb_cannot_store_is_refused_at_the_call(
    tmp_path: Path, ts: object
) -> None:
    """journal_write and log_append with a bad ts: refused naming ts, nothing acknowledged,
    later writes, reads, close and reopen unaffected (before: acknowledged, then every
    later record stuck behind it and the store would not reopen)."""
    path = tmp_path / "m.duckdb"
    store = _open(path)
    store.journal_write(NS, [("note", "first entry", {}, time.time())])
    log_size = store._acklog.size if store._acklog is not None else 0
    with pytest.raises(InvalidMemoryError, match=r"entries\[1\]\.ts"):
        store.journal_write(NS, [("note", "ok", {}, time.time()), ("note", "bad", {}, ts)])  # type: ignore[list-item]
    with pytest.raises(InvalidMemoryError, match="ts"):
        store.log_append(NS, "note", "bad", ts=ts)  # type: ignore[arg-type]
    assert store._acklog is not None and store._acklog.size in (0, log_size)
    good = store.add(NS, "an ordinary memory added afterwards").id
    store.journal_write(NS, [("note", "second entry", {}, time.time())])
    assert [e.content for e in store.log_entries(NS)] == ["first entry", "second entry"]
    store.flush()
    store.close()
    with _open(path) as again:
        assert again.get(NS, good) is not None
        assert len(again.log_entries(NS)) == 2


@pytest.mark.parametrize("meta", [[1, 2], "text", 3], ids=repr)
def test_journal_metadata_that_is_not_a_dict_is_refused_naming_it(
    tmp_path: Path, meta: object
) -> None:
    with _open(tmp_path / "m.duckdb") as store:
        with pytest.raises(InvalidMemoryError, match=r"entries\[0\]\.metadata"):
            store.journal_write(NS, [("note", "x", meta, time.time())])  # type: ignore[list-item]
        with pytest.raises(InvalidMemoryError, match="metadata"):
            store.log_append(NS, "note", "x", metadata=meta)  # type: ignore[arg-type]
        assert store.log_entries(NS) == []


def test_a_second_store_object_on_an_open_file_is_refused(tmp_path: Path) -> None:
    """Two store objects on one file in one process: the second is refused, by any path
    to the file, and the first one's acknowledged writes survive a SIGKILL (before: the
    second open cut the first one's log and both appended over each other)."""
    path = tmp_path / "m.duckdb"
    link = tmp_path / "link.duckdb"
    script = textwrap.dedent(
        f"""
        import os, signal
        from actormem.models.embedders import HashEmbedder
        from actormem.store import DuckDBStore, Namespace
        ns = Namespace(user_id="ada", agent_id="bot")
        a = DuckDBStore({str(path)!r}, embedder=HashEmbedder(64), touch_flush_interval=None)
        a._stop.set(); a._apply_wake.set()  # applier idle: the records stay in the log only
        print("ACK", a.add(ns, "acknowledged by store A").id, flush=True)
        os.symlink({str(path)!r}, {str(link)!r})
        for p in ({str(path)!r}, {str(link)!r}):
            try:
                DuckDBStore(p, embedder=HashEmbedder(64), touch_flush_interval=None)
                print("SECOND OPEN ALLOWED", flush=True)
            except Exception as exc:
                print("REFUSED", type(exc).__name__, flush=True)
        print("ACK", a.add(ns, "second write through store A").id, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert proc.stdout.count("REFUSED StoreLockedError") == 2, proc.stdout
    acks = [line.split()[1] for line in proc.stdout.splitlines() if line.startswith("ACK")]
    assert len(acks) == 2
    with _open(path) as store:
        assert all(store.get(NS, m) is not None for m in acks)
        with pytest.raises(StoreLockedError, match="already open in this process"):
            _open(link)
    with _open(link) as again:  # closed: free again
        assert len(again.list(NS)) == 2


def test_close_closes_even_when_the_log_cannot_be_applied(tmp_path: Path) -> None:
    """DuckDB refusing the pending records at close (a full disk): close() logs it and
    still closes everything -- the file can be opened again in this process, and that
    open replays the acknowledged records (before: close raised and kept the file open)."""
    path = tmp_path / "c.duckdb"
    store = _open(path)
    store.add(NS, "in DuckDB")
    store.flush()
    store._wcur = _FailingWrites(store._wcur)
    store._acur = _FailingWrites(store._con.cursor())
    acked = [store.add(NS, f"only in the log {i}").id for i in range(3)]
    store.get(NS, acked[0])  # an access count pending: close would flush it
    store.close()
    assert store._closed
    with pytest.raises(StoreClosedError):
        store.add(NS, "after close")
    with _open(path) as again:
        assert all(again.get(NS, m) is not None for m in acked)
        assert len(again.list(NS)) == 4


def _five_in_the_log_then_die(path: Path) -> list[str]:
    """A child acknowledges 5 memories with its applier stopped (they are only in the
    log) and is SIGKILLed; returns their ids."""
    script = textwrap.dedent(
        f"""
        import os, signal
        from actormem.models.embedders import HashEmbedder
        from actormem.store import DuckDBStore, Namespace
        s = DuckDBStore({str(path)!r}, embedder=HashEmbedder(64), touch_flush_interval=None)
        s._stop.set(); s._apply_wake.set()
        ns = Namespace(user_id="ada", agent_id="bot")
        for i in range(5):
            print("ACK", s.add(ns, f"acknowledged memory number {{i}}").id, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    acks = [line.split()[1] for line in proc.stdout.splitlines() if line.startswith("ACK")]
    assert len(acks) == 5 and len(AckLog(str(path)).read()[1]) == 5
    return acks


def _offsets(raw: bytes) -> list[int]:
    """Where each record of a log starts."""
    out, pos = [], _HEADER_LEN
    while pos < len(raw) and raw[pos : pos + _REC.size] != bytes(_REC.size):
        out.append(pos)
        pos += _REC.size + struct.unpack_from("<I", raw, pos)[0]
    out.append(pos)  # where the next record goes
    return out


@pytest.mark.parametrize("record", [0, 2], ids=["first", "middle"])
@pytest.mark.parametrize("byte", [0, 3], ids=["length-low-bit", "length-high-byte"])
def test_a_garbled_length_before_the_last_record_is_refused_naming_the_offset(
    tmp_path: Path, record: int, byte: int
) -> None:
    """One bit of a record's length flipped (a bad sector): the records after it are
    acknowledged, so the open refuses naming the log and the byte, and leaves it as it
    was -- also with the commit record moved aside, which used to be the only reason it
    was refused (before: the length ran past the end, read as a torn tail, all dropped)."""
    path = tmp_path / "m.duckdb"
    _five_in_the_log_then_die(path)
    log_path = Path(str(path) + ".acklog")
    raw = bytearray(log_path.read_bytes())
    at = _offsets(bytes(raw))[record]
    raw[at + byte] ^= 0x01
    log_path.write_bytes(bytes(raw))
    commits = Path(str(path) + ".commits")
    if commits.exists():
        commits.unlink()
    for _ in range(2):
        with pytest.raises(
            StoreError, match=rf"{re.escape(str(log_path))} is damaged.* at byte {at}\b"
        ):
            _open(path)
        assert log_path.read_bytes() == bytes(raw)


@pytest.mark.parametrize("how", ["zero-first-page", "length-bit", "zero-tail"])
def test_a_last_record_torn_by_a_power_cut_is_dropped_and_nothing_acknowledged_is_lost(
    tmp_path: Path, how: str
) -> None:
    """The last record appended after the last sync (never acknowledged), torn the ways a
    power cut tears it: its first page never written (zeros) while later pages were, a
    garbled length, or zeros only.  Every acknowledged record is replayed, the torn one
    dropped (before: the zeroed first page was refused as damage)."""
    path = tmp_path / "m.duckdb"
    acks = _five_in_the_log_then_die(path)
    log_path = Path(str(path) + ".acklog")
    raw = log_path.read_bytes()
    end = _offsets(raw)[5]  # where the sixth record is written, over the space ahead
    torn = bytearray(encode(6, ["SELECT '" + "x" * 9000 + "'"]))
    if how == "zero-first-page":
        torn[: 4096 - end % 4096] = bytes(4096 - end % 4096)
    elif how == "length-bit":
        torn[2] ^= 0x04
    else:
        torn = bytearray(len(torn))
    log_path.write_bytes(raw[:end] + bytes(torn) + raw[end + len(torn) :])
    with _open(path) as store:
        assert all(store.get(NS, m) is not None for m in acks)
        assert store.change_counter >= 5


def test_a_log_of_the_first_format_is_still_read(tmp_path: Path) -> None:
    """Logs written before the header checksum (``actormem-acklog 1``) are read, torn
    tail and damage told apart the same way."""
    import zlib

    def v1(seq: int, sql: str) -> bytes:
        payload = sql.encode()
        crc = zlib.crc32(payload, zlib.crc32(struct.pack("<Q", seq)))
        return struct.pack("<IIQ", len(payload), crc, seq) + payload

    path = tmp_path / "old.duckdb"
    head = b"actormem-acklog 1 " + b"a" * 32 + b"\n"
    log_path = Path(str(path) + ".acklog")
    log_path.write_bytes(head + v1(1, "SELECT 1") + v1(2, "SELECT 2") + bytes(30))
    assert [r.seq for r in AckLog(str(path)).read()[1]] == [1, 2]
    raw = bytearray(head + v1(1, "SELECT 1") + v1(2, "SELECT 2") + v1(3, "SELECT 3"))
    raw[len(head) + 3] ^= 0x01  # record 1's length
    log_path.write_bytes(bytes(raw))
    with pytest.raises(StoreError, match=rf"damaged.* at byte {len(head)}\b"):
        AckLog(str(path)).read()


def test_a_log_of_the_second_format_is_still_read(tmp_path: Path) -> None:
    """Logs written before the base field (``actormem-acklog 2``: records right after the
    header line) are read, torn tail and damage told apart the same way."""
    path = tmp_path / "old2.duckdb"
    head = b"actormem-acklog 2 " + b"a" * 32 + b"\n"
    log_path = Path(str(path) + ".acklog")
    log_path.write_bytes(head + encode(1, ["SELECT 1"]) + encode(2, ["SELECT 2"]) + bytes(30))
    assert [r.seq for r in AckLog(str(path)).read()[1]] == [1, 2]
    raw = bytearray(head + encode(1, ["SELECT 1"]) + encode(2, ["SELECT 2"]))
    raw += encode(3, ["SELECT 3"])
    raw[len(head) + 3] ^= 0x01  # record 1's length
    log_path.write_bytes(bytes(raw))
    with pytest.raises(StoreError, match=rf"damaged.* at byte {len(head)}\b"):
        AckLog(str(path)).read()


#: A write DuckDB refuses only when it applies it (a NOT NULL column left empty): stands
#: for any value the checks at the call might miss one day.
_REJECTED_SQL = "INSERT INTO journal_state (user_id, key) VALUES ('ada', 'k')"


@pytest.mark.parametrize("crash", [False, True], ids=["applier", "replay-after-sigkill"])
def test_a_record_duckdb_rejects_is_set_aside_and_the_others_are_applied(
    tmp_path: Path, crash: bool
) -> None:
    """An acknowledged record DuckDB rejects at apply goes to <db>.acklog.rejected (with its
    commit number, error and SQL), commit_seq moves past it, and the records before and
    after it are applied -- by the applier, and by the replay of a reopen after a SIGKILL
    (before: apply and replay were all-or-nothing, every later write stuck, reopen refused)."""
    path = tmp_path / "r.duckdb"
    script = textwrap.dedent(
        f"""
        import os, signal
        from actormem.models.embedders import HashEmbedder
        from actormem.store import DuckDBStore, Namespace
        s = DuckDBStore({str(path)!r}, embedder=HashEmbedder(64), touch_flush_interval=None)
        if {crash!r}:
            s._stop.set(); s._apply_wake.set()  # the records stay in the log only
        ns = Namespace(user_id="ada", agent_id="bot")
        print("ACK", s.add(ns, "before the rejected write").id, flush=True)
        with s._write_lock:
            s._write_script("a write DuckDB rejects", [{_REJECTED_SQL!r}])
        print("BADSEQ", s.change_counter, flush=True)
        print("ACK", s.add(ns, "after the rejected write").id, flush=True)
        if {crash!r}:
            os.kill(os.getpid(), signal.SIGKILL)
        print("LISTED", len(s.list(ns)), "REJECTED", s.rejected_writes, flush=True)
        s.close()
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    acks = [line.split()[1] for line in proc.stdout.splitlines() if line.startswith("ACK")]
    assert len(acks) == 2, proc.stderr
    bad = int(proc.stdout.split("BADSEQ ")[1].split()[0])
    if crash:
        assert proc.returncode == -signal.SIGKILL
    else:
        assert proc.returncode == 0, proc.stderr
        assert "LISTED 2 REJECTED 1" in proc.stdout
    with _open(path) as store:
        assert [store.get(NS, m) is not None for m in acks] == [True, True]
        hits = {h.memory.id for h in store.search("the rejected write", NS, limit=5)}
        assert hits == set(acks)  # the index agrees with DuckDB
        assert store.change_counter == bad + 1
        store.add(NS, "and the store goes on")
    rejected = Path(str(path) + ".acklog.rejected").read_text().splitlines()
    assert len(rejected) == 1
    entry = json.loads(rejected[0])
    assert entry["seq"] == bad and entry["statements"] == _REJECTED_SQL
    assert "NOT NULL" in entry["error"] or "null" in entry["error"].lower()
    with _open(path) as again:  # set aside once: not tried again
        assert len(again.list(NS)) == 3
    assert len(Path(str(path) + ".acklog.rejected").read_text().splitlines()) == 1


def test_the_log_is_created_durably_and_kept_across_closes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Creating the log syncs its directory (the new name survives a power cut), and a
    clean close cuts it to its header instead of deleting it, so later sessions append
    to the same, already durable file (before: deleted at every close, re-created at
    every open, the directory never synced)."""
    import os
    import stat

    synced_dirs: list[int] = []
    real_fsync = os.fsync

    def spy(fd: int) -> None:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            synced_dirs.append(st.st_ino)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", spy)
    path = tmp_path / "d.duckdb"
    log_path = Path(str(path) + ".acklog")
    with _open(path) as store:
        assert log_path.exists()
        assert tmp_path.stat().st_ino in synced_dirs
        store.add(NS, "one")
    inode = log_path.stat().st_ino
    assert AckLog(str(path)).read()[1] == []
    synced_dirs.clear()
    with _open(path) as store:
        assert len(store.list(NS)) == 1
        store.add(NS, "two")
    assert log_path.stat().st_ino == inode  # the same file, never re-created


def test_an_acknowledged_write_is_reported_stored_when_updating_the_index_fails(
    tmp_path: Path,
) -> None:
    """The record is synced, then updating the index raises and DuckDB cannot take the
    log either (a full disk): add() still returns (the write is stored), and the index is
    rebuilt once DuckDB has the record (before: the caller got StoreError for a write that
    was acknowledged and is replayed)."""
    path = tmp_path / "i.duckdb"
    store = _open(path)
    try:
        store.add(NS, "in DuckDB")
        store.flush()
        real_apply = store._apply_to_index
        fail = [True]

        def flaky(batch: object, *args: object) -> None:
            if fail.pop() if fail else False:
                raise RuntimeError("the index ran out of memory")
            real_apply(batch, *args)  # type: ignore[arg-type]

        store._apply_to_index = flaky  # type: ignore[method-assign]
        store._wcur = _FailingWrites(store._wcur)
        store._acur = _FailingWrites(store._con.cursor())
        stored = store.add(NS, "acknowledged while the index failed").id
        store._wcur = store._wcur._cur
        store._acur = None
        assert stored in {r.id for r in store.list(NS)}  # a read applies the log ...
        assert store.get(NS, stored) is not None  # ... and then rebuilds the index
        hits = [h.memory.id for h in store.search("acknowledged while the index failed", NS)]
        assert hits[0] == stored
    finally:
        store.close()
    with _open(path) as again:
        assert again.get(NS, stored) is not None


def test_text_that_is_not_valid_unicode_is_refused_before_the_log(tmp_path: Path) -> None:
    """A lone surrogate in a journal entry's type or a journal state value: InvalidMemoryError
    (before: a raw UnicodeEncodeError from the log's encoder), nothing acknowledged."""
    with _open(tmp_path / "u.duckdb") as store:
        with pytest.raises(InvalidMemoryError, match="not valid Unicode"):
            store.set_journal_state(NS, {"k": "\ud800"})
        with pytest.raises(InvalidMemoryError):
            store.journal_write(NS, [("n\ud800", "x", {}, time.time())])
        assert store._acklog is not None and store._acklog.size == 0
        assert store.journal_state(NS) == {} and store.log_entries(NS) == []

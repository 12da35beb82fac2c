"""The acknowledgement log: a small write is durable once its record is synced in it.

Real child processes add memories and save keyed facts, print each id once
the call returned (acknowledged) and are SIGKILLed right after -- most of
those writes are then only in ``<db>.acklog``.  The store is reopened and
every acknowledged write must be there, by ``get`` (DuckDB) and by search
(the index).  The log's tail is then torn or damaged the ways a crash or a
disk would, and the open either drops what was never acknowledged or refuses.
"""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import duckdb
import pytest

from actormem.models.embedders import HashEmbedder
from actormem.recorder import KeyedFacts
from actormem.store import DuckDBStore, Namespace, StoreError
from actormem.store._acklog import _HEADER_LEN, _REC, ROOM, AckLog

NS = Namespace(user_id="ada", agent_id="bot")
N = 60


def _open(path: Path, **kwargs: object) -> DuckDBStore:
    kwargs.setdefault("embedder", HashEmbedder(64))
    kwargs.setdefault("touch_flush_interval", None)
    return DuckDBStore(path, **kwargs)  # type: ignore[arg-type]


def _write_then_die(path: Path, n: int = N, threads: int = 1) -> tuple[list[str], dict[str, str]]:
    """A child adds ``n`` memories (from ``threads`` threads) and saves keyed facts,
    prints each once acknowledged, and is SIGKILLed right after the last one."""
    script = textwrap.dedent(
        f"""
        import os, signal, sys, threading
        from actormem.models.embedders import HashEmbedder
        from actormem.recorder import KeyedFacts
        from actormem.store import DuckDBStore, Namespace
        store = DuckDBStore({str(path)!r}, embedder=HashEmbedder(64), touch_flush_interval=None)
        ns = Namespace(user_id="ada", agent_id="bot")
        facts = KeyedFacts(store, Namespace(user_id="ada", agent_id="facts"))
        out = threading.Lock()
        def work(t):
            for i in range(t, {n}, {threads}):
                res = store.add(ns if t == 0 else Namespace(user_id="ada", agent_id=f"t{{t}}"),
                                f"acknowledged memory number {{i}} of thread {{t}}")
                with out:
                    print("ACK", res.id, flush=True)
                if i % 7 == 0:
                    with out:  # saved and printed in the same order across threads
                        facts.save(f"key{{i % 3}}", f"value {{i}}")
                        print("FACT", f"key{{i % 3}}", f"value {{i}}", flush=True)
        ts = [threading.Thread(target=work, args=(t,)) for t in range({threads})]
        for t in ts: t.start()
        for t in ts: t.join()
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    acks, facts = [], {}
    for line in proc.stdout.splitlines():
        parts = line.split(" ", 2)
        if parts[0] == "ACK":
            acks.append(parts[1])
        elif parts[0] == "FACT":
            facts[parts[1]] = parts[2]
    assert len(acks) == n
    return acks, facts


def _check_all_there(path: Path, acks: list[str], facts: dict[str, str]) -> None:
    with _open(path) as store:
        assert store.lost_commits == 0
        scopes = [Namespace(user_id="ada", agent_id=a) for a in ("bot", "t1", "t2", "t3")]
        for mid in acks:  # DuckDB has each (``get`` reads the file) ...
            found = [(ns, r) for ns in scopes if (r := store.get(ns, mid)) is not None]
            assert len(found) == 1, mid
            ns, rec = found[0]
            # ... and so does the index (search reads only the index)
            assert store.search(rec.content, ns, limit=1)[0].memory.id == mid
        kf = KeyedFacts(store, Namespace(user_id="ada", agent_id="facts"))
        for key, value in facts.items():
            assert kf.get(key) == value
        assert store.count(Namespace(user_id="ada")) == len(acks) + len(facts)


@pytest.mark.parametrize("threads", [1, 4])
def test_sigkill_right_after_acknowledgements_loses_nothing(tmp_path: Path, threads: int) -> None:
    path = tmp_path / "m.duckdb"
    acks, facts = _write_then_die(path, threads=threads)
    _check_all_there(path, acks, facts)
    _check_all_there(path, acks, facts)  # replayed once: a second open adds nothing
    # a clean close applied every record and cut the log to its header (the file is kept)
    assert AckLog(str(path)).read()[1] == []
    assert Path(str(path) + ".acklog").stat().st_size == _HEADER_LEN


def test_the_log_holds_writes_duckdb_does_not_have_yet(tmp_path: Path) -> None:
    """Without the log the kill would lose them: DuckDB alone (log moved aside) lacks some."""
    path = tmp_path / "m.duckdb"
    acks, _ = _write_then_die(path)
    log_path = Path(str(path) + ".acklog")
    records = AckLog(str(path)).read()[1]
    assert records, "the writes just before the kill are only in the log"
    aside = tmp_path / "aside.acklog"
    os.replace(log_path, aside)
    with _open(path, on_lost_commits="warn") as store:  # the commit record notices
        assert store.lost_commits >= 1
        present = [m for m in acks if store.get(NS, m) is not None]
    assert len(present) < len(acks)


def _torn(data: bytes) -> bytes:
    """A record cut in the middle, as a crash during ``write`` leaves it."""
    return data + struct.pack("<IIQ", 500, 1234, 10_000) + b"INSERT INTO mem"


def _zero_tail(data: bytes) -> bytes:
    """The file grew but the block never reached the disk: zeros."""
    return data + b"\x00" * 700


def _bad_checksum_last(data: bytes) -> bytes:
    payload = b"SELECT 1"
    return data + struct.pack("<IIQ", len(payload), 99, 10_000) + payload


def _records_end(path: Path) -> int:
    """The byte where the log's records end: the next record is written there."""
    records = AckLog(str(path)).read()[1]
    return _HEADER_LEN + sum(_REC.size + len(r.payload) for r in records)


def _write_in_place(log_path: Path, at: int, data: bytes) -> None:
    """Overwrite the log at ``at`` (the space ahead of the records, as a write does)."""
    raw = log_path.read_bytes()
    log_path.write_bytes(raw[:at] + data + raw[at + len(data) :])


@pytest.mark.parametrize("tear", [_torn, _zero_tail, _bad_checksum_last])
def test_a_torn_tail_was_never_acknowledged_and_is_dropped(tmp_path: Path, tear: object) -> None:
    path = tmp_path / "m.duckdb"
    acks, facts = _write_then_die(path)
    log_path = Path(str(path) + ".acklog")
    end = _records_end(path)
    _write_in_place(log_path, end, tear(b""))  # type: ignore[operator]
    _check_all_there(path, acks, facts)


def test_an_acknowledgement_writes_in_place_and_the_log_keeps_its_size(tmp_path: Path) -> None:
    """Records overwrite space written ahead of them, so syncing one does not change the
    file's size (no file-system journal commit per acknowledgement); past that space the
    log grows, and everything acknowledged is still replayed after a kill."""
    path = tmp_path / "s.duckdb"
    log_path = Path(str(path) + ".acklog")
    with _open(path) as store:
        size = log_path.stat().st_size
        assert size >= _HEADER_LEN + ROOM
        store._stop.set()  # no applier: the records stay in the log
        for i in range(20):
            store.add(NS, f"memory {i} written in place")
            assert log_path.stat().st_size == size
        store._stop.clear()
    script = textwrap.dedent(
        f"""
        import os, signal
        from actormem.models.embedders import HashEmbedder
        from actormem.store import DuckDBStore, Namespace
        s = DuckDBStore({str(path)!r}, embedder=HashEmbedder(64), touch_flush_interval=None)
        s._stop.set(); s._apply_wake.set()
        ns = Namespace(user_id="ada", agent_id="bot")
        for i in range(200):  # ~2 KB each: past the space written at open
            print("ACK", s.add(ns, f"memory {{i}} " + "long text " * 80).id, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    acks = [line.split()[1] for line in proc.stdout.splitlines() if line.startswith("ACK")]
    assert len(acks) == 200
    assert log_path.stat().st_size > size
    assert len(AckLog(str(path)).read()[1]) == 200
    with _open(path) as store:
        assert store.count(NS) == 220
        assert all(store.get(NS, m) is not None for m in acks)


def _cut_then_die(path: Path, after: int = 3) -> tuple[list[str], int]:
    """A child acknowledges 40 memories, lets the applier commit them (the log is cut),
    acknowledges ``after`` more with the applier stopped and is SIGKILLed: the log then
    holds the new records at its start and the remains of the 40 applied ones after them.
    Returns every acknowledged id and the database's commit number before the new ones."""
    script = textwrap.dedent(
        f"""
        import os, signal
        from actormem.models.embedders import HashEmbedder
        from actormem.store import DuckDBStore, Namespace
        s = DuckDBStore({str(path)!r}, embedder=HashEmbedder(64), touch_flush_interval=None)
        ns = Namespace(user_id="ada", agent_id="bot")
        for i in range(40):
            print("ACK", s.add(ns, f"applied memory number {{i}} " + "x" * (i % 7)).id, flush=True)
        s.list(ns)  # a read of DuckDB applies every record: the log is cut
        assert not s._logged and s._acklog.size == 0
        print("SEQ", s._seq, flush=True)
        s._stop.set(); s._apply_wake.set()
        for i in range({after}):
            print("ACK", s.add(ns, f"after the cut {{i}}").id, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    lines = proc.stdout.splitlines()
    acks = [line.split()[1] for line in lines if line.startswith("ACK")]
    seq = next(int(line.split()[1]) for line in lines if line.startswith("SEQ"))
    assert len(acks) == 40 + after
    return acks, seq


def test_records_applied_before_a_cut_are_never_replayed_again(tmp_path: Path) -> None:
    """After a cut the next records overwrite the old ones from the start: a reopen
    replays the 3 new ones and none of the applied ones left after them (each memory
    once: a second insert of an id would fail the open)."""
    path = tmp_path / "c.duckdb"
    acks, seq = _cut_then_die(path)
    records = AckLog(str(path)).read()[1]
    assert [r.seq for r in records] == [seq + 1, seq + 2, seq + 3]
    raw = Path(str(path) + ".acklog").read_bytes()
    assert b"applied memory number 39" in raw, "the applied records' remains"
    with _open(path) as store:
        assert store.count(NS) == 43
        assert {r.id for r in store.list(NS, limit=100)} == set(acks)


def test_a_torn_first_record_after_a_cut_is_not_taken_for_damage(tmp_path: Path) -> None:
    """The first record written after a cut, torn by the crash (so never acknowledged):
    the intact applied records after it are numbered at or below the database's commit,
    so they are remains, not acknowledged writes cut off -- the open drops the torn one
    and opens with the 40 applied memories."""
    path = tmp_path / "t.duckdb"
    acks, seq = _cut_then_die(path, after=1)
    log_path = Path(str(path) + ".acklog")
    raw = bytearray(log_path.read_bytes())
    assert [r.seq for r in AckLog(str(path)).read()[1]] == [seq + 1]
    raw[_HEADER_LEN + _REC.size + 3] ^= 0xFF  # the one new record's payload
    log_path.write_bytes(bytes(raw))
    # torn by the crash, it was never acknowledged, nor counted in the commit record
    commits = Path(str(path) + ".commits")
    line = commits.read_text()
    commits.write_text(line[:-21] + f"{seq:020d}\n")
    assert AckLog(str(path)).read(after=seq)[1] == []
    with _open(path) as store:
        assert {r.id for r in store.list(NS, limit=100)} == set(acks[:40])
        assert store.change_counter == seq


def test_a_damaged_record_after_a_cut_followed_by_acknowledged_ones_is_refused(
    tmp_path: Path,
) -> None:
    """The same damage to the first of 3 records written after a cut: the 2 after it are
    acknowledged and numbered above the database's commit, so the open is refused."""
    path = tmp_path / "d.duckdb"
    _, seq = _cut_then_die(path, after=3)
    log_path = Path(str(path) + ".acklog")
    raw = bytearray(log_path.read_bytes())
    raw[_HEADER_LEN + _REC.size + 3] ^= 0xFF
    log_path.write_bytes(bytes(raw))
    with pytest.raises(StoreError, match=rf"damaged.*commit #{seq + 2}"):
        _open(path)
    assert log_path.read_bytes() == bytes(raw)


def test_damage_before_the_last_record_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "m.duckdb"
    _write_then_die(path)
    log_path = Path(str(path) + ".acklog")
    raw = bytearray(log_path.read_bytes())
    first_payload = _HEADER_LEN + _REC.size  # header, then the first record's own header
    assert len(raw) > first_payload + 200, "several records on file"
    raw[first_payload + 5] ^= 0xFF
    log_path.write_bytes(bytes(raw))
    for _ in range(2):  # refused, and refused again: the log was left as it was
        with pytest.raises(StoreError, match=r"damaged.*followed by more records"):
            _open(path)
        assert log_path.read_bytes() == bytes(raw)


def test_reads_see_acknowledged_writes_and_writes_go_on_while_applying(tmp_path: Path) -> None:
    """get/list/history read DuckDB: each first applies what the log holds."""
    with _open(tmp_path / "r.duckdb") as store:
        ids = [store.add(NS, f"memory {i} about trains").id for i in range(20)]
        assert store.get(NS, ids[-1]) is not None  # the very next read
        assert [h.op for h in store.history(NS, ids[0])] == ["ADD"]
        assert len(store.list(NS, limit=100)) == 20

        errors: list[BaseException] = []

        def writer(t: int) -> None:
            try:
                for i in range(40):
                    mid = store.add(Namespace(user_id=f"w{t}"), f"w{t} memory {i}").id
                    assert store.get(Namespace(user_id=f"w{t}"), mid) is not None
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert sum(store.count(Namespace(user_id=f"w{t}")) for t in range(4)) == 160


def test_an_id_taken_in_the_same_group_fails_only_its_own_write(tmp_path: Path) -> None:
    """DuckDB would refuse the second insert later, after the acknowledgement: refused now."""
    from actormem.store import NewMemory

    with _open(tmp_path / "g.duckdb") as store:
        store.add_many(Namespace(user_id="a"), [NewMemory(content="first", id="fixed-id")])
        with pytest.raises(Exception, match="fixed-id"):
            store.add_many(Namespace(user_id="b"), [NewMemory(content="second", id="fixed-id")])
        assert store.get(Namespace(user_id="a"), "fixed-id") is not None


class _FailingWrites:
    """A DuckDB cursor whose writes fail like a full disk (reads pass)."""

    def __init__(self, cur: object) -> None:
        self._cur = cur

    def execute(self, sql: str, *args: object) -> object:
        if any(
            part.lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE"))
            for part in sql.split(";\n")
        ):
            raise duckdb.IOException("Could not write file: No space left on device")
        return self._cur.execute(sql, *args)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self._cur, name)


def test_writes_acknowledged_while_duckdb_cannot_take_them_are_kept(tmp_path: Path) -> None:
    """DuckDB failing to apply the log (a full disk under its WAL) loses nothing acknowledged:
    reads that need DuckDB say so, the records stay in the log, and once DuckDB can write
    again they are applied -- in this process, and by a reopen after a SIGKILL."""
    path = tmp_path / "f.duckdb"
    store = _open(path)
    try:
        first = store.add(NS, "written before the disk filled up").id
        store.flush()
        store._wcur = _FailingWrites(store._wcur)  # the direct path and the drain
        store._acur = _FailingWrites(store._con.cursor())  # the applier's cursor
        acked = [store.add(NS, f"acknowledged while DuckDB is full {i}").id for i in range(5)]
        assert all(store.get(NS, m) is not None for m in acked)  # the index has them
        with pytest.raises(StoreError, match=r"stay in .*\.acklog"):
            store.list(NS, limit=100)
        assert len(AckLog(str(path)).read()[1]) == 5
        store._wcur = store._wcur._cur
        store._acur = None
        listed = {r.id for r in store.list(NS, limit=100)}
        assert listed == {first, *acked}
    finally:
        store.close()
    with _open(path) as again:
        assert {r.id for r in again.list(NS, limit=100)} == {first, *acked}


def test_a_process_killed_while_duckdb_cannot_apply_loses_nothing(tmp_path: Path) -> None:
    path = tmp_path / "k.duckdb"
    script = textwrap.dedent(
        f"""
        import os, signal, duckdb, sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_store_acklog import _FailingWrites
        from actormem.models.embedders import HashEmbedder
        from actormem.store import DuckDBStore, Namespace
        store = DuckDBStore({str(path)!r}, embedder=HashEmbedder(64), touch_flush_interval=None)
        store._wcur = _FailingWrites(store._wcur)
        store._acur = _FailingWrites(store._con.cursor())
        ns = Namespace(user_id="ada", agent_id="bot")
        for i in range(20):
            print("ACK", store.add(ns, f"kept in the log only {{i}}").id, flush=True)
        try:
            store.list(ns)
        except Exception as exc:
            print("LIST", type(exc).__name__, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    acks = [line.split()[1] for line in proc.stdout.splitlines() if line.startswith("ACK")]
    assert len(acks) == 20 and "LIST StoreError" in proc.stdout
    with _open(path) as store:
        assert {r.id for r in store.list(NS, limit=100)} == set(acks)


def test_a_write_too_large_for_a_log_record_goes_to_duckdb_and_survives_a_kill(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The log's reader takes a record past its size limit for damage, so such a
    record is never written: a group of large memories (or a huge journal entry)
    commits to DuckDB directly.  The limit is lowered to 64 KB on both sides
    (the real one, 256 MB, is reached by 64 memories of 1M characters)."""
    path = tmp_path / "m.duckdb"
    script = textwrap.dedent(
        f"""
        import os, signal
        import actormem.store._acklog as acklog
        import actormem.store._duckdb_logged as logged
        acklog.MAX_RECORD = logged.LOG_RECORD_MAX = 64 * 1024
        from actormem.models.embedders import HashEmbedder
        from actormem.store import DuckDBStore, Namespace
        store = DuckDBStore({str(path)!r}, embedder=HashEmbedder(64), touch_flush_interval=None)
        ns = Namespace(user_id="ada", agent_id="bot")
        small = store.add(ns, "a small memory before the large ones")
        print("ACK", small.id, flush=True)
        big = store.add_many(ns, [f"large memory {{i}} " + "word " * 4000 for i in range(4)])
        for r in big:
            print("ACK", r.id, flush=True)
        after = store.add(ns, "a small memory after the large ones")
        print("ACK", after.id, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    acks = [line.split()[1] for line in proc.stdout.splitlines() if line.startswith("ACK")]
    assert len(acks) == 6
    monkeypatch.setattr("actormem.store._acklog.MAX_RECORD", 64 * 1024)
    with _open(path) as store:
        assert store.lost_commits == 0
        for mid in acks:
            assert store.get(NS, mid) is not None, mid
        assert store.count(NS) == 6


def test_a_write_that_failed_is_erased_before_the_log_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The write reached the file but its sync failed, and erasing it failed too (two
    faults): the caller was told it failed, so it must never be read back. Before, a
    later cut made it the first record of the chain, and a crash replayed it (or the
    open refused the store as damaged). Now the next append or cut erases it first,
    and appends refuse while it cannot be erased."""
    import errno

    import actormem.store._acklog as acklog
    from actormem.store._acklog import encode

    log = AckLog(str(tmp_path / "f.duckdb"))
    log.start("5" * 32)
    log.append(encode(1, ["SELECT 'acknowledged'"]))
    log._dsync = False  # the pwrite + fdatasync path: the data lands, the sync fails
    real_sync, real_zeros = acklog.os.fdatasync, acklog._write_zeros
    faults = {"sync": 1, "zeros": 2}

    def sync(fd: int) -> None:
        if faults["sync"]:
            faults["sync"] -= 1
            raise OSError(errno.EIO, "I/O error")
        real_sync(fd)

    def zeros(fd: int, start: int, end: int) -> None:
        if faults["zeros"]:
            faults["zeros"] -= 1
            raise OSError(errno.EIO, "I/O error")
        real_zeros(fd, start, end)

    monkeypatch.setattr(acklog.os, "fdatasync", sync)
    monkeypatch.setattr(acklog, "_write_zeros", zeros)
    with pytest.raises(StoreError, match="rolled back"):
        log.append(encode(2, ["SELECT 'told it failed'"]))
    with pytest.raises(StoreError, match="could not be erased"):  # still cannot erase
        log.append(encode(2, ["SELECT 'refused too'"]))
    log.cut(1)  # the applier applied #1; the remains are erased first (now it can)
    assert faults == {"sync": 0, "zeros": 0}
    # a crash here: nothing after the cut may be read back as a record
    assert AckLog(str(tmp_path / "f.duckdb")).read(after=1)[1] == []
    log.append(encode(2, ["SELECT 'the next one'"]))
    assert [r.seq for r in AckLog(str(tmp_path / "f.duckdb")).read(after=1)[1]] == [2]
    log.close(remove=False)


def test_a_log_of_a_newer_format_is_refused_without_advice_to_move_it_aside(
    tmp_path: Path,
) -> None:
    """A log written by a newer actormem holds acknowledged writes: the message must
    not tell the user to move it aside (the generic 'bad header' message did)."""
    db = tmp_path / "n.duckdb"
    raw = bytearray(b"actormem-acklog 9 " + b"7" * 32 + b"\n" + bytes(64))
    Path(str(db) + ".acklog").write_bytes(bytes(raw))
    with pytest.raises(StoreError, match="format 9, newer") as err:
        AckLog(str(db)).read()
    assert "move it aside" not in str(err.value).lower().replace("do not move it aside", "")


def test_a_schema_4_file_with_writes_pending_in_the_log_upgrades_losing_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The log is replayed before the schema migration: records written as values get
    FLOAT[dim] literals for a file whose vectors are still an array column, then schema 5
    turns them into bytes with the rest."""
    from actormem.store import _schema
    from actormem.store._duckdb_vectors import fixed_list

    path = tmp_path / "m.duckdb"
    # created as before the vectors' column named its compression (a schema-4
    # file never did; DuckDB keeps a named one through a change of type)
    monkeypatch.setattr(_schema, "EMBEDDING_COLUMN", "BLOB")
    DuckDBStore(path, embedder=HashEmbedder(64), touch_flush_interval=None).close()
    acks, facts = _write_then_die(path)
    assert AckLog(str(path)).read()[1], "writes pending in the log"
    con = duckdb.connect(str(path))  # back to schema 4: vectors in FLOAT[64]
    con.create_function(
        "_to_array", lambda col: fixed_list(col, 64), ["BLOB"], "FLOAT[64]", type="arrow"
    )
    con.execute(
        "ALTER TABLE memories ALTER embedding SET DATA TYPE FLOAT[64] USING _to_array(embedding)"
    )
    con.execute("UPDATE schema_version SET version = 4")  # a fresh file holds one row
    con.close()
    _check_all_there(path, acks, facts)
    con = duckdb.connect(str(path))
    kind = con.execute(
        "SELECT data_type FROM information_schema.columns "
        "WHERE table_name = 'memories' AND column_name = 'embedding'"
    ).fetchall()
    version = con.execute("SELECT max(version) FROM schema_version").fetchall()
    con.close()
    assert kind == [("BLOB",)] and version == [(5,)]

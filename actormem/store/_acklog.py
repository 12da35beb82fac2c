"""The acknowledgement log: small writes are durable once appended here, before DuckDB has them.

Why: a DuckDB commit of one small write costs 3-15 ms here (parsing,
binding, the WAL sync and DuckDB's own bookkeeping), twenty to fifty times the
disk's ``fsync``.  So a small write of a DuckDB store (a single ``add``, a
keyed fact, a group commit of a few namespaces) is acknowledged once its
record -- the literal SQL statements that write it, with its commit number --
is appended to ``<database>.acklog`` and ``fdatasync``'ed (one sync for all
the writers of a group commit); the store's index has it at once, and a
background applier moves the pending records into DuckDB in one transaction
that also sets ``store_meta.commit_seq`` to the last record's number.  After
that commit the log is cut back to its header.

What "acknowledged" means: the write is on disk (in this log or in DuckDB's
WAL) and is replayed into DuckDB if the process dies before the applier ran.
Every read that goes to DuckDB (``get``, ``list``, history, analytics,
export, the journal's tables) and every write that goes there directly
first applies the pending records, under the writer lock, so it sees every
acknowledged write.

Format: a fixed header line (``actormem-acklog 2 <store_id>\\n``) naming the
database it belongs to, then records
``<len:u32><seq:u64><head_crc:u32><crc:u32><payload>`` (little-endian;
``head_crc`` covers the length and the commit number, ``crc`` the commit
number and the payload, UTF-8 SQL).  Logs of the first format (``actormem-acklog
1``, no header checksum) are still read.

What a damaged log does: a record is acknowledged only after the ``fdatasync``
that covers it returned, and nothing is appended after a record until it is
synced, so a crash or a power cut can tear only the records after the last
sync -- never acknowledged.  When a record is bad (incomplete, a header or a
payload failing its checksum, a length past the end), the rest of the file is
searched, at every byte, for an intact record numbered after the last good
one.  None: a torn tail, dropped with a warning (this covers a last record
whose first page never reached the disk while later ones did).  One found:
acknowledged writes are damaged, and :meth:`AckLog.read` raises
:class:`StoreError` naming the file, the bad record's byte offset and the
intact one's; the open is refused and the log left as it is.  The header
checksum is what tells a garbled length (damage) from a torn tail: before it,
a flipped bit in a middle record's length read as a record running past the
end of the file, and every record from there on was dropped.

On open (:func:`replay`), records numbered above the database's
``commit_seq`` are applied in one transaction (records at or below it are
already in DuckDB: applying is idempotent by number), and the number
sequence must continue the database's without a gap.
"""

from __future__ import annotations

import contextlib
import json
import os
import struct
import time
import zlib
from dataclasses import dataclass
from typing import Any, Final

import duckdb
import numpy as np
import structlog

from actormem._special_files import check_regular
from actormem.store._duckdb_sql import lit
from actormem.store._schema import read_meta
from actormem.store._types import StoreError

__all__ = ["MAX_RECORD", "REJECTED", "AckLog", "apply_one", "quarantine", "replay"]

log = structlog.get_logger(__name__)

_MAGIC: Final = b"actormem-acklog 2 "
#: The first format (no header checksum): still read, never written.
_MAGIC_V1: Final = b"actormem-acklog 1 "
_HEADER_LEN: Final = len(_MAGIC) + 32 + 1
#: A record's header: length, commit number, CRC of those two, CRC of number + payload.
_REC: Final = struct.Struct("<IQII")
_REC_V1: Final = struct.Struct("<IIQ")
#: Larger declared lengths are damage, not a record (a record is one small write).
MAX_RECORD: Final = 256 * 1024 * 1024


@dataclass(frozen=True)
class LogRecord:
    """One acknowledged write: its commit number and its SQL statements."""

    seq: int
    payload: str


def _crc(seq: int, payload: bytes) -> int:
    return zlib.crc32(payload, zlib.crc32(struct.pack("<Q", seq))) & 0xFFFFFFFF


def encode(seq: int, statements: list[str]) -> bytes:
    """One record of the log."""
    payload = ";\n".join(statements).encode("utf-8")
    head = struct.pack("<IQ", len(payload), seq)
    return head + struct.pack("<II", zlib.crc32(head), _crc(seq, payload)) + payload


def _record_at(raw: bytes, pos: int, v1: bool) -> tuple[int, int, bytes] | str:
    """``(seq, end, payload)`` of the record at ``pos``, or why there is none."""
    rec = _REC_V1 if v1 else _REC
    if pos + rec.size > len(raw):
        return "an incomplete record header"
    if v1:
        length, crc, seq = _REC_V1.unpack_from(raw, pos)
    else:
        length, seq, head_crc, crc = _REC.unpack_from(raw, pos)
        if zlib.crc32(raw[pos : pos + 12]) != head_crc:
            return "a record header failing its checksum"
    end = pos + rec.size + length
    if length > MAX_RECORD or end > len(raw):
        return f"a record of {length} bytes past the end of the file"
    payload = raw[pos + rec.size : end]
    if _crc(seq, payload) != crc:
        return "a record failing its checksum"
    return seq, end, payload


def _valid_after(raw: bytes, pos: int, after_seq: int, v1: bool) -> tuple[int, int] | None:
    """``(offset, seq)`` of the first intact record past ``pos`` numbered above ``after_seq``.

    Looked for at every byte offset: a damaged record's length cannot be
    trusted to say where the next one starts.  Offsets whose length field
    would run past the end of the file are ruled out in bulk (numpy) first,
    then those whose number cannot follow ``after_seq`` (the log's records
    are numbered consecutively, each at least one header long), so a 16 MB
    log is searched in about a second.
    """
    size = (_REC_V1 if v1 else _REC).size
    data = np.frombuffer(raw, dtype=np.uint8)
    step = 1 << 20
    for lo in range(pos + 1, len(raw) - size + 1, step):
        hi = min(lo + step, len(raw) - size + 1)
        length = data[lo:hi].astype(np.uint32)
        for k in (1, 2, 3):
            length |= data[lo + k : hi + k].astype(np.uint32) << np.uint32(8 * k)
        room = len(raw) - size - np.arange(lo, hi, dtype=np.int64)
        for at in np.flatnonzero(length.astype(np.int64) <= room):
            seq = struct.unpack_from("<Q", raw, lo + int(at) + (8 if v1 else 4))[0]
            if not after_seq < seq <= after_seq + len(raw) // size + 1:
                continue  # the records after the last good one are numbered on from it
            found = _record_at(raw, lo + int(at), v1)
            if not isinstance(found, str) and found[0] > after_seq:
                return lo + int(at), found[0]
    return None


#: Errors by which DuckDB rejects a record's own statements (its values, its
#: SQL): retrying cannot help, so the record is set aside.  Anything else (a
#: full disk, an I/O error, memory) is a failure of the moment: the record
#: stays pending and is applied again later.
REJECTED: Final = (
    duckdb.BinderException,
    duckdb.ConversionException,
    duckdb.ConstraintException,
    duckdb.InvalidInputException,
    duckdb.OutOfRangeException,
    duckdb.ParserException,
    duckdb.SyntaxException,
    duckdb.TypeMismatchException,
)


def fsync_dir(path: str) -> None:
    """Sync the directory holding ``path`` (a created or renamed entry survives power loss)."""
    fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def quarantine(log_path: str, seq: int, statements: str, error: BaseException) -> str:
    """Append a record DuckDB rejected to ``<log>.rejected`` (synced); return that path.

    One JSON line per record: its commit number, the error, the time and its
    SQL, so nothing acknowledged disappears without a trace.
    """
    path = log_path + ".rejected"
    line = json.dumps(
        {"seq": seq, "error": str(error), "rejected_at": time.time(), "statements": statements}
    )
    created = not os.path.exists(path)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (line + "\n").encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)
    if created:
        fsync_dir(path)
    return path


def apply_one(cur: Any, seq: int, statements: str, log_path: str, db_path: str) -> bool:
    """Commit one record with ``commit_seq = seq``; False when DuckDB rejected it.

    A rejected record is written to the quarantine file, logged as an error,
    and ``commit_seq`` still moves to ``seq`` (so the records after it are
    applied and a reopen does not try it again).

    Raises:
        duckdb.Error: Any failure that is not a rejection (nothing committed).
    """
    bump = f"UPDATE store_meta SET value = {lit(str(seq))} WHERE key = 'commit_seq'"
    try:
        cur.execute(";\n".join(["BEGIN TRANSACTION", statements, bump, "COMMIT"]))
        return True
    except REJECTED as exc:
        with contextlib.suppress(duckdb.Error):
            cur.execute("ROLLBACK")
        aside = quarantine(log_path, seq, statements, exc)
        cur.execute(";\n".join(["BEGIN TRANSACTION", bump, "COMMIT"]))
        log.error(
            "store.acknowledged_write_rejected",
            path=db_path,
            seq=seq,
            quarantine=aside,
            error=str(exc),
            reason="DuckDB refused an acknowledged write when applying it; it was set aside "
            "in the quarantine file and the store carries on without it",
        )
        return False
    except BaseException:
        with contextlib.suppress(duckdb.Error):
            cur.execute("ROLLBACK")
        raise


class AckLog:
    """``<database>.acklog``: appended and synced per group, cut back once applied."""

    def __init__(self, database: str) -> None:
        self.path = database + ".acklog"
        self._fd: int | None = None
        self._store_id = ""
        #: Bytes past the header (records not yet applied to DuckDB).
        self.size = 0

    def read(self) -> tuple[str | None, list[LogRecord]]:
        """``(store_id, records)`` on file (``(None, [])`` when there is no log).

        Raises:
            StoreError: The path is not a regular file, or a record before the
                last one is damaged (acknowledged writes would be lost).
        """
        check_regular(self.path, "acknowledgement log", StoreError)
        try:
            with open(self.path, "rb") as fh:
                raw = fh.read()
        except FileNotFoundError:
            return None, []
        except OSError as exc:
            raise StoreError(f"cannot read the acknowledgement log {self.path}: {exc}") from exc
        magic_ok = raw.startswith(_MAGIC) or raw.startswith(_MAGIC_V1)
        if len(raw) < _HEADER_LEN or not magic_ok or raw[_HEADER_LEN - 1] != 10:
            if not raw.strip(b"\x00"):  # created, header never synced: nothing was acknowledged
                return None, []
            raise StoreError(
                f"{self.path} is not an actormem acknowledgement log (bad header); nothing was "
                "changed. Move it aside to open the store without it."
            )
        v1 = raw.startswith(_MAGIC_V1)
        store_id = raw[len(_MAGIC) : _HEADER_LEN - 1].decode("ascii", "replace")
        records: list[LogRecord] = []
        pos = _HEADER_LEN
        while pos < len(raw):
            found = _record_at(raw, pos, v1)
            if not isinstance(found, str):
                seq, end, payload = found
                records.append(LogRecord(seq, payload.decode("utf-8")))
                pos = end
                continue
            # A bad record.  If an intact record numbered after the last good
            # one follows it anywhere, acknowledged writes are damaged: refuse.
            # Otherwise it is a torn tail -- appended after the last sync (a
            # record is acknowledged only once synced, and nothing is appended
            # after an unsynced record), so never acknowledged: dropped.
            last = records[-1].seq if records else 0
            later = _valid_after(raw, pos, last, v1)
            if later is not None:
                raise StoreError(
                    f"{self.path} is damaged: {found} at byte {pos}, followed by more records "
                    f"(an intact one, commit #{later[1]}, at byte {later[0]}): acknowledged "
                    "writes between them cannot be read. Nothing was changed; restore the file "
                    "from a backup, or move it aside to open the store without the writes "
                    "it holds."
                )
            log.warning(
                "store.acklog_torn_tail_dropped",
                path=self.path,
                offset=pos,
                bytes=len(raw) - pos,
                reason=found + " with no intact record after it (appended after the last "
                "sync: never acknowledged)",
            )
            break
        return store_id, records

    def start(self, store_id: str) -> None:
        """Open the log for appending, empty, with the header of ``store_id`` (synced)."""
        self._store_id = store_id
        created = not os.path.exists(self.path)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            header = _MAGIC + store_id.encode("ascii") + b"\n"
            os.ftruncate(fd, 0)
            os.pwrite(fd, header, 0)
            os.fsync(fd)
            if created:  # the file's name must survive a power cut too
                fsync_dir(self.path)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        self.size = 0

    def append(self, data: bytes) -> None:
        """Append encoded records and ``fdatasync``: when this returns they are durable.

        Raises:
            StoreError: The write or the sync failed; the log is cut back to
                what was durable before, and the records are not acknowledged.
        """
        if self._fd is None:
            raise StoreError(f"the acknowledgement log {self.path} is not open")
        at = _HEADER_LEN + self.size
        try:
            written = os.pwrite(self._fd, data, at)
            if written != len(data):
                raise OSError(f"short write ({written} of {len(data)} bytes)")
            os.fdatasync(self._fd)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, at)
            raise StoreError(
                f"writing to {self.path} failed and was rolled back (the log cut back to its "
                f"last synced record; the write was not stored): {exc}"
            ) from exc
        self.size += len(data)

    def cut(self) -> None:
        """Drop every record (they are in DuckDB now).

        Not synced: a crash can bring the old records back, and replay skips
        them by number.
        """
        if self._fd is None or not self.size:
            return
        try:
            os.ftruncate(self._fd, _HEADER_LEN)
        except OSError as exc:  # the records stay; replay skips them by number
            log.warning("store.acklog_cut_failed", path=self.path, error=str(exc))
            return
        self.size = 0

    def close(self, *, remove: bool) -> None:
        """Close the file; ``remove``: every record is in DuckDB, so cut it to its header.

        The file itself is kept (and synced): creating it again at the next
        open would need the directory synced before the first acknowledgement.
        """
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                if remove:
                    os.ftruncate(fd, _HEADER_LEN)
                    os.fsync(fd)
                    self.size = 0
            except OSError as exc:  # the records stay; replay skips them by number
                log.warning("store.acklog_cut_failed", path=self.path, error=str(exc))
            finally:
                with contextlib.suppress(OSError):
                    os.close(fd)


def replay(cur: Any, acklog: AckLog, path: str) -> int:
    """Apply the log's records that DuckDB lacks, in one transaction; return how many.

    Runs at open, after DuckDB replayed its own WAL and before the commit
    record is checked (so the check sees every acknowledged write).

    Raises:
        StoreError: The log is damaged before its end, or its numbers leave a
            gap after the database's last commit (acknowledged writes missing).
    """
    store_id, records = acklog.read()
    if store_id is None or not records:
        return 0
    found = cur.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = 'store_meta'"
    ).fetchall()
    meta = read_meta(cur) if found and found[0][0] else {}
    if meta.get("store_id") != store_id:
        aside = f"{acklog.path}.orphan-{os.getpid()}"
        os.replace(acklog.path, aside)
        fsync_dir(aside)
        log.warning(
            "store.acklog_of_another_database",
            path=path,
            log=aside,
            reason="the log names another database (the file was replaced); moved aside",
        )
        return 0
    db_seq = int(meta.get("commit_seq", "0") or 0)
    todo = [r for r in records if r.seq > db_seq]
    if not todo:
        return 0
    expected = db_seq + 1
    for r in todo:
        if r.seq != expected:
            raise StoreError(
                f"{path}: the acknowledgement log {acklog.path} holds commit #{r.seq} but the "
                f"database ends at #{expected - 1}: commits in between are missing. Nothing "
                "was changed."
            )
        expected += 1
    script = ";\n".join(
        [
            "BEGIN TRANSACTION",
            *(r.payload for r in todo),
            f"UPDATE store_meta SET value = {lit(str(todo[-1].seq))} WHERE key = 'commit_seq'",
            "COMMIT",
        ]
    )
    try:
        cur.execute(script)
    except Exception:
        with contextlib.suppress(Exception):
            cur.execute("ROLLBACK")
        # One record at a time: a record DuckDB rejects is set aside (quarantine)
        # and the others are applied; any other failure refuses the open.
        for r in todo:
            try:
                apply_one(cur, r.seq, r.payload, acklog.path, path)
            except Exception as exc:
                raise StoreError(
                    f"{path}: applying acknowledged write #{r.seq} from {acklog.path} "
                    f"failed and was rolled back ({exc}); the writes before it are applied, "
                    "it and those after it stay in the log"
                ) from exc
    log.info("store.acklog_replayed", path=path, records=len(todo), last=todo[-1].seq)
    return len(todo)

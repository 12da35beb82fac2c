"""The acknowledgement log: small writes are durable once appended here, before DuckDB has them.

Why: a DuckDB commit of one small write costs 3-15 ms here (parsing,
binding, the WAL sync and DuckDB's own bookkeeping), twenty to fifty times the
disk's ``fsync``.  So a small write of a DuckDB store (a single ``add``, a
keyed fact, a group commit of a few namespaces) is acknowledged once its
record -- the values it writes (:mod:`actormem.store._wire`), with its
commit number -- is appended to ``<database>.acklog`` and ``fdatasync``'ed (one sync for all
the writers of a group commit); the store's index has it at once, and a
background applier moves the pending records into DuckDB in one transaction
that also sets ``store_meta.commit_seq`` to the last record's number.  After
that commit the log is cut: the next record is written after the header again.

What "acknowledged" means: the write is on disk (in this log or in DuckDB's
WAL) and is replayed into DuckDB if the process dies before the applier ran.
Every read that goes to DuckDB (``get``, ``list``, history, analytics,
export, the journal's tables) and every write that goes there directly
first applies the pending records, under the writer lock, so it sees every
acknowledged write.

Format: a header -- a fixed line (``actormem-acklog 4 <store_id>\\n``) naming
the database it belongs to, then the *base* (u64: every record numbered at
or below it is in DuckDB) and its CRC-32 -- then records
``<len:u32><seq:u64><head_crc:u32><crc:u32><payload>`` (little-endian;
``head_crc`` covers the length and the commit number, ``crc`` the commit
number and the payload: the write's values packed by msgspec, whose SQL the
applier and the replay write).  Logs of the earlier formats are still read
and replayed: ``actormem-acklog 3`` (the same layout, payloads of UTF-8 SQL
text), ``actormem-acklog 2`` (no base, records right after the line) and
``actormem-acklog 1`` (no header checksum in records either).  An actormem
older than format 4 refuses a format-4 log (it holds acknowledged writes it
cannot read); a clean close leaves the header of format 3 with no record,
which older versions open.

Space ahead: the file is kept larger than its records -- zeros written and
synced at open (:data:`ROOM`) and whenever the records outgrow them -- and
records overwrite that space in place.  An ``fdatasync`` of a write that
does not change the file's size or allocate blocks is one data write and a
cache flush; an append also commits the file system's journal (the new
size), which waits for every other file's metadata changes on the disk:
measured here, 1.5-2x more syncs per second in place than appending
(``bench_writes``).  Cutting the log after the applier committed is then one
small ``pwrite`` (it was an ``ftruncate``, which took 20-25 ms under load
and, under the log's lock, stalled the next acknowledgement): the next
record is written at the start again, over records DuckDB already has.  So
the records of a log are the *chain* that starts after the header with a
record numbered above the base and numbers on without a gap; whatever
follows it (zeros, the rest of records applied before the last cut, a
record never synced) is not part of it.  The cut writes the last applied
number as the base (not synced itself: the next record's sync carries it),
so records left from before a cut are never replayed, not even when
DuckDB's WAL lost them -- the commit record reports that loss, as it did
when the cut truncated the file.  They are also at or below the database's
``commit_seq`` unless DuckDB lost them, which is what tells them apart from
damage below when a power cut took the base.

What a damaged log does: a record is acknowledged only after the ``fdatasync``
that covers it returned, and nothing is written after a record until it is
synced, so a crash or a power cut can tear only the records after the last
sync -- never acknowledged.  When the chain ends at a bad record (incomplete,
a header or a payload failing its checksum, a length past the end), the rest
of the file is searched, at every byte, for an intact record numbered after
the chain's last one, the base and the database's ``commit_seq``.  None: the end
of the log (zeros, an applied record's remains, or a torn record, dropped
with a warning -- this covers a last record whose first page never reached
the disk while later ones did).  One found: acknowledged writes are damaged,
and :meth:`AckLog.read` raises :class:`StoreError` naming the file, the bad
record's byte offset and the intact one's; the open is refused and the log
left as it is.  The header checksum is what tells a garbled length (damage)
from a torn tail: before it, a flipped bit in a middle record's length read
as a record running past the end of the file, and every record from there on
was dropped.

On open (:func:`replay`), records numbered above the database's
``commit_seq`` are applied in one transaction (records at or below it are
already in DuckDB: applying is idempotent by number), and the number
sequence must continue the database's without a gap.
"""

from __future__ import annotations

import contextlib
import errno
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
from actormem.store._acklog_sync import BackgroundSync
from actormem.store._duckdb_rows import write_statements
from actormem.store._duckdb_sql import UnsafeLiteral, array_vector_literals, lit
from actormem.store._schema import read_meta
from actormem.store._types import StoreError
from actormem.store._wire import WireError, decode_write

__all__ = [
    "MAX_RECORD",
    "REJECTED",
    "AckLog",
    "apply_one",
    "encode",
    "frame",
    "quarantine",
    "replay",
]

log = structlog.get_logger(__name__)

_MAGIC: Final = b"actormem-acklog 4 "
#: The third format (the same header; records hold SQL text, not values): still read.
_MAGIC_V3: Final = b"actormem-acklog 3 "
#: The second format (no base field, records right after the line): still read.
_MAGIC_V2: Final = b"actormem-acklog 2 "
#: The first format (no header checksum): still read, never written.
_MAGIC_V1: Final = b"actormem-acklog 1 "
_LINE_LEN: Final = len(_MAGIC) + 32 + 1
#: After the line (format 3): the base -- every record numbered at or below it
#: is in DuckDB -- and its CRC.
_BASE: Final = struct.Struct("<QI")
_HEADER_LEN: Final = _LINE_LEN + _BASE.size
#: A record's header: length, commit number, CRC of those two, CRC of number + payload.
_REC: Final = struct.Struct("<IQII")
_REC_V1: Final = struct.Struct("<IIQ")
#: Larger declared lengths are damage, not a record (a record is one small write).
MAX_RECORD: Final = 256 * 1024 * 1024
#: Bytes of zeros written ahead of the records at open (grown when outgrown).
ROOM: Final = 256 * 1024
#: The most the space ahead grows by at once (it doubles up to this).
_GROW_MAX: Final = 4 * 1024 * 1024
#: One system call that writes and syncs the data (Linux >= 4.7), else two.
_DSYNC: Final = getattr(os, "RWF_DSYNC", None)


@dataclass(frozen=True)
class LogRecord:
    """One acknowledged write: its commit number and its payload.

    ``sql``: the payload is SQL text (formats 1-3); else the write's values
    (format 4, :mod:`actormem.store._wire`).
    """

    seq: int
    payload: bytes
    sql: bool = False

    def statements(self) -> str:
        """The record's SQL.

        Raises:
            StoreError: A format-4 payload that does not decode.
        """
        try:
            if self.sql:
                return self.payload.decode("utf-8")
            return ";\n".join(write_statements(decode_write(self.payload)))
        except (WireError, UnsafeLiteral, UnicodeDecodeError) as exc:
            raise StoreError(
                f"record #{self.seq} of the acknowledgement log is unreadable: {exc}"
            ) from exc


def _crc(seq: int, payload: bytes) -> int:
    return zlib.crc32(payload, zlib.crc32(struct.pack("<Q", seq))) & 0xFFFFFFFF


def frame(seq: int, payload: bytes) -> bytes:
    """One record of the log: its header, then ``payload``."""
    head = struct.pack("<IQ", len(payload), seq)
    return head + struct.pack("<II", zlib.crc32(head), _crc(seq, payload)) + payload


def encode(seq: int, statements: list[str]) -> bytes:
    """One record of formats 2 and 3: SQL statements (read, no longer written)."""
    return frame(seq, ";\n".join(statements).encode("utf-8"))


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


def _valid_after(
    raw: bytes, pos: int, after_seq: int, v1: bool, upto: int | None = None
) -> tuple[int, int] | None:
    """``(offset, seq)`` of the first intact record from ``pos`` on numbered above ``after_seq``.

    ``upto``: and at most that (default: any number the file could hold).

    Looked for at every byte offset: a damaged record's length cannot be
    trusted to say where the next one starts.  Only offsets before the file's
    last non-zero byte can start a record (its header is not all zeros).
    Offsets whose length field would run past the end of the file, or whose
    number cannot follow ``after_seq`` (the log's records are numbered
    consecutively, each at least one header long), are ruled out in bulk
    (numpy) before any is checked, so a 16 MB log is searched in well under a
    second.
    """
    size = (_REC_V1 if v1 else _REC).size
    seq_at = 8 if v1 else 4
    data = np.frombuffer(raw, dtype=np.uint8)
    nonzero = np.flatnonzero(data[pos:])
    if not nonzero.size:
        return None  # zeros: the space ahead of the records
    stop = min(pos + int(nonzero[-1]) + 1, len(raw) - size + 1)
    top = after_seq + len(raw) // size + 1 if upto is None else upto
    step = 1 << 20
    for lo in range(pos, stop, step):
        hi = min(lo + step, stop)
        length = data[lo:hi].astype(np.uint32)
        for k in (1, 2, 3):
            length |= data[lo + k : hi + k].astype(np.uint32) << np.uint32(8 * k)
        room = len(raw) - size - np.arange(lo, hi, dtype=np.int64)
        cand = np.flatnonzero(length.astype(np.int64) <= room)
        if not cand.size:
            continue
        at = lo + cand + seq_at
        seq = data[at].astype(np.uint64)
        for k in range(1, 8):
            seq |= data[at + k].astype(np.uint64) << np.uint64(8 * k)
        keep = cand[(seq > np.uint64(after_seq)) & (seq <= np.uint64(top))]
        for off in keep:
            found = _record_at(raw, lo + int(off), v1)
            if not isinstance(found, str) and after_seq < found[0] <= top:
                return lo + int(off), found[0]
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


def _base_field(base: int) -> bytes:
    """The header's base field: the number and its CRC."""
    value = struct.pack("<Q", base)
    return value + struct.pack("<I", zlib.crc32(value))


def _write_zeros(fd: int, start: int, end: int) -> None:
    """Write zeros over ``[start, end)`` of ``fd`` (not synced)."""
    chunk = bytes(min(end - start, 1 << 20))
    while start < end:
        n = os.pwrite(fd, memoryview(chunk)[: end - start], start)
        if n <= 0:
            raise OSError(f"short write of zeros at {start}")
        start += n


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
        #: Bytes past the header written (zeros or records) and synced: records
        #: written inside it do not change the file's size.
        self._room = 0
        self._dsync = True
        # A range a failed append may have left holding an intact record that was
        # never acknowledged: zeroed and synced before the next append or cut.
        self._unclean: tuple[int, int] | None = None
        self._bg = BackgroundSync(self.path)

    def read(self, after: int = 0) -> tuple[str | None, list[LogRecord]]:
        """``(store_id, records)`` on file (``(None, [])`` when there is no log).

        ``records`` is the chain after the header (see the module's "Space
        ahead"); ``after`` is the database's ``commit_seq`` when known: no
        record at or below it can be missing (they are in DuckDB), so only an
        intact record above both it and the chain's end counts as damage.

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
        magic_ok = any(raw.startswith(m) for m in (_MAGIC, _MAGIC_V3, _MAGIC_V2, _MAGIC_V1))
        if not magic_ok and raw.startswith(b"actormem-acklog "):
            # A format this version cannot read (a newer actormem wrote it): its
            # records are acknowledged writes, so never advise moving it aside.
            version = raw[len(b"actormem-acklog ") :].split(b" ", 1)[0][:16]
            raise StoreError(
                f"{self.path} is an acknowledgement log of format "
                f"{version.decode('ascii', 'replace')}, newer than this actormem reads "
                f"(format 4): open the store with the actormem that wrote it (or a newer one) "
                "so that its acknowledged writes are applied; do not move it aside"
            )
        if len(raw) < _LINE_LEN or not magic_ok or raw[_LINE_LEN - 1] != 10:
            if not raw.strip(b"\x00"):  # created, header never synced: nothing was acknowledged
                return None, []
            raise StoreError(
                f"{self.path} is not an actormem acknowledgement log (bad header); nothing was "
                "changed. Move it aside to open the store without it."
            )
        v1 = raw.startswith(_MAGIC_V1)
        sql = not raw.startswith(_MAGIC)
        store_id = raw[len(_MAGIC) : _LINE_LEN - 1].decode("ascii", "replace")
        base, pos = 0, _LINE_LEN
        if raw.startswith((_MAGIC, _MAGIC_V3)):
            pos = _HEADER_LEN
            if len(raw) >= _HEADER_LEN:
                value, crc = _BASE.unpack_from(raw, _LINE_LEN)
                if zlib.crc32(raw[_LINE_LEN : _LINE_LEN + 8]) == crc:
                    base = value  # else torn: 0, the numbers alone tell remains apart
        records: list[LogRecord] = []
        while pos < len(raw):
            found = _record_at(raw, pos, v1)
            if not isinstance(found, str) and (
                found[0] == records[-1].seq + 1 if records else found[0] > base
            ):
                seq, end, payload = found
                records.append(LogRecord(seq, payload, sql))
                pos = end
                continue
            # The chain ends here.  If an intact record numbered after its last one
            # (and after what DuckDB has) follows anywhere, acknowledged writes are
            # damaged: refuse.  Otherwise this is the end of the log: zeros, the
            # remains of records applied before the last cut, or a torn record --
            # written after the last sync (a record is acknowledged only once
            # synced, and nothing is written after an unsynced record), so never
            # acknowledged: dropped.
            last = max(records[-1].seq if records else 0, after, base)
            later = _valid_after(raw, pos, last, v1)
            if later is not None:
                why = found if isinstance(found, str) else f"a record numbered #{found[0]}"
                raise StoreError(
                    f"{self.path} is damaged: {why} at byte {pos}, followed by more records "
                    f"(an intact one, commit #{later[1]}, at byte {later[0]}): acknowledged "
                    "writes between them cannot be read. Nothing was changed; restore the file "
                    "from a backup, or move it aside to open the store without the writes "
                    "it holds."
                )
            if isinstance(found, str) and raw.count(0, pos) != len(raw) - pos:
                # Not zeros: a torn record, or what is left of applied records
                # after the last cut (an intact one of them found past here).
                remains = _valid_after(raw, pos, 0, v1, upto=last)
                (log.debug if remains is not None else log.warning)(
                    "store.acklog_torn_tail_dropped",
                    path=self.path,
                    offset=pos,
                    bytes=len(raw) - pos,
                    reason=found + " with no intact record numbered after it (a record "
                    "written after the last sync, never acknowledged, or the remains of "
                    "records applied before the log was cut)",
                )
            break
        return store_id, records

    def start(self, store_id: str) -> None:
        """Open the log for writing, empty: its header and :data:`ROOM` zeros (synced)."""
        self._store_id = store_id
        created = not os.path.exists(self.path)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            header = _MAGIC + store_id.encode("ascii") + b"\n" + _base_field(0)
            os.ftruncate(fd, 0)
            os.pwrite(fd, header, 0)
            _write_zeros(fd, _HEADER_LEN, _HEADER_LEN + ROOM)
            os.fsync(fd)
            if created:  # the file's name must survive a power cut too
                fsync_dir(self.path)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        self.size = 0
        self._room = ROOM

    def _grow(self, need: int) -> None:
        """Make the space ahead at least ``need`` bytes: zeros past it, synced."""
        assert self._fd is not None
        room = self._room
        while room < need:
            room += min(max(room, ROOM), _GROW_MAX)
        _write_zeros(self._fd, _HEADER_LEN + self._room, _HEADER_LEN + room)
        os.fdatasync(self._fd)  # the new size and blocks, before a record relies on them
        self._room = room

    def append(self, data: bytes, *, sync: bool = True) -> None:
        """Write encoded records after the last one and sync: when this returns they are durable.

        In place over the space ahead (see the module): one ``pwritev`` with
        ``RWF_DSYNC`` where the system has it, else ``pwrite`` and ``fdatasync``.

        ``sync=False``: return once written (a killed process loses nothing, a
        power cut may) and sync in the background (see
        :mod:`actormem.store._acklog_sync`).  Either way an earlier unsynced
        append is synced before this one is written.

        Raises:
            StoreError: The write or the sync failed; what was written is
                zeroed again (best effort), and the records are not acknowledged.
        """
        if self._fd is None:
            raise StoreError(f"the acknowledgement log {self.path} is not open")
        self._scrub()
        self._bg.settle()  # nothing is appended after an unsynced record
        at = _HEADER_LEN + self.size
        try:
            if self.size + len(data) > self._room:
                self._grow(self.size + len(data))
            if not sync:
                written = os.pwrite(self._fd, data, at)
            elif _DSYNC is not None and self._dsync:
                written = self._write_dsync(data, at)
            else:
                written = os.pwrite(self._fd, data, at)
                if written == len(data):
                    os.fdatasync(self._fd)
            if written != len(data):
                raise OSError(f"short write ({written} of {len(data)} bytes)")
            if not sync:
                self._bg.request(self._fd)
        except OSError as exc:
            # What reached the file may be an intact record the caller is told
            # failed: it must never be read back (after a later cut and a crash
            # it would head the chain).  Zeroed and synced now, or before the next
            # append or cut, which refuse to go on until it is.
            self._unclean = (at, at + len(data))
            with contextlib.suppress(StoreError):
                self._scrub()
            raise StoreError(
                f"writing to {self.path} failed and was rolled back (the log cut back to its "
                f"last synced record; the write was not stored): {exc}"
            ) from exc
        self.size += len(data)

    def _scrub(self) -> None:
        """Zero and sync the range a failed append left, if any.

        Raises:
            StoreError: It could not be zeroed: nothing more is written until it is.
        """
        if self._unclean is None or self._fd is None:
            return
        start, end = self._unclean
        try:
            _write_zeros(self._fd, start, end)
            os.fdatasync(self._fd)
        except OSError as exc:
            raise StoreError(
                f"{self.path}: the remains of a failed write could not be erased ({exc}); "
                "nothing more is acknowledged until they are"
            ) from exc
        self._unclean = None

    @property
    def unsynced(self) -> bool:
        """Whether an append made with ``sync=False`` is not synced yet."""
        return self._bg.unsynced

    def settle(self) -> None:
        """Return once every append is synced (see :meth:`append`'s ``sync``).

        Raises:
            StoreError: A background sync failed.
        """
        if self._fd is not None:
            self._bg.settle()

    def _write_dsync(self, data: bytes, at: int) -> int:
        """``pwritev(..., RWF_DSYNC)``; falls back for good where the kernel refuses the flag."""
        assert self._fd is not None and _DSYNC is not None
        try:
            return os.pwritev(self._fd, [data], at, _DSYNC)
        except OSError as exc:
            if exc.errno not in (errno.EINVAL, errno.EOPNOTSUPP, errno.ENOSYS):
                raise
        self._dsync = False
        written = os.pwrite(self._fd, data, at)
        if written == len(data):
            os.fdatasync(self._fd)
        return written

    def cut(self, base: int) -> None:
        """Drop every record (DuckDB has them, up to commit ``base``): the next is written first.

        One ``pwrite`` of ``base`` into the header, not synced: the next
        record's sync carries it to the disk (it syncs the file's data).  The
        old records stay until overwritten; numbered at or below ``base``, they
        are never read as records again -- even when DuckDB's WAL loses them,
        which the commit record then reports.  A ``base`` lost to a power cut
        before the next sync leaves them readable, and replay skips them by
        number.
        """
        if self._fd is not None:
            try:
                self._scrub()  # a failed record must not follow the cut's new start
            except StoreError as exc:  # appends refuse until it is erased
                log.error("store.acklog_scrub_failed", path=self.path, error=str(exc))
            try:
                os.pwrite(self._fd, _base_field(base), _LINE_LEN)
            except OSError as exc:  # the old records stay readable: skipped by number
                log.warning("store.acklog_cut_failed", path=self.path, error=str(exc))
        self._bg.clear()  # every record, a failed sync's too, is in DuckDB now
        self.size = 0

    def close(self, *, remove: bool) -> None:
        """Close the file; ``remove``: every record is in DuckDB, so cut it to its header.

        The file itself is kept (and synced): creating it again at the next
        open would need the directory synced before the first acknowledgement.
        """
        if self._fd is not None:
            self._bg.close()
            fd, self._fd = self._fd, None
            try:
                if remove:
                    os.ftruncate(fd, _HEADER_LEN)
                    # No record left: the header says format 3 (same layout), so an
                    # older actormem opens a cleanly closed store; the next open
                    # here writes format 4 again.
                    os.pwrite(fd, _MAGIC_V3, 0)
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
    found = cur.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = 'store_meta'"
    ).fetchall()
    meta = read_meta(cur) if found and found[0][0] else {}
    db_seq = int(meta.get("commit_seq", "0") or 0)
    store_id, records = acklog.read(after=db_seq)
    if store_id is None or not records:
        return 0
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
    # A file not yet migrated to schema 5 (the migration runs after this
    # replay) keeps its vectors in a FLOAT[dim] column: records written as
    # values get array literals for it.
    column = cur.execute(
        "SELECT data_type FROM information_schema.columns "
        "WHERE table_name = 'memories' AND column_name = 'embedding'"
    ).fetchall()
    arrays = bool(column) and str(column[0][0]).startswith("FLOAT[")
    with array_vector_literals(arrays):
        sql = {r.seq: r.statements() for r in todo}  # all readable, or nothing is applied
    script = ";\n".join(
        [
            "BEGIN TRANSACTION",
            *sql.values(),
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
                apply_one(cur, r.seq, sql[r.seq], acklog.path, path)
            except Exception as exc:
                raise StoreError(
                    f"{path}: applying acknowledged write #{r.seq} from {acklog.path} "
                    f"failed and was rolled back ({exc}); the writes before it are applied, "
                    "it and those after it stay in the log"
                ) from exc
    log.info("store.acklog_replayed", path=path, records=len(todo), last=todo[-1].seq)
    return len(todo)

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

Format: a fixed header line (``actormem-acklog 1 <store_id>\\n``) naming the
database it belongs to, then records ``<len:u32><crc32:u32><seq:u64><payload>``
(little-endian; the CRC covers the commit number and the payload, UTF-8 SQL).
A record is acknowledged only after the ``fdatasync`` that covers it returned,
so only the last records -- appended after the last sync -- can be torn by a
crash; a bad record at the end of the file (incomplete, or failing its CRC
with nothing readable after it) is dropped with a warning.  A bad record
followed by more data is damage to acknowledged writes: :meth:`AckLog.read`
raises :class:`StoreError` naming the file and the offset.

On open (:func:`replay`), records numbered above the database's
``commit_seq`` are applied in one transaction (records at or below it are
already in DuckDB: applying is idempotent by number), and the number
sequence must continue the database's without a gap.
"""

from __future__ import annotations

import contextlib
import os
import struct
import zlib
from dataclasses import dataclass
from typing import Any, Final

import structlog

from actormem._special_files import check_regular
from actormem.store._duckdb_sql import lit
from actormem.store._schema import read_meta
from actormem.store._types import StoreError

__all__ = ["AckLog", "replay"]

log = structlog.get_logger(__name__)

_MAGIC: Final = b"actormem-acklog 1 "
_HEADER_LEN: Final = len(_MAGIC) + 32 + 1
_REC: Final = struct.Struct("<IIQ")
#: Larger declared lengths are damage, not a record (a record is one small write).
_MAX_RECORD: Final = 256 * 1024 * 1024


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
    return _REC.pack(len(payload), _crc(seq, payload), seq) + payload


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
        if len(raw) < _HEADER_LEN or not raw.startswith(_MAGIC) or raw[_HEADER_LEN - 1] != 10:
            if not raw.strip(b"\x00"):  # created, header never synced: nothing was acknowledged
                return None, []
            raise StoreError(
                f"{self.path} is not an actormem acknowledgement log (bad header); nothing was "
                "changed. Move it aside to open the store without it."
            )
        store_id = raw[len(_MAGIC) : _HEADER_LEN - 1].decode("ascii", "replace")
        records: list[LogRecord] = []
        pos = _HEADER_LEN
        while pos < len(raw):
            bad = ""
            if pos + _REC.size > len(raw):
                bad = "an incomplete record header"
            else:
                length, crc, seq = _REC.unpack_from(raw, pos)
                end = pos + _REC.size + length
                if length > _MAX_RECORD or end > len(raw):
                    bad = f"a record of {length} bytes past the end of the file"
                else:
                    payload = raw[pos + _REC.size : end]
                    if _crc(seq, payload) != crc:
                        bad = "a record failing its checksum"
                    else:
                        records.append(LogRecord(seq, payload.decode("utf-8")))
                        pos = end
                        continue
            # A torn tail: the bad record runs past the end of the file, or
            # fails its checksum with only zeros after it (an extension whose
            # data never reached the disk).  Anything else is damage.
            end_ok = pos + _REC.size <= len(raw)
            after = _REC.unpack_from(raw, pos)[0] + pos + _REC.size if end_ok else len(raw)
            if after >= len(raw) or not raw[after:].strip(b"\x00") or not raw[pos:].strip(b"\x00"):
                log.warning(
                    "store.acklog_torn_tail_dropped",
                    path=self.path,
                    offset=pos,
                    bytes=len(raw) - pos,
                    reason=bad + " (appended after the last sync: never acknowledged)",
                )
                break
            raise StoreError(
                f"{self.path} is damaged: {bad} at byte {pos}, followed by more records; "
                "acknowledged writes after it cannot be read. Nothing was changed."
            )
        return store_id, records

    def start(self, store_id: str) -> None:
        """Open the log for appending, empty, with the header of ``store_id`` (synced)."""
        self._store_id = store_id
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            header = _MAGIC + store_id.encode("ascii") + b"\n"
            os.ftruncate(fd, 0)
            os.pwrite(fd, header, 0)
            os.fsync(fd)
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
        """Close the file; ``remove`` deletes it (every record is in DuckDB)."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            with contextlib.suppress(OSError):
                os.close(fd)
        if remove:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)


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
    except Exception as exc:
        with contextlib.suppress(Exception):
            cur.execute("ROLLBACK")
        raise StoreError(
            f"{path}: applying {len(todo)} acknowledged write(s) from {acklog.path} failed "
            f"and was rolled back ({exc}); nothing was changed"
        ) from exc
    log.info("store.acklog_replayed", path=path, records=len(todo), last=todo[-1].seq)
    return len(todo)

"""What each commit since the index snapshot changed: ``<database>.index.since``.

The snapshot (:mod:`actormem.store._index_file`) and its delta are written
on close and name the commit number they match.  A process that dies after
writing (a crash, SIGKILL) leaves them older than the database, and without
more to go on the next open must rebuild the index from DuckDB: over a
minute at a million memories, for what is usually a few hundred changed
rows.  This file is the more to go on: beside a snapshot, every commit
appends the ids of the memories it wrote (inserted, changed, deleted, or
whose access counts it stored), so an open can load the snapshot as of its
own commit number and re-read just those rows from DuckDB
(:meth:`~actormem.store._duckdb_open.DuckDBOpening._open_index`).

Format: a header (magic, length, CRC-32, msgpack ``[store_id, base_seq]``)
and entries (length, CRC-32, msgpack ``[seq, [ids...]]``), appended with one
``write`` each.  Entries are not synced as a rule: the file only saves work,
so losing its end (a power cut) must cost a rebuild, never a wrong index.
That holds while each commit number has one entry: losing it leaves a gap.
A number can get a second entry -- the applier notes the access counts it
stores under the number of the last record it commits, which already has
the record's entry; a commit that failed leaves its entry and the retry,
which takes the same number, adds another -- and losing only that later
entry would leave the number looking covered.  So a note for a number not
above the highest one already in the file syncs the file (``fdatasync``)
before it returns, that is before its commit: all entries of that number
are then on disk together.  A single write (one entry for a new number)
never syncs.  It is trusted only when:

* it names the store (``store_id``) and the snapshot's commit number
  (``base_seq``) is the one the snapshot and its delta load at;
* its entries cover every commit number from ``base_seq + 1`` to the
  database's (a torn or garbled entry ends the file, so a commit whose entry
  was lost leaves a gap), and no acknowledged commits were lost;
* afterwards the index holds as many live memories as DuckDB does.

Anything else rebuilds the index, as before.  A commit that cannot say
which memories it changed (``forget``, re-embedding, anything not declared)
removes the file instead of appending to it, and so does a failed append
(the removal is synced, through the folder, when the number already has an
entry).  Each entry is appended *before* its commit (for a logged write:
before its record is written), so no commit that reached the database lacks
its entry; a commit that then fails leaves ids that are merged into the
next commit with the same number, which only makes the open read more rows.
The open that uses the file cuts a torn or garbled end off before appending
(:meth:`SinceLog.reopen`): else every later entry would be unreadable.
Close removes the file before writing the snapshot and starts a new one
after, so a crash in the middle never pairs a new snapshot with old entries.

The file is bounded: once its entries name more ids than :func:`since_cap`
allows (a quarter of the index's rows, at least :data:`SINCE_MIN_IDS`), the
store removes it, and a crash before the next snapshot (close) rebuilds the
index.  Past that point the catch-up would cost about as much as the
rebuild (re-reading and tokenizing a row costs ~2x what the rebuild pays a
row, and the snapshot must be loaded too), and a process that runs for
weeks without closing would otherwise grow the file without end: ~45 bytes
per id, so the cap keeps it under ~5 MB for stores up to 400k memories and
at 11 MB at 1M.
"""

from __future__ import annotations

import contextlib
import os
import struct
import threading
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

import msgspec
import structlog

__all__ = ["SINCE_MIN_IDS", "SinceFile", "SinceLog", "read_since", "remove_since", "since_cap"]

log = structlog.get_logger(__name__)

_MAGIC: Final = b"actormem-isince\x01"
_HEAD: Final = struct.Struct("<II")  # length, CRC-32 of what follows
#: An entry longer than this is taken for damage (a commit of 1M ids is ~40 MB).
_MAX_ENTRY: Final = 256 * 1024 * 1024

#: The since-file may always name this many ids (see :func:`since_cap`).
SINCE_MIN_IDS: Final = 100_000

_encode = msgspec.msgpack.Encoder().encode


def since_cap(rows: int) -> int:
    """How many ids (counted per entry) a since-file beside an index of ``rows`` may name."""
    return max(SINCE_MIN_IDS, rows // 4)


def _frame(payload: bytes) -> bytes:
    return _HEAD.pack(len(payload), zlib.crc32(payload)) + payload


@dataclass
class SinceFile:
    """A since-file as read: its base, and the ids of each commit after it."""

    store_id: str
    base_seq: int
    entries: dict[int, list[str]] = field(default_factory=dict)
    #: Where the readable part ends (after the header and the last whole entry).
    end: int = 0

    @property
    def last_seq(self) -> int:
        """The highest commit number with an entry (``base_seq`` when none has)."""
        return max(self.entries, default=self.base_seq)

    def ids_through(self, seq: int) -> set[str] | None:
        """The ids changed by commits ``base_seq + 1 .. seq``; None unless each has its entry.

        Entries past ``seq`` are of commits that never happened (noted, then
        the process died or the commit failed) and are ignored.
        """
        if seq < self.base_seq:
            return None
        out: set[str] = set()
        for s in range(self.base_seq + 1, seq + 1):
            ids = self.entries.get(s)
            if ids is None:
                return None
            out.update(ids)
        return out


def read_since(path: str) -> SinceFile | None:
    """The since-file at ``path``, or None when it is missing or its header is damaged.

    Entries are read up to the first torn or garbled one (the rest of the
    file is ignored: the caller sees a gap and rebuilds).
    """
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError:
        return None
    if not raw.startswith(_MAGIC):
        return None
    pos = len(_MAGIC)
    found = _entry(raw, pos)
    if found is None:
        return None
    head, pos = found
    try:
        store_id, base_seq = msgspec.msgpack.decode(head, type=tuple[str, int])
    except msgspec.DecodeError:
        return None
    out = SinceFile(store_id=store_id, base_seq=base_seq, end=pos)
    while pos < len(raw):
        found = _entry(raw, pos)
        if found is None:
            break
        payload, pos = found
        try:
            seq, ids = msgspec.msgpack.decode(payload, type=tuple[int, list[str]])
        except msgspec.DecodeError:
            break
        out.entries.setdefault(seq, []).extend(ids)
        out.end = pos
    return out


def _entry(raw: bytes, pos: int) -> tuple[bytes, int] | None:
    if pos + _HEAD.size > len(raw):
        return None
    size, crc = _HEAD.unpack_from(raw, pos)
    start = pos + _HEAD.size
    if size > _MAX_ENTRY or start + size > len(raw):
        return None
    payload = raw[start : start + size]
    if zlib.crc32(payload) != crc:
        return None
    return payload, start + size


def remove_since(path: str, *, durable: bool = False) -> None:
    """Remove the since-file (absent is fine); ``durable``: sync the folder after."""
    with contextlib.suppress(FileNotFoundError, IsADirectoryError, PermissionError):
        os.unlink(path)
    if durable:
        with contextlib.suppress(OSError):
            fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


def _sync(fd: int) -> None:
    """Put what was written to ``fd`` on disk (its data and size)."""
    sync = getattr(os, "fdatasync", os.fsync)  # no fdatasync on macOS
    sync(fd)


class SinceLog:
    """The open since-file of a store: appends one entry per commit."""

    def __init__(self, path: str, fd: int, last_seq: int, noted: int = 0) -> None:
        self.path = path
        self._fd: int | None = fd
        #: The highest commit number with an entry in the file (the base when none).
        self._last = last_seq
        #: Ids named by the file's entries (each entry's ids counted).
        self.noted = noted
        # The applier thread notes access counts while the writer may drop the file.
        self._lock = threading.Lock()

    @classmethod
    def start(cls, path: str, store_id: str, base_seq: int) -> SinceLog | None:
        """A new, empty since-file for the snapshot at ``base_seq`` (replacing any)."""
        remove_since(path)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
        except OSError as exc:
            log.warning("store.index_since_failed", path=path, error=str(exc))
            return None
        out = cls(path, fd, base_seq)
        with out._lock:
            ok = out._write(_MAGIC + _frame(_encode([store_id, base_seq])))
        return out if ok else None

    @classmethod
    def reopen(cls, path: str, since: SinceFile) -> SinceLog | None:
        """Append to the since-file the open just used (``since``, as read: it stays valid).

        What follows its last whole entry (an append torn by a crash, a
        garbled entry and the ones after it, which the reader ignores) is cut
        off first: entries appended after it would be unreadable too.
        """
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        except OSError as exc:
            log.warning("store.index_since_failed", path=path, error=str(exc))
            return None
        try:
            if os.fstat(fd).st_size > since.end:
                os.ftruncate(fd, since.end)
                log.info("store.index_since_tail_cut", path=path, at=since.end)
        except OSError as exc:
            log.warning("store.index_since_failed", path=path, error=str(exc))
            os.close(fd)
            remove_since(path)
            return None
        return cls(path, fd, since.last_seq, sum(map(len, since.entries.values())))

    @property
    def active(self) -> bool:
        return self._fd is not None

    def note(self, seq: int, ids: Iterable[str]) -> None:
        """Append commit ``seq``'s ids, before the commit (sorted: no set order in the file).

        Noted before: a crash after the commit then never misses it, and a
        commit that fails leaves ids that the next commit, which takes the
        same number, adds to -- reading more rows again is harmless.  When
        ``seq`` may have an entry already (it is not above the highest
        noted), the file is synced before this returns: losing only this
        entry to a power cut would leave ``seq`` looking covered.  The sync
        runs on a copy of the descriptor, outside the lock, so the writer's
        notes of new numbers never wait for it.
        """
        named = sorted(ids)
        data = _frame(_encode([seq, named]))
        with self._lock:
            if self._fd is None:
                return
            again = seq <= self._last
            self._last = max(self._last, seq)
            self.noted += len(named)
            if not self._write(data, durable=again) or not again:
                return
            try:
                fd = os.dup(self._fd)
            except OSError as exc:
                self._fail(exc, durable=True)
                return
        try:
            _sync(fd)
        except OSError as exc:
            with self._lock:
                if self._fd is not None:
                    self._fail(exc, durable=True)
                else:  # dropped meanwhile: make sure the removal is on disk
                    remove_since(self.path, durable=True)
        finally:
            os.close(fd)

    def drop(self, reason: str, seq: int | None = None) -> None:
        """Remove the file: commit ``seq`` changed what this file cannot describe.

        When ``seq`` may have an entry already (a failed commit's), the
        removal is synced: else a power cut could bring the file back with
        that entry standing for this commit.
        """
        if self._fd is None:
            return
        durable = seq is None or seq <= self._last
        self.close()
        remove_since(self.path, durable=durable)
        log.debug("store.index_since_dropped", path=self.path, reason=reason)

    def close(self) -> None:
        with self._lock:
            fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def _write(self, data: bytes, *, durable: bool = False) -> bool:
        """Append ``data`` (lock held); on failure remove the file (``durable``: synced)."""
        assert self._fd is not None
        try:
            done = os.write(self._fd, data)
            if done != len(data):  # a short write (disk full): the entry is torn
                raise OSError(f"short write ({done} of {len(data)} bytes)")
        except OSError as exc:
            self._fail(exc, durable=durable)
            return False
        return True

    def _fail(self, exc: OSError, *, durable: bool) -> None:
        """Close and remove the file after ``exc`` (lock held)."""
        log.warning("store.index_since_failed", path=self.path, error=str(exc))
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
        remove_since(self.path, durable=durable)

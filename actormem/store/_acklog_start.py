"""The start slot: a write that must survive a killed process, kept beside the log until synced.

Why: an agent's turn with the journal writes two records, the turn's start
(NOW in flight, the user's message) and its end (the reply, NOW done).  What
``reply()`` returns must be synced; the start only has to survive the process
being killed during the model call (for the resume), which the page cache
gives once it is written.  Written to the store's log unsynced, the start had
to be synced before anything came after it -- the log's reader tells damage
from a torn tail by that rule (:mod:`actormem.store._acklog`) -- so with a
model that answers at once a turn waited for two ``fdatasync`` calls in
series, and a recorder's batch written during the model call waited for the
start's sync too.

So the start is not a record of the log.  It is written, unsynced, into this
file (``<database>.acklog.start``: a header naming the database, then one
record framed like the log's, overwritten in place each time) and kept in
memory as a pending write numbered like the log's next record.  Then one of
three things happens, and each keeps the numbers of the log consecutive:

- the next synced record of the log -- the turn's end, or another writer's
  record written during the model call (a recorded batch, a compaction) --
  *carries* the start's rows: one record, under the start's number, holding
  both, so one sync acknowledges them (until session 11 only the turn's end
  carried it, and a recorded batch during a turn cost a second sync that the
  turn's end waited for behind the writer lock);
- a sync the caller asks for (:meth:`~actormem.store.DuckDBStore.sync_log`),
  an unsynced write, or a start too large to carry: the start is appended as
  its own record, synced, before it.  The journal's NOW.md writer first
  waits a little (``_sync_log(wait)``) for the turn's end to carry it;
- the applier moves it into DuckDB (a DuckDB commit is durable) before any of
  those: the slot's copy is then stale.

At open, after the log's replay (:func:`replay_start`): a record in this
file numbered right after the database's last commit is a start that was
neither carried nor applied (the process was killed): it is applied.  A
record at or below the last commit is stale and ignored; a torn or garbled
one, or one of another database, is ignored too (never acknowledged as
durable: a power cut may lose a turn's start, as if the turn had not begun).
The slot is overwritten only when no start is pending (a second start
before the first was carried appends the first to the log), so a kill during
its write can tear only a start that was not yet acknowledged.
"""

from __future__ import annotations

import os
from typing import Any, Final

import structlog

from actormem._special_files import check_regular
from actormem.store._acklog import LogRecord, _record_at, apply_one
from actormem.store._schema import read_meta
from actormem.store._types import StoreError

__all__ = ["StartSlot", "replay_start"]

log = structlog.get_logger(__name__)

_MAGIC: Final = b"actormem-start 1 "
#: The header: the magic, the database's store id (32 hex digits), a newline.
HEADER_LEN: Final = len(_MAGIC) + 32 + 1


class StartSlot:
    """``<database>.acklog.start``: one unsynced record (see the module).

    Args:
        db_path: the database file.
    """

    def __init__(self, db_path: str) -> None:
        self.path = db_path + ".acklog.start"
        self._fd: int | None = None

    def read(self) -> tuple[str, int, bytes] | None:
        """``(store_id, seq, payload)`` of the record in the file, or None (none intact)."""
        if not check_regular(self.path, "store start slot", StoreError):
            return None
        try:
            with open(self.path, "rb") as f:
                raw = f.read()
        except OSError as exc:
            log.warning("store.start_slot_unreadable", path=self.path, error=str(exc))
            return None
        if len(raw) < HEADER_LEN or not raw.startswith(_MAGIC) or raw[HEADER_LEN - 1] != 10:
            return None
        found = _record_at(raw, HEADER_LEN, False)
        if isinstance(found, str):
            return None
        seq, _, payload = found
        return raw[len(_MAGIC) : HEADER_LEN - 1].decode("ascii", "replace"), seq, payload

    def start(self, store_id: str) -> None:
        """Open the file for writing, with no record (what it held was replayed at open)."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            os.ftruncate(fd, 0)
            header = _MAGIC + store_id.encode("ascii") + b"\n"
            if os.pwrite(fd, header, 0) != len(header):
                raise OSError("short write of the header")
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def write(self, data: bytes) -> None:
        """Write one framed record over the last one (not synced: a killed process keeps it).

        Raises:
            StoreError: The file is not open or the write failed (not acknowledged).
        """
        if self._fd is None:
            raise StoreError(f"the start slot {self.path} is not open")
        try:
            written = os.pwrite(self._fd, data, HEADER_LEN)
            if written != len(data):
                raise OSError(f"short write ({written} of {len(data)} bytes)")
        except OSError as exc:
            # a torn record is never read back (its checksum fails), and a start
            # is acknowledged only once this write returned
            raise StoreError(
                f"writing to {self.path} failed (the write was not stored): {exc}"
            ) from exc

    def close(self, *, clear: bool) -> None:
        """Close the file; ``clear``: DuckDB has every write, so drop the record."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            if clear:
                os.ftruncate(fd, HEADER_LEN)
        except OSError as exc:  # stale records are skipped by number at the next open
            log.warning("store.start_slot_clear_failed", path=self.path, error=str(exc))
        finally:
            os.close(fd)


def replay_start(cur: Any, slot: StartSlot, log_path: str, path: str) -> bool:
    """Apply the start in ``slot`` if the database lacks it (after the log's replay).

    Returns:
        Whether a start was applied.

    Raises:
        StoreError: DuckDB failed to apply it for a reason other than its
            values (nothing was changed).
    """
    found = slot.read()
    if found is None:
        return False
    store_id, seq, payload = found
    meta = read_meta(cur)
    db_seq = int(meta.get("commit_seq", "0") or 0)
    if meta.get("store_id") != store_id or seq <= db_seq:
        return False  # another database's, or carried or applied already
    if seq != db_seq + 1:  # the log's records up to it were synced: damage, not a start
        log.warning(
            "store.start_slot_ignored",
            path=slot.path,
            seq=seq,
            commit_seq=db_seq,
            reason="the start slot's record does not follow the database's last commit",
        )
        return False
    try:
        statements = LogRecord(seq, payload).statements()
        apply_one(cur, seq, statements, log_path, path)
    except Exception as exc:
        raise StoreError(
            f"{path}: applying the turn start kept in {slot.path} (commit #{seq}) failed and "
            f"was rolled back ({exc}); nothing was changed"
        ) from exc
    log.info("store.start_replayed", path=path, seq=seq)
    return True

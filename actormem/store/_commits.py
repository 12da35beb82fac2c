"""The commit record: acknowledged writes cannot vanish silently with a damaged WAL.

DuckDB appends each commit to a write-ahead log (``<file>.wal``) and
replays it on open.  Measured with DuckDB 1.5.5 after a process that
committed 100 transactions was killed: a WAL whose first bytes are garbled
is skipped whole, one truncated to half is replayed up to the cut, and in
both cases the file opens cleanly without the commits that were
acknowledged -- not a word said.

So the store counts its commits.  Every write transaction also sets
``store_meta.commit_seq`` to the next number, and once ``COMMIT`` has
returned, that number is written to a small file beside the database,
``<file>.commits``, which the WAL cannot take down with it.  On open, after
DuckDB's replay, the database's ``commit_seq`` must be at least the number
on record; when it is lower, the commits in between were acknowledged and
are gone, and the store refuses to open (:class:`StoreError` naming the
files and the missing commits) unless told to accept the loss
(``on_lost_commits="warn"``: it opens and logs ``store.commits_lost``).

The record is written after the commit and never synced: after a crash or
a power cut it can only lag behind the database, never run ahead of it, so
it never reports a loss that did not happen (a lagging record only narrows
what can be detected).  It names the database it belongs to (a random
``store_id`` kept in ``store_meta`` and checkpointed into the main file when
it is created), so a database file replaced by another one is not taken for
a damaged one; a database restored from an older copy of the same store is
reported, since the commits since that copy are indeed missing.
"""

from __future__ import annotations

import contextlib
import os
import re
from typing import Any, Final, Literal

import structlog

from actormem._special_files import read_regular
from actormem.store._schema import read_meta, write_meta
from actormem.store._types import StoreError

__all__ = ["CommitRecord", "check_commits", "start_commit_count"]

log = structlog.get_logger(__name__)

_MAGIC: Final = "actormem-commits 1"
_LINE_RE: Final = re.compile(rf"^{_MAGIC} ([0-9a-f]{{32}}) ([0-9]{{20}})\n$")


class CommitRecord:
    """``<database>.commits``: the store id and the last acknowledged commit number.

    Written in place with one ``pwrite`` of a fixed-size line per commit (the
    file never changes size, so a torn write cannot leave a shorter line).
    """

    def __init__(self, database: str) -> None:
        self.path = database + ".commits"
        self._fd: int | None = None

    def read(self) -> tuple[str, int] | None:
        """``(store_id, seq)`` on record, or None when there is no readable record.

        Raises:
            StoreError: the record's path is not a regular file (a FIFO, say).
        """
        try:
            raw = read_regular(self.path, "commit record", StoreError)[:256]
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("store.commit_record_unreadable", path=self.path, error=str(exc))
            return None
        match = _LINE_RE.match(raw.decode("ascii", "replace"))
        if match is None:
            log.warning("store.commit_record_malformed", path=self.path, size=len(raw))
            return None
        return match.group(1), int(match.group(2))

    def write(self, store_id: str, seq: int) -> None:
        """Record ``seq`` as acknowledged (never raises: a failure is logged)."""
        line = f"{_MAGIC} {store_id} {seq:020d}\n".encode("ascii")
        try:
            if self._fd is None:
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
                os.ftruncate(self._fd, len(line))
            os.pwrite(self._fd, line, 0)
        except OSError as exc:  # a full disk must not fail a commit that succeeded
            log.warning("store.commit_record_failed", path=self.path, error=str(exc))

    def close(self) -> None:
        """Close the file (the record stays on disk)."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            with contextlib.suppress(OSError):
                os.close(fd)


def _meta_if_any(cur: Any) -> dict[str, str]:
    found = cur.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = 'store_meta'"
    ).fetchall()
    return read_meta(cur) if found and found[0][0] else {}


def check_commits(
    cur: Any, record: CommitRecord, path: str, on_lost: Literal["error", "warn"]
) -> tuple[tuple[str, int] | None, int]:
    """Compare the database after WAL replay with the record; refuse a loss.

    Runs before anything is written to the file.

    Returns:
        ``(record, lost)``: the record when it belongs to this database (else
        None) and how many acknowledged commits are missing (0 unless
        ``on_lost="warn"`` accepted a loss).

    Raises:
        StoreError: Commits are missing and ``on_lost`` is ``"error"``.
    """
    recorded = record.read()
    meta = _meta_if_any(cur)
    if recorded is None:
        return None, 0
    rec_id, rec_seq = recorded
    db_id, db_seq = meta.get("store_id"), int(meta.get("commit_seq", "0") or 0)
    if db_id != rec_id:
        log.warning(
            "store.commit_record_replaced",
            path=path,
            record=record.path,
            reason="the record belongs to another database (the file was replaced)",
        )
        return None, 0
    if db_seq >= rec_seq:
        return recorded, 0
    lost = rec_seq - db_seq
    what = (
        f"{path}: {lost} acknowledged commit(s) are missing -- {record.path} records "
        f"commit #{rec_seq} as acknowledged, but after replaying the write-ahead log "
        f"{path}.wal the database ends at commit #{db_seq}: the WAL was damaged, truncated "
        "or removed (or the file was restored from an older copy)"
    )
    if on_lost == "error":
        raise StoreError(
            f"{what}. Nothing was changed. To open it anyway and accept the loss, pass "
            "on_lost_commits='warn'."
        )
    log.warning(
        "store.commits_lost", path=path, lost=lost, acknowledged=rec_seq, found=db_seq, message=what
    )
    return recorded, lost


def start_commit_count(
    cur: Any, record: CommitRecord | None, recorded: tuple[str, int] | None, lost: int
) -> tuple[str, int]:
    """Load (or create) the store id and commit number; bring the record up to date.

    Returns:
        ``(store_id, commit_seq)``.
    """
    meta = read_meta(cur)
    store_id, seq = meta.get("store_id"), int(meta.get("commit_seq", "0") or 0)
    if store_id is None or "commit_seq" not in meta or lost:
        store_id = store_id or os.urandom(16).hex()
        cur.execute("BEGIN TRANSACTION")
        write_meta(cur, {"store_id": store_id, "commit_seq": str(seq)})
        cur.execute("COMMIT")
        cur.execute("CHECKPOINT")  # into the main file now: never only in the WAL
    if record is not None and recorded != (store_id, seq):
        record.write(store_id, seq)
    return store_id, seq

"""Small writes of a DuckDB store through the acknowledgement log, and the applier.

Kept apart from :mod:`actormem.store._duckdb` (the connection and the direct
write path): this is the fast path of a small write and the background
thread that moves acknowledged writes into DuckDB.  The log's format and
its replay at open are in :mod:`actormem.store._acklog`, which also says
what "acknowledged" means.

A small batch (at most ``LOG_INSERTS`` inserts, ``SMALL_BATCH`` changes,
every value writable as a literal) becomes one record: its statements as
literal SQL, numbered with the store's next commit number.  Once the record
is synced the index is updated and the write returns; the record is also
kept in memory (:class:`Logged`).  :meth:`DuckDBLogged._drain` writes all
kept records in one DuckDB transaction -- the memories' rows as one insert
(an Arrow table when there are many), the changed rows in order, the history
rows as one insert -- setting ``commit_seq`` to the last record's number,
then cuts the log back.  It runs on the applier thread (``APPLY_DELAY``
after the first pending record, sooner past ``APPLY_SOON``; on the writing
thread past ``APPLY_MAX`` records) and before anything else reads or writes
DuckDB, always under the writer lock.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import duckdb
import msgspec
import numpy as np
import numpy.typing as npt
import structlog

from actormem._pace import mark_background, pace, rest
from actormem.store._acklog import MAX_RECORD as LOG_RECORD_MAX
from actormem.store._acklog import REJECTED, AckLog, apply_one, frame
from actormem.store._acklog_start import StartSlot
from actormem.store._commits import CommitRecord
from actormem.store._duckdb_rows import (
    HISTORY_HEAD,
    INSERT_HEAD,
    SMALL_BATCH,
    change_sql,
    execute_history,
    execute_insert,
    history_row,
    insert_table,
    journal_statements,
    literal_history,
    literal_inserts,
    memory_row,
    wire_history_table,
    write_statements,
)
from actormem.store._duckdb_sql import lit
from actormem.store._index import MemoryIndex
from actormem.store._records import Batch, us
from actormem.store._types import InvalidMemoryError, MemoryRecord, Namespace, StoreError
from actormem.store._wire import WireError, WireWrite, encode_write, literal_safe, wire_write

__all__ = ["APPLY_DELAY", "APPLY_MAX", "APPLY_SOON", "DuckDBLogged", "Logged"]

log = structlog.get_logger(__name__)

F32 = npt.NDArray[np.float32]

#: Seconds the applier waits after the first pending record, so records pile up.
#: An apply's cost is mostly fixed (its transaction, statements and commit: 30
#: records or 150 of an agent's turns took the same 35-50 ms of wall time), and
#: beside back-to-back journaled turns an apply every 0.2 s ran a third of the
#: time, competing for the cores, the GIL and the disk's sync with the turns:
#: at 1 s, five alternating pairs of ``bench_reply`` at load 7-10 gave p99 0.80x
#: (0.77-0.99x), process CPU per turn 0.90x, turns over 20 ms 0.81x (session 11).
APPLY_DELAY: Final = 1.0
#: Pending records at which the applier starts at once instead (single adds at
#: 2,400/s reach it in about the old 0.2 s), well below :data:`APPLY_MAX`.
APPLY_SOON: Final = 512
#: Seconds between two checks of ``_sync_log``'s ``still``.
_STILL_EVERY: Final = 0.005
#: Pending records beyond which a write applies them itself (memory and replay bound).
APPLY_MAX: Final = 2048
#: Batches with more inserts are committed directly (a group commit of 32
#: threads holds 16-32; the recorder's batch of 0.2 s of turns, an episode and
#: a fact or two per turn, holds 20-150).  A direct commit runs under the
#: writer lock -- the pending records applied first, then a DuckDB transaction
#: and its WAL sync, 20-80 ms -- and every write meanwhile waits for it: an
#: agent's journaled turn, whose NOW update and reply are store writes too.
#: DuckDB's parse of a record's rows at replay costs ~0.5 ms each, but what
#: replay can meet is bounded by :data:`LOG_MAX` whatever the record size, and
#: the applier writes many rows through Arrow.
LOG_INSERTS: Final = 256
#: Log size (bytes) beyond which a write applies every record and cuts the log.
LOG_MAX: Final = 16 * 1024 * 1024


@dataclass
class Logged:
    """An acknowledged write not yet in DuckDB.

    ``write``: its memories, changes and history rows as values (what the
    log's record holds, :mod:`actormem.store._wire`); their SQL is written
    when the applier needs it.  ``inserts`` keeps the inserted records and
    vectors themselves for the applier's Arrow table.
    """

    seq: int
    write: WireWrite | None = None
    inserts: list[tuple[MemoryRecord, F32]] = field(default_factory=list)
    statements: list[str] = field(default_factory=list)
    #: The journal's activity log rows (literal value tuples, :data:`LOG_HEAD`).
    log_rows: list[str] = field(default_factory=list)
    #: The journal's state rows (literal value tuples, :data:`STATE_HEAD`), by
    #: the row's key (namespace and state key) as literals.
    state_rows: dict[str, str] = field(default_factory=dict)
    #: The memories it writes (for the index's since-file; none for journal statements).
    ids: list[str] = field(default_factory=list)
    #: The activity log entries its ``log_rows`` insert: id -> seq (what a
    #: compaction checks without applying the record first).
    log_ids: dict[str, int] = field(default_factory=dict)
    _data: bytes | None = None

    def wire(self) -> WireWrite:
        """Everything the record writes, as values."""
        if self.write is not None and not (self.log_rows or self.state_rows or self.statements):
            return self.write
        return msgspec.structs.replace(
            self.write or WireWrite(0.0),
            log_rows=self.log_rows,
            state_rows=list(self.state_rows.items()),
            statements=self.statements,
        )

    def data(self) -> bytes:
        """The log record's payload (format 4), encoded once.

        Raises:
            InvalidMemoryError: A text is not valid Unicode (nothing is written).
            WireError: The write would not read back (it takes the direct path).
        """
        if self._data is None:
            try:
                self._data = encode_write(self.wire())
            except UnicodeEncodeError as exc:  # a lone surrogate in some text: not storable
                raise InvalidMemoryError(
                    f"a text of this write cannot be stored (not valid Unicode: {exc}); "
                    "nothing was written"
                ) from exc
        return self._data

    def payload(self) -> list[str]:
        """The record's statements in the order the direct path runs them."""
        return write_statements(self.wire())


def _merged_statements(pending: list[Logged]) -> list[str]:
    """The journal rows and statements of ``pending``, in order, with fewer statements.

    A turn acknowledges two journal records (its log entries and the NOW
    state); applied one by one, 200 turns took 800 statements, each upsert of
    ``journal_state`` costing about as much as a whole merged one.  Consecutive
    records' log rows become one insert and their state rows one upsert that
    keeps the last value of each key -- what applying them in order leaves --
    up to a record with other statements (a compaction), which runs in its
    place so that it sees exactly the rows written before it.
    """
    out: list[str] = []
    log_rows: list[str] = []
    state_rows: dict[str, str] = {}
    for e in pending:
        log_rows.extend(e.log_rows)
        for key, row in e.state_rows.items():
            state_rows.pop(key, None)  # re-inserted last: the values keep their order
            state_rows[key] = row
        if e.statements:
            out.extend(journal_statements(log_rows, state_rows.values()))
            out.extend(e.statements)
            log_rows, state_rows = [], {}
    out.extend(journal_statements(log_rows, state_rows.values()))
    return out


def _carried(start: Logged, end: Logged) -> Logged:
    """One record: ``start``'s journal rows, then all ``end`` writes, under ``start``'s number.

    ``end`` is any synced write (the turn's end, a recorded batch, a
    compaction's statements).  Applied, it leaves what the two applied in
    order leave: the journal rows in order, each state key's last value, and
    ``end``'s statements after every row (:func:`_merged_statements`); its
    memories' rows are other tables, which ``start`` never writes.
    """
    state = dict(start.state_rows)
    for key, row in end.state_rows.items():
        state.pop(key, None)  # re-inserted last, as _merged_statements orders them
        state[key] = row
    return Logged(
        seq=start.seq,
        write=end.write,
        inserts=end.inserts,
        statements=end.statements,
        log_rows=[*start.log_rows, *end.log_rows],
        state_rows=state,
        ids=end.ids,
        log_ids={**start.log_ids, **end.log_ids},
    )


def _too_large(statements: list[str]) -> bool:
    """Whether a record of ``statements`` could pass the size the log's reader accepts.

    Such a record is never written (the reader would take it for damage and
    refuse the open): a group of large memories (up to 1M characters each, at
    most 4 bytes a character in UTF-8) or a huge journal entry takes the
    direct path, one DuckDB commit, instead.
    """
    return 4 * sum(len(s) for s in statements) + 1024 > LOG_RECORD_MAX


class DuckDBLogged:
    """Mixin of :class:`~actormem.store.DuckDBStore`: the logged write path and its applier."""

    if TYPE_CHECKING:  # attributes of DuckDBStore and StoreBase used here
        path: str
        _dim: int
        _seq: int
        _store_id: str
        _wcur: Any
        _write_lock: threading.RLock
        _stop: threading.Event
        _commits: CommitRecord | None
        _acklog: AckLog | None
        _logged: list[Logged]
        _index: MemoryIndex
        _con: Any

        def _run_script(
            self, what: str, statements: list[str], ids: Iterable[str] | None = None
        ) -> None: ...

        def _take_pending(self) -> dict[str, tuple[int, float]]: ...

        def _restore_pending(self, pending: dict[str, tuple[int, float]]) -> None: ...

        def _rebuild_index(self, progress: Any = None) -> None: ...

        def _note_commit(self, seq: int, ids: Iterable[str] | None) -> None: ...

        @staticmethod
        def _touches_literal(pending: dict[str, tuple[int, float]]) -> str | None: ...

    def _init_logged(self, acklog: AckLog | None, slot: StartSlot | None = None) -> None:
        """The log (None: a ``:memory:`` store writes directly), its start slot and locks."""
        self._acklog = acklog
        self._slot = slot
        self._logged = []
        #: The write kept in the start slot and not yet in the log (see
        #: :mod:`actormem.store._acklog_start`); pending while it is the last
        #: of ``_logged``.
        self._start: Logged | None = None
        #: The number of the last record an apply in progress took (0: none).
        self._taken = 0
        # Lock order: writer lock, then _apply_lock, then _logged_lock.  The
        # applier takes only the last two, so writes are logged while it works.
        self._apply_lock = threading.Lock()
        self._logged_lock = threading.Lock()
        #: Notified (``_logged_lock`` held) when a pending start becomes durable
        #: or is applied: :meth:`_sync_log` waits on it.
        self._start_done = threading.Condition(self._logged_lock)
        self._acur: Any = None
        self._apply_wake = threading.Event()
        #: Ends the applier's wait early: many records pending, or close.
        self._apply_soon = threading.Event()
        self._applier: threading.Thread | None = None
        #: Acknowledged writes DuckDB rejected when applying them (set aside in
        #: ``<db>.acklog.rejected``, logged as errors) since the store was opened.
        self.rejected_writes = 0
        #: The index holds a write DuckDB rejected: rebuilt under the writer lock.
        self._index_stale = False

    def _start_applier(self) -> None:
        if self._acklog is None:
            return
        self._applier = threading.Thread(
            target=self._apply_loop,
            name=f"actormem-store-applier:{Path(self.path).name}",
            daemon=True,
        )
        self._applier.start()

    def _stop_applier(self) -> None:
        """Stop the applier thread (``_stop`` is set by the caller first)."""
        self._apply_soon.set()
        self._apply_wake.set()
        if self._applier is not None and self._applier is not threading.current_thread():
            self._applier.join()

    def _apply_loop(self) -> None:
        mark_background()
        while not self._stop.is_set():
            self._apply_wake.wait()
            self._apply_wake.clear()
            self._apply_soon.wait(APPLY_DELAY)
            self._apply_soon.clear()
            if self._stop.is_set():
                return  # close() drains under the writer lock
            try:
                self._apply_pending()
            except Exception as exc:  # kept: the records stay pending and logged
                log.error("store.apply_failed", path=self.path, error=str(exc))
            rest()  # the step's paced work is done (see actormem._pace)

    def _apply_pending(self, *, stopping: bool = True) -> None:
        """Apply what is pending on the applier's cursor; writes go on meanwhile.

        Every record acknowledged before the call is applied when it returns
        (the applier's step, and a read's: see :meth:`_drain_locked`).
        ``stopping``: do nothing once ``close()`` began (it drains itself).
        """
        with self._apply_lock:
            if stopping and self._stop.is_set():
                return
            pending = self._take()
            if pending:
                try:
                    if self._acur is None:
                        self._acur = self._con.cursor()
                    self._apply(self._acur, pending)
                    self._applied(len(pending))
                finally:
                    self._untake()
        if self._index_stale:
            with self._write_lock:
                self._refresh_index()

    def _log_entry(self, batch: Batch, now: float) -> Logged | None:
        """``batch`` as a record for the log, or None when it takes the direct path.

        Raises:
            StoreError: An inserted id is taken by a memory the index holds
                (or twice in the batch): DuckDB would refuse it later, after
                the write was acknowledged.
        """
        if (
            len(batch.inserts) > LOG_INSERTS
            or len(batch.changes) > SMALL_BATCH
            or len(batch.history) > 4 * SMALL_BATCH
        ):
            return None
        ids = [r.id for r, _ in batch.inserts]
        for mid in ids:
            if ids.count(mid) > 1 or self._index.row_of(mid) is not None:
                raise StoreError(f"a memory with id {mid!r} already exists in {self.path}")
        write = wire_write(batch, now)
        if not literal_safe(write, self._dim):
            return None  # a value with no SQL literal: bound through Arrow directly
        entry = Logged(
            seq=self._seq + 1,
            write=write,
            inserts=list(batch.inserts),
            ids=[*ids, *batch.changes, *batch.removed],
        )
        try:
            size = len(entry.data())
        except WireError as exc:
            log.warning("store.write_not_logged", path=self.path, error=str(exc))
            return None
        return None if size + 1024 > LOG_RECORD_MAX else entry

    def _append_logged(self, entry: Logged, *, sync: bool = True) -> None:
        """Append ``entry`` to the log and sync it: from here on it is acknowledged.

        ``sync=False`` (journal rows only, a turn's start): acknowledged once
        written to the start slot (:mod:`actormem.store._acklog_start`; a
        killed process keeps it), made durable by the next record -- the
        turn's end carries its rows, one record and one sync for both --, by
        :meth:`sync_log`, or by the applier.  Without a slot, written to the
        log and synced in the background (:mod:`actormem.store._acklog_sync`).
        The commit record is left to the synced record, so it never runs
        ahead of the disk.
        """
        assert self._acklog is not None
        if len(self._logged) >= APPLY_MAX or self._acklog.size >= LOG_MAX:
            self._drain()
        rows_only = entry.write is None and not entry.statements and not entry.ids
        with self._logged_lock:
            start = self._pending_start()
            synced: int | None = None
            if start is not None and sync and start.seq > self._taken:
                # Any synced write carries a pending start: one record and one
                # sync for both (a recorded batch or a compaction during a turn
                # put the start in the log first, a second sync the turn's end
                # waited for behind the writer lock).
                carried = _carried(start, entry)
                if len(carried.data()) + 1024 <= LOG_RECORD_MAX:
                    if entry.ids:  # a second entry of this number: see _index_since
                        self._note_commit(carried.seq, entry.ids)
                    self._acklog.append(frame(carried.seq, carried.data()))
                    self._logged[-1] = carried  # in place of the start: applied once
                    self._start = None
                    self._start_done.notify_all()
                    synced = start.seq
                    start = None
            if start is not None:  # not carried: in the log first, synced
                self._promote(start)
        if synced is None:
            self._note_commit(entry.seq, entry.ids)  # before the record: see _index_since
            data = frame(entry.seq, entry.data())
            with self._logged_lock:  # not while the applier cuts the log
                if not sync and rows_only and self._slot is not None:
                    self._slot.write(data)
                    self._start = entry
                else:
                    self._acklog.append(data, sync=sync)
                self._seq = entry.seq
                self._logged.append(entry)
            if sync:
                synced = entry.seq
        if self._commits is not None and synced is not None:  # never ahead of the log
            self._commits.write(self._store_id, synced)
        if not self._apply_wake.is_set():  # set and not yet cleared: it reads this record
            self._apply_wake.set()
        if len(self._logged) >= APPLY_SOON and not self._apply_soon.is_set():
            self._apply_soon.set()

    def _pending_start(self) -> Logged | None:
        """The start kept in the slot that nothing made durable yet (``_logged_lock`` held)."""
        start = self._start
        if start is not None and not (self._logged and self._logged[-1] is start):
            start = self._start = None  # applied: DuckDB has it
        return start

    def _promote(self, start: Logged) -> None:
        """Append the pending ``start`` to the log as its own record, synced (``_logged_lock``).

        Raises:
            StoreError: The write failed; the start stays pending (kept in the slot).
        """
        assert self._acklog is not None
        self._acklog.append(frame(start.seq, start.data()))
        self._start = None
        self._start_done.notify_all()
        if self._commits is not None:
            self._commits.write(self._store_id, start.seq)

    def _write_script(self, what: str, statements: list[str]) -> None:
        """Write literal ``statements`` (no index change) as one logged record (writer lock held).

        The journal's tables go this way; a ``:memory:`` store commits them directly.
        """
        if self._acklog is None or _too_large(statements):
            self._run_script(what, statements, ())
            return
        self._append_logged(Logged(seq=self._seq + 1, statements=list(statements)))

    def _write_journal_rows(
        self,
        what: str,
        log_rows: list[str],
        state_rows: dict[str, str],
        *,
        sync: bool = True,
        log_ids: dict[str, int] | None = None,
    ) -> None:
        """Write the journal's literal rows as one logged record (writer lock held).

        Kept as rows, not statements, so the applier merges many records' rows
        into one insert and one upsert (see :func:`_merged_statements`).
        ``sync``: see :meth:`_append_logged`; ``log_ids``: see :class:`Logged`.
        """
        entry = Logged(
            seq=self._seq + 1, log_rows=log_rows, state_rows=state_rows, log_ids=log_ids or {}
        )
        statements = entry.payload()
        if self._acklog is None or _too_large(statements):
            self._run_script(what, statements, ())
            return
        self._append_logged(entry, sync=sync)

    def sync_log(self) -> None:
        """Return once every record of the store's log is synced.

        A record written with ``sync=False`` (a journal turn's start) is synced
        in the background; this waits for it, or syncs it here.

        Raises:
            StoreError: A background sync failed.
        """
        self._sync_log(0.0)

    def _sync_log(self, wait: float, still: Callable[[], bool] | None = None) -> None:
        """:meth:`sync_log`, after waiting up to ``wait`` seconds for another write
        to make a pending start durable (and while ``still()`` says the caller may).

        The turn's end carries the start (one record, one sync for both); the
        journal's NOW.md writer waits so.  Promoting the start itself took a
        sync that the turn's end then waited for, in about one turn of ten
        of an instant model.  A start still pending after ``wait`` is synced
        here; a newer start pending by then is left alone (the file to show
        is the older one).  ``still`` is asked every 5 ms: the NOW.md writer
        stops waiting once a flush waits for it -- the turn's own thread may
        be that flush (a NOW update past its version limit), and the turn's
        end it waits for would never come.

        Raises:
            StoreError: A background sync failed.
        """
        if self._acklog is None:
            return
        with self._logged_lock:  # not while close() closes the log
            start = self._pending_start()
            if start is not None and wait > 0:
                end = time.monotonic() + wait
                while self._pending_start() is start and (still is None or still()):
                    left = end - time.monotonic()
                    if left <= 0:
                        break
                    self._start_done.wait(min(left, _STILL_EVERY))
                if self._pending_start() is not start:  # durable (a newer one may be pending)
                    start = None
            if start is not None:
                self._promote(start)
            self._acklog.settle()

    @property
    def log_unsynced(self) -> bool:
        """Whether an acknowledged write is not synced yet (a turn's start: :meth:`sync_log`)."""
        if self._acklog is None:
            return False
        with self._logged_lock:
            return self._pending_start() is not None or self._acklog.unsynced

    def _pending_log_ids(self, ids: list[str]) -> dict[str, int] | None:
        """The seq of each of ``ids`` (activity log entries) inserted by a pending record.

        None when a pending record's statements name one of them (a compaction
        not yet applied): only DuckDB, once it has applied them, can say what
        they leave.  Reads the records kept in memory: no DuckDB call, no drain.
        """
        wanted = set(ids)
        out: dict[str, int] = {}
        with self._logged_lock:
            pending = list(self._logged)
        for e in pending:
            if e.statements:
                text = "\n".join(e.statements)
                if any(i in text for i in ids):
                    return None
            if e.log_ids:
                out.update((i, s) for i, s in e.log_ids.items() if i in wanted)
        return out

    def _pending_ops(self, scope: Namespace, ids: set[str]) -> dict[str, tuple[int, str]]:
        """The last history row of each of ``ids`` (in ``scope``) among the pending records.

        ``{memory_id: (microseconds, op)}``.  Applied, a record's history rows
        come after every row DuckDB holds (the history's ``rowid`` order), with
        the record's clock as their time -- what :meth:`last_ops` weighs them by.
        Reads the records kept in memory: no DuckDB call, no drain.
        """
        with self._logged_lock:
            writes = [e.write for e in self._logged if e.write is not None and e.write.history]
        fields = list(scope.items())
        out: dict[str, tuple[int, str]] = {}
        for w in writes:
            when = us(w.now)
            for h in w.history:
                if h.memory_id not in ids or any(getattr(h, k) != v for k, v in fields):
                    continue
                last = out.get(h.memory_id)
                if last is None or when >= last[0]:  # ties: the later row (a higher rowid)
                    out[h.memory_id] = (when, h.op)
        return out

    def _drain_locked(self) -> None:
        """Apply pending records before a read of DuckDB.

        Without the writer lock: writes are logged meanwhile, and the read
        needs only what was acknowledged before it.
        """
        if self._logged or self._index_stale:
            self._apply_pending(stopping=False)

    def _drain(self) -> None:
        """Write every pending record into DuckDB in one transaction (writer lock held).

        Waits for the applier's step in progress, if any.

        Raises:
            StoreError: The transaction failed and was rolled back; the records
                stay pending (and in the log, which replays them at open).
        """
        if not self._logged:
            self._refresh_index()
            return
        with self._apply_lock:
            pending = self._take()  # no append can run: the writer lock is held
            if pending:
                try:
                    self._apply(self._wcur, pending)
                    self._applied(len(pending))
                finally:
                    self._untake()
        self._refresh_index()

    def _take(self) -> list[Logged]:
        """The pending records, for an apply (``_apply_lock`` held): a pending start
        among them can no longer be carried by the next record (see :meth:`_append_logged`)."""
        with self._logged_lock:
            pending = list(self._logged)
            self._taken = pending[-1].seq if pending else 0
        return pending

    def _untake(self) -> None:
        with self._logged_lock:
            self._taken = 0

    def _refresh_index(self) -> None:
        """Rebuild the index from DuckDB if it is out of step (writer lock held).

        Out of step: it holds a write DuckDB rejected, or updating it after an
        acknowledged write failed.
        """
        if self._index_stale:
            self._rebuild_index()
            self._index_stale = False

    def _applied(self, n: int) -> None:
        """Forget the first ``n`` pending records (committed); cut the log when none is left."""
        with self._logged_lock:
            base = self._logged[n - 1].seq if n else 0
            del self._logged[:n]
            if n:
                self._start_done.notify_all()  # a start among them is in DuckDB
            if not self._logged and n and self._acklog is not None:
                self._acklog.cut(base)

    def _apply(self, cur: Any, pending: list[Logged]) -> None:
        """Commit ``pending`` into DuckDB in one transaction on ``cur``."""
        inserts = [ins for e in pending for ins in e.inserts]
        writes = [e.write for e in pending if e.write is not None]
        script: list[str] = []
        arrow = not literal_inserts([r for r, _ in inserts])
        if inserts and not arrow:
            rows = [memory_row(m, self._dim) for w in writes for m in w.inserts]
            script.append(INSERT_HEAD + ", ".join(rows))
        script.extend(change_sql(c, self._dim) for w in writes for c in w.changes)
        history_arrow = None
        if any(w.history for w in writes):
            prefix = uuid.uuid4().hex  # one per step: the rows' ids are unique in it
            if literal_history([h for w in writes for h in w.history]):
                history: list[str] = []
                for w in writes:  # 2-3 us a row: the applier lets other threads in between
                    for h in w.history:
                        history.append(history_row(h, f"{prefix}-{len(history)}", w.now))
                    pace()
                script.append(HISTORY_HEAD + ", ".join(history))
            else:  # long texts: bound through Arrow, not parsed (see LITERAL_CHARS)
                dated = [(h, w.now) for w in writes for h in w.history]
                history_arrow = wire_history_table(
                    [(h, f"{prefix}-{i}", now) for i, (h, now) in enumerate(dated)]
                )
        script.extend(_merged_statements(pending))
        touches, touch_sql = self._touches_for(pending)
        last = pending[-1].seq
        if touch_sql is not None:
            script.append(touch_sql)
            self._note_commit(last, touches)  # under the last number: a second entry, synced
        script.append(f"UPDATE store_meta SET value = {lit(str(last))} WHERE key = 'commit_seq'")
        script.append("COMMIT")
        try:
            if arrow or history_arrow is not None:
                cur.execute("BEGIN TRANSACTION")
                if arrow:
                    execute_insert(
                        cur,
                        insert_table(self._dim, [r for r, _ in inserts], [v for _, v in inserts]),
                    )
                if history_arrow is not None:
                    execute_history(cur, history_arrow)
            else:  # one call into DuckDB
                script.insert(0, "BEGIN TRANSACTION")
            cur.execute(";\n".join(script))
        except BaseException as exc:
            with contextlib.suppress(duckdb.Error):
                cur.execute("ROLLBACK")
            self._restore_pending(touches)
            if not isinstance(exc, duckdb.Error):
                raise
            if isinstance(exc, REJECTED) or len(pending) > 1:
                self._apply_each(cur, pending, exc)
                return
            raise StoreError(
                f"applying {len(pending)} acknowledged write(s) to {self.path} failed and "
                f"was rolled back ({exc}); they stay in {self._acklog_path()} and are "
                "applied again on the next read, write or open"
            ) from exc

    def _apply_each(self, cur: Any, pending: list[Logged], first: duckdb.Error) -> None:
        """After ``pending`` failed as one transaction: commit its records one at a time.

        A record DuckDB rejects (its values or SQL, see
        :data:`~actormem.store._acklog.REJECTED`) goes to ``<db>.acklog.rejected``
        and ``commit_seq`` moves past it, so it cannot hold back the records after
        it; the index, which had it already, is rebuilt from DuckDB.  Any other
        failure (a full disk) stops here: the records applied so far are
        forgotten, the rest stay pending, and :class:`StoreError` says so.
        """
        assert self._acklog is not None
        for done, entry in enumerate(pending):
            try:
                ok = apply_one(
                    cur, entry.seq, ";\n".join(entry.payload()), self._acklog.path, self.path
                )
            except duckdb.Error as exc:
                self._applied(done)
                raise StoreError(
                    f"applying acknowledged write #{entry.seq} to {self.path} failed and was "
                    f"rolled back ({exc}; as a group: {first}); it and the ones after it stay "
                    f"in {self._acklog_path()} and are applied again on the next read, write "
                    "or open"
                ) from exc
            if not ok:
                self.rejected_writes += 1
                self._index_stale = True

    def _touches_for(
        self, pending: list[Logged]
    ) -> tuple[dict[str, tuple[int, float]], str | None]:
        """Pending access counts to write with ``pending``: ``(taken, statement)``.

        Counts of memories whose insert is in a later record (appended after
        ``pending`` was taken) are left for the next step.
        """
        taken = self._take_pending()
        if not taken:
            return taken, None
        with self._logged_lock:
            later = {r.id for e in self._logged[len(pending) :] for r, _ in e.inserts}
        if later:
            self._restore_pending({k: v for k, v in taken.items() if k in later})
            taken = {k: v for k, v in taken.items() if k not in later}
        sql = self._touches_literal(taken)
        if sql is None:  # many, or ids with no literal: the flusher writes them
            self._restore_pending(taken)
            return {}, None
        return taken, sql

    def _acklog_path(self) -> str:
        return self._acklog.path if self._acklog is not None else "memory"

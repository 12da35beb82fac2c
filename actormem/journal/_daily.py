"""The daily journal: ``memory/YYYY-MM-DD.md``, one line per memory the store committed.

Kept apart from :mod:`actormem.journal._journal` (NOW, LOG and the files'
writer): this part runs on the runtime's event thread, fed by
``MemoryRecorded`` events, under its own lock (``_day_lock``), so its store
reads and fsynced appends never hold up NOW/LOG on the agent's turn.
:meth:`DailyJournal.sync` also waits for the view writer, so one call
tells that everything the journal was given is on disk.
"""

from __future__ import annotations

import datetime as dt
import re
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final

from actormem._settings import check_arg
from actormem.events import Event, JournalWritten, MemoryRecorded
from actormem.journal._config import JournalConfig
from actormem.journal._files import append_text, read_text
from actormem.journal._format import render_journal_header, render_journal_line, stamp
from actormem.store import MemoryRecord, MemoryStore, Namespace

if TYPE_CHECKING:
    from actormem.journal._views import ViewWriter

__all__ = ["DailyJournal"]

_LINE: Final = re.compile(r"^- \d\d:\d\d:\d\d · (.*)$", re.M)
_TIME_PREFIX: Final = len("- 00:00:00 · ")


class DailyJournal:
    """Mixin of :class:`~actormem.journal.Journal`: the daily journal files."""

    if TYPE_CHECKING:  # attributes of Journal used here
        _store: MemoryStore
        namespace: Namespace
        label: str
        config: JournalConfig
        _publish: Callable[[Event], None]
        _views: ViewWriter
        _day_lock: threading.RLock
        _count_lock: threading.Lock
        _queued: int
        _handled: int
        _days: dict[str, set[str]]

        def day_path(self, day: str | dt.date) -> Path: ...

        def today(self) -> str: ...

    def accept(self, event: Event) -> bool:
        """Event filter for the bus: counts what the journal will have to write."""
        if isinstance(event, MemoryRecorded) and event.ids:
            with self._count_lock:
                self._queued += 1
            return True
        return False

    def on_recorded(self, event: Event) -> None:
        """Append the memories a ``MemoryRecorded`` event committed to today's journal."""
        try:
            if isinstance(event, MemoryRecorded):
                with self._day_lock:
                    self._journal_records(event.ids, event.ts)
        finally:
            with self._count_lock:
                self._handled += 1

    def sync(self, timeout: float = 10.0) -> bool:
        """Wait until every accepted event was written, and the queued NOW.md/LOG.md
        writes and compaction are done; False on timeout.

        Raises:
            ValueError: ``timeout`` is not a number of seconds from 0 to a week.
        """
        check_arg("Journal.sync", "timeout", timeout)
        if timeout is None:
            raise ValueError("Journal.sync(timeout=...) must be a number of seconds, got None")
        end = time.monotonic() + timeout
        while True:
            with self._count_lock:
                if self._handled >= self._queued:
                    break
            if time.monotonic() >= end:
                return False
            time.sleep(0.005)
        return self._views.flush(max(0.0, end - time.monotonic()))

    def _seen(self, day: str, path: Path) -> set[str]:
        seen = self._days.get(day)
        if seen is None:
            text = read_text(path) or ""
            seen = {m.group(1) for m in _LINE.finditer(text)}
            self._days = {day: seen}  # only the current day is kept
        return seen

    def _journal_records(self, ids: Sequence[str], ts: float) -> int:
        if not ids:
            return 0
        day = stamp(ts, "%Y-%m-%d")
        path = self.day_path(day)
        seen = self._seen(day, path)
        lines: list[str] = []
        written: list[str] = []
        recs = [
            rec
            for mid in dict.fromkeys(ids)
            if (rec := self._store.get(self.namespace, mid, include_deleted=True)) is not None
        ]
        last_ops = self._last_ops(recs)
        for rec in recs:
            line = render_journal_line(
                rec, ts, limit=self.config.journal_line_chars, op=self._op_label(rec, last_ops)
            )
            key = line[_TIME_PREFIX:]
            if key in seen:  # the same memory in the same state was journaled today
                continue
            seen.add(key)
            lines.append(line)
            written.append(rec.id)
        if not lines:
            return 0
        text = "\n".join(lines) + "\n"
        if not path.exists():
            text = render_journal_header(day, self.label) + text
        append_text(path, text)
        self._publish(
            JournalWritten(
                source="journal", path=str(path), lines=len(lines), day=day, ids=tuple(written)
            )
        )
        return len(lines)

    def _last_ops(self, recs: Sequence[MemoryRecord]) -> dict[str, str] | None:
        """The last history operation of the memories changed after their insert.

        Every change after the insert sets ``updated_at`` to its write's clock:
        a memory never changed needs no history read.  The others are read in
        one query where the store can (DuckDB's ``last_ops``: each read first
        applies the store's pending writes, about a DuckDB commit, so one read
        per recorded batch instead of one per memory); None: read one by one.
        """
        changed = [
            r.id
            for r in recs
            if r.deleted_at is None and r.superseded_by is None and r.updated_at != r.created_at
        ]
        if not changed:
            return {}
        many = getattr(self._store, "last_ops", None)
        return None if many is None else dict(many(self.namespace, changed))

    def _op_label(self, rec: MemoryRecord, last_ops: dict[str, str] | None) -> str:
        """What last happened to ``rec``: "" (added), updated, deleted, merged into ..."""
        if rec.deleted_at is not None:
            return "deleted"
        if rec.superseded_by is not None:
            return f"merged into {rec.superseded_by}"
        if rec.updated_at == rec.created_at:
            return ""  # never changed after its insert (see _last_ops)
        if last_ops is not None:
            last = last_ops.get(rec.id, "ADD")
        else:
            history = self._store.history(self.namespace, rec.id)
            last = history[-1].op if history else "ADD"
        return "updated" if last == "UPDATE" else ""  # a merge keeps the survivor as it was

    def read_day(self, day: str | dt.date | None = None) -> str:
        """The journal text of ``day`` (default today); "" when there is none."""
        with self._day_lock:
            return read_text(self.day_path(day or self.today())) or ""

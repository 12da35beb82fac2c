"""Journal: the agent's human-readable memory files, with DuckDB as the record.

One :class:`Journal` serves one namespace and owns its folder::

    <memory_dir>/<user>/<agent>/
        NOW.md                 hot: objective, next steps, status
        LOG.md                 warm: typed activity log (summary of older entries first)
        MEMORY.md              durable knowledge written by deep dream
        DREAMS.md              the dream diary (append-only)
        memory/YYYY-MM-DD.md   what the long-term memory committed that day

Files are views.  NOW lives in the session state and the ``journal_state``
table; LOG entries in ``activity_log`` (compactions in ``log_compactions``);
journal lines point at memories by id; MEMORY.md items are memories tagged
``core``.  Views are replaced atomically (temp file, rename; NOW.md and LOG.md
without fsync, since DuckDB holds what they show and they are rewritten from it
when missing or empty: see :mod:`actormem.journal._files`) or appended with
one fsynced write.  The hash of every view the journal writes
is kept, so a NOW.md or MEMORY.md changed by a person is noticed and
imported (and then rewritten in canonical form), never silently overwritten.

Thread safety: every method takes the journal's lock; the runtime calls it
from the caller's thread, the event-delivery thread (daily journal) and the
idle timer (dreams).
"""

from __future__ import annotations

import datetime as dt
import re
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final, Protocol, runtime_checkable

import msgspec
import structlog

from actormem._door import check_json_object
from actormem._settings import check_arg
from actormem.compress import EstimateTokenCounter, ExtractiveSummarizer, Summarizer
from actormem.events import (
    Event,
    JournalWritten,
    LogCompacted,
    MemoryRecorded,
    ModelFallback,
    NowUpdated,
)
from actormem.journal._config import JournalConfig
from actormem.journal._dream import DreamReport, dream_due, import_memory_md, run_dream
from actormem.journal._files import append_text, read_text, text_hash, write_text
from actormem.journal._format import (
    ENTRY_TYPES,
    MemoryItem,
    NowStatus,
    clip,
    parse_memory_md,
    parse_now,
    render_journal_header,
    render_journal_line,
    render_log,
    render_now,
    stamp,
)
from actormem.journal._paths import check_inside, day_name, namespace_folder
from actormem.messages import Msg
from actormem.models.base import ChatModel
from actormem.state import StateError, StateModule
from actormem.store import (
    LogCompaction,
    LogRecord,
    MemoryRecord,
    MemoryStore,
    Namespace,
    NewMemory,
)

__all__ = [
    "DAYS_DIR",
    "DREAMS_FILE",
    "JOURNAL",
    "LOG_FILE",
    "MEMORY_FILE",
    "NOW_FILE",
    "Journal",
    "JournalStore",
]

log = structlog.get_logger(__name__)

#: ``source`` of the journal's events.
JOURNAL: Final = "journal"
NOW_FILE: Final = "NOW.md"
LOG_FILE: Final = "LOG.md"
MEMORY_FILE: Final = "MEMORY.md"
DREAMS_FILE: Final = "DREAMS.md"
DAYS_DIR: Final = "memory"
_NOW_DECODER: Final = msgspec.json.Decoder(NowStatus)
_LINE: Final = re.compile(r"^- \d\d:\d\d:\d\d · (.*)$", re.M)
_TIME_PREFIX: Final = len("- 00:00:00 · ")
_LOG_INSTRUCTION: Final = (
    "Summarize this agent activity log as a short factual narrative in the third person: "
    "what was asked, which tools ran with what outcome, errors and how they were handled, "
    "decisions and open tasks. Keep names, numbers, dates and ids."
)


@runtime_checkable
class JournalStore(MemoryStore, Protocol):
    """A :class:`~actormem.store.MemoryStore` that also keeps the journal's tables."""

    def log_append(
        self,
        namespace: Namespace,
        entry_type: str,
        content: str,
        *,
        metadata: dict[str, Any] | None = None,
        ts: float | None = None,
    ) -> LogRecord: ...

    def log_entries(
        self,
        namespace: Namespace,
        *,
        compacted: bool | None = False,
        after_seq: int = 0,
        limit: int | None = None,
    ) -> list[LogRecord]: ...

    def log_compact(
        self,
        namespace: Namespace,
        entry_ids: Sequence[str],
        *,
        summary_id: str,
        summary: str,
        summarizer: str = "",
        bytes_before: int = 0,
        bytes_after: int = 0,
    ) -> LogCompaction: ...

    def log_compactions(self, namespace: Namespace) -> list[LogCompaction]: ...

    def journal_state(self, namespace: Namespace) -> dict[str, str]: ...

    def set_journal_state(self, namespace: Namespace, values: dict[str, str]) -> None: ...


class Journal(StateModule):
    """NOW, LOG, the daily journal and deep dream for one namespace.

    Args:
        store: the long-term store (it keeps the log and the journal state).
        namespace: whose files these are (a concrete namespace).
        config: thresholds, budgets and the folder root.
        root: the folder root (``config.memory_dir`` resolved by the runtime).
        publish: where events go (the runtime's bus).
        model: summarizes compactions and writes dreams (offline when None).

    Raises:
        TypeError: the store does not keep the journal's tables.
        JournalPathError: the folder would leave ``root``.
    """

    def __init__(
        self,
        store: MemoryStore,
        namespace: Namespace,
        config: JournalConfig,
        root: str | Path,
        *,
        publish: Callable[[Event], None] | None = None,
        model: ChatModel | None = None,
    ) -> None:
        super().__init__()
        if not isinstance(store, JournalStore):
            raise TypeError(
                f"the journal needs a store with the journal tables (DuckDBStore), "
                f"got {type(store).__name__}"
            )
        object.__setattr__(self, "_store", store)
        self._store: JournalStore
        self.namespace = namespace
        self.config = config
        self.root = Path(root)
        self.folder = namespace_folder(self.root, namespace)
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)  # memory is private
        check_inside(self.root.resolve(), self.folder)
        self._resolved_folder = self.folder.resolve()
        self.label = str(namespace).replace("user_id=", "").replace("agent_id=", "")
        self.model = model
        self._publish = publish or (lambda e: None)
        self._lock = threading.RLock()
        # The daily journal (day files, ``_days``) has its own lock: the event
        # thread's store reads and fsynced appends never hold up NOW/LOG on the
        # agent's turn.  Order: ``_lock`` before ``_day_lock``.
        self._day_lock = threading.RLock()
        self._counter = EstimateTokenCounter()
        self._summarizer: Summarizer = self._make_summarizer(model)
        self._count_lock = threading.Lock()  # never held while writing: accept() runs on actors
        self._queued = 0
        self._handled = 0
        self._days: dict[str, set[str]] = {}
        state = self._store.journal_state(namespace)
        self._hashes: dict[str, str] = {k[5:]: v for k, v in state.items() if k.startswith("hash:")}
        self._now = NowStatus()
        if "now" in state:
            try:
                self._now = _NOW_DECODER.decode(state["now"])
            except msgspec.DecodeError:
                log.warning("journal.now_state_unreadable", namespace=str(namespace))
        self._live: list[LogRecord] = self._store.log_entries(namespace)
        compactions = self._store.log_compactions(namespace)
        self._compaction: LogCompaction | None = compactions[-1] if compactions else None
        with self._lock:
            self._sync_now()
            self._write_log()  # a view: always re-rendered from the record at start
            import_memory_md(self)

    # -- paths ---------------------------------------------------------------------------------

    def path(self, name: str) -> Path:
        """A file of the agent's folder (``NOW.md``, ``LOG.md``, ...), checked to stay inside."""
        return check_inside(self.folder, self.folder / name, resolved_base=self._resolved_folder)

    def day_path(self, day: str | dt.date) -> Path:
        """The journal file of ``day`` (``memory/YYYY-MM-DD.md``).

        Raises:
            JournalPathError: ``day`` is not a ``YYYY-MM-DD`` date.
        """
        return self.path(f"{DAYS_DIR}/{day_name(day)}.md")

    def days(self) -> list[str]:
        """The days that have a journal file, oldest first."""
        folder = self.folder / DAYS_DIR
        if not folder.is_dir():
            return []
        out = []
        for p in folder.glob("*.md"):
            try:
                out.append(day_name(p.stem))
            except ValueError:
                continue
        return sorted(out)

    def today(self) -> str:
        """Today's date (local time of the journal's clock), ``YYYY-MM-DD``."""
        return stamp(self.config.clock(), "%Y-%m-%d")

    # -- state (sessions) ----------------------------------------------------------------------

    @property
    def component_name(self) -> str:
        return JOURNAL

    def state_dict(self) -> dict[str, Any]:
        with self._lock:
            return {"now": msgspec.to_builtins(self._now)}

    def load_state_dict(self, state: dict[str, Any], strict: bool = True) -> None:
        if not isinstance(state, dict):
            raise StateError(f"journal: state must be a dict, got {type(state).__name__}")
        raw = state.get("now")
        if raw is None:
            if strict:
                raise StateError("journal: state has no 'now'")
            return
        try:
            loaded = msgspec.convert(raw, NowStatus)
        except msgspec.ValidationError as exc:
            raise StateError(f"journal: invalid NOW state: {exc}") from None
        with self._lock:
            self._sync_now()
            # The newest status wins: a session older than NOW.md/DuckDB does not roll it back.
            if loaded.updated_at > self._now.updated_at:
                self._set_now(loaded, log_entry=False)

    def load_state_json(self, data: bytes | msgspec.Raw, strict: bool = True) -> None:
        try:
            state = msgspec.json.decode(data)
        except msgspec.DecodeError as exc:
            raise StateError(f"journal: state must be a JSON object: {exc}") from None
        self.load_state_dict(state, strict=strict)

    # -- NOW -----------------------------------------------------------------------------------

    def now(self) -> NowStatus:
        """The working status (a hand edit of NOW.md is imported first)."""
        with self._lock:
            self._sync_now()
            return self._now

    def update_now(
        self,
        objective: str,
        next_steps: Sequence[str] = (),
        *,
        state: str = "in_flight",
        note: str = "",
        also_log: Sequence[tuple[str, str, dict[str, Any]]] = (),
    ) -> NowStatus:
        """Replace the working status and rewrite NOW.md.

        A change of objective is logged (SYSTEM) with the old one.  The status,
        its log entries and ``also_log`` commit in one transaction.

        Args:
            objective: what the agent is working on ("" for nothing).
            next_steps: the immediate next steps, in order.
            state: ``in_flight``, ``done``, ``error``, ``idle`` or another word.
            note: a free note (an error, a hint for whoever resumes).
            also_log: more ``(entry_type, content, metadata)`` log entries
                (see :meth:`log`), appended before the status's own: what
                led to the new status (the user's request, the final reply).

        Returns:
            The new status.

        Raises:
            ValueError: an argument has the wrong type.
        """
        extra = self._check_entries(also_log)
        if not isinstance(objective, str):
            raise ValueError(f"objective must be a str, got {type(objective).__name__}")
        if isinstance(next_steps, str) or not all(isinstance(s, str) for s in next_steps):
            raise ValueError("next_steps must be a sequence of str")
        if not isinstance(state, str) or not state.strip():
            raise ValueError(f"state must be a non-empty str, got {state!r}")
        if not isinstance(note, str):
            raise ValueError(f"note must be a str, got {type(note).__name__}")
        new = NowStatus(
            objective=clip(objective, 1_000) if objective.strip() else "",
            next_steps=tuple(clip(s, 500) for s in next_steps if s.strip())[:20],
            state=state.strip(),
            note=clip(note, 1_000) if note.strip() else "",
            updated_at=self.config.clock(),
        )
        with self._lock:
            self._sync_now()
            self._set_now(new, log_entry=True, extra=extra)
            return self._now

    def _set_now(
        self,
        new: NowStatus,
        *,
        log_entry: bool,
        imported: bool = False,
        extra: Sequence[tuple[str, str, dict[str, Any]]] = (),
    ) -> None:
        old = self._now
        self._now = new
        path = self.path(NOW_FILE)
        # not fsynced: DuckDB holds the status; an empty NOW.md is rewritten (_sync_now)
        digest = write_text(path, render_now(new, self.label), sync=False)
        self._hashes[NOW_FILE] = digest
        entries: list[tuple[str, str, dict[str, Any]]] = []
        if log_entry:
            if old.objective and old.objective != new.objective:
                entries.append(
                    ("SYSTEM", f"objective changed from: {clip(old.objective, 300)}", {})
                )
            steps = "; ".join(new.next_steps[:3])
            entries.append(
                (
                    "SYSTEM",
                    f"NOW {new.state}: {new.objective or '(no objective)'}"
                    + (f" — next: {steps}" if steps else "")
                    + (f" — {new.note}" if new.note else ""),
                    {"now": True},
                )
            )
        self._append_many(
            [*extra, *entries],
            {"now": msgspec.json.encode(new).decode(), f"hash:{NOW_FILE}": digest},
        )
        self._publish(
            NowUpdated(
                source=JOURNAL,
                objective=new.objective,
                next_steps=new.next_steps,
                state=new.state,
                imported=imported,
                path=str(path),
            )
        )

    def _sync_now(self) -> None:
        """Import NOW.md if a person changed it; rewrite it if it is missing."""
        path = self.path(NOW_FILE)
        text = read_text(path)
        if text is None or not text.strip():
            # missing, or emptied by a power cut before the unsynced write reached
            # the disk: rewritten from the record, never taken for a hand edit
            digest = write_text(path, render_now(self._now, self.label), sync=False)
            self._hashes[NOW_FILE] = digest
            self._store.set_journal_state(self.namespace, {f"hash:{NOW_FILE}": digest})
            return
        if text_hash(text) == self._hashes.get(NOW_FILE):
            return
        edited = parse_now(text, updated_at=self.config.clock())
        log.info("journal.now_imported", path=str(path), objective=edited.objective[:80])
        self._append("SYSTEM", f"NOW.md was edited by hand; imported: {edited.objective}")
        self._set_now(edited, log_entry=False, imported=True)

    # -- LOG -----------------------------------------------------------------------------------

    def log(self, entry_type: str, content: str, **metadata: Any) -> LogRecord:
        """Append an entry to the activity log (DuckDB, then LOG.md); compact past a threshold.

        Args:
            entry_type: ``TOOL_USE``, ``THOUGHT``, ``USER_FEEDBACK``, ``ERROR`` or ``SYSTEM``.
            content: the text (clipped to ``entry_max_chars``).
            **metadata: JSON values kept with the entry.

        Returns:
            The stored entry.

        Raises:
            ValueError: an unknown type or empty content.
        """
        return self.log_many([(entry_type, content, metadata)])[0]

    def log_many(self, entries: Sequence[tuple[str, str, dict[str, Any]]]) -> list[LogRecord]:
        """Append ``(entry_type, content, metadata)`` entries in one transaction.

        LOG.md is rewritten once for all of them (see :meth:`log`).

        Raises:
            ValueError: an unknown type or empty content (nothing is written).
        """
        checked = self._check_entries(entries)
        with self._lock:
            return self._append_many(checked)

    @staticmethod
    def _check_entries(
        entries: Sequence[tuple[str, str, dict[str, Any]]],
    ) -> list[tuple[str, str, dict[str, Any]]]:
        out = []
        for entry_type, content, metadata in entries:
            if entry_type not in ENTRY_TYPES:
                raise ValueError(
                    f"entry_type must be one of {', '.join(ENTRY_TYPES)}: {entry_type!r}"
                )
            if not isinstance(content, str) or not content.strip():
                raise ValueError("a log entry needs non-empty text")
            out.append(
                (entry_type, content, check_json_object(metadata, "log metadata", error=ValueError))
            )
        return out

    def _append(
        self, entry_type: str, content: str, metadata: dict[str, Any] | None = None
    ) -> LogRecord:
        return self._append_many([(entry_type, content, dict(metadata or {}))])[0]

    def _append_many(
        self,
        entries: Sequence[tuple[str, str, dict[str, Any]]],
        state: dict[str, str] | None = None,
    ) -> list[LogRecord]:
        """Store ``entries`` (and ``state``) in one transaction, then rewrite LOG.md once."""
        limit = self.config.entry_max_chars
        now = self.config.clock()
        rows: list[tuple[str, str, dict[str, Any], float]] = []
        for entry_type, content, metadata in entries:
            meta = dict(metadata or {})
            text = content.strip()
            if len(text) > limit:
                meta["chars"] = len(text)
                text = text[: limit - 1] + "…"
            rows.append((entry_type, text, meta, now))
        if not rows and not state:
            return []
        write = getattr(self._store, "journal_write", None)
        if write is not None:  # DuckDB: one transaction
            recs: list[LogRecord] = write(self.namespace, rows, state)
        else:
            if state:
                self._store.set_journal_state(self.namespace, state)
            recs = [
                self._store.log_append(self.namespace, kind, text, metadata=meta, ts=ts)
                for kind, text, meta, ts in rows
            ]
        if not recs:
            return recs
        self._live.extend(recs)
        size = self._write_log()
        cfg = self.config
        if len(self._live) > cfg.log_max_entries or size > cfg.log_max_bytes:
            self._compact(size)
        return recs

    def entries(self, limit: int | None = None) -> list[LogRecord]:
        """The live (not yet compacted) log entries, oldest first (the last ``limit``)."""
        check_arg("Journal.entries", "limit", limit, kind="limit?")
        with self._lock:
            return list(self._live if limit is None else self._live[-limit:] if limit else [])

    @property
    def last_compaction(self) -> LogCompaction | None:
        """The latest compaction of the log (its summary heads LOG.md)."""
        return self._compaction

    def _render_log(self) -> str:
        cfg = self.config
        return render_log(
            self._live,
            self._compaction,
            self.label,
            max_entries=cfg.log_max_entries,
            max_bytes=cfg.log_max_bytes,
        )

    def _write_log(self) -> int:
        text = self._render_log()
        write_text(self.path(LOG_FILE), text, sync=False)  # a view, rebuilt at start
        return len(text.encode("utf-8", "surrogatepass"))

    def compact(self) -> LogCompaction | None:
        """Compact the log now (whatever its size); None when there is nothing to compact."""
        with self._lock:
            return self._compact(len(self._render_log().encode("utf-8", "surrogatepass")))

    def _compact(self, size_before: int) -> LogCompaction | None:
        keep = self.config.log_keep_entries
        old = self._live[: len(self._live) - keep] if keep else list(self._live)
        if not old:
            return None
        t0 = time.perf_counter()
        msgs: list[Msg] = []
        previous = self._compaction
        if previous is not None:
            msgs.append(Msg.system(previous.summary, actormem="summary"))
        msgs += [
            Msg.assistant(f"[{e.entry_type}] {e.content}", name=e.entry_type.lower()) for e in old
        ]
        summary = self._summarizer.summarize(
            msgs, target_tokens=self.config.summary_tokens, instruction=_LOG_INSTRUCTION
        )
        if summary.fallback:
            self._publish(
                ModelFallback(
                    source=JOURNAL,
                    component="journal.compaction",
                    error=summary.error,
                    fallback=summary.summarizer,
                )
            )
        body = summary.text.strip() or "\n".join(f"- {clip(e.content, 120)}" for e in old[-20:])
        first, last = old[0], old[-1]
        header = (
            f"Activity log of {self.label}, entries #{first.seq}-#{last.seq} "
            f"({stamp(first.ts)} to {stamp(last.ts)}):"
        )
        text = f"{header}\n{body}"
        sources = [e.id for e in old] + ([previous.summary_id] if previous else [])
        result = self._store.add_many(
            self.namespace,
            [
                NewMemory(
                    content=text,
                    kind="summary",
                    importance=0.5,
                    tags=("log-summary",),
                    source_ids=tuple(sources),
                    metadata={
                        "log_entries": len(old),
                        "first_seq": first.seq,
                        "last_seq": last.seq,
                        "summarizer": summary.summarizer,
                    },
                )
            ],
            dedup=False,
        )[0]
        rest = self._live[len(old) :]
        preview = LogCompaction(
            id="",
            namespace=self.namespace,
            ts=self.config.clock(),
            entries=len(old),
            first_seq=first.seq,
            last_seq=last.seq,
            summary_id=result.id,
            summary=text,
        )
        after = len(
            render_log(
                rest,
                preview,
                self.label,
                max_entries=self.config.log_max_entries,
                max_bytes=self.config.log_max_bytes,
            ).encode("utf-8", "surrogatepass")
        )
        comp = self._store.log_compact(
            self.namespace,
            [e.id for e in old],
            summary_id=result.id,
            summary=text,
            summarizer=summary.summarizer,
            bytes_before=size_before,
            bytes_after=after,
        )
        self._compaction = comp
        self._live = rest
        self._write_log()
        ms = (time.perf_counter() - t0) * 1e3
        log.info("journal.log_compacted", entries=len(old), summary_id=result.id, ms=round(ms, 1))
        self._publish(
            LogCompacted(
                source=JOURNAL,
                entries=len(old),
                summary_id=result.id,
                compaction_id=comp.id,
                bytes_before=size_before,
                bytes_after=after,
                summarizer=summary.summarizer,
            )
        )
        self._journal_records([result.id], self.config.clock())
        return comp

    # -- the model's view ----------------------------------------------------------------------

    def context(self, max_tokens: int | None = None) -> str:
        """The ``<working_memory>`` block for the model: NOW and the latest LOG entries.

        Fits ``max_tokens`` (default ``context_max_tokens``); "" when there is
        neither an objective nor a log entry.

        Raises:
            ValueError: ``max_tokens`` is not None or an int from 1 to 10,000,000.
        """
        check_arg("Journal.context", "max_tokens", max_tokens, kind="max_tokens?")
        budget = self.config.context_max_tokens if max_tokens is None else max_tokens
        with self._lock:
            self._sync_now()
            now = self._now
            live = self._live[-self.config.context_log_entries :]
            total = len(self._live)
        if not now.objective and not live:
            return ""
        count = self._counter.count
        head = ["<working_memory>"]
        if now.objective:
            head.append(f"NOW ({now.state}, updated {stamp(now.updated_at)}; from NOW.md):")
            head.append(f"Objective: {clip(now.objective, 600)}")
            if now.next_steps:
                head.append("Next steps:")
                head += [f"{i}. {clip(s, 300)}" for i, s in enumerate(now.next_steps, 1)]
            if now.note:
                head.append(f"Note: {clip(now.note, 300)}")
        tail = ["</working_memory>"]
        while count("\n".join(head + tail)) > budget and len(head) > 2:
            head.pop()  # drop trailing steps until NOW fits

        def render(lines: list[str]) -> str:
            if not lines:
                return "\n".join(head + tail)
            note = f"Recent activity (LOG.md, last {len(lines)} of {total} entries):"
            return "\n".join([*head, note, *lines, *tail])

        lines: list[str] = []
        for e in reversed(live):
            line = f"- {stamp(e.ts, '%H:%M:%S')} {e.entry_type}: {clip(e.content, 200)}"
            if count(render([line, *lines])) > budget:
                break
            lines.insert(0, line)
        return render(lines)

    # -- the daily journal ---------------------------------------------------------------------

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
        """Wait until every accepted event was written; False on timeout.

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
                    return True
            if time.monotonic() >= end:
                return False
            time.sleep(0.005)

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
        for mid in dict.fromkeys(ids):
            rec = self._store.get(self.namespace, mid, include_deleted=True)
            if rec is None:
                continue
            line = render_journal_line(
                rec, ts, limit=self.config.journal_line_chars, op=self._op_label(rec)
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
                source=JOURNAL, path=str(path), lines=len(lines), day=day, ids=tuple(written)
            )
        )
        return len(lines)

    def _op_label(self, rec: MemoryRecord) -> str:
        """What last happened to ``rec``: "" (added), updated, deleted, merged into ..."""
        if rec.deleted_at is not None:
            return "deleted"
        if rec.superseded_by is not None:
            return f"merged into {rec.superseded_by}"
        history = self._store.history(self.namespace, rec.id)
        last = history[-1].op if history else "ADD"
        return "updated" if last == "UPDATE" else ""  # a merge keeps the survivor as it was

    def read_day(self, day: str | dt.date | None = None) -> str:
        """The journal text of ``day`` (default today); "" when there is none."""
        with self._day_lock:
            return read_text(self.day_path(day or self.today())) or ""

    # -- deep dream and MEMORY.md -------------------------------------------------------------

    def dream(self, lookback_days: int | None = None, *, force: bool = False) -> DreamReport:
        """Consolidate memory and rewrite MEMORY.md (see :mod:`actormem.journal._dream`).

        Args:
            lookback_days: journal days to read (default ``dream_lookback_days``).
            force: dream even when the input is unchanged.

        Returns:
            What changed (``skipped`` when the input was unchanged).

        Raises:
            ValueError: ``lookback_days`` is not None or an int from 1 to 36,500.
        """
        check_arg("Journal.dream", "lookback_days", lookback_days)
        with self._lock, self._day_lock:
            return run_dream(self, lookback_days, force=force)

    def dream_if_due(self) -> DreamReport | None:
        """Dream when ``dream_interval_seconds`` have passed since the last one (on_idle)."""
        with self._lock, self._day_lock:
            state = self._store.journal_state(self.namespace)
            if not dream_due(state, self.config.clock(), self.config.dream_interval_seconds):
                return None
            return run_dream(self)

    def import_edits(self) -> dict[str, int]:
        """Import hand edits of NOW.md and MEMORY.md now (they are also imported on use).

        Returns:
            ``{"now": 0 or 1, "memory": changes imported from MEMORY.md}``.
        """
        with self._lock:
            before = self._now
            self._sync_now()
            parts = import_memory_md(self)
            return {"now": int(self._now is not before), "memory": sum(len(p) for p in parts)}

    def memory_items(self) -> list[MemoryItem]:
        """The items of MEMORY.md (a hand edit is imported first)."""
        with self._lock:
            import_memory_md(self)
            text = read_text(self.path(MEMORY_FILE))
            return parse_memory_md(text) if text is not None else []

    # -- helpers -------------------------------------------------------------------------------

    def _make_summarizer(self, model: ChatModel | None) -> Summarizer:
        if model is None:
            return ExtractiveSummarizer()
        from actormem.compress import ModelSummarizer

        return ModelSummarizer(model, timeout=self.config.model_timeout)

    def _save_hash(self, name: str, digest: str, extra: dict[str, str] | None = None) -> None:
        self._hashes[name] = digest
        self._store.set_journal_state(self.namespace, {f"hash:{name}": digest, **(extra or {})})

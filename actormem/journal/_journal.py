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
``core``.  Views are replaced atomically (temp file, rename) or appended with
one fsynced write.  NOW.md and LOG.md are written without fsync and by the
view writer thread, after the store acknowledged what they show (see
:mod:`actormem.journal._views`); LOG compaction runs there too.  The hash of
every view the journal writes is kept -- for NOW.md, of every version
acknowledged since the one on disk, so a file written late (or not at all,
by a killed process) is never taken for an edit -- so a NOW.md or MEMORY.md
changed by a person is noticed and imported (and then rewritten in canonical
form), never silently overwritten.

A NOW.md the journal wrote is recognised by its inode, size and modification
time without reading it (:data:`~actormem.journal._files.Signature`); any
other NOW.md is read and hashed.  The one edit this does not notice at once is
an edit in place, of the same size, within the file system's timestamp tick
of the journal's own write: the journal's next write of NOW.md reads the file,
leaves it and forgets its signature, and the next use imports it.  The
version on disk stays in the list while NOW.md writes fail (a full disk), so
the file is caught up when they work again, never imported as an edit.

Thread safety: every method takes the journal's lock; the runtime calls it
from the caller's thread, the event-delivery thread (daily journal) and the
idle timer (dreams).  The journal has two threads of its own, the view
writer and its compactor (:mod:`actormem.journal._views`); :meth:`Journal.flush`
waits for both and :meth:`Journal.close` stops them after writing what is queued.
"""

from __future__ import annotations

import datetime as dt
import os
import stat
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

import msgspec
import structlog

from actormem._door import check_json_object, without_nul
from actormem._private import make_private_dirs
from actormem._settings import check_arg
from actormem.compress import EstimateTokenCounter, ExtractiveSummarizer, Summarizer
from actormem.events import (
    Event,
    NowUpdated,
)
from actormem.journal._compaction import compact_log, log_over, render
from actormem.journal._config import JournalConfig
from actormem.journal._daily import DailyJournal
from actormem.journal._dream import DreamReport, dream_due, import_memory_md, run_dream
from actormem.journal._files import (
    Signature,
    read_text,
    replace_view,
    signature,
    text_hash,
)
from actormem.journal._format import (
    ENTRY_TYPES,
    MemoryItem,
    NowStatus,
    clip,
    parse_memory_md,
    parse_now,
    render_context,
    render_now,
    stamp,
)
from actormem.journal._paths import check_inside, day_name, namespace_folder
from actormem.journal._store_protocol import JournalStore
from actormem.journal._views import ViewWriter
from actormem.models.base import ChatModel
from actormem.state import StateError, StateModule
from actormem.store import (
    LogCompaction,
    LogRecord,
    MemoryStore,
    Namespace,
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
#: Journal state key of the hashes of every NOW.md version acknowledged since
#: the one last written to disk (that one first), space-separated.
_NOW_VERSIONS: Final = f"hashes:{NOW_FILE}"
#: Versions of NOW.md that may be acknowledged ahead of the file; past this a
#: NOW update waits for the view writer (the hash list stays short).
_MAX_NOW_VERSIONS: Final = 32
#: Seconds the NOW.md writer waits for a turn's end to make the turn's start
#: durable (one sync for both) before it syncs the start itself: NOW.md shows
#: an in-flight task at most this much later (beside the writer's own delay).
NOW_SYNC_WAIT: Final = 0.25


def _stat(path: Path) -> Signature | None:
    """The :data:`Signature` of the regular file ``path`` (not followed), or None."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return signature(st) if stat.S_ISREG(st.st_mode) else None


class Journal(DailyJournal, StateModule):
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
        make_private_dirs(self.folder)  # memory is private: 0700, every new level
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
        self._views = ViewWriter(self.label)
        self._log_lines: dict[str, str] = {}  # LOG.md lines of the live entries, by id
        # before _lock; one compaction at a time (re-entered when a closed writer runs
        # a compaction's LOG.md job, and with it the next compaction, inline)
        self._compact_lock = threading.RLock()
        # NOW.md versions: the hashes acknowledged since the one on disk (that
        # one first), and the signatures of files the view writer wrote.
        self._hash_lock = threading.Lock()
        self._now_sigs: dict[Signature, str] = {}
        self._count_lock = threading.Lock()  # never held while writing: accept() runs on actors
        self._queued = 0
        self._handled = 0
        self._days: dict[str, set[str]] = {}
        state = self._store.journal_state(namespace)
        self._hashes: dict[str, str] = {k[5:]: v for k, v in state.items() if k.startswith("hash:")}
        versions = state.get(_NOW_VERSIONS, "").split()
        if NOW_FILE in self._hashes:
            versions.append(self._hashes[NOW_FILE])
        self._now_versions: list[str] = list(dict.fromkeys(versions))
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
            self._sync_now(start=True)
            # a view: always re-rendered from the record at start (on this thread)
            replace_view(self.path(LOG_FILE), render(self, self._live, self._compaction))
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
        sync: bool = True,
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
            sync: False: return once the update is written, unsynced, to the
                store's start slot (a killed process keeps it); the next synced
                journal write carries it in its own record (one sync for both),
                and any other write of the store makes it durable first
                (DuckDB; elsewhere it commits as usual).  An agent's turn start
                does this: the turn's end is synced, and so covers both.
                NOW.md shows it only once synced.

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
        objective, note, state = without_nul(objective), without_nul(note), without_nul(state)
        next_steps = [without_nul(s) for s in next_steps]
        new = NowStatus(
            objective=clip(objective, 1_000) if objective.strip() else "",
            next_steps=tuple(clip(s, 500) for s in next_steps if s.strip())[:20],
            state=state.strip(),
            note=clip(note, 1_000) if note.strip() else "",
            updated_at=self.config.clock(),
        )
        with self._lock:
            self._sync_now()
            self._set_now(new, log_entry=True, extra=extra, sync=sync)
            return self._now

    def _set_now(
        self,
        new: NowStatus,
        *,
        log_entry: bool,
        imported: bool = False,
        extra: Sequence[tuple[str, str, dict[str, Any]]] = (),
        sync: bool = True,
    ) -> None:
        old = self._now
        self._now = new
        path = self.folder / NOW_FILE
        text = render_now(new, self.label)
        digest = text_hash(text)
        versions = self._now_version(digest)
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
            {
                "now": msgspec.json.encode(new).decode(),
                f"hash:{NOW_FILE}": digest,
                _NOW_VERSIONS: " ".join(versions),
            },
            sync=sync,
        )
        # Acknowledged with its hash: only now may the file show it (once synced).
        self._queue_now(text, digest)
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

    def _sync_now(self, *, start: bool = False) -> None:
        """Import NOW.md if a person changed it; rewrite it if it is missing.

        ``start``: the journal is opening; a NOW.md older than the record (a
        version acknowledged before a kill, written late or not at all) is
        brought up to date on this thread.
        """
        if not start:
            sig = _stat(self.folder / NOW_FILE)
            if sig is not None:
                with self._hash_lock:
                    if sig in self._now_sigs:
                        return  # a file of ours, unchanged since
        path = self.path(NOW_FILE)
        before = _stat(path)
        text = read_text(path)
        if text is not None and text.strip():
            digest = text_hash(text)
            with self._hash_lock:
                ours = digest in self._now_versions
                if ours and start:  # on disk: the versions before it are gone
                    del self._now_versions[: self._now_versions.index(digest)]
                if ours and before is not None and before == _stat(path):
                    self._now_sigs[before] = digest  # the next check needs no read
            if ours and not (start and digest != self._hashes.get(NOW_FILE)):
                return  # ours (perhaps behind a queued write)
            if not ours:
                edited = parse_now(text, updated_at=self.config.clock())
                log.info("journal.now_imported", path=str(path), objective=edited.objective[:80])
                self._now_version(digest, on_disk=True)  # the canonical form replaces it
                self._append("SYSTEM", f"NOW.md was edited by hand; imported: {edited.objective}")
                self._set_now(edited, log_entry=False, imported=True)
                return
        # Missing, emptied by a power cut before the unsynced write reached the
        # disk, or (at start) older than the record: rewritten from the record,
        # never taken for a hand edit.
        canonical = render_now(self._now, self.label)
        digest = text_hash(canonical)
        if digest != self._hashes.get(NOW_FILE):  # e.g. a store from before hashes were kept
            versions = self._now_version(digest)
            self._hashes[NOW_FILE] = digest
            self._store.set_journal_state(
                self.namespace, {f"hash:{NOW_FILE}": digest, _NOW_VERSIONS: " ".join(versions)}
            )
        if start:
            self._write_now(canonical, digest)
        else:
            self._queue_now(canonical, digest)

    def _now_version(self, digest: str, *, on_disk: bool = False) -> list[str]:
        """Note ``digest`` as a NOW.md version about to be acknowledged; the list to record.

        The first version is the one on disk (``on_disk``: ``digest`` is, an
        imported edit), never dropped, or the journal would take its own file
        for an edit.  Past ``_MAX_NOW_VERSIONS``, waits for the view writer (its
        NOW.md job takes no journal lock); if the writes keep failing (a full
        disk), the versions between the one on disk and the newest are dropped:
        nothing queued can write them any more.
        """
        for _ in range(2):
            with self._hash_lock:
                versions = self._now_versions
                if on_disk and digest in versions:
                    versions.remove(digest)
                    versions.insert(0, digest)
                if digest in versions:
                    return list(versions)
                if len(versions) < _MAX_NOW_VERSIONS:
                    if on_disk:
                        versions.insert(0, digest)
                    else:
                        versions.append(digest)
                    return list(versions)
            self._views.flush_key(NOW_FILE)
        with self._hash_lock:  # the writer failed to catch up: keep the file's and the newest
            if on_disk:
                head, rest, tail = [digest], self._now_versions, []
            else:
                head, rest, tail = self._now_versions[:1], self._now_versions[1:], [digest]
            rest = [v for v in rest if v != digest]
            room = _MAX_NOW_VERSIONS - len(head) - len(tail)
            self._now_versions = [*head, *rest[max(0, len(rest) - room) :], *tail]
            return list(self._now_versions)

    def _queue_now(self, text: str, digest: str) -> None:
        """Have the view writer replace NOW.md with ``text`` (acknowledged as ``digest``)."""
        self._views.put(NOW_FILE, lambda: self._write_now(text, digest))

    def _write_now(self, text: str, digest: str) -> None:
        """Replace NOW.md with ``text`` unless a person edited it since (then it is imported).

        The file is the journal's own when its hash is a version or the one
        written at its signature.  Any other is left alone; an edit in place
        that kept a signature of ours has it forgotten, so the next use imports it.
        """
        # Never a file showing what the disk may not hold yet.  A turn's start
        # (written unsynced) is given a moment to be carried by the turn's end
        # before it is synced here: that sync was a second one the end waited for.
        waiting = getattr(self._store, "_sync_log", None)  # DuckDB's store log
        if waiting is not None and self._views.may_wait():
            waiting(NOW_SYNC_WAIT, self._views.may_wait)
        else:
            self.sync_store()
        path = self.path(NOW_FILE)
        before = _stat(path)
        current = read_text(path)
        if current is not None and current.strip():
            found = text_hash(current)
            with self._hash_lock:
                written_here = before is not None and self._now_sigs.get(before) == found
                edited = found not in self._now_versions and not written_here
                if edited and before is not None:
                    self._now_sigs.pop(before, None)
            if edited:  # the next use imports it; never overwritten unread
                log.info("journal.now_write_deferred", path=str(path), reason="edited by hand")
                return
        sig = replace_view(path, text)
        with self._hash_lock:
            if digest in self._now_versions:  # the versions before it are gone from disk
                del self._now_versions[: self._now_versions.index(digest)]
            else:  # dropped while queued (cannot happen with the writer caught up): on disk now
                self._now_versions.insert(0, digest)
            self._now_sigs = {sig: digest}  # older files of ours are gone

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
            meta = check_json_object(metadata, "log metadata", error=ValueError)
            # no store keeps a NUL (PostgreSQL cannot): replaced, as the door does for messages
            out.append((entry_type, without_nul(content), without_nul(meta)))
        return out

    def _append(
        self, entry_type: str, content: str, metadata: dict[str, Any] | None = None
    ) -> LogRecord:
        return self._append_many([(entry_type, content, dict(metadata or {}))])[0]

    def _append_many(
        self,
        entries: Sequence[tuple[str, str, dict[str, Any]]],
        state: dict[str, str] | None = None,
        *,
        sync: bool = True,
    ) -> list[LogRecord]:
        """Store ``entries`` (and ``state``) in one transaction, then queue one LOG.md rewrite.

        ``sync=False``: see :meth:`update_now` (only a store with ``journal_write``).
        """
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
            recs: list[LogRecord] = (
                write(self.namespace, rows, state)
                if sync
                else write(self.namespace, rows, state, sync=False)
            )
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
        self._queue_log()
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

    def _queue_log(self) -> None:
        """Have the view writer render and replace LOG.md (``_lock`` held).

        The entries are taken now, in the order of the calls, so a rewrite
        queued later always shows a later state.  Past a threshold the writer
        starts a compaction on its side thread.
        """
        live, compaction = list(self._live), self._compaction

        def job() -> None:  # on the view writer's thread, the only user of _log_lines
            text = render(self, live, compaction, self._log_lines)
            replace_view(self.path(LOG_FILE), text)  # a view, rebuilt at start
            size = len(text.encode("utf-8", "surrogatepass"))
            if len(live) > self.config.log_keep_entries and log_over(self, len(live), size):
                self._views.start_side(self._compact_due)

        self._views.put(LOG_FILE, job)

    def _compact_due(self) -> None:
        compact_log(self, force=False)

    def compact(self) -> LogCompaction | None:
        """Compact the log now (whatever its size); None when there is nothing to compact.

        LOG.md is rewritten by the view writer (``flush()`` waits for it).
        """
        return compact_log(self, force=True)

    def sync_store(self) -> None:
        """Return once every write of the journal is synced (see ``update_now(sync=False)``).

        Raises:
            StoreError: A background sync of the store's log failed.
        """
        sync_log = getattr(self._store, "sync_log", None)
        if sync_log is not None:
            sync_log()

    def flush(self, timeout: float | None = 60.0) -> bool:
        """Wait until NOW.md and LOG.md show every acknowledged update and no
        compaction runs; False on timeout."""
        check_arg("Journal.flush", "timeout", timeout)
        return self._views.flush(timeout)

    def close(self) -> None:
        """Write what is queued (NOW.md, LOG.md, a compaction), then stop the writer threads.

        Later calls write their files on the caller's thread.
        """
        self._views.close()

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
        return render_context(now, live, total, budget, self._counter.count)

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

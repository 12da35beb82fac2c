"""LOG compaction: older entries summarized into a long-term memory, off the agent's turn.

Kept apart from :mod:`actormem.journal._journal` (the journal's files and
calls): this is the one slow step of the log -- a summary (a model call when
the runtime has a model), a memory written to the store and the entries
marked in one store transaction -- and it runs on the view writer's side
thread (:mod:`actormem.journal._views`) once the rendered LOG.md is past a
threshold, or on the caller's thread for :meth:`Journal.compact`.

It holds the journal's lock only to take the live entries and to drop the
compacted ones afterwards, so turns go on meanwhile: entries appended during
a compaction come after the compacted ones and stay live.  One compaction at
a time (``Journal._compact_lock``).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Final

import structlog

from actormem.events import LogCompacted, ModelFallback
from actormem.journal._format import clip, render_log, render_log_entry, stamp
from actormem.messages import Msg
from actormem.store import LogCompaction, LogRecord, NewMemory

if TYPE_CHECKING:
    from actormem.journal._journal import Journal

__all__ = ["compact_log", "log_over"]

log = structlog.get_logger(__name__)

_LOG_INSTRUCTION: Final = (
    "Summarize this agent activity log as a short factual narrative in the third person: "
    "what was asked, which tools ran with what outcome, errors and how they were handled, "
    "decisions and open tasks. Keep names, numbers, dates and ids."
)


def render(
    journal: Journal,
    live: list[LogRecord],
    compaction: LogCompaction | None,
    lines: dict[str, str] | None = None,
) -> str:
    """The text of LOG.md for ``live`` entries after ``compaction``.

    ``lines``: rendered entries by id, reused and refilled (only the live
    ones are kept); the view writer's, so a rewrite renders only new entries.
    """
    cfg = journal.config
    fresh: dict[str, str] = {}

    def cached(e: LogRecord) -> str:
        text = lines.get(e.id) if lines is not None else None
        if text is None:
            text = render_log_entry(e)
        fresh[e.id] = text
        return text

    text = render_log(
        live,
        compaction,
        journal.label,
        max_entries=cfg.log_max_entries,
        max_bytes=cfg.log_max_bytes,
        line=cached,
    )
    if lines is not None:
        lines.clear()
        lines.update(fresh)
    return text


def log_over(journal: Journal, entries: int, size: int) -> bool:
    """Whether a LOG of ``entries`` live entries and ``size`` bytes is due for compaction."""
    return entries > journal.config.log_max_entries or size > journal.config.log_max_bytes


def compact_log(journal: Journal, *, force: bool) -> LogCompaction | None:
    """Compact the live log (``force``: whatever its size); None when nothing was compacted.

    After close a due compaction (``force=False``) runs inline in a LOG.md job,
    under the journal lock of the caller that logged: it must not wait for
    ``_compact_lock`` (held by a compaction that waits for the journal lock),
    so it is skipped when another thread compacts; that compaction's own LOG.md
    job checks the threshold again when it ends.
    """
    if not force and journal._views.closed:
        if not journal._compact_lock.acquire(blocking=False):
            return None
        try:
            return _compact_locked(journal, force=False)
        finally:
            journal._compact_lock.release()
    with journal._compact_lock:
        return _compact_locked(journal, force=force)


def _compact_locked(journal: Journal, *, force: bool) -> LogCompaction | None:
    """:func:`compact_log` with ``_compact_lock`` held."""
    with journal._lock:
        live = list(journal._live)
        previous = journal._compaction
    size_before = len(render(journal, live, previous).encode("utf-8", "surrogatepass"))
    if not force and not log_over(journal, len(live), size_before):
        return None  # a compaction in between already did it
    keep = journal.config.log_keep_entries
    old = live[: len(live) - keep] if keep else live
    if not old:
        return None
    return _compact(journal, old, previous, size_before)


def _compact(
    journal: Journal, old: list[LogRecord], previous: LogCompaction | None, size_before: int
) -> LogCompaction:
    t0 = time.perf_counter()
    msgs: list[Msg] = []
    if previous is not None:
        msgs.append(Msg.system(previous.summary, actormem="summary"))
    msgs += [Msg.assistant(f"[{e.entry_type}] {e.content}", name=e.entry_type.lower()) for e in old]
    summary = journal._summarizer.summarize(
        msgs, target_tokens=journal.config.summary_tokens, instruction=_LOG_INSTRUCTION
    )
    if summary.fallback:
        journal._publish(
            ModelFallback(
                source="journal",
                component="journal.compaction",
                error=summary.error,
                fallback=summary.summarizer,
            )
        )
    body = summary.text.strip() or "\n".join(f"- {clip(e.content, 120)}" for e in old[-20:])
    first, last = old[0], old[-1]
    header = (
        f"Activity log of {journal.label}, entries #{first.seq}-#{last.seq} "
        f"({stamp(first.ts)} to {stamp(last.ts)}):"
    )
    text = f"{header}\n{body}"
    sources = [e.id for e in old] + ([previous.summary_id] if previous else [])
    store = journal._store
    result = store.add_many(
        journal.namespace,
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
    with journal._lock:
        rest = journal._live[len(old) :]
    preview = LogCompaction(
        id="",
        namespace=journal.namespace,
        ts=journal.config.clock(),
        entries=len(old),
        first_seq=first.seq,
        last_seq=last.seq,
        summary_id=result.id,
        summary=text,
    )
    after = len(render(journal, rest, preview).encode("utf-8", "surrogatepass"))
    comp = store.log_compact(
        journal.namespace,
        [e.id for e in old],
        summary_id=result.id,
        summary=text,
        summarizer=summary.summarizer,
        bytes_before=size_before,
        bytes_after=after,
    )
    with journal._lock:
        # Only a compaction drops live entries, and one runs at a time: the
        # entries taken are still the first ones.
        assert [e.id for e in journal._live[: len(old)]] == [e.id for e in old]
        journal._live = journal._live[len(old) :]
        journal._compaction = comp
        journal._queue_log()
    ms = (time.perf_counter() - t0) * 1e3
    log.info("journal.log_compacted", entries=len(old), summary_id=result.id, ms=round(ms, 1))
    journal._publish(
        LogCompacted(
            source="journal",
            entries=len(old),
            summary_id=result.id,
            compaction_id=comp.id,
            bytes_before=size_before,
            bytes_after=after,
            summarizer=summary.summarizer,
        )
    )
    with journal._day_lock:
        journal._journal_records([result.id], journal.config.clock())
    return comp

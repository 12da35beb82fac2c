"""The file formats of the journal: NOW.md, LOG.md, daily journal lines, MEMORY.md, DREAMS.md,
and the model's ``<working_memory>`` block (:func:`render_context`).

Every file is Markdown a person can read and (for NOW.md and MEMORY.md)
edit.  Renderers are pure functions; parsers are lenient (a hand-edited file
never fails to import, it only loses what it cannot place).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Final

import msgspec

from actormem.store import LogCompaction, LogRecord, MemoryRecord

__all__ = [
    "ENTRY_TYPES",
    "NOW_STATES",
    "MemoryItem",
    "NowStatus",
    "clip",
    "parse_journal_ids",
    "parse_memory_md",
    "parse_now",
    "render_context",
    "render_journal_header",
    "render_journal_line",
    "render_log",
    "render_log_entry",
    "render_memory_md",
    "render_now",
    "stamp",
]

#: The types of LOG entries (seed 002).
ENTRY_TYPES: Final = ("TOOL_USE", "THOUGHT", "USER_FEEDBACK", "ERROR", "SYSTEM")
#: Usual values of ``NowStatus.state`` (a hand edit may use any word).
NOW_STATES: Final = ("idle", "in_flight", "done", "error")

_COMMENT: Final = re.compile(r"<!--.*?-->", re.S)
_ITEM: Final = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(.*)$")
_ID_COMMENT: Final = re.compile(r"<!--\s*id:(\S+?)\s*-->")
_JOURNAL_ID: Final = re.compile(r"id:(\S+) rev:([0-9a-f]{8})")
_SECTIONS: Final = {
    "fact": "Facts",
    "preference": "Preferences",
    "procedure": "Procedures",
    "summary": "Summaries",
}


class NowStatus(msgspec.Struct, frozen=True, kw_only=True):
    """The agent's working status: what it is doing and what comes next (``NOW.md``).

    Attributes:
        objective: The current objective ("" when there is none).
        next_steps: The immediate next steps, in order.
        state: ``idle``, ``in_flight``, ``done`` or ``error`` (a hand edit may
            use another word).
        note: A free note (the error of a failed attempt, who edited the file, ...).
        updated_at: Unix time of the last change.
    """

    objective: str = ""
    next_steps: tuple[str, ...] = ()
    state: str = "idle"
    note: str = ""
    updated_at: float = 0.0


class MemoryItem(msgspec.Struct, frozen=True, kw_only=True):
    """One line of ``MEMORY.md``: a durable piece of knowledge and its memory id."""

    text: str
    kind: str = "fact"
    memory_id: str | None = None


def stamp(ts: float, fmt: str = "%Y-%m-%d %H:%M:%S") -> str:
    """Local time of ``ts`` in ``fmt``."""
    return dt.datetime.fromtimestamp(ts).strftime(fmt)


def clip(text: str, limit: int) -> str:
    """``text`` on one line (whitespace collapsed), at most ``limit`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: max(limit - 1, 0)].rstrip() + "…"


def _strip_comments(text: str) -> str:
    return _COMMENT.sub("", text)


def _sections(text: str) -> tuple[list[str], dict[str, list[str]]]:
    """Lines before the first ``##`` heading, and the lines of each ``##`` section."""
    head: list[str] = []
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("## "):
            current = sections.setdefault(line[3:].strip().lower(), [])
        elif current is None:
            head.append(line)
        else:
            current.append(line)
    return head, sections


# -- NOW.md ------------------------------------------------------------------------------


def render_now(now: NowStatus, label: str) -> str:
    """The text of ``NOW.md``."""
    lines = [
        f"# NOW — {label}",
        "",
        "<!-- actormem NOW.md: the current objective and next steps, read before every",
        "     model call. The record is in DuckDB; a hand edit of this file is detected",
        "     and imported. -->",
        "",
        "## Objective",
        now.objective or "(none)",
        "",
        "## Next steps",
    ]
    lines += [f"{i}. {step}" for i, step in enumerate(now.next_steps, 1)] or ["(none)"]
    when = stamp(now.updated_at) if now.updated_at else "never"
    lines += ["", "## Status", f"{now.state} · updated {when}"]
    if now.note:
        lines.append(now.note)
    return "\n".join(lines) + "\n"


def parse_now(text: str, *, updated_at: float = 0.0) -> NowStatus:
    """Read a (possibly hand-edited) ``NOW.md``.

    Sections ``## Objective``, ``## Next steps`` and ``## Status`` are read when
    present; without an objective section the first plain line is the
    objective.  ``(none)`` means empty.
    """
    head, sections = _sections(_strip_comments(text))

    def plain(lines: Iterable[str]) -> list[str]:
        return [ln.strip() for ln in lines if ln.strip() and ln.strip() != "(none)"]

    if "objective" in sections:
        objective = " ".join(plain(sections["objective"]))
    else:
        objective = next((ln for ln in plain(head) if not ln.startswith("#")), "")
    steps: list[str] = []
    for line in plain(sections.get("next steps", [])):
        m = _ITEM.match(line)
        steps.append((m.group(1) if m else line).strip())
    state, note = "in_flight" if objective else "idle", ""
    status = plain(sections.get("status", []))
    if status:
        word = status[0].split("·")[0].strip().split()
        if word:
            state = word[0].lower()
        note = " ".join(status[1:])
    return NowStatus(
        objective=objective,
        next_steps=tuple(s for s in steps if s),
        state=state,
        note=note,
        updated_at=updated_at,
    )


# -- LOG.md ------------------------------------------------------------------------------


def render_log_entry(entry: LogRecord, limit: int = 400) -> str:
    """One ``LOG.md`` line: time, type, text (one line) and ``#seq``."""
    return f"- {stamp(entry.ts)} · {entry.entry_type} · {clip(entry.content, limit)} · #{entry.seq}"


def render_log(
    entries: Sequence[LogRecord],
    compaction: LogCompaction | None,
    label: str,
    *,
    max_entries: int,
    max_bytes: int,
    line: Callable[[LogRecord], str] = render_log_entry,
) -> str:
    """The text of ``LOG.md``: the latest compaction summary first, then the live entries.

    ``line`` renders one entry (the journal's view writer keeps them cached).
    """
    lines = [
        f"# LOG — {label}",
        "",
        "<!-- actormem LOG.md: append-only activity log, oldest first. The record is DuckDB",
        f"     (activity_log). Past {max_entries} entries or {max_bytes:,} bytes, older entries",
        "     are summarized into a long-term memory and the summary comes first. -->",
        "",
    ]
    if compaction is not None:
        lines += [
            f"## Summary of entries #1-#{compaction.last_seq} "
            f"(compacted {stamp(compaction.ts)}) · memory {compaction.summary_id}",
            compaction.summary.strip(),
            "",
        ]
    lines.append("## Entries")
    lines += [line(e) for e in entries]
    return "\n".join(lines) + "\n"


# -- daily journal ---------------------------------------------------------------------------


def render_journal_header(day: str, label: str) -> str:
    """The first lines of a day's journal file."""
    return (
        f"# Journal {day} — {label}\n\n"
        "<!-- what the long-term memory committed this day. Each line ends with the memory id\n"
        "     (`actormem memories search`, store.get) and a revision of its content. -->\n\n"
    )


def render_journal_line(
    rec: MemoryRecord, ts: float, *, limit: int, op: str = "", rev: str = ""
) -> str:
    """One journal line: time, kind (and what happened), the content, ``id:... rev:...``."""
    what = rec.kind if not op else f"{rec.kind} ({op})"
    revision = rev or rec.content_hash[:8]
    return (
        f"- {stamp(ts, '%H:%M:%S')} · {what} · {clip(rec.content, limit)} · "
        f"id:{rec.id} rev:{revision}"
    )


def parse_journal_ids(text: str) -> list[tuple[str, str]]:
    """``(memory_id, rev)`` of every journal line in ``text``, in order."""
    return [(m.group(1), m.group(2)) for m in _JOURNAL_ID.finditer(text)]


# -- MEMORY.md ---------------------------------------------------------------------------------


def render_memory_md(items: Sequence[MemoryItem], label: str, updated_at: float) -> str:
    """The text of ``MEMORY.md``: durable knowledge grouped by kind, each line with its id."""
    lines = [
        f"# MEMORY — {label}",
        "",
        f"<!-- actormem MEMORY.md: durable knowledge, rewritten by deep dream "
        f"({stamp(updated_at)}).",
        "     Edit freely: a changed line updates its memory, a new line becomes a pinned memory,",
        "     a removed line leaves MEMORY.md (the memory stays in the store). Keep the id",
        "     comments. -->",
    ]
    by_kind: dict[str, list[MemoryItem]] = {}
    for item in items:
        by_kind.setdefault(item.kind, []).append(item)
    order = [k for k in _SECTIONS if k in by_kind] + sorted(
        k for k in by_kind if k not in _SECTIONS
    )
    for kind in order:
        lines += ["", f"## {_SECTIONS.get(kind, kind.title())}"]
        for item in by_kind[kind]:
            tail = f" <!-- id:{item.memory_id} -->" if item.memory_id else ""
            lines.append(f"- {clip(item.text, 2_000)}{tail}")
    if not items:
        lines += ["", "(nothing durable yet)"]
    return "\n".join(lines) + "\n"


def parse_memory_md(text: str) -> list[MemoryItem]:
    """The items of a (possibly hand-edited) ``MEMORY.md``.

    A list item is one piece of knowledge; ``<!-- id:... -->`` names its
    memory; the ``##`` section above it gives its kind (Facts, Preferences,
    Procedures, Summaries; anything else is a fact).
    """
    reverse = {title.lower(): kind for kind, title in _SECTIONS.items()}
    kind = "fact"
    items: list[MemoryItem] = []
    for line in text.splitlines():
        if line.startswith("## "):
            kind = reverse.get(line[3:].strip().lower(), "fact")
            continue
        m = _ITEM.match(line)
        if not m:
            continue
        body = m.group(1)
        idm = _ID_COMMENT.search(body)
        content = " ".join(_strip_comments(body).split())
        if content:
            items.append(
                MemoryItem(text=content, kind=kind, memory_id=idm.group(1) if idm else None)
            )
    return items


def render_context(
    now: NowStatus,
    live: Sequence[LogRecord],
    total: int,
    budget: int,
    count: Callable[[str], int],
) -> str:
    """The ``<working_memory>`` block: NOW and as many of the latest ``live`` entries as fit.

    Args:
        now: The working status.
        live: The latest live entries, oldest first.
        total: How many live entries there are in all.
        budget: The block's size in tokens, as ``count`` measures them.
        count: The token counter.
    """
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

    # The estimate adds up over lines joined by newlines (give or take a
    # rounding), so lines are picked by their own cached counts and the
    # block is counted once; if rounding tipped it over, lines are dropped.
    note = count(render(["-"])) - count("\n".join(head + tail)) - count("-")
    used = count("\n".join(head + tail)) + note
    lines: list[str] = []
    for e in reversed(live):
        line = f"- {stamp(e.ts, '%H:%M:%S')} {e.entry_type}: {clip(e.content, 200)}"
        used += count(line) + 1
        if used > budget:
            break
        lines.insert(0, line)
    while lines and count(render(lines)) > budget:
        lines.pop(0)
    return render(lines)

"""``actormem journal`` and ``actormem dream``: read an agent's files, run a deep dream."""

from __future__ import annotations

import argparse
import datetime as dt
import json
from pathlib import Path

import msgspec
from rich.console import Console
from rich.text import Text

from actormem._cli_chat import UsageError as _UsageError
from actormem._cli_memories import open_db as _open_db
from actormem.journal._files import read_text as read_journal_text
from actormem.journal._paths import check_inside

__all__ = ["cmd_dream", "cmd_journal"]


def _journal_folder(args: argparse.Namespace) -> Path:
    from actormem.journal import namespace_folder
    from actormem.store import Namespace

    ns = Namespace(user_id=args.user, agent_id=args.agent, run_id=args.run)
    return namespace_folder(args.memory_dir, ns)


def cmd_journal(args: argparse.Namespace, console: Console) -> int:
    """Read the agent's files (they are plain views: no database lock is taken)."""
    from actormem.journal import day_name, parse_memory_md, parse_now

    folder = _journal_folder(args)
    if not folder.is_dir():
        raise _UsageError(f"no journal folder {folder} (check --memory-dir, --user and --agent)")
    what = dt.date.today().isoformat() if args.action == "today" else args.what or "overview"
    files = {"now": "NOW.md", "log": "LOG.md", "memory": "MEMORY.md", "dreams": "DREAMS.md"}
    if what in files:
        path = folder / files[what]
    elif what == "overview":
        days = sorted(p.stem for p in (folder / "memory").glob("*.md"))
        # read_text refuses a FIFO or other special file (it would block forever).
        now_text = read_journal_text(check_inside(folder, folder / "NOW.md"))
        now = parse_now(now_text) if now_text is not None else None
        memory_text = read_journal_text(check_inside(folder, folder / "MEMORY.md"))
        memory = parse_memory_md(memory_text) if memory_text is not None else []
        if args.json:
            print(
                json.dumps(
                    {
                        "folder": str(folder),
                        "now": msgspec.to_builtins(now) if now else None,
                        "days": days,
                        "memory_items": len(memory),
                    }
                )
            )
            return 0
        console.print(Text(str(folder), "bold"))
        if now is not None:
            console.print(f"NOW ({now.state}): {now.objective or '(none)'}")
            for i, step in enumerate(now.next_steps, 1):
                console.print(f"  {i}. {step}", highlight=False)
        console.print(f"journal days: {', '.join(days[-7:]) or 'none'}")
        console.print(f"MEMORY.md: {len(memory)} item(s)")
        return 0
    else:
        path = folder / "memory" / f"{day_name(what)}.md"
    # A symlink leading out of the agent's folder is refused (JournalPathError),
    # as the journal and the UI refuse it; read_text refuses a FIFO.
    text = read_journal_text(check_inside(folder, path))
    if text is None:
        raise _UsageError(f"no {path.name} in {folder}")
    if args.json:
        print(json.dumps({"path": str(path), "text": text}))
    else:
        console.print(text, highlight=False, markup=False)
    return 0


def cmd_dream(args: argparse.Namespace, console: Console) -> int:
    """Run one deep dream on a store (on a DuckDB file the agent must not be running:
    DuckDB has one writer process; on PostgreSQL it may)."""
    from actormem.journal import Journal, JournalConfig
    from actormem.store import Namespace

    ns = Namespace(user_id=args.user, agent_id=args.agent, run_id=args.run)
    config = JournalConfig(memory_dir=args.memory_dir)
    with _open_db(args.db) as store:
        journal = Journal(store, ns, config, args.memory_dir)
        try:
            report = journal.dream(args.lookback, force=args.force)
        finally:
            journal.close()  # its LOG.md entry is written before the store closes
    if args.json:
        print(json.dumps(msgspec.to_builtins(report)))
        return 0
    if report.skipped:
        console.print(f"nothing new since the last dream; {report.path} is unchanged")
        return 0
    console.print(
        f"dream ({report.dreamer}): {report.changes} change(s) — {len(report.promoted)} promoted, "
        f"{len(report.dropped)} dropped, {len(report.merged)} merged; "
        f"MEMORY.md holds {report.items} item(s)\n{report.path}"
    )
    return 0

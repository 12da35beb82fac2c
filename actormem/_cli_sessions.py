"""``actormem sessions``: list, show or delete saved sessions (files or PostgreSQL)."""

from __future__ import annotations

import argparse
import datetime as dt
import json

from rich.console import Console
from rich.table import Table
from rich.text import Text

from actormem._cli_chat import UsageError as _UsageError
from actormem.session import JsonSession, SessionStorage, open_sessions

__all__ = ["cmd_sessions"]


def _storage_name(session: SessionStorage) -> str:
    if isinstance(session, JsonSession):
        return str(session.directory)
    return f"{getattr(session, 'url', session)} (table {getattr(session, 'table', '?')})"


def cmd_sessions(args: argparse.Namespace, console: Console) -> int:
    session = open_sessions(args.sessions or args.dir)
    try:
        return _sessions(args, console, session)
    finally:
        session.close()


def _sessions(args: argparse.Namespace, console: Console, session: SessionStorage) -> int:
    where = _storage_name(session)
    if args.action == "list":
        infos = session.list()
        if args.json:
            print(
                json.dumps(
                    [
                        {
                            "session_id": i.session_id,
                            "path": i.path,
                            "bytes": i.nbytes,
                            "modified_at": i.modified_at,
                            "version": i.version,
                        }
                        for i in infos
                    ]
                )
            )
            return 0
        table = Table(title=f"sessions in {where}")
        versioned = any(i.version is not None for i in infos)
        for col in ("session", "bytes", "modified", *(("version",) if versioned else ())):
            table.add_column(col)
        for i in infos:
            when = dt.datetime.fromtimestamp(i.modified_at).strftime("%Y-%m-%d %H:%M:%S")
            row = [i.session_id, f"{i.nbytes:,}", when]
            table.add_row(*row, *((str(i.version),) if versioned else ()))
        console.print(table if infos else f"no sessions in {where}")
        return 0
    if not args.session_id:
        raise _UsageError(f"sessions {args.action} needs a session id")
    if args.action == "show":
        comps = session.read(args.session_id)
        if args.json:
            print(json.dumps(comps, default=str))
            return 0
        stm = comps.get("runtime", {}).get("short_term", {})
        msgs = stm.get("messages", []) if isinstance(stm, dict) else []
        console.print(
            Text.assemble("session ", (args.session_id, "bold"), f": components {sorted(comps)}")
        )
        table = Table(title=f"{len(msgs)} short-term message(s)")
        table.add_column("#", justify="right")
        table.add_column("role")
        table.add_column("content")
        for idx, m in enumerate(msgs):
            texts = [
                b.get("text") or b.get("output") or b.get("preview") or f"{b.get('name')}()"
                for b in m.get("content", [])
            ]
            table.add_row(str(idx), str(m.get("role")), " | ".join(str(t) for t in texts)[:200])
        console.print(table)
        return 0
    if args.action == "delete":
        if not session.delete(args.session_id):
            raise _UsageError(f"no session {args.session_id!r} in {where}")
        console.print(f"deleted session {args.session_id!r}")
        return 0
    raise _UsageError(f"unknown sessions action {args.action!r}")

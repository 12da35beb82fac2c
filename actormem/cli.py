"""The ``actormem`` command: the offline demo and session tools.

Errors print as one line (``actormem: error: ...``) and exit 2; ``--debug``
shows the traceback.  ``--json`` gives machine-readable output where a
script would want it.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from actormem.events import (
    ActorRestarted,
    Event,
    MemoryCleared,
    MessageAdded,
    MessagesDeleted,
    MessagesReplaced,
    SessionLoaded,
    SessionSaved,
)
from actormem.logs import configure_logging
from actormem.messages import Msg, ToolUseBlock
from actormem.runtime import MemoryRuntime
from actormem.session import DEFAULT_SESSIONS_DIR, JsonSession

__all__ = ["main"]


def _describe(e: Event) -> str:
    match e:
        case MessageAdded(msg=m, version=v):
            what = m.text.replace("\n", " ")[:38] or ", ".join(f"{t.name}()" for t in m.tool_uses)
            return f"v{v} {m.role:<9} {what}"
        case MessagesDeleted(ids=ids, version=v):
            return f"v{v} deleted {len(ids)} message(s)"
        case MemoryCleared(count=n, version=v):
            return f"v{v} cleared {n} message(s)"
        case MessagesReplaced(removed_ids=r, added_ids=a, version=v, reason=why):
            return f"v{v} replaced {len(r)} message(s) with {len(a)} ({why})"
        case SessionSaved(session_id=sid, nbytes=n, duration_ms=ms):
            return f"saved session {sid!r}: {n:,} bytes in {ms:.2f} ms"
        case SessionLoaded(session_id=sid, found=f, duration_ms=ms):
            return f"loaded session {sid!r} (found={f}) in {ms:.2f} ms"
        case ActorRestarted(actor=a, error=err):
            return f"actor {a} restarted after {err}"
    return type(e).__name__


class _EventPrinter:
    """Prints events as they stream (called on the subscription's thread)."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.count = 0
        self.lock = threading.Lock()

    def __call__(self, e: Event) -> None:
        with self.lock:
            self.count += 1
            self.console.print(
                f"  [dim]event[/dim] [cyan]{type(e).__name__:<17}[/cyan] "
                f"[magenta]{e.source:<10}[/magenta] {_describe(e)}",
                highlight=False,
            )

    def settle(self, expected: int, timeout: float = 2.0) -> None:
        end = time.monotonic() + timeout
        while self.count < expected and time.monotonic() < end:
            time.sleep(0.01)


def _conversation() -> list[Msg]:
    call = ToolUseBlock(id="call_weather_1", name="get_weather", input={"city": "Lisbon"})
    return [
        Msg.system("You are a helpful travel assistant."),
        Msg.user("Hi! I'm Ada. I'm flying to Lisbon on 14 March.", name="ada"),
        Msg.assistant(
            "Nice to meet you, Ada. Let me check the weather in Lisbon.", tool_calls=[call]
        ),
        Msg.tool_result("call_weather_1", "Lisbon, 14 March: 19°C, sunny", name="get_weather"),
        Msg.assistant("It will be 19°C and sunny in Lisbon on 14 March."),
        Msg.user("Great. Remember that I prefer window seats."),
        Msg.assistant("Noted: you prefer window seats."),
    ]


def cmd_demo(args: argparse.Namespace, console: Console) -> int:
    """Offline walkthrough: stream events, save a session, restore it in a fresh runtime."""
    folder = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="actormem-demo-"))
    console.rule("[bold]actormem demo[/bold] — memory as actors, everything a stream")
    console.print(f"session folder: [bold]{folder}[/bold]\n")

    console.print("[bold]1. A runtime starts its actors; we subscribe to its event stream.[/bold]")
    printer = _EventPrinter(console)
    with MemoryRuntime(session_dir=folder) as rt:
        rt.events.subscribe(printer)
        convo = _conversation()
        console.print(f"\n[bold]2. The agent adds a {len(convo)}-message conversation.[/bold]")
        for m in convo:
            rt.add(m)
        printer.settle(len(convo))
        console.print(f"   short-term memory holds {rt.size()} messages")

        console.print(
            "\n[bold]3. The session is saved atomically (temp file, fsync, rename).[/bold]"
        )
        path = rt.save_session(args.session)
        printer.settle(len(convo) + 1)
        console.print(f"   wrote {path}")

    console.print("\n[bold]4. A fresh runtime (think: the process restarted) restores it.[/bold]")
    printer2 = _EventPrinter(console)
    with MemoryRuntime(session_dir=folder) as rt2:
        rt2.events.subscribe(printer2)
        found = rt2.load_session(args.session)
        printer2.settle(2)
        table = Table(title=f"restored session {args.session!r} (found={found})", show_lines=False)
        table.add_column("#", justify="right")
        table.add_column("role")
        table.add_column("content")
        for i, m in enumerate(rt2.messages()):
            content = m.text or ", ".join(f"{t.name}({json.dumps(t.input)})" for t in m.tool_uses)
            table.add_row(str(i), m.role, content)
        console.print(table)
        same = [m.id for m in rt2.messages()] == [m.id for m in convo]
        console.print(f"   every message restored with its id: [bold]{same}[/bold]")
    console.rule("done")
    return 0 if same else 1


def cmd_sessions(args: argparse.Namespace, console: Console) -> int:
    session = JsonSession(args.dir)
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
                        }
                        for i in infos
                    ]
                )
            )
            return 0
        table = Table(title=f"sessions in {session.directory}")
        for col in ("session", "bytes", "modified"):
            table.add_column(col)
        for i in infos:
            when = dt.datetime.fromtimestamp(i.modified_at).strftime("%Y-%m-%d %H:%M:%S")
            table.add_row(i.session_id, f"{i.nbytes:,}", when)
        console.print(table if infos else f"no sessions in {session.directory}")
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
        console.print(f"session [bold]{args.session_id}[/bold]: components {sorted(comps)}")
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
            raise _UsageError(f"no session {args.session_id!r} in {session.directory}")
        console.print(f"deleted session {args.session_id!r}")
        return 0
    raise _UsageError(f"unknown sessions action {args.action!r}")


class _UsageError(Exception):
    pass


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="actormem", description="A memory runtime for LLM agents.")
    p.add_argument("--debug", action="store_true", help="show tracebacks and debug logs")
    sub = p.add_subparsers(dest="command", required=True)

    d = sub.add_parser("demo", help="offline walkthrough of the memory runtime")
    d.add_argument("--dir", help="session folder (default: a new temporary folder)")
    d.add_argument("--session", default="demo", help="session id to save and restore")
    d.set_defaults(func=cmd_demo)

    s = sub.add_parser("sessions", help="list, show or delete JSON session files")
    s.add_argument("action", choices=["list", "show", "delete"])
    s.add_argument("session_id", nargs="?")
    s.add_argument(
        "--dir", default=DEFAULT_SESSIONS_DIR, help="session folder (default: sessions/)"
    )
    s.add_argument("--json", action="store_true", help="JSON output")
    s.set_defaults(func=cmd_sessions)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``actormem`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    configure_logging("DEBUG" if args.debug else "WARNING")
    console = Console(highlight=False)
    try:
        rc: Any = args.func(args, console)
        return int(rc)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        if args.debug:
            raise
        print(f"actormem: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

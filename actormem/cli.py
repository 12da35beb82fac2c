"""The ``actormem`` command: its parser and entry point.

Each command lives in a private module of its own (``_cli_demo``,
``_cli_sessions``, ``_cli_memories``, ``_cli_journal``, ``_cli_ui``,
``_cli_chat``): in one file they had grown past 900 lines, and a command's
code is read with its own concerns, not beside the others'.

Errors print as one line (``actormem: error: ...``) and exit 2; ``--debug``
shows the traceback.  ``--json`` gives machine-readable output where a
script would want it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from actormem._cli_chat import _LOG_STREAM, cmd_chat
from actormem._cli_demo import cmd_demo
from actormem._cli_embedder import EMBEDDER_HELP
from actormem._cli_journal import cmd_dream, cmd_journal
from actormem._cli_memories import DB_HELP, cmd_memories
from actormem._cli_sessions import cmd_sessions
from actormem._cli_ui import cmd_ui
from actormem.logs import configure_logging
from actormem.session import DEFAULT_SESSIONS_DIR

__all__ = ["main"]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="actormem", description="A memory runtime for LLM agents.")
    p.add_argument("--debug", action="store_true", help="show tracebacks and debug logs")
    sub = p.add_subparsers(dest="command", required=True)

    d = sub.add_parser("demo", help="offline walkthrough of the memory runtime")
    d.add_argument("--dir", help="session folder (default: a new temporary folder)")
    d.add_argument("--session", default="demo", help="session id to save and restore")
    d.set_defaults(func=cmd_demo)

    s = sub.add_parser("sessions", help="list, show or delete saved sessions (files or PostgreSQL)")
    s.add_argument("action", choices=["list", "show", "delete"])
    s.add_argument("session_id", nargs="?")
    s.add_argument(
        "--dir", default=DEFAULT_SESSIONS_DIR, help="session folder (default: sessions/)"
    )
    s.add_argument(
        "--sessions",
        metavar="DSN",
        help="sessions in PostgreSQL instead of --dir: postgresql://user@host:port/db",
    )
    s.add_argument("--json", action="store_true", help="JSON output")
    s.set_defaults(func=cmd_sessions)

    m = sub.add_parser(
        "memories", help="search and analyse a long-term memory store (DuckDB or PostgreSQL)"
    )
    m.add_argument(
        "action", choices=["search", "stats", "timeline", "export", "import", "forget", "reembed"]
    )
    m.add_argument("query", nargs="?", help="search: the query")
    m.add_argument("--db", default="actormem.duckdb", help=DB_HELP)
    m.add_argument("--user", help="namespace: user id")
    m.add_argument("--agent", help="namespace: agent id")
    m.add_argument("--run", help="namespace: run id")
    m.add_argument("--limit", type=int, default=10, help="search: number of hits")
    m.add_argument("--path", help="export/import: a .parquet or .jsonl file")
    m.add_argument("--force", action="store_true", help="export: overwrite PATH")
    m.add_argument("--yes", action="store_true", help="forget: confirm")
    m.add_argument("--embedder", help=EMBEDDER_HELP)
    m.add_argument("--json", action="store_true", help="JSON output")
    m.set_defaults(func=cmd_memories)

    def namespace_args(q: argparse.ArgumentParser) -> None:
        q.add_argument(
            "--memory-dir",
            default=str(Path(DEFAULT_SESSIONS_DIR) / "memory"),
            help="root of the agents' folders (default: sessions/memory)",
        )
        q.add_argument("--user", default="default", help="namespace: user id (default: default)")
        q.add_argument("--agent", default="agent", help="namespace: agent id (default: agent)")
        q.add_argument("--run", help="namespace: run id")
        q.add_argument("--json", action="store_true", help="JSON output")

    j = sub.add_parser("journal", help="read an agent's NOW, LOG, daily journal and MEMORY files")
    j.add_argument("action", choices=["show", "today"])
    j.add_argument(
        "what",
        nargs="?",
        help="show: now, log, memory, dreams or a day YYYY-MM-DD (default: an overview)",
    )
    namespace_args(j)
    j.set_defaults(func=cmd_journal)

    dr = sub.add_parser("dream", help="deep dream: consolidate memory and rewrite MEMORY.md")
    dr.add_argument("--db", default="actormem.duckdb", help=DB_HELP)
    dr.add_argument("--lookback", type=int, default=None, help="journal days to read (default 7)")
    dr.add_argument("--force", action="store_true", help="dream even if nothing changed")
    namespace_args(dr)
    dr.set_defaults(func=cmd_dream)

    u = sub.add_parser("ui", help="memory explorer: a local web page over a store")
    u.add_argument("--db", default="actormem.duckdb", help=DB_HELP)
    u.add_argument(
        "--memory-dir",
        default=str(Path(DEFAULT_SESSIONS_DIR) / "memory"),
        help="root of the agents' journal folders (default: sessions/memory)",
    )
    u.add_argument("--host", default="127.0.0.1", help="interface (default: 127.0.0.1 only)")
    u.add_argument("--port", type=int, default=8765, help="TCP port (default 8765; 0: any)")
    u.add_argument(
        "--token", help="access token (default: a random one when --host is not loopback)"
    )
    u.add_argument(
        "--allow-edits", action="store_true", help="allow delete, pin and forget from the page"
    )
    u.set_defaults(func=cmd_ui)

    c = sub.add_parser(
        "chat", help="chat with a memory-backed agent on any OpenAI-compatible server"
    )
    c.add_argument("--base-url", required=True, help="e.g. http://localhost:11434/v1")
    c.add_argument("--model", required=True, help="model name on that server")
    c.add_argument("--api-key", help="API key (default: $OPENAI_API_KEY)")
    c.add_argument("--session", help="session id: resume it if it exists, save it each turn")
    c.add_argument(
        "--dir", default=DEFAULT_SESSIONS_DIR, help="session folder (default: sessions/)"
    )
    c.add_argument(
        "--sessions",
        metavar="DSN",
        help="keep sessions in PostgreSQL instead of --dir: postgresql://user@host:port/db",
    )
    c.add_argument("--db", default="actormem.duckdb", help=DB_HELP)
    c.add_argument("--user", default="default", help="namespace user id")
    c.add_argument(
        "--mode",
        choices=["static", "agent", "both"],
        default="both",
        help="long-term memory mode (default: both)",
    )
    c.add_argument(
        "--system",
        default="You are a helpful assistant with long-term memory.",
        help="system prompt",
    )
    c.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        help="limit in seconds for each model call, all retries included (default 60)",
    )
    c.add_argument(
        "--max-tokens",
        type=int,
        default=1024,
        help="longest reply in tokens, sent as max_tokens (default 1024; 0: the server's)",
    )
    c.add_argument("--temperature", type=float, help="sampling temperature (0-2)")
    c.add_argument(
        "--extra-body",
        metavar="JSON",
        help='more request fields as a JSON object, e.g. \'{"top_p": 0.9, "seed": 1}\'',
    )
    c.set_defaults(func=cmd_chat)
    return p


#: Each command's optional positional after its action (``memories search QUERY``).
_OPERAND: dict[str, str] = {"memories": "query", "sessions": "session_id", "journal": "what"}


def _parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """``parser``'s arguments, with a command's operand accepted after its options.

    argparse fills a command's positionals from the words before its first
    option, so ``memories search --user ada "cats"`` left the query empty and
    refused ``"cats"`` as unrecognized.  A single word left over that way is
    the operand; anything else is still refused as argparse would.
    """
    args, extras = parser.parse_known_args(argv)
    dest = _OPERAND.get(args.command)
    if (
        dest is not None
        and getattr(args, dest) is None
        and len(extras) == 1
        and not extras[0].startswith("-")
    ):
        setattr(args, dest, extras.pop())
    if extras:
        parser.error(f"unrecognized arguments: {' '.join(extras)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``actormem`` console script."""
    parser = build_parser()
    args = _parse(parser, argv)
    configure_logging(
        "DEBUG" if args.debug else "WARNING",
        stream=_LOG_STREAM if args.command == "chat" else None,  # type: ignore[arg-type]
    )
    # Memory content, model replies, ids and journal text reach the terminal:
    # Rich must not read "[/b]" in them as markup (it raised and ended the
    # command) nor ":warning:" as an emoji.  Styles are given as Text objects.
    # The demo prints only its own text and keeps markup.
    console = Console(
        highlight=False,
        markup=args.command == "demo",
        emoji=False,
        width=None if sys.stdout.isatty() else 120,
    )
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

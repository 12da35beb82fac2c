"""The ``actormem`` command: the offline demo and session tools.

Errors print as one line (``actormem: error: ...``) and exit 2; ``--debug``
shows the traceback.  ``--json`` gives machine-readable output where a
script would want it.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec
from rich.console import Console
from rich.table import Table

from actormem._cli_chat import _LOG_STREAM, cmd_chat
from actormem._cli_chat import UsageError as _UsageError
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
from actormem.journal._files import read_text as read_journal_text
from actormem.logs import configure_logging
from actormem.messages import Msg, ToolUseBlock
from actormem.runtime import MemoryRuntime
from actormem.session import DEFAULT_SESSIONS_DIR, JsonSession, SessionStorage, open_sessions

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

    ok = _demo_compression(console, folder)
    ok = _demo_long_term(console, folder) and ok
    ok = _demo_journal(console, folder) and ok
    console.rule("done")
    return 0 if same and ok else 1


def _memory_reader(messages: Sequence[Msg], tools: Any) -> Msg | str:
    """The demo's scripted model: answers from the injected long-term memory block."""
    import re

    question = next((m.text for m in reversed(messages) if m.role == "user"), "")
    memory = "\n".join(m.text for m in messages if "<long_term_memory>" in m.text)
    if "where do i live" in question.lower():
        places = re.findall(r"User lives in ([A-Z][a-z]+)", memory)
        return f"You live in {places[0]}." if places else "I don't know where you live."
    if "allergic to?" in question.lower():
        found = re.findall(r"User is allergic to ([a-z ]+)", memory)
        return f"You are allergic to {found[0].strip()}." if found else "I don't know."
    return "Noted."


def _demo_long_term(console: Console, folder: Path) -> bool:
    from actormem.agent import ReActAgent
    from actormem.events import FactReconciled, MemoryRecorded, MemoryRetrieved
    from actormem.models.scripted import ScriptedModel
    from actormem.store import Namespace

    console.print(
        "\n[bold]6. Long-term memory (STATIC_CONTROL): session 1 tells the agent facts; "
        "a new process recalls them from DuckDB.[/bold]"
    )
    db = folder / "long_term.duckdb"
    ns = Namespace(user_id="ada", agent_id="demo")

    def show(e: Event) -> None:
        if isinstance(e, MemoryRecorded):
            console.print(
                f"  [dim]event[/dim] [cyan]MemoryRecorded[/cyan]   {e.turns} turn(s): "
                f"{e.added} added, {e.updated} updated ({e.duration_ms:.1f} ms)",
                highlight=False,
            )
        elif isinstance(e, FactReconciled):
            console.print(
                f"  [dim]event[/dim] [cyan]FactReconciled[/cyan]   {e.op}: {e.old!r} -> {e.new!r}",
                highlight=False,
            )
        elif isinstance(e, MemoryRetrieved):
            console.print(
                f"  [dim]event[/dim] [cyan]MemoryRetrieved[/cyan]  {e.query!r}: "
                f"{len(e.hit_ids)} hit(s) in {e.latency_ms:.2f} ms",
                highlight=False,
            )

    def session(lines: list[str]) -> list[str]:
        answers = []
        with MemoryRuntime(session_dir=folder, store=db, namespace=ns) as rt:
            rt.subscribe(show, MemoryRecorded, FactReconciled, MemoryRetrieved)
            agent = ReActAgent("demo", ScriptedModel(_memory_reader, cycle=True), rt)
            for line in lines:
                out = agent.reply(line)
                console.print(
                    f"   user> {line}\n   [bold]agent>[/bold] {out.text}", highlight=False
                )
                answers.append(out.text)
            rt.flush()
            time.sleep(0.1)
        return answers

    console.print("   [dim]-- process 1 --[/dim]")
    session(["Hi, my name is Ada. I live in Lisbon.", "I am allergic to peanuts."])
    console.print(
        "   [dim]-- process 2: a fresh runtime, no session loaded (the amnesia test) --[/dim]"
    )
    first = session(["Where do I live?", "What am I allergic to?"])
    console.print("   [dim]-- process 3: a correction; the newer fact wins --[/dim]")
    session(["Actually I live in Porto now."])
    last = session(["Where do I live?"])
    ok = (
        first[0] == "You live in Lisbon."
        and "peanuts" in first[1]
        and last[0] == "You live in Porto."
    )
    console.print(f"   recalled across restarts and corrected: [bold]{ok}[/bold]")
    return ok


def _show_file(
    console: Console, path: Path, *, last: int | None = None, skip: str = "<!--"
) -> None:
    """Print a journal file, indented, without its header comment."""
    lines = (read_journal_text(path) or "").splitlines()
    out, in_comment = [], False
    for line in lines:
        if line.lstrip().startswith(skip) or in_comment:
            in_comment = "-->" not in line
            continue
        if line.strip():
            out.append(line)
    shown = out
    if last is not None and len(out) > last + 1:
        shown = [*out[:1], "…", *out[-last:]]
    for line in shown:
        console.print(f"     [dim]│[/dim] {line[:110]}", highlight=False, soft_wrap=True)


def _demo_journal(console: Console, folder: Path) -> bool:
    from actormem.agent import ReActAgent
    from actormem.journal import JournalConfig
    from actormem.models.scripted import ScriptedModel
    from actormem.store import Namespace

    console.print(
        "\n[bold]7. Human-readable memory: NOW.md, LOG.md, the daily journal and a deep "
        "dream into MEMORY.md.[/bold]"
    )
    ns = Namespace(user_id="ada", agent_id="demo")
    config = JournalConfig(memory_dir=folder / "agents")
    during: list[str] = []
    with MemoryRuntime(
        session_dir=folder, store=folder / "long_term.duckdb", namespace=ns, journal=config
    ) as rt:

        def get_weather(city: str) -> str:
            """The weather forecast of a city.

            Args:
                city: the city.
            """
            during.append(rt.now().objective)
            return f"{city} tomorrow: 17°C, breezy"

        model = ScriptedModel(
            [
                Msg.tool_call("get_weather", {"city": "Porto"}),
                "Pack a light jacket: 17°C and breezy in Porto.",
            ]
        )
        agent = ReActAgent("demo", model, rt, tools=[get_weather])
        question = "What should I pack for my trip to Porto?"
        out = agent.reply(question)
        console.print(f"   user> {question}\n   [bold]agent>[/bold] {out.text}", highlight=False)
        rt.flush()
        assert rt.journal is not None
        folder_name = rt.journal.folder.relative_to(folder)
        console.print(f"   while the tool ran, NOW.md said the objective was: {during[0]!r}")
        console.print(f"   [bold]{folder_name}/NOW.md[/bold] after the turn:")
        _show_file(console, rt.journal.path("NOW.md"))
        console.print(
            f"   [bold]{folder_name}/LOG.md[/bold] (typed entries, DuckDB is the record):"
        )
        _show_file(console, rt.journal.path("LOG.md"), last=5)
        today = rt.journal.today()
        console.print(
            f"   [bold]{folder_name}/memory/{today}.md[/bold] (each line ends with its memory id):"
        )
        _show_file(console, rt.journal.day_path(today), last=4)
        report = rt.dream()
        console.print(
            f"   deep dream: {report.changes} change(s) recorded in the store's history; "
            f"[bold]{folder_name}/MEMORY.md[/bold]:"
        )
        _show_file(console, rt.journal.path("MEMORY.md"))
        again = rt.dream()
        console.print(
            f"   a second dream on the same input is skipped: [bold]{again.skipped}[/bold]"
        )
        ok = (
            during == [question]
            and rt.now().state == "done"
            and report.items > 0
            and again.skipped
            and "Porto" in rt.journal.path("MEMORY.md").read_text()
        )
    console.print(
        "   [dim]try: actormem journal show --memory-dir "
        f"{config.memory_dir} --user ada --agent demo[/dim]"
    )
    return ok


def _long_conversation(n: int) -> list[Msg]:
    cities = ["Lisbon", "Porto", "Madrid", "Seville", "Valencia", "Bilbao"]
    out: list[Msg] = []
    for i in range(n):
        city = cities[i % len(cities)]
        out.append(
            Msg.user(
                f"Day {i + 1}: book a hotel in {city} for {2 + i % 3} nights, budget {80 + i} EUR."
            )
        )
        if i % 3 == 0:
            call = Msg.tool_call("search_hotels", {"city": city, "max_price": 80 + i})
            listing = "\n".join(
                f"{city} hotel #{k}: {60 + k} EUR/night, rating {3 + k % 3}.{k % 10}, breakfast"
                for k in range(60)
            )
            out += [call, Msg.tool_result(call.tool_uses[0].id, listing, name="search_hotels")]
        out.append(
            Msg.assistant(
                f"Booked {city} hotel #{i % 7} at {60 + i % 7} EUR/night (ref BK{1000 + i})."
            )
        )
    return out


def _demo_compression(console: Console, folder: Path) -> bool:
    from actormem.compress import AutoContextConfig
    from actormem.events import CompressionSkipped, ContextCompressed

    console.print(
        "\n[bold]5. AutoContext: a long conversation is compressed live, off the add() path.[/bold]"
    )
    cfg = AutoContextConfig.for_window(8192)
    console.print(
        f"   budget: {cfg.token_budget:,} tokens or {cfg.msg_threshold} messages; "
        f"the last {cfg.keep_last} stay verbatim"
    )
    seen: list[Event] = []

    def show(e: Event) -> None:
        seen.append(e)
        if isinstance(e, ContextCompressed):
            console.print(
                f"  [dim]event[/dim] [cyan]ContextCompressed[/cyan] {e.strategy:<22} "
                f"tokens {e.tokens_before:>6,} -> {e.tokens_after:>6,}  "
                f"({e.messages_replaced} msgs, {e.duration_ms:.1f} ms, "
                f"{e.summarizer or 'no summary'})",
                highlight=False,
            )
        elif isinstance(e, CompressionSkipped):
            console.print(f"  [dim]event[/dim] [yellow]CompressionSkipped[/yellow] {e.reason}")

    convo = _long_conversation(60)
    with MemoryRuntime(session_dir=folder, autocontext=cfg) as rt:
        rt.subscribe(show, ContextCompressed, CompressionSkipped)
        t0 = time.perf_counter()
        for m in convo:
            rt.add(m)
        add_ms = (time.perf_counter() - t0) * 1e3
        rt.compress_now()
        time.sleep(0.2)
        working = rt.messages()
        counter = cfg.token_counter
        before, after = counter.count_msgs(convo), counter.count_msgs(working)
        console.print(
            f"   added {len(convo)} messages in {add_ms:.1f} ms; working context "
            f"{len(working)} messages, {after:,} tokens (from {before:,}: {after / before:.0%})"
        )
        ref = next((m for m in working if "offload_id" in m.metadata), None)
        if ref is None:
            console.print("   [red]nothing was offloaded[/red]")
            return False
        oid = str(ref.metadata["offload_id"])
        console.print(f"   the model sees: [italic]{ref.text[:150]}...[/italic]")
        rt.save_session("demo-long")
    with MemoryRuntime(session_dir=folder, autocontext=cfg) as rt2:
        rt2.load_session("demo-long")
        originals = rt2.reload(oid)
        console.print(
            f"   after a save and restore, context_reload({oid!r}) returns "
            f"{len(originals)} original message(s); the first: "
            f"[italic]{originals[0].text[:80]}[/italic]"
        )
        full = len(rt2.history()) == len(convo)
        console.print(f"   full original history still available: [bold]{full}[/bold]")
    return full and any(isinstance(e, ContextCompressed) for e in seen)


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
            raise _UsageError(f"no session {args.session_id!r} in {where}")
        console.print(f"deleted session {args.session_id!r}")
        return 0
    raise _UsageError(f"unknown sessions action {args.action!r}")


# -- memories -------------------------------------------------------------------------------


def _namespace(args: argparse.Namespace) -> Any:
    from actormem.store import Namespace

    if not (args.user or args.agent or args.run):
        raise _UsageError("name a namespace with --user, --agent and/or --run")
    return Namespace(user_id=args.user, agent_id=args.agent, run_id=args.run)


def _progress_bar(console: Console, label: str) -> tuple[Any, Any]:
    from rich.progress import Progress

    progress = Progress(console=console, transient=True)
    task = progress.add_task(label, total=None)

    def update(done: int, total: int) -> None:
        progress.update(task, completed=done, total=total)

    return progress, update


_DB_HELP = "the long-term store: a DuckDB file or a postgresql:// URL (default: actormem.duckdb)"


def _open_db(db: str, *, create: bool = False, **kwargs: Any) -> Any:
    """The store ``--db`` names: a ``postgresql://`` URL or a DuckDB file (which
    must exist unless ``create``)."""
    from actormem.store import is_dsn, open_store

    if not is_dsn(db) and not create and not Path(db).exists():
        raise _UsageError(f"no memory store at {db} (pass --db PATH or --db postgresql://...)")
    return open_store(db, **kwargs)


def cmd_memories(args: argparse.Namespace, console: Console) -> int:
    if args.action == "reembed":
        return _reembed(args, console)
    ns = _namespace(args)
    with _open_db(args.db, create=args.action == "import") as store:
        if args.action == "search":
            if not args.query:
                raise _UsageError("memories search needs a query")
            hits = store.search(args.query, ns, limit=args.limit)
            if args.json:
                print(json.dumps([msgspec.to_builtins(h) for h in hits]))
                return 0
            table = Table(title=f"{len(hits)} hit(s) for {args.query!r}")
            for col in ("score", "kind", "created", "content"):
                table.add_column(col)
            for h in hits:
                when = dt.datetime.fromtimestamp(h.memory.created_at).strftime("%Y-%m-%d")
                table.add_row(f"{h.score:.3f}", h.memory.kind, when, h.memory.content[:120])
            console.print(table)
        elif args.action == "stats":
            stats = store.stats(ns)
            if args.json:
                print(json.dumps([msgspec.to_builtins(st) for st in stats]))
                return 0
            table = Table(title="long-term memory by namespace")
            for col in ("namespace", "live", "deleted", "superseded", "kinds", "accesses"):
                table.add_column(col)
            for st in stats:
                name = "/".join(v for v in msgspec.structs.astuple(st.namespace) if v)
                kinds = ", ".join(f"{k}={v}" for k, v in sorted(st.kinds.items()))
                table.add_row(
                    name,
                    str(st.live),
                    str(st.deleted),
                    str(st.superseded),
                    kinds,
                    str(st.total_access),
                )
            console.print(table)
        elif args.action == "timeline":
            rows = store.timeline(ns)
            if args.json:
                print(json.dumps(rows))
                return 0
            table = Table(title="memories per day")
            table.add_column("day")
            table.add_column("count", justify="right")
            for day, count in rows:
                table.add_row(str(day), str(count))
            console.print(table)
        elif args.action == "export":
            if not args.path:
                raise _UsageError("memories export needs a PATH (.parquet or .jsonl)")
            progress, update = _progress_bar(console, "exporting")
            with progress:
                rep = store.export(ns, args.path, overwrite=args.force, progress=update)
            if args.json:
                print(json.dumps(msgspec.to_builtins(rep)))
            else:
                console.print(f"exported {rep.memories} memories to {rep.path} ({rep.format})")
        elif args.action == "import":
            if not args.path:
                raise _UsageError("memories import needs a PATH (.parquet or .jsonl)")
            progress, update = _progress_bar(console, "importing")
            with progress:
                irep = store.import_(args.path, namespace=ns, progress=update)
            console.print(f"imported {irep.added} memories ({irep.merged} merged) from {irep.path}")
        elif args.action == "forget":
            if not args.yes:
                raise _UsageError("memories forget deletes for good: add --yes to confirm")
            frep = store.forget(ns)
            if args.json:
                print(json.dumps(msgspec.to_builtins(frep)))
            else:
                console.print(f"forgot {frep.memories} memories and {frep.history} history rows")
    return 0


# -- journal and dream ---------------------------------------------------------------------------


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
        now_text = read_journal_text(folder / "NOW.md")
        now = parse_now(now_text) if now_text is not None else None
        memory_text = read_journal_text(folder / "MEMORY.md")
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
        console.print(f"[bold]{folder}[/bold]")
        if now is not None:
            console.print(f"NOW ({now.state}): {now.objective or '(none)'}")
            for i, step in enumerate(now.next_steps, 1):
                console.print(f"  {i}. {step}", highlight=False)
        console.print(f"journal days: {', '.join(days[-7:]) or 'none'}")
        console.print(f"MEMORY.md: {len(memory)} item(s)")
        return 0
    else:
        path = folder / "memory" / f"{day_name(what)}.md"
    text = read_journal_text(path)  # refuses a FIFO or other special file
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
        report = journal.dream(args.lookback, force=args.force)
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


def _reembed(args: argparse.Namespace, console: Console) -> int:
    """Rebuild every vector with the bundled embedder (after a model change)."""
    from actormem.store import EmbedderMismatchError

    progress, update = _progress_bar(console, "re-embedding")
    with progress:
        try:
            store = _open_db(args.db)
        except EmbedderMismatchError as exc:
            if not args.json:
                console.print(f"[dim]{exc}: switching the store to the bundled embedder[/dim]")
            with _open_db(args.db, on_embedder_mismatch="reembed", progress=update) as store:
                rep = store.last_reembed
        else:
            with store:
                rep = store.reembed(progress=update)
    assert rep is not None
    result = msgspec.to_builtins(rep)
    if args.json:
        print(json.dumps(result))
    else:
        console.print(
            f"re-embedded {result['memories']} memories with {result['embedder']} "
            f"({result['dim']} dimensions)"
        )
    return 0


def _open_ui_store(db: str) -> Any:
    """The store behind ``actormem ui --db``: a DuckDB file or a ``postgresql://``
    URL (which running agents may be writing to at the same time)."""
    from actormem.store import StoreLockedError, is_dsn

    if "://" in db and not is_dsn(db):
        raise _UsageError(
            f"{db.split('://')[0]}:// stores are not supported: pass a DuckDB file "
            "or a postgresql:// URL"
        )
    try:
        return _open_db(db)
    except StoreLockedError as exc:
        raise _UsageError(
            f"{db} is held by a running agent (DuckDB lets one process open a file): "
            "explore it from inside that agent with MemoryRuntime(..., ui=True) or "
            f"rt.serve_ui(). ({exc})"
        ) from None


def cmd_ui(args: argparse.Namespace, console: Console) -> int:
    """Serve the memory explorer for a store until Ctrl-C."""
    from actormem.store._open import store_label
    from actormem.ui import UIConfig, UIServer

    config = UIConfig(
        host=args.host,
        port=args.port,
        token=args.token or "auto",
        allow_edits=args.allow_edits,
        memory_dir=args.memory_dir,
    )
    store = _open_ui_store(args.db)
    # Ctrl-C and SIGTERM (a service manager, `kill`) only set an event, so a
    # signal landing anywhere (even inside a print) ends in the same orderly
    # stop: the server first, then the store (which releases a DuckDB lock).
    # A signal the caller ignores (nohup, a background job) stays ignored.
    stop = threading.Event()
    previous: dict[signal.Signals, Any] = {}
    for signum in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(signum) is not signal.SIG_IGN:
            previous[signum] = signal.signal(signum, lambda *_: stop.set())
    try:
        server = UIServer(store, config=config).start()
        try:
            mode = "edits allowed" if args.allow_edits else "read-only"
            # Plain print: the URL must never be wrapped or styled (people copy it).
            url = server.url
            print(f"memory explorer for {store_label(args.db)} ({mode}): {url}", flush=True)
            print("press Ctrl-C to stop", flush=True)
            while not stop.is_set() and not server.wait(0.5):
                pass
        finally:
            server.stop()
    finally:
        store.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0


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
    m.add_argument("--db", default="actormem.duckdb", help=_DB_HELP)
    m.add_argument("--user", help="namespace: user id")
    m.add_argument("--agent", help="namespace: agent id")
    m.add_argument("--run", help="namespace: run id")
    m.add_argument("--limit", type=int, default=10, help="search: number of hits")
    m.add_argument("--path", help="export/import: a .parquet or .jsonl file")
    m.add_argument("--force", action="store_true", help="export: overwrite PATH")
    m.add_argument("--yes", action="store_true", help="forget: confirm")
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
    dr.add_argument("--db", default="actormem.duckdb", help=_DB_HELP)
    dr.add_argument("--lookback", type=int, default=None, help="journal days to read (default 7)")
    dr.add_argument("--force", action="store_true", help="dream even if nothing changed")
    namespace_args(dr)
    dr.set_defaults(func=cmd_dream)

    u = sub.add_parser("ui", help="memory explorer: a local web page over a store")
    u.add_argument("--db", default="actormem.duckdb", help=_DB_HELP)
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
    c.add_argument("--db", default="actormem.duckdb", help=_DB_HELP)
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


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``actormem`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    configure_logging(
        "DEBUG" if args.debug else "WARNING",
        stream=_LOG_STREAM if args.command == "chat" else None,  # type: ignore[arg-type]
    )
    console = Console(highlight=False, width=None if sys.stdout.isatty() else 120)
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

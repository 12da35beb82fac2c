"""``actormem demo``: the offline walkthrough of the memory runtime.

Kept apart from :mod:`actormem.cli` (the parser and the entry point) because it
is the longest command: a scripted conversation, then long-term memory, the
journal and compression shown one after the other, each with its own check
that what it printed really happened.
"""

from __future__ import annotations

import argparse
import json
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
from actormem.journal._files import read_text as read_journal_text
from actormem.messages import Msg, ToolUseBlock
from actormem.runtime import MemoryRuntime

__all__ = ["cmd_demo"]


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

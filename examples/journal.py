"""Human-readable memory: NOW.md, LOG.md, the daily journal and a deep dream.

The agent's memory as files a person can open: what it is doing now, what it
did, what the long-term memory committed today, and the durable knowledge a
"dream" distils -- with DuckDB as the record behind every file.

Run: python examples/journal.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from actormem import MemoryRuntime, Msg
from actormem.agent import ReActAgent
from actormem.journal import JournalConfig
from actormem.models.scripted import ScriptedModel
from actormem.store import Namespace


def search_hotels(city: str) -> str:
    """Find hotels in a city.

    Args:
        city: the city.
    """
    return f"{city}: Casa Azul 90 EUR/night, Hotel Mar 120 EUR/night"


folder = Path(tempfile.mkdtemp(prefix="actormem-journal-"))
config = JournalConfig(memory_dir=folder / "agents", log_max_entries=20, log_keep_entries=5)
with MemoryRuntime(
    session_dir=folder / "sessions",
    store=folder / "memory.duckdb",
    namespace=Namespace(user_id="ada", agent_id="travel"),
    journal=config,
) as rt:
    model = ScriptedModel(
        [
            "Nice to meet you, Ada.",
            Msg.tool_call("search_hotels", {"city": "Lisbon"}),
            "Casa Azul is the cheaper one at 90 EUR a night.",
        ]
    )
    agent = ReActAgent("travel", model, rt, tools=[search_hotels])
    agent.reply("Hi, I'm Ada. I live in Porto and I prefer quiet hotels.")
    print("agent>", agent.reply("Find me a hotel in Lisbon.").text)
    rt.flush()  # recorded turns are committed, and journaled

    assert rt.journal is not None
    now = rt.now()
    print(f"\nNOW: {now.state} · {now.objective!r} · note: {now.note!r}")
    print("working memory the model sees on every call:")
    print(rt.working_memory(max_tokens=150))

    for i in range(20):  # past log_max_entries the log compacts into a summary memory
        rt.log("TOOL_USE", f"check_price(hotel='Casa Azul', night={i + 1}) -> 90 EUR")
    rt.journal.flush()  # LOG.md and its compaction are written off the caller's thread
    comp = rt.journal.last_compaction
    assert comp is not None
    print(f"\nLOG.md compacted {comp.entries} entries into memory {comp.summary_id[:8]}…;")
    print(f"{len(rt.journal.entries())} entries stay verbatim, every entry stays in DuckDB")

    print(f"\ntoday's journal ({rt.journal.day_path(rt.journal.today()).relative_to(folder)}):")
    for line in rt.journal.read_day().splitlines():
        if line.startswith("- "):
            print(" ", line[:110])

    report = rt.dream()
    print(f"\ndeep dream: {report.changes} change(s); MEMORY.md:")
    for item in rt.journal.memory_items():
        print(f"  [{item.kind}] {item.text}")
    print("dreaming again on the same input is skipped:", rt.dream().skipped)

    # A person edits MEMORY.md: the change is imported, not overwritten.
    path = rt.journal.path("MEMORY.md")
    path.write_text(path.read_text() + "- User's budget is 100 EUR a night\n")
    print("after a hand edit, MEMORY.md has", len(rt.journal.memory_items()), "items")
    assert rt.store is not None
    print(
        "the edit is in the store:", [h.memory.content for h in rt.retrieve("budget per night", 1)]
    )

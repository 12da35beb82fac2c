"""A ReAct agent with tools and memory in a dozen lines, offline.

The ScriptedModel stands in for an LLM (swap in OpenAIChatModel for a real
one: see the README's "Use it with your model"). The agent calls a tool, gets
the result back paired with the call, answers, and records the turn to
long-term memory in a DuckDB file.

Run: python examples/react_agent.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from actormem import MemoryRuntime
from actormem.agent import ReActAgent
from actormem.models.scripted import ScriptedModel


def convert_eur(amount: float, rate: float = 1.08) -> float:
    """Convert euros to US dollars.

    Args:
        amount: the amount in euros.
        rate: dollars per euro.
    """
    return round(amount * rate, 2)


folder = Path(tempfile.mkdtemp(prefix="actormem-agent-"))
model = ScriptedModel.tool_then_answer(
    "convert_eur", {"amount": 250}, answer="250 EUR is 270.0 USD."
)

with MemoryRuntime(session_dir=folder / "sessions", store=folder / "memory.duckdb") as memory:
    agent = ReActAgent("travel-bot", model, memory, tools=[convert_eur], session_id="trip")
    print("agent:", agent.reply("How much is 250 EUR in dollars?").text)
    for m in memory.messages():  # user, assistant(tool call), tool result, assistant
        print(f"  {m.role:>9}: {m.text or [b.name for b in m.tool_uses]}")
    memory.flush()  # the turn is committed to DuckDB
    print("recalled:", [h.memory.content[:60] for h in memory.retrieve("dollars", limit=2)])

"""AGENT_CONTROL: the model decides what to remember and when to look it up.

The runtime offers two tools with JSON schemas ready for function calling,
record_to_memory(thinking, content) and retrieve_from_memory(keywords, limit);
the agent registers them by itself.

Run: python examples/agent_control_tools.py
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from actormem import MemoryRuntime, Msg, ToolUseBlock
from actormem.agent import ReActAgent
from actormem.models.scripted import ScriptedModel
from actormem.recorder import LongTermMemoryMode

folder = Path(tempfile.mkdtemp(prefix="actormem-tools-"))
record = ToolUseBlock(
    id="call_1",
    name="record_to_memory",
    input={"thinking": "a lasting preference", "content": ["The user is allergic to peanuts."]},
)
lookup = ToolUseBlock(
    id="call_2", name="retrieve_from_memory", input={"keywords": ["allergy", "peanuts"]}
)
model = ScriptedModel(
    [
        Msg.assistant("I'll remember that.", tool_calls=[record]),
        "Noted: no peanuts.",
        Msg.assistant(tool_calls=[lookup]),
        "You are allergic to peanuts, so skip the satay.",
    ]
)

with MemoryRuntime(
    session_dir=folder / "sessions",
    store=folder / "memory.duckdb",
    long_term=LongTermMemoryMode.AGENT_CONTROL,
) as memory:
    print("tools offered:", [t["function"]["name"] for t in memory.tools()])
    print(json.dumps(memory.tools()[0]["function"]["parameters"], indent=1)[:300])
    agent = ReActAgent("chef", model, memory)
    print("agent:", agent.reply("I'm allergic to peanuts.").text)
    print("agent:", agent.reply("Can I eat chicken satay?").text)
    print("tool result:", memory.messages()[-2].text[:200])

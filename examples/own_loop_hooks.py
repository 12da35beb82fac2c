"""Your own agent loop, the same memory behaviour, two calls.

MemoryHooks.before_reasoning() compresses when over budget and injects
relevant long-term memories; after_reply() records the turn and ends it.

Run: python examples/own_loop_hooks.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from actormem import MemoryRuntime, Msg, to_openai
from actormem.agent import MemoryHooks

folder = Path(tempfile.mkdtemp(prefix="actormem-hooks-"))


def my_model(openai_messages: list[dict[str, object]]) -> str:
    """Stands in for any LLM client call; it just reports what it was given."""
    texts = [str(m["content"]) for m in openai_messages]
    block = next((t for t in texts if "<long_term_memory>" in t), "")
    remembered = [line for line in block.splitlines() if line.startswith("- ")]
    return f"I remember: {remembered[0][:90]}" if remembered else "Nothing to recall yet."


with MemoryRuntime(
    session_dir=folder / "sessions", store=folder / "memory.duckdb", autocontext=True
) as memory:
    hooks = MemoryHooks(memory, system=[Msg.system("You are a personal assistant.")])
    for text in ["My sister Lena lives in Oslo.", "Where does Lena live?"]:
        user = Msg.user(text)
        memory.add(user)
        context = hooks.before_reasoning()  # 1: compressed context + long-term memory
        reply = Msg.assistant(my_model(to_openai(context)))
        memory.add(reply)
        hooks.after_reply([user, reply])  # 2: record the turn, end it
        memory.flush()
        print(f"user: {text}\nbot:  {reply.text}")

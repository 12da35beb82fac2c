"""Seed 002's amnesia test through the files: kill the agent mid-task, restart, "continue".

The child process has no session file to come back to: what survives is the
DuckDB file and the agent's folder (NOW.md, LOG.md).  The restarted agent
reads NOW, sees that the research step is done and goes on to the outline.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from actormem import MemoryRuntime, Msg
from actormem.agent import ReActAgent
from actormem.journal import JournalConfig
from actormem.models.embedders import HashEmbedder
from actormem.models.scripted import ScriptedModel
from actormem.recorder import RecorderConfig
from actormem.store import DuckDBStore, Namespace

TASK = "Research Python decorators and outline a blog post"

CHILD = textwrap.dedent(
    """
    import sys
    from actormem import MemoryRuntime, Msg
    from actormem.agent import ReActAgent
    from actormem.journal import JournalConfig
    from actormem.models.embedders import HashEmbedder
    from actormem.models.scripted import Hang, ScriptedModel
    from actormem.recorder import RecorderConfig
    from actormem.store import DuckDBStore, Namespace

    root = sys.argv[1]

    def research(topic: str) -> str:
        '''Research a topic.

        Args:
            topic: what to research.
        '''
        return f"notes on {topic}: functools.wraps, closures, parametrised decorators"

    store = DuckDBStore(root + "/mem.duckdb", embedder=HashEmbedder())
    rt = MemoryRuntime(
        session_dir=root + "/sessions",
        store=store,
        namespace=Namespace(user_id="ada", agent_id="writer"),
        recorder=RecorderConfig(idle_seconds=None),
        journal=JournalConfig(memory_dir=root + "/agents"),
    )
    model = ScriptedModel(
        [Msg.tool_call("research", {"topic": "Python decorators"}), Hang(seconds=600)]
    )
    agent = ReActAgent("writer", model, rt, tools=[research])
    print("ready", flush=True)
    agent.reply(sys.argv[2])
    """
)


def test_killed_mid_task_restart_reads_now_and_continues(tmp_path: Path) -> None:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    now_md = tmp_path / "agents" / "ada" / "writer" / "NOW.md"
    proc = subprocess.Popen(
        [sys.executable, str(script), str(tmp_path), TASK], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 60
        while not (now_md.exists() and "done: research(" in now_md.read_text()):
            assert time.monotonic() < deadline, "the child never finished its research step"
            assert proc.poll() is None, "the child died on its own"
            time.sleep(0.02)
    finally:
        os.kill(proc.pid, signal.SIGKILL)  # amnesia: no clean shutdown, no session saved
        proc.wait()
    text = now_md.read_text()
    assert TASK in text and "in_flight" in text

    researched: list[str] = []

    def research(topic: str) -> str:
        """Research a topic.

        Args:
            topic: what to research.
        """
        researched.append(topic)
        return "notes"

    def reasoner(messages: Sequence[Msg], tools: Any) -> Msg | str:
        memory = "\n".join(
            m.text for m in messages if m.metadata.get("actormem") == "working_memory"
        )
        if TASK in memory and "done: research(topic='Python decorators')" in memory:
            return "Outline: 1. What a decorator is 2. functools.wraps 3. Parametrised decorators"
        return Msg.tool_call("research", {"topic": "Python decorators"})

    store = DuckDBStore(tmp_path / "mem.duckdb", embedder=HashEmbedder())
    ns = Namespace(user_id="ada", agent_id="writer")
    with MemoryRuntime(
        session_dir=tmp_path / "sessions",
        store=store,
        namespace=ns,
        recorder=RecorderConfig(idle_seconds=None),
        journal=JournalConfig(memory_dir=tmp_path / "agents"),
    ) as rt:
        assert rt.now().objective == TASK and rt.now().state == "in_flight"
        model = ScriptedModel(reasoner, cycle=True)
        agent = ReActAgent("writer", model, rt, tools=[research])  # fresh: no session loaded
        out = agent.reply("continue")
        assert out.text.startswith("Outline:")
        assert researched == []  # the done step was not redone
        assert rt.now().state == "done" and rt.now().objective == TASK
        assert rt.journal is not None
        logged = [e.content for e in store.log_entries(ns)]  # the killed run's entries survived
        assert any(c.startswith("research(") for c in logged)
        assert any("notes on Python decorators" in c for c in logged)
        assert any("resuming the task" in c for c in logged)
        log_md = (rt.journal.folder / "LOG.md").read_text()
        assert "USER_FEEDBACK · Research Python decorators" in log_md
    store.close()

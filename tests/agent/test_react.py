"""The ReAct agent with the memory runtime embedded."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from actormem import MemoryRuntime, Msg
from actormem.agent import MemoryHooks, ReActAgent
from actormem.messages import ToolUseBlock
from actormem.models.base import ModelError, ToolSpec
from actormem.models.embedders import HashEmbedder
from actormem.models.scripted import ScriptedModel
from actormem.recorder import LongTermMemoryMode
from actormem.store import DuckDBStore, Namespace

NS = Namespace(user_id="ada", agent_id="helper")


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first.
        b: the second.
    """
    return a + b


def make_runtime(
    tmp_path: Path, mode: LongTermMemoryMode | None = None, **kw: Any
) -> MemoryRuntime:
    if mode is None:
        return MemoryRuntime(session_dir=tmp_path / "sessions", **kw)
    store = DuckDBStore(tmp_path / "mem.duckdb", embedder=HashEmbedder())
    return MemoryRuntime(
        session_dir=tmp_path / "sessions", store=store, long_term=mode, namespace=NS, **kw
    )


def test_tool_loop_keeps_calls_and_results_paired(tmp_path: Path) -> None:
    model = ScriptedModel.tool_then_answer("add", {"a": 2, "b": 3}, answer="2 + 3 = 5")
    with make_runtime(tmp_path) as rt:
        agent = ReActAgent("calc", model, rt, tools=[add])
        out = agent.reply("what is 2 + 3?")
        assert out.text == "2 + 3 = 5" and out.name == "calc"
        msgs = rt.messages()
        assert [m.role for m in msgs] == ["user", "assistant", "tool", "assistant"]
        call = msgs[1].tool_uses[0]
        assert msgs[2].tool_results[0].tool_use_id == call.id and msgs[2].text == "5"
        second = model.calls[1]
        assert second.messages[0].role == "system"
        assert second.messages[-1].tool_results[0].output == "5"
        assert "add" in model.calls[0].tool_names
        assert agent.status.state == "idle"


def test_tool_errors_go_back_to_the_model(tmp_path: Path) -> None:
    def boom() -> str:
        """Always fails."""
        raise RuntimeError("disk on fire")

    model = ScriptedModel.tool_then_answer("boom", {}, answer="the tool failed")
    with make_runtime(tmp_path) as rt:
        agent = ReActAgent("a", model, rt, tools=[boom])
        assert agent.reply("try it").text == "the tool failed"
        result = rt.messages()[2].tool_results[0]
        assert result.is_error and "disk on fire" in result.output


def test_max_iters_ends_the_turn(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            Msg.assistant(tool_calls=[ToolUseBlock(id=f"c{i}", name="add", input={"a": i, "b": 1})])
            for i in range(3)
        ]
    )
    with make_runtime(tmp_path) as rt:
        agent = ReActAgent("a", model, rt, tools=[add], max_iters=3)
        out = agent.reply("loop forever")
        assert "stopped after 3" in out.text and model.call_count == 3
        uses = {b.id for m in rt.messages() for b in m.tool_uses}
        results = {r.tool_use_id for m in rt.messages() for r in m.tool_results}
        assert uses == results


def test_static_control_injects_and_records(tmp_path: Path) -> None:
    seen: list[Sequence[Msg]] = []

    def answer(messages: Sequence[Msg], tools: Sequence[ToolSpec] | None) -> str:
        seen.append(messages)
        return "Your locker code is 4242."

    with make_runtime(tmp_path, LongTermMemoryMode.STATIC_CONTROL) as rt:
        assert rt.store is not None
        rt.store.add(NS, "Ada's locker code is 4242")
        agent = ReActAgent("a", ScriptedModel(answer, cycle=True), rt)
        agent.reply("What is my locker code?")
        injected = "\n".join(m.text for m in seen[0])
        assert "<long_term_memory>" in injected and "4242" in injected
        assert all(s["function"]["name"] not in ("record_to_memory",) for s in agent.tool_specs())
        agent.reply("I moved to Porto in May 2025.")
        rt.flush()
        hits = rt.retrieve("Porto", limit=5)
        assert any("Porto" in h.memory.content for h in hits)


def test_agent_control_uses_memory_tools(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            Msg.assistant(
                tool_calls=[
                    ToolUseBlock(
                        id="r1",
                        name="record_to_memory",
                        input={"thinking": "user fact", "content": ["Ada's cat is named Miso"]},
                    )
                ]
            ),
            Msg.assistant(
                tool_calls=[
                    ToolUseBlock(id="q1", name="retrieve_from_memory", input={"keywords": ["cat"]})
                ]
            ),
            "Your cat is Miso.",
        ]
    )
    with make_runtime(tmp_path, LongTermMemoryMode.AGENT_CONTROL) as rt:
        agent = ReActAgent("a", model, rt)
        names = {s["function"]["name"] for s in agent.tool_specs()}
        assert {"record_to_memory", "retrieve_from_memory"} <= names
        assert agent.reply("remember my cat is Miso, then check").text == "Your cat is Miso."
        retrieved = rt.messages()[4].tool_results[0].output
        assert "Miso" in retrieved
        assert "<long_term_memory>" not in "\n".join(m.text for m in model.calls[0].messages)


def test_hooks_in_a_hand_written_loop(tmp_path: Path) -> None:
    with make_runtime(tmp_path, LongTermMemoryMode.STATIC_CONTROL) as rt:
        assert rt.store is not None
        rt.store.add(NS, "Ada is vegetarian")
        hooks = MemoryHooks(rt, system=[Msg.system("be brief")])
        user = Msg.user("Suggest a dinner for me")
        rt.add(user)
        context = hooks.before_reasoning()
        assert context[0].text == "be brief"
        assert any("vegetarian" in m.text for m in context)
        reply = Msg.assistant("A mushroom risotto.")
        rt.add(reply)
        hooks.after_reply([user, reply])
        rt.flush()
        assert any("risotto" in h.memory.content for h in rt.retrieve("risotto dinner"))


def test_agent_state_saves_with_its_memory(tmp_path: Path) -> None:
    with make_runtime(tmp_path) as rt:
        agent = ReActAgent(
            "a", ScriptedModel(["hi there"]), rt, sys_prompt="custom", session_id="s"
        )
        agent.reply("hello")
        doc = json.loads((tmp_path / "sessions" / "s.json").read_text())
        assert doc["components"]["agent"]["sys_prompt"] == "custom"
        assert doc["components"]["agent"]["status"]["state"] == "idle"
        assert len(doc["components"]["runtime"]["short_term"]["messages"]) == 2
    with make_runtime(tmp_path) as rt2:
        agent2 = ReActAgent("a", ScriptedModel([]), rt2, session_id="s")
        assert agent2.load_session() and agent2.sys_prompt == "custom" and rt2.size() == 2


def test_model_failure_anneals_and_continue_resumes(tmp_path: Path) -> None:
    with make_runtime(tmp_path, LongTermMemoryMode.STATIC_CONTROL) as rt:
        error = ModelError("502 from upstream", problem="HTTP error status", status=502)
        broken = ScriptedModel([error])
        agent = ReActAgent("a", broken, rt, session_id="job")
        out = agent.reply("Summarise the Q3 report")
        assert "continue" in out.text and agent.status.state == "error"
        assert "502" in agent.status.error and agent.status.task == "Summarise the Q3 report"
        assert rt.store is not None
        assert any("HTTP 502" in r.content for r in rt.store.list(NS, kinds=["episode"]))
        agent.model = ScriptedModel(["Q3 revenue grew 12%."])
        assert agent.reply("continue").text == "Q3 revenue grew 12%."
        context = agent.model.calls[0].messages  # type: ignore[attr-defined]
        assert any("Summarise the Q3 report" in m.text for m in context)
        assert agent.status.state == "idle"


CHILD = textwrap.dedent(
    """
    import sys
    from actormem import MemoryRuntime
    from actormem.agent import ReActAgent
    from actormem.models.scripted import ScriptedModel, Hang

    rt = MemoryRuntime(session_dir=sys.argv[1])
    model = ScriptedModel([Hang(seconds=600)])
    agent = ReActAgent("worker", model, rt, session_id="task")
    print("ready", flush=True)
    agent.reply("Translate the contract into French")
    """
)


def test_killed_mid_turn_then_continue(tmp_path: Path) -> None:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    sessions = tmp_path / "sessions"
    proc = subprocess.Popen(
        [sys.executable, str(script), str(sessions)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        path = sessions / "task.json"
        deadline = time.monotonic() + 60
        while not (path.exists() and "in_flight" in path.read_text()):
            assert time.monotonic() < deadline, "the child never saved its in-flight status"
            time.sleep(0.05)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    with MemoryRuntime(session_dir=sessions) as rt:
        model = ScriptedModel(["Le contrat est traduit."])
        agent = ReActAgent("worker", model, rt, session_id="task")
        assert agent.load_session()
        assert agent.status.state == "in_flight" and "contract" in agent.status.task
        assert agent.reply("continue").text == "Le contrat est traduit."
        sent = "\n".join(m.text for m in model.calls[0].messages)
        assert "Translate the contract into French" in sent
        assert agent.status.state == "idle"


def test_async_reply(tmp_path: Path) -> None:
    import asyncio

    with make_runtime(tmp_path) as rt:
        agent = ReActAgent("a", ScriptedModel(["async hi"]), rt)
        assert asyncio.run(agent.areply("hello")).text == "async hi"


def test_reserved_tool_names_are_refused(tmp_path: Path) -> None:
    def context_reload(offload_id: str) -> str:
        """Shadow."""
        return ""

    with (
        make_runtime(tmp_path, autocontext=True) as rt,
        pytest.raises(ValueError, match="reserved"),
    ):
        ReActAgent("a", ScriptedModel([]), rt, tools=[context_reload])


def test_both_mode_injects_and_offers_memory_tools(tmp_path: Path) -> None:
    seen: list[tuple[Sequence[Msg], Sequence[ToolSpec] | None]] = []

    def answer(messages: Sequence[Msg], tools: Sequence[ToolSpec] | None) -> str:
        seen.append((messages, tools))
        return "You prefer aisle seats."

    with make_runtime(tmp_path, LongTermMemoryMode.BOTH) as rt:
        assert rt.store is not None
        rt.store.add(NS, "Ada prefers aisle seats on trains")
        agent = ReActAgent("a", ScriptedModel(answer, cycle=True), rt)
        agent.reply("Which seat do I like on trains?")
        messages, tools = seen[0]
        assert "aisle" in "\n".join(m.text for m in messages if "<long_term_memory>" in m.text)
        names = {t["function"]["name"] for t in tools or ()}
        assert {"record_to_memory", "retrieve_from_memory"} <= names
        rt.flush()
        assert any("Which seat" in h.memory.content for h in rt.retrieve("which seat trains", 10))


class _BreakableEmbedder(HashEmbedder):
    broken = False

    def embed(self, texts: Sequence[str]) -> Any:
        if self.broken:
            raise RuntimeError("embedding service down")
        return super().embed(texts)


def test_a_failing_store_degrades_the_turn_instead_of_crashing_it(tmp_path: Path) -> None:
    emb = _BreakableEmbedder()
    store = DuckDBStore(tmp_path / "mem.duckdb", embedder=emb)
    model = ScriptedModel(
        [
            Msg.assistant(
                tool_calls=[
                    ToolUseBlock(id="q", name="retrieve_from_memory", input={"keywords": ["x"]})
                ]
            ),
            "I could not check my notes, but here is my answer.",
        ]
    )
    with MemoryRuntime(
        session_dir=tmp_path / "s", store=store, long_term=LongTermMemoryMode.BOTH, namespace=NS
    ) as rt:
        rt.store.add(NS, "something to find")  # type: ignore[union-attr]
        emb.broken = True
        agent = ReActAgent("a", model, rt)
        out = agent.reply("What do you remember?")  # retrieval for injection fails: no block
        assert out.text.startswith("I could not check")
        result = rt.messages()[2].tool_results[0]
        assert result.is_error and "embedding service down" in result.output
        emb.broken = False
    store.close()


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(depth):
        value = {"a": value}
    return value


@pytest.mark.parametrize(
    ("tool_input", "field"),
    [
        (_nested(990), r"content\[0\]\.input(\.a)+: nested deeper"),  # RecursionError on save
        ({"x": float("nan")}, r"content\[0\]\.input\.x"),  # saved as null, never loaded
    ],
)
def test_tool_arguments_no_session_could_hold_go_back_to_the_model(
    tmp_path: Path, tool_input: dict[str, Any], field: str
) -> None:
    bad = Msg.assistant(tool_calls=[ToolUseBlock(id="c1", name="add", input=tool_input)])
    model = ScriptedModel([bad, "sorry, done"])
    with make_runtime(tmp_path) as rt:
        agent = ReActAgent("a", model, rt, tools=[add], session_id="s")
        assert agent.reply("add deep things").text == "sorry, done"
        msgs = rt.messages()
        assert [m.role for m in msgs] == ["user", "assistant", "tool", "assistant"]
        assert msgs[1].tool_uses[0].input == {}  # the call is kept, its arguments are not
        result = msgs[2].tool_results[0]
        assert result.is_error and result.tool_use_id == "c1"
        assert re.search(field, result.output), result.output
        assert model.calls[1].messages[-1].tool_results[0].is_error  # the model saw it
    with make_runtime(tmp_path) as rt2:  # the autosaved session loads
        agent2 = ReActAgent("a", ScriptedModel([]), rt2, tools=[add], session_id="s")
        assert agent2.load_session()
        assert [m.role for m in rt2.messages()] == ["user", "assistant", "tool", "assistant"]


def test_a_failed_autosave_is_raised_with_the_reply(tmp_path: Path) -> None:
    from actormem.agent import AutosaveError

    with make_runtime(tmp_path) as rt:
        agent = ReActAgent("a", ScriptedModel(["first", "second"]), rt, session_id="s")
        assert agent.reply("one").text == "first"
        # The session file's place is taken by a folder: every save now fails.
        target = tmp_path / "sessions" / "s.json"
        target.unlink()
        target.mkdir()
        with pytest.raises(AutosaveError, match="'s' could not be saved") as info:
            agent.reply("two")
        assert info.value.reply is None  # it failed as the turn started

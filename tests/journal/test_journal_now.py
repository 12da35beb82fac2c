"""NOW: the working status, its file, session state, injection and hand edits."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from actormem import MemoryRuntime, Msg
from actormem.agent import MemoryHooks, ReActAgent
from actormem.events import Event, NowUpdated
from actormem.journal import NowStatus, parse_now, render_now
from actormem.models.base import ModelError
from actormem.models.scripted import ScriptedModel

from .conftest import NS, MakeRuntime


def test_update_now_writes_file_and_event(make_runtime: MakeRuntime) -> None:
    rt = make_runtime()
    seen: list[Event] = []
    rt.subscribe(seen.append, NowUpdated)
    status = rt.update_now("Plan the Lisbon trip", ["book flights", "find a hotel"])
    assert rt.now() == status and status.state == "in_flight"
    assert rt.journal is not None and rt.journal.flush()
    text = (rt.journal.folder / "NOW.md").read_text()
    assert "## Objective\nPlan the Lisbon trip" in text and "2. find a hotel" in text
    deadline = time.monotonic() + 60
    while not seen and time.monotonic() < deadline:
        time.sleep(0.01)
    assert isinstance(seen[0], NowUpdated) and seen[0].next_steps == (
        "book flights",
        "find a hotel",
    )


def test_objective_change_overwrites_and_is_logged(make_runtime: MakeRuntime) -> None:
    rt = make_runtime()
    rt.update_now("first objective", ["a"])
    rt.update_now("second objective", ["b"])
    assert rt.journal is not None and rt.journal.flush()
    text = (rt.journal.folder / "NOW.md").read_text()
    assert "second objective" in text and "first objective" not in text
    assert any("objective changed from: first objective" in e.content for e in rt.journal.entries())


def test_now_round_trips_through_its_file() -> None:
    now = NowStatus(
        objective="Write the report",
        next_steps=("done: fetch data", "draft"),
        state="error",
        note="ModelError: 502",
        updated_at=1.0,
    )
    back = parse_now(render_now(now, "ada/helper"), updated_at=1.0)
    assert back == now


def test_now_survives_restart_from_duckdb_and_session(make_runtime: MakeRuntime) -> None:
    rt = make_runtime()
    rt.update_now("Translate the contract", ["section 1"])
    rt.save_session("s1")
    rt2 = make_runtime()  # closes the first; a new process would see the same
    assert rt2.now().objective == "Translate the contract"
    rt2.update_now("Newer objective", ["x"])
    rt2.load_session("s1")  # an older session does not roll NOW back
    assert rt2.now().objective == "Newer objective"


def test_hand_edited_now_is_imported_not_overwritten(make_runtime: MakeRuntime) -> None:
    rt = make_runtime()
    rt.update_now("Old objective", ["step"])
    assert rt.journal is not None and rt.journal.flush()
    path = rt.journal.folder / "NOW.md"
    path.write_text(
        "# NOW\n\n## Objective\nShip release 2.1\n\n## Next steps\n- run tests\n- tag\n"
    )
    now = rt.now()
    assert now.objective == "Ship release 2.1" and now.next_steps == ("run tests", "tag")
    assert rt.journal.flush()
    text = path.read_text()
    assert "Ship release 2.1" in text and "1. run tests" in text  # canonical form, same content
    assert any("edited by hand" in e.content for e in rt.journal.entries())
    assert rt.store is not None
    state = rt.store.journal_state(NS)  # type: ignore[attr-defined]
    assert "Ship release 2.1" in state["now"]


def test_working_memory_is_injected_within_budget(make_runtime: MakeRuntime) -> None:
    rt = make_runtime(context_max_tokens=170)
    rt.update_now("Summarise the quarterly report", ["read section 1", "read section 2"])
    for i in range(30):
        rt.log("TOOL_USE", f"read_section(n={i}) -> {'lorem ipsum dolor ' * 5}")
    block = rt.working_memory()
    assert block.startswith("<working_memory>") and "Summarise the quarterly report" in block
    from actormem.compress import EstimateTokenCounter

    assert EstimateTokenCounter().count(block) <= 170
    assert "read_section(n=29)" in block and "read_section(n=0)" not in block
    rt.add(Msg.user("go on"))
    context = MemoryHooks(rt).before_reasoning()
    assert context[-2].metadata.get("actormem") == "working_memory"


def test_agent_updates_now_on_start_completion_and_error(make_runtime: MakeRuntime) -> None:
    rt = make_runtime()
    model = ScriptedModel(
        [
            Msg.tool_call("lookup", {"q": "Lisbon"}),
            "Lisbon is sunny.",
            ModelError("502 upstream", problem="HTTP error status", status=502),
        ]
    )
    states: list[str] = []

    def lookup(q: str) -> str:
        """Look something up.

        Args:
            q: the query.
        """
        states.append(rt.now().state)
        return f"{q}: 19C and sunny"

    agent = ReActAgent("a", model, rt, tools=[lookup])
    assert agent.reply("Weather in Lisbon?").text == "Lisbon is sunny."
    assert states == ["in_flight"]
    now = rt.now()
    assert now.state == "done" and now.objective == "Weather in Lisbon?"
    seen = model.calls[1].messages
    wm = next(m.text for m in seen if m.metadata.get("actormem") == "working_memory")
    assert "done: lookup(q='Lisbon') -> Lisbon: 19C and sunny" in wm
    agent.reply("And in Porto?")
    now = rt.now()
    assert now.state == "error" and "HTTP 502" in now.note and "upstream" not in now.note
    assert any("continue" in s for s in now.next_steps)
    assert rt.journal is not None
    types = [e.entry_type for e in rt.journal.entries()]
    assert {"USER_FEEDBACK", "TOOL_USE", "THOUGHT", "ERROR", "SYSTEM"} <= set(types)


def test_no_journal_means_clear_errors(tmp_path: Path) -> None:
    with MemoryRuntime(session_dir=tmp_path) as rt:
        assert rt.working_memory() == ""
        with pytest.raises(RuntimeError, match="journal"):
            rt.update_now("x")
    with pytest.raises(ValueError, match="long-term store"):
        MemoryRuntime(session_dir=tmp_path, journal=True)

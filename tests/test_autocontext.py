"""The compressor actor wired into the runtime (the strategies are tested in tests/compress)."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from actormem import MemoryRuntime, Msg
from actormem.actors.autocontext import OffloadNotFoundError
from actormem.compress import AutoContextConfig
from actormem.events import (
    CompressionSkipped,
    CompressionStarted,
    ContextCompressed,
    Event,
    ModelFallback,
)
from actormem.messages import ToolUseBlock
from actormem.models.scripted import ScriptedModel

CFG = AutoContextConfig(
    msg_threshold=40,
    last_keep=10,
    max_token=8000,
    token_ratio=0.75,
    min_consecutive_tool_messages=4,
    min_compression_tokens=100,
)


def wait_for(pred: Any, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > end:
            raise AssertionError("condition not met in time")
        time.sleep(0.01)


def conversation(n: int, tag: str = "") -> list[Msg]:
    out: list[Msg] = []
    for i in range(n):
        out.append(
            Msg.user(
                f"{tag}Fact {i}: Ada's locker code is {1000 + i} since 2024-03-{i % 28 + 1:02d}."
            )
        )
        if i % 4 == 0:
            call = Msg.tool_call("lookup", {"i": i})
            out.append(call)
            out.append(Msg.tool_result(call.tool_uses[0].id, f"record {i}: " + "data " * 300))
        out.append(Msg.assistant(f"{tag}Noted fact {i}."))
    return out


def assert_pairs_intact(msgs: Sequence[Msg]) -> None:
    uses = {b.id for m in msgs for b in m.content if isinstance(b, ToolUseBlock)}
    results = {r.tool_use_id for m in msgs for r in m.tool_results}
    assert uses == results


def test_compresses_over_budget_and_keeps_the_full_history(tmp_path: Path) -> None:
    events: list[Event] = []
    added = conversation(50)
    with MemoryRuntime(session_dir=tmp_path, autocontext=CFG) as rt:
        rt.events.subscribe(events.append)
        for m in added:
            rt.add(m)
        wait_for(lambda: any(isinstance(e, ContextCompressed) for e in events))
        rt.compress_now()
        working = rt.messages()
        assert len(working) < len(added)
        assert working[-CFG.last_keep :] == added[-CFG.last_keep :]  # verbatim, same ids
        assert_pairs_intact(working)
        assert [m.id for m in rt.history()] == [m.id for m in added]
        comp = next(e for e in events if isinstance(e, ContextCompressed))
        assert comp.tokens_after < comp.tokens_before and comp.messages_replaced > 0
        assert comp.summarizer and comp.source == "autocontext"
        assert any(isinstance(e, CompressionStarted) for e in events)
        assert rt.tools()[0]["function"]["name"] == "context_reload"


def test_adds_during_a_slow_compression_are_never_lost(tmp_path: Path) -> None:
    slow = ScriptedModel(lambda msgs, tools: "Ada stored locker codes.", delay=0.3, cycle=True)
    first = conversation(45, "a")
    with MemoryRuntime(session_dir=tmp_path, autocontext=CFG, model=slow) as rt:
        started = threading.Event()
        rt.subscribe(lambda e: started.set(), CompressionStarted)
        for m in first:
            rt.add(m)
        assert started.wait(60)
        late = [Msg.user(f"late {i}") for i in range(300)]
        for m in late:  # while the pass waits on the slow model
            rt.add(m)
        rt.compress_now()
        wait_for(lambda: slow.call_count > 0)
        history = rt.history()
        assert [m.id for m in history] == [m.id for m in first + late]
        working = rt.messages()
        assert working[-CFG.last_keep :] == late[-CFG.last_keep :]
        assert_pairs_intact(working)


def test_model_timeout_falls_back_and_the_actor_survives(tmp_path: Path) -> None:
    hanging = ScriptedModel.hanging(600)
    events: list[Event] = []
    cfg = CFG.replace(model_timeout=0.2)
    with MemoryRuntime(session_dir=tmp_path, autocontext=cfg, model=hanging) as rt:
        rt.events.subscribe(events.append)
        rt.add(conversation(50))
        t0 = time.monotonic()
        rt.compress_now()
        wait_for(lambda: any(isinstance(e, ContextCompressed) for e in events))
        assert time.monotonic() - t0 < 120  # the 0.2 s timeout, not the 600 s hang
        wait_for(lambda: any(isinstance(e, ModelFallback) for e in events))
        fb = next(e for e in events if isinstance(e, ModelFallback))
        assert "timed out" in fb.error or "Timeout" in fb.error
        comp = next(e for e in events if isinstance(e, ContextCompressed))
        assert comp.summarizer == "extractive"
        rt.add(Msg.user("still alive"))
        assert rt.messages()[-1].text == "still alive" and rt.restart_count == 0


def test_reload_after_session_save_and_restore(tmp_path: Path) -> None:
    with MemoryRuntime(session_dir=tmp_path, autocontext=CFG) as rt:
        rt.add(conversation(50))
        rt.compress_now()
        ids = [m.metadata["offload_id"] for m in rt.messages() if "offload_id" in m.metadata]
        assert ids
        originals = rt.reload(ids[0])
        rt.save_session("s")
    with MemoryRuntime(session_dir=tmp_path, autocontext=CFG) as rt2:
        assert rt2.load_session("s")
        assert rt2.reload(ids[0]) == originals
        assert "Original content of" in rt2.context_reload(ids[0])
        with pytest.raises(OffloadNotFoundError, match="no offloaded content with id 'nope'"):
            rt2.reload("nope")
        assert rt2.context_reload("nope").startswith("Error: no offloaded content")
    with MemoryRuntime(
        session_dir=tmp_path
    ) as plain:  # a runtime without a compressor loads it too
        assert plain.load_session("s") and plain.size() > 0
        with pytest.raises(RuntimeError, match="autocontext=True"):
            plain.compress_now()


def test_within_budget_nothing_happens(tmp_path: Path) -> None:
    events: list[Event] = []
    with MemoryRuntime(session_dir=tmp_path, autocontext=CFG) as rt:
        rt.events.subscribe(events.append)
        rt.add(conversation(5))
        assert rt.compress_now() is None
        time.sleep(0.1)
        assert not [e for e in events if isinstance(e, CompressionStarted | CompressionSkipped)]


def test_protected_messages_stay_verbatim(tmp_path: Path) -> None:
    plan = Msg.user("PLAN: step 1, step 2, step 3", tags=["protected"])
    with MemoryRuntime(session_dir=tmp_path, autocontext=CFG) as rt:
        rt.add([plan, *conversation(50)])
        rt.compress_now()
        assert plan in rt.messages()


def test_offloads_are_copied_to_the_long_term_store(tmp_path: Path) -> None:
    from actormem.models.embedders import HashEmbedder
    from actormem.store import DuckDBStore, Namespace

    ns = Namespace(user_id="ada")
    store = DuckDBStore(tmp_path / "m.duckdb", embedder=HashEmbedder())
    with MemoryRuntime(session_dir=tmp_path, autocontext=CFG, store=store, namespace=ns) as rt:
        rt.add(conversation(50))
        rt.compress_now()
        ids = {str(m.metadata["offload_id"]) for m in rt.messages() if "offload_id" in m.metadata}
    copies = store.list(ns, kinds=["offload"])
    assert ids and ids <= {str(r.metadata["offload_id"]) for r in copies}
    assert any("locker code is 1000" in r.content for r in copies)
    store.close()


def test_a_compression_repeated_after_a_restart_offloads_once(tmp_path: Path) -> None:
    """Regression (crash test): a process killed after its compression reached the
    store but before the session was saved compresses the same messages again
    on restart; the store kept two copies of one offload."""
    from actormem.models.embedders import HashEmbedder
    from actormem.store import DuckDBStore, Namespace

    ns = Namespace(user_id="ada")
    store = DuckDBStore(tmp_path / "m.duckdb", embedder=HashEmbedder())
    for run in range(2):  # the second runtime is the restarted process
        with MemoryRuntime(session_dir=tmp_path, autocontext=CFG, store=store, namespace=ns) as rt:
            if run == 0:
                rt.add(conversation(50))
                rt.save_session("s")  # saved before the compression
            else:
                assert rt.load_session("s")
            rt.compress_now()  # (a load over budget may have compressed already)
            wait_for(lambda: any("offload_id" in m.metadata for m in rt.messages()))
    copies = store.list(ns, kinds=["offload"])
    offload_ids = [str(r.metadata["offload_id"]) for r in copies]
    assert offload_ids and len(offload_ids) == len(set(offload_ids))
    store.close()


def test_clearing_the_context_drops_offloads_nothing_reaches(tmp_path: Path) -> None:
    """Regression (soak): the offload map kept the originals of every past session,
    so repeated sessions (add, compress, clear) grew it, and every session file,
    without bound."""
    with MemoryRuntime(session_dir=tmp_path, autocontext=CFG) as rt:
        sizes = []
        for _ in range(4):
            rt.add(conversation(50))
            rt.compress_now()
            ids = [m.metadata["offload_id"] for m in rt.messages() if "offload_id" in m.metadata]
            assert ids and rt.reload(ids[0])  # reachable while the summary is in context
            rt.clear()
            wait_for(lambda: len(rt.state_dict()["autocontext"]["offloads"]) == 0)
            with pytest.raises(OffloadNotFoundError):
                rt.reload(ids[0])
            sizes.append(len(rt.state_dict()["autocontext"]["offloads"]))
        assert sizes == [0, 0, 0, 0]
        # Offloads the working context still reaches survive a clear that came before them.
        rt.add(conversation(50))
        rt.compress_now()
        ids = [m.metadata["offload_id"] for m in rt.messages() if "offload_id" in m.metadata]
        assert ids and all(rt.reload(i) for i in ids)
        assert rt.history()[0].id != rt.messages()[0].id  # expanded from the offload

"""Every number given to one call of the public API is range-checked where it enters.

(issue 12, point 8, per call.)  ``flush(timeout=float("nan"))`` returned at
once as if every turn were committed, ``on_idle(nan)`` raised a
``TimeoutError`` with no message, ``format_for_injection(q, 10**12)`` and
``working_memory(-1)`` answered.  Each call below is tried with values outside
the range :data:`actormem._settings.CALL_ARGS` declares for the parameter;
the error must name the parameter.  A walk over the public classes fails
when a method grows a numeric parameter that no test here tries.
"""

from __future__ import annotations

import inspect
import math
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from actormem import MemoryRuntime
from actormem._settings import CALL_ARGS, OPENAI_ARGS
from actormem.agent import ReActAgent
from actormem.journal import Journal
from actormem.messages import Msg
from actormem.models.embedders import HashEmbedder
from actormem.models.openai import OpenAIChatModel
from actormem.models.scripted import ScriptedModel
from actormem.recorder import format_for_injection
from actormem.store import DuckDBStore, Namespace
from actormem.store._limits import Span
from actormem.streams import EventBus
from actormem.ui import UIConfig
from actormem.ui._server import UIServer


def _bad_values(span: Span) -> list[object]:
    out: list[object] = [span.hi * 2 + 1, -1, -(10**30)]
    if span.integer:
        out += [1.5, "3", True, math.nan]
    else:
        out += [math.nan, math.inf, -math.inf, "0.5"]
    if not span.optional:
        out.append(None)
    return out


@pytest.fixture
def rt(tmp_path: Path) -> Iterator[MemoryRuntime]:
    d = tmp_path
    store = DuckDBStore(d / "m.duckdb", embedder=HashEmbedder(64), touch_flush_interval=None)
    runtime = MemoryRuntime(
        session_dir=d / "s", store=store, journal=True, autocontext=True, model=ScriptedModel([])
    )
    runtime.add(Msg.user("I live in Porto."))
    yield runtime
    runtime.close()
    store.close()


#: (call, parameter, kind in CALL_ARGS, how to call it with a value)
CALLS: list[tuple[str, str, str, Callable[[MemoryRuntime, Any], Any]]] = [
    ("MemoryRuntime.flush", "timeout", "timeout", lambda rt, v: rt.flush(v)),
    ("MemoryRuntime.on_idle", "timeout", "timeout", lambda rt, v: rt.on_idle(v)),
    ("MemoryRuntime.on_session_end", "timeout", "timeout", lambda rt, v: rt.on_session_end(v)),
    ("MemoryRuntime.compress_now", "timeout", "timeout", lambda rt, v: rt.compress_now(v)),
    ("MemoryRuntime.close", "timeout", "timeout", lambda rt, v: rt.close(v)),
    (
        "MemoryRuntime.format_for_injection",
        "max_tokens",
        "max_tokens",
        lambda rt, v: rt.format_for_injection("Porto", v),
    ),
    (
        "MemoryRuntime.working_memory",
        "max_tokens",
        "max_tokens?",
        lambda rt, v: rt.working_memory(v),
    ),
    ("MemoryRuntime.dream", "lookback_days", "lookback_days", lambda rt, v: rt.dream(v)),
    ("Journal.entries", "limit", "limit?", lambda rt, v: rt.journal.entries(v)),  # type: ignore[union-attr]
    ("Journal.context", "max_tokens", "max_tokens?", lambda rt, v: rt.journal.context(v)),  # type: ignore[union-attr]
    ("Journal.sync", "timeout", "timeout", lambda rt, v: rt.journal.sync(v)),  # type: ignore[union-attr]
    ("Journal.flush", "timeout", "timeout", lambda rt, v: rt.journal.flush(v)),  # type: ignore[union-attr]
    ("Journal.dream", "lookback_days", "lookback_days", lambda rt, v: rt.journal.dream(v)),  # type: ignore[union-attr]
    (
        "format_for_injection",
        "max_tokens",
        "max_tokens",
        lambda rt, v: format_for_injection(rt.retrieve("Porto"), v),
    ),
    (
        "ScriptedModel.chat",
        "timeout",
        "timeout",
        lambda rt, v: ScriptedModel(["hi"]).chat([Msg.user("x")], timeout=v),
    ),
    (
        "OpenAIChatModel.chat",
        "timeout",
        "timeout",
        # port 9: nothing listens; the check comes before any connection
        lambda rt, v: OpenAIChatModel("http://127.0.0.1:9/v1", "m").chat(
            [Msg.user("x")], timeout=v
        ),
    ),
    ("EventBus.close", "timeout", "timeout", lambda rt, v: EventBus().close(v)),
]


@pytest.mark.parametrize(("call", "param", "kind", "fn"), CALLS, ids=[c[0] for c in CALLS])
def test_out_of_range_call_arguments_are_refused_naming_the_parameter(
    rt: MemoryRuntime, call: str, param: str, kind: str, fn: Callable[[MemoryRuntime, Any], Any]
) -> None:
    span = CALL_ARGS[kind]
    for value in _bad_values(span):
        if kind == "timeout" and call == "Journal.sync" and value is None:
            continue  # covered below: sync has no "wait forever"
        with pytest.raises(ValueError) as info:
            fn(rt, value)
        assert f"{call}({param}=...)" in str(info.value), (value, str(info.value))
        assert repr(value)[:20] in str(info.value), (value, str(info.value))
    # close(nan) was refused: the runtime is still open and working
    before = rt.size()
    rt.add(Msg.user("still here"))
    assert rt.size() == before + 1


def test_flush_with_a_nan_timeout_no_longer_claims_turns_committed(tmp_path: Path) -> None:
    with MemoryRuntime(session_dir=tmp_path, store=tmp_path / "m.duckdb") as rt:
        rt.record(Msg.user("My sister lives in Lisbon."))
        with pytest.raises(ValueError, match=r"MemoryRuntime\.flush\(timeout=\.\.\.\)"):
            rt.flush(math.nan)
        rt.flush(60)
        assert rt.recording_stats()["pending"] == 0
    with pytest.raises(ValueError, match=r"Journal\.sync\(timeout=\.\.\.\)"):
        Journal.sync(None, None)  # type: ignore[arg-type]


def test_the_async_twins_refuse_the_same_values(rt: MemoryRuntime) -> None:
    import asyncio

    with pytest.raises(ValueError, match=r"MemoryRuntime\.flush\(timeout=\.\.\.\)"):
        asyncio.run(rt.aflush(math.nan))
    with pytest.raises(ValueError, match=r"MemoryRuntime\.format_for_injection\(max_tokens"):
        asyncio.run(rt.aformat_for_injection("Porto", -1))
    with pytest.raises(ValueError, match=r"MemoryRuntime\.compress_now\(timeout"):
        asyncio.run(rt.acompress_now(math.inf))
    with pytest.raises(ValueError, match=r"MemoryRuntime\.working_memory\(max_tokens"):
        asyncio.run(rt.aworking_memory(0))
    with pytest.raises(ValueError, match=r"MemoryRuntime\.dream\(lookback_days"):
        asyncio.run(rt.adream(-1))
    with pytest.raises(ValueError, match=r"MemoryRuntime\.close\(timeout"):
        asyncio.run(rt.aclose(math.nan))


def test_an_ask_that_times_out_says_which_actor_and_command(tmp_path: Path) -> None:
    started, release = threading.Event(), threading.Event()

    def slow_reply(messages: Any, tools: Any) -> str:
        started.set()
        release.wait(60)
        return "summary"

    model = ScriptedModel(slow_reply)
    with MemoryRuntime(
        session_dir=tmp_path,
        autocontext={"msg_threshold": 4, "last_keep": 1, "min_compression_tokens": 0},
        model=model,
    ) as rt:
        rt.add_many([Msg.user(f"message number {i} " * 20) for i in range(6)])
        try:
            with pytest.raises(TimeoutError, match=r"did not answer CompressNow within 0s"):
                rt.compress_now(0)
        finally:
            release.set()


def test_model_constructor_numbers_are_refused_naming_the_parameter() -> None:
    for name, span in OPENAI_ARGS.items():
        OpenAIChatModel("http://127.0.0.1:9/v1", "m", **{name: span.hi})
        for value in _bad_values(span):
            with pytest.raises(ValueError, match=name):
                OpenAIChatModel("http://127.0.0.1:9/v1", "m", **{name: value})


def test_ui_server_timeouts_are_refused(rt: MemoryRuntime) -> None:
    server = rt.serve_ui(UIConfig(port=0))
    try:
        for value in _bad_values(CALL_ARGS["timeout"]):
            with pytest.raises(ValueError, match=r"UIServer\.(wait|stop)\(timeout=\.\.\.\)"):
                server.wait(value)
            if value is not None:
                with pytest.raises(ValueError, match=r"UIServer\.stop\(timeout=\.\.\.\)"):
                    server.stop(value)  # type: ignore[arg-type]
    finally:
        server.stop()


def test_store_call_numbers_are_refused_naming_the_parameter(tmp_path: Path) -> None:
    ns = Namespace(user_id="u")
    with DuckDBStore(tmp_path / "s.duckdb", embedder=HashEmbedder(64)) as store:
        store.add(ns, "hello")
        calls: list[tuple[str, Callable[[Any], Any]]] = [
            ("limit", lambda v: store.search("hello", ns, limit=v)),
            ("limit", lambda v: store.list(ns, limit=v)),
            ("offset", lambda v: store.list(ns, offset=v)),
            ("limit", lambda v: store.namespaces(limit=v)),
            ("limit", lambda v: store.top_tags(ns, limit=v)),
            ("limit", lambda v: store.most_accessed(ns, limit=v)),
        ]
        for param, fn in calls:
            for value in (-1, 10**12 if param == "limit" else 2**60, math.nan, 1.5, "3", True):
                with pytest.raises(ValueError, match=param):
                    fn(value)


#: Public methods with a numeric parameter, and where it is tried.
TRIED = {f"{call}.{param}" for call, param, _, _ in CALLS} | {
    "MemoryRuntime.retrieve.limit",  # tests/test_runtime.py (retrieve limits)
    "MemoryRuntime.delete.index",  # an index: IndexError/TypeError naming it (test_runtime)
    "UIServer.wait.timeout",
    "UIServer.stop.timeout",
    "OpenAIChatModel.achat.timeout",  # the same _limit() as chat
    "OpenAIChatModel.stream.timeout",
    "OpenAIChatModel.astream.timeout",
    "ScriptedModel.achat.timeout",  # the same _deadline() as chat
    "ScriptedModel.hanging.seconds",  # a test helper's script step
    # the async twins run the sync calls (same check, same message): one tried below
    "MemoryRuntime.aflush.timeout",
    "MemoryRuntime.aon_idle.timeout",
    "MemoryRuntime.aon_session_end.timeout",
    "MemoryRuntime.aformat_for_injection.max_tokens",
    "MemoryRuntime.aretrieve.limit",
    "MemoryRuntime.acompress_now.timeout",
    "MemoryRuntime.aworking_memory.max_tokens",
    "MemoryRuntime.adream.lookback_days",
    "MemoryRuntime.aclose.timeout",
    "ReActAgent.reply",  # no numbers; listed for clarity
}
STORE_METHODS = {"search", "list", "namespaces", "top_tags", "most_accessed"}
#: Store numbers checked against actormem.store._limits (tests/store/test_store_limits.py).
STORE_LIMITS = {
    "add.importance",
    "add.created_at",
    "update.importance",
    "decay.rate",
    "decay.threshold",
    "auto_forget.threshold",
    "prune_stale.max_age_days",
    "prune_duplicates.threshold",
    "consolidate.threshold",
    "enforce_cap.max_memories",
    "log_append.ts",
    "log_entries.after_seq",
    "log_entries.limit",
    "log_compact.bytes_before",
    "log_compact.bytes_after",
}


def _numeric_params(cls: type) -> Iterator[str]:
    for name, fn in inspect.getmembers(cls, inspect.isfunction):
        if name.startswith("_"):
            continue
        for param in inspect.signature(fn).parameters.values():
            text = str(param.annotation).replace(" ", "")
            if "Sequence" in text or "Mapping" in text:
                continue
            if {"int", "float"} & set(text.split("|")):
                yield f"{cls.__name__}.{name}.{param.name}"


@pytest.mark.parametrize(
    "cls",
    [MemoryRuntime, Journal, OpenAIChatModel, ScriptedModel, UIServer, EventBus, ReActAgent],
)
def test_every_numeric_call_parameter_is_tried(cls: type) -> None:
    found = set(_numeric_params(cls))
    assert found - TRIED == set(), "numeric parameters no test here tries"


def test_every_numeric_store_parameter_is_checked() -> None:
    found = {p.split(".", 1)[1] for p in _numeric_params(DuckDBStore)}
    untried = {p for p in found if p.split(".")[0] not in STORE_METHODS} - STORE_LIMITS
    assert untried == set()

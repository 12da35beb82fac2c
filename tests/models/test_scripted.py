"""Tests for actormem.models.scripted.ScriptedModel."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence

import pytest

from actormem.messages import Msg
from actormem.models.base import ChatModel, ModelError, ToolSpec
from actormem.models.scripted import Hang, ScriptedModel, ScriptExhaustedError

TOOLS: list[ToolSpec] = [
    {"type": "function", "function": {"name": "search", "description": "", "parameters": {}}}
]


def test_is_a_chat_model() -> None:
    assert isinstance(ScriptedModel(["hi"]), ChatModel)


def test_replies_in_order_and_records_calls() -> None:
    call = Msg.tool_call("search", {"query": "cats"}, call_id="c1")
    model = ScriptedModel([call, "Cats sleep a lot."])
    first = model.chat([Msg.user("tell me about cats")], tools=TOOLS, timeout=5)
    assert first is call
    assert first.tool_uses[0].input == {"query": "cats"}
    second = model.chat([Msg.user("tell me about cats"), first, Msg.tool_result("c1", "zzz")])
    assert second.role == "assistant" and second.text == "Cats sleep a lot."
    assert model.call_count == 2 and model.remaining == 0
    c0, c1 = model.calls
    assert c0.index == 0 and c0.tools == tuple(TOOLS) and c0.timeout == 5
    assert c0.tool_names == ("search",)
    assert c1.tools is None and len(c1.messages) == 3
    assert model.last_call is c1
    assert c1.last_message is not None and c1.last_message.role == "tool"


def test_running_out_of_script_is_a_clear_error() -> None:
    model = ScriptedModel(["only one"], name="demo")
    model.chat([Msg.user("a")])
    with pytest.raises(ScriptExhaustedError) as info:
        model.chat([Msg.user("what now?")])
    text = str(info.value)
    assert "'demo' ran out of script" in text
    assert "call #1" in text and "1 step(s)" in text and "user: 'what now?'" in text
    assert isinstance(info.value, ModelError)
    assert model.call_count == 2  # the failed call is recorded too


def test_function_script_sees_messages_and_tools() -> None:
    def brain(messages: Sequence[Msg], tools: Sequence[ToolSpec] | None) -> Msg | str:
        if tools and not any(m.role == "tool" for m in messages):
            return Msg.tool_call("search", {"query": messages[-1].text})
        return f"answer after {len(messages)} messages"

    model = ScriptedModel(brain)
    assert model.chat([Msg.user("q")], tools=TOOLS).tool_uses[0].input == {"query": "q"}
    assert model.chat([Msg.user("q")]).text == "answer after 1 messages"
    assert model.remaining is None


def test_callable_steps_and_extend() -> None:
    model = ScriptedModel([lambda messages, tools: messages[-1].text.upper()])
    assert model.chat([Msg.user("loud")]).text == "LOUD"
    model.extend("more")
    assert model.chat([]).text == "more"
    with pytest.raises(TypeError, match="cannot extend"):
        ScriptedModel.echo().extend("x")


def test_exception_steps_and_fail_at_keep_the_script() -> None:
    model = ScriptedModel(
        [ValueError("bad step"), TimeoutError, "ok"], fail_at={2: ModelError("injected")}
    )
    with pytest.raises(ValueError, match="bad step"):
        model.chat([])
    with pytest.raises(TimeoutError, match="scripted failure at call #1"):
        model.chat([])
    with pytest.raises(ModelError, match="injected"):
        model.chat([])
    assert model.chat([]).text == "ok"  # the injected failure did not consume "ok"


def test_delay_and_timeout() -> None:
    model = ScriptedModel(["slow"], delay=0.05)
    start = time.monotonic()
    assert model.chat([]).text == "slow"
    assert time.monotonic() - start >= 0.05
    sleepy = ScriptedModel(["never"], delay=300.0)
    start = time.monotonic()
    with pytest.raises(ModelError, match=r"timed out after 0\.01s"):
        sleepy.chat([], timeout=0.01)
    assert time.monotonic() - start < 60  # cut short at the timeout, not 300 s


def test_hang_honours_timeout_or_replies_late() -> None:
    model = ScriptedModel([Hang(300), Hang(0.01, reply="late"), Hang(0.01)])
    start = time.monotonic()
    with pytest.raises(ModelError, match="timed out"):
        model.chat([], timeout=0.05)
    assert time.monotonic() - start < 60  # not 300 s
    assert model.chat([]).text == "late"
    with pytest.raises(ModelError, match=r"hung for 0\.01s without replying"):
        model.chat([])


def test_async_chat_awaits_async_functions_and_sleeps_without_blocking() -> None:
    async def brain(messages: Sequence[Msg], tools: Sequence[ToolSpec] | None) -> str:
        await asyncio.sleep(0)
        return "async " + messages[-1].text

    order: list[str] = []

    async def slow_call() -> None:
        reply = await ScriptedModel(["done"], delay=0.1).achat([])
        order.append(reply.text)

    async def ticker() -> None:
        for _ in range(3):
            await asyncio.sleep(0.005)
            order.append("tick")

    async def main() -> str:
        await asyncio.gather(slow_call(), ticker())
        return (await ScriptedModel(brain).achat([Msg.user("hi")])).text

    assert asyncio.run(main()) == "async hi"
    assert order == ["tick", "tick", "tick", "done"]  # the delay did not block the loop


def test_async_hang_times_out() -> None:
    model = ScriptedModel.hanging()
    with pytest.raises(ModelError, match="timed out"):
        asyncio.run(model.achat([], timeout=0.02))
    with pytest.raises(ModelError, match="timed out"):
        model.chat([], timeout=0.01)  # cycle: every call hangs
    assert model.call_count == 2


def test_sync_chat_rejects_async_function_clearly() -> None:
    async def brain(messages: Sequence[Msg], tools: Sequence[ToolSpec] | None) -> str:
        return "x"

    with pytest.raises(TypeError, match="call achat"):
        ScriptedModel(brain).chat([])


def test_helpers() -> None:
    model = ScriptedModel.tool_then_answer("search", {"query": "x"}, "found it", call_id="c9")
    first = model.chat([Msg.user("find x")])
    assert first.tool_uses[0].id == "c9" and first.tool_uses[0].name == "search"
    assert model.chat([]).text == "found it"

    echo = ScriptedModel.echo(prefix="you said: ")
    assert echo.chat([Msg.user("one"), Msg.assistant("a")]).text == "you said: one"
    assert echo.chat([]).text == "you said: "

    failing = ScriptedModel.failing(name="broken")
    with pytest.raises(ModelError, match="scripted model failure"):
        failing.chat([])
    with pytest.raises(KeyError):
        ScriptedModel.failing(KeyError("k")).chat([])
    assert failing.name == "broken"
    assert "broken" in repr(failing)


def test_cycle_repeats_the_script() -> None:
    model = ScriptedModel(["a", "b"], cycle=True)
    assert [model.chat([]).text for _ in range(5)] == ["a", "b", "a", "b", "a"]
    assert model.remaining is None
    with pytest.raises(ScriptExhaustedError):
        ScriptedModel([], cycle=True).chat([])


def test_bad_results_are_type_errors() -> None:
    with pytest.raises(TypeError, match="produced int, expected Msg or str"):
        ScriptedModel([lambda m, t: 42]).chat([])  # type: ignore[list-item,return-value]
    with pytest.raises(TypeError, match=r"unsupported script step 3\.5"):
        ScriptedModel([3.5]).chat([])  # type: ignore[list-item]
    with pytest.raises(IndexError, match="never called"):
        _ = ScriptedModel([]).last_call


def test_thread_safe_under_concurrent_calls() -> None:
    model = ScriptedModel([str(i) for i in range(200)])
    out: list[str] = []
    lock = threading.Lock()

    def worker() -> None:
        for _ in range(50):
            text = model.chat([]).text
            with lock:
                out.append(text)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(out, key=int) == [str(i) for i in range(200)]
    assert [c.index for c in model.calls] == list(range(200))

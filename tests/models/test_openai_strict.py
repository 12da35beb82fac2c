"""The OpenAI adapter and the agent against the strict server (llama.cpp's request rules)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import httpx
import pytest

from actormem import MemoryRuntime, Msg
from actormem.agent import ReActAgent
from actormem.models.base import MalformedToolCallError, ModelError
from actormem.models.openai import OpenAIChatModel
from tests._strict_openai import Answer, Invalid, Request, strict_server, validate

WEATHER = {"Lisbon": "sunny, 24 C"}


def get_weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: the city's name.
    """
    return WEATHER.get(city, f"no data for {city}")


def weather_brain(req: Request) -> Answer:
    """Calls get_weather when offered tools, then answers from its result."""
    if req.last_tool_results:
        result = req.last_tool_results[-1]
        if result.startswith("Error"):
            return Answer(tool_calls=[("get_weather", '{"city": "Lisbon"}')])
        return Answer(text=f"The weather: {result}")
    if req.tools:
        return Answer(tool_calls=[("get_weather", '{"city": "Lisbon, Portugal"}')])
    return Answer(text="I have no tools.")


def model(url: str, **kw: object) -> OpenAIChatModel:
    return OpenAIChatModel(url, "strict", max_retries=0, backoff=0.01, **kw)  # type: ignore[arg-type]


def test_strict_server_refuses_what_llama_cpp_refuses() -> None:
    base = [{"role": "user", "content": "hi"}]
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    cases = [
        ([*base, {"role": "assistant", "content": None, "tool_calls": [call]}], 500, "string"),
        ([*base, {"role": "tool", "tool_call_id": "zz", "content": "x"}], 400, "no tool call"),
        (
            [*base, {"role": "assistant", "content": "", "tool_calls": [call]}, *base],
            400,
            "no tool message",
        ),
        (
            [
                *base,
                {"role": "assistant", "content": "", "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c1", "content": "1"},
                {"role": "tool", "tool_call_id": "c1", "content": "2"},
            ],
            400,
            "answered twice",
        ),
    ]
    for messages, status, needle in cases:
        with pytest.raises(Invalid) as info:
            validate({"model": "m", "messages": messages})
        assert info.value.status == status and needle in info.value.message
    with pytest.raises(Invalid, match="no tools"):
        validate({"messages": base, "tool_choice": "auto"})
    # Tools without tool_choice are not offered (chatml-function-calling).
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    assert validate({"messages": base, "tools": tools}).tools is None
    assert validate({"messages": base, "tools": tools, "tool_choice": "auto"}).tools == tools


def test_tool_round_trip_passes_strict_validation(tmp_path: Path) -> None:
    brain_calls: list[Request] = []

    def brain(req: Request) -> Answer:
        brain_calls.append(req)
        if req.last_tool_results:
            return Answer(text=f"The weather: {req.last_tool_results[-1]}")
        return Answer(tool_calls=[("get_weather", '{"city": "Lisbon"}')])

    with strict_server(brain) as srv, MemoryRuntime(session_dir=tmp_path / "s") as rt:
        agent = ReActAgent("bot", model(srv.url), rt, tools=[get_weather])
        out = agent.reply("weather in Lisbon?")
        assert srv.refused == []
        assert out.text == "The weather: sunny, 24 C"
        assert [r["tool_choice"] for r in srv.requests] == ["auto", "auto"]
        follow_up = srv.requests[1]["messages"]
        call_msg = next(m for m in follow_up if m.get("tool_calls"))
        assert call_msg["content"] == ""  # a string, never null


def test_tool_choice_is_overridable_and_none_means_tools_are_ignored(tmp_path: Path) -> None:
    with strict_server(weather_brain) as srv:
        plain = model(srv.url, tool_choice=None)
        tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}]
        assert plain.chat([Msg.user("hi")], tools=tools).text == "I have no tools."
        assert "tool_choice" not in srv.requests[-1]
        forced = model(srv.url, extra_body={"tool_choice": "required"})
        reply = forced.chat([Msg.user("hi")], tools=tools)
        assert srv.requests[-1]["tool_choice"] == "required"
        assert reply.tool_uses[0].name == "get_weather"
        # No tools: no tool_choice (a strict server refuses tool_choice alone).
        assert model(srv.url).chat([Msg.user("hi")]).text == "I have no tools."
        assert "tool_choice" not in srv.requests[-1] and srv.refused == []


def test_truncated_tool_call_is_named_and_its_usage_counted() -> None:
    with strict_server(weather_brain) as srv:
        m = model(srv.url, extra_body={"max_tokens": 5})
        tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}]
        with pytest.raises(MalformedToolCallError) as info:
            m.chat([Msg.user("weather?")], tools=tools)
        err = info.value
        assert err.truncated and err.finish_reason == "length"
        assert "finish_reason=length" in str(err) and "not valid JSON" in str(err)
        assert err.calls[0].name == "get_weather" and err.calls[0].arguments.startswith('{"city')
        assert err.usage is not None and err.usage["completion_tokens"] == 5
        assert m.total_usage["completion_tokens"] == 5  # the failed call still cost tokens
        assert isinstance(err, ModelError)


def test_truncation_is_named_when_the_server_says_tool_calls() -> None:
    with strict_server(weather_brain, cut_calls_say_tool_calls=True) as srv:
        m = model(srv.url, extra_body={"max_tokens": 5})
        tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}]
        with pytest.raises(MalformedToolCallError) as info:
            m.chat([Msg.user("weather?")], tools=tools)
        assert info.value.truncated
        assert "used all 5 max_tokens (the server said finish_reason=tool_calls)" in str(info.value)


def test_agent_gives_a_malformed_call_back_to_the_model(tmp_path: Path) -> None:
    ran: list[str] = []

    def weather(city: str) -> str:
        """The weather in a city.

        Args:
            city: the city's name.
        """
        ran.append(city)
        return get_weather(city)

    weather.__name__ = "get_weather"
    with strict_server(weather_brain) as srv, MemoryRuntime(session_dir=tmp_path / "s") as rt:
        m = model(srv.url, extra_body={"max_tokens": 5})
        agent = ReActAgent("bot", m, rt, tools=[weather], max_iters=4)
        out = agent.reply("weather in Lisbon?")
        assert srv.refused == []
        # 1: cut at max_tokens; 2: corrected after seeing the error; 3: the answer.
        assert len(srv.requests) == 3
        assert ran == ["Lisbon"]
        assert out.text.startswith("The weather: sunn")  # the answer, cut at 5 tokens too
        error = [m for m in srv.requests[1]["messages"] if m["role"] == "tool"][-1]["content"]
        assert "not valid JSON" in error and "cut off at the token limit" in error
        assert m.total_usage["completion_tokens"] == 5 + 5 + 5
        assert agent.status.state == "idle"


def test_stream_against_the_strict_server() -> None:
    text = "streamed " * 20
    with strict_server(lambda req: Answer(text=text)) as srv:
        assert "".join(model(srv.url).stream([Msg.user("hi")])) == text
        assert srv.requests[-1]["stream"] is True


def test_total_timeout_bounds_all_attempts_together() -> None:
    release = threading.Event()
    with strict_server(lambda req: Answer(text="late", hold=release)) as srv:
        m = OpenAIChatModel(
            srv.url, "strict", timeout=0.2, max_retries=20, backoff=0.01, total_timeout=0.6
        )
        try:
            with pytest.raises(ModelError, match=r"call's limit|no time left"):
                m.chat([Msg.user("hi")])
        finally:
            release.set()
        # Twenty retries of 0.2 s were allowed per attempt; the total deadline cut them short.
        assert 1 <= len(srv.requests) <= 4
    with pytest.raises(ValueError, match="total_timeout"):
        OpenAIChatModel("http://127.0.0.1:1/v1", "m", total_timeout=0)


def test_raw_null_content_gets_the_llama_cpp_error() -> None:
    with strict_server(weather_brain) as srv:
        body = {
            "model": "m",
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": None},
            ],
        }
        r = httpx.post(srv.url + "/chat/completions", content=json.dumps(body))
        assert r.status_code == 500 and "valid string" in r.text

"""Tests for actormem.models.openai against a real chat-completions server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import email.utils
import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from structlog.testing import capture_logs

from actormem.agent.tools import tool
from actormem.messages import Msg
from actormem.models.base import ChatModel, ModelError
from actormem.models.openai import OpenAIChatModel

API_KEY = "sk-test-0123456789abcdef-SECRET"


@dataclasses.dataclass
class Reply:
    """One scripted HTTP response of the fake server."""

    status: int = 200
    body: Any = None  # dict/list -> JSON, bytes/str -> as is
    headers: dict[str, str] = dataclasses.field(default_factory=dict)
    delay: float = 0.0
    sse: list[str] | None = None  # data payloads of a text/event-stream reply
    drop: bool = False  # close the connection without answering


@dataclasses.dataclass
class Seen:
    """One request the fake server received."""

    path: str
    headers: dict[str, str]
    body: Any


class FakeServer:
    """A ThreadingHTTPServer speaking chat completions with scripted replies."""

    def __init__(self) -> None:
        self.replies: collections.deque[Reply] = collections.deque()
        self.requests: list[Seen] = []
        self.stop = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                try:
                    body: Any = json.loads(raw)
                except ValueError:
                    body = raw
                server.requests.append(
                    Seen(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                )
                reply = server.replies.popleft() if server.replies else Reply(500, "no reply")
                if reply.drop or (reply.delay and server.stop.wait(reply.delay)):
                    return
                # The client may have given up (timeout tests).
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self._send(reply)

            def _send(self, reply: Reply) -> None:
                if reply.sse is not None:
                    data = "".join(f"data: {p}\n\n" for p in reply.sse).encode()
                    ctype = "text/event-stream"
                elif isinstance(reply.body, dict | list):
                    data, ctype = json.dumps(reply.body).encode(), "application/json"
                else:
                    body = reply.body or b""
                    data = body.encode() if isinstance(body, str) else body
                    ctype = "application/json"
                self.send_response(reply.status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                for k, v in reply.headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.block_on_close = False
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def add(self, *replies: Reply) -> None:
        self.replies.extend(replies)


@pytest.fixture
def server() -> Iterator[FakeServer]:
    srv = FakeServer()
    srv.thread.start()
    yield srv
    srv.stop.set()
    srv.httpd.shutdown()
    srv.httpd.server_close()
    srv.thread.join(timeout=5)


def completion(
    content: str | None = "Hello!",
    tool_calls: list[dict[str, Any]] | None = None,
    usage: dict[str, int] | None = None,
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    body: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "served-model",
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if tool_calls else "stop",
            }
        ],
    }
    if usage is not None:
        body["usage"] = usage
    return body


def make(server: FakeServer, **kwargs: Any) -> OpenAIChatModel:
    options: dict[str, Any] = {"timeout": 60.0, "max_retries": 2, "backoff": 0.01}
    options.update(kwargs)
    return OpenAIChatModel(server.url, "test-model", **options)


# -- plain replies and tools -----------------------------------------------------------


def test_plain_text_reply_with_usage(server: FakeServer) -> None:
    usage = {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}
    server.add(Reply(body=completion("Hi there.", usage=usage)))
    with make(server, extra_body={"temperature": 0.2}) as model:
        assert isinstance(model, ChatModel)
        reply = model.chat([Msg.system("Be brief."), Msg.user("hello")])
    assert reply.role == "assistant" and reply.text == "Hi there."
    assert reply.metadata["usage"] == usage
    assert reply.metadata["model"] == "served-model"
    assert reply.metadata["finish_reason"] == "stop"
    assert model.total_usage == usage
    (seen,) = server.requests
    assert seen.path == "/v1/chat/completions"
    assert seen.body["model"] == "test-model"
    assert seen.body["temperature"] == 0.2
    assert seen.body["stream"] is False
    assert "tools" not in seen.body
    assert seen.body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hello"},
    ]
    assert "authorization" not in seen.headers  # no key, no header


def test_tool_calls_both_ways(server: FakeServer) -> None:
    @tool
    def get_weather(city: str, unit: str = "C") -> str:
        """Current weather.

        Args:
            city: the city name.
        """
        return "sunny"

    server.add(
        Reply(
            body=completion(
                None,
                tool_calls=[
                    {
                        "id": "call_b",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                    },
                    {
                        "id": "call_c",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": ""},
                    },
                ],
            )
        )
    )
    history = [
        Msg.user("weather in Paris and Oslo?"),
        Msg.tool_call("get_weather", {"city": "Paris"}, call_id="call_a", text="Checking."),
        Msg.tool_result("call_a", "rainy", name="get_weather"),
    ]
    reply = make(server).chat(history, tools=[get_weather.spec()])
    b, c = reply.tool_uses
    assert (b.id, b.name, b.input) == ("call_b", "get_weather", {"city": "Oslo"})
    assert (c.id, c.input) == ("call_c", {})
    assert reply.text == "" and reply.metadata["finish_reason"] == "tool_calls"
    assert "usage" not in reply.metadata  # the server sent none

    body = server.requests[0].body
    assert body["tools"] == [get_weather.spec()]
    assert body["tools"][0]["function"]["parameters"]["required"] == ["city"]
    user, assistant, tool_msg = body["messages"]
    assert user == {"role": "user", "content": "weather in Paris and Oslo?"}
    assert assistant["role"] == "assistant" and assistant["content"] == "Checking."
    (call,) = assistant["tool_calls"]
    assert call["id"] == "call_a" and call["type"] == "function"
    assert call["function"]["name"] == "get_weather"
    assert json.loads(call["function"]["arguments"]) == {"city": "Paris"}
    assert tool_msg == {"role": "tool", "tool_call_id": "call_a", "content": "rainy"}


def test_url_forms(server: FakeServer) -> None:
    server.add(Reply(body=completion()), Reply(body=completion()))
    OpenAIChatModel(server.url + "/", "m").chat([Msg.user("a")])
    OpenAIChatModel(server.url + "/chat/completions", "m").chat([Msg.user("a")])
    assert [r.path for r in server.requests] == ["/v1/chat/completions"] * 2


# -- retries ------------------------------------------------------------------------------


def test_429_then_success_honours_retry_after(server: FakeServer) -> None:
    server.add(
        Reply(429, {"error": {"message": "slow down"}}, headers={"Retry-After": "0.3"}),
        Reply(body=completion("finally")),
    )
    start = time.monotonic()
    with capture_logs() as logs:
        reply = make(server, backoff=0.001).chat([Msg.user("hi")])
    assert reply.text == "finally"
    assert time.monotonic() - start >= 0.3  # waited as the server asked, not 1 ms
    assert len(server.requests) == 2
    (retry,) = [e for e in logs if e["event"] == "model_retry"]
    assert retry["log_level"] == "warning" and retry["attempt"] == 1
    assert "HTTP 429" in retry["reason"] and "slow down" in retry["reason"]
    assert retry["delay_s"] >= 0.3


def test_500_then_success(server: FakeServer) -> None:
    server.add(Reply(500, "internal error"), Reply(502, "bad gateway"), Reply(body=completion()))
    reply = make(server).chat([Msg.user("hi")])
    assert reply.text == "Hello!"
    assert len(server.requests) == 3
    assert server.requests[0].body == server.requests[2].body  # the same request again


def test_persistent_5xx_gives_up_after_max_retries(server: FakeServer) -> None:
    server.add(*[Reply(503, {"error": "overloaded"})] * 5)
    with pytest.raises(ModelError) as info:
        make(server, max_retries=2).chat([Msg.user("hi")])
    assert len(server.requests) == 3
    text = str(info.value)
    assert server.url in text and "HTTP 503" in text and "overloaded" in text
    assert "gave up after 3 attempt(s)" in text


def test_timeout_raises_model_error_after_retries(server: FakeServer) -> None:
    # The server would answer after 120 s (released at teardown): the bound
    # below is generous for a loaded machine, and still far below a wait.
    server.add(*[Reply(delay=120.0, body=completion())] * 2)
    model = make(server, timeout=0.2, max_retries=1)
    start = time.monotonic()
    with capture_logs() as logs, pytest.raises(ModelError, match=r"timed out after 0\.2s"):
        model.chat([Msg.user("hi")])
    assert time.monotonic() - start < 60
    assert len(server.requests) == 2
    assert [e["event"] for e in logs] == ["model_retry", "model_call_failed"]


def test_call_timeout_bounds_the_whole_call(server: FakeServer) -> None:
    server.add(*[Reply(delay=120.0, body=completion())] * 3)
    model = make(server, timeout=100, max_retries=5)
    start = time.monotonic()
    with pytest.raises(ModelError, match="timed out"):
        model.chat([Msg.user("hi")], timeout=0.3)
    assert time.monotonic() - start < 60  # not 100 s a try, 6 tries


def test_connection_refused_is_retried_then_reported() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    model = OpenAIChatModel(f"http://127.0.0.1:{port}/v1", "m", max_retries=1, backoff=0.01)
    with pytest.raises(ModelError, match="cannot connect") as info:
        model.chat([Msg.user("hi")])
    assert "gave up after 2 attempt(s)" in str(info.value)


def test_dropped_connection_is_retried_and_http_date_retry_after(server: FakeServer) -> None:
    past = email.utils.formatdate(time.time() - 60, usegmt=True)
    server.add(
        Reply(drop=True),
        Reply(503, "later", headers={"Retry-After": past}),
        Reply(body=completion("back")),
    )
    with capture_logs() as logs:
        assert make(server).chat([Msg.user("hi")]).text == "back"
    reasons = [e["reason"] for e in logs if e["event"] == "model_retry"]
    assert "RemoteProtocolError" in reasons[0] and "HTTP 503" in reasons[1]


def test_retry_after_longer_than_max_backoff_fails_at_once(server: FakeServer) -> None:
    server.add(Reply(429, "quota", headers={"Retry-After": "120"}), Reply(body=completion()))
    start = time.monotonic()
    with pytest.raises(ModelError, match="retry after 120s"):
        make(server, max_backoff=5).chat([Msg.user("hi")])
    assert time.monotonic() - start < 60 and len(server.requests) == 1  # no 120 s wait


# -- unusable replies and refusals ----------------------------------------------------------


def test_malformed_json_is_a_model_error(server: FakeServer) -> None:
    server.add(Reply(body='{"choices": [ {"message": '), Reply(body=completion()))
    with pytest.raises(ModelError) as info:
        make(server).chat([Msg.user("hi")])
    text = str(info.value)
    assert server.url in text and "malformed JSON" in text and '{"choices"' in text
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ({"object": "chat.completion"}, "the reply has no choices"),
        ({"choices": []}, "the reply has no choices"),
        ({"choices": [{"index": 0}]}, "choices[0] of the reply has no message object"),
        ([1, 2], "the reply is not a JSON object but list"),
        ({"error": {"message": "model not loaded"}}, "the server returned an error: model not"),
        (
            completion(None, tool_calls=[{"id": "x", "function": {"name": "f", "arguments": "{"}}]),
            "1 tool call(s) unusable: f: the arguments are not valid JSON",
        ),
        (
            completion(None, tool_calls=[{"id": "x", "function": "f"}]),
            "the reply message is unusable",
        ),
        (
            {"choices": [{"message": {"role": "tool", "tool_call_id": "x", "content": "?"}}]},
            "the reply message has role 'tool', expected 'assistant'",
        ),
    ],
)
def test_unusable_replies_are_model_errors(server: FakeServer, body: Any, problem: str) -> None:
    server.add(Reply(body=body))
    with pytest.raises(ModelError) as info:
        make(server).chat([Msg.user("hi")])
    assert problem in str(info.value)
    assert server.url in str(info.value)


def test_400_is_not_retried(server: FakeServer) -> None:
    server.add(
        Reply(400, {"error": {"message": "'tools' is not supported by this model"}}),
        Reply(body=completion()),
    )
    with capture_logs() as logs, pytest.raises(ModelError) as info:
        make(server).chat([Msg.user("hi")])
    assert len(server.requests) == 1
    text = str(info.value)
    assert "refused the request: HTTP 400 Bad Request" in text
    assert "'tools' is not supported" in text
    assert [e["event"] for e in logs] == ["model_request_refused"]


# -- async ---------------------------------------------------------------------------------


def test_async_chat_with_retry_and_tools(server: FakeServer) -> None:
    server.add(
        Reply(503, "busy"),
        Reply(
            body=completion(
                "Let me look.",
                tool_calls=[
                    {"id": "c1", "function": {"name": "search", "arguments": '{"q": "x"}'}}
                ],
                usage={"prompt_tokens": 5, "completion_tokens": 7},
            )
        ),
    )

    async def main() -> Msg:
        return await make(server).achat([Msg.user("find x")], tools=[], timeout=60)

    reply = asyncio.run(main())
    assert reply.text == "Let me look."
    assert reply.tool_uses[0].input == {"q": "x"}
    assert reply.metadata["usage"] == {
        "prompt_tokens": 5,
        "completion_tokens": 7,
        "total_tokens": 12,
    }
    assert len(server.requests) == 2
    assert "tools" not in server.requests[1].body  # an empty tool list is not sent


def test_async_timeout_and_shared_client(server: FakeServer) -> None:
    server.add(Reply(delay=120.0), Reply(delay=120.0), Reply(body=completion("shared")))

    async def main() -> str:
        model = make(server, timeout=0.2, max_retries=1)
        start = time.monotonic()
        with pytest.raises(ModelError, match="timed out"):
            await model.achat([Msg.user("hi")])
        assert time.monotonic() - start < 60  # not the server's 120 s
        async with httpx.AsyncClient() as client:
            shared = make(server, async_client=client)
            return (await shared.achat([Msg.user("hi")])).text

    assert asyncio.run(main()) == "shared"


# -- streaming ------------------------------------------------------------------------------


def chunk(text: str) -> str:
    return json.dumps({"choices": [{"index": 0, "delta": {"content": text}}]})


def test_stream_yields_text_pieces(server: FakeServer) -> None:
    role_only = json.dumps({"choices": [{"index": 0, "delta": {"role": "assistant"}}]})
    usage_only = json.dumps({"choices": [], "usage": {"prompt_tokens": 1}})
    server.add(
        Reply(503, "warming up"),
        Reply(sse=[role_only, chunk("Hel"), chunk("lo"), chunk(""), usage_only, "[DONE]"]),
    )
    pieces = list(make(server).stream([Msg.user("hi")]))
    assert pieces == ["Hel", "lo"]
    assert server.requests[-1].body["stream"] is True
    assert server.requests[-1].headers["accept"] == "text/event-stream"


def test_stream_falls_back_to_json_and_reports_broken_events(server: FakeServer) -> None:
    server.add(Reply(body=completion("whole")), Reply(sse=[chunk("a"), "{not json"]))
    model = make(server)
    assert list(model.stream([Msg.user("hi")])) == ["whole"]
    got: list[str] = []
    with pytest.raises(ModelError, match="a stream event is malformed JSON"):
        for piece in model.stream([Msg.user("hi")]):
            got.append(piece)
    assert got == ["a"]


def test_async_stream(server: FakeServer) -> None:
    server.add(Reply(sse=[chunk("one "), chunk("two"), "[DONE]"]))

    async def main() -> list[str]:
        return [p async for p in make(server).astream([Msg.user("hi")])]

    assert asyncio.run(main()) == ["one ", "two"]


# -- the API key ------------------------------------------------------------------------------


def test_api_key_is_sent_but_never_logged_or_shown(server: FakeServer) -> None:
    server.add(
        Reply(500, f"upstream rejected key {API_KEY}"),
        Reply(body=completion("ok")),
        Reply(401, {"error": {"message": f"Incorrect API key provided: {API_KEY}"}}),
    )
    model = OpenAIChatModel(
        server.url, "m", api_key=API_KEY, max_retries=2, backoff=0.01, headers={"X-Org": "o"}
    )
    with capture_logs() as logs:
        assert model.chat([Msg.user("hi")]).text == "ok"
        with pytest.raises(ModelError) as info:
            model.chat([Msg.user("hi")])
    assert all(r.headers["authorization"] == f"Bearer {API_KEY}" for r in server.requests)
    assert server.requests[0].headers["x-org"] == "o"
    assert {e["event"] for e in logs} >= {"model_retry", "model_request_refused"}
    assert API_KEY not in repr(logs)
    assert API_KEY not in str(info.value) and "HTTP 401" in str(info.value)
    assert API_KEY not in repr(model) and "api_key='***'" in repr(model)
    assert API_KEY not in repr(vars(model))


def test_credentials_in_base_url_are_not_shown() -> None:
    model = OpenAIChatModel("http://user:pw@127.0.0.1:9/v1?key=abc", "m")
    assert "pw" not in repr(model) and "abc" not in repr(model)
    assert "api_key=None" in repr(model)


def test_constructor_validation() -> None:
    with pytest.raises(ValueError, match="base_url"):
        OpenAIChatModel("", "m")
    with pytest.raises(ValueError, match="timeout"):
        OpenAIChatModel("http://x/v1", "m", timeout=0)
    with pytest.raises(ValueError, match="max_retries"):
        OpenAIChatModel("http://x/v1", "m", max_retries=-1)
    with pytest.raises(ValueError, match="must start with http:// or https://"):
        OpenAIChatModel("localhost:8000/v1", "m")


def test_close_keeps_a_client_passed_in(server: FakeServer) -> None:
    server.add(Reply(body=completion()), Reply(body=completion()))
    with httpx.Client() as client:
        model = make(server, client=client)
        model.chat([Msg.user("a")])
        model.close()
        assert not client.is_closed
        model.chat([Msg.user("b")])
    own = make(server)
    own.close()  # never used: nothing to close

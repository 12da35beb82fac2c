"""A strict OpenAI-compatible chat server for tests, modelled on llama.cpp's server.

The permissive test servers beside it (``tests/models/test_openai.py``,
``tests/test_cli_chat.py``) accept whatever they are sent.  Real servers do
not: llama-cpp-python's server validates each request with typed models, and
ignores tools unless ``tool_choice`` asks for them.  This one does the same, so
a request that a real server would refuse fails here first:

* an assistant message's ``content`` must be a string (``null`` gives HTTP
  500 "Input should be a valid string", as llama-cpp-python 0.3.36 answers);
* every ``role: tool`` message must answer a tool call of the assistant
  message before it, by id, once; every call must be answered before the
  conversation goes on (HTTP 400 otherwise);
* tools are offered to the brain only when ``tool_choice`` is ``auto``,
  ``required`` or names one of them (llama.cpp's ``chatml-function-calling``
  ignores tools without it);
* ``max_tokens`` is honoured: a reply longer than that is cut, tool-call
  arguments included, with ``finish_reason: "length"``;
* ``serial=True`` serves one generation at a time like llama.cpp, and a
  streamed generation stops when another request is waiting (llama-cpp-python's
  ``interrupt_requests``) or the client goes away.

A *brain* (a function of the validated request) decides each answer, so tests
script behaviour without a model.  A token is four characters here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["Answer", "Request", "StrictOpenAIServer", "strict_server"]

CHARS_PER_TOKEN = 4
_ROLES = frozenset({"system", "user", "assistant", "tool"})


class Invalid(Exception):
    """A request the real server would refuse."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclasses.dataclass
class Request:
    """One validated request, as the brain sees it."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None  # None when tool_choice did not ask for them
    tool_choice: Any
    max_tokens: int | None
    stream: bool
    body: dict[str, Any]

    @property
    def last_user(self) -> str:
        for m in reversed(self.messages):
            if m["role"] == "user":
                return _text(m.get("content"))
        return ""

    @property
    def last_tool_results(self) -> list[str]:
        out: list[str] = []
        for m in reversed(self.messages):
            if m["role"] != "tool":
                break
            out.append(_text(m.get("content")))
        return out[::-1]

    @property
    def prompt_text(self) -> str:
        return "\n".join(_text(m.get("content")) for m in self.messages)


@dataclasses.dataclass
class Answer:
    """What the brain wants to say: text and/or tool calls ``(name, raw arguments)``."""

    text: str = ""
    tool_calls: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    hold: threading.Event | None = None  # the server waits on it before answering
    token_delay: float | None = None  # seconds per generated token (default: the server's)


Brain = Callable[[Request], Answer]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def _loc(i: int, field: str) -> str:
    return f"messages.{i}.{field}"


def validate(body: Any) -> Request:
    """Check a request body the way llama.cpp's server does; raise :class:`Invalid`."""
    if not isinstance(body, dict):
        raise Invalid(422, "the request body must be a JSON object")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise Invalid(422, "messages: Field required (a non-empty list)")
    open_calls: dict[str, str] = {}  # id -> name, calls not answered yet
    answered: set[str] = set()
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise Invalid(422, f"{_loc(i, '')}: Input should be an object")
        role = m.get("role")
        if role not in _ROLES:
            raise Invalid(422, f"{_loc(i, 'role')}: Input should be one of {sorted(_ROLES)}")
        content = m.get("content")
        if role == "assistant":
            if "content" in m and not isinstance(content, str):
                # llama-cpp-python 0.3.36 answers this with HTTP 500.
                raise Invalid(500, f"{_loc(i, 'content')}: Input should be a valid string")
        elif role in ("system", "tool"):
            if not isinstance(content, str):
                raise Invalid(422, f"{_loc(i, 'content')}: Input should be a valid string")
        elif not isinstance(content, str | list):
            raise Invalid(422, f"{_loc(i, 'content')}: Input should be a string or a list")
        if role == "tool":
            call_id = m.get("tool_call_id")
            if not isinstance(call_id, str):
                raise Invalid(422, f"{_loc(i, 'tool_call_id')}: Field required")
            if call_id not in open_calls:
                why = "answered twice" if call_id in answered else "matches no tool call before it"
                raise Invalid(400, f"{_loc(i, 'tool_call_id')}: {call_id!r} {why}")
            del open_calls[call_id]
            answered.add(call_id)
            continue
        if open_calls:
            raise Invalid(
                400,
                f"messages.{i}: tool call(s) {sorted(open_calls)} have no tool message "
                "answering them",
            )
        if role == "assistant":
            for j, call in enumerate(m.get("tool_calls") or ()):
                fn = call.get("function") if isinstance(call, dict) else None
                if (
                    not isinstance(call, dict)
                    or not isinstance(call.get("id"), str)
                    or not isinstance(fn, dict)
                    or not isinstance(fn.get("name"), str)
                    or not isinstance(fn.get("arguments"), str)
                ):
                    raise Invalid(
                        422,
                        f"{_loc(i, f'tool_calls.{j}')}: needs id, function.name and "
                        "function.arguments (a string)",
                    )
                open_calls[call["id"]] = fn["name"]
    tools = body.get("tools")
    names: set[str] = set()
    if tools is not None:
        if not isinstance(tools, list):
            raise Invalid(422, "tools: Input should be a valid list")
        for k, t in enumerate(tools):
            fn = t.get("function") if isinstance(t, dict) else None
            if not isinstance(t, dict) or t.get("type") != "function" or not isinstance(fn, dict):
                raise Invalid(422, f"tools.{k}: must be {{'type': 'function', 'function': ...}}")
            if not isinstance(fn.get("name"), str):
                raise Invalid(422, f"tools.{k}.function.name: Field required")
            names.add(fn["name"])
    choice = body.get("tool_choice")
    if choice is not None:
        if isinstance(choice, str):
            if choice not in ("none", "auto", "required"):
                raise Invalid(422, f"tool_choice: unknown value {choice!r}")
        elif isinstance(choice, dict):
            picked = (choice.get("function") or {}).get("name")
            if picked not in names:
                raise Invalid(400, f"tool_choice names {picked!r}, which is not among the tools")
        else:
            raise Invalid(422, "tool_choice: Input should be a string or an object")
        if not tools and choice != "none":
            raise Invalid(400, "tool_choice is set but no tools are given")
    max_tokens = body.get("max_tokens")
    if max_tokens is not None and (
        not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1
    ):
        raise Invalid(422, "max_tokens: Input should be a positive integer")
    temperature = body.get("temperature")
    if temperature is not None and (
        not isinstance(temperature, int | float) or not 0 <= temperature <= 2
    ):
        raise Invalid(422, "temperature: Input should be a number from 0 to 2")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise Invalid(422, "stream: Input should be a valid boolean")
    offered = tools if tools and choice not in (None, "none") else None
    return Request(messages, offered, choice, max_tokens, stream, body)


class StrictOpenAIServer:
    """A ThreadingHTTPServer on 127.0.0.1 answering with a brain, validated strictly.

    Attributes:
        requests: every request body received, in order.
        refused: ``(status, message)`` of every request it refused.
        max_concurrent: the most generations that ran at once.
        interrupted: streamed generations stopped early (another request waiting,
            or the client gone).
        generations: ``(label, tokens sent, tokens in the answer)`` of every
            finished generation, in the order they ended; ``label`` is the start
            of the last user message.
    """

    def __init__(
        self,
        brain: Brain,
        *,
        serial: bool = False,
        token_delay: float = 0.0,
        cut_calls_say_tool_calls: bool = False,
    ) -> None:
        self.brain = brain
        # llama.cpp's server answers finish_reason "tool_calls" even when
        # max_tokens cut the call's arguments.
        self.cut_calls_say_tool_calls = cut_calls_say_tool_calls
        self.serial = serial
        self.token_delay = token_delay
        self.requests: list[dict[str, Any]] = []
        self.refused: list[tuple[int, str]] = []
        self.max_concurrent = 0
        self.interrupted = 0
        self.generations: list[tuple[str, int, int]] = []
        self._running = 0
        self._waiting = 0
        self._state = threading.Lock()
        self._gen = threading.Lock()
        self.started = threading.Condition()  # notified when a request arrives
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                with server.started:
                    server.requests.append(body)
                    server.started.notify_all()
                if not self.path.endswith("/chat/completions"):
                    self._json(404, {"detail": "Not Found"})
                    return
                try:
                    req = validate(body)
                except Invalid as exc:
                    server.refused.append((exc.status, exc.message))
                    self._json(exc.status, {"error": {"message": exc.message, "code": exc.status}})
                    return
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    server._answer(self, req)

            def _json(self, status: int, data: Any) -> None:
                out = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.block_on_close = False
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def start(self) -> StrictOpenAIServer:
        self._thread.start()
        return self

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(timeout=5)

    def wait_requests(self, n: int, timeout: float = 60.0) -> bool:
        """Wait until at least ``n`` requests arrived."""
        with self.started:
            return self.started.wait_for(lambda: len(self.requests) >= n, timeout)

    # -- generation ---------------------------------------------------------------------

    @contextlib.contextmanager
    def _slot(self) -> Iterator[None]:
        if self.serial:
            with self._state:
                self._waiting += 1
            self._gen.acquire()
            with self._state:
                self._waiting -= 1
        with self._state:
            self._running += 1
            self.max_concurrent = max(self.max_concurrent, self._running)
        try:
            yield
        finally:
            with self._state:
                self._running -= 1
            if self.serial:
                self._gen.release()

    def _someone_waiting(self) -> bool:
        with self._state:
            return self.serial and self._waiting > 0

    def _answer(self, handler: BaseHTTPRequestHandler, req: Request) -> None:
        with self._slot():
            answer = self.brain(req)
            if answer.hold is not None:
                answer.hold.wait(30)
            text, calls, finish = _limit(answer, req.max_tokens)
            if finish == "length" and calls and self.cut_calls_say_tool_calls:
                finish = "tool_calls"
            prompt_tokens = max(1, len(req.prompt_text) // CHARS_PER_TOKEN)
            out_chars = len(text) + sum(len(a) for _, a in calls)
            usage = {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": -(-out_chars // CHARS_PER_TOKEN),
                "total_tokens": prompt_tokens + -(-out_chars // CHARS_PER_TOKEN),
            }
            delay = self.token_delay if answer.token_delay is None else answer.token_delay
            label = req.last_user[:40]
            if req.stream:
                sent = self._stream(handler, text, finish, delay)
                self.generations.append((label, sent, -(-len(text) // CHARS_PER_TOKEN)))
                return
            message: dict[str, Any] = {"role": "assistant", "content": text if text else None}
            if calls:
                message["tool_calls"] = [
                    {
                        "id": f"call_{len(self.requests)}_{k}",
                        "type": "function",
                        "function": {"name": name, "arguments": args},
                    }
                    for k, (name, args) in enumerate(calls)
                ]
            for _ in range(-(-out_chars // CHARS_PER_TOKEN)):
                if delay:
                    time.sleep(delay)  # generation time of the simulated model
            self.generations.append((label, usage["completion_tokens"], usage["completion_tokens"]))
            data = {
                "id": "chatcmpl-strict",
                "object": "chat.completion",
                "model": req.body.get("model", "strict"),
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": usage,
            }
            out = json.dumps(data).encode()
            handler.send_response(200)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(out)))
            handler.end_headers()
            handler.wfile.write(out)

    def _stream(self, handler: BaseHTTPRequestHandler, text: str, finish: str, delay: float) -> int:
        """Send ``text`` token by token; return how many tokens were sent."""
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Connection", "close")
        handler.end_headers()
        handler.close_connection = True
        pieces = [text[i : i + CHARS_PER_TOKEN] for i in range(0, len(text), CHARS_PER_TOKEN)]
        for sent, piece in enumerate(pieces):
            if delay:
                time.sleep(delay)
            chunk = {"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]}
            try:
                handler.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                handler.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                self.interrupted += 1  # the client went away: stop generating
                return sent
            if self._someone_waiting():  # llama-cpp-python's interrupt_requests
                self.interrupted += 1
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    handler.wfile.write(b"data: [DONE]\n\n")
                return sent + 1
        end = {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}
        handler.wfile.write(f"data: {json.dumps(end)}\n\ndata: [DONE]\n\n".encode())
        return len(pieces)


def _limit(answer: Answer, max_tokens: int | None) -> tuple[str, list[tuple[str, str]], str]:
    """Cut the answer at ``max_tokens`` (text first, then each call's arguments)."""
    calls = list(answer.tool_calls)
    finish = "tool_calls" if calls else "stop"
    if max_tokens is None:
        return answer.text, calls, finish
    budget = max_tokens * CHARS_PER_TOKEN
    text = answer.text[:budget]
    budget -= len(text)
    cut = len(text) < len(answer.text)
    kept: list[tuple[str, str]] = []
    for name, args in calls:
        if budget <= 0:
            cut = True
            break
        kept.append((name, args[:budget]))
        cut = cut or len(args) > budget
        budget -= len(args)
    return text, kept, "length" if cut else finish


@contextlib.contextmanager
def strict_server(brain: Brain, **options: Any) -> Iterator[StrictOpenAIServer]:
    """Start a :class:`StrictOpenAIServer` for the ``with`` block."""
    srv = StrictOpenAIServer(brain, **options).start()
    try:
        yield srv
    finally:
        srv.close()

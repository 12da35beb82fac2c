"""OpenAIChatModel: any OpenAI-compatible chat-completions server over HTTP.

One adapter covers OpenAI, vLLM, Ollama, llama.cpp server and LM Studio::

    model = OpenAIChatModel("http://localhost:11434/v1", "qwen2.5:7b")
    reply = model.chat([Msg.user("hello")], tools=registry.specs())

Tool calls travel both ways: ``tools`` are sent as function definitions and
the reply's ``tool_calls`` come back as :class:`~actormem.messages.ToolUseBlock`
content; ``tool_choice`` (default ``"auto"``) is sent whenever tools are,
because some servers (llama.cpp's with ``chatml-function-calling``) ignore
tools without it. A reply whose tool-call arguments are not a JSON object
raises :class:`~actormem.models.base.MalformedToolCallError` carrying every
call and whether the reply was truncated (``finish_reason=length``), so an
agent can give the problem back to the model. Failures that may pass (HTTP
408/429/5xx, connection errors, timeouts) are retried with exponential backoff
and jitter, honouring ``Retry-After``, within one total deadline per call when
``total_timeout`` (or the call's ``timeout``) is set; other client errors and
unusable replies raise :class:`~actormem.models.base.ModelError` at once,
naming the endpoint and the problem. Token usage, when the server reports it,
is in the reply's ``metadata["usage"]``.

The API key is sent as a Bearer token and never appears in logs, reprs or
error messages.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import random
import threading
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any, Final

import httpx
import msgspec
import structlog

from actormem._settings import OPENAI_ARGS, check_arg
from actormem.messages import MessageError, Msg, from_openai, to_openai
from actormem.models.base import MalformedCall, MalformedToolCallError, ModelError, ToolSpec

__all__ = ["OpenAIChatModel"]

log = structlog.get_logger(__name__)

_JSON: Final = msgspec.json.Encoder()
_PREVIEW: Final = 300
_NOT_RETRIED_5XX: Final = frozenset({501, 505})


class _Secret:
    """A string that does not show itself in reprs (``vars()``, debuggers, logs)."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def get(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "'***'"


class _Retry(Exception):
    """An attempt failed in a way worth retrying."""

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


class OpenAIChatModel:
    """A :class:`~actormem.models.base.ChatModel` for OpenAI-compatible servers.

    Args:
        base_url: the API root, e.g. ``http://localhost:8000/v1`` (a URL that
            already ends in ``/chat/completions`` is used as it is).
        model: the model name sent in every request.
        api_key: sent as ``Authorization: Bearer ...`` when given.
        timeout: seconds allowed for each HTTP attempt.
        max_retries: retries after the first attempt (0 disables retrying).
        backoff: the first retry delay in seconds; doubled on every retry,
            with jitter (a random 50-100% of it).
        extra_body: fields merged into every request body (``temperature``,
            ``max_tokens``, server-specific options, ...).
        client: an ``httpx.Client`` to use for sync calls (not closed by
            :meth:`close`); one is created on first use otherwise.
        async_client: an ``httpx.AsyncClient`` for async calls (kept for
            connection reuse; not closed here).  Without it each async call
            opens and closes its own client, which is safe on any event loop.
        headers: extra HTTP headers for every request.
        name: the model's name in events and logs (default: ``model``).
        max_backoff: the longest wait between attempts; a ``Retry-After``
            longer than this makes the call fail at once instead of sleeping.
        tool_choice: sent with every request that has tools (``"auto"``,
            ``"required"``, ``"none"`` or a ``{"type": "function", ...}``
            object); ``None`` sends nothing.  ``extra_body`` may override it.
        total_timeout: the limit in seconds for a whole call, all attempts and
            waits included, when the call passes no ``timeout`` of its own
            (``None``: only the per-attempt ``timeout`` applies).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 3,
        backoff: float = 0.5,
        extra_body: Mapping[str, Any] | None = None,
        client: httpx.Client | None = None,
        *,
        async_client: httpx.AsyncClient | None = None,
        headers: Mapping[str, str] | None = None,
        name: str | None = None,
        max_backoff: float = 30.0,
        tool_choice: str | Mapping[str, Any] | None = "auto",
        total_timeout: float | None = None,
    ) -> None:
        if not base_url:
            raise ValueError("base_url is required (e.g. http://localhost:8000/v1)")
        if not model:
            raise ValueError("model is required")
        numbers = {
            "timeout": timeout,
            "total_timeout": total_timeout,
            "max_retries": max_retries,
            "backoff": backoff,
            "max_backoff": max_backoff,
        }
        for key, span in OPENAI_ARGS.items():
            span.check(numbers[key], key)
        try:
            scheme = httpx.URL(base_url).scheme
        except httpx.InvalidURL as exc:
            raise ValueError(f"invalid base_url: {exc}") from None
        if scheme not in ("http", "https"):
            raise ValueError(
                f"base_url must start with http:// or https://, got {_safe_url(base_url)!r}"
            )
        root = base_url.rstrip("/")
        self.url = root if root.endswith("/chat/completions") else root + "/chat/completions"
        self.base_url = base_url
        self.model = model
        self.name = name or model
        self.timeout = float(timeout)
        self.max_retries = max_retries
        self.backoff = float(backoff)
        self.max_backoff = float(max_backoff)
        self.extra_body: dict[str, Any] = dict(extra_body or {})
        self.tool_choice = tool_choice
        self.total_timeout = None if total_timeout is None else float(total_timeout)
        self._api_key = _Secret(api_key) if api_key else None
        self._headers = {"Content-Type": "application/json", **(headers or {})}
        self._client = client
        self._owns_client = client is None
        self._async_client = async_client
        self._lock = threading.Lock()
        self._usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
        self._display_url = _safe_url(self.url)

    # -- public API ----------------------------------------------------------------

    def chat(
        self,
        messages: Sequence[Msg],
        *,
        tools: Sequence[ToolSpec] | None = None,
        timeout: float | None = None,
    ) -> Msg:
        """Send the conversation and return the assistant's reply.

        Args:
            messages: the conversation.
            tools: function definitions the model may call.
            timeout: the limit in seconds for this call, retries included
                (each attempt is also limited by the constructor's ``timeout``).

        Returns:
            The assistant message: text and/or ``ToolUseBlock`` content, with
            ``metadata["usage"]`` (``prompt_tokens``, ``completion_tokens``,
            ``total_tokens``) when the server reports it, ``metadata["model"]``
            and ``metadata["finish_reason"]``.

        Raises:
            ModelError: the call failed after retries, was refused, timed out,
                or the reply is unusable.
        """
        body = self._body(messages, tools, stream=False)
        started = time.monotonic()
        response = self._send(body, self._limit(timeout), stream=False)
        return self._finish(response, started)

    async def achat(
        self,
        messages: Sequence[Msg],
        *,
        tools: Sequence[ToolSpec] | None = None,
        timeout: float | None = None,
    ) -> Msg:
        """Async :meth:`chat`.

        Args:
            messages: the conversation.
            tools: function definitions the model may call.
            timeout: the limit in seconds for this call, retries included.

        Returns:
            The assistant message (see :meth:`chat`).

        Raises:
            ModelError: see :meth:`chat`.
        """
        body = self._body(messages, tools, stream=False)
        started = time.monotonic()
        async with self._aclient() as client:
            response = await self._asend(client, body, self._limit(timeout), stream=False)
        return self._finish(response, started)

    def stream(
        self,
        messages: Sequence[Msg],
        *,
        tools: Sequence[ToolSpec] | None = None,
        timeout: float | None = None,
    ) -> Iterator[str]:
        """Stream the reply's text as it is generated (server-sent events).

        Tool-call deltas are not assembled here; use :meth:`chat` when the
        model may call tools.  A server that ignores ``stream`` and answers
        with one JSON body yields that reply's text once.

        Args:
            messages: the conversation.
            tools: function definitions the model may call.
            timeout: the limit in seconds for establishing the stream
                (retries included); each read is limited by ``timeout`` of
                the constructor.

        Yields:
            Pieces of text, in order.

        Raises:
            ModelError: the request failed, or the stream broke or was malformed.
        """
        body = self._body(messages, tools, stream=True)
        started = time.monotonic()
        response = self._send(body, self._limit(timeout), stream=True)
        try:
            if _is_json(response):
                response.read()
                yield self._finish(response, started).text
                return
            for line in response.iter_lines():
                piece = self._sse_piece(line)
                if piece is None:
                    break
                if piece:
                    yield piece
        except httpx.TransportError as exc:
            raise self._error(f"the stream broke: {_describe(exc)}") from None
        finally:
            response.close()

    async def astream(
        self,
        messages: Sequence[Msg],
        *,
        tools: Sequence[ToolSpec] | None = None,
        timeout: float | None = None,
    ) -> AsyncIterator[str]:
        """Async :meth:`stream`.

        Args:
            messages: the conversation.
            tools: function definitions the model may call.
            timeout: the limit in seconds for establishing the stream.

        Yields:
            Pieces of text, in order.

        Raises:
            ModelError: see :meth:`stream`.
        """
        body = self._body(messages, tools, stream=True)
        started = time.monotonic()
        async with self._aclient() as client:
            response = await self._asend(client, body, self._limit(timeout), stream=True)
            try:
                if _is_json(response):
                    await response.aread()
                    yield self._finish(response, started).text
                    return
                async for line in response.aiter_lines():
                    piece = self._sse_piece(line)
                    if piece is None:
                        break
                    if piece:
                        yield piece
            except httpx.TransportError as exc:
                raise self._error(f"the stream broke: {_describe(exc)}") from None
            finally:
                await response.aclose()

    @property
    def total_usage(self) -> dict[str, int]:
        """Tokens used by every call of this model object so far."""
        with self._lock:
            return dict(self._usage)

    def close(self) -> None:
        """Close the HTTP client this object created (a client passed in stays open)."""
        if not self._owns_client:
            return
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    def __enter__(self) -> OpenAIChatModel:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        key = "'***'" if self._api_key else "None"
        return (
            f"OpenAIChatModel(base_url={_safe_url(self.base_url)!r}, model={self.model!r}, "
            f"api_key={key}, timeout={self.timeout}, max_retries={self.max_retries})"
        )

    # -- requests ---------------------------------------------------------------------

    def _body(
        self, messages: Sequence[Msg], tools: Sequence[ToolSpec] | None, *, stream: bool
    ) -> bytes:
        body: dict[str, Any] = {"model": self.model, "messages": to_openai(messages)}
        if tools:
            body["tools"] = list(tools)
            if self.tool_choice is not None:
                body["tool_choice"] = self.tool_choice
        body.update(self.extra_body)
        body["stream"] = stream
        return _JSON.encode(body)

    def _limit(self, timeout: float | None) -> float | None:
        check_arg("OpenAIChatModel.chat", "timeout", timeout)
        return self.total_timeout if timeout is None else timeout

    def _request_headers(self, *, stream: bool) -> dict[str, str]:
        headers = dict(self._headers)
        headers["Accept"] = "text/event-stream" if stream else "application/json"
        if self._api_key is not None:
            headers["Authorization"] = f"Bearer {self._api_key.get()}"
        return headers

    def _sync_client(self) -> httpx.Client:
        with self._lock:
            if self._client is None:
                self._client = httpx.Client(timeout=self.timeout, follow_redirects=True)
            return self._client

    @contextlib.asynccontextmanager
    async def _aclient(self) -> AsyncIterator[httpx.AsyncClient]:
        if self._async_client is not None:
            yield self._async_client
        else:
            async with httpx.AsyncClient(timeout=self.timeout, follow_redirects=True) as client:
                yield client

    def _send(self, body: bytes, timeout: float | None, *, stream: bool) -> httpx.Response:
        client = self._sync_client()
        headers = self._request_headers(stream=stream)
        deadline = None if timeout is None else time.monotonic() + timeout
        attempt = 0
        while True:
            attempt_timeout = self._attempt_timeout(deadline, timeout, attempt)
            try:
                request = client.build_request(
                    "POST", self.url, content=body, headers=headers, timeout=attempt_timeout
                )
                try:
                    response = client.send(request, stream=stream)
                except (httpx.UnsupportedProtocol, httpx.LocalProtocolError) as exc:
                    raise self._error(f"cannot send the request: {exc}") from None
                except httpx.TransportError as exc:
                    raise _Retry(_describe(exc, attempt_timeout)) from None
                if response.status_code >= 400:
                    response.read()
                    response.close()
                    self._check_status(response)
                return response
            except _Retry as failure:
                delay = self._next_delay(failure, attempt, deadline)
                time.sleep(delay)
                attempt += 1

    async def _asend(
        self, client: httpx.AsyncClient, body: bytes, timeout: float | None, *, stream: bool
    ) -> httpx.Response:
        headers = self._request_headers(stream=stream)
        deadline = None if timeout is None else time.monotonic() + timeout
        attempt = 0
        while True:
            attempt_timeout = self._attempt_timeout(deadline, timeout, attempt)
            try:
                request = client.build_request(
                    "POST", self.url, content=body, headers=headers, timeout=attempt_timeout
                )
                try:
                    response = await client.send(request, stream=stream)
                except (httpx.UnsupportedProtocol, httpx.LocalProtocolError) as exc:
                    raise self._error(f"cannot send the request: {exc}") from None
                except httpx.TransportError as exc:
                    raise _Retry(_describe(exc, attempt_timeout)) from None
                if response.status_code >= 400:
                    await response.aread()
                    await response.aclose()
                    self._check_status(response)
                return response
            except _Retry as failure:
                delay = self._next_delay(failure, attempt, deadline)
                await asyncio.sleep(delay)
                attempt += 1

    def _attempt_timeout(
        self, deadline: float | None, timeout: float | None, attempt: int
    ) -> float:
        if deadline is None:
            return self.timeout
        left = deadline - time.monotonic()
        if left <= 0:
            raise self._error(f"timed out: no reply within the call's limit of {timeout}s", attempt)
        return min(self.timeout, left)

    def _check_status(self, response: httpx.Response) -> None:
        """Raise for an error status: :class:`_Retry` when worth retrying, else ModelError."""
        status = response.status_code
        detail = self._redact(_error_detail(response))
        reason = f"HTTP {status} {response.reason_phrase}: {detail}".rstrip(": ")
        if status in (408, 425, 429) or (status >= 500 and status not in _NOT_RETRIED_5XX):
            raise _Retry(reason, _retry_after(response))
        log.error(
            "model_request_refused", model=self.name, endpoint=self._display_url, status=status
        )
        raise ModelError(f"{self._display_url} refused the request: {reason}")

    def _next_delay(self, failure: _Retry, attempt: int, deadline: float | None) -> float:
        """The wait before the next attempt; raises ModelError when giving up."""
        attempts = attempt + 1
        if attempt >= self.max_retries:
            raise self._error(failure.reason, attempts)
        delay = min(self.max_backoff, self.backoff * 2.0**attempt) * random.uniform(0.5, 1.0)
        if failure.retry_after is not None:
            if failure.retry_after > self.max_backoff:
                raise self._error(
                    f"{failure.reason} (server asks to retry after {failure.retry_after:g}s, "
                    f"more than max_backoff={self.max_backoff:g}s)",
                    attempts,
                )
            delay = max(delay, failure.retry_after)
        if deadline is not None and time.monotonic() + delay >= deadline:
            raise self._error(f"{failure.reason} (no time left to retry)", attempts)
        log.warning(
            "model_retry",
            model=self.name,
            endpoint=self._display_url,
            attempt=attempts,
            max_attempts=self.max_retries + 1,
            reason=failure.reason,
            delay_s=round(delay, 3),
        )
        return delay

    def _error(self, reason: str, attempts: int | None = None) -> ModelError:
        reason = self._redact(reason)
        suffix = f" (gave up after {attempts} attempt(s))" if attempts else ""
        log.error(
            "model_call_failed",
            model=self.name,
            endpoint=self._display_url,
            reason=reason,
            attempts=attempts,
        )
        return ModelError(f"{self._display_url}: {reason}{suffix}")

    # -- replies ------------------------------------------------------------------------

    def _finish(self, response: httpx.Response, started: float) -> Msg:
        try:
            data = msgspec.json.decode(response.content)
        except msgspec.DecodeError as exc:
            preview = self._redact(response.text[:_PREVIEW])
            raise self._error(
                f"malformed JSON in the reply (HTTP {response.status_code}): {exc}; "
                f"body starts with {preview!r}"
            ) from None
        usage = _usage(data.get("usage")) if isinstance(data, dict) else None
        if usage is not None:  # counted before parsing: a malformed reply still cost tokens
            with self._lock:
                for key in self._usage:
                    self._usage[key] += int(usage.get(key, 0))
        msg = self._parse(data)
        if msg.metadata.get("finish_reason") == "length":
            log.warning(
                "model_reply_truncated",
                model=self.name,
                endpoint=self._display_url,
                usage=usage,
                hint="the server cut the reply at its token limit (raise max_tokens)",
            )
        log.debug(
            "model_reply",
            model=self.name,
            endpoint=self._display_url,
            latency_ms=round((time.monotonic() - started) * 1000, 1),
            tool_calls=len(msg.tool_uses),
            usage=usage,
        )
        return msg

    def _parse(self, data: Any) -> Msg:
        if not isinstance(data, dict):
            raise self._error(f"the reply is not a JSON object but {type(data).__name__}")
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices:
            if data.get("error"):
                raise self._error(f"the server returned an error: {_error_text(data['error'])}")
            raise self._error("the reply has no choices")
        choice = choices[0]
        message = choice.get("message") if isinstance(choice, dict) else None
        if not isinstance(message, dict):
            raise self._error("choices[0] of the reply has no message object")
        finish = choice.get("finish_reason") if isinstance(choice, dict) else None
        self._check_tool_calls(message, str(finish or ""), _usage(data.get("usage")))
        try:
            msg = from_openai({**message, "role": message.get("role") or "assistant"})
        except (MessageError, AttributeError, TypeError, ValueError) as exc:
            # from_openai lets AttributeError escape for a non-object "function".
            raise self._error(f"the reply message is unusable: {exc}") from None
        if msg.role != "assistant":
            raise self._error(f"the reply message has role {msg.role!r}, expected 'assistant'")
        metadata: dict[str, Any] = {"model": str(data.get("model") or self.model)}
        if isinstance(choice, dict) and choice.get("finish_reason"):
            metadata["finish_reason"] = str(choice["finish_reason"])
        usage = _usage(data.get("usage"))
        if usage is not None:
            metadata["usage"] = usage
        reasoning = message.get("reasoning_content") or message.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            metadata["reasoning"] = reasoning
        return msg.with_content(msg.content, **metadata)

    def _check_tool_calls(
        self, message: dict[str, Any], finish_reason: str, usage: dict[str, int] | None
    ) -> None:
        """Raise MalformedToolCallError when a tool call's arguments are unusable."""
        raw_calls = message.get("tool_calls")
        if not isinstance(raw_calls, list) or not raw_calls:
            return
        calls: list[MalformedCall] = []
        for i, call in enumerate(raw_calls):
            fn = call.get("function") if isinstance(call, dict) else None
            if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
                return  # not a tool call at all: from_openai names the problem
            raw = fn.get("arguments")
            call_id = str(call.get("id") or f"call_{i}")
            problem = ""
            if isinstance(raw, str) and raw.strip():
                try:
                    args = msgspec.json.decode(raw)
                except msgspec.DecodeError as exc:
                    problem = f"the arguments are not valid JSON ({exc})"
                else:
                    if not isinstance(args, dict):
                        problem = f"the arguments are JSON {type(args).__name__}, not an object"
            elif raw is not None and not isinstance(raw, str | dict):
                problem = f"the arguments are {type(raw).__name__}, not a JSON object"
            text = raw if isinstance(raw, str) else _JSON.encode(raw).decode()
            calls.append(MalformedCall(call_id, fn["name"], text, problem))
        bad = [c for c in calls if c.problem]
        if not bad:
            return
        limit = self.extra_body.get("max_tokens") or self.extra_body.get("max_completion_tokens")
        used = (usage or {}).get("completion_tokens", 0)
        if finish_reason == "length":
            cut = "; the reply was truncated at the token limit (finish_reason=length)"
        elif isinstance(limit, int) and limit > 0 and used >= limit:
            # llama.cpp's server says "tool_calls" even when max_tokens cut the call.
            cut = (
                f"; the reply was truncated: it used all {limit} max_tokens "
                f"(the server said finish_reason={finish_reason or 'none'})"
            )
            finish_reason = "length"
        else:
            cut = ""
        truncated = finish_reason == "length"
        first = bad[0]
        reason = (
            f"{len(bad)} tool call(s) unusable: {first.name}: {first.problem}; "
            f"arguments start with {first.arguments[:80]!r}{cut}"
        )
        log.warning(
            "model_tool_call_malformed",
            model=self.name,
            endpoint=self._display_url,
            calls=len(bad),
            truncated=truncated,
            reason=self._redact(reason),
        )
        content = message.get("content")
        raise MalformedToolCallError(
            f"{self._display_url}: {self._redact(reason)}",
            text=content if isinstance(content, str) else "",
            calls=calls,
            finish_reason=finish_reason,
            usage=usage,
        )

    def _sse_piece(self, line: str) -> str | None:
        """The text of one SSE line: ``""`` for nothing, ``None`` at the end."""
        if not line.startswith("data:"):
            return ""  # blank lines, comments, event names
        payload = line[5:].strip()
        if payload == "[DONE]":
            return None
        if not payload:
            return ""
        try:
            data = msgspec.json.decode(payload)
        except msgspec.DecodeError as exc:
            raise self._error(f"malformed JSON in the stream: {exc}") from None
        if not isinstance(data, dict):
            raise self._error("a stream event is not a JSON object")
        if data.get("error"):
            raise self._error(f"the server returned an error: {_error_text(data['error'])}")
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            return ""  # e.g. a final usage-only chunk
        delta = choices[0].get("delta")
        content = delta.get("content") if isinstance(delta, dict) else None
        return content if isinstance(content, str) else ""

    def _redact(self, text: str) -> str:
        secrets = [self._api_key.get()] if self._api_key is not None else []
        # Keys passed as extra headers (Azure's "api-key", custom auth headers) too.
        secrets += [
            v for k, v in self._headers.items() if k.lower() != "content-type" and len(v) >= 8
        ]
        for secret in secrets:
            if secret and secret in text:
                text = text.replace(secret, "***")
        return text


# -- helpers ---------------------------------------------------------------------------


def _safe_url(url: str) -> str:
    """The URL without user:password or query string (which may hold credentials)."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError):
        return "<invalid url>"
    return str(parsed.copy_with(userinfo=b"", query=None, fragment=None))


def _describe(exc: httpx.TransportError, timeout: float | None = None) -> str:
    if isinstance(exc, httpx.TimeoutException):
        limit = f" after {timeout:.3g}s" if timeout is not None else ""
        return f"timed out{limit} ({type(exc).__name__})"
    if isinstance(exc, httpx.ConnectError):
        return f"cannot connect: {exc}"
    return f"{type(exc).__name__}: {exc}"


def _is_json(response: httpx.Response) -> bool:
    content_type = str(response.headers.get("content-type", ""))
    return content_type.startswith("application/json")


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _error_text(error: Any) -> str:
    if isinstance(error, dict):
        return str(error.get("message") or error.get("type") or error)
    return str(error)


def _error_detail(response: httpx.Response) -> str:
    try:
        data = msgspec.json.decode(response.content)
    except msgspec.DecodeError:
        return response.text[:_PREVIEW].strip()
    if isinstance(data, dict):
        for key in ("error", "detail", "message"):
            if data.get(key):
                return _error_text(data[key])[:_PREVIEW]
    return response.text[:_PREVIEW].strip()


def _usage(raw: Any) -> dict[str, int] | None:
    if not isinstance(raw, dict):
        return None
    out: dict[str, int] = {}
    for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
        value = raw.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            out[key] = value
    if not out:
        return None
    if "total_tokens" not in out:
        out["total_tokens"] = out.get("prompt_tokens", 0) + out.get("completion_tokens", 0)
    return out

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
``total_timeout`` (or the call's ``timeout``) is set -- a deadline that also
bounds reading the reply, byte by byte (see :mod:`actormem.models._http`);
other client errors and unusable replies raise
:class:`~actormem.models.base.ModelError` at once, naming the endpoint and the
problem. Replies are read up to ``max_reply_bytes``; redirects are followed
only to the same origin (307/308). Token usage, when the server reports it, is
in the reply's ``metadata["usage"]``.

The API key is sent as a Bearer token and never appears in logs, reprs or
error messages.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any, Final

import httpx
import msgspec
import structlog

from actormem._settings import DEFAULT_MAX_REPLY_BYTES, OPENAI_ARGS, check_arg
from actormem.messages import Msg, to_openai
from actormem.models._http import (
    AsyncExchange,
    Exchange,
    HttpFailure,
    aopen_exchange,
    open_exchange,
    safe_url,
)
from actormem.models._openai_parse import parse_reply
from actormem.models._openai_reply import PREVIEW as _PREVIEW
from actormem.models._openai_reply import StreamReply
from actormem.models._openai_reply import error_detail as _error_detail
from actormem.models._openai_reply import retry_after as _retry_after
from actormem.models._openai_reply import usage as _usage
from actormem.models.base import (
    ModelError,
    ModelTimeoutError,
    ToolSpec,
)

__all__ = ["OpenAIChatModel"]

log = structlog.get_logger(__name__)

_JSON: Final = msgspec.json.Encoder()
_NOT_RETRIED_5XX: Final = frozenset({501, 505})
#: HttpFailure kinds as ModelError.problem words (never text from the server).
_PROBLEMS: Final = {
    "deadline": "timed out",
    "timeout": "timed out",
    "transport": "connection failed",
    "send": "cannot send the request",
    "decode": "undecodable reply",
    "too_large": "reply too large",
    "redirect": "redirect not followed",
    "other": "request failed",
}


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

    def __init__(
        self,
        reason: str,
        retry_after: float | None = None,
        *,
        problem: str,
        status: int | None = None,
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after
        self.problem = problem
        self.status = status


class OpenAIChatModel:
    """A :class:`~actormem.models.base.ChatModel` for OpenAI-compatible servers.

    Args:
        base_url: the API root, e.g. ``http://localhost:8000/v1`` (a URL that
            already ends in ``/chat/completions`` is used as it is).
        model: the model name sent in every request.
        api_key: sent as ``Authorization: Bearer ...`` when given.
        timeout: seconds allowed for each HTTP attempt, reading the reply
            included (for a stream: establishing it, then each wait for more).
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
        total_timeout: the limit in seconds for a whole call -- all attempts,
            the waits between them and the reading of the reply (or of the
            whole stream) -- when the call passes no ``timeout`` of its own
            (``None``: only the per-attempt ``timeout`` applies).
        max_reply_bytes: the largest reply body read (a stream: all of it);
            a larger one fails with ModelError without being read further.
            Error bodies are read only up to a 4 KiB preview.
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
        max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES,
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
            "max_reply_bytes": max_reply_bytes,
        }
        for key, span in OPENAI_ARGS.items():
            span.check(numbers[key], key)
        try:
            scheme = httpx.URL(base_url).scheme
        except httpx.InvalidURL as exc:
            raise ValueError(f"invalid base_url: {exc}") from None
        if scheme not in ("http", "https"):
            raise ValueError(
                f"base_url must start with http:// or https://, got {safe_url(base_url)!r}"
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
        self.max_reply_bytes = max_reply_bytes
        self._api_key = _Secret(api_key) if api_key else None
        self._headers = {"Content-Type": "application/json", **(headers or {})}
        self._client = client
        self._owns_client = client is None
        self._async_client = async_client
        self._lock = threading.Lock()
        self._usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
        self._display_url = safe_url(self.url)

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
            timeout: the limit in seconds for this whole call -- every
                attempt, the waits between them and the reading of the
                reply (each attempt is also limited by the constructor's
                ``timeout``).  ``None``: the constructor's ``total_timeout``.

        Returns:
            The assistant message: text and/or ``ToolUseBlock`` content, with
            ``metadata["usage"]`` (``prompt_tokens``, ``completion_tokens``,
            ``total_tokens``) when the server reports it, ``metadata["model"]``
            and ``metadata["finish_reason"]``.

        Raises:
            ModelError: the call failed after retries, was refused, timed out
                (:class:`~actormem.models.base.ModelTimeoutError`), or the
                reply is unusable.
        """
        body = self._body(messages, tools, stream=False)
        started = time.monotonic()
        limit = self._limit(timeout)
        deadline = _deadline(limit)
        attempt = 0
        while True:
            op = self._attempt_timeout(deadline, limit, attempt)
            try:
                exchange = self._open(body, op, stream=False)
                try:
                    data = exchange.read()
                except HttpFailure as failure:
                    raise self._failed(failure) from None
                finally:
                    exchange.close()
                return self._finish(data, exchange.response.status_code, started)
            except _Retry as failure:
                time.sleep(self._next_delay(failure, attempt, deadline))
                attempt += 1

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
            timeout: the limit in seconds for this whole call (see :meth:`chat`).

        Returns:
            The assistant message (see :meth:`chat`).

        Raises:
            ModelError: see :meth:`chat`.
        """
        body = self._body(messages, tools, stream=False)
        started = time.monotonic()
        limit = self._limit(timeout)
        deadline = _deadline(limit)
        attempt = 0
        async with self._aclient() as client:
            while True:
                op = self._attempt_timeout(deadline, limit, attempt)
                try:
                    exchange = await self._aopen(client, body, op, stream=False)
                    try:
                        data = await exchange.read()
                    except HttpFailure as failure:
                        raise self._failed(failure) from None
                    finally:
                        await exchange.aclose()
                    return self._finish(data, exchange.response.status_code, started)
                except _Retry as failure:
                    await asyncio.sleep(self._next_delay(failure, attempt, deadline))
                    attempt += 1

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
        with one JSON body (whatever its Content-Type says) yields that
        reply's text once.  A stream must end with ``data: [DONE]`` (or
        close right after an event with a ``finish_reason``); one that ends
        otherwise raises, after yielding what arrived.

        Args:
            messages: the conversation.
            tools: function definitions the model may call.
            timeout: the limit in seconds for the whole call: establishing
                the stream (retries included) and reading all of it.  Each
                attempt to establish it, and each wait for more of the
                stream, is also limited by the constructor's ``timeout``.
                ``None``: the constructor's ``total_timeout``.

        Yields:
            Pieces of text, in order.

        Raises:
            ModelError: the request failed, timed out, or the stream broke
                or was malformed.
        """
        body = self._body(messages, tools, stream=True)
        started = time.monotonic()
        limit = self._limit(timeout)
        deadline = _deadline(limit)
        attempt = 0
        while True:
            op = self._attempt_timeout(deadline, limit, attempt)
            try:
                exchange = self._open(body, op, stream=True)
                break
            except _Retry as failure:
                time.sleep(self._next_delay(failure, attempt, deadline))
                attempt += 1
        exchange.deadline, exchange.limit = deadline, limit
        reply = StreamReply(self, exchange.response, started)
        try:
            for chunk in exchange.chunks():
                yield from reply.feed(chunk)
                if reply.done:
                    return
            yield from reply.end()
        except HttpFailure as failure:
            raise self._broke(failure) from None
        finally:
            exchange.close()

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
            timeout: the limit in seconds for the whole call (see :meth:`stream`).

        Yields:
            Pieces of text, in order.

        Raises:
            ModelError: see :meth:`stream`.
        """
        body = self._body(messages, tools, stream=True)
        started = time.monotonic()
        limit = self._limit(timeout)
        deadline = _deadline(limit)
        attempt = 0
        async with self._aclient() as client:
            while True:
                op = self._attempt_timeout(deadline, limit, attempt)
                try:
                    exchange = await self._aopen(client, body, op, stream=True)
                    break
                except _Retry as failure:
                    await asyncio.sleep(self._next_delay(failure, attempt, deadline))
                    attempt += 1
            exchange.deadline, exchange.limit = deadline, limit
            reply = StreamReply(self, exchange.response, started)
            try:
                async for chunk in exchange.chunks():
                    for piece in reply.feed(chunk):
                        yield piece
                    if reply.done:
                        return
                for piece in reply.end():
                    yield piece
            except HttpFailure as failure:
                raise self._broke(failure) from None
            finally:
                await exchange.aclose()

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
            f"OpenAIChatModel(base_url={safe_url(self.base_url)!r}, model={self.model!r}, "
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
                self._client = httpx.Client(timeout=self.timeout)
            return self._client

    @contextlib.asynccontextmanager
    async def _aclient(self) -> AsyncIterator[httpx.AsyncClient]:
        if self._async_client is not None:
            yield self._async_client
        else:
            async with httpx.AsyncClient(timeout=self.timeout) as client:
                yield client

    def _exchange_args(self, body: bytes, op: float, *, stream: bool) -> dict[str, Any]:
        """What one attempt sends and how long it may take (``op`` seconds, body included)."""
        return {
            "content": body,
            "headers": self._request_headers(stream=stream),
            "deadline": time.monotonic() + op,
            "limit": op,
            "op_timeout": op,
            "max_bytes": self.max_reply_bytes,
        }

    def _open(self, body: bytes, op: float, *, stream: bool) -> Exchange:
        """One attempt's response with a 2xx status, its body unread.

        The attempt (headers, and for :meth:`chat` the body) must be done
        within ``op`` seconds; raises :class:`_Retry` or ModelError.
        """
        client = self._sync_client()
        try:
            exchange = open_exchange(
                client, self.url, **self._exchange_args(body, op, stream=stream)
            )
            self._check_status(exchange.response, exchange.refusal())
        except HttpFailure as failure:
            raise self._failed(failure) from None
        return exchange

    async def _aopen(
        self, client: httpx.AsyncClient, body: bytes, op: float, *, stream: bool
    ) -> AsyncExchange:
        """Async :meth:`_open`."""
        args = self._exchange_args(body, op, stream=stream)
        try:
            exchange = await aopen_exchange(client, self.url, **args)
            self._check_status(exchange.response, await exchange.refusal())
        except HttpFailure as failure:
            raise self._failed(failure) from None
        return exchange

    def _failed(self, failure: HttpFailure) -> Exception:
        """A failed exchange as :class:`_Retry` (worth another attempt) or ModelError."""
        problem = _PROBLEMS[failure.kind]
        if failure.retryable:
            return _Retry(failure.detail, problem=problem)
        return self._error(failure.detail, problem=problem)

    def _broke(self, failure: HttpFailure) -> ModelError:
        """A stream whose reading failed (no retry: pieces may have been yielded)."""
        problem = "stream broke" if failure.kind == "transport" else _PROBLEMS[failure.kind]
        return self._error(f"the stream broke: {failure.detail}", problem=problem)

    def _attempt_timeout(
        self, deadline: float | None, timeout: float | None, attempt: int
    ) -> float:
        if deadline is None:
            return self.timeout
        left = deadline - time.monotonic()
        if left <= 0:
            raise self._error(
                f"timed out: no reply within the call's limit of {timeout}s",
                attempt,
                problem="timed out",
            )
        return min(self.timeout, left)

    def _check_status(self, response: httpx.Response, refusal: bytes | None) -> None:
        """Raise for a refused request (``refusal``: the error body's preview; None: 2xx).

        :class:`_Retry` when the status is worth retrying, else ModelError.
        """
        if refusal is None:
            return
        status = response.status_code
        detail = self._redact(_error_detail(refusal))
        reason = f"HTTP {status} {response.reason_phrase}: {detail}".rstrip(": ")
        if status in (408, 425, 429) or (status >= 500 and status not in _NOT_RETRIED_5XX):
            raise _Retry(reason, _retry_after(response), problem="HTTP error status", status=status)
        log.error(
            "model_request_refused", model=self.name, endpoint=self._display_url, status=status
        )
        raise ModelError(
            f"{self._display_url} refused the request: {reason}",
            problem="HTTP error status",
            status=status,
            endpoint=self._display_url,
        )

    def _next_delay(self, failure: _Retry, attempt: int, deadline: float | None) -> float:
        """The wait before the next attempt; raises ModelError when giving up."""
        attempts = attempt + 1
        if attempt >= self.max_retries:
            raise self._error(
                failure.reason, attempts, problem=failure.problem, status=failure.status
            )
        delay = min(self.max_backoff, self.backoff * 2.0**attempt) * random.uniform(0.5, 1.0)
        if failure.retry_after is not None:
            if failure.retry_after > self.max_backoff:
                raise self._error(
                    f"{failure.reason} (server asks to retry after {failure.retry_after:g}s, "
                    f"more than max_backoff={self.max_backoff:g}s)",
                    attempts,
                    problem=failure.problem,
                    status=failure.status,
                )
            delay = max(delay, failure.retry_after)
        if deadline is not None and time.monotonic() + delay >= deadline:
            raise self._error(
                f"{failure.reason} (no time left to retry)",
                attempts,
                problem=failure.problem,
                status=failure.status,
            )
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

    def _error(
        self,
        reason: str,
        attempts: int | None = None,
        *,
        problem: str = "unusable reply",
        status: int | None = None,
    ) -> ModelError:
        reason = self._redact(reason)
        suffix = f" (gave up after {attempts} attempt(s))" if attempts else ""
        log.error(
            "model_call_failed",
            model=self.name,
            endpoint=self._display_url,
            reason=reason,
            attempts=attempts,
        )
        cls = ModelTimeoutError if problem == "timed out" else ModelError
        return cls(
            f"{self._display_url}: {reason}{suffix}",
            problem=problem,
            status=status,
            endpoint=self._display_url,
        )

    # -- replies ------------------------------------------------------------------------

    def _finish(self, body: bytes, status: int, started: float) -> Msg:
        data = self._decode(body, f"the reply (HTTP {status})")
        usage = _usage(data.get("usage")) if isinstance(data, dict) else None
        if usage is not None:  # counted before parsing: a malformed reply still cost tokens
            with self._lock:
                for key in self._usage:
                    self._usage[key] += int(usage.get(key, 0))
        msg = parse_reply(self, data)
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

    def _decode(self, body: bytes | str, what: str) -> Any:
        """JSON from the server; ModelError naming the problem when it is not usable JSON."""
        try:
            return msgspec.json.decode(body)
        except msgspec.DecodeError as exc:
            why = f"malformed JSON: {exc}"
        except UnicodeError as exc:
            why = f"not valid UTF-8 ({exc.__class__.__name__}: {exc})"
        except RecursionError:
            why = "JSON nested too deeply to parse"
        raw = body.encode("utf-8", "replace") if isinstance(body, str) else body
        preview = self._redact(raw[:_PREVIEW].decode("utf-8", "replace"))
        raise self._error(
            f"{what} is {why}; it starts with {preview!r}", problem="malformed reply"
        ) from None

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


def _deadline(limit: float | None) -> float | None:
    return None if limit is None else time.monotonic() + limit

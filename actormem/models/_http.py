"""Bounded HTTP exchanges for the model adapters (chat and embeddings).

Why this module: httpx's timeouts are per network operation, so a server that
sends its reply one byte every half second never trips a 3 s read timeout (a
call with ``total_timeout=4`` took 84 s); httpx reads a body whole however
large it is (a 300 MB reply, or a 300 MB error page on every retry); and it
follows redirects to any origin, carrying custom auth headers and the whole
conversation along.  :func:`open_exchange` and :func:`aopen_exchange` do one
POST for :class:`~actormem.models.openai.OpenAIChatModel` and
:class:`~actormem.models.embedders.OpenAIEmbedder` instead, and

* bound the exchange -- connecting, the headers, every byte of the body -- by
  one deadline.  Sync: the blocking httpx calls run on a worker thread and the
  caller waits on a queue for at most the time left; at the deadline the
  socket is shut down, which wakes the worker (a server that trickles its
  *headers* keeps the worker until one of its reads times out, but never the
  caller).  Async: ``asyncio.timeout`` around every await;
* stop reading a body at a byte cap (an error or redirect body at a short
  preview), failing before reading when ``Content-Length`` is already over;
* follow only 307/308 redirects (they keep the POST and its body) to the same
  origin -- scheme, host and port -- at most :data:`MAX_REDIRECTS` times.

Every failure is an :class:`HttpFailure` whose ``kind`` the adapters turn
into a retry or a :class:`~actormem.models.base.ModelError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any, Final

import httpx

__all__ = [
    "ERROR_PREVIEW_BYTES",
    "MAX_REDIRECTS",
    "AsyncExchange",
    "Exchange",
    "HttpFailure",
    "aopen_exchange",
    "describe",
    "open_exchange",
    "safe_url",
]

#: Redirects followed per exchange (same origin, 307/308 only).
MAX_REDIRECTS: Final = 5
#: Bytes of an error or redirect body read (for its message); the rest is never read.
ERROR_PREVIEW_BYTES: Final = 4096

_HEAD, _DATA, _END, _OVER, _FAIL = range(5)
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}


class HttpFailure(Exception):
    """One exchange failed.

    Attributes:
        kind: ``"deadline"`` (the exchange's time ran out), ``"timeout"``
            (one network operation's), ``"transport"`` (connect, read or
            protocol error),
            ``"send"`` (the request cannot be sent at all), ``"decode"``
            (the Content-Encoding could not be decoded), ``"too_large"``,
            ``"redirect"`` (a redirect not followed) or ``"other"``.
        detail: what happened, in words (may quote the server: a redirect's
            target, an exception's text).
    """

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail

    @property
    def retryable(self) -> bool:
        """True for failures a later attempt may not meet."""
        return self.kind in ("deadline", "timeout", "transport")


def safe_url(url: str | httpx.URL) -> str:
    """The URL without user:password, query string or fragment (they may hold credentials)."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError):
        return "<invalid url>"
    return str(parsed.copy_with(userinfo=b"", query=None, fragment=None))


def describe(exc: BaseException, timeout: float | None = None) -> str:
    """An httpx exception in words."""
    if isinstance(exc, httpx.TimeoutException):
        limit = f" after {timeout:.3g}s" if timeout is not None else ""
        return f"timed out{limit} ({type(exc).__name__})"
    if isinstance(exc, httpx.ConnectError):
        return f"cannot connect: {exc}"
    return f"{type(exc).__name__}: {exc}"


def _failure(exc: BaseException, op_timeout: float | None) -> HttpFailure:
    if isinstance(exc, HttpFailure):
        return exc
    if isinstance(exc, httpx.UnsupportedProtocol | httpx.LocalProtocolError):
        return HttpFailure("send", f"cannot send the request: {exc}")
    if isinstance(exc, httpx.TimeoutException):
        return HttpFailure("timeout", describe(exc, op_timeout))
    if isinstance(exc, httpx.TransportError):
        return HttpFailure("transport", describe(exc, op_timeout))
    if isinstance(exc, httpx.DecodingError):
        return HttpFailure("decode", f"the reply's Content-Encoding cannot be decoded: {exc}")
    return HttpFailure("other", f"{type(exc).__name__}: {exc}")


def _expired(deadline: float | None, limit: float | None) -> HttpFailure:
    after = f" after {limit:.3g}s" if limit is not None else ""
    return HttpFailure("deadline", f"timed out{after}: the reply was not complete")


def _left(deadline: float | None) -> float | None:
    return None if deadline is None else deadline - time.monotonic()


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    return (url.scheme, url.host, url.port or _DEFAULT_PORTS.get(url.scheme))


def _redirect_target(response: httpx.Response, current: httpx.URL) -> httpx.URL:
    """Where a redirect may be followed to; raises HttpFailure when it may not."""
    status = response.status_code
    try:
        target = current.join(response.headers["location"])
    except (httpx.InvalidURL, ValueError) as exc:
        raise HttpFailure("redirect", f"HTTP {status} redirect to an invalid URL: {exc}") from None
    shown = safe_url(target)
    if _origin(target) != _origin(current):
        raise HttpFailure(
            "redirect",
            f"HTTP {status} redirect to another origin ({shown}) not followed: the request's "
            "headers and conversation are only sent to the configured server",
        )
    if status not in (307, 308):
        raise HttpFailure(
            "redirect",
            f"HTTP {status} redirect to {shown} not followed: it would turn the POST into a GET",
        )
    return target


def _over(limit: int) -> HttpFailure:
    return HttpFailure("too_large", f"the reply is larger than the limit of {limit:,} bytes")


def _declared_over(response: httpx.Response, limit: int) -> bool:
    try:
        return int(response.headers.get("content-length", "0")) > limit
    except ValueError:
        return False


# -- sync -----------------------------------------------------------------------------------


class _Worker:
    """Runs one request's blocking I/O on a daemon thread, reporting through a queue."""

    def __init__(
        self, client: httpx.Client, request: httpx.Request, max_bytes: int, preview: int
    ) -> None:
        self._queue: queue.SimpleQueue[tuple[int, Any]] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._done = False
        self._response: httpx.Response | None = None
        threading.Thread(
            target=self._run,
            args=(client, request, max_bytes, preview),
            name="actormem-http",
            daemon=True,
        ).start()

    def _run(
        self, client: httpx.Client, request: httpx.Request, max_bytes: int, preview: int
    ) -> None:
        try:
            response = client.send(request, stream=True, follow_redirects=False)
        except Exception as exc:
            self._queue.put((_FAIL, exc))
            return
        self._response = response
        try:
            if self._stop.is_set():
                return
            self._queue.put((_HEAD, response))
            ok = 200 <= response.status_code < 300
            limit = max_bytes if ok else preview
            if ok and _declared_over(response, limit):
                self._queue.put((_OVER, None))
                return
            seen = 0
            for chunk in response.iter_bytes():
                if self._stop.is_set():
                    return
                seen += len(chunk)
                if seen > limit:
                    if not ok:  # an error body: its preview is enough
                        self._queue.put((_DATA, chunk[: len(chunk) - (seen - limit)]))
                    self._queue.put((_END if not ok else _OVER, None))
                    return
                self._queue.put((_DATA, chunk))
            self._queue.put((_END, None))
        except Exception as exc:
            self._queue.put((_FAIL, exc))
        finally:
            with self._lock:
                self._done = True
                response.close()

    def next(self, deadline: float | None, limit: float | None) -> tuple[int, Any]:
        left = _left(deadline)
        if left is not None and left <= 0:
            self.cancel()
            raise _expired(deadline, limit)
        try:
            return self._queue.get(timeout=left)
        except queue.Empty:
            self.cancel()
            raise _expired(deadline, limit) from None

    def cancel(self) -> None:
        """Stop the worker: it stops at its next chunk, or at once if blocked reading."""
        self._stop.set()
        with self._lock:
            if self._done or self._response is None:
                return
            stream = self._response.extensions.get("network_stream")
            sock = stream.get_extra_info("socket") if stream is not None else None
            if isinstance(sock, socket.socket):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)


class Exchange:
    """A response whose body is read within the exchange's deadline.

    Attributes:
        response: the response (status and headers; never read it directly).
        deadline: ``time.monotonic()`` value the body must be read by
            (``None``: no limit); may be moved (a stream's body has the call's).
        limit: the seconds that deadline stands for, for messages.
    """

    def __init__(
        self,
        worker: _Worker,
        response: httpx.Response,
        deadline: float | None,
        limit: float | None,
        op_timeout: float | None,
        max_bytes: int,
    ) -> None:
        self._worker = worker
        self.response = response
        self.deadline = deadline
        self.limit = limit
        self._op_timeout = op_timeout
        self._max_bytes = max_bytes

    def chunks(self) -> Iterator[bytes]:
        """The body's (decoded) bytes as they arrive.

        Raises:
            HttpFailure: the deadline passed, the body is over the cap, or
                the connection or its decoding failed.
        """
        while True:
            kind, value = self._worker.next(self.deadline, self.limit)
            if kind == _DATA:
                yield value
            elif kind == _END:
                return
            elif kind == _OVER:
                raise _over(self._max_bytes)
            else:
                raise _failure(value, self._op_timeout)

    def read(self) -> bytes:
        """The whole body (an error body: its preview)."""
        return b"".join(self.chunks())

    def refusal(self) -> bytes | None:
        """None for a 2xx response; otherwise its error body's preview, the exchange closed.

        A preview that cannot be read is ``b""``: the status alone says what happened.
        """
        if 200 <= self.response.status_code < 300:
            return None
        try:
            return self.read()
        except HttpFailure:
            return b""
        finally:
            self.close()

    def close(self) -> None:
        """Stop reading and release the connection (idempotent)."""
        self._worker.cancel()


def open_exchange(
    client: httpx.Client,
    url: str,
    *,
    content: bytes,
    headers: dict[str, str],
    deadline: float | None,
    limit: float | None,
    op_timeout: float,
    max_bytes: int,
) -> Exchange:
    """POST ``content`` and return once the final response's headers are in.

    Args:
        client: the httpx client (its ``follow_redirects`` is not used).
        url: where to POST.
        content: the request body.
        headers: the request headers.
        deadline: ``time.monotonic()`` value by which the headers and (unless
            the caller moves it) the whole body must be in; ``None``: none.
        limit: the seconds ``deadline`` stands for, for messages.
        op_timeout: httpx's timeout for each network operation.
        max_bytes: the largest successful body read.

    Raises:
        HttpFailure: see its ``kind``.
    """
    target = httpx.URL(url)
    for _ in range(MAX_REDIRECTS + 1):
        request = client.build_request(
            "POST", target, content=content, headers=headers, timeout=op_timeout
        )
        worker = _Worker(client, request, max_bytes, ERROR_PREVIEW_BYTES)
        kind, value = worker.next(deadline, limit)
        if kind != _HEAD:
            raise _failure(value, op_timeout)
        response: httpx.Response = value
        exchange = Exchange(worker, response, deadline, limit, op_timeout, max_bytes)
        if not response.has_redirect_location:
            return exchange
        exchange.close()
        target = _redirect_target(response, target)
    raise HttpFailure("redirect", f"more than {MAX_REDIRECTS} redirects")


# -- async ----------------------------------------------------------------------------------


class AsyncExchange:
    """The async :class:`Exchange` (same attributes)."""

    def __init__(
        self,
        response: httpx.Response,
        deadline: float | None,
        limit: float | None,
        op_timeout: float | None,
        max_bytes: int,
    ) -> None:
        self.response = response
        self.deadline = deadline
        self.limit = limit
        self._op_timeout = op_timeout
        self._max_bytes = max_bytes

    async def chunks(self) -> AsyncIterator[bytes]:
        """See :meth:`Exchange.chunks`."""
        ok = 200 <= self.response.status_code < 300
        cap = self._max_bytes if ok else ERROR_PREVIEW_BYTES
        if ok and _declared_over(self.response, cap):
            raise _over(cap)
        seen = 0
        body = self.response.aiter_bytes()
        while True:
            try:
                async with asyncio.timeout(_left(self.deadline)):
                    chunk = await anext(body)
            except StopAsyncIteration:
                return
            except TimeoutError:
                raise _expired(self.deadline, self.limit) from None
            except Exception as exc:
                raise _failure(exc, self._op_timeout) from None
            seen += len(chunk)
            if seen > cap:
                if ok:
                    raise _over(cap)
                yield chunk[: len(chunk) - (seen - cap)]
                return
            yield chunk

    async def read(self) -> bytes:
        """See :meth:`Exchange.read`."""
        return b"".join([chunk async for chunk in self.chunks()])

    async def refusal(self) -> bytes | None:
        """See :meth:`Exchange.refusal`."""
        if 200 <= self.response.status_code < 300:
            return None
        try:
            return await self.read()
        except HttpFailure:
            return b""
        finally:
            await self.aclose()

    async def aclose(self) -> None:
        """Release the connection (idempotent)."""
        await self.response.aclose()


async def aopen_exchange(
    client: httpx.AsyncClient,
    url: str,
    *,
    content: bytes,
    headers: dict[str, str],
    deadline: float | None,
    limit: float | None,
    op_timeout: float,
    max_bytes: int,
) -> AsyncExchange:
    """The async :func:`open_exchange`."""
    target = httpx.URL(url)
    for _ in range(MAX_REDIRECTS + 1):
        request = client.build_request(
            "POST", target, content=content, headers=headers, timeout=op_timeout
        )
        try:
            async with asyncio.timeout(_left(deadline)):
                response = await client.send(request, stream=True, follow_redirects=False)
        except TimeoutError:
            raise _expired(deadline, limit) from None
        except Exception as exc:
            raise _failure(exc, op_timeout) from None
        exchange = AsyncExchange(response, deadline, limit, op_timeout, max_bytes)
        if not response.has_redirect_location:
            return exchange
        await exchange.aclose()
        target = _redirect_target(response, target)
    raise HttpFailure("redirect", f"more than {MAX_REDIRECTS} redirects")

"""Reading what an OpenAI-compatible server answers: streams, error bodies, usage.

Split from :mod:`actormem.models.openai` (which does the requests and
retries; :mod:`actormem.models._openai_parse` judges one decoded reply)
because a streamed reply has its own state: the media type may be missing or
wrong (a server that ignores ``stream`` answers one JSON body, sometimes
labelled ``text/plain``), the bytes are split into lines across network
reads, and a stream is only complete when it says so.
"""

from __future__ import annotations

import codecs
import email.utils
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Final

import httpx
import msgspec

if TYPE_CHECKING:
    from actormem.models.openai import OpenAIChatModel

__all__ = ["PREVIEW", "StreamReply", "error_detail", "error_text", "retry_after", "usage"]

#: Characters of a server's text quoted in an error message.
PREVIEW: Final = 300
_MAX_TOKENS: Final = 2**53  # a token count past this is not a count


class StreamReply:
    """Turns a streamed reply's bytes into text pieces.

    The reply is server-sent events when its Content-Type says
    ``text/event-stream``, one JSON reply when it says JSON (any case, ``+json``
    too), and otherwise whichever its first non-blank byte shows (``{`` or
    ``[``: JSON).  Events end at ``data: [DONE]`` (:attr:`done`); a stream
    that closes before it -- and not right after an event carrying a
    ``finish_reason`` -- is broken, and :meth:`end` says so.
    """

    def __init__(self, model: OpenAIChatModel, response: httpx.Response, started: float) -> None:
        self._model = model
        self._status = response.status_code
        self._started = started
        media = response.headers.get("content-type", "").split(";")[0].strip().lower()
        self._mode: str | None = None
        if media == "text/event-stream":
            self._mode = "sse"
        elif media == "application/json" or media.endswith("+json"):
            self._mode = "json"
        self._head = bytearray()
        self._text = codecs.getincrementaldecoder("utf-8")()
        self._parts: list[str] = []
        self._pieces = 0
        self._events = 0
        self._start = b""
        self._media = media
        self._finished = False
        #: True once ``data: [DONE]`` (or the JSON reply) has been read.
        self.done = False

    def feed(self, chunk: bytes) -> Iterator[str]:
        """The text pieces ``chunk`` completes (raises ModelError for a malformed stream)."""
        if self._mode is None:
            self._head += chunk
            start = bytes(self._head.lstrip()[:1])
            if not start:
                return
            self._mode = "json" if start in (b"{", b"[") else "sse"
            chunk, self._head = bytes(self._head), bytearray()
        if self._mode == "json":
            self._head += chunk  # the exchange caps the body's size
            return
        yield from self._lines(chunk, final=False)

    def end(self) -> Iterator[str]:
        """The last pieces once the body has ended; ModelError when the stream broke."""
        if self._mode == "json":
            self.done = True
            yield self._model._finish(bytes(self._head), self._status, self._started).text
            return
        yield from self._lines(b"", final=True)
        if self._start.strip() and not self._events:
            start = self._model._redact(self._start.decode("utf-8", "replace"))
            raise self._model._error(
                f"the reply is neither an event stream nor JSON (Content-Type "
                f"{self._media or 'none'!r}); it starts with {start!r}",
                problem="malformed reply",
            )
        if not (self.done or self._finished):
            raise self._model._error(
                "the stream broke: the server closed it before data: [DONE] "
                f"({self._pieces} text piece(s) received)",
                problem="stream broke",
            )

    def _lines(self, chunk: bytes, *, final: bool) -> Iterator[str]:
        if len(self._start) < PREVIEW:
            self._start += chunk[: PREVIEW - len(self._start)]
        try:
            text = self._text.decode(chunk, final)
        except UnicodeDecodeError as exc:
            raise self._model._error(
                f"the stream is not valid UTF-8 ({exc})", problem="malformed reply"
            ) from None
        if "\n" not in text and not final:
            self._parts.append(text)  # joined once a line ends: no quadratic copying
            return
        self._parts.append(text)
        *lines, rest = "".join(self._parts).split("\n")
        self._parts = [rest] if rest else []
        if final:  # an unterminated last line is an event cut short, unless it ends the stream
            if rest.strip() == "data: [DONE]":
                lines.append(rest)
            self._parts = []
        for line in lines:
            piece = self._event(line.rstrip("\r"))
            if self.done:
                return
            if piece:
                self._pieces += 1
                yield piece

    def _event(self, line: str) -> str:
        """The text of one SSE line (``""`` for none); sets :attr:`done` at ``[DONE]``."""
        if not line.startswith("data:"):
            return ""  # blank lines, comments, event names
        self._events += 1
        payload = line[5:].strip()
        if payload == "[DONE]":
            self.done = True
            return ""
        if not payload:
            return ""
        data = self._model._decode(payload, "a stream event")
        if not isinstance(data, dict):
            raise self._model._error("a stream event is not a JSON object")
        if data.get("error"):
            raise self._model._error(
                f"the server returned an error: {error_text(data['error'])}",
                problem="error in the reply",
            )
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            return ""  # e.g. a final usage-only chunk
        if choices[0].get("finish_reason"):
            self._finished = True
        delta = choices[0].get("delta")
        content = delta.get("content") if isinstance(delta, dict) else None
        return content if isinstance(content, str) else ""


def retry_after(response: httpx.Response) -> float | None:
    """The seconds ``Retry-After`` asks for (a number or an HTTP date), if any."""
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


def error_text(error: Any) -> str:
    """An ``error`` member of a reply as text."""
    if isinstance(error, dict):
        return str(error.get("message") or error.get("type") or error)
    return str(error)


def error_detail(preview: bytes) -> str:
    """The error an error body's first bytes describe, at most :data:`PREVIEW` characters."""
    text = preview.decode("utf-8", "replace")
    try:
        data = msgspec.json.decode(preview)
    except (msgspec.DecodeError, UnicodeError, RecursionError):
        return text[:PREVIEW].strip()
    if isinstance(data, dict):
        for key in ("error", "detail", "message"):
            if data.get(key):
                return error_text(data[key])[:PREVIEW]
    return text[:PREVIEW].strip()


def usage(raw: Any) -> dict[str, int] | None:
    """The token counts of a reply's ``usage`` (counts that are not 0..2**53 are left out)."""
    if not isinstance(raw, dict):
        return None
    out: dict[str, int] = {}
    for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
        value = raw.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= _MAX_TOKENS:
            out[key] = value
    if not out:
        return None
    if "total_tokens" not in out:
        out["total_tokens"] = out.get("prompt_tokens", 0) + out.get("completion_tokens", 0)
    return out

"""The live view's feed: the runtime's events, kept for the browsers that watch.

One subscription to the runtime's event bus (its own delivery thread, like
every subscriber) turns each event into a JSON line once and appends it to a
bounded ring.  Browsers read the ring from where they are (server-sent
events, ``Last-Event-ID`` on reconnect); one that falls further behind than
the ring is told how many events it missed.  So neither a slow browser nor
many browsers ever reach the agent: ``add()`` only queues the event for the
bus, the ring's memory is bounded, and a stalled connection holds only its
own position.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from typing import TYPE_CHECKING, Any, Final

import msgspec
import structlog

from actormem.compress import EstimateTokenCounter
from actormem.events import (
    ActorRestarted,
    CompressionFailed,
    CompressionSkipped,
    CompressionStarted,
    ContextCompressed,
    DreamCompleted,
    Event,
    FactReconciled,
    JournalWritten,
    LogCompacted,
    MaintenanceRan,
    MemoryCleared,
    MemoryRecorded,
    MemoryRetrieved,
    MessageAdded,
    MessagesDeleted,
    MessagesReplaced,
    ModelFallback,
    NowUpdated,
    RecordingBacklog,
    RecordingFailed,
    SessionLoaded,
    SessionSaved,
)
from actormem.messages import Msg

if TYPE_CHECKING:
    from reactivex import abc as rx_abc

    from actormem.runtime import MemoryRuntime

__all__ = ["LiveFeed", "describe"]

log = structlog.get_logger(__name__)

_MAX_DATA: Final = 16_000  # bytes of an event's JSON sent whole; larger ones are cut
_MAX_TEXT: Final = 4_000  # characters of one message shown in the context panel
_STM_EVENTS: Final = (MessageAdded, MessagesDeleted, MemoryCleared, MessagesReplaced)


def _clip(text: str, n: int = 90) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def describe(e: Event) -> tuple[str, str]:
    """A one-line summary of an event and its group (for colour): ``(text, group)``."""
    match e:
        case MessageAdded(msg=m, index=i):
            what = m.text or ", ".join(f"{t.name}()" for t in m.tool_uses) or "(no text)"
            return f"#{i} {m.role}: {_clip(what)}", "message"
        case MessagesDeleted(ids=ids):
            return f"{len(ids)} message(s) deleted", "message"
        case MemoryCleared(count=n):
            return f"short-term memory cleared ({n} messages)", "message"
        case MessagesReplaced(removed_ids=r, added_ids=a, reason=why):
            return f"{len(r)} message(s) replaced by {len(a)} ({why or 'replace'})", "compress"
        case CompressionStarted(messages=n, tokens=t):
            return f"compression started: {n} messages, {t:,} tokens", "compress"
        case ContextCompressed(strategy=s, tokens_before=b, tokens_after=a, messages_replaced=n):
            saved = f" (-{100 * (b - a) / b:.0f}%)" if b else ""
            return f"{s}: {b:,} → {a:,} tokens{saved}, {n} message(s) replaced", "compress"
        case CompressionSkipped(reason=why):
            return f"compression skipped: {_clip(why)}", "compress"
        case CompressionFailed(error=err):
            return f"compression failed: {_clip(err)}", "error"
        case ModelFallback(component=c, fallback=f, error=err):
            return f"{c} fell back to {f}: {_clip(err, 60)}", "error"
        case MemoryRecorded(added=a, updated=u, deleted=d, unchanged=n, turns=t):
            return f"{t} turn(s) recorded: +{a} added, {u} updated, {d} deleted, {n} kept", "memory"
        case MemoryRetrieved(query=q, hit_ids=ids, latency_ms=ms):
            return f"retrieved {len(ids)} for “{_clip(q, 50)}” in {ms:.1f} ms", "memory"
        case FactReconciled(op=op, old=old, new=new):
            change = f"{_clip(old, 40)} → {_clip(new, 40)}" if old and new else _clip(new or old)
            return f"{op}: {change}", "memory"
        case RecordingBacklog(pending=p, limit=lim):
            return f"recording backlog: {p:,} pending (limit {lim:,})", "error"
        case RecordingFailed(error=err, action=act):
            return f"recording failed ({act}): {_clip(err, 60)}", "error"
        case MaintenanceRan(duration_ms=ms):
            return f"maintenance ran in {ms:.0f} ms", "memory"
        case ActorRestarted(actor=a, error=err, restarts=n):
            return f"actor {a} restarted (#{n}) after {_clip(err, 60)}", "error"
        case SessionSaved(session_id=sid, nbytes=n):
            return f"session {sid!r} saved ({n:,} bytes)", "session"
        case SessionLoaded(session_id=sid, found=f):
            return f"session {sid!r} {'loaded' if f else 'not found'}", "session"
        case NowUpdated(objective=o, state=s):
            return f"NOW ({s or 'idle'}): {_clip(o)}", "journal"
        case LogCompacted(entries=n):
            return f"log compacted: {n} entries summarized", "journal"
        case JournalWritten(lines=n, day=d):
            return f"journal {d}: {n} line(s)", "journal"
        case DreamCompleted(changes=n, skipped=s):
            return ("dream skipped (nothing changed)" if s else f"dream: {n} change(s)"), "journal"
    return type(e).__name__, "other"


class _Waiter:
    __slots__ = ("event", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.event = asyncio.Event()


class LiveFeed:
    """Recent events of a runtime as JSON, in order, with sequence numbers.

    Args:
        runtime: the agent's runtime (its bus and its short-term memory).
        ring: how many recent events to keep.
    """

    def __init__(self, runtime: MemoryRuntime, ring: int = 2000) -> None:
        self._rt = runtime
        self._ring: deque[tuple[int, str]] = deque(maxlen=ring)
        self._lock = threading.Lock()
        self._seq = 0
        self._stm_version = -1
        self._waiters: set[_Waiter] = set()
        self._closed = False
        self._counter = EstimateTokenCounter()
        self._context: tuple[int, str] | None = None
        self._context_lock = threading.Lock()
        self._sub: rx_abc.DisposableBase | None = runtime.bus.observable(name="ui").subscribe(
            self._push, on_completed=self._completed
        )

    @property
    def seq(self) -> int:
        """The sequence number of the newest event (0 before the first)."""
        return self._seq

    @property
    def stm_version(self) -> int:
        """The short-term memory version the newest event reported (-1: none yet)."""
        return self._stm_version

    @property
    def closed(self) -> bool:
        return self._closed

    def _push(self, event: Event) -> None:
        """On the feed's delivery thread: encode once, append, wake the browsers."""
        text, group = describe(event)
        data: Any = msgspec.to_builtins(event)
        body = msgspec.json.encode(data)
        if len(body) > _MAX_DATA:
            data = {"event": type(event).__name__, "truncated": len(body)}
        version = getattr(event, "version", None)
        with self._lock:
            self._seq += 1
            seq = self._seq
            payload = msgspec.json.encode(
                {
                    "seq": seq,
                    "type": type(event).__name__,
                    "source": event.source,
                    "ts": event.ts,
                    "summary": text,
                    "group": group,
                    "data": data,
                }
            ).decode()
            self._ring.append((seq, payload))
            if isinstance(event, _STM_EVENTS) and isinstance(version, int):
                self._stm_version = max(self._stm_version, version)
            waiters = list(self._waiters)
        self._wake(waiters)

    def _completed(self) -> None:
        self.close()

    def _wake(self, waiters: list[_Waiter]) -> None:
        for w in waiters:
            with contextlib.suppress(RuntimeError):  # that loop closed: the server stopped
                w.loop.call_soon_threadsafe(w.event.set)

    def since(self, seq: int) -> tuple[list[tuple[int, str]], int]:
        """Events after ``seq`` and how many of those already left the ring."""
        with self._lock:
            items = [(s, p) for s, p in self._ring if s > seq]
            first = items[0][0] if items else self._seq + 1
        return items, max(0, first - seq - 1)

    def recent(self, n: int) -> list[tuple[int, str]]:
        """The last ``n`` events."""
        with self._lock:
            return list(self._ring)[-n:]

    async def wait(self, seq: int, timeout: float) -> None:
        """Return when an event newer than ``seq`` exists, the feed closes, or ``timeout``."""
        w = _Waiter(asyncio.get_running_loop())
        with self._lock:
            if self._seq > seq or self._closed:
                return
            self._waiters.add(w)
        try:
            await asyncio.wait_for(w.event.wait(), timeout)
        except TimeoutError:
            pass
        finally:
            with self._lock:
                self._waiters.discard(w)

    def context(self) -> str:
        """The short-term context as the model will see it next, as JSON (blocking)."""
        version, msgs = self._rt.snapshot()
        with self._context_lock:
            if self._context is not None and self._context[0] == version:
                return self._context[1]
            body = self._render_context(version, msgs)
            self._context = (version, body)
            return body

    def _render_context(self, version: int, msgs: list[Msg]) -> str:
        rows = []
        total = 0
        for m in msgs:
            tokens = self._counter.count_msgs([m])
            total += tokens
            text = m.text or ", ".join(
                f"{t.name}({msgspec.json.encode(t.input).decode()})" for t in m.tool_uses
            )
            rows.append(
                {
                    "id": m.id,
                    "role": m.role,
                    "name": m.name or "",
                    "text": text[:_MAX_TEXT] + ("…" if len(text) > _MAX_TEXT else ""),
                    "tokens": tokens,
                }
            )
        return msgspec.json.encode(
            {"version": version, "tokens": total, "count": len(rows), "messages": rows}
        ).decode()

    def close(self) -> None:
        """Stop listening and wake every browser (their streams end)."""
        with self._lock:
            self._closed = True
            waiters = list(self._waiters)
            sub, self._sub = self._sub, None
        if sub is not None:
            sub.dispose()
        self._wake(waiters)

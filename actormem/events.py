"""Events that the memory actors publish, and the commands they receive.

Every event is a frozen msgspec Struct tagged by its class name in the
``event`` field, so a stream of events encodes to JSON lines and decodes back
to the right types with :func:`decode_event`.  ``source`` names the actor that
emitted it; ``ts`` is Unix time in seconds.

Commands are the typed messages the runtime sends to its actors (one tagged
union, :data:`Command`).  They live here beside the events so that one module
holds every message that crosses an actor boundary.
"""

from __future__ import annotations

import time
from typing import Any, Final

import msgspec

from actormem.messages import Msg

__all__ = [
    "ActorRestarted",
    "AddMessages",
    "AnyEvent",
    "ClearMessages",
    "Command",
    "CompressionFailed",
    "CompressionSkipped",
    "CompressionStarted",
    "ContextCompressed",
    "DeleteMessages",
    "DreamCompleted",
    "Event",
    "FactReconciled",
    "GetMessages",
    "GetSize",
    "GetState",
    "JournalWritten",
    "LoadState",
    "LogCompacted",
    "MaintenanceRan",
    "MemoryCleared",
    "MemoryRecorded",
    "MemoryRetrieved",
    "MessageAdded",
    "MessagesDeleted",
    "MessagesReplaced",
    "ModelFallback",
    "NowUpdated",
    "RecordingBacklog",
    "RecordingFailed",
    "ReplaceMessages",
    "SessionLoaded",
    "SessionSaved",
    "decode_event",
    "encode_event",
]


class Event(msgspec.Struct, frozen=True, kw_only=True, tag_field="event", tag=True):
    """Base of every event: ``source`` actor name and ``ts`` (Unix seconds)."""

    source: str = ""
    ts: float = msgspec.field(default_factory=time.time)


# -- short-term memory ------------------------------------------------------------


class MessageAdded(Event, frozen=True, kw_only=True):
    """A message was appended to the short-term memory (``index`` in the list)."""

    msg: Msg
    index: int
    version: int


class MessagesDeleted(Event, frozen=True, kw_only=True):
    """Messages were removed from the short-term memory."""

    ids: tuple[str, ...]
    version: int


class MemoryCleared(Event, frozen=True, kw_only=True):
    """The short-term memory was emptied."""

    count: int
    version: int


class MessagesReplaced(Event, frozen=True, kw_only=True):
    """A span of working messages was replaced (compression applied, state loaded)."""

    removed_ids: tuple[str, ...]
    added_ids: tuple[str, ...]
    version: int
    reason: str = ""


class ActorRestarted(Event, frozen=True, kw_only=True):
    """A supervised actor failed and was restarted with its last state."""

    actor: str
    error: str
    restarts: int
    dropped_command: str = ""


class SessionSaved(Event, frozen=True, kw_only=True):
    """A session file was written atomically."""

    session_id: str
    path: str
    nbytes: int
    duration_ms: float


class SessionLoaded(Event, frozen=True, kw_only=True):
    """A session file was read (``found`` is False when it did not exist)."""

    session_id: str
    path: str
    found: bool
    duration_ms: float


# -- AutoContext compressor -------------------------------------------------------


class CompressionStarted(Event, frozen=True, kw_only=True):
    """A compression pass began over ``messages`` working messages."""

    pass_id: str
    messages: int
    tokens: int
    base_version: int


class ContextCompressed(Event, frozen=True, kw_only=True):
    """A compression pass applied one strategy."""

    pass_id: str
    strategy: str
    tokens_before: int
    tokens_after: int
    messages_replaced: int
    offload_ids: tuple[str, ...] = ()
    duration_ms: float = 0.0
    summarizer: str = ""


class CompressionSkipped(Event, frozen=True, kw_only=True):
    """A compression check or pass changed nothing, and why."""

    reason: str
    tokens: int = 0
    messages: int = 0


class CompressionFailed(Event, frozen=True, kw_only=True):
    """A compression pass raised; the working messages were left unchanged."""

    error: str
    pass_id: str = ""


class ModelFallback(Event, frozen=True, kw_only=True):
    """A model call failed or timed out and an offline fallback was used."""

    component: str
    error: str
    fallback: str


# -- long-term recorder -------------------------------------------------------------


class MemoryRecorded(Event, frozen=True, kw_only=True):
    """A batch of turns was committed to the long-term store."""

    ids: tuple[str, ...]
    added: int = 0
    updated: int = 0
    deleted: int = 0
    unchanged: int = 0
    turns: int = 0
    duration_ms: float = 0.0


class MemoryRetrieved(Event, frozen=True, kw_only=True):
    """A long-term search ran."""

    query: str
    hit_ids: tuple[str, ...]
    scores: tuple[float, ...]
    latency_ms: float


class FactReconciled(Event, frozen=True, kw_only=True):
    """A fact was reconciled against the store: ADD, UPDATE, DELETE or NONE."""

    op: str
    memory_id: str
    old: str = ""
    new: str = ""


class RecordingBacklog(Event, frozen=True, kw_only=True):
    """The recorder's queue is long (back-pressure warning)."""

    pending: int
    limit: int


class RecordingFailed(Event, frozen=True, kw_only=True):
    """A recording batch or an extraction failed; what happened to the turns.

    ``turns``: turns not recorded.  ``refused``: memories the store refused
    while the rest of their batch (or of the session's end) was recorded --
    their turns are not counted in ``turns``; ``error`` names them.
    """

    error: str
    turns: int = 0
    action: str = ""
    refused: int = 0


class MaintenanceRan(Event, frozen=True, kw_only=True):
    """on_idle maintenance ran on the store; ``report`` says what it did."""

    report: dict[str, Any] = msgspec.field(default_factory=dict)
    duration_ms: float = 0.0


# -- journal ------------------------------------------------------------------


class NowUpdated(Event, frozen=True, kw_only=True):
    """The working status (NOW) changed; ``imported`` when it came from a hand edit of NOW.md."""

    objective: str
    next_steps: tuple[str, ...] = ()
    state: str = ""
    imported: bool = False
    path: str = ""


class LogCompacted(Event, frozen=True, kw_only=True):
    """The activity log was compacted: ``entries`` summarized into memory ``summary_id``."""

    entries: int
    summary_id: str
    compaction_id: str = ""
    bytes_before: int = 0
    bytes_after: int = 0
    summarizer: str = ""


class JournalWritten(Event, frozen=True, kw_only=True):
    """Lines were appended to a daily journal file (``ids``: the memories they show)."""

    path: str
    lines: int
    day: str = ""
    ids: tuple[str, ...] = ()


class DreamCompleted(Event, frozen=True, kw_only=True):
    """A deep dream finished (``skipped`` when its input was unchanged)."""

    changes: int
    path: str
    skipped: bool = False
    added: int = 0
    removed: int = 0
    updated: int = 0
    merged: int = 0
    items: int = 0
    input_hash: str = ""


AnyEvent = (
    MessageAdded
    | MessagesDeleted
    | MemoryCleared
    | MessagesReplaced
    | ActorRestarted
    | SessionSaved
    | SessionLoaded
    | CompressionStarted
    | ContextCompressed
    | CompressionSkipped
    | CompressionFailed
    | ModelFallback
    | MemoryRecorded
    | MemoryRetrieved
    | FactReconciled
    | RecordingBacklog
    | RecordingFailed
    | MaintenanceRan
    | NowUpdated
    | LogCompacted
    | JournalWritten
    | DreamCompleted
)

_EVENT_ENCODER: Final = msgspec.json.Encoder()
_EVENT_DECODER: Final = msgspec.json.Decoder(AnyEvent)


def encode_event(event: Event) -> bytes:
    """Encode an event as one JSON object (``{"event": "MessageAdded", ...}``)."""
    return _EVENT_ENCODER.encode(event)


def decode_event(data: bytes | str) -> Event:
    """Decode an event encoded by :func:`encode_event`."""
    ev: Event = _EVENT_DECODER.decode(data)
    return ev


# -- commands to the short-term memory actor -------------------------------------------


class _Cmd(msgspec.Struct, frozen=True, kw_only=True, tag_field="cmd", tag=True):
    pass


class AddMessages(_Cmd, frozen=True, kw_only=True):
    """Append messages (already validated by the caller)."""

    msgs: tuple[Msg, ...]


class GetMessages(_Cmd, frozen=True, kw_only=True):
    """Return ``(version, messages)``."""


class GetSize(_Cmd, frozen=True, kw_only=True):
    """Return the number of working messages."""


class DeleteMessages(_Cmd, frozen=True, kw_only=True):
    """Delete by index and/or by id; returns the number removed."""

    indices: tuple[int, ...] = ()
    ids: tuple[str, ...] = ()


class ClearMessages(_Cmd, frozen=True, kw_only=True):
    """Remove every message; returns how many there were."""


class ReplaceMessages(_Cmd, frozen=True, kw_only=True):
    """Replace the first ``count`` messages with ``replacement`` if the version matches.

    ``expected_version`` is the version the caller read.  Messages appended
    after that version (beyond the first ``count``) are kept, so nothing
    added during a compression is lost.  The reply is the new version, or -1
    if the base changed in a way that makes the replacement unsafe (a delete
    or clear happened meanwhile) and the caller must retry on the new base.
    """

    expected_version: int
    count: int
    replacement: tuple[Msg, ...]
    reason: str = ""


class GetState(_Cmd, frozen=True, kw_only=True):
    """Return the actor's state dict."""


class LoadState(_Cmd, frozen=True, kw_only=True):
    """Replace the actor's state with ``state`` (the actor's own state type)."""

    state: Any


Command = (
    AddMessages
    | GetMessages
    | DeleteMessages
    | ClearMessages
    | ReplaceMessages
    | GetState
    | LoadState
)

"""actormem: a memory runtime for LLM agents.

Every memory tier is a pykka actor, the actors exchange msgspec messages, and
everything the memory does is a reactivex stream you can subscribe to.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from actormem.actors._supervisor import ActorUnavailableError
from actormem.actors.recorder import RecordingError
from actormem.agent import MemoryHooks, ReActAgent, Tool, tool
from actormem.compress import AutoContextConfig
from actormem.events import (
    ActorRestarted,
    Event,
    MemoryCleared,
    MessageAdded,
    MessagesDeleted,
    MessagesReplaced,
    SessionLoaded,
    SessionSaved,
    decode_event,
    encode_event,
)
from actormem.logs import _configure_default, configure_logging
from actormem.messages import (
    ImageBlock,
    MessageError,
    Msg,
    OffloadRefBlock,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    from_openai,
    to_openai,
)
from actormem.recorder import LongTermMemoryMode, RecorderConfig
from actormem.runtime import MemoryRuntime
from actormem.session import (
    JsonSession,
    PostgresSession,
    SessionConflictError,
    SessionError,
    SessionManager,
)
from actormem.state import StateError, StateModule
from actormem.store import Namespace

if TYPE_CHECKING:
    from actormem.store import DuckDBStore

_configure_default()

__version__ = "0.1.0"

__all__ = [
    "ActorRestarted",
    "ActorUnavailableError",
    "AutoContextConfig",
    "DuckDBStore",
    "Event",
    "ImageBlock",
    "JsonSession",
    "LongTermMemoryMode",
    "MemoryCleared",
    "MemoryHooks",
    "MemoryRuntime",
    "MessageAdded",
    "MessageError",
    "MessagesDeleted",
    "MessagesReplaced",
    "Msg",
    "Namespace",
    "OffloadRefBlock",
    "PostgresSession",
    "ReActAgent",
    "RecorderConfig",
    "RecordingError",
    "SessionConflictError",
    "SessionError",
    "SessionLoaded",
    "SessionManager",
    "SessionSaved",
    "StateError",
    "StateModule",
    "TextBlock",
    "Tool",
    "ToolResultBlock",
    "ToolUseBlock",
    "__version__",
    "configure_logging",
    "decode_event",
    "encode_event",
    "from_openai",
    "to_openai",
    "tool",
]


def __getattr__(name: str) -> Any:
    # DuckDBStore is imported on first use: an agent on PostgreSQL (one process per
    # agent on a cluster) never loads DuckDB (51 MB RSS, 6 MB of its own, 0.1-0.3 s).
    if name == "DuckDBStore":
        from actormem.store import DuckDBStore

        return DuckDBStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

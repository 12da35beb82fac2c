"""actormem: a memory runtime for LLM agents.

Every memory tier is a pykka actor, the actors exchange msgspec messages, and
everything the memory does is a reactivex stream you can subscribe to.

The names below are imported on first use (PEP 562): a bare ``import
actormem`` loads none of the library's modules and none of its dependencies
(numpy, DuckDB, pyarrow, structlog with rich...), which otherwise took most
of a process's cold start and of a cluster agent's reload; ``from actormem
import MemoryRuntime`` loads what the runtime needs and nothing more.  The
quiet logging default (:mod:`actormem.logs`) is installed by the first of the
library's modules that logs, not by this one.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
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
    from actormem.logs import configure_logging
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
    from actormem.store import DuckDBStore, Namespace

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

# Where each public name lives (the TYPE_CHECKING imports above say the same to
# type checkers; tests/test_lazy_import.py checks the two agree with __all__).
_HOMES: Final[dict[str, str]] = {
    "ActorUnavailableError": "actormem.actors._supervisor",
    "RecordingError": "actormem.actors.recorder",
    "AutoContextConfig": "actormem.compress",
    "configure_logging": "actormem.logs",
    "LongTermMemoryMode": "actormem.recorder",
    "RecorderConfig": "actormem.recorder",
    "MemoryRuntime": "actormem.runtime",
    "DuckDBStore": "actormem.store",
    "Namespace": "actormem.store",
    **dict.fromkeys(("MemoryHooks", "ReActAgent", "Tool", "tool"), "actormem.agent"),
    **dict.fromkeys(
        (
            "ActorRestarted",
            "Event",
            "MemoryCleared",
            "MessageAdded",
            "MessagesDeleted",
            "MessagesReplaced",
            "SessionLoaded",
            "SessionSaved",
            "decode_event",
            "encode_event",
        ),
        "actormem.events",
    ),
    **dict.fromkeys(
        (
            "ImageBlock",
            "MessageError",
            "Msg",
            "OffloadRefBlock",
            "TextBlock",
            "ToolResultBlock",
            "ToolUseBlock",
            "from_openai",
            "to_openai",
        ),
        "actormem.messages",
    ),
    **dict.fromkeys(
        (
            "JsonSession",
            "PostgresSession",
            "SessionConflictError",
            "SessionError",
            "SessionManager",
        ),
        "actormem.session",
    ),
    **dict.fromkeys(("StateError", "StateModule"), "actormem.state"),
}


def _lazy_names(
    package: str, homes: Mapping[str, str], space: dict[str, Any], names: Sequence[str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's PEP 562 ``__getattr__`` and ``__dir__``: a name of ``homes``
    is imported from its module on first use and kept in ``space`` (the
    package's globals), so the next lookup is a plain module attribute.  Used
    by this package and :mod:`actormem.store` (here, so that a bare ``import
    actormem`` still loads no other module of the library)."""

    def lookup(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        space[name] = value
        return value

    def listing() -> list[str]:
        return sorted(set(space) | set(names))

    return lookup, listing


__getattr__, __dir__ = _lazy_names(__name__, _HOMES, globals(), __all__)

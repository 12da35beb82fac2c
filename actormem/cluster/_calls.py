"""The runtime calls a remote agent answers, and how each behaves across a failover.

One table, read by the hosting actor (which calls may be forwarded, which
change the short-term state) and by the handle (which may be resent to a
restarted actor, which leave unacknowledged state behind).  A call added
to :class:`~actormem.runtime.MemoryRuntime` must be added here (or to
:data:`NOT_FORWARDED` with the reason): ``tests/cluster/test_cluster_calls.py``
walks the runtime's public members, of the class and of an instance.
"""

from __future__ import annotations

from typing import Final

import msgspec

__all__ = ["ASYNC_TWINS", "CALLS", "HOST_CALLS", "NOT_FORWARDED", "Call"]


class Call(msgspec.Struct, frozen=True):
    """How one forwarded call behaves.

    Attributes:
        retry: safe to send again to a restarted actor when the actor died
            while the call was in flight (reads; ``add`` is deduplicated by
            message id; saves and flushes repeat whole).
        changes: changes the short-term state the session holds, so it is
            not acknowledged until the next ``flush()``/``save_session()``
            (or at once with ``write_through``).
        records: hands turns to the recorder (acknowledged by ``flush()``).
    """

    retry: bool
    changes: bool = False
    records: bool = False


_READ: Final = Call(retry=True)

#: Forwarded to the actor's runtime by name (``flush``, ``save_session`` and the
#: session calls are the actor's own methods; see ``_host``).
CALLS: Final[dict[str, Call]] = {
    # short-term memory
    "add": Call(retry=True, changes=True),
    "add_many": Call(retry=True, changes=True),
    "messages": _READ,
    "snapshot": _READ,
    "size": _READ,
    "delete": Call(retry=False, changes=True),
    "clear": Call(retry=False, changes=True),
    # compression
    "compress_now": Call(retry=False, changes=True),
    "reload": _READ,
    "history": _READ,
    "context_reload": _READ,
    # long-term memory: reads, and writes that are durable when they return
    "record": Call(retry=False, records=True),
    "retrieve": _READ,
    "format_for_injection": _READ,
    "recording_stats": _READ,
    "save_fact": Call(retry=True),
    "get_fact": _READ,
    # tools (record_to_memory writes to the store before it returns)
    "tools": _READ,
    "call_tool": Call(retry=False),
    # lifecycle hooks
    # (both clear the fleeting scratchpad, which is saved with the session)
    "on_turn_end": Call(retry=True, changes=True),
    "on_session_end": Call(retry=False, changes=True),
    "on_idle": Call(retry=False),
    # sessions and state
    "load_session": Call(retry=True, changes=True),
    "state_dict": _READ,
    "load_state_dict": Call(retry=True, changes=True),
    # journal (every write goes to the store before it returns)
    "update_now": Call(retry=False),
    "sync_journal": Call(retry=True),
    "now": _READ,
    "log": Call(retry=False),
    "log_many": Call(retry=False),
    "working_memory": _READ,
    "dream": Call(retry=False),
    # properties read remotely
    "restart_count": _READ,
    # the runtime's fleeting memory (``handle.fleeting``, a mapping; saved with the session)
    "fleeting_get": _READ,
    "fleeting_set": Call(retry=True, changes=True),
    "fleeting_delete": Call(retry=False, changes=True),
    # the actor's own: a returned one acknowledges everything before it
    "flush": Call(retry=True),
    "save_session": Call(retry=True),
}

#: ``a``-prefixed asyncio twins of the runtime -> the call they await.
ASYNC_TWINS: Final[dict[str, str]] = {
    "a" + name: name
    for name in (
        "add",
        "add_many",
        "messages",
        "snapshot",
        "size",
        "delete",
        "clear",
        "compress_now",
        "reload",
        "history",
        "context_reload",
        "record",
        "retrieve",
        "format_for_injection",
        "save_fact",
        "get_fact",
        "call_tool",
        "on_turn_end",
        "on_session_end",
        "on_idle",
        "load_session",
        "update_now",
        "sync_journal",
        "now",
        "log",
        "log_many",
        "working_memory",
        "dream",
        "flush",
        "save_session",
        "close",
    )
}

#: Calls of the table that are not runtime methods: the host answers them itself.
HOST_CALLS: Final = frozenset({"fleeting_get", "fleeting_set", "fleeting_delete"})

#: Public runtime members (of the class, or set on each instance) a remote handle
#: does not forward, and why; reading one on a handle raises AttributeError saying so.
NOT_FORWARDED: Final[dict[str, str]] = {
    "aopen": "the handle is made by RemoteRuntime.connect / aconnect",
    "serve_ui": "the explorer reads the store: run `actormem ui` on the PostgreSQL URL",
    "ui": "no explorer runs inside the actor",
    "facts": "the KeyedFacts object holds the actor's store: use save_fact / get_fact",
    "register_state": "the runtime's state components are fixed",
    "load_state_json": "load_state_dict carries the same state as plain values",
    "bus": "the event bus lives in the actor's process: events, stream(...) and "
    "subscribe(...) bring its events to this one",
    "turns": "the turn gate is the actor's own: add() begins a turn and on_turn_end() ends it",
    "short_term": "the short-term memory actor lives in the actor's process: use messages(), "
    "snapshot(), add(), delete(), clear() and state_dict()",
    "autocontext": "the compressor lives in the actor's process: use compressor_enabled, "
    "compress_now(), history() and context_reload()",
    "session_versions": "the session versions are checked in the actor, against what its "
    "runtime loaded (one writer per session): load_session() and save_session() go there",
}

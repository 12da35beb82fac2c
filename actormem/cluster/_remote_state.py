"""The parts of a remote agent's state a handle shows as local objects:
``RemoteRuntime.fleeting`` (a mapping) and ``RemoteRuntime.session`` (the
session storage a ``ReActAgent`` saves through).

Kept apart from :mod:`actormem.cluster._handle` (the handle's calls and
failover): each operation here is one of the handle's calls, and these
classes only give them the shape of a ``MutableMapping`` and of a session
storage.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping
from typing import TYPE_CHECKING, Any, TypeGuard

from actormem.runtime import MemoryRuntime
from actormem.session import SessionError, SessionInfo, SessionStorageError

if TYPE_CHECKING:
    from actormem.cluster._handle import RemoteRuntime
    from actormem.state import StateModule

__all__ = ["RemoteFleeting", "RemoteSessions"]


class RemoteFleeting(MutableMapping[str, Any]):
    """``RemoteRuntime.fleeting``: the actor's fleeting memory as a mapping.

    Each operation is one call to the actor; setting or deleting a key changes
    the session's state (acknowledged by the next ``flush()``/``save_session()``,
    as an ``add``).  Values must be picklable (JSON ones are saved with the session).
    """

    def __init__(self, handle: RemoteRuntime) -> None:
        self._handle = handle

    def __getitem__(self, key: str) -> Any:
        found, value = self._handle._call("fleeting_get", key)
        if not found:
            raise KeyError(key)
        return value

    def __setitem__(self, key: str, value: Any) -> None:
        if not isinstance(key, str):
            raise TypeError(f"fleeting memory keys must be str, got {type(key).__name__}")
        self._handle._call("fleeting_set", {key: value})

    def update(self, *args: Any, **kwargs: Any) -> None:
        """Set several keys in one call."""
        items = dict(*args, **kwargs)
        if not all(isinstance(k, str) for k in items):
            raise TypeError("fleeting memory keys must be str")
        self._handle._call("fleeting_set", items)

    def __delitem__(self, key: str) -> None:
        self._handle._call("fleeting_delete", key)

    def clear(self) -> None:
        """Remove every key in one call."""
        self._handle._call("fleeting_delete", None)

    def __iter__(self) -> Iterator[str]:
        keys: list[str] = self._handle._call("fleeting_get", None)
        return iter(keys)

    def __len__(self) -> int:
        return len(self._handle._call("fleeting_get", None))

    def __repr__(self) -> str:
        return f"RemoteFleeting({dict(self)!r})"


class RemoteSessions:
    """The session storage of a remote agent, as a ``ReActAgent`` uses it.

    Saves and loads run in the actor against its own storage (one writer per
    session); the runtime's state never leaves the actor, the other
    components' states (an agent's) travel with the call.
    """

    def __init__(self, handle: RemoteRuntime) -> None:
        self._handle = handle

    def _host(self, method: str, *args: Any) -> Any:
        h = self._handle
        return h._attempt(lambda: getattr(h._actor, method).remote(*args), method)

    def _split(
        self, components: Mapping[str, StateModule | RemoteRuntime]
    ) -> tuple[str | None, dict[str, StateModule]]:
        runtime_as: str | None = None
        others: dict[str, StateModule] = {}
        for name, module in components.items():
            if module is self._handle:
                runtime_as = name
            elif isinstance(module, MemoryRuntime) or _is_handle(module):
                raise SessionError(
                    f"component {name!r} is another runtime: save it through its own storage"
                )
            else:
                others[name] = module  # type: ignore[assignment]
        return runtime_as, others

    def location(self, session_id: str) -> str:
        """Where the session is stored."""
        result: str = self._host("session_call", "location", (session_id,))
        return result

    def save(self, session_id: str, components: Mapping[str, Any]) -> str:
        """Save the components (this handle's runtime among them) in one transaction."""
        runtime_as, others = self._split(components)
        states = {name: module.state_dict() for name, module in others.items()}
        return self.put_runtime(session_id, states, runtime_as).path

    def save_state(self, session_id: str, states: Mapping[str, Any]) -> str:
        """Save already-collected states (the runtime's own added for the agent's session)."""
        return self.put_runtime(session_id, dict(states), None).path

    def put(self, session_id: str, states: Mapping[str, Any]) -> SessionInfo:
        """Save already-collected states; describe what was written."""
        return self.put_runtime(session_id, dict(states), None)

    def put_runtime(
        self, session_id: str, states: dict[str, Any], runtime_as: str | None
    ) -> SessionInfo:
        """Save ``states`` with the runtime's (as ``runtime_as``); acknowledges the agent's."""
        h = self._handle
        mark = h._change_mark()
        info: SessionInfo = h._session_op("session_put", session_id, states, runtime_as)
        if session_id == h.session_id:
            h._saved(mark)
        return info

    def exists(self, session_id: str) -> bool:
        """Whether the session is stored."""
        return bool(self._host("session_call", "exists", (session_id,)))

    def read(self, session_id: str) -> dict[str, Any]:
        """The stored components of the session."""
        result: dict[str, Any] = self._host("session_call", "read", (session_id,))
        return result

    def load(
        self,
        session_id: str,
        components: Mapping[str, Any],
        *,
        strict: bool = True,
        allow_missing: bool = True,
    ) -> bool:
        """Restore the runtime (in the actor) and the other components (here).

        The runtime is restored first; a component here that rejects its
        state raises ``SessionError`` after the runtime was restored.
        """
        runtime_as, others = self._split(components)
        if runtime_as is None:
            # one read decides (whose the session is is checked in the actor on the
            # document read); "exists" only tells a missing session from a damaged one
            # (checked first, a session deleted before the read raised "not found"
            # even with allow_missing)
            try:
                stored = self.read(session_id)
            except SessionStorageError:
                raise
            except SessionError:
                if allow_missing and not self.exists(session_id):
                    return False
                raise
        else:
            h = self._handle
            found, stored = h._session_op(
                "session_load", session_id, runtime_as, strict, allow_missing
            )
            if not found:
                return False
            if session_id == h.session_id:
                h._unsaved = False  # the runtime holds its own session's stored state
            else:
                h._unsaved = True  # another session's state, not yet saved as the agent's
        for name, module in others.items():
            if name in stored:
                module.load_state_dict(stored[name], strict=strict)
            elif strict:
                raise SessionError(f"session {session_id!r} has no state for {name!r}")
        return True

    def list(self) -> list[SessionInfo]:
        """The stored sessions, newest first."""
        result: list[SessionInfo] = self._host("session_call", "list", ())
        return result

    def delete(self, session_id: str) -> bool:
        """Delete a session (not the agent's own while it runs)."""
        if session_id == self._handle.session_id:
            raise SessionError(
                f"session {session_id!r} is the running agent's own: stop() the agent first"
            )
        return bool(self._host("session_call", "delete", (session_id,)))

    def close(self) -> None:
        """Nothing to release: the storage lives in the actor."""


def _is_handle(module: object) -> TypeGuard[RemoteRuntime]:
    from actormem.cluster._handle import RemoteRuntime  # (at call time: _handle imports this)

    return isinstance(module, RemoteRuntime)

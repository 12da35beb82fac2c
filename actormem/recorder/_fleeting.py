"""The fleeting tier: a per-turn scratchpad, cleared at the end of every turn (seed 000)."""

from __future__ import annotations

import threading
from collections.abc import Iterator, MutableMapping
from typing import Any

import msgspec
import structlog

from actormem.state import StateError, StateModule

__all__ = ["FleetingMemory"]

log = structlog.get_logger(__name__)


class FleetingMemory(StateModule, MutableMapping[str, Any]):
    """A dict-like scratchpad for one turn (intermediate results, tool notes).

    ``on_turn_end`` and ``on_session_end`` clear it.  It lives in the
    runtime, not on an actor thread, so that reading a note never waits
    behind a recording batch; a lock makes it safe from any thread.  It is
    saved with sessions: values that are not JSON-serialisable are left out
    of the saved state (with a log line).
    """

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._data: dict[str, Any] = {}

    @property
    def component_name(self) -> str:
        return "fleeting"

    def __getitem__(self, key: str) -> Any:
        with self._lock:
            return self._data[key]

    def __setitem__(self, key: str, value: Any) -> None:
        if not isinstance(key, str):
            raise TypeError(f"fleeting memory keys must be str, got {type(key).__name__}")
        with self._lock:
            self._data[key] = value

    def __delitem__(self, key: str) -> None:
        with self._lock:
            del self._data[key]

    def __iter__(self) -> Iterator[str]:
        with self._lock:
            return iter(list(self._data))

    def __len__(self) -> int:
        with self._lock:
            return len(self._data)

    def __repr__(self) -> str:
        with self._lock:
            return f"FleetingMemory({self._data!r})"

    def clear(self) -> None:
        """Remove every entry."""
        with self._lock:
            self._data.clear()

    def snapshot(self) -> dict[str, Any]:
        """A copy of the entries."""
        with self._lock:
            return dict(self._data)

    def state_dict(self) -> dict[str, Any]:
        items: dict[str, Any] = {}
        for key, value in self.snapshot().items():
            try:
                msgspec.json.encode(value)
            except (TypeError, msgspec.EncodeError):
                log.warning("fleeting.not_saved", key=key, type=type(value).__name__)
                continue
            items[key] = value
        return {"items": items}

    def load_state_dict(self, state: dict[str, Any], strict: bool = True) -> None:
        items = state.get("items") if isinstance(state, dict) else None
        if not isinstance(items, dict) or not all(isinstance(k, str) for k in items):
            raise StateError("fleeting: state must be {'items': {str: value}}")
        with self._lock:
            self._data = dict(items)

    def load_state_json(self, data: bytes | msgspec.Raw, strict: bool = True) -> None:
        try:
            state = msgspec.json.decode(data)
        except msgspec.DecodeError as exc:
            raise StateError(f"fleeting: invalid state: {exc}") from None
        self.load_state_dict(state, strict)

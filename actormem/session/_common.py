"""What every session backend shares: the document, its validation, errors, ids.

A session is one versioned JSON document whatever holds it (a file, a
PostgreSQL row)::

    {
      "format": "actormem.session",
      "schema_version": 1,
      "session_id": "user123",
      "saved_at": "2026-11-22T13:00:00.000000+00:00",
      "components": {"runtime": {...}, "agent": {...}}
    }

Both backends encode it with :func:`encode_document`, validate it with
:func:`decode_document` and restore components with :func:`apply_components`,
so a document refused by one is refused by the other with the same words.
"""

from __future__ import annotations

import datetime as _dt
import math
import os
import re
import threading
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final, Protocol, runtime_checkable

import msgspec

from actormem._dsn import is_dsn
from actormem.state import StateError, StateModule

__all__ = [
    "DEFAULT_SESSIONS_DIR",
    "FORMAT_NAME",
    "SCHEMA_VERSION",
    "DocumentCheck",
    "SessionConflictError",
    "SessionError",
    "SessionInfo",
    "SessionStorage",
    "SessionStorageError",
    "SessionVersions",
    "apply_components",
    "decode_document",
    "encode_document",
    "is_dsn",
    "validate_session_id",
]

#: A look at a stored session's components (name -> undecoded JSON, ``msgspec.Raw``)
#: on the very document a ``load`` or ``delete`` is about to use, before it changes
#: anything: raising refuses the operation (the exception propagates, nothing is
#: changed).  So a decision about a session -- whose it is, say -- is made on the
#: document used, never on an earlier read another writer may have replaced since.
DocumentCheck = Callable[[Mapping[str, msgspec.Raw]], None]

FORMAT_NAME: Final = "actormem.session"
SCHEMA_VERSION: Final = 1
DEFAULT_SESSIONS_DIR: Final = "sessions"
ID_RE: Final = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@+=-]{0,127}")


class SessionError(ValueError):
    """A session id, file or component state is unusable; the message says why."""


class SessionConflictError(SessionError):
    """Another writer saved or deleted the session since this worker last read or wrote it.

    Raised by :class:`~actormem.session.PostgresSession` in its default
    ``on_conflict="raise"`` mode; nothing was written.  Load the session
    again (``load_session``) to continue from what the other writer saved.

    Attributes:
        session_id: the session.
        expected_version: the version this worker last loaded or saved (0:
            it believed the session did not exist).
        stored_version: the version stored now (None: the session is gone).
        saved_by: ``host:pid`` of the last writer (None when gone).
    """

    def __init__(
        self,
        message: str,
        *,
        session_id: str,
        expected_version: int,
        stored_version: int | None,
        saved_by: str | None,
    ) -> None:
        super().__init__(message)
        self.session_id = session_id
        self.expected_version = expected_version
        self.stored_version = stored_version
        self.saved_by = saved_by


class SessionStorageError(SessionError):
    """The session storage cannot be reached or failed during an operation.

    The stored session is unchanged (a save is one transaction: it committed
    whole or not at all); the message names the storage and the cause.
    """


class SessionVersions:
    """What one loader last loaded or saved of each session: its version and row.

    A :class:`~actormem.session.PostgresSession` checks a save against the
    version the saved state was loaded from, as its loader recorded it.  The
    storage object keeps one record of its own (for direct calls); every
    :class:`~actormem.runtime.MemoryRuntime` keeps another (its
    ``session_versions``), so two runtimes sharing one storage object are two
    loaders: of two saves made from the same loaded version, the second is a
    conflict.  A record names one incarnation of a session (the row's
    generation), never only its number: a session deleted and created again
    is another one.  Keys are the session's location
    (``storage.location(session_id)``), so what was loaded from one table is
    never checked against another.  JSON files have no versions (nothing is
    recorded).
    """

    __slots__ = ("_lock", "_seen")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: dict[str, tuple[int, uuid.UUID | None]] = {}

    def version(self, location: str) -> int | None:
        """The version last loaded or saved (0: known absent; None: never seen)."""
        seen = self.get(location)
        return None if seen is None else seen[0]

    def get(self, location: str) -> tuple[int, uuid.UUID | None] | None:
        """(version, generation) last loaded or saved; None: never seen."""
        with self._lock:
            return self._seen.get(location)

    def note(self, location: str, version: int, generation: uuid.UUID | None) -> None:
        """Record a load or save (version 0 and no generation: known absent)."""
        with self._lock:
            self._seen[location] = (version, generation)

    def __repr__(self) -> str:
        with self._lock:
            seen = {sid: v for sid, (v, _) in self._seen.items()}
        return f"SessionVersions({seen!r})"


class SessionInfo(msgspec.Struct, frozen=True):
    """One stored session, as ``list()`` reports it and ``put()`` returns it.

    ``path`` is the file for JSON sessions and a location string
    (``postgresql://user@host:port/db#table/session_id``, no password) for
    PostgreSQL ones; ``version`` counts the saves of a PostgreSQL session
    (None for files).
    """

    session_id: str
    path: str
    nbytes: int
    modified_at: float
    version: int | None = None


@runtime_checkable
class SessionStorage(Protocol):
    """Where sessions live: :class:`JsonSession` (files) or :class:`PostgresSession`.

    ``SessionManager``, ``MemoryRuntime(sessions=...)``, ``ReActAgent`` and
    the CLI take either.
    """

    def location(self, session_id: str) -> str:
        """Where ``session_id`` is (or would be) stored, for messages and events."""
        ...

    def save(self, session_id: str, components: Mapping[str, StateModule]) -> Path | str:
        """Save the components' state atomically; return where it went."""
        ...

    def save_state(self, session_id: str, states: Mapping[str, Any]) -> Path | str:
        """Save already-collected states atomically; return where they went."""
        ...

    def put(self, session_id: str, states: Mapping[str, Any]) -> SessionInfo:
        """Save already-collected states atomically; describe what was written."""
        ...

    def exists(self, session_id: str) -> bool:
        """Whether the session is stored."""
        ...

    def read(self, session_id: str) -> dict[str, Any]:
        """The validated components of a stored session (name -> state)."""
        ...

    def load(
        self,
        session_id: str,
        components: Mapping[str, StateModule],
        *,
        strict: bool = True,
        allow_missing: bool = True,
    ) -> bool:
        """Restore ``components``, all or nothing; False when absent and allowed."""
        ...

    def list(self) -> list[SessionInfo]:
        """The stored sessions, newest first."""
        ...

    def delete(self, session_id: str) -> bool:
        """Delete the session; return whether it existed."""
        ...

    def close(self) -> None:
        """Release connections (a no-op for files)."""
        ...


class _Header(msgspec.Struct):
    format: str = ""
    schema_version: int = -1


class _DocumentV1(msgspec.Struct):
    format: str
    schema_version: int
    session_id: str
    saved_at: str
    components: dict[str, Any]


class RawDocument(msgspec.Struct):
    """A validated document whose components are still undecoded JSON."""

    format: str
    schema_version: int
    session_id: str
    saved_at: str
    components: dict[str, msgspec.Raw]


_ENCODER: Final = msgspec.json.Encoder()
_HEADER_DECODER: Final = msgspec.json.Decoder(_Header)
DOC_DECODER: Final = msgspec.json.Decoder(_DocumentV1)
RAW_DOC_DECODER: Final = msgspec.json.Decoder(RawDocument)


def validate_session_id(session_id: object) -> str:
    """Return ``session_id`` if it names a file inside the sessions folder.

    Allowed: 1-128 characters of letters, digits and ``_ . @ + = -``, not
    starting with a dot, never ``..``.  Path separators, NUL, absolute paths
    and empty ids are refused.  PostgreSQL sessions follow the same rule, so
    a session can move between backends.

    Raises:
        SessionError: naming the id and the rule it breaks.
    """
    if not isinstance(session_id, str):
        raise SessionError(f"session id must be a string, got {type(session_id).__name__}")
    if not session_id:
        raise SessionError("session id must not be empty")
    if "\x00" in session_id or "/" in session_id or "\\" in session_id or ".." in session_id:
        raise SessionError(
            f"session id {session_id!r} would leave the sessions folder "
            "(separators, '..' and NUL are not allowed)"
        )
    if not ID_RE.fullmatch(session_id):
        raise SessionError(
            f"session id {session_id!r} is not allowed: use 1-128 letters, digits or _.@+=- "
            "and do not start with a dot"
        )
    return session_id


def encode_document(session_id: str, states: Mapping[str, Any]) -> bytes:
    """The JSON document of a session (current schema version).

    Raises:
        SessionError: a state that cannot be encoded as JSON.
    """
    doc = _DocumentV1(
        format=FORMAT_NAME,
        schema_version=SCHEMA_VERSION,
        session_id=session_id,
        saved_at=_dt.datetime.now(_dt.UTC).isoformat(),
        components=dict(states),
    )
    try:
        data = _ENCODER.encode(doc)
    except (TypeError, msgspec.EncodeError) as exc:
        raise SessionError(
            f"session {session_id!r}: state is not JSON-serialisable: {exc}"
        ) from None
    except UnicodeEncodeError as exc:
        raise SessionError(
            f"session {session_id!r}: state holds a string that is not valid Unicode "
            f"(a lone surrogate, {exc.object[exc.start : exc.end]!r}); JSON cannot store it"
        ) from None
    except RecursionError:
        raise SessionError(
            f"session {session_id!r}: state is nested too deeply to encode as JSON"
        ) from None
    # msgspec writes a NaN or an infinity as ``null``: the load would restore
    # None where the component saved a number.  ``null`` is rare in states
    # (messages omit their defaults), so the walk runs only when one is there.
    if b"null" in data:
        where = _non_finite(msgspec.to_builtins(states), "")
        if where is not None:
            raise SessionError(
                f"session {session_id!r}: state value {where} is not a finite number "
                "(NaN or infinity); JSON cannot store it and the load would restore null"
            )
    return data


def _non_finite(value: Any, path: str) -> str | None:
    """The path of the first NaN/infinity inside builtins ``value``, if any."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        kind = type(item)
        if kind is float:
            if not math.isfinite(item):
                return where or "(the state itself)"
        elif kind is dict:
            stack.extend((v, f"{where}.{k}" if where else str(k)) for k, v in item.items())
        elif kind is list:
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(item))
    return None


def decode_document(data: bytes, where: str, decoder: msgspec.json.Decoder[Any]) -> Any:
    """Validate a stored document and decode it with ``decoder``.

    Args:
        data: the stored bytes.
        where: how messages name it (``"session file /x/a.json"``).
        decoder: :data:`DOC_DECODER` or :data:`RAW_DOC_DECODER`.

    Raises:
        SessionError: corrupt, foreign-format, newer-version or malformed.
    """
    try:
        header = _HEADER_DECODER.decode(data)
    except msgspec.DecodeError as exc:
        raise SessionError(f"{where} is corrupt or not JSON: {exc}") from None
    if header.format != FORMAT_NAME:
        raise SessionError(
            f"{where} is not an actormem session (format {header.format!r}, "
            f"expected {FORMAT_NAME!r})"
        )
    if header.schema_version > SCHEMA_VERSION:
        raise SessionError(
            f"{where} has schema version {header.schema_version}, newer than this "
            f"actormem supports ({SCHEMA_VERSION}); upgrade actormem to read it"
        )
    if header.schema_version < 1:
        raise SessionError(f"{where} has invalid schema version {header.schema_version}")
    try:
        return decoder.decode(data)
    except msgspec.DecodeError as exc:
        raise SessionError(f"{where} is malformed: {exc}") from None


def apply_components(
    where: str,
    stored: Mapping[str, msgspec.Raw],
    components: Mapping[str, StateModule],
    *,
    strict: bool,
) -> None:
    """Restore ``components`` from a document's raw states; all or nothing.

    Raises:
        SessionError: a component is missing (``strict``) or rejected its
            state; every component keeps (or gets back) its prior state.
    """
    if strict:
        absent = [name for name in components if name not in stored]
        if absent:
            raise SessionError(f"{where} has no state for component(s) {absent}")
    backups: dict[str, dict[str, Any]] = {}
    name = ""
    try:
        for name, module in components.items():
            if name not in stored:
                continue
            backups[name] = module.state_dict()
            module.load_state_json(stored[name], strict=strict)
    except (StateError, ValueError, TypeError, KeyError, msgspec.ValidationError) as exc:
        for done, state in backups.items():
            components[done].load_state_dict(state, strict=False)
        raise SessionError(f"{where}: component {name!r} rejected its state: {exc}") from None


def check_session_dir(session_dir: str | os.PathLike[str]) -> None:
    """Refuse a DSN given where a folder is expected (it would become a folder name)."""
    if is_dsn(os.fspath(session_dir)):
        raise SessionError(
            "session_dir is a folder; to keep sessions in PostgreSQL pass "
            "sessions='postgresql://...' instead"
        )

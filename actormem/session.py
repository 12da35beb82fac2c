"""JSON session files: save and restore StateModules atomically.

One session is one JSON document, ``<directory>/<session_id>.json``::

    {
      "format": "actormem.session",
      "schema_version": 1,
      "session_id": "user123",
      "saved_at": "2026-11-22T13:00:00.000000+00:00",
      "components": {"runtime": {...}, "agent": {...}}
    }

Writes are atomic: the document goes to a temporary file in the same folder,
is fsynced, and renamed over the old file (then the folder is fsynced), so a
process killed at any moment leaves the old or the new complete file.  Files
are created readable by their owner only (they hold memory).

Reads validate before they change anything: a corrupt file, a file of
another format or of a newer schema version raises :class:`SessionError`
naming the file and the problem, and no component is modified.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import re
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import msgspec
import structlog

from actormem.state import StateError, StateModule

__all__ = [
    "DEFAULT_SESSIONS_DIR",
    "FORMAT_NAME",
    "SCHEMA_VERSION",
    "JsonSession",
    "SessionError",
    "SessionInfo",
    "SessionManager",
    "atomic_write",
    "validate_session_id",
]

log = structlog.get_logger(__name__)

FORMAT_NAME: Final = "actormem.session"
SCHEMA_VERSION: Final = 1
DEFAULT_SESSIONS_DIR: Final = "sessions"
_ID_RE: Final = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@+=-]{0,127}")


class SessionError(ValueError):
    """A session id, file or component state is unusable; the message says why."""


class _Header(msgspec.Struct):
    format: str = ""
    schema_version: int = -1


class _DocumentV1(msgspec.Struct):
    format: str
    schema_version: int
    session_id: str
    saved_at: str
    components: dict[str, Any]


class _RawDocumentV1(msgspec.Struct):
    format: str
    schema_version: int
    session_id: str
    saved_at: str
    components: dict[str, msgspec.Raw]


class SessionInfo(msgspec.Struct, frozen=True):
    """What ``JsonSession.list()`` reports for one file."""

    session_id: str
    path: str
    nbytes: int
    modified_at: float


_ENCODER: Final = msgspec.json.Encoder()
_HEADER_DECODER: Final = msgspec.json.Decoder(_Header)
_DOC_DECODER: Final = msgspec.json.Decoder(_DocumentV1)
_RAW_DOC_DECODER: Final = msgspec.json.Decoder(_RawDocumentV1)


def validate_session_id(session_id: object) -> str:
    """Return ``session_id`` if it names a file inside the sessions folder.

    Allowed: 1-128 characters of letters, digits and ``_ . @ + = -``, not
    starting with a dot, never ``..``.  Path separators, NUL, absolute paths
    and empty ids are refused.

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
    if not _ID_RE.fullmatch(session_id):
        raise SessionError(
            f"session id {session_id!r} is not allowed: use 1-128 letters, digits or _.@+=- "
            "and do not start with a dot"
        )
    return session_id


class JsonSession:
    """A folder of JSON session files.

    Args:
        directory: where the files live (created on first save); defaults to
            ``sessions/`` in the current working directory.
    """

    def __init__(self, directory: str | os.PathLike[str] = DEFAULT_SESSIONS_DIR) -> None:
        self.directory = Path(directory)

    def __repr__(self) -> str:
        return f"JsonSession({str(self.directory)!r})"

    def path(self, session_id: str) -> Path:
        """The file of ``session_id`` (validated)."""
        return self.directory / f"{validate_session_id(session_id)}.json"

    # -- writing --------------------------------------------------------------

    def save(self, session_id: str, components: Mapping[str, StateModule]) -> Path:
        """Save the state of ``components`` (name -> module) atomically.

        Returns:
            The path written.

        Raises:
            SessionError: bad id, or a state that cannot be encoded as JSON.
            OSError: the disk refused the write (the old file is untouched).
        """
        states = {name: module.state_dict() for name, module in components.items()}
        return self.save_state(session_id, states)

    def save_state(self, session_id: str, states: Mapping[str, Any]) -> Path:
        """Save already-collected component states atomically (see :meth:`save`)."""
        path = self.path(session_id)
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
        _atomic_write(path, data)
        log.debug("session.saved", session_id=session_id, path=str(path), nbytes=len(data))
        return path

    # -- reading --------------------------------------------------------------

    def exists(self, session_id: str) -> bool:
        """Whether the session file exists."""
        return self.path(session_id).is_file()

    def read(self, session_id: str) -> dict[str, Any]:
        """Read and validate a session file; return its components (name -> state).

        Raises:
            SessionError: missing, corrupt, foreign-format or newer-version file.
        """
        doc: _DocumentV1 = self._read(session_id, _DOC_DECODER)
        return doc.components

    def _read(self, session_id: str, decoder: msgspec.json.Decoder[Any]) -> Any:
        path = self.path(session_id)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise SessionError(f"session {session_id!r} not found ({path})") from None
        except OSError as exc:
            raise SessionError(f"cannot read session file {path}: {exc.strerror or exc}") from None
        return _decode_document(data, path, decoder)

    def load(
        self,
        session_id: str,
        components: Mapping[str, StateModule],
        *,
        strict: bool = True,
        allow_missing: bool = True,
    ) -> bool:
        """Restore ``components`` from the session; all or nothing.

        Args:
            session_id: the session to read.
            components: name -> module to restore.
            strict: passed to each ``load_state_dict``; also, a component
                named here but absent from the file is an error.
            allow_missing: return False (instead of raising) when the file
                does not exist.

        Returns:
            True if the file existed and was loaded.

        Raises:
            SessionError: the file is unusable or a component rejected its
                state; every component keeps (or gets back) its prior state.
        """
        path = self.path(session_id)
        if allow_missing and not path.exists():
            return False
        stored: dict[str, msgspec.Raw] = self._read(session_id, _RAW_DOC_DECODER).components
        if strict:
            absent = [name for name in components if name not in stored]
            if absent:
                raise SessionError(f"session file {path} has no state for component(s) {absent}")
        backups: dict[str, dict[str, Any]] = {}
        try:
            for name, module in components.items():
                if name not in stored:
                    continue
                backups[name] = module.state_dict()
                module.load_state_json(stored[name], strict=strict)
        except (StateError, ValueError, TypeError, KeyError, msgspec.ValidationError) as exc:
            for name, state in backups.items():
                components[name].load_state_dict(state, strict=False)
            raise SessionError(
                f"session file {path}: component {name!r} rejected its state: {exc}"
            ) from None
        return True

    def list(self) -> list[SessionInfo]:
        """The sessions in the folder, newest first."""
        if not self.directory.is_dir():
            return []
        out = []
        for p in self.directory.glob("*.json"):
            sid = p.name[: -len(".json")]
            if not _ID_RE.fullmatch(sid) or ".." in sid:
                continue
            st = p.stat()
            out.append(
                SessionInfo(session_id=sid, path=str(p), nbytes=st.st_size, modified_at=st.st_mtime)
            )
        out.sort(key=lambda i: i.modified_at, reverse=True)
        return out

    def delete(self, session_id: str) -> bool:
        """Delete the session file; return whether it existed."""
        try:
            self.path(session_id).unlink()
        except FileNotFoundError:
            return False
        return True


def _decode_document(data: bytes, path: Path, decoder: msgspec.json.Decoder[Any]) -> Any:
    try:
        header = _HEADER_DECODER.decode(data)
    except msgspec.DecodeError as exc:
        raise SessionError(f"session file {path} is corrupt or not JSON: {exc}") from None
    if header.format != FORMAT_NAME:
        raise SessionError(
            f"session file {path} is not an actormem session (format {header.format!r}, "
            f"expected {FORMAT_NAME!r})"
        )
    if header.schema_version > SCHEMA_VERSION:
        raise SessionError(
            f"session file {path} has schema version {header.schema_version}, newer than this "
            f"actormem supports ({SCHEMA_VERSION}); upgrade actormem to read it"
        )
    if header.schema_version < 1:
        raise SessionError(
            f"session file {path} has invalid schema version {header.schema_version}"
        )
    try:
        return decoder.decode(data)
    except msgspec.DecodeError as exc:
        raise SessionError(f"session file {path} is malformed: {exc}") from None


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically and durably.

    The bytes go to a temporary file in the same folder, which is fsynced
    and renamed over ``path``; then the folder is fsynced.  A process killed
    at any moment leaves the old or the new complete file.

    Args:
        path: the file to write (its folder is created if missing).
        data: the new content.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


_atomic_write = atomic_write  # the name other modules used before it was public


class SessionManager:
    """Fluent helper tying a session id, a storage and components together.

    Example::

        manager = (
            SessionManager.for_session("user123")
            .with_session(JsonSession("sessions"))
            .add_component(runtime)
            .add_component(agent)
        )
        manager.load_if_exists()
        ...
        manager.save()
    """

    def __init__(self, session_id: str) -> None:
        self.session_id = validate_session_id(session_id)
        self.session: JsonSession = JsonSession()
        self.components: dict[str, StateModule] = {}

    @classmethod
    def for_session(cls, session_id: str) -> SessionManager:
        """Start a manager for ``session_id``."""
        return cls(session_id)

    def with_session(self, session: JsonSession) -> SessionManager:
        """Use ``session`` as storage (default: ``JsonSession("sessions")``)."""
        self.session = session
        return self

    def add_component(self, component: StateModule, name: str | None = None) -> SessionManager:
        """Save/restore ``component`` under ``name`` (default: its component name).

        Raises:
            SessionError: not a StateModule, or the name is taken.
        """
        if not isinstance(component, StateModule):
            raise SessionError(f"component must be a StateModule, got {type(component).__name__}")
        key = name or component.component_name
        if key in self.components:
            raise SessionError(f"a component named {key!r} was already added")
        self.components[key] = component
        return self

    def load_if_exists(self) -> bool:
        """Restore every component if the session file exists; return whether it did."""
        t0 = time.perf_counter()
        found = self.session.load(self.session_id, self.components)
        log.debug(
            "session.load_if_exists",
            session_id=self.session_id,
            found=found,
            ms=round((time.perf_counter() - t0) * 1e3, 3),
        )
        return found

    def save(self) -> Path:
        """Save every component atomically; return the path."""
        return self.session.save(self.session_id, self.components)

"""JSON session files: one session, one file ``<directory>/<session_id>.json``.

Writes are atomic: the document goes to a temporary file in the same folder,
is fsynced, and renamed over the old file (then the folder is fsynced), so a
process killed at any moment leaves the old or the new complete file.  Files
are created readable by their owner only (they hold memory).

Reads validate before they change anything: a corrupt file, a file of
another format or of a newer schema version raises :class:`SessionError`
naming the file and the problem, and no component is modified.

Two processes saving the same file: the last rename wins (each file is
complete).  There is no version check of any kind: a writer that loaded a
session long ago overwrites whatever is there now -- a newer save, or a
session deleted and created again by someone else -- without an error.
For several workers sharing sessions, use
:class:`~actormem.session.PostgresSession`, which detects these conflicts.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec
import structlog

from actormem._private import make_private_dirs
from actormem._special_files import check_inside, describe_mode, read_regular
from actormem.session._common import (
    DEFAULT_SESSIONS_DIR,
    DOC_DECODER,
    ID_RE,
    RAW_DOC_DECODER,
    DocumentCheck,
    RawDocument,
    SessionError,
    SessionInfo,
    apply_components,
    check_session_dir,
    decode_document,
    encode_document,
    validate_session_id,
)
from actormem.state import StateModule

__all__ = ["JsonSession", "atomic_write"]

log = structlog.get_logger("actormem.session")


class JsonSession:
    """A folder of JSON session files.

    Args:
        directory: where the files live (created on first save); defaults to
            ``sessions/`` in the current working directory.
    """

    def __init__(self, directory: str | os.PathLike[str] = DEFAULT_SESSIONS_DIR) -> None:
        check_session_dir(directory)
        self.directory = Path(directory)

    def __repr__(self) -> str:
        return f"JsonSession({str(self.directory)!r})"

    def path(self, session_id: str) -> Path:
        """The file of ``session_id`` (validated)."""
        return self.directory / f"{validate_session_id(session_id)}.json"

    def location(self, session_id: str) -> str:
        """The file of ``session_id``, as a string."""
        return str(self.path(session_id))

    def close(self) -> None:
        """Nothing to release (files are opened per operation)."""

    def __enter__(self) -> JsonSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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
        return Path(self.put(session_id, states).path)

    def put(self, session_id: str, states: Mapping[str, Any]) -> SessionInfo:
        """Save already-collected states atomically; describe the file written."""
        path = self.path(session_id)
        data = encode_document(session_id, states)
        atomic_write(path, data)
        log.debug("session.saved", session_id=session_id, path=str(path), nbytes=len(data))
        return SessionInfo(
            session_id=session_id, path=str(path), nbytes=len(data), modified_at=_mtime(path)
        )

    # -- reading --------------------------------------------------------------

    def exists(self, session_id: str) -> bool:
        """Whether the session file exists."""
        return self.path(session_id).is_file()

    def read(self, session_id: str) -> dict[str, Any]:
        """Read and validate a session file; return its components (name -> state).

        Raises:
            SessionError: missing, corrupt, foreign-format or newer-version file.
        """
        components: dict[str, Any] = self._read(session_id, DOC_DECODER).components
        return components

    def _read(self, session_id: str, decoder: msgspec.json.Decoder[Any]) -> Any:
        path = self.path(session_id)
        try:
            # A link may point elsewhere in the folder, never out of it; and the
            # file must be a regular one (a FIFO would block the read forever).
            check_inside(path, self.directory, "session file", SessionError)
            data = read_regular(path, "session file", SessionError)
        except FileNotFoundError:
            raise SessionError(f"session {session_id!r} not found ({path})") from None
        return decode_document(data, f"session file {path}", decoder)

    def load(
        self,
        session_id: str,
        components: Mapping[str, StateModule],
        *,
        strict: bool = True,
        allow_missing: bool = True,
        check: DocumentCheck | None = None,
    ) -> bool:
        """Restore ``components`` from the session; all or nothing.

        Args:
            session_id: the session to read.
            components: name -> module to restore.
            strict: passed to each ``load_state_dict``; also, a component
                named here but absent from the file is an error.
            allow_missing: return False (instead of raising) when the file
                does not exist.
            check: called with the file's components as read, before any
                component is changed; what it raises propagates and nothing
                is loaded (see :data:`~actormem.session.DocumentCheck`).

        Returns:
            True if the file existed and was loaded.

        Raises:
            SessionError: the file is unusable or a component rejected its
                state; every component keeps (or gets back) its prior state.
        """
        path = self.path(session_id)
        if allow_missing and not os.path.lexists(path):
            return False
        doc: RawDocument = self._read(session_id, RAW_DOC_DECODER)
        if check is not None:
            check(doc.components)
        apply_components(f"session file {path}", doc.components, components, strict=strict)
        return True

    def list(self) -> list[SessionInfo]:
        """The sessions in the folder, newest first (none while the folder does not exist).

        Raises:
            SessionError: the path exists but is not a folder (a file, a FIFO, ...).
        """
        try:
            mode = os.stat(self.directory).st_mode
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise SessionError(
                f"session folder {self.directory}: cannot be read: {exc.strerror or exc}"
            ) from None
        if not stat.S_ISDIR(mode):
            kind = "a regular file" if stat.S_ISREG(mode) else describe_mode(mode)
            raise SessionError(f"session folder {self.directory} is {kind}, not a folder")
        out = []
        for p in self.directory.glob("*.json"):
            sid = p.name[: -len(".json")]
            if not ID_RE.fullmatch(sid) or ".." in sid:
                continue
            st = p.stat()
            out.append(
                SessionInfo(session_id=sid, path=str(p), nbytes=st.st_size, modified_at=st.st_mtime)
            )
        out.sort(key=lambda i: i.modified_at, reverse=True)
        return out

    def delete(self, session_id: str, *, check: DocumentCheck | None = None) -> bool:
        """Delete the session file; return whether it existed.

        Args:
            check: called with the file's components first (a damaged file
                raises :class:`SessionError` before it); what it raises
                propagates and nothing is deleted.  Files have no version
                check of any kind: a file another writer renames over this
                one between that read and the delete is deleted (use
                :class:`~actormem.session.PostgresSession`, where the check
                and the delete are one transaction).
        """
        if check is not None:
            try:
                doc: RawDocument = self._read(session_id, RAW_DOC_DECODER)
            except SessionError:
                if not os.path.lexists(self.path(session_id)):
                    return False
                raise
            check(doc.components)
        try:
            self.path(session_id).unlink()
        except FileNotFoundError:
            return False
        return True


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:  # removed by someone else right after the rename
        return 0.0


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically and durably.

    The bytes go to a temporary file in the same folder, which is fsynced
    and renamed over ``path``; then the folder is fsynced.  A process killed
    at any moment leaves the old or the new complete file.

    Args:
        path: the file to write (its folder is created if missing).
        data: the new content.
    """
    make_private_dirs(path.parent)  # conversations are private: 0700 when created
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

"""SessionManager, and opening the right storage for a folder or a DSN."""

from __future__ import annotations

import os
import time
from pathlib import Path

import structlog

from actormem.session._common import (
    SessionError,
    SessionStorage,
    is_dsn,
    validate_session_id,
)
from actormem.session._json import JsonSession
from actormem.state import StateModule

__all__ = ["SessionManager", "open_sessions"]

log = structlog.get_logger("actormem.session")


def open_sessions(target: str | os.PathLike[str] | SessionStorage) -> SessionStorage:
    """The session storage ``target`` names.

    Args:
        target: a ``postgresql://`` (or ``postgres://``) URL opens a
            :class:`~actormem.session.PostgresSession` (needs the
            ``postgres`` extra); a folder gives a :class:`JsonSession`; a
            storage object is returned as it is.

    Raises:
        SessionStorageError: the database cannot be reached or its sessions
            table is of a newer layout.
        ImportError: a DSN without the ``postgres`` extra installed.
    """
    if isinstance(target, SessionStorage):
        return target
    if is_dsn(target):
        from actormem.session._postgres import PostgresSession

        assert isinstance(target, str)
        return PostgresSession(target)
    if isinstance(target, str | os.PathLike):
        return JsonSession(target)
    raise TypeError(
        f"sessions must be a folder, a postgresql:// URL or a session storage, "
        f"got {type(target).__name__}"
    )


class SessionManager:
    """Fluent helper tying a session id, a storage and components together.

    Example::

        manager = (
            SessionManager.for_session("user123")
            .with_session(JsonSession("sessions"))     # or PostgresSession(dsn)
            .add_component(runtime)
            .add_component(agent)
        )
        manager.load_if_exists()
        ...
        manager.save()
    """

    def __init__(self, session_id: str) -> None:
        self.session_id = validate_session_id(session_id)
        self.session: SessionStorage = JsonSession()
        self.components: dict[str, StateModule] = {}

    @classmethod
    def for_session(cls, session_id: str) -> SessionManager:
        """Start a manager for ``session_id``."""
        return cls(session_id)

    def with_session(self, session: SessionStorage) -> SessionManager:
        """Use ``session`` as storage (default: ``JsonSession("sessions")``).

        Raises:
            SessionError: not a session storage.
        """
        if not isinstance(session, SessionStorage):
            raise SessionError(
                f"session storage must be a JsonSession or PostgresSession, "
                f"got {type(session).__name__}"
            )
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

    def load_if_exists(self, *, strict: bool = True) -> bool:
        """Restore every component if the session exists; return whether it did.

        Args:
            strict: a component the stored session has no state for is an
                error (nothing is restored); False leaves such a component
                as it is -- a session saved before the component was added
                still loads -- and passes ``strict=False`` to each module.
        """
        t0 = time.perf_counter()
        found = self.session.load(self.session_id, self.components, strict=strict)
        log.debug(
            "session.load_if_exists",
            session_id=self.session_id,
            found=found,
            ms=round((time.perf_counter() - t0) * 1e3, 3),
        )
        return found

    def save(self) -> Path | str:
        """Save every component atomically; return where (a Path for JSON files)."""
        return self.session.save(self.session_id, self.components)

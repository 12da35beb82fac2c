"""Sessions: save and restore StateModules as one versioned JSON document.

Two storages with one interface (:class:`SessionStorage`):

* :class:`JsonSession` — one file per session in a folder, written
  atomically (temp file, fsync, rename); the default.
* :class:`PostgresSession` — one row per session in PostgreSQL, for several
  worker processes or hosts; saves are single transactions with an
  optimistic version check (:class:`SessionConflictError`) or
  last-writer-wins.  Needs the ``postgres`` extra only when used.

The package is split by responsibility: ``_common`` (the document, its
validation, ids, errors, the protocol), ``_json`` (files), ``_postgres``
(PostgreSQL), ``_manager`` (:class:`SessionManager`, :func:`open_sessions`).
"""

from __future__ import annotations

from actormem.logs import _configure_default
from actormem.session._common import (
    DEFAULT_SESSIONS_DIR,
    FORMAT_NAME,
    SCHEMA_VERSION,
    DocumentCheck,
    SessionConflictError,
    SessionError,
    SessionInfo,
    SessionStorage,
    SessionStorageError,
    SessionVersions,
    is_dsn,
    validate_session_id,
)
from actormem.session._json import JsonSession, atomic_write
from actormem.session._manager import SessionManager, open_sessions
from actormem.session._postgres import PostgresSession

_configure_default()  # quiet logging unless the application configured structlog

__all__ = [
    "DEFAULT_SESSIONS_DIR",
    "FORMAT_NAME",
    "SCHEMA_VERSION",
    "DocumentCheck",
    "JsonSession",
    "PostgresSession",
    "SessionConflictError",
    "SessionError",
    "SessionInfo",
    "SessionManager",
    "SessionStorage",
    "SessionStorageError",
    "SessionVersions",
    "atomic_write",
    "is_dsn",
    "open_sessions",
    "validate_session_id",
]

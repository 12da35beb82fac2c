"""Logging: structlog everywhere, secrets redacted, never stdout by default.

actormem logs through structlog and never prints.  Unconfigured structlog
would print every level to stdout, so actormem installs a quiet default
(warnings and errors, to stderr, secrets redacted) **only if the
application has not configured structlog itself**.  The first of its
modules that logs installs it (:func:`_configure_default`, called by every
subpackage's ``__init__`` and by the top-level modules that log), not a
bare ``import actormem``, which loads nothing.  Call
:func:`configure_logging` to choose the level or JSON output, or configure
structlog yourself (add :func:`redact_secrets` to your processors).

actormem also leaves the standard library's root logger as the application
set it: a dependency that configures it on import (``wordllama`` calls
``logging.basicConfig(level=INFO)``) is imported inside
:func:`keep_root_logging`, which puts the root logger's level and handlers
back afterwards.
"""

from __future__ import annotations

import contextlib
import logging
import re
import sys
from collections.abc import Iterator, MutableMapping
from typing import Any, Final, TextIO

import structlog

__all__ = ["configure_logging", "keep_root_logging", "redact_secrets"]

_SECRET_KEYS: Final = re.compile(r"(api[_-]?key|authorization|password|secret|token)$", re.I)
_SECRET_VALUES: Final = re.compile(r"(sk-[A-Za-z0-9_\-]{8,}|Bearer\s+[A-Za-z0-9._\-]{8,})")
REDACTED: Final = "***"


def _scrub(value: Any) -> Any:
    if isinstance(value, str):
        return _SECRET_VALUES.sub(REDACTED, value)
    if isinstance(value, dict):
        return {
            k: REDACTED if isinstance(k, str) and _SECRET_KEYS.search(k) else _scrub(v)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return type(value)(_scrub(v) for v in value)
    return value


def redact_secrets(
    _logger: Any, _method: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """structlog processor: hide API keys, bearer tokens and passwords.

    Keys named like ``api_key``, ``authorization``, ``password``, ``secret``
    or ``token`` get their value replaced; ``sk-...`` keys and ``Bearer ...``
    tokens inside any string value are masked.
    """
    for key in list(event_dict):
        if _SECRET_KEYS.search(key):
            event_dict[key] = REDACTED
        else:
            event_dict[key] = _scrub(event_dict[key])
    return event_dict


@contextlib.contextmanager
def keep_root_logging() -> Iterator[None]:
    """Undo what the ``with`` block does to the root logger (level and handlers).

    For imports of libraries that call ``logging.basicConfig`` themselves: the
    application alone decides what the root logger prints.
    """
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    try:
        yield
    finally:
        for handler in list(root.handlers):
            if handler not in handlers:
                root.removeHandler(handler)
                handler.close()
        for handler in handlers:
            if handler not in root.handlers:
                root.addHandler(handler)
        root.setLevel(level)


def configure_logging(
    level: str | int = "WARNING", *, json: bool = False, stream: TextIO | None = None
) -> None:
    """Configure structlog for actormem (and the application).

    Args:
        level: the lowest level written (name or number).
        json: one JSON object per line instead of the console format.
        stream: where to write (default stderr).
    """
    lvl = logging.getLevelName(level.upper()) if isinstance(level, str) else level
    renderer: Any = (
        structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            redact_secrets,
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(lvl),
        logger_factory=structlog.PrintLoggerFactory(stream or sys.stderr),
        cache_logger_on_first_use=False,
    )


def _configure_default() -> None:
    if not structlog.is_configured():
        configure_logging("WARNING")

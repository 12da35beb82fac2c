"""Settings of the memory explorer and the checks on where it may listen.

Kept free of the web stack's imports so the runtime can name
:class:`UIConfig` without the ``ui`` extra installed.
"""

from __future__ import annotations

import ipaddress
import re
import secrets
from pathlib import Path
from typing import Final, Literal

import msgspec

from actormem._settings import UI_FIELDS, check_fields

__all__ = ["AUTO", "DEFAULT_PORT", "UIConfig", "UIError", "is_loopback", "resolve_token"]

#: ``token=AUTO``: a random token when the host is not loopback, none on loopback.
AUTO: Final = "auto"
#: The port ``actormem ui`` and ``ui=True`` try first.
DEFAULT_PORT: Final = 8765


class UIError(Exception):
    """The explorer cannot start as asked (unsafe bind, port taken, missing extra...)."""


class UIConfig(msgspec.Struct, frozen=True, kw_only=True):
    """How the memory explorer serves.

    Attributes:
        host: The interface to listen on; loopback (``127.0.0.1``) unless you
            mean to expose the page, and then a token is required.
        port: The TCP port; ``0`` picks a free one.  With ``port_fallback``
            a taken port falls back to a free one (the URL says which).
        token: ``"auto"`` (a random token when ``host`` is not loopback), a
            token of your own (at least 16 characters), or ``None`` for
            none (refused on a non-loopback host).
        allow_edits: Show and accept edits (delete, pin, forget a user);
            each one is a store call that leaves a history row.
        memory_dir: Root of the journal folders (NOW.md, LOG.md, ...);
            inside an agent the journal's own root is used.
        port_fallback: Use a free port when ``port`` is taken.
        ring: How many recent events the live view keeps for its browsers
            (a browser further behind is told how many it missed).
        read_timeout: Seconds a connection has to send each whole request
            (headers and body) once it connects or its last response ends;
            a client that sends part of a request and stalls is
            disconnected then, so stalled clients cannot hold the server.
    """

    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    token: str | None = AUTO
    allow_edits: bool = False
    memory_dir: str | None = None
    port_fallback: bool = False
    ring: int = 2000
    read_timeout: float = 10.0

    def __post_init__(self) -> None:
        if not isinstance(self.port, int) or not 0 <= self.port <= 65535:
            raise UIError(f"port must be an int in 0..65535, got {self.port!r}")
        if not isinstance(self.ring, int) or self.ring < 10:
            raise UIError(f"ring must be an int >= 10, got {self.ring!r}")
        if not isinstance(self.host, str) or not self.host.strip():
            raise UIError(f"host must be a non-empty str, got {self.host!r}")
        # Every numeric field has a declared range (actormem._settings).
        check_fields(self, UI_FIELDS, "UIConfig", error=UIError)

    @property
    def root(self) -> Path | None:
        """``memory_dir`` as a path."""
        return Path(self.memory_dir) if self.memory_dir else None


def is_loopback(host: str) -> bool:
    """Whether ``host`` only accepts connections from this machine."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name other than localhost may resolve anywhere


#: What a token may hold: URL-safe without escaping and cookie-safe (what
#: ``secrets.token_urlsafe`` makes); a ";" cut the cookie, a "+" became a space
#: in the printed URL and a non-ASCII token made every request fail.
_TOKEN_RE: Final = re.compile(r"[A-Za-z0-9._~-]{16,}")


def resolve_token(host: str, token: str | Literal["auto"] | None) -> str | None:
    """The token to require, or raise :class:`UIError` for an unsafe combination.

    Raises:
        UIError: a non-loopback ``host`` without a token, or a token too short.
    """
    if token == AUTO:
        return None if is_loopback(host) else secrets.token_urlsafe(24)
    if token is None:
        if not is_loopback(host):
            raise UIError(
                f"refusing to serve the memory explorer on {host} without an access token: "
                "anyone who can reach that interface could read the agent's memory "
                "(leave token='auto' to get a random one in the URL, or bind 127.0.0.1)"
            )
        return None
    if not isinstance(token, str) or _TOKEN_RE.fullmatch(token) is None:
        raise UIError(
            "an access token must be a str of at least 16 characters among letters, digits "
            "and - _ . ~ (it travels in a URL and a cookie, where other characters are cut "
            "or changed)"
        )
    return token

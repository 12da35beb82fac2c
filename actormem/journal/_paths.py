"""The agent's folder: one per namespace, under a root it can never leave.

A namespace maps to ``<root>/<user>/<agent>[/run.<run>][/session.<session>]``;
an unset user or agent is ``%``.  Ids made of letters, digits and
``_ @ + = -`` (plus inner dots) are used as they are; any other id is
percent-encoded (``/``, ``..``, ``%``, spaces, non-ASCII...), and a very long
one is shortened to a prefix and a hash, so two namespaces never share a
folder and no id can climb out of the root.  The resolved folder is checked
to lie inside the resolved root (a symlink pointing elsewhere is refused).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from pathlib import Path
from typing import Final

from actormem.store import Namespace

__all__ = ["JournalPathError", "day_name", "namespace_folder", "segment"]

_SAFE: Final = re.compile(r"[A-Za-z0-9_@+=-](?:[A-Za-z0-9_.@+=-]{0,78}[A-Za-z0-9_@+=-])?")
_PLAIN: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_@+=-")
_MAX: Final = 96
_DAY: Final = re.compile(r"\d{4}-\d{2}-\d{2}")


class JournalPathError(ValueError):
    """A journal path would leave the agent's folder, or a day name is not a date."""


def segment(value: str) -> str:
    """One folder name for a namespace id (see the module docstring)."""
    if _SAFE.fullmatch(value):
        return value
    encoded = "".join(
        ch if ch in _PLAIN else "".join(f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass"))
        for ch in value
    )
    if len(encoded) > _MAX:
        digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        encoded = f"{encoded[:48].rstrip('%')}%~{digest}"
    return encoded


def namespace_folder(root: str | Path, namespace: Namespace) -> Path:
    """The folder of ``namespace`` under ``root`` (not created).

    Raises:
        JournalPathError: the folder would resolve outside ``root``.
    """
    if not isinstance(namespace, Namespace):
        raise TypeError(f"namespace must be a Namespace, got {type(namespace).__name__}")
    parts = [
        segment(namespace.user_id) if namespace.user_id else "%",
        segment(namespace.agent_id) if namespace.agent_id else "%",
    ]
    if namespace.run_id:
        parts.append("run." + segment(namespace.run_id))
    if namespace.session_id:
        parts.append("session." + segment(namespace.session_id))
    base = Path(root).resolve()
    folder = base.joinpath(*parts)
    check_inside(base, folder)
    return folder


def check_inside(base: Path, path: Path, *, resolved_base: Path | None = None) -> Path:
    """Return ``path`` if it resolves inside ``base`` (symlinks followed).

    ``resolved_base``: ``base`` resolved earlier (a journal resolves its folder
    once; each file is still resolved on every use, about 0.7 ms of
    ``lstat`` calls per resolve on the loaded machine).

    Raises:
        JournalPathError: it does not.
    """
    resolved = path.resolve()
    root = base.resolve() if resolved_base is None else resolved_base
    if resolved != root and not resolved.is_relative_to(root):
        raise JournalPathError(f"{path} resolves to {resolved}, outside {base}")
    return path


def day_name(day: str | dt.date) -> str:
    """``YYYY-MM-DD`` of a date (validated when given as a string).

    Raises:
        JournalPathError: ``day`` is not a real calendar date.
    """
    if isinstance(day, dt.date):
        return day.isoformat()
    if not isinstance(day, str) or not _DAY.fullmatch(day):
        raise JournalPathError(f"a journal day is YYYY-MM-DD, got {day!r}")
    try:
        dt.date.fromisoformat(day)
    except ValueError as exc:
        raise JournalPathError(f"{day!r} is not a date: {exc}") from None
    return day

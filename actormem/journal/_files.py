"""File writes of the journal: atomic replacement for views, fsynced appends for day files."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from actormem.session import atomic_write

__all__ = ["append_text", "file_hash", "read_text", "text_hash", "write_text"]


def text_hash(text: str) -> str:
    """sha256 hex of ``text`` (UTF-8)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def read_text(path: Path) -> str | None:
    """The file's text, or None when it does not exist (undecodable bytes are replaced)."""
    try:
        return path.read_bytes().decode("utf-8", "replace")
    except FileNotFoundError:
        return None


def file_hash(path: Path) -> str | None:
    """:func:`text_hash` of the file's text, or None when it does not exist."""
    text = read_text(path)
    return None if text is None else text_hash(text)


def write_text(path: Path, text: str) -> str:
    """Replace ``path`` with ``text`` atomically (temp file, fsync, rename); return its hash."""
    atomic_write(path, text.encode("utf-8", "surrogatepass"))
    return text_hash(text)


def append_text(path: Path, text: str) -> None:
    """Append ``text`` with one ``write`` on an ``O_APPEND`` descriptor, then fsync.

    Appends of this process never interleave; a crash can at worst cut the
    last append short (the store keeps the record either way).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    data = text.encode("utf-8", "surrogatepass")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        os.fsync(fd)
    finally:
        os.close(fd)

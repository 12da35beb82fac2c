"""File writes of the journal: atomic replacement for views, fsynced appends for day files.

NOW.md and LOG.md are replaced atomically but not fsynced (``sync=False``,
:func:`replace_view`), and by the journal's view writer thread, after the
record is acknowledged (see :mod:`actormem.journal._views`): they are views
of what the store holds, so the agent's turn waits for neither a file
sync nor a file replace.  A killed process
leaves the old or the new file (the rename is atomic); a power cut may
leave a file the disk had not written yet, empty.  The journal re-renders
LOG.md from the record every time it starts, and rewrites a missing or
empty NOW.md from the record instead of importing it as a person's edit.
MEMORY.md (a person's edits are imported from it) stays synced.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import tempfile
from pathlib import Path

from actormem._private import make_private_dirs
from actormem._special_files import describe_mode, read_regular
from actormem.journal._paths import JournalPathError
from actormem.session import atomic_write

__all__ = [
    "Signature",
    "append_text",
    "file_hash",
    "read_text",
    "signature",
    "text_hash",
    "write_text",
]

#: What tells one version of a file from another without reading it: inode,
#: size and modification time (ns).  A replace makes a new inode; an edit in
#: place changes the size or the modification time.
Signature = tuple[int, int, int]


def signature(st: os.stat_result) -> Signature:
    """The :data:`Signature` of a file's ``stat``."""
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def text_hash(text: str) -> str:
    """sha256 hex of ``text`` (UTF-8)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def read_text(path: Path) -> str | None:
    """The file's text, or None when it does not exist (undecodable bytes are replaced).

    Raises:
        JournalPathError: the path is not a regular file (a FIFO would block
            the read forever) or cannot be read.
    """
    try:
        return read_regular(path, "journal file", JournalPathError).decode("utf-8", "replace")
    except FileNotFoundError:
        return None


def file_hash(path: Path) -> str | None:
    """:func:`text_hash` of the file's text, or None when it does not exist."""
    text = read_text(path)
    return None if text is None else text_hash(text)


def write_text(path: Path, text: str, *, sync: bool = True) -> str:
    """Replace ``path`` with ``text`` atomically (temp file, fsync, rename); return its hash.

    With ``sync=False`` nothing is fsynced: a killed process still leaves the
    old or the new file (the rename is atomic), a power cut may leave either
    or an empty file.  Only for views rebuilt from the record at start.
    """
    if sync:
        atomic_write(path, text.encode("utf-8", "surrogatepass"))
        return text_hash(text)
    replace_view(path, text)
    return text_hash(text)


def replace_view(path: Path, text: str) -> Signature:
    """Replace ``path`` with ``text`` atomically, without fsync; the new file's :data:`Signature`.

    The signature is taken from the temp file before the rename (the rename
    keeps its inode, size and modification time), so an edit made right after
    the rename is never mistaken for this version.
    """
    data = text.encode("utf-8", "surrogatepass")
    make_private_dirs(path.parent)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            sig = signature(os.fstat(f.fileno()))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return sig


def append_text(path: Path, text: str) -> None:
    """Append ``text`` with one ``write`` on an ``O_APPEND`` descriptor, then fsync.

    Appends of this process never interleave; a crash can at worst cut the
    last append short (the store keeps the record either way).
    """
    make_private_dirs(path.parent)
    data = text.encode("utf-8", "surrogatepass")
    try:
        # O_NONBLOCK: opening a FIFO for writing would wait for a reader forever.
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK, 0o600)
    except OSError as exc:  # ENXIO: a FIFO nobody reads
        raise JournalPathError(f"cannot append to journal file {path}: {exc}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise JournalPathError(
                f"journal file {path} is {describe_mode(mode)}, not a regular file"
            )
        os.set_blocking(fd, True)
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        os.fsync(fd)
    finally:
        os.close(fd)

"""Refusing special files: what a path must be before actormem opens it.

Why a module of its own: opening a FIFO for reading blocks until someone
writes to it, so a session file, a store path or a journal's ``NOW.md``
that is a FIFO hung ``load_session``, ``actormem sessions show``,
``DuckDBStore(...)`` and the ``MemoryRuntime`` constructor forever.  Every
place that reads a file the user (or anyone with access to the folder) can
replace goes through these checks: :func:`read_regular` opens without
blocking (``O_NONBLOCK``) and checks the opened descriptor is a regular
file before reading (no window between the check and the read);
:func:`check_regular` checks a path a library opens by itself (DuckDB).
:func:`check_inside` refuses a symbolic link that leads out of its folder.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ["check_inside", "check_regular", "describe_mode", "read_regular"]

_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISLNK, "a symbolic link"),
)


def describe_mode(mode: int) -> str:
    """What kind of file ``mode`` (``st_mode``) is, in words."""
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def check_regular(path: str | os.PathLike[str], what: str, error: type[Exception]) -> bool:
    """Whether ``path`` exists; raise ``error`` when it exists but is not a regular file.

    Symbolic links are followed (a link to a regular file is fine).
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise error(f"{what} {os.fspath(path)}: cannot be checked: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise error(f"{what} {os.fspath(path)} is {describe_mode(st.st_mode)}, not a regular file")
    return True


def check_inside(path: Path, folder: Path, what: str, error: type[Exception]) -> None:
    """Raise ``error`` when ``path`` (a symbolic link, say) resolves outside ``folder``."""
    real = Path(os.path.realpath(path))
    root = Path(os.path.realpath(folder))
    if real != root and root not in real.parents:
        raise error(f"{what} {path} leads outside its folder {folder} (to {real}); refused")


def read_regular(path: str | os.PathLike[str], what: str, error: type[Exception]) -> bytes:
    """The bytes of ``path``, which must be a regular file.

    Opens with ``O_NONBLOCK`` so a FIFO never blocks, then checks the opened
    file itself.

    Raises:
        FileNotFoundError: the file does not exist (callers say what that means).
        error: it is not a regular file, or it cannot be read (naming it).
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise error(f"cannot read {what} {os.fspath(path)}: {exc.strerror or exc}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise error(f"{what} {os.fspath(path)} is {describe_mode(mode)}, not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read()
    except OSError as exc:
        raise error(f"cannot read {what} {os.fspath(path)}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)

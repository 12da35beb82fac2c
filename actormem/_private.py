"""Folders that hold a user's memory are private to the user who runs the agent.

Why a module of its own: the journal (``<memory_dir>/<user>/<agent>/``, its
``memory/`` days) and the JSON sessions create folders, and
``Path.mkdir(mode=0o700, parents=True)`` gives that mode to the last folder
only -- the parents it creates get the default (0755 under the usual umask),
which lets every local user list the user ids under ``memory_dir``.  Here
each folder that does not exist yet is created 0700; folders that already
exist are left as their owner set them.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

__all__ = ["make_private_dirs"]


def make_private_dirs(path: str | os.PathLike[str]) -> Path:
    """Create ``path`` and its missing parents, each with mode 0700; return it."""
    folder = Path(path)
    missing: list[Path] = []
    probe = folder
    while not probe.exists():
        missing.append(probe)
        if probe.parent == probe:
            break
        probe = probe.parent
    for each in reversed(missing):
        with contextlib.suppress(FileExistsError):  # made meanwhile by another thread
            each.mkdir(mode=0o700)
    return folder

"""Who may open a DuckDB store file: one store object per file, one process per file.

Split from :mod:`actormem.store._duckdb` (the store itself) because owning
the file is a concern of its own, settled before the store reads a byte:
DuckDB's lock keeps other processes out (and :func:`locked_message` says who
holds the file and what to use instead), but it is per process, so this
module keeps the register of the files this process has open and refuses a
second store object on one of them.
"""

from __future__ import annotations

import os
import re
import threading

from actormem.store._checks import StoreLockedError

__all__ = ["claim_file", "locked_message", "release_file"]

#: The database files this process has open, by ``(st_dev, st_ino)``.  DuckDB's
#: lock is per process: a second store object on an open file would open it,
#: and its start would cut the first one's acknowledgement log under it.
_OPEN_FILES: dict[tuple[int, int], str] = {}
_OPEN_FILES_LOCK = threading.Lock()


def claim_file(path: str) -> tuple[int, int]:
    """Register ``path`` as open in this process; :class:`StoreLockedError` if it is."""
    st = os.stat(path)
    key = (st.st_dev, st.st_ino)
    with _OPEN_FILES_LOCK:
        holder = _OPEN_FILES.get(key)
        if holder is not None:
            raise StoreLockedError(
                f"{path} is already open in this process (as {holder}): one store object "
                "per file -- share that one (it is thread-safe) or close it first"
            )
        _OPEN_FILES[key] = path
    return key


def release_file(key: tuple[int, int] | None) -> None:
    if key is not None:
        with _OPEN_FILES_LOCK:
            _OPEN_FILES.pop(key, None)


def locked_message(path: str, cause: str) -> str:
    """Why a DuckDB file cannot be opened here: who holds it and what to use instead."""
    pid = re.search(r"\(PID (\d+)\)", cause)
    holder = f"process {pid.group(1)}" if pid else "another process"
    return (
        f"{path} is held by {holder}: DuckDB lets one process open a file (even "
        f"read-only). To share long-term memory between several worker processes or "
        f"hosts, use the PostgreSQL backend (store='postgresql://...', "
        f"pip install 'actormem[postgres]'). DuckDB said: {cause}"
    )

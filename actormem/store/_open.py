"""Open a long-term store from what a user typed: a file path or a PostgreSQL URL.

One place decides which backend a ``store=`` argument or a ``--db`` option
means, so :class:`~actormem.runtime.MemoryRuntime`, the CLI and the memory
explorer agree: a ``postgresql://`` (or ``postgres://``) URL, or libpq's
key/value words (``host=... dbname=...``, see :mod:`actormem._dsn`), opens a
:class:`~actormem.store._postgres.PostgresStore` (the backend for several
processes), anything else is a DuckDB file.  psycopg is imported only when a
URL is opened, so the embedded default needs none of the ``postgres`` extra.
"""

from __future__ import annotations

import importlib
import os
from typing import Any, Final

from actormem._dsn import DSN_PREFIXES, is_dsn, redact_dsn
from actormem.store._protocol import MemoryStore

__all__ = ["DSN_PREFIXES", "POSTGRES_INSTALL_HINT", "is_dsn", "open_store", "store_label"]

#: How to get the PostgreSQL backend's dependencies.
POSTGRES_INSTALL_HINT: Final = "pip install 'actormem[postgres]'"


def store_label(target: str | os.PathLike[str]) -> str:
    """``target`` fit for messages and logs: a DSN loses its secrets, a path stays."""
    if not is_dsn(target):
        return os.fspath(target)
    assert isinstance(target, str)
    return redact_dsn(target)


def _postgres_store_class() -> Any:
    for module in ("psycopg", "psycopg_pool", "pgvector"):  # the extra's three packages
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise ImportError(
                f"a postgresql:// store needs the postgres extra ({module} is missing): "
                f"{POSTGRES_INSTALL_HINT}"
            ) from exc
    # Imported by name: the module loads psycopg, which the DuckDB default never needs.
    return importlib.import_module("actormem.store._postgres").PostgresStore


def open_store(target: str | os.PathLike[str], **kwargs: Any) -> MemoryStore:
    """The store ``target`` names, opened with the constructor keywords ``kwargs``.

    Args:
        target: a ``postgresql://`` / ``postgres://`` URL opens a
            ``PostgresStore`` on that database (any number of processes and
            hosts may open the same one); a path opens (or creates) a
            :class:`DuckDBStore` file (one process at a time).
        **kwargs: passed to the backend's constructor (``embedder``,
            ``clock``, ``max_memories``, ...).

    Returns:
        The open store; the caller closes it.

    Raises:
        ImportError: a URL without the ``postgres`` extra installed (the
            message says what to install).
        StoreLockedError: another process holds the DuckDB file.
        StoreError: the file or database cannot be opened (the message names it).
        TypeError: ``target`` is neither a string nor a path.
    """
    if is_dsn(target):
        assert isinstance(target, str)
        store: MemoryStore = _postgres_store_class()(target, **kwargs)
        return store
    if isinstance(target, str | os.PathLike):
        from actormem.store._duckdb import DuckDBStore

        return DuckDBStore(target, **kwargs)
    raise TypeError(f"a store is a file path or a postgresql:// URL, got {type(target).__name__}")

"""The long-term memory store: DuckDB (one process) or PostgreSQL + pgvector (many).

Public API::

    from actormem.store import DuckDBStore, Namespace, NewMemory, SearchFilters

    with DuckDBStore("memories.duckdb") as store:
        ns = Namespace(user_id="u1", agent_id="assistant")
        store.add(ns, "Alice prefers green tea", tags=("preference",))
        hits = store.search("what does Alice drink?", Namespace(user_id="u1"))

Importing this package loads the value types, the errors and the protocol
only (msgspec, structlog); the stores, the relevance and tokenizing
functions and ``rich_progress`` -- what needs numpy, pyarrow, DuckDB or
psycopg -- are imported on first use (``_LAZY`` below).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from actormem import _lazy_names
from actormem.logs import _configure_default
from actormem.store import _at_exit  # noqa: F401  (registers the stores' exit handler first)
from actormem.store._content_hash import content_hash
from actormem.store._kinds import KEYED_KIND, MERGE_KINDS
from actormem.store._open import is_dsn, open_store
from actormem.store._pg_fence import StoreFencedError
from actormem.store._protocol import MemoryStore, ProgressCallback
from actormem.store._types import (
    KINDS,
    NAMESPACE_MAX_BYTES,
    EmbedderMismatchError,
    EmbeddingError,
    ExportReport,
    ForgetReport,
    HistoryRecord,
    ImportReport,
    InvalidMemoryError,
    LogCompaction,
    LogRecord,
    MaintenanceReport,
    MemoryNotFoundError,
    MemoryRecord,
    Namespace,
    NamespaceError,
    NamespaceStats,
    NewMemory,
    ReembedReport,
    SchemaVersionError,
    SearchConfig,
    SearchFilters,
    SearchHit,
    SearchMode,
    StoreClosedError,
    StoreError,
    StoreLockedError,
    WriteOp,
    WriteResult,
)

if TYPE_CHECKING:
    from actormem.store._duckdb import DuckDBStore
    from actormem.store._files import rich_progress
    from actormem.store._postgres import PostgresStore
    from actormem.store._relevance import RelevanceWeights, decayed_relevance, relevance
    from actormem.store._schema import SCHEMA_VERSION
    from actormem.store._tokenize import tokenize

_configure_default()  # quiet logging unless the application configured structlog

__all__ = [
    "KEYED_KIND",
    "KINDS",
    "MERGE_KINDS",
    "NAMESPACE_MAX_BYTES",
    "SCHEMA_VERSION",
    "DuckDBStore",
    "EmbedderMismatchError",
    "EmbeddingError",
    "ExportReport",
    "ForgetReport",
    "HistoryRecord",
    "ImportReport",
    "InvalidMemoryError",
    "LogCompaction",
    "LogRecord",
    "MaintenanceReport",
    "MemoryNotFoundError",
    "MemoryRecord",
    "MemoryStore",
    "Namespace",
    "NamespaceError",
    "NamespaceStats",
    "NewMemory",
    "PostgresStore",
    "ProgressCallback",
    "ReembedReport",
    "RelevanceWeights",
    "SchemaVersionError",
    "SearchConfig",
    "SearchFilters",
    "SearchHit",
    "SearchMode",
    "StoreClosedError",
    "StoreError",
    "StoreFencedError",
    "StoreLockedError",
    "WriteOp",
    "WriteResult",
    "content_hash",
    "decayed_relevance",
    "is_dsn",
    "open_store",
    "relevance",
    "rich_progress",
    "tokenize",
]


# Names whose modules load numpy, pyarrow or a database driver, imported on
# first use (PEP 562) so that a process holding only short-term memory, or a
# CLI printing its help, does not pay for them (tests/test_lazy_import.py
# checks they stay lazy and that this table agrees with the TYPE_CHECKING
# imports).  Each store is one of them: importing actormem needs no psycopg,
# and an agent on PostgreSQL (one process per agent on a cluster) never loads
# DuckDB.
_LAZY: Final[dict[str, str]] = {
    "DuckDBStore": "actormem.store._duckdb",
    "PostgresStore": "actormem.store._postgres",
    "RelevanceWeights": "actormem.store._relevance",
    "SCHEMA_VERSION": "actormem.store._schema",
    "decayed_relevance": "actormem.store._relevance",
    "relevance": "actormem.store._relevance",
    "rich_progress": "actormem.store._files",
    "tokenize": "actormem.store._tokenize",
}


__getattr__, __dir__ = _lazy_names(__name__, _LAZY, globals(), __all__)

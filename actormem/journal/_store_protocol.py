"""What the journal needs of a store: a ``MemoryStore`` with the journal's tables.

Kept apart from :mod:`actormem.journal._journal` (the journal's behaviour) so
that a reader of either finds one thing: this is the contract both backends
implement (``DuckDBStore`` and ``PostgresStore``), checked at run time by the
explorer page (``isinstance(store, JournalStore)``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from actormem.store import LogCompaction, LogRecord, MemoryStore, Namespace

__all__ = ["JournalStore"]


@runtime_checkable
class JournalStore(MemoryStore, Protocol):
    """A :class:`~actormem.store.MemoryStore` that also keeps the journal's tables."""

    def log_append(
        self,
        namespace: Namespace,
        entry_type: str,
        content: str,
        *,
        metadata: dict[str, Any] | None = None,
        ts: float | None = None,
    ) -> LogRecord: ...

    def log_entries(
        self,
        namespace: Namespace,
        *,
        compacted: bool | None = False,
        after_seq: int = 0,
        limit: int | None = None,
    ) -> list[LogRecord]: ...

    def log_compact(
        self,
        namespace: Namespace,
        entry_ids: Sequence[str],
        *,
        summary_id: str,
        summary: str,
        summarizer: str = "",
        bytes_before: int = 0,
        bytes_after: int = 0,
    ) -> LogCompaction: ...

    def log_compactions(self, namespace: Namespace) -> list[LogCompaction]: ...

    def journal_state(self, namespace: Namespace) -> dict[str, str]: ...

    def set_journal_state(self, namespace: Namespace, values: dict[str, str]) -> None: ...

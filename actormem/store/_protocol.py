"""The interface every long-term store backend implements.

:class:`DuckDBStore` is the embedded backend; a PostgreSQL + pgvector backend
for many processes can implement the same :class:`MemoryStore` protocol and
run the same test suite (``tests/store``).
"""

from __future__ import annotations

import builtins
import os
from collections.abc import Callable, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

from actormem.store._types import (
    ExportReport,
    ForgetReport,
    HistoryRecord,
    ImportReport,
    MaintenanceReport,
    MemoryRecord,
    Namespace,
    NamespaceStats,
    NewMemory,
    ReembedReport,
    SearchConfig,
    SearchFilters,
    SearchHit,
    SearchMode,
    WriteResult,
)

__all__ = ["MemoryStore", "ProgressCallback"]

#: ``progress(done, total)`` -- called as a long operation advances.
ProgressCallback = Callable[[int, int], None]


@runtime_checkable
class MemoryStore(Protocol):
    """Long-term memory: namespaced writes, hybrid recall, maintenance, analytics."""

    # writes
    def add(
        self,
        namespace: Namespace,
        content: str | NewMemory,
        *,
        kind: str = "fact",
        importance: float = 0.5,
        tags: Sequence[str] = (),
        source_ids: Sequence[str] = (),
        metadata: dict[str, Any] | None = None,
        created_at: float | None = None,
    ) -> WriteResult: ...

    def add_many(
        self, namespace: Namespace, items: Sequence[NewMemory | str], *, dedup: bool = True
    ) -> builtins.list[WriteResult]: ...

    def update(
        self,
        namespace: Namespace,
        memory_id: str,
        *,
        content: str | None = None,
        kind: str | None = None,
        importance: float | None = None,
        tags: Sequence[str] | None = None,
        metadata: dict[str, Any] | None = None,
        reason: str = "",
    ) -> WriteResult: ...

    def delete(self, namespace: Namespace, memory_id: str, *, reason: str = "") -> WriteResult: ...

    def forget(self, namespace: Namespace) -> ForgetReport: ...

    # reads
    def get(
        self, namespace: Namespace, memory_id: str, *, include_deleted: bool = False
    ) -> MemoryRecord | None: ...

    def list(
        self,
        namespace: Namespace,
        *,
        kinds: Sequence[str] | None = None,
        limit: int = 100,
        offset: int = 0,
        include_deleted: bool = False,
    ) -> builtins.list[MemoryRecord]: ...

    def count(self, namespace: Namespace, *, include_deleted: bool = False) -> int: ...

    def history(
        self, namespace: Namespace, memory_id: str | None = None
    ) -> builtins.list[HistoryRecord]: ...

    def search(
        self,
        query: str,
        namespace: Namespace,
        limit: int = 10,
        filters: SearchFilters | None = None,
        *,
        mode: SearchMode = "hybrid",
        config: SearchConfig | None = None,
        touch: bool = True,
    ) -> builtins.list[SearchHit]: ...

    # maintenance
    def decay(
        self, namespace: Namespace, *, rate: float = 0.95, threshold: float = 0.10
    ) -> MaintenanceReport: ...

    def auto_forget(
        self, namespace: Namespace, *, threshold: float = 0.15
    ) -> MaintenanceReport: ...

    def prune_stale(
        self, namespace: Namespace, *, max_age_days: float = 30.0
    ) -> MaintenanceReport: ...

    def prune_duplicates(
        self, namespace: Namespace, *, threshold: float = 0.7
    ) -> MaintenanceReport: ...

    def consolidate(self, namespace: Namespace, *, threshold: float = 0.9) -> MaintenanceReport: ...

    def enforce_cap(self, namespace: Namespace, max_memories: int) -> MaintenanceReport: ...

    # analytics and io
    def counts_by(
        self, namespace: Namespace, field: Literal["agent_id", "run_id", "session_id", "kind"]
    ) -> dict[str, int]: ...

    def timeline(self, namespace: Namespace) -> builtins.list[tuple[str, int]]: ...

    def top_tags(self, namespace: Namespace, limit: int = 10) -> builtins.list[tuple[str, int]]: ...

    def most_accessed(
        self, namespace: Namespace, limit: int = 10
    ) -> builtins.list[MemoryRecord]: ...

    def stats(self, namespace: Namespace) -> builtins.list[NamespaceStats]: ...

    def export(
        self,
        namespace: Namespace,
        path: str | os.PathLike[str],
        *,
        overwrite: bool = False,
        progress: ProgressCallback | None = None,
    ) -> ExportReport: ...

    def import_(
        self,
        path: str | os.PathLike[str],
        *,
        namespace: Namespace | None = None,
        progress: ProgressCallback | None = None,
    ) -> ImportReport: ...

    def reembed(self, *, progress: ProgressCallback | None = None) -> ReembedReport: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...

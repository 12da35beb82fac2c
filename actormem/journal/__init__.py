"""Human-readable memory: NOW.md, LOG.md, the daily journal, MEMORY.md and deep dream.

The agent's memory as files a person can read (seeds 002 and 003), on top of
the runtime, the store and the recorder, with DuckDB as the record::

    from actormem import MemoryRuntime
    from actormem.journal import JournalConfig

    with MemoryRuntime(store="memory.duckdb", journal=JournalConfig(memory_dir="agents")) as rt:
        rt.update_now("Plan the Lisbon trip", ["book flights", "find a hotel"])
        rt.log("TOOL_USE", "search_flights(LIS) -> 3 offers")
        rt.now()              # NowStatus(objective=..., next_steps=..., state="in_flight")
        rt.dream()            # consolidate, rewrite MEMORY.md, diary entry in DREAMS.md
"""

from __future__ import annotations

from actormem.journal._config import JournalConfig
from actormem.journal._dream import CORE_TAG, DISMISSED_TAG, PINNED_TAG, DreamReport
from actormem.journal._format import (
    ENTRY_TYPES,
    NOW_STATES,
    MemoryItem,
    NowStatus,
    parse_journal_ids,
    parse_memory_md,
    parse_now,
    render_memory_md,
    render_now,
)
from actormem.journal._journal import (
    DAYS_DIR,
    DREAMS_FILE,
    JOURNAL,
    LOG_FILE,
    MEMORY_FILE,
    NOW_FILE,
    Journal,
    JournalStore,
)
from actormem.journal._paths import JournalPathError, day_name, namespace_folder, segment
from actormem.logs import _configure_default

_configure_default()  # quiet logging unless the application configured structlog

__all__ = [
    "CORE_TAG",
    "DAYS_DIR",
    "DISMISSED_TAG",
    "DREAMS_FILE",
    "ENTRY_TYPES",
    "JOURNAL",
    "LOG_FILE",
    "MEMORY_FILE",
    "NOW_FILE",
    "NOW_STATES",
    "PINNED_TAG",
    "DreamReport",
    "Journal",
    "JournalConfig",
    "JournalPathError",
    "JournalStore",
    "MemoryItem",
    "NowStatus",
    "day_name",
    "namespace_folder",
    "parse_journal_ids",
    "parse_memory_md",
    "parse_now",
    "render_memory_md",
    "render_now",
    "segment",
]

"""What both backends check and build for the journal's tables.

Why a module of its own: the activity log's entries, the journal's state and
the log's read query must mean the same on DuckDB and on PostgreSQL.  When
each backend checked its own arguments, they drifted: PostgreSQL's
``log_append`` took any ``ts`` and non-dict metadata and left the database
to fail on them (a raw driver error, not an error naming the field).  So the
checks and the backend-independent part of the SQL live here once; each
backend keeps only its dialect (placeholders, timestamp functions).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from actormem.store._checks import check_str_tuple
from actormem.store._limits import COUNT, TIMESTAMP
from actormem.store._records import check_limit, check_text
from actormem.store._types import InvalidMemoryError, NewMemory

__all__ = ["check_compaction", "check_entry", "check_state", "log_entries_sql"]


def check_entry(
    entry_type: object,
    content: object,
    metadata: object,
    ts: object,
    clock: Callable[[], float],
    prefix: str = "",
) -> tuple[dict[str, Any], float]:
    """Check one log entry; return its metadata (a new dict) and its time.

    Every value is checked before anything is written or acknowledged, so
    nothing the database could refuse later gets past this point.

    Args:
        prefix: Put before the field names in errors (``"entries[2]."``).

    Raises:
        InvalidMemoryError: Naming the field.
    """
    if not isinstance(entry_type, str) or not 0 < len(entry_type) <= 32:
        raise InvalidMemoryError(f"{prefix}entry_type must be a str of 1-32 chars: {entry_type!r}")
    check_text(entry_type, f"{prefix}entry_type", max_chars=32)
    NewMemory(content=content).validate()  # type: ignore[arg-type]
    if metadata is None:
        meta: dict[str, Any] = {}
    elif isinstance(metadata, dict):
        meta = dict(metadata)
    else:
        raise InvalidMemoryError(
            f"{prefix}metadata must be a dict or None, got {type(metadata).__name__}"
        )
    if ts is None:
        return meta, clock()
    return meta, float(TIMESTAMP.check(ts, f"{prefix}ts", error=InvalidMemoryError) or 0)


def check_state(values: object) -> None:
    """Journal state takes non-empty str keys and str values."""
    if not isinstance(values, Mapping):
        raise InvalidMemoryError(f"journal state must be a dict, got {type(values).__name__}")
    for key, value in values.items():
        if not isinstance(key, str) or not key or not isinstance(value, str):
            raise InvalidMemoryError(f"journal state needs str keys and values: {key!r}")
        check_text(key, "journal state key", max_chars=256)
        check_text(value, f"journal state value of {key!r}", max_chars=2**30)


def log_entries_sql(
    select: str,
    where: str,
    params: list[Any],
    *,
    compacted: bool | None,
    after_seq: int,
    limit: int | None,
    mark: str,
) -> tuple[str, list[Any]]:
    """The query of ``log_entries``: ``(sql, params)``, oldest entry first.

    Args:
        select: The backend's column list of an entry.
        where: The namespace's clause, ``params`` its values.
        mark: The driver's placeholder (``?`` or ``%s``).
    """
    if compacted is not None and not isinstance(compacted, bool):
        raise InvalidMemoryError(f"compacted must be a bool or None, got {compacted!r}")
    after_seq = int(COUNT.check(after_seq, "after_seq", error=InvalidMemoryError) or 0)
    if compacted is not None:
        where += " AND compaction_id IS " + ("NOT NULL" if compacted else "NULL")
    where += f" AND seq > {mark}"
    params = [*params, after_seq]
    if limit is None:
        return f"SELECT {select} FROM activity_log WHERE {where} ORDER BY seq", params
    check_limit(limit)
    return (
        f"SELECT * FROM (SELECT {select} FROM activity_log WHERE {where} "
        f"ORDER BY seq DESC LIMIT {int(limit)}) AS latest ORDER BY seq",
        params,
    )


def check_compaction(
    entry_ids: object,
    summary_id: object,
    summary: object,
    summarizer: object,
    bytes_before: object,
    bytes_after: object,
) -> tuple[list[str], str, str, str, int, int]:
    """Check ``log_compact``'s arguments; return them as plain values.

    Returns:
        ``(entry_ids, summary_id, summary, summarizer, bytes_before,
        bytes_after)``: the ids with the first occurrence kept, texts as plain
        ``str`` (a ``StrEnum`` took another write path on DuckDB), counts as ``int``.

    Every value is checked before the compaction is written or acknowledged:
    on DuckDB a ``summary`` of ``None`` used to be acknowledged and then
    refused by the database when the record was applied (set aside, lost).
    """
    if isinstance(entry_ids, str | bytes) or not isinstance(entry_ids, Sequence):
        raise InvalidMemoryError(
            f"entry_ids must be a list of entry ids, got {type(entry_ids).__name__}"
        )
    ids = [
        check_text(i, "entry_ids", max_chars=256)
        for i in dict.fromkeys(check_str_tuple("entry_ids", tuple(entry_ids)))
    ]
    if not ids:
        raise InvalidMemoryError("entry_ids: log_compact needs at least one entry id")
    sid = check_text(summary_id, "summary_id", max_chars=256)
    if not sid:
        raise InvalidMemoryError("summary_id must not be empty")
    return (
        ids,
        sid,
        check_text(summary, "summary", max_chars=1_000_000),
        check_text(summarizer, "summarizer", max_chars=256),
        int(COUNT.check(bytes_before, "bytes_before", error=InvalidMemoryError) or 0),
        int(COUNT.check(bytes_after, "bytes_after", error=InvalidMemoryError) or 0),
    )

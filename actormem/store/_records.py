"""Record helpers shared by every store backend.

What a memory row *means* (how a database row decodes into a
:class:`MemoryRecord`, how content is hashed, how one write transaction is
described) does not depend on the database that holds it: both
:class:`~actormem.store.DuckDBStore` and the PostgreSQL backend select their
columns in the order :func:`row_to_record` reads and describe each write as
one :class:`Batch`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final, overload

import msgspec
import numpy as np
import numpy.typing as npt

from actormem.store._checks import check_no_nul
from actormem.store._index import STOPWORDS
from actormem.store._types import (
    HistoryRecord,
    InvalidMemoryError,
    LogCompaction,
    LogRecord,
    MemoryRecord,
    Namespace,
    NamespaceError,
    NamespaceStats,
    NewMemory,
    stored_namespace,
)

__all__ = [
    "HISTORY_SELECT",
    "LIVE",
    "MAX_LIMIT",
    "MAX_QUERY_CHARS",
    "NS_COLS",
    "Batch",
    "Change",
    "check_limit",
    "check_memory_id",
    "check_namespace",
    "check_new_memory",
    "check_text",
    "clip_query",
    "exact_str",
    "json_text",
    "jsonb_text",
    "query_text",
    "row_to_compaction",
    "row_to_history",
    "row_to_log",
    "row_to_record",
    "rows_to_stats",
    "sec",
    "stats_sql",
    "strs_json",
    "union",
    "us",
]

F32 = npt.NDArray[np.float32]
#: The namespace columns, in :meth:`Namespace.key` order.
NS_COLS: Final = ("user_id", "agent_id", "run_id", "session_id")
#: A row that is neither deleted nor merged into another.
LIVE: Final = "deleted_at IS NULL AND superseded_by IS NULL"
MAX_LIMIT: Final = 100_000
_WORD_RE: Final = re.compile(r"\w+")


def us(ts: float) -> int:
    """Unix seconds to integer microseconds (how timestamps are stored)."""
    return round(ts * 1_000_000)


def sec(value: int | None) -> float | None:
    """Integer microseconds (or ``None``) to Unix seconds."""
    return None if value is None else value / 1_000_000


def json_text(value: dict[str, Any]) -> str:
    """Metadata as JSON text; :class:`InvalidMemoryError` when it is not serialisable."""
    try:
        text = msgspec.json.encode(value).decode()
    except (TypeError, msgspec.EncodeError) as exc:
        raise InvalidMemoryError(f"metadata is not JSON-serialisable: {exc}") from exc
    if "\\u0000" in text:  # a NUL, or a backslash before "u0000": look closer
        check_no_nul(value, "metadata")
    return text


# A number token with a positive exponent (``1e16``): how msgspec writes floats of 1e16 and up.
_BIG_EXPONENT: Final = re.compile(r"[0-9]e\+?[0-9]")


def jsonb_text(value: dict[str, Any]) -> str:
    """Metadata as JSON text that PostgreSQL's ``jsonb`` reads back as the same types.

    ``jsonb`` keeps numbers as ``numeric`` and prints them without an exponent:
    a float written ``1e20`` came back as the int ``100000000000000000000``
    (and ``1e308`` as an int not equal to the float).  Such floats are
    written as their exact decimal with ``.0``, which ``numeric`` keeps and
    reads back as the same float.  Other text is :func:`json_text`'s.
    """
    text = json_text(value)
    if _BIG_EXPONENT.search(text) is None:
        return text
    return json_text(_exact_floats(value))


def _exact_floats(value: Any) -> Any:
    if isinstance(value, float):
        if abs(value) >= 1e16:  # finite: the door refuses inf and nan
            return msgspec.Raw(f"{int(value)}.0".encode())
        return value
    if isinstance(value, dict):
        return {k: _exact_floats(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_exact_floats(v) for v in value]
    return value


def union(a: Sequence[str], b: Sequence[str]) -> tuple[str, ...]:
    """``a`` then the items of ``b`` not in it, each once, order kept."""
    return tuple(dict.fromkeys([*a, *b]))


_STRS_DECODER: Final = msgspec.json.Decoder(list[str])


def _decode_strs(text: str) -> list[str]:
    return [] if text == "[]" else _STRS_DECODER.decode(text)


def strs_json(values: Sequence[str]) -> str:
    """A list of strings as compact JSON array text."""
    return msgspec.json.encode(list(values)).decode() if values else "[]"


def row_to_record(row: Sequence[Any]) -> MemoryRecord:
    """Decode a memory row selected as ``id, user_id, agent_id, run_id, session_id,
    kind, content, content_hash, importance, tags, source_ids, created_us,
    updated_us, last_accessed_us, access_count, superseded_by, deleted_us,
    metadata-as-text``.

    ``tags`` and ``source_ids`` may be sequences or JSON array text (DuckDB's
    schema 4 keeps them as text)."""
    meta = row[17]
    tags, sources = row[9], row[10]
    if isinstance(tags, str):
        tags = _decode_strs(tags)
    if isinstance(sources, str):
        sources = _decode_strs(sources)
    return MemoryRecord(
        id=row[0],
        namespace=stored_namespace((row[1], row[2], row[3], row[4])),
        kind=row[5],
        content=row[6],
        content_hash=row[7],
        importance=float(row[8]),
        tags=tuple(tags or ()),
        source_ids=tuple(sources or ()),
        created_at=row[11] / 1_000_000,
        updated_at=row[12] / 1_000_000,
        last_accessed=row[13] / 1_000_000,
        access_count=int(row[14]),
        superseded_by=row[15],
        deleted_at=sec(row[16]),
        metadata=json.loads(meta) if meta else {},
    )


#: The history columns :func:`row_to_history` reads, in order (both backends).
HISTORY_SELECT = (
    "id, memory_id, user_id, agent_id, run_id, session_id, op, old_content, new_content, ts, reason"
)


def row_to_history(row: Sequence[Any]) -> HistoryRecord:
    """A :class:`HistoryRecord` from a row of :data:`HISTORY_SELECT` (``ts`` in microseconds)."""
    return HistoryRecord(
        id=row[0],
        memory_id=row[1],
        namespace=stored_namespace((row[2], row[3], row[4], row[5])),
        op=row[6],
        old_content=row[7],
        new_content=row[8],
        ts=row[9] / 1_000_000,
        reason=row[10],
    )


def row_to_log(row: Sequence[Any]) -> LogRecord:
    """Decode an activity-log row (``id, ns x4, seq, ts_us, entry_type, content,
    metadata-as-text, compaction_id``)."""
    return LogRecord(
        id=row[0],
        namespace=stored_namespace((row[1], row[2], row[3], row[4])),
        seq=int(row[5]),
        ts=row[6] / 1_000_000,
        entry_type=row[7],
        content=row[8],
        metadata=json.loads(row[9]) if row[9] else {},
        compaction_id=row[10],
    )


def row_to_compaction(row: Sequence[Any]) -> LogCompaction:
    """Decode a log-compaction row (``id, ns x4, ts_us, entries, first_seq,
    last_seq, summary_id, summary, summarizer, bytes_before, bytes_after``)."""
    return LogCompaction(
        id=row[0],
        namespace=stored_namespace((row[1], row[2], row[3], row[4])),
        ts=row[5] / 1_000_000,
        entries=int(row[6]),
        first_seq=int(row[7]),
        last_seq=int(row[8]),
        summary_id=row[9],
        summary=row[10],
        summarizer=row[11],
        bytes_before=int(row[12]),
        bytes_after=int(row[13]),
    )


def check_namespace(namespace: object) -> Namespace:
    """``namespace`` with exact ``str`` fields if it is a :class:`Namespace`, else
    :class:`NamespaceError`.

    A field given as a ``str`` subclass (a ``StrEnum`` user or agent id) is
    rebuilt as its plain text here, where a write is validated, so every
    record the store holds has exact ``str`` fields -- the literal writer
    and the log's wire format take nothing else.
    """
    if not isinstance(namespace, Namespace):
        raise NamespaceError(f"namespace must be a Namespace, got {type(namespace).__name__}")
    u, a, r, s = namespace.user_id, namespace.agent_id, namespace.run_id, namespace.session_id
    if all(v is None or v.__class__ is str for v in (u, a, r, s)):
        return namespace
    return Namespace(
        user_id=exact_str(u), agent_id=exact_str(a), run_id=exact_str(r), session_id=exact_str(s)
    )


@overload
def exact_str(value: str) -> str: ...
@overload
def exact_str(value: None) -> None: ...
def exact_str(value: str | None) -> str | None:
    """``value`` as an exact ``str`` (a subclass such as a ``StrEnum``: its plain text)."""
    if value is None or value.__class__ is str:
        return value
    return str.__str__(value)


def check_new_memory(item: NewMemory) -> NewMemory:
    """``item`` validated (:meth:`NewMemory.validate`), its texts as exact ``str``.

    Content, kind, tags, source ids and id given as ``str`` subclasses are
    kept as their plain text, so every record the store writes holds exact
    ``str`` (see :func:`check_namespace`).
    """
    item.validate()
    if (
        item.content.__class__ is str
        and item.kind.__class__ is str
        and (item.id is None or item.id.__class__ is str)
        and (not item.tags or all(t.__class__ is str for t in item.tags))
        and (not item.source_ids or all(t.__class__ is str for t in item.source_ids))
    ):
        return item
    return msgspec.structs.replace(
        item,
        content=exact_str(item.content),
        kind=exact_str(item.kind),
        id=exact_str(item.id),
        tags=tuple(exact_str(t) for t in item.tags),
        source_ids=tuple(exact_str(t) for t in item.source_ids),
    )


#: Characters of a query a search reads: the first and the last half of it.
#: A query is most often a user's message, and ``add()`` takes messages up to
#: 4 MB; every step of a search (BM25 terms, the embedding, the second stage)
#: costs at least linear time in the text, so a search reads a bounded part.
#: A message that pastes a document and then asks about it keeps its question
#: (the end); one that asks and then pastes keeps it too (the start).
MAX_QUERY_CHARS: Final = 16_384


def clip_query(query: str) -> str:
    """``query`` itself, or its first and last ``MAX_QUERY_CHARS // 2`` characters."""
    if len(query) <= MAX_QUERY_CHARS:
        return query
    half = MAX_QUERY_CHARS // 2
    return f"{query[:half]}\n{query[-half:]}"


def query_text(query: str) -> str:
    """The text embedded for a query: its words without stopwords (if any remain).

    Question words ("when did", "what is") pull a static embedding towards
    other questions rather than towards the facts that answer them.
    """
    words = [w for w in _WORD_RE.findall(query) if w.casefold() not in STOPWORDS]
    return " ".join(words) if words else query


def check_limit(limit: object) -> None:
    """:class:`InvalidMemoryError` unless ``limit`` is an int in ``1..MAX_LIMIT``."""
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidMemoryError(f"limit must be an int in 1..{MAX_LIMIT}, got {limit!r}")


@dataclass
class Change:
    """State change of an existing row (no content change)."""

    record: MemoryRecord
    access_delta: int = 0
    content_vector: F32 | None = None


@dataclass
class Batch:
    """Everything one write transaction does."""

    inserts: list[tuple[MemoryRecord, F32]] = field(default_factory=list)
    changes: dict[str, Change] = field(default_factory=dict)
    removed: list[str] = field(default_factory=list)
    history: list[tuple[str, Namespace, str, str | None, str | None, str]] = field(
        default_factory=list
    )

    def log(
        self, memory_id: str, ns: Namespace, op: str, old: str | None, new: str | None, reason: str
    ) -> None:
        self.history.append((memory_id, ns, op, old, new, reason))

    def empty(self) -> bool:
        return not (self.inserts or self.changes or self.history)


def stats_sql(where: str, micros: str = "{}") -> tuple[str, str]:
    """The two queries of ``stats``: figures per namespace, then live rows per kind.

    Args:
        where: The scope's clause.
        micros: How the backend turns a ``created_at`` into microseconds
            (``"epoch_us({})"`` on DuckDB; PostgreSQL stores them).
    """
    first = micros.format(f"min(created_at) FILTER (WHERE {LIVE})")
    last = micros.format(f"max(created_at) FILTER (WHERE {LIVE})")
    totals = (
        "SELECT user_id, agent_id, run_id, session_id, "
        f"count(*) FILTER (WHERE {LIVE}), "
        "count(*) FILTER (WHERE deleted_at IS NOT NULL), "
        "count(*) FILTER (WHERE superseded_by IS NOT NULL AND deleted_at IS NULL), "
        f"coalesce(avg(importance) FILTER (WHERE {LIVE}), 0), "
        f"coalesce(sum(access_count) FILTER (WHERE {LIVE}), 0), {first}, {last} "
        f"FROM memories WHERE {where} GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4"
    )
    kinds = (
        "SELECT user_id, agent_id, run_id, session_id, kind, count(*) FROM memories "
        f"WHERE {where} AND {LIVE} GROUP BY 1, 2, 3, 4, 5"
    )
    return totals, kinds


def rows_to_stats(
    rows: Sequence[Sequence[Any]], kinds_rows: Sequence[Sequence[Any]]
) -> list[NamespaceStats]:
    """:class:`NamespaceStats` from the rows of the two :func:`stats_sql` queries."""
    kinds: dict[tuple[str, str, str, str], dict[str, int]] = {}
    for u, a, r, s, k, c in kinds_rows:
        kinds.setdefault((u, a, r, s), {})[k] = int(c)
    return [
        NamespaceStats(
            namespace=stored_namespace((row[0], row[1], row[2], row[3])),
            live=int(row[4]),
            deleted=int(row[5]),
            superseded=int(row[6]),
            kinds=kinds.get((row[0], row[1], row[2], row[3]), {}),
            avg_importance=float(row[7]),
            total_access=int(row[8]),
            first_created=sec(row[9]),
            last_created=sec(row[10]),
        )
        for row in rows
    ]


def check_text(value: object, name: str, *, max_chars: int = 10_000) -> str:
    """A free text the store keeps (a reason, a summary, a summarizer's name).

    Refused with :class:`InvalidMemoryError` naming ``name``: not a ``str``,
    longer than ``max_chars``, or text that cannot be stored on every
    backend -- a lone surrogate (not UTF-8) or a NUL character (PostgreSQL's
    text cannot hold one; refusing it on DuckDB too keeps a store movable
    between backends and keeps what one accepts equal to what the other does).
    """
    if not isinstance(value, str):
        raise InvalidMemoryError(f"{name} must be a str, got {type(value).__name__}")
    if len(value) > max_chars:
        raise InvalidMemoryError(f"{name} has {len(value)} characters, the limit is {max_chars}")
    if "\x00" in value:
        raise InvalidMemoryError(f"{name} holds a NUL character (U+0000), which no backend keeps")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidMemoryError(f"{name} is not valid Unicode text (a lone surrogate?)") from None
    return exact_str(value)  # plain str: a subclass (StrEnum) has no SQL literal


def check_memory_id(value: object, name: str = "memory_id") -> str:
    """A memory's id as given to ``get``/``update``/``delete``/``history``."""
    return check_text(value, name, max_chars=256)

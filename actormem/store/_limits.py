"""The declared range of every number the store and the recorder accept.

Why a module of its own: a number taken at the door and refused (or
mangled) later fails far from its cause, often for every call after it.
An imported ``created_at`` of 1e30 was stored clamped and then made
``timeline`` fail for that user; ``inject_limit=10**9`` was accepted and
then every ``format_for_injection`` failed in the store's search.  So each
numeric field has one declared :class:`Span` here, every door (new memories,
updates, imported rows, the store's and the recorder's settings,
maintenance arguments, search settings) checks against it, and the error
names the field, the value and the range.  Tests walk these tables, so a
new numeric field without a declared range is caught.

Timestamps are Unix seconds from 1970-01-01 to 9999-12-31 23:59:59 UTC (the
last second a ``datetime`` can show: ``timeline`` and injection format
them).  Counts stay below 2**53, exact in the float64 arithmetic of the
relevance formula.

This module imports nothing from the store (the store's types use it), so
callers pass their own error class (the store's is ``InvalidMemoryError``,
a ``ValueError``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

__all__ = [
    "MAINTENANCE_ARGS",
    "MAX_COUNT",
    "MAX_LIMIT",
    "MEMORY_FIELDS",
    "RECORDER_FIELDS",
    "RELEVANCE_FIELDS",
    "SEARCH_FIELDS",
    "STORE_SETTINGS",
    "TIME_MAX",
    "TIME_MIN",
    "Span",
    "check_fields",
]

#: Earliest timestamp accepted (Unix seconds): 1970-01-01.
TIME_MIN: Final = 0.0
#: Latest timestamp accepted (Unix seconds): 9999-12-31 23:59:59 UTC.
TIME_MAX: Final = 253_402_300_799.0
#: Largest result count a search or listing accepts.
MAX_LIMIT: Final = 100_000
#: Largest count (access counts, caps): exact in float64.
MAX_COUNT: Final = 2**53 - 1


@dataclass(frozen=True)
class Span:
    """A closed range ``lo..hi`` (``lo_open``: ``lo`` itself excluded).

    Attributes:
        lo: Smallest accepted value.
        hi: Largest accepted value.
        integer: Only ``int`` values (never ``bool``).
        lo_open: ``lo`` itself is refused.
        optional: ``None`` is accepted (it means "off" or "default").
    """

    lo: float
    hi: float
    integer: bool = False
    lo_open: bool = False
    optional: bool = False
    note: str = ""

    def describe(self) -> str:
        kind = "an int" if self.integer else "a number"
        left = "(" if self.lo_open else "["
        text = f"{kind} in {left}{_fmt(self.lo)}, {_fmt(self.hi)}]"
        if self.note:
            text += f" ({self.note})"
        return text + " or None" if self.optional else text

    def check(
        self, value: object, name: str, *, error: type[Exception] = ValueError
    ) -> float | int | None:
        """Return ``value`` if it is inside the range, else raise ``error`` naming ``name``."""
        if value is None and self.optional:
            return None
        ok_type = int if self.integer else (int, float)
        if isinstance(value, bool) or not isinstance(value, ok_type):
            got = f"{type(value).__name__} {value!r}"
            raise error(f"{name} must be {self.describe()}, got {got}"[:500])
        number = float(value)
        if (
            not math.isfinite(number)
            or number < self.lo
            or number > self.hi
            or (self.lo_open and number == self.lo)
        ):
            raise error(f"{name} must be {self.describe()}, got {value!r}")
        return value


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e16 else f"{x:g}"


_DATES: Final = "Unix seconds, 1970-01-01 to 9999-12-31"
UNIT: Final = Span(0.0, 1.0)
TIMESTAMP: Final = Span(TIME_MIN, TIME_MAX, note=_DATES)
COUNT: Final = Span(0, MAX_COUNT, integer=True)
WEIGHT: Final = Span(0.0, 1e6)

#: The numeric fields of a memory (:class:`~actormem.store.MemoryRecord`,
#: :class:`~actormem.store.NewMemory`, imported rows).
MEMORY_FIELDS: Final[Mapping[str, Span]] = {
    "importance": UNIT,
    "created_at": TIMESTAMP,
    "updated_at": TIMESTAMP,
    "last_accessed": TIMESTAMP,
    "deleted_at": Span(TIME_MIN, TIME_MAX, optional=True, note=_DATES),
    "access_count": COUNT,
}

#: The numeric arguments of a store's constructor.
STORE_SETTINGS: Final[Mapping[str, Span]] = {
    "near_duplicate_threshold": Span(0.0, 1.0, lo_open=True, optional=True),
    "max_memories": Span(1, 10**9, integer=True, optional=True),
    "touch_flush_interval": Span(0.001, 86_400.0, optional=True),
    "checkpoint_mb": Span(1, 65_536, integer=True),
    "approx_search_min_rows": Span(1, 10**12, integer=True, optional=True),
    "index_snapshot_min_rows": Span(0, 10**12, integer=True, optional=True),
    # PostgresStore only
    "pool_size": Span(1, 1000, integer=True),
    "connect_timeout": Span(1.0, 3600.0),
    "hnsw_min_rows": Span(1, 10**12, integer=True, optional=True),
    "search_cache_bytes": Span(1, 2**50, integer=True, optional=True),
}

#: The numeric arguments of the maintenance operations, as ``operation.argument``.
MAINTENANCE_ARGS: Final[Mapping[str, Span]] = {
    "decay.rate": Span(0.0, 1.0, lo_open=True),
    "decay.threshold": UNIT,
    "auto_forget.threshold": UNIT,
    "prune_stale.max_age_days": Span(0.0, 1e6),
    "prune_duplicates.threshold": Span(0.0, 1.0, lo_open=True),
    "consolidate.threshold": Span(0.0, 1.0, lo_open=True),
    "enforce_cap.max_memories": Span(0, 10**9, integer=True),
}

#: The numeric fields of :class:`~actormem.store.SearchConfig`.
SEARCH_FIELDS: Final[Mapping[str, Span]] = {
    "vector_weight": WEIGHT,
    "keyword_weight": WEIGHT,
    "relevance_weight": UNIT,
    "rrf_k": Span(0.0, 1e6),
    "candidates": Span(1, MAX_LIMIT, integer=True),
    "bm25_k1": Span(0.0, 100.0),
    "bm25_b": UNIT,
    "soft_match_weight": WEIGHT,
    "soft_match_full": Span(0.0, 1.0, lo_open=True),
    "speaker_weight": WEIGHT,
    "time_weight": WEIGHT,
    "rerank_depth": Span(0, MAX_LIMIT, integer=True),
    "context_prev_weight": WEIGHT,
    "context_next_weight": WEIGHT,
    "context_prev2_weight": WEIGHT,
}

#: The numeric fields of :class:`~actormem.store.RelevanceWeights`.
RELEVANCE_FIELDS: Final[Mapping[str, Span]] = {
    "recency": WEIGHT,
    "frequency": WEIGHT,
    "importance": WEIGHT,
    "age": WEIGHT,
    "frequency_saturation": Span(0.0, 1e9, lo_open=True),
    "age_rate": Span(0.0, 1.0, lo_open=True),
}


def check_fields(
    obj: object,
    spans: Mapping[str, Span],
    owner: str,
    *,
    error: type[Exception] = ValueError,
) -> None:
    """Check every field of ``obj`` named in ``spans`` (errors say ``owner.field``)."""
    for name, span in spans.items():
        span.check(getattr(obj, name), f"{owner}.{name}", error=error)


#: The numeric fields of :class:`~actormem.recorder.RecorderConfig`.  The
#: upper bounds are what the parts they feed accept: ``inject_limit`` and
#: ``similar_limit`` become search limits (``similar_limit * 3`` too),
#: ``max_episode_chars`` becomes a memory's content (1,000,000 characters at
#: most), ``idle_seconds`` a timer.
RECORDER_FIELDS: Final[Mapping[str, Span]] = {
    "batch_seconds": Span(0.001, 3_600.0),
    "batch_count": Span(1, 1_000_000, integer=True),
    "backlog_limit": Span(1, 10**9, integer=True),
    "max_pending": Span(1, 10**9, integer=True, optional=True),
    "confidence_threshold": UNIT,
    "episode_importance": UNIT,
    "max_episode_chars": Span(100, 1_000_000, integer=True),
    "similar_limit": Span(1, 1_000, integer=True),
    "model_timeout": Span(0.001, 86_400.0),
    "model_retries": Span(0, 100, integer=True),
    "promote_importance": UNIT,
    "promote_access_count": Span(0, MAX_COUNT, integer=True),
    "summary_tokens": Span(10, 1_000_000, integer=True),
    "idle_seconds": Span(0.001, 365 * 86_400.0, optional=True),
    "inject_limit": Span(1, 1_000, integer=True),
    "decay_rate": Span(0.0, 1.0, lo_open=True),
    "decay_threshold": UNIT,
    "forget_threshold": UNIT,
    "stale_days": Span(0.0, 1e6),
    "duplicate_threshold": Span(0.0, 1.0, lo_open=True),
    "consolidate_threshold": Span(0.0, 1.0, lo_open=True),
    "max_memories": Span(1, 10**9, integer=True, optional=True),
}

"""Which memories maintenance may touch and which may merge: one rule for every backend.

Two promises hold whatever namespace a maintenance call names, at any level
(user, agent, run, session) and on every path that prunes or merges
(``decay``, ``auto_forget``, ``prune_stale``, ``enforce_cap``,
``prune_duplicates``, ``consolidate``, the store-wide ``max_memories`` cap,
write-time deduplication):

Keyed facts are never maintained.
    A memory of kind :data:`KEYED_KIND` is an exact value a user saved by key
    (``save_fact``).  Maintenance skips it: it is never decayed, pruned,
    evicted, merged or absorbed, even when a wider scope (an agent-level
    runtime looking at its runs) is being maintained.  It changes only through
    ``update`` / ``delete`` naming its own namespace exactly
    (:func:`check_keyed_scope`), as :class:`~actormem.recorder.KeyedFacts` does.

Only facts merge; events never do.
    Two memories merge (exact or near duplicates, at write time or in
    maintenance) only when both have the same kind and that kind is in
    :data:`MERGE_KINDS`.  Episodes (recorded turns), summaries, offloaded
    messages, keyed facts and any kind a caller invents are events or exact
    records: two of them that look alike are still two.

The same event written twice is stored once.
    A memory of a kind that never merges, carrying source ids, whose
    namespace, kind, content and source ids all equal a live memory's is that
    memory written again (a turn recorded a second time by a retry or a
    resumed agent): the write returns ``NOOP`` with the existing id
    (:meth:`~actormem.store._planning.Planner.plan_adds`).  Without source ids
    nothing says two such memories are one event, and both are kept.
"""

from __future__ import annotations

from typing import Final

from actormem.store._types import InvalidMemoryError, MemoryRecord, Namespace

__all__ = [
    "KEYED_KIND",
    "MERGE_KINDS",
    "check_keyed_scope",
    "maintained",
    "merge_kind",
    "merges",
]

#: The kind of a keyed fact (``save_fact`` / ``get_fact``).
KEYED_KIND: Final = "keyed_fact"

#: The kinds whose near-identical memories are one piece of knowledge.
MERGE_KINDS: Final = frozenset({"fact", "preference", "procedure"})


def maintained(kind: str) -> bool:
    """Whether maintenance may remove, merge or change a memory of ``kind``."""
    return kind != KEYED_KIND


def merge_kind(kind: str) -> bool:
    """Whether a memory of ``kind`` may merge with another of the same kind."""
    return kind in MERGE_KINDS


def merges(a: MemoryRecord, b: MemoryRecord) -> bool:
    """Whether ``a`` and ``b`` may be merged into one memory."""
    return a.kind == b.kind and a.kind in MERGE_KINDS


def check_keyed_scope(record: MemoryRecord, namespace: Namespace, action: str) -> None:
    """Refuse to change a keyed fact through any namespace but its own.

    Raises:
        InvalidMemoryError: ``record`` is a keyed fact and ``namespace`` is a
            wider scope than the one it lives in.
    """
    if record.kind == KEYED_KIND and namespace != record.namespace:
        raise InvalidMemoryError(
            f"memory {record.id!r} is a keyed fact of {record.namespace}: {action} it through "
            f"that namespace (save_fact / delete_fact), not through the scope {namespace}"
        )

"""Keyed facts: exact values by key (``save_fact`` / ``get_fact``), scoped by namespace.

Some facts must come back exactly, not approximately (an account number, a
chosen plan, the user's preferred name).  They are stored as memories of
kind ``keyed_fact`` whose metadata holds ``key``, ``value`` and
``category``; saving an existing key updates that memory through
:meth:`~actormem.store.MemoryStore.update`, so every change leaves a history
row with the old and new value.

They live in a sibling namespace of the runtime's (:func:`facts_namespace`:
the most specific field that is set gets a ``#facts`` suffix), which keeps
them out of the runtime's own namespace while the runtime still searches
them beside the other memories.  The store itself never lets maintenance
touch a memory of kind ``keyed_fact``, whatever scope is maintained (an
agent-level runtime's ``on_idle`` covers its runs' ``#facts`` namespaces),
and refuses to update or delete one through any namespace but its own
(:mod:`actormem.store._kinds`).  A key index (key -> memory id) is loaded
from the store on first use; lookups are one ``get`` by id (from the DuckDB
store's in-memory index, not a query).  A key missing from the key index is
looked up in the store again only when the store committed something since
the key index was read (``change_counter``; a store without one, like
PostgreSQL's shared by several processes, is always asked again).
"""

from __future__ import annotations

import builtins
import contextlib
import threading
import weakref
from typing import Any, Final

import msgspec
import structlog

from actormem.store import (
    KEYED_KIND,
    HistoryRecord,
    MemoryNotFoundError,
    MemoryRecord,
    MemoryStore,
    Namespace,
    NamespaceError,
    NewMemory,
    WriteResult,
)

__all__ = ["FACTS_SUFFIX", "KEYED_KIND", "KeyedFacts", "facts_namespace"]

log = structlog.get_logger(__name__)

FACTS_SUFFIX: Final = "#facts"
_MAX_KEY: Final = 200
_MAX_CATEGORY: Final = 64
_MAX_VALUE: Final = 100_000
_LIST_LIMIT: Final = 100_000


def facts_namespace(namespace: Namespace) -> Namespace:
    """The namespace that holds the keyed facts of ``namespace``.

    The most specific field that is set (session, run, agent, then user)
    gets the ``#facts`` suffix, so the result is outside the scope of
    ``namespace`` itself but as narrow as it.
    """
    for name in ("session_id", "run_id", "agent_id", "user_id"):
        value = getattr(namespace, name)
        if value is not None:
            try:
                return msgspec.structs.replace(namespace, **{name: value + FACTS_SUFFIX})
            except NamespaceError as exc:
                raise NamespaceError(
                    f"keyed facts of this namespace live where {name} ends in "
                    f"{FACTS_SUFFIX!r}, and with those {len(FACTS_SUFFIX)} more characters "
                    f"the namespace is past its limits: {exc}"
                ) from None
    raise AssertionError("a Namespace always has a field set")  # pragma: no cover


def _check(name: str, value: object, limit: int) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a str, got {type(value).__name__}")
    value = value.strip()
    if not value:
        raise ValueError(f"{name} must not be empty")
    if len(value) > limit:
        raise ValueError(f"{name} has {len(value)} characters, the limit is {limit}")
    _check_unicode(name, value)
    return value


def _check_unicode(name: str, value: str) -> None:
    """Refuse text that cannot be stored (lone surrogates are not valid UTF-8)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"{name} is not valid Unicode text ({exc.reason} at position {exc.start})"
        ) from None


_LOCKS_GUARD: Final = threading.Lock()
_STORE_LOCKS: weakref.WeakKeyDictionary[Any, threading.RLock] = weakref.WeakKeyDictionary()


class KeyedFacts:
    """Exact facts by key on top of a :class:`~actormem.store.MemoryStore`.

    Thread-safe: saves of one instance are serialised; reads go straight to
    the store.

    Args:
        store: The long-term store.
        namespace: The runtime's namespace (facts go to :func:`facts_namespace` of it).
    """

    def __init__(self, store: MemoryStore, namespace: Namespace) -> None:
        self._store = store
        self.namespace = facts_namespace(namespace)
        # One lock per store, shared by every runtime of this process that uses it,
        # so two runtimes saving the same new key cannot both add it.
        with _LOCKS_GUARD:
            self._lock = _STORE_LOCKS.setdefault(store, threading.RLock())
        self._ids: dict[str, str] | None = None
        self._loaded_at: int | None = None

    def _live_id(self, key: str) -> str | None:
        """The id of ``key``'s live memory; re-reads the store on a miss (another
        runtime sharing the store may have saved it since this one looked)."""
        mid = self._index().get(key)
        if mid is not None and self._store.get(self.namespace, mid) is not None:
            return mid
        if mid is None and self._loaded_at is not None and self._loaded_at == self._counter():
            return None  # nothing was committed since the key index was read: a true miss
        tagged = getattr(self._store, "_indexed_tagged", None)
        if tagged is not None:
            # The store's live memories answer without reading its file again (a
            # DuckDB list first applies every pending write: a save's p99).
            found: MemoryRecord | None = None
            for rec in tagged(self.namespace, KEYED_KIND, f"key:{key}"):
                if rec.metadata.get("key") == key and (
                    found is None or rec.updated_at >= found.updated_at
                ):
                    found = rec
            ids = self._index()
            if found is None:
                ids.pop(key, None)
                return None
            ids[key] = found.id
            return found.id
        self._ids = None
        mid = self._index().get(key)
        if mid is not None and self._store.get(self.namespace, mid) is not None:
            return mid
        return None

    def _counter(self) -> int | None:
        """The store's commit counter, when it has one (one process owns a DuckDB file)."""
        counter = getattr(self._store, "change_counter", None)
        return counter if isinstance(counter, int) else None

    def _index(self) -> dict[str, str]:
        if self._ids is None:
            self._loaded_at = self._counter()
            ids: dict[str, str] = {}
            newest: dict[str, float] = {}
            for rec in self._store.list(self.namespace, kinds=[KEYED_KIND], limit=_LIST_LIMIT):
                key = rec.metadata.get("key")
                if isinstance(key, str) and rec.updated_at >= newest.get(key, -1.0):
                    ids[key] = rec.id
                    newest[key] = rec.updated_at
            self._ids = ids
        return self._ids

    def save(self, key: str, value: str, category: str = "general") -> WriteResult:
        """Set ``key`` to ``value`` (``ADD`` the first time, then ``UPDATE`` or ``NOOP``).

        Returns:
            The store's write result.

        Raises:
            ValueError: an argument is not a non-empty string within its limit.
        """
        key = _check("key", key, _MAX_KEY)
        if not isinstance(value, str):
            raise ValueError(f"value must be a str, got {type(value).__name__}")
        value = str.__str__(value)  # a str subclass is kept as its plain text
        if not value.strip():
            raise ValueError("value must not be empty")
        if len(value) > _MAX_VALUE:
            raise ValueError(f"value has {len(value)} characters, the limit is {_MAX_VALUE}")
        _check_unicode("value", value)
        category = _check("category", category, _MAX_CATEGORY)
        content = f"{key}: {value}"
        meta = {"key": key, "value": value, "category": category}
        tags = ("keyed", f"key:{key}", f"category:{category}")
        with self._lock:
            mid = self._live_id(key)
            if mid is not None:
                return self._store.update(
                    self.namespace,
                    mid,
                    content=content,
                    tags=tags,
                    metadata=meta,
                    reason=f"save_fact({key!r})",
                )
            item = NewMemory(
                content=content, kind=KEYED_KIND, importance=1.0, tags=tags, metadata=meta
            )
            result = self._store.add_many(self.namespace, [item], dedup=False)[0]
            self._index()[key] = result.id
            return self._one_per_key(key, result, content, tags, meta)

    def _one_per_key(
        self,
        key: str,
        result: WriteResult,
        content: str,
        tags: tuple[str, ...],
        meta: dict[str, str],
    ) -> WriteResult:
        """After adding ``key``: if another process added it at the same moment (a
        store shared by several processes; the lock above is per process), keep
        the oldest of the rows, delete the others and give it this save's value
        (the last writer wins, with history rows saying so).  A store with a
        ``change_counter`` (DuckDB) has one process: the lock suffices."""
        if getattr(self._store, "change_counter", None) is not None:
            return result
        rows = [
            r
            for r in self._store.list(self.namespace, kinds=[KEYED_KIND], limit=_LIST_LIMIT)
            if r.metadata.get("key") == key
        ]
        if len(rows) < 2:
            return result
        winner = min(rows, key=lambda r: (r.created_at, r.id))
        why = f"save_fact({key!r}): saved at the same time by another process"
        for rec in rows:
            if rec.id != winner.id:
                with contextlib.suppress(MemoryNotFoundError):  # the other one deleted it
                    self._store.delete(self.namespace, rec.id, reason=why)
        self._index()[key] = winner.id
        if winner.id == result.id:
            return result
        log.info("keyed_fact.concurrent_save", key=key, kept=winner.id, dropped=result.id)
        return self._store.update(
            self.namespace, winner.id, content=content, tags=tags, metadata=meta, reason=why
        )

    def get(self, key: str) -> str | None:
        """The value saved under ``key``, or None.

        Raises:
            ValueError: ``key`` is not a non-empty string.
        """
        key = _check("key", key, _MAX_KEY)
        with self._lock:
            mid = self._live_id(key)
            rec = self._store.get(self.namespace, mid) if mid is not None else None
        if rec is None:
            return None
        value = rec.metadata.get("value")
        return value if isinstance(value, str) else None

    def delete(self, key: str) -> bool:
        """Forget ``key`` (soft delete with a history row); False if it was not set."""
        key = _check("key", key, _MAX_KEY)
        with self._lock:
            mid = self._live_id(key)
            if mid is None:
                return False
            self._index().pop(key, None)
            self._store.delete(self.namespace, mid, reason=f"delete_fact({key!r})")
            return True

    def items(self) -> dict[str, str]:
        """Every saved key and its value."""
        out: dict[str, str] = {}
        for rec in self._store.list(self.namespace, kinds=[KEYED_KIND], limit=_LIST_LIMIT):
            key, value = rec.metadata.get("key"), rec.metadata.get("value")
            if isinstance(key, str) and isinstance(value, str):
                out[key] = value
        return out

    def history(self, key: str) -> builtins.list[HistoryRecord]:
        """The audit trail of ``key`` (ADD, then every UPDATE / DELETE), oldest first."""
        key = _check("key", key, _MAX_KEY)
        with self._lock:
            mid = self._index().get(key)
        if mid is None:
            return []
        return self._store.history(self.namespace, mid)

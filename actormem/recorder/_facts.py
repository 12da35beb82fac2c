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
(:mod:`actormem.store._kinds`).

One live memory per key: a save (add, or update of the key's oldest live
row) and the retirement of any other live row of the key are ONE store
transaction under the namespace's lock (``_keyed_put`` /
``_keyed_delete`` of :mod:`actormem.store._base_keyed`), so neither two
processes saving a new key at once nor a process killed mid-save can leave
two values; a delete retires every live row of the key.  A read looks the
key up each time (the DuckDB store's in-memory index, one query on
PostgreSQL); rows left by older versions are repaired on the next read.
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
    ForgetReport,
    HistoryRecord,
    MemoryNotFoundError,
    MemoryRecord,
    MemoryStore,
    Namespace,
    NamespaceError,
    NewMemory,
    StoreError,
    WriteResult,
)

__all__ = [
    "FACTS_SUFFIX",
    "KEYED_KIND",
    "KeyedFacts",
    "facts_namespace",
    "forget_with_facts",
    "keyed_rows_in",
]

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


def forget_with_facts(store: MemoryStore, namespace: Namespace) -> builtins.list[ForgetReport]:
    """Remove for good every memory, history row and journal row of the scope
    ``namespace`` AND of its keyed facts (:func:`facts_namespace`: a sibling,
    outside the scope): what erasing a user (or an agent) must remove.

    The one erasure both ``actormem memories forget`` and the memory
    explorer's "forget this user" run.  Returns the two stores' reports (the
    scope's, then its keyed facts').
    """
    return [store.forget(namespace), store.forget(facts_namespace(namespace))]


def keyed_rows_in(store: MemoryStore, namespace: Namespace) -> int:
    """How many rows (live or retired) the keyed-facts namespaces inside the
    scope ``namespace`` hold: the keyed facts of its agents, runs and sessions
    (``Namespace(user_id="u1")`` holds ``agent_id="a#facts"``), which
    :func:`forget_with_facts` removes with the scope itself.

    Read before the erasure; with the sibling's report it is the count of
    keyed facts erased (a keyed fact written between the two is erased but
    counted as a plain memory).
    """
    return sum(
        st.live + st.deleted + st.superseded
        for st in store.stats(namespace)
        if any(value.endswith(FACTS_SUFFIX) for _, value in st.namespace.items())
    )


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

    One live memory per key, whatever the interleaving: a save or delete is one
    store transaction that finds every live row of the key, keeps the oldest
    (its id and history go on) and retires the others (a crash cannot leave
    half of it).  A read that finds two live rows of a key (left by an older
    version) answers with the last written value and repairs the key.

    Thread-safe: saves of one instance are serialised; reads go straight to
    the store.

    Args:
        store: The long-term store.
        namespace: The runtime's namespace (facts go to :func:`facts_namespace` of it).
    """

    def __init__(self, store: MemoryStore, namespace: Namespace) -> None:
        self._store = store
        self.namespace = facts_namespace(namespace)
        # One lock per store, shared by every runtime of this process that uses it
        # (a store without keyed transactions relies on it against itself).
        with _LOCKS_GUARD:
            self._lock = _STORE_LOCKS.setdefault(store, threading.RLock())

    def _rows(self, key: str) -> builtins.list[MemoryRecord]:
        """The key's live rows, the one that stays first."""
        live = getattr(self._store, "_keyed_live", None)
        if live is not None:
            rows: builtins.list[MemoryRecord] = live(self.namespace, key)
            return rows
        found = [
            r
            for r in self._store.list(self.namespace, kinds=[KEYED_KIND], limit=_LIST_LIMIT)
            if r.namespace == self.namespace and r.metadata.get("key") == key
        ]
        return sorted(found, key=lambda r: (r.created_at, r.id))

    def _live(self, key: str) -> MemoryRecord | None:
        """The key's live memory; two or more (left by an older version) are repaired."""
        rows = self._rows(key)
        if len(rows) < 2:
            return rows[0] if rows else None
        latest = max(rows, key=lambda r: (r.updated_at, r.id))
        repair = getattr(self._store, "_keyed_repair", None)
        if repair is None:
            return latest
        log.warning("keyed_fact.repair", key=key, rows=len(rows), namespace=str(self.namespace))
        try:
            kept: MemoryRecord | None = repair(
                self.namespace, key, f"get_fact({key!r}): one live row per key"
            )
        except StoreError as exc:  # a read-only store still answers with the last value
            log.warning("keyed_fact.repair_failed", key=key, error=str(exc))
            return latest
        return kept

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
        item = NewMemory(content=content, kind=KEYED_KIND, importance=1.0, tags=tags, metadata=meta)
        reason = f"save_fact({key!r})"
        with self._lock:
            put = getattr(self._store, "_keyed_put", None)
            if put is not None:
                result: WriteResult = put(self.namespace, key, item, reason)
                return result
            return self._save_in_steps(key, item, reason)

    def _save_in_steps(self, key: str, item: NewMemory, reason: str) -> WriteResult:
        """A store of another library (no keyed transactions): add or update, then
        retire the key's other rows -- separate writes, one process at a time."""
        rows = self._rows(key)
        if not rows:
            return self._store.add_many(self.namespace, [item], dedup=False)[0]
        for rec in rows[1:]:
            with contextlib.suppress(MemoryNotFoundError):
                self._store.delete(self.namespace, rec.id, reason=reason)
        return self._store.update(
            self.namespace,
            rows[0].id,
            content=item.content,
            tags=item.tags,
            metadata=dict(item.metadata),
            reason=reason,
        )

    def get(self, key: str) -> str | None:
        """The value saved under ``key``, or None.

        Raises:
            ValueError: ``key`` is not a non-empty string.
        """
        key = _check("key", key, _MAX_KEY)
        rec = self._live(key)
        if rec is None:
            return None
        value = rec.metadata.get("value")
        return value if isinstance(value, str) else None

    def delete(self, key: str) -> bool:
        """Forget ``key``: every live row of it (soft delete with a history row);
        False if it was not set."""
        key = _check("key", key, _MAX_KEY)
        reason = f"delete_fact({key!r})"
        with self._lock:
            remove = getattr(self._store, "_keyed_delete", None)
            if remove is not None:
                return bool(remove(self.namespace, key, reason))
            gone = 0
            for rec in self._rows(key):
                with contextlib.suppress(MemoryNotFoundError):
                    self._store.delete(self.namespace, rec.id, reason=reason)
                    gone += 1
            return gone > 0

    def items(self) -> dict[str, str]:
        """Every saved key and its value (a key's last written one)."""
        newest: dict[str, tuple[float, str, str]] = {}
        for rec in self._store.list(self.namespace, kinds=[KEYED_KIND], limit=_LIST_LIMIT):
            key, value = rec.metadata.get("key"), rec.metadata.get("value")
            if isinstance(key, str) and isinstance(value, str):
                mark = (rec.updated_at, rec.id, value)
                if key not in newest or mark > newest[key]:
                    newest[key] = mark
        return {key: mark[2] for key, mark in newest.items()}

    def history(self, key: str) -> builtins.list[HistoryRecord]:
        """The audit trail of ``key``'s live memory (ADD, then every UPDATE), oldest
        first; empty when the key is not set."""
        key = _check("key", key, _MAX_KEY)
        rec = self._live(key)
        if rec is None:
            return []
        return self._store.history(self.namespace, rec.id)

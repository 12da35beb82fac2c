"""Keyed facts' writes: one store transaction per save or delete of a key.

Why a module of its own: :class:`~actormem.recorder.KeyedFacts` promises one
live memory per key, whatever the interleaving of processes sharing a store
and whatever moment one of them dies at.  Adding a key and retiring the key's
other rows as two separate writes left a window (a process killed between
them) with two live rows; here the whole decision -- which rows the key has,
which one stays, what it holds now -- is planned and committed in ONE write
transaction under the namespace's lock (the same lock an add of that
namespace takes: PostgreSQL's advisory lock, DuckDB's group commit), so no
other writer sees or makes a half-done state.

Rows left by older versions (two live rows of one key) are repaired by the
next save, delete or :meth:`KeyedWrites._keyed_repair` of that key: the
oldest row stays (its id and history go on), the others are soft-deleted
with a history row saying why.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

import msgspec
import numpy as np
import numpy.typing as npt

from actormem.store._base_hooks import BackendHooks
from actormem.store._content_hash import content_hash
from actormem.store._kinds import KEYED_KIND
from actormem.store._planning import Planner
from actormem.store._records import Batch, Change, check_namespace, check_new_memory
from actormem.store._types import MemoryRecord, Namespace, NewMemory, WriteResult

__all__ = ["KeyedWrites", "keyed_order", "newest_value"]

_LIST_LIMIT: Final = 100_000


def keyed_order(rows: Sequence[MemoryRecord]) -> builtins.list[MemoryRecord]:
    """The live rows of one key, the one that stays first (the oldest, then by id)."""
    return sorted(rows, key=lambda r: (r.created_at, r.id))


def newest_value(rows: Sequence[MemoryRecord]) -> MemoryRecord:
    """The row holding the key's last written value (newest ``updated_at``, then id)."""
    return max(rows, key=lambda r: (r.updated_at, r.id))


def _retire(batch: Batch, rows: Sequence[MemoryRecord], now: float, why: str) -> None:
    for rec in rows:
        batch.changes[rec.id] = Change(msgspec.structs.replace(rec, deleted_at=now, updated_at=now))
        batch.removed.append(rec.id)
        batch.log(rec.id, rec.namespace, "DELETE", rec.content, None, why)


class KeyedWrites(BackendHooks):
    """``_keyed_put`` / ``_keyed_delete`` / ``_keyed_repair`` / ``_keyed_live`` (a mixin)."""

    if TYPE_CHECKING:

        def _embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]: ...

        def list(
            self,
            namespace: Namespace,
            *,
            kinds: Sequence[str] | None = None,
            limit: int = 100,
            offset: int = 0,
            include_deleted: bool = False,
        ) -> builtins.list[MemoryRecord]: ...

    def _keyed_live(self, namespace: Namespace, key: str) -> builtins.list[MemoryRecord]:
        """The live keyed-fact rows of ``key`` written into exactly ``namespace``,
        the one that stays first.  Backends answer it from an index or one query."""
        ns = check_namespace(namespace)
        rows = [
            r
            for r in self.list(ns, kinds=[KEYED_KIND], limit=_LIST_LIMIT)
            if r.namespace == ns and r.metadata.get("key") == key
        ]
        return keyed_order(rows)

    def _keyed_put(
        self, namespace: Namespace, key: str, item: NewMemory, reason: str
    ) -> WriteResult:
        """Set ``key`` to ``item`` in one transaction: ``ADD`` when the key has no live
        row, else ``UPDATE`` (or ``NOOP``) of the oldest one; every other live row of
        the key is soft-deleted in the same transaction."""
        self._check_open()
        ns = check_namespace(namespace)
        item = check_new_memory(msgspec.structs.replace(item, kind=KEYED_KIND))
        vector = self._embed([item.content])[0]
        chash = content_hash(item.content)

        def plan(planner: Planner, now: float, batch: Batch) -> WriteResult:
            rows = keyed_order(planner.view.keyed_rows(ns.key(), key))
            if not rows:
                rec = planner.new_record(ns, item, chash, now)
                batch.inserts.append((rec, vector))
                batch.log(rec.id, ns, "ADD", None, rec.content, reason)
                return WriteResult(id=rec.id, op="ADD")
            keep, others = rows[0], rows[1:]
            if others:
                _retire(batch, others, now, f"{reason}: a second live row of the key")
            changes: dict[str, Any] = {}
            if item.content != keep.content:
                changes.update(content=item.content, content_hash=chash)
            if tuple(dict.fromkeys(item.tags)) != keep.tags:
                changes["tags"] = tuple(dict.fromkeys(item.tags))
            if dict(item.metadata) != keep.metadata:
                changes["metadata"] = dict(item.metadata)
            if not changes:
                return WriteResult(id=keep.id, op="UPDATE" if others else "NOOP")
            record = msgspec.structs.replace(keep, updated_at=now, **changes)
            batch.changes[keep.id] = Change(
                record, content_vector=vector if "content" in changes else None
            )
            batch.log(keep.id, ns, "UPDATE", keep.content, record.content, reason)
            return WriteResult(id=keep.id, op="UPDATE")

        return self._write("write", plan, lock=ns)

    def _keyed_delete(self, namespace: Namespace, key: str, reason: str) -> int:
        """Soft-delete every live row of ``key`` in one transaction; how many there were."""
        self._check_open()
        ns = check_namespace(namespace)

        def plan(planner: Planner, now: float, batch: Batch) -> int:
            rows = planner.view.keyed_rows(ns.key(), key)
            _retire(batch, rows, now, reason)
            return len(rows)

        return self._write("write", plan, lock=ns)

    def _keyed_repair(self, namespace: Namespace, key: str, reason: str) -> MemoryRecord | None:
        """Leave ``key`` one live row holding its last written value (rows left by older
        versions); the row that stays, or ``None`` when the key has none."""
        self._check_open()
        ns = check_namespace(namespace)

        def plan(planner: Planner, now: float, batch: Batch) -> MemoryRecord | None:
            rows = keyed_order(planner.view.keyed_rows(ns.key(), key))
            if len(rows) < 2:
                return rows[0] if rows else None
            keep, latest = rows[0], newest_value(rows)
            _retire(batch, rows[1:], now, f"{reason}: a second live row of the key")
            if latest.id == keep.id:
                return keep
            record = msgspec.structs.replace(
                keep,
                content=latest.content,
                content_hash=latest.content_hash,
                tags=latest.tags,
                metadata=dict(latest.metadata),
                updated_at=now,
            )
            # the kept row takes the last value: its vector is that row's, embedded again
            batch.changes[keep.id] = Change(record, content_vector=self._embed([latest.content])[0])
            batch.log(keep.id, ns, "UPDATE", keep.content, record.content, reason)
            return record

        return self._write("write", plan, lock=ns)

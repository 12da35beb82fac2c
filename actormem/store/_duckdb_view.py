"""The planner's view of a DuckDB store (:class:`~actormem.store._planning.PlanView`).

Kept apart from :mod:`actormem.store._duckdb_write` (the write path that
plans with it): the planner reads the in-memory index, and asks the file only
whether ids exist.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from actormem.store._duckdb_sql import lit
from actormem.store._kinds import KEYED_KIND
from actormem.store._planning import ScopeState
from actormem.store._records import strs_json
from actormem.store._types import MemoryRecord, Namespace, SearchFilters, stored_namespace

if TYPE_CHECKING:
    from actormem.store._duckdb_write import DuckDBWrites

__all__ = ["IndexView"]

F32 = npt.NDArray[np.float32]
Key = tuple[str, str, str, str]


class IndexView:
    """The planner's view of a DuckDB store: its index and its write cursor."""

    def __init__(self, store: DuckDBWrites) -> None:
        self._store = store
        self._index = store._index

    def record(self, memory_id: str) -> MemoryRecord | None:
        return self._index.record(memory_id)

    def find_hash(self, key: Key, content_hash: str) -> str | None:
        return self._index.find_hash(key, content_hash)

    def find_event(
        self, key: Key, kind: str, content_hash: str, source_ids: tuple[str, ...]
    ) -> str | None:
        # The index maps a hash to its newest live row: that is the event itself
        # when a turn is recorded again.  Only when that row is another memory
        # with the same text (a distinct turn that read alike) does the file say
        # whether an older row is this event.
        found_id = self._index.find_hash(key, content_hash)
        found = self._index.record(found_id) if found_id is not None else None
        if found is None:
            return None
        if found.kind == kind and found.source_ids == source_ids:
            return found.id
        self._store._drain()
        where = " AND ".join(
            f"{col} = {lit(value)}"
            for col, value in zip(
                ("user_id", "agent_id", "run_id", "session_id", "content_hash", "kind"),
                (*key, content_hash, kind),
                strict=True,
            )
        )
        rows = self._store._wcur.execute(  # literals: bound parameters make DuckDB look for pandas
            f"SELECT id FROM memories WHERE {where} AND source_ids = {lit(strs_json(source_ids))} "
            "AND deleted_at IS NULL AND superseded_by IS NULL ORDER BY created_at, id LIMIT 1"
        ).fetchall()
        row = rows[0] if rows else None
        return None if row is None else str(row[0])

    def id_taken(self, memory_id: str) -> bool:
        return self._index.row_of(memory_id) is not None or self._store._exists(memory_id)

    def existing_ids(self, ids: Sequence[str]) -> set[str]:
        # An Arrow table, not a list parameter: binding a Python list of 5,000
        # strings cost DuckDB's binding ~7 s (a module lookup per item).
        self._store._drain()
        cur = self._store._wcur
        cur.register("_ids", pa.table({"id": pa.array(list(ids), type=pa.string())}))
        try:
            rows = cur.execute("SELECT m.id FROM memories m JOIN _ids USING (id)").fetchall()
        finally:
            cur.unregister("_ids")
        return {r[0] for r in rows}

    def id_keys(self, ids: Sequence[str]) -> dict[str, Key]:
        self._store._drain()
        cur = self._store._wcur
        cur.register("_ids", pa.table({"id": pa.array(list(ids), type=pa.string())}))
        try:
            rows = cur.execute(
                "SELECT m.id, m.user_id, m.agent_id, m.run_id, m.session_id "
                "FROM memories m JOIN _ids USING (id)"
            ).fetchall()
        finally:
            cur.unregister("_ids")
        return {str(r[0]): (str(r[1]), str(r[2]), str(r[3]), str(r[4])) for r in rows}

    def nearest(
        self, key: Key, vectors: F32, threshold: float
    ) -> builtins.list[tuple[float, MemoryRecord] | None]:
        index = self._index
        rows = index.exact_rows(key)
        if len(vectors) == 1:  # a single write: no chunking and no per-vector arrays
            if not rows.size:
                return [None]
            sims = np.nan_to_num(index.cosine_many(rows, vectors, ascending=True)[:, 0], nan=-1.0)
            arg = int(sims.argmax())
            if not sims[arg] >= threshold:  # NaN is never similar
                return [None]
            return [(float(sims[arg]), index.records([int(rows[arg])])[0])]
        best_sim = np.full(len(vectors), -1.0, dtype=np.float32)
        best_row = np.full(len(vectors), -1, dtype=np.int64)
        if rows.size:
            for start in range(0, len(vectors), 256):
                chunk = vectors[start : start + 256]
                sims = index.cosine_many(rows, chunk, ascending=True)  # (rows, chunk)
                np.nan_to_num(sims, copy=False, nan=-1.0)  # NaN is never the nearest
                arg = sims.argmax(axis=0)
                best_sim[start : start + len(chunk)] = sims[arg, np.arange(len(chunk))]
                best_row[start : start + len(chunk)] = rows[arg]
        return [
            (float(best_sim[j]), index.records([int(best_row[j])])[0])
            if best_sim[j] >= threshold
            else None
            for j in range(len(vectors))
        ]

    def scope_state(self, namespace: Namespace) -> ScopeState:
        index = self._index
        rows = index.scope_rows(namespace)
        arrays = index.arrays(rows)
        return ScopeState(
            records=index.records(rows),
            importance=arrays["importance"],
            access=arrays["access"],
            last=arrays["last"],
            created=arrays["created"],
            vectors=lambda: index.vectors(rows),
        )

    def keyed_rows(self, key: Key, fact_key: str) -> builtins.list[MemoryRecord]:
        # every keyed fact is tagged "key:<its key>": the index's tag postings find them
        tag = f"key:{fact_key}"
        index = self._index
        rows = index.scope_rows(
            stored_namespace(key), SearchFilters(kinds=(KEYED_KIND,), tags_all=(tag,))
        )
        return [
            r
            for r in index.records(rows)
            if r.namespace.key() == key and r.metadata.get("key") == fact_key
        ]

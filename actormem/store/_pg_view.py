"""The planner's view of a PostgreSQL store inside one write transaction.

Kept apart from :mod:`actormem.store._postgres` (connections, transactions,
search): this is how the shared planner (:mod:`actormem.store._planning`)
reads the rows it decides on, each after taking the advisory lock of their
concrete namespace (see "Concurrency" in :mod:`actormem.store._postgres`).
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from actormem.store._kinds import KEYED_KIND, MERGE_KINDS
from actormem.store._pg_queries import PG_LIVE, PG_SELECT, cosine_sql, distance_sql, scope_sql, vec
from actormem.store._pg_write import array_text, lock_keys
from actormem.store._planning import ScopeState, nearest_in
from actormem.store._records import row_to_record
from actormem.store._types import MemoryRecord, Namespace

if TYPE_CHECKING:
    from actormem.store._postgres import PostgresStore

__all__ = ["Key", "PgView"]

F32 = npt.NDArray[np.float32]
Key = tuple[str, str, str, str]


class PgView:
    """The planner's view of the database, inside one write transaction.

    Every method that reads the rows of a concrete namespace first takes
    that namespace's advisory lock (see the module docstring).
    """

    def __init__(self, store: PostgresStore, conn: Any, locked: set[Key]) -> None:
        self._store = store
        self._conn = conn
        self._locked = locked
        self._hashes: dict[tuple[Key, str], str | None] = {}  # prefetched find_hash answers
        self._asked: set[str] = set()  # prefetched ids ...
        # prefetched find_event answers: per hash, (kind, source ids) -> oldest id
        self._events: dict[tuple[Key, str], dict[tuple[str, tuple[str, ...]], str]] = {}
        self._taken: set[str] = set()  # ... and those of them that exist

    def prefetch(
        self, key: Key, hashes: Sequence[str], ids: Sequence[str], events: Sequence[str] = ()
    ) -> None:
        """Answer a batch's ``find_hash`` / ``find_event`` / ``id_taken`` questions
        with a query each.

        Valid for the rest of the transaction: the namespace's lock is held,
        so no other writer adds or removes its rows meanwhile.
        """
        if hashes:
            self.lock([key])
            wanted = sorted(set(hashes))
            rows = self._conn.execute(
                "SELECT DISTINCT ON (content_hash) content_hash, id FROM memories "
                "WHERE user_id = %s AND agent_id = %s AND run_id = %s AND session_id = %s "
                f"AND content_hash = ANY(%s::text[]) AND {PG_LIVE} "
                "ORDER BY content_hash, kind = 'fact' DESC, "
                "kind IN ('preference', 'procedure') DESC, created_at, id",
                (*key, array_text(wanted)),
            ).fetchall()
            found = {str(h): str(i) for h, i in rows}
            for h in wanted:
                self._hashes[key, h] = found.get(h)
        if events:
            self.lock([key])
            wanted = sorted(set(events))
            rows = self._conn.execute(
                "SELECT content_hash, kind, source_ids, id FROM memories "
                "WHERE user_id = %s AND agent_id = %s AND run_id = %s AND session_id = %s "
                f"AND content_hash = ANY(%s::text[]) AND {PG_LIVE} ORDER BY created_at, id",
                (*key, array_text(wanted)),
            ).fetchall()
            for h in wanted:
                self._events.setdefault((key, h), {})
            for h, kind, sources, mid in rows:
                self._events[key, str(h)].setdefault((str(kind), tuple(sources)), str(mid))
        if ids:
            self._taken |= self.existing_ids(ids)
            self._asked.update(ids)

    def lock(self, keys: Sequence[Key]) -> None:
        new = sorted(set(keys) - self._locked)
        if new:
            lock_keys(self._conn, new)
            self._locked.update(new)

    def _records(self, where: str, params: Sequence[Any]) -> builtins.list[MemoryRecord]:
        rows = self._conn.execute(f"SELECT {PG_SELECT} FROM memories WHERE {where}", params)
        return [row_to_record(r) for r in rows.fetchall()]

    def record(self, memory_id: str) -> MemoryRecord | None:
        row = self._conn.execute(
            f"SELECT user_id, agent_id, run_id, session_id FROM memories WHERE id = %s AND "
            f"{PG_LIVE}",
            (memory_id,),
        ).fetchone()
        if row is None:
            return None
        self.lock([(row[0], row[1], row[2], row[3])])
        found = self._records(f"id = %s AND {PG_LIVE}", (memory_id,))
        return found[0] if found else None

    def find_hash(self, key: Key, content_hash: str) -> str | None:
        if (key, content_hash) in self._hashes:
            return self._hashes[key, content_hash]
        self.lock([key])
        row = self._conn.execute(
            "SELECT id FROM memories WHERE user_id = %s AND agent_id = %s AND run_id = %s "
            f"AND session_id = %s AND content_hash = %s AND {PG_LIVE} "
            # several rows can share a hash (kinds that never merge): a fact first,
            # then another kind that merges, the oldest of them
            "ORDER BY kind = 'fact' DESC, kind IN ('preference', 'procedure') DESC, "
            "created_at, id LIMIT 1",
            (*key, content_hash),
        ).fetchone()
        return None if row is None else str(row[0])

    def find_event(
        self, key: Key, kind: str, content_hash: str, source_ids: tuple[str, ...]
    ) -> str | None:
        known = self._events.get((key, content_hash))
        if known is not None:
            return known.get((kind, source_ids))
        self.lock([key])
        row = self._conn.execute(
            "SELECT id FROM memories WHERE user_id = %s AND agent_id = %s AND run_id = %s "
            "AND session_id = %s AND content_hash = %s AND kind = %s "
            f"AND source_ids = %s::text[] AND {PG_LIVE} ORDER BY created_at, id LIMIT 1",
            (*key, content_hash, kind, array_text(source_ids)),
        ).fetchone()
        return None if row is None else str(row[0])

    def id_taken(self, memory_id: str) -> bool:
        if memory_id in self._asked:
            return memory_id in self._taken
        row = self._conn.execute("SELECT 1 FROM memories WHERE id = %s", (memory_id,)).fetchone()
        return row is not None

    def existing_ids(self, ids: Sequence[str]) -> set[str]:
        rows = self._conn.execute(
            "SELECT id FROM memories WHERE id = ANY(%s::text[])", (array_text(ids),)
        ).fetchall()
        return {str(r[0]) for r in rows}

    def id_keys(self, ids: Sequence[str]) -> dict[str, Key]:
        rows = self._conn.execute(
            "SELECT id, user_id, agent_id, run_id, session_id FROM memories "
            "WHERE id = ANY(%s::text[])",
            (array_text(ids),),
        ).fetchall()
        return {str(r[0]): (str(r[1]), str(r[2]), str(r[3]), str(r[4])) for r in rows}

    def nearest(
        self, key: Key, vectors: F32, threshold: float
    ) -> builtins.list[tuple[float, MemoryRecord] | None]:
        self.lock([key])
        # Only kinds that merge can be a twin (the planner refuses any other); on a
        # tie a fact comes first, then the oldest.
        kinds = ", ".join(f"'{k}'" for k in sorted(MERGE_KINDS))
        where = (
            f"user_id = %s AND agent_id = %s AND run_id = %s AND session_id = %s AND {PG_LIVE} "
            f"AND kind IN ({kinds})"
        )
        out: builtins.list[tuple[float, MemoryRecord] | None] = []
        if len(vectors) <= 16:  # one exact top-1 per vector on the tenant's btree
            for v in vectors:
                row = self._conn.execute(
                    f"SELECT {PG_SELECT}, {cosine_sql()} FROM memories WHERE {where} "
                    f"ORDER BY {distance_sql()}, kind <> 'fact', created_at, id LIMIT 1",
                    (v, *key, v),
                ).fetchone()
                if row is None or not float(row[18]) >= threshold:  # NaN: not similar
                    out.append(None)
                else:
                    out.append((float(row[18]), row_to_record(row[:18])))
            return out
        rows = self._conn.execute(
            f"SELECT id, embedding FROM memories WHERE {where} "
            "ORDER BY kind <> 'fact', created_at, id",
            key,
        ).fetchall()
        if not rows:
            return [None] * len(vectors)
        mat = np.stack([vec(r[1]) for r in rows])
        best, sims = nearest_in(mat, vectors, threshold)
        hits = zip(best, sims, strict=True)
        wanted = sorted({rows[int(b)][0] for b, s in hits if s >= threshold})
        recs = {r.id: r for r in self._records("id = ANY(%s)", (wanted,))} if wanted else {}
        for b, s in zip(best, sims, strict=True):
            rec = recs.get(rows[int(b)][0]) if s >= threshold else None
            out.append(None if rec is None else (float(s), rec))
        return out

    def scope_state(self, namespace: Namespace) -> ScopeState:
        where, params = scope_sql(namespace)
        where += f" AND {PG_LIVE}"
        keys = self._conn.execute(
            f"SELECT DISTINCT user_id, agent_id, run_id, session_id FROM memories WHERE {where}",
            params,
        ).fetchall()
        self.lock([(k[0], k[1], k[2], k[3]) for k in keys])
        rows = self._conn.execute(
            f"SELECT {PG_SELECT}, embedding FROM memories WHERE {where} ORDER BY created_at, id",
            params,
        ).fetchall()
        locked = self._locked
        rows = [r for r in rows if (r[1], r[2], r[3], r[4]) in locked]  # new namespaces wait
        records = [row_to_record(r[:18]) for r in rows]
        dim = self._store._dim
        vecs = (
            np.stack([vec(r[18]) for r in rows]) if rows else np.zeros((0, dim), dtype=np.float32)
        )
        return ScopeState(
            records=records,
            importance=np.array([r.importance for r in records], dtype=np.float64),
            access=np.array([r.access_count for r in records], dtype=np.float64),
            last=np.array([r.last_accessed for r in records], dtype=np.float64),
            created=np.array([r.created_at for r in records], dtype=np.float64),
            vectors=lambda: vecs,
        )

    def keyed_rows(self, key: Key, fact_key: str) -> builtins.list[MemoryRecord]:
        self.lock([key])
        return self._records(
            "user_id = %s AND agent_id = %s AND run_id = %s AND session_id = %s "
            f"AND kind = %s AND metadata->>'key' = %s AND {PG_LIVE} ORDER BY created_at, id",
            (*key, KEYED_KIND, fact_key),
        )

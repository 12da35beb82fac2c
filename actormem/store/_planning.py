"""Write and maintenance decisions, shared by every store backend.

Deciding *what* a write does -- which new memory is an exact or near
duplicate of which stored one and which of the two survives, what an update
changes, which memories decay, fall under a cap or merge -- does not depend
on the database.  A backend answers the few questions these decisions ask
through a :class:`PlanView` (bound to its open write transaction, so the
answers are those the transaction will commit against) and then writes the
:class:`~actormem.store._records.Batch` the planner filled.
"""

from __future__ import annotations

import builtins
import os
import random
import re
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

import msgspec
import numpy as np
import numpy.typing as npt

from actormem.store._blas import SPLIT_FREE_WORK, unsplit_matmul
from actormem.store._kinds import maintained, merge_kind, merges
from actormem.store._limits import MAX_COUNT
from actormem.store._records import Batch, Change, union
from actormem.store._relevance import RelevanceWeights, relevance
from actormem.store._types import (
    InvalidMemoryError,
    MemoryRecord,
    Namespace,
    NewMemory,
    WriteResult,
)

__all__ = [
    "PlanView",
    "Planner",
    "ScopeState",
    "absorb",
    "jaccard",
    "key_terms",
    "mergeable",
    "nearest_in",
    "plan_merges",
    "remove_records",
    "similar_pairs",
]

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]
Key = tuple[str, str, str, str]


@dataclass
class ScopeState:
    """The live memories of a scope with the figures maintenance decides by."""

    records: builtins.list[MemoryRecord]
    importance: F64
    access: F64
    last: F64
    created: F64
    vectors: Callable[[], F32]

    def relevance(self, now: float, weights: RelevanceWeights) -> F64:
        return relevance(self.importance, self.access, self.last, self.created, now, weights)

    def only(self, keep: Callable[[MemoryRecord], bool]) -> ScopeState:
        """The memories of this state for which ``keep`` is true (same order)."""
        mask = np.fromiter((keep(r) for r in self.records), dtype=bool, count=len(self.records))
        if mask.all():
            return self
        vectors = self.vectors
        return ScopeState(
            records=[r for r, k in zip(self.records, mask, strict=True) if k],
            importance=self.importance[mask],
            access=self.access[mask],
            last=self.last[mask],
            created=self.created[mask],
            vectors=lambda: vectors()[mask],
        )

    def maintained(self) -> ScopeState:
        """The memories maintenance may touch: keyed facts left out."""
        return self.only(lambda r: maintained(r.kind))

    def merging(self) -> ScopeState:
        """The memories that may merge: those of a kind in ``MERGE_KINDS``."""
        return self.only(lambda r: merge_kind(r.kind))


class PlanView(Protocol):
    """What a planner asks the backend, inside the write's transaction."""

    def record(self, memory_id: str) -> MemoryRecord | None:
        """The live record of ``memory_id`` (any namespace), or ``None``."""

    def find_hash(self, key: Key, content_hash: str) -> str | None:
        """Id of the live memory of exactly ``key`` with this content hash."""

    def find_event(
        self, key: Key, kind: str, content_hash: str, source_ids: tuple[str, ...]
    ) -> str | None:
        """Id of a live memory of exactly ``key`` with this kind, content hash
        and source ids (the same event written again), or ``None``."""

    def id_taken(self, memory_id: str) -> bool:
        """Whether any row (live or not) has this id."""

    def existing_ids(self, ids: Sequence[str]) -> set[str]:
        """Those of ``ids`` that any row (live or not) has."""

    def id_keys(self, ids: Sequence[str]) -> dict[str, Key]:
        """The namespace key of the row (live or not) holding each of ``ids`` that one holds."""

    def nearest(
        self, key: Key, vectors: F32, threshold: float
    ) -> builtins.list[tuple[float, MemoryRecord] | None]:
        """Per vector: the most similar live memory of exactly ``key`` and its
        cosine when that reaches ``threshold``, else ``None``."""

    def scope_state(self, namespace: Namespace) -> ScopeState:
        """The live memories inside the scope ``namespace``."""

    def keyed_rows(self, key: Key, fact_key: str) -> builtins.list[MemoryRecord]:
        """The live keyed facts of exactly ``key`` whose metadata ``key`` is ``fact_key``."""


#: New memories' ids: 128 random bits each from a generator seeded by the system
#: (again in a forked child), not an ``os.urandom`` call per write -- the call
#: releases the GIL, and on a busy machine getting it back can cost tenths of
#: a millisecond (measured for message ids, see :mod:`actormem.messages`).
_ids = random.Random(os.urandom(32))
os.register_at_fork(after_in_child=lambda: _ids.seed(os.urandom(32)))


def random_hex(n: int) -> str:
    """``n`` random ids of 32 hex digits, concatenated."""
    return f"{_ids.getrandbits(128 * n):0{32 * n}x}"


_KEY_TERM = re.compile(r"(?<![\w'])(?:\d[\w.,:/-]*|[A-Z][\w'-]*)")


def key_terms(text: str) -> frozenset[str]:
    """Numbers and capitalised words: what tells two similar sentences apart.

    "Ada ran 5 km on Monday" and "Ada ran 12 km on Tuesday" embed almost
    identically; merging them would lose a fact.  Similarity-based merges
    (near duplicates, consolidation, duplicate pruning) only join memories
    whose key terms are the same.
    """
    return frozenset(t.casefold().rstrip(".,:/-") for t in _KEY_TERM.findall(text))


def mergeable(a: str, b: str) -> bool:
    """Whether two similar texts may be merged without losing a name or a number."""
    return key_terms(a) == key_terms(b)


def jaccard(a: str, b: str) -> float:
    """Word-set Jaccard similarity (case-insensitive)."""
    sa, sb = set(a.casefold().split()), set(b.casefold().split())
    if not sa and not sb:
        return 1.0
    return len(sa & sb) / len(sa | sb)


class Planner:
    """Plans adds (exact and near-duplicate merging) against a :class:`PlanView`."""

    def __init__(
        self, view: PlanView, weights: RelevanceWeights, near_threshold: float | None
    ) -> None:
        self.view = view
        self._weights = weights
        self._near = near_threshold

    def new_record(
        self, ns: Namespace, item: NewMemory, chash: str, now: float, mid: str | None = None
    ) -> MemoryRecord:
        created = item.created_at if item.created_at is not None else now
        return MemoryRecord(
            id=mid or item.id or random_hex(1),
            namespace=ns,
            kind=item.kind,
            content=item.content,
            content_hash=chash,
            importance=float(item.importance),
            tags=tuple(dict.fromkeys(item.tags)) if item.tags else (),
            source_ids=tuple(dict.fromkeys(item.source_ids)) if item.source_ids else (),
            created_at=created,
            updated_at=now,
            last_accessed=max(created, now) if item.created_at is None else created,
            access_count=0,
            metadata=dict(item.metadata) if item.metadata else {},
        )

    def plan_adds(
        self,
        ns: Namespace,
        news: builtins.list[NewMemory],
        vectors: F32,
        hashes: builtins.list[str],
        now: float,
        dedup: bool,
        batch: Batch,
    ) -> builtins.list[WriteResult]:
        key = ns.key()
        results: builtins.list[WriteResult | None] = [None] * len(news)
        # exact duplicates: against the store, then earlier items of the batch
        fresh: builtins.list[int] = []
        seen: dict[tuple[str, str], int] = {}
        events: dict[tuple[str, str, tuple[str, ...]], str] = {}  # this batch's events
        random_ids = random_hex(len(news))  # 32 hex digits per item
        prefetch = getattr(self.view, "prefetch", None)
        if prefetch is not None:  # a server database: one query for the batch, not one per item
            prefetch(
                key,
                [
                    h
                    for item, h in zip(news, hashes, strict=True)
                    if dedup and merge_kind(item.kind)
                ],
                [item.id for item in news if item.id is not None],
                events=[
                    h
                    for item, h in zip(news, hashes, strict=True)
                    if dedup and item.source_ids and not merge_kind(item.kind)
                ],
            )
        for i, (item, chash) in enumerate(zip(news, hashes, strict=True)):
            if item.id is not None and self.view.id_taken(item.id):
                raise InvalidMemoryError(f"a memory with id {item.id!r} already exists")
            if not dedup:
                fresh.append(i)
                continue
            merging = merge_kind(item.kind)  # episodes and other events never merge
            if not merging and item.source_ids:  # the same event written again: once
                event = (item.kind, chash, item.source_ids)
                again = events.get(event)
                if again is None:
                    again = self.view.find_event(key, item.kind, chash, item.source_ids)
                if again is not None:
                    results[i] = WriteResult(id=again, op="NOOP")
                    continue
            if merging:
                existing = self.view.find_hash(key, chash)
                found = self.view.record(existing) if existing is not None else None
                if existing is not None and found is not None and found.kind == item.kind:
                    self.fold(batch, existing, item, now, 1.0, "exact duplicate")
                    results[i] = WriteResult(id=existing, op="MERGE", similarity=1.0)
                    continue
                if (item.kind, chash) in seen:
                    fresh_pos = seen[item.kind, chash]
                    target = batch.inserts[fresh_pos][0]
                    batch.inserts[fresh_pos] = (absorb(target, item), batch.inserts[fresh_pos][1])
                    results[i] = WriteResult(id=target.id, op="MERGE", similarity=1.0)
                    continue
            fresh.append(i)
            rec = self.new_record(ns, item, chash, now, item.id or random_ids[32 * i : 32 * i + 32])
            if merging:
                seen[item.kind, chash] = len(batch.inserts)
            elif item.source_ids:
                events[item.kind, chash, item.source_ids] = rec.id
            batch.inserts.append((rec, vectors[i]))
            results[i] = WriteResult(id=rec.id, op="ADD")
        if not dedup:
            ids = set()
            for i in fresh:
                rec = self.new_record(ns, news[i], hashes[i], now)
                if rec.id in ids:
                    raise InvalidMemoryError(f"id {rec.id!r} appears twice in the batch")
                ids.add(rec.id)
                batch.inserts.append((rec, vectors[i]))
                batch.log(rec.id, rec.namespace, "ADD", None, rec.content, "")
                results[i] = WriteResult(id=rec.id, op="ADD")
            return [r for r in results if r is not None]
        if self._near is not None and batch.inserts:
            planned = {i: r.id for i, r in enumerate(results) if r is not None and r.op == "ADD"}
            self._near_duplicates(key, batch, results, now)
            # An exact duplicate later in the batch points at an earlier insert; if
            # that insert was then merged away, point it at the survivor instead.
            redirect = {
                mid: r.id for i, mid in planned.items() if (r := results[i]) and r.id != mid
            }
            for i, r in enumerate(results):
                if r is not None and r.id in redirect:
                    survivor = r.id
                    while survivor in redirect:
                        survivor = redirect[survivor]
                    results[i] = msgspec.structs.replace(r, id=survivor)
        merges = batch.history
        batch.history = []
        for rec, _ in batch.inserts:
            batch.log(rec.id, rec.namespace, "ADD", None, rec.content, "")
        batch.history.extend(merges)
        return [r for r in results if r is not None]

    def fold(
        self, batch: Batch, existing: str, item: NewMemory, now: float, sim: float, why: str
    ) -> None:
        """Merge a new item into an existing live memory (no new row)."""
        change = batch.changes.get(existing)
        current = change.record if change else self.view.record(existing)
        assert current is not None
        merged = msgspec.structs.replace(absorb(current, item), updated_at=now)
        if change:
            change.record = merged
        else:
            batch.changes[existing] = Change(merged)
        batch.log(
            existing,
            merged.namespace,
            "MERGE",
            item.content,
            merged.content,
            f"{why} (cosine {sim:.3f})",
        )

    def _near_duplicates(
        self,
        key: Key,
        batch: Batch,
        results: builtins.list[WriteResult | None],
        now: float,
    ) -> None:
        assert self._near is not None
        threshold = self._near
        new_vecs = (
            batch.inserts[0][1][None, :]
            if len(batch.inserts) == 1
            else np.stack([v for _, v in batch.inserts])
        )
        kinds = [rec.kind for rec, _ in batch.inserts]
        merging = [j for j, k in enumerate(kinds) if merge_kind(k)]
        matches: builtins.list[tuple[float, MemoryRecord] | None] = [None] * len(kinds)
        if merging:  # only memories of a kind that merges look for a stored twin
            asked = new_vecs if len(merging) == len(kinds) else new_vecs[merging]
            found = self.view.nearest(key, asked, threshold)
            for j, match in zip(merging, found, strict=True):
                # a twin of another kind is no twin (a near duplicate whose closest
                # stored memory is of another kind is stored: a missed merge, never a loss)
                matches[j] = match if match is not None and match[1].kind == kinds[j] else None
        # within the batch: later items against earlier ones
        n = len(batch.inserts)
        kept_at: dict[int, int] = {}  # batch position of a kept item -> its survivors slot
        id_to_result = {r.id: i for i, r in enumerate(results) if r is not None and r.op == "ADD"}
        survivors: builtins.list[tuple[MemoryRecord, F32]] = []
        terms = [
            key_terms(rec.content) if merge_kind(rec.kind) else frozenset()
            for rec, _ in batch.inserts
        ]
        # An earlier item is a twin when it was kept, is of the same kind, has the
        # same key terms and a cosine at or above the threshold; the closest wins
        # (the first on a tie).  The cosines come a block of rows at a time and only
        # those above the threshold are looked at in Python: comparing every pair in
        # Python made add_many of 10,000 items in one namespace take minutes.
        is_kept = np.zeros(n, dtype=bool)
        kind_code = _codes(kinds)
        term_code = _codes(terms)
        step = max(1, _INNER_BLOCK // max(1, n))
        inner: F32 | None = None
        block_at = 0
        for j, (rec, vec) in enumerate(batch.inserts):
            if not merge_kind(rec.kind):  # an episode or another event: always its own row
                kept_at[j] = len(survivors)
                is_kept[j] = True
                survivors.append((rec, vec))
                continue
            res_pos = id_to_result[rec.id]
            k = -1
            if j > 0:  # a single insert, or the first item, has no earlier item
                if inner is None or j >= block_at + len(inner):
                    block_at = j
                    inner = _earlier_cosines(new_vecs, j, min(n, j + step))
                row = inner[j - block_at, :j]
                above = np.flatnonzero(row >= threshold)  # NaN is never above
                if above.size:
                    above = above[
                        is_kept[above]
                        & (kind_code[above] == kind_code[j])
                        & (term_code[above] == term_code[j])
                    ]
                if above.size:
                    k = int(above[int(np.argmax(row[above]))])
            if k >= 0:
                assert inner is not None
                sim_in = min(float(inner[j - block_at, k]), 1.0)
                target_pos = kept_at[k]
                target = survivors[target_pos][0]
                survivors[target_pos] = (
                    msgspec.structs.replace(
                        target,
                        importance=max(target.importance, rec.importance),
                        tags=union(target.tags, rec.tags),
                        source_ids=union(target.source_ids, rec.source_ids),
                    ),
                    survivors[target_pos][1],
                )
                batch.log(
                    target.id,
                    target.namespace,
                    "MERGE",
                    rec.content,
                    target.content,
                    f"near duplicate in batch (cosine {sim_in:.3f})",
                )
                results[res_pos] = WriteResult(id=target.id, op="MERGE", similarity=sim_in)
                continue
            match = matches[j]
            if match is not None and key_terms(match[1].content) == terms[j]:
                old = match[1]
                old_rel = float(
                    relevance(
                        old.importance,
                        old.access_count,
                        old.last_accessed,
                        old.created_at,
                        now,
                        self._weights,
                    )
                )
                new_rel = float(
                    relevance(
                        rec.importance, 0, rec.last_accessed, rec.created_at, now, self._weights
                    )
                )
                sim = min(match[0], 1.0)
                if old.id in batch.changes or old_rel >= new_rel:
                    self.fold(
                        batch,
                        old.id,
                        NewMemory(
                            content=rec.content,
                            kind=rec.kind,
                            importance=rec.importance,
                            tags=rec.tags,
                            source_ids=rec.source_ids,
                            metadata=rec.metadata,
                        ),
                        now,
                        sim,
                        "near duplicate",
                    )
                    results[res_pos] = WriteResult(id=old.id, op="MERGE", similarity=sim)
                    continue
                # the new memory is more relevant: it survives and absorbs the old one
                rec = msgspec.structs.replace(
                    rec,
                    importance=max(rec.importance, old.importance),
                    tags=union(rec.tags, old.tags),
                    source_ids=union(rec.source_ids, old.source_ids),
                    access_count=old.access_count,
                )
                loser = msgspec.structs.replace(old, superseded_by=rec.id, updated_at=now)
                batch.changes[old.id] = Change(loser)
                batch.removed.append(old.id)
                batch.log(
                    rec.id,
                    rec.namespace,
                    "MERGE",
                    old.content,
                    rec.content,
                    f"absorbed near duplicate {old.id} (cosine {sim:.3f})",
                )
                results[res_pos] = WriteResult(
                    id=rec.id, op="MERGE", merged_from=old.id, similarity=sim
                )
            kept_at[j] = len(survivors)
            is_kept[j] = True
            survivors.append((rec, vec))
        batch.inserts = survivors


#: Cosines of a batch against itself held at once (float32 values): a block of
#: rows, ~16 MB whatever the batch's size.
_INNER_BLOCK: Final = 1 << 22


def _earlier_cosines(vecs: F32, start: int, stop: int) -> F32:
    """Cosines of rows ``start:stop`` of a batch with its rows ``0:stop`` (the earlier ones).

    A small product (a batch of a few dozen, the recorder's) is computed in
    blocks OpenBLAS never splits over its threads (:func:`unsplit_matmul`).
    A larger one is one matrix product per block of rows: taken a row at a
    time, as :func:`unsplit_matmul` must for a product this wide, each row
    read the whole batch's matrix again (10,000 items: ~2 minutes of memory
    traffic instead of about a second of arithmetic).  A bulk write may use
    BLAS's threads.
    """
    rows, cols = vecs[start:stop], vecs[:stop].T
    if (stop - start) * stop * vecs.shape[1] <= SPLIT_FREE_WORK:
        return unsplit_matmul(rows, cols)
    out: F32 = rows @ cols
    return out


def _codes(values: Sequence[Hashable]) -> npt.NDArray[np.int64]:
    """An int per value, equal for equal values (to compare them in numpy)."""
    seen: dict[Hashable, int] = {}
    return np.fromiter((seen.setdefault(v, len(seen)) for v in values), np.int64, len(values))


def absorb(target: MemoryRecord, item: NewMemory) -> MemoryRecord:
    """``target`` with ``item``'s larger importance, tags, source ids and new metadata keys."""
    meta = dict(item.metadata)
    meta.update(target.metadata)
    return msgspec.structs.replace(
        target,
        importance=max(target.importance, float(item.importance)),
        tags=union(target.tags, item.tags),
        source_ids=union(target.source_ids, item.source_ids),
        metadata=meta,
    )


def nearest_in(
    rows_vectors: F32, queries: F32, threshold: float
) -> tuple[npt.NDArray[np.int64], F32]:
    """Per query, the position of its most similar row and the cosine (``-1`` if no rows).

    Computed in chunks of 256 queries (``rows_vectors`` may be large).
    """
    best_sim = np.full(len(queries), -1.0, dtype=np.float32)
    best_row = np.full(len(queries), -1, dtype=np.int64)
    if rows_vectors.size:
        for start in range(0, len(queries), 256):
            chunk = queries[start : start + 256]
            sims = rows_vectors @ chunk.T  # (rows, chunk)
            np.nan_to_num(sims, copy=False, nan=-1.0)  # NaN is never the nearest
            arg = sims.argmax(axis=0)
            best_sim[start : start + len(chunk)] = sims[arg, np.arange(len(chunk))]
            best_row[start : start + len(chunk)] = arg
    return best_row, best_sim


def remove_records(
    batch: Batch, records: Sequence[MemoryRecord], action: str, now: float, reason: str
) -> tuple[str, ...]:
    """Soft-delete ``records`` in ``batch`` (history rows name ``action`` and ``reason``).

    Keyed facts are never removed by maintenance (:mod:`actormem.store._kinds`):
    they are left out here even if a caller passed one.
    """
    records = [r for r in records if maintained(r.kind)]
    for rec in records:
        batch.changes[rec.id] = Change(msgspec.structs.replace(rec, deleted_at=now, updated_at=now))
        batch.removed.append(rec.id)
        batch.log(rec.id, rec.namespace, "DELETE", rec.content, None, f"{action}: {reason}")
    return tuple(r.id for r in records)


def similar_pairs(vecs: F32, threshold: float) -> builtins.list[tuple[int, int, float]]:
    """``(i, j, cosine)`` with i < j (positions in ``vecs``) at or above ``threshold``."""
    pairs: builtins.list[tuple[int, int, float]] = []
    for start in range(0, len(vecs), 1024):
        block = vecs[start : start + 1024] @ vecs.T
        ii, jj = np.nonzero(block >= threshold)
        for i, j in zip(ii.tolist(), jj.tolist(), strict=True):
            gi = start + i
            if gi < j:
                pairs.append((gi, j, float(block[i, j])))
    pairs.sort(key=lambda p: -p[2])
    return pairs


def plan_merges(
    action: str,
    recs: Sequence[MemoryRecord],
    rel: F64,
    pairs: Sequence[tuple[int, int, float]],
    accept: Callable[[MemoryRecord, MemoryRecord, float], bool],
    now: float,
    batch: Batch,
) -> builtins.list[tuple[str, str]]:
    """Merge similar pairs (best first) into ``batch``; ``(survivor, loser)`` ids.

    The more relevant of a pair survives and absorbs the other's access
    count, the larger importance and the union of tags and source ids; the
    other is marked ``superseded_by`` the survivor.
    """
    gone: set[int] = set()
    current: dict[int, MemoryRecord] = {}
    merged: builtins.list[tuple[str, str]] = []
    for i, j, sim in pairs:
        if i in gone or j in gone:
            continue
        a, b = current.get(i, recs[i]), current.get(j, recs[j])
        if a.namespace != b.namespace or not merges(a, b) or not accept(a, b, sim):
            continue
        if not mergeable(a.content, b.content):
            continue
        keep, lose = (i, j) if rel[i] >= rel[j] else (j, i)
        survivor, loser = current.get(keep, recs[keep]), current.get(lose, recs[lose])
        survivor = msgspec.structs.replace(
            survivor,
            importance=max(survivor.importance, loser.importance),
            tags=union(survivor.tags, loser.tags),
            source_ids=union(survivor.source_ids, loser.source_ids),
            updated_at=now,
        )
        current[keep] = survivor
        prev = batch.changes.get(survivor.id)
        absorbed = batch.changes.get(loser.id)
        delta = (
            (prev.access_delta if prev else 0)
            + loser.access_count
            + (absorbed.access_delta if absorbed else 0)
        )
        # Saturate at the declared maximum (the SQL does too): merged counts summed
        # past 2**63 made DuckDB refuse an acknowledged merge when applying it, and a
        # count past MAX_COUNT made the store's own export refuse to import again.
        delta = max(0, min(delta, MAX_COUNT - survivor.access_count))
        batch.changes[survivor.id] = Change(survivor, access_delta=delta)
        batch.changes[loser.id] = Change(
            msgspec.structs.replace(loser, superseded_by=survivor.id, updated_at=now)
        )
        batch.removed.append(loser.id)
        batch.log(
            survivor.id,
            survivor.namespace,
            "MERGE",
            loser.content,
            survivor.content,
            f"{action}: absorbed {loser.id} (cosine {sim:.3f})",
        )
        gone.add(lose)
        merged.append((survivor.id, loser.id))
    return merged

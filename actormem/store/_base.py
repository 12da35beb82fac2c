"""What every store backend does the same way: the public write, maintenance,
import/export and search entry points, their argument checks, embedding and
the buffer of access counters.

A backend subclasses :class:`StoreBase` and supplies the database side:

* :meth:`StoreBase._write` runs a planning function inside one write
  transaction (with whatever locking the backend needs) and commits the
  :class:`~actormem.store._records.Batch` it filled;
* :meth:`StoreBase._scored` finds and ranks the candidates of a search
  (with :func:`~actormem.store._ranking.rank_candidates`);
* :meth:`StoreBase._export_source` streams the rows of an export;
* :meth:`StoreBase._check_open` and :meth:`StoreBase.flush`.

The decisions themselves live in :mod:`actormem.store._planning`, the file
formats in :mod:`actormem.store._files`, the ranking in
:mod:`actormem.store._ranking`; the maintenance actions and export/import
are mixins beside this file (``_base_maintenance``, ``_base_files``, and
``_base_keyed`` for keyed facts' one-transaction saves).
"""

from __future__ import annotations

import builtins
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import msgspec
import numpy as np
import numpy.typing as npt
import pyarrow as pa
import structlog

from actormem._door import check_json_object
from actormem.models.base import Embedder
from actormem.models.embedders import WordLlamaEmbedder, unit_rows
from actormem.store._base_files import Transfer
from actormem.store._base_keyed import KeyedWrites
from actormem.store._base_maintenance import Maintenance, check_args
from actormem.store._checks import check_importance, check_str_tuple
from actormem.store._content_hash import content_hash
from actormem.store._index import tokenize
from actormem.store._kinds import check_keyed_scope
from actormem.store._limits import MAX_COUNT, STORE_SETTINGS
from actormem.store._planning import (
    Planner,
)
from actormem.store._ranking import Scored
from actormem.store._records import (
    Batch,
    Change,
    check_limit,
    check_memory_id,
    check_namespace,
    check_new_memory,
    check_text,
    clip_query,
    json_text,
    query_text,
)
from actormem.store._relevance import RelevanceWeights
from actormem.store._rerank import QueryRerank, Reranker
from actormem.store._types import (
    EmbeddingError,
    InvalidMemoryError,
    MemoryNotFoundError,
    MemoryRecord,
    Namespace,
    NewMemory,
    SearchConfig,
    SearchFilters,
    SearchHit,
    SearchMode,
    StoreClosedError,
    WriteResult,
)

__all__ = ["StoreBase"]

log = structlog.get_logger(__name__)

F32 = npt.NDArray[np.float32]
T = TypeVar("T")
Plan = Callable[[Planner, float, Batch], T]


class StoreBase(Maintenance, Transfer, KeyedWrites):
    """The backend-independent half of a :class:`~actormem.store.MemoryStore`."""

    _embedder: Embedder
    _dim: int
    _near: float | None
    _max_memories: int | None
    _config: SearchConfig
    _reranker: Reranker
    _weights: RelevanceWeights
    _clock: Callable[[], float]

    def _init_common(
        self,
        embedder: Embedder | None,
        near_duplicate_threshold: float | None,
        max_memories: int | None,
        search_config: SearchConfig | None,
        relevance_weights: RelevanceWeights | None,
        clock: Callable[[], float],
        check: Callable[[], None] = lambda: None,
    ) -> None:
        """Check and keep the settings every backend takes (``check`` runs in between)."""
        check_args(
            STORE_SETTINGS,
            near_duplicate_threshold=near_duplicate_threshold,
            max_memories=max_memories,
        )
        check()
        if embedder is None:
            from actormem.models.embedders import WordLlamaEmbedder

            embedder = WordLlamaEmbedder()
        if not isinstance(embedder, Embedder):
            raise InvalidMemoryError("embedder must implement the Embedder protocol")
        self._embedder = embedder
        self._dim = int(embedder.dim)
        self._near = near_duplicate_threshold
        self._max_memories = max_memories
        self._config = search_config or SearchConfig()
        self._reranker = Reranker(embedder)
        self._weights = relevance_weights or RelevanceWeights()
        self._clock = clock
        self._touch_lock = threading.Lock()
        self._pending: dict[str, tuple[int, float]] = {}
        self._stop = threading.Event()
        self._flusher: threading.Thread | None = None

    # -- backend hooks ----------------------------------------------------------------

    def _check_open(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def flush(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _write(self, what: str, plan: Plan[T], *, lock: Namespace | None = None) -> T:
        """Run ``plan(planner, now, batch)`` in one write transaction and commit the batch.

        ``lock`` names the concrete namespace the plan deduplicates against
        (backends shared by several processes serialise such writes).
        """
        raise NotImplementedError  # pragma: no cover - abstract

    def _scored(
        self,
        scope: Namespace,
        terms: builtins.list[str],
        qvec: F32 | None,
        limit: int,
        filters: SearchFilters | None,
        cfg: SearchConfig,
        mode: SearchMode,
        now: float,
        rerank: QueryRerank | None,
        touch: bool,
    ) -> builtins.list[tuple[Scored, MemoryRecord]]:
        raise NotImplementedError  # pragma: no cover - abstract

    def _export_source(
        self, namespace: Namespace
    ) -> tuple[int, Iterable[pa.RecordBatch], pa.Schema]:
        raise NotImplementedError  # pragma: no cover - abstract

    # -- properties ---------------------------------------------------------------------

    @property
    def embedder(self) -> Embedder:
        """The embedder in use."""
        return self._embedder

    @property
    def dim(self) -> int:
        """The vector size."""
        return self._dim

    # -- access counters ------------------------------------------------------------------

    def _start_flusher(self, interval: float | None, name: str) -> None:
        if interval is None:
            return
        self._flusher = threading.Thread(
            target=self._flush_loop, args=(interval,), name=name, daemon=True
        )
        self._flusher.start()

    def _stop_flusher(self) -> None:
        self._stop.set()
        if self._flusher is not None:
            self._flusher.join(timeout=5)

    def _flush_loop(self, interval: float) -> None:
        while not self._stop.wait(interval):
            if self._pending:
                try:
                    self.flush()
                except StoreClosedError:
                    return
                except Exception as exc:  # keep the thread alive; the next tick retries
                    log.warning("store.touch_flush_failed", store=repr(self), error=str(exc))

    def _take_pending(self) -> dict[str, tuple[int, float]]:
        with self._touch_lock:
            pending, self._pending = self._pending, {}
        return pending

    def _restore_pending(self, pending: dict[str, tuple[int, float]]) -> None:
        """Put counters whose write failed back for the next attempt."""
        with self._touch_lock:
            for mid, (n, ts) in pending.items():
                old_n, old_ts = self._pending.get(mid, (0, 0.0))
                self._pending[mid] = (old_n + n, max(old_ts, ts))

    def _drop_pending(self, ids: Iterable[str]) -> None:
        with self._touch_lock:
            for mid in ids:
                self._pending.pop(mid, None)

    def _with_pending(self, rec: MemoryRecord) -> MemoryRecord:
        """``rec`` with the retrievals not yet written added to its access figures."""
        pending = self._pending.get(rec.id)
        if pending is None:
            return rec
        return msgspec.structs.replace(
            rec,
            access_count=min(rec.access_count + pending[0], MAX_COUNT),
            last_accessed=max(rec.last_accessed, pending[1]),
        )

    # -- embedding ---------------------------------------------------------------------

    def _embed(self, texts: Sequence[str]) -> F32:
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        try:
            raw = self._embedder.embed(list(texts))
        except Exception as exc:
            raise EmbeddingError(
                f"embedder {self._embedder.name!r} failed on {len(texts)} texts: {exc}"
            ) from exc
        if not isinstance(raw, np.ndarray):
            raise EmbeddingError(
                f"embedder {self._embedder.name!r} returned {type(raw).__name__}, "
                "expected a numpy array"
            )
        if raw.shape != (len(texts), self._dim):
            raise EmbeddingError(
                f"embedder {self._embedder.name!r} returned shape {raw.shape}, expected "
                f"({len(texts)}, {self._dim})"
            )
        if raw.dtype != np.float32 and not np.issubdtype(raw.dtype, np.number):
            raise EmbeddingError(f"embedder {self._embedder.name!r} returned dtype {raw.dtype}")
        if type(self._embedder) is WordLlamaEmbedder:
            # The bundled model's rows are a new float32 array it checked and
            # normalised itself (checked_unit_rows): not copied or scaled again.
            return raw
        vecs = np.array(raw, dtype=np.float32, order="C")
        bad = unit_rows(vecs)  # a copy of the embedder's rows: scaled in place
        if bad is not None:
            raise EmbeddingError(
                f"embedder {self._embedder.name!r} returned NaN or infinite values for text "
                f"{bad}; nothing was stored"
            )
        return vecs

    # -- writes ------------------------------------------------------------------------

    def add(
        self,
        namespace: Namespace,
        content: str | NewMemory,
        *,
        kind: str = "fact",
        importance: float = 0.5,
        tags: Sequence[str] = (),
        source_ids: Sequence[str] = (),
        metadata: dict[str, Any] | None = None,
        created_at: float | None = None,
    ) -> WriteResult:
        """Add one memory (or merge it into a duplicate).

        Args:
            namespace: Where it belongs (at least one field set).
            content: The text, or a complete :class:`NewMemory` (then the
                keyword arguments are ignored).
            kind: fact, episode, summary, offload, ...
            importance: In ``[0, 1]``.
            tags: Labels.
            source_ids: Source message ids.
            metadata: Extra JSON fields.
            created_at: When it happened (default: now).

        Returns:
            ``ADD`` with the new id, ``MERGE`` with the survivor's id, or
            ``NOOP`` with the existing id when the same event (a kind that
            never merges, with the same content and source ids) is stored
            already.

        Raises:
            NamespaceError: Bad namespace.
            InvalidMemoryError: Bad content or attributes.
            EmbeddingError: The embedder failed; nothing was stored.
        """
        if isinstance(content, NewMemory):
            item = content
        else:
            if not isinstance(content, str):
                raise InvalidMemoryError(f"content must be a str, got {type(content).__name__}")
            if metadata is not None and not isinstance(metadata, Mapping):
                # dict() of a list raised a raw TypeError, or stored a list of pairs as an object.
                raise InvalidMemoryError(f"metadata must be a dict, got {type(metadata).__name__}")
            item = NewMemory(
                content=content,
                kind=kind,
                importance=importance,
                tags=tuple(check_str_tuple("tags", tags)),
                source_ids=tuple(check_str_tuple("source_ids", source_ids)),
                metadata=dict(metadata or {}),
                created_at=created_at,
            )
        return self.add_many(namespace, [item])[0]

    def add_many(
        self, namespace: Namespace, items: Sequence[NewMemory | str], *, dedup: bool = True
    ) -> builtins.list[WriteResult]:
        """Add a batch in one transaction with one embedding call.

        Exact duplicates (same namespace and content hash, in the store or
        earlier in the batch) are merged into the existing memory.  With
        ``near_duplicate_threshold`` set, a memory whose cosine to a live one
        of the same namespace reaches it is merged per seed 000: the more
        relevant of the two survives and absorbs the other's access count,
        the larger importance and the union of tags and source ids; the other
        is marked ``superseded_by`` the survivor.  An item of a kind that never
        merges with source ids equal to a live memory's of the same kind and
        content is that memory written again: ``NOOP``, nothing written.

        Args:
            namespace: Where they belong.
            items: Texts or :class:`NewMemory` values.
            dedup: ``False`` inserts every item as a new memory.

        Returns:
            One :class:`WriteResult` per item, in order.

        Raises:
            NamespaceError, InvalidMemoryError, EmbeddingError: Nothing stored.
        """
        self._check_open()
        ns = check_namespace(namespace)
        if isinstance(items, str | bytes) or not isinstance(items, Sequence):
            raise InvalidMemoryError("items must be a sequence of str or NewMemory")
        news: builtins.list[NewMemory] = []
        for i, raw in enumerate(items):
            if isinstance(raw, str):
                news.append(NewMemory(content=raw))
            elif isinstance(raw, NewMemory):
                news.append(raw)
            else:
                raise InvalidMemoryError(
                    f"item {i} is {type(raw).__name__}, expected str or NewMemory"
                )
        explicit: set[str] = set()
        for i, item in enumerate(news):
            item = news[i] = check_new_memory(item)
            if item.id is not None:
                if item.id in explicit:
                    raise InvalidMemoryError(f"id {item.id!r} appears twice in the batch")
                explicit.add(item.id)
        if not news:
            return []
        vectors = self._embed([m.content for m in news])
        hashes = [content_hash(m.content) for m in news]

        def plan(planner: Planner, now: float, batch: Batch) -> builtins.list[WriteResult]:
            return planner.plan_adds(ns, news, vectors, hashes, now, dedup, batch)

        results = self._write("write", plan, lock=ns)
        if self._max_memories is not None:
            self.enforce_cap(ns, self._max_memories)
        return results

    def update(
        self,
        namespace: Namespace,
        memory_id: str,
        *,
        content: str | None = None,
        kind: str | None = None,
        importance: float | None = None,
        tags: Sequence[str] | None = None,
        metadata: dict[str, Any] | None = None,
        reason: str = "",
    ) -> WriteResult:
        """Change a live memory (recorded in history with old and new content).

        Args:
            namespace: A scope that contains the memory.
            memory_id: Its id.
            content: New text (re-embedded).
            kind: New kind.
            importance: New importance.
            tags: New tags (replace the old ones).
            metadata: New metadata (replaces the old one).
            reason: Free text for the audit trail.

        Returns:
            ``UPDATE`` (or ``NOOP`` when nothing changed).

        Raises:
            MemoryNotFoundError: No live memory with that id in the scope.
        """
        self._check_open()
        memory_id = check_memory_id(memory_id)
        reason = check_text(reason, "reason")
        if content is not None:
            content = check_new_memory(NewMemory(content=content)).content
        if kind is not None and (not isinstance(kind, str) or not 0 < len(kind) <= 64):
            raise InvalidMemoryError(f"kind must be a non-empty str of <= 64 chars: {kind!r}")
        if kind is not None:
            kind = check_text(kind, "kind", max_chars=64)
        if importance is not None:
            importance = check_importance(importance)
        new_tags = None if tags is None else check_str_tuple("tags", tags)
        if metadata is not None and not isinstance(metadata, dict):
            raise InvalidMemoryError("metadata must be a dict")
        vector = self._embed([content])[0] if content is not None else None

        def plan(planner: Planner, now: float, batch: Batch) -> WriteResult:
            current = self._live_record(planner, namespace, memory_id)
            check_keyed_scope(current, namespace, "update")
            changes: dict[str, Any] = {}
            if content is not None and content != current.content:
                changes["content"] = content
                changes["content_hash"] = content_hash(content)
            if kind is not None and kind != current.kind:
                changes["kind"] = kind
            if importance is not None and importance != current.importance:
                changes["importance"] = importance
            if new_tags is not None and tuple(dict.fromkeys(new_tags)) != current.tags:
                changes["tags"] = tuple(dict.fromkeys(new_tags))
            if metadata is not None and metadata != current.metadata:
                check_json_object(metadata, "metadata", error=InvalidMemoryError)
                json_text(metadata)
                changes["metadata"] = dict(metadata)
            if not changes:
                return WriteResult(id=memory_id, op="NOOP")
            record = msgspec.structs.replace(current, updated_at=now, **changes)
            batch.changes[memory_id] = Change(
                record, content_vector=vector if "content" in changes else None
            )
            batch.log(
                memory_id, record.namespace, "UPDATE", current.content, record.content, reason
            )
            return WriteResult(id=memory_id, op="UPDATE")

        return self._write("write", plan)

    def _live_record(self, planner: Planner, namespace: Namespace, memory_id: str) -> MemoryRecord:
        if not isinstance(memory_id, str):
            raise InvalidMemoryError(f"memory_id must be a str, got {type(memory_id).__name__}")
        scope = check_namespace(namespace)
        rec = planner.view.record(memory_id)
        if rec is None or not scope.contains(rec.namespace):
            raise MemoryNotFoundError(f"no live memory {memory_id!r} in namespace {scope}")
        return rec

    def delete(self, namespace: Namespace, memory_id: str, *, reason: str = "") -> WriteResult:
        """Soft-delete a memory (``deleted_at`` set, history row written).

        Raises:
            MemoryNotFoundError: No live memory with that id in the scope.
        """
        self._check_open()
        memory_id = check_memory_id(memory_id)
        reason = check_text(reason, "reason")

        def plan(planner: Planner, now: float, batch: Batch) -> WriteResult:
            current = self._live_record(planner, namespace, memory_id)
            check_keyed_scope(current, namespace, "delete")
            batch.changes[memory_id] = Change(
                msgspec.structs.replace(current, deleted_at=now, updated_at=now)
            )
            batch.removed.append(memory_id)
            batch.log(memory_id, current.namespace, "DELETE", current.content, None, reason)
            return WriteResult(id=memory_id, op="DELETE")

        return self._write("write", plan)

    # -- search ---------------------------------------------------------------------------

    def search(
        self,
        query: str,
        namespace: Namespace,
        limit: int = 10,
        filters: SearchFilters | None = None,
        *,
        mode: SearchMode = "hybrid",
        config: SearchConfig | None = None,
        touch: bool = True,
    ) -> builtins.list[SearchHit]:
        """Hybrid keyword + vector search inside a namespace scope.

        Candidates are the top ``config.candidates`` of each retriever; they
        are fused (see :class:`SearchConfig`) and blended with relevance, and
        in hybrid mode the best ``config.rerank_depth`` are re-scored by the
        second stage (soft term, speaker and time match).

        Args:
            query: The text to look for (a longer one than ``MAX_QUERY_CHARS``
                is read as its first and last halves of that size).
            namespace: The scope; nothing outside it is ever returned.
            limit: Number of hits (1..100,000).
            filters: Extra conditions.
            mode: ``hybrid``, ``keyword`` (BM25 only) or ``vector`` (cosine only).
            config: Fusion settings for this call (default: the store's).
            touch: Count this retrieval in the hits' access statistics.

        Returns:
            Hits, best first.
        """
        self._check_open()
        if not isinstance(query, str):
            raise InvalidMemoryError(f"query must be a str, got {type(query).__name__}")
        check_limit(limit)
        scope = check_namespace(namespace)
        if filters is not None and not isinstance(filters, SearchFilters):
            raise InvalidMemoryError("filters must be a SearchFilters")
        if config is not None and not isinstance(config, SearchConfig):
            raise InvalidMemoryError(
                f"config must be a SearchConfig or None, got {type(config).__name__}"
            )
        if not isinstance(touch, bool):
            raise InvalidMemoryError(f"touch must be a bool, got {type(touch).__name__}")
        if mode not in ("hybrid", "keyword", "vector"):
            raise InvalidMemoryError(f"unknown search mode {mode!r}")
        cfg = config or self._config
        query = clip_query(query)  # bounded work whatever the query's size
        terms = tokenize(query)
        rerank = self._reranker.prepare(query, cfg) if mode == "hybrid" else None
        qvec = self._embed([query_text(query)])[0] if mode != "keyword" and query.strip() else None
        now = self._clock()
        scored = self._scored(scope, terms, qvec, limit, filters, cfg, mode, now, rerank, touch)
        if touch and scored:
            with self._touch_lock:
                for _, rec in scored:
                    n, _ = self._pending.get(rec.id, (0, 0.0))
                    self._pending[rec.id] = (n + 1, now)
        return [
            SearchHit(
                memory=rec,
                score=s.score,
                bm25=s.bm25,
                cosine=s.cosine,
                fused=s.fused,
                relevance=s.relevance,
                soft_match=s.soft_match,
                speaker_match=s.speaker_match,
                time_match=s.time_match,
            )
            for s, rec in scored
        ]

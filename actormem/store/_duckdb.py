"""DuckDBStore: the embedded long-term memory store.

Storage
    One DuckDB file is the store of record (``memories``, ``history``,
    ``schema_version``, ``store_meta``; see :mod:`actormem.store._schema`).
    Rows are written in Arrow batches (``INSERT ... SELECT`` from a registered
    Arrow table) -- never ``executemany`` -- and every write is one
    transaction: when a write method returns, it is committed.

Search
    A :class:`~actormem.store._index.MemoryIndex` in RAM holds the live
    memories' vectors and BM25 postings.  It is rebuilt from the file on open
    and updated right after each commit, before the write returns, so the very
    next search sees the write.  Searches never touch DuckDB: the query
    vector is never bound as a SQL parameter.  A scope of 200k memories or
    more (``approx_search_min_rows``) is ranked by 32-d projected vectors
    first and its best 1,000 re-scored exactly; smaller scopes are exact.

Concurrency
    One process owns the file; a second one gets :class:`StoreLockedError`
    naming the file.  Inside the process, writes are serialised by a single
    writer lock and run on one writer cursor; reads that go to DuckDB
    (``get``, ``list``, analytics, export) use one cursor per thread, so many
    threads may read while one writes (DuckDB's MVCC shows them committed
    data).  Searches read the index under its own short lock.

Access statistics
    A search counts its hits (``access_count``/``last_accessed``) in the index
    at once and in a pending buffer for the file; the buffer is written in one
    batched UPDATE at the start of the next write, on :meth:`flush`, on
    :meth:`close` and every ``touch_flush_interval`` seconds by a background
    thread.  A crash can lose at most those unflushed counters.

All SQL is parameterised; column names in generated SQL come from fixed
tuples, never from callers.
"""

from __future__ import annotations

import builtins
import hashlib
import json
import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

import duckdb
import msgspec
import numpy as np
import numpy.typing as npt
import pyarrow as pa
import structlog

from actormem.models.base import Embedder
from actormem.store._index import (
    APPROX_MIN_ROWS,
    STOPWORDS,
    MemoryIndex,
    Prepared,
    prepare,
    tokenize,
)
from actormem.store._protocol import ProgressCallback
from actormem.store._relevance import DAY_SECONDS, RelevanceWeights, decayed_relevance, relevance
from actormem.store._rerank import Reranker
from actormem.store._schema import ensure_schema, read_meta, write_meta
from actormem.store._types import (
    EmbedderMismatchError,
    EmbeddingError,
    ExportReport,
    ForgetReport,
    HistoryRecord,
    ImportReport,
    InvalidMemoryError,
    LogCompaction,
    LogRecord,
    MaintenanceReport,
    MemoryNotFoundError,
    MemoryRecord,
    Namespace,
    NamespaceError,
    NamespaceStats,
    NewMemory,
    ReembedReport,
    SearchConfig,
    SearchFilters,
    SearchHit,
    SearchMode,
    StoreClosedError,
    StoreError,
    StoreLockedError,
    WriteResult,
    check_importance,
    check_str_tuple,
)

__all__ = ["DuckDBStore", "content_hash", "rich_progress"]

log = structlog.get_logger(__name__)

F32 = npt.NDArray[np.float32]
_NS_COLS: Final = ("user_id", "agent_id", "run_id", "session_id")
_SELECT: Final = (
    "id, user_id, agent_id, run_id, session_id, kind, content, content_hash, importance, "
    "tags, source_ids, epoch_us(created_at), epoch_us(updated_at), epoch_us(last_accessed), "
    "access_count, superseded_by, epoch_us(deleted_at), CAST(metadata AS VARCHAR)"
)
_LIVE: Final = "deleted_at IS NULL AND superseded_by IS NULL"
_WORD_RE: Final = re.compile(r"\w+")
_MAX_LIMIT: Final = 100_000


def content_hash(text: str) -> str:
    """sha256 of the content with case and runs of whitespace normalised."""
    norm = " ".join(text.split()).casefold()
    return hashlib.sha256(norm.encode("utf-8")).hexdigest()


def _us(ts: float) -> int:
    return round(ts * 1_000_000)


def _sec(us: int | None) -> float | None:
    return None if us is None else us / 1_000_000


def _one(cur: Any, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
    """The first row of a query, reading the result to its end.

    ``fetchone()`` leaves an auto-commit query's result open, and with it the
    query's transaction, until the cursor runs its next statement.  A thread
    that reads once and then goes quiet would keep that transaction open for
    good: DuckDB then cannot checkpoint (the WAL grows past
    ``checkpoint_threshold``) and keeps every later commit's undo data in
    memory.  ``fetchall()`` completes the query and ends its transaction.
    """
    rows = cur.execute(sql, params).fetchall()
    return tuple(rows[0]) if rows else None


def _ts_array(values: Sequence[float | None]) -> pa.Array:
    if None not in values:  # one numpy pass: round(ts * 1e6) like _us
        micros = np.rint(np.asarray(values, dtype=np.float64) * 1_000_000).astype(np.int64)
        return pa.array(micros, type=pa.int64()).cast(pa.timestamp("us"))
    return pa.array([None if v is None else _us(v) for v in values], type=pa.timestamp("us"))


def _str_lists(values: Sequence[Sequence[str]]) -> pa.Array:
    """A ``list<string>`` Arrow array (all-empty batches built without a Python loop)."""
    if not any(values):
        offsets = pa.array(np.zeros(len(values) + 1, dtype=np.int32))
        return pa.ListArray.from_arrays(offsets, pa.array([], type=pa.string()))
    return pa.array([list(v) for v in values], type=pa.list_(pa.string()))


def _json(value: dict[str, Any]) -> str:
    try:
        return msgspec.json.encode(value).decode()
    except (TypeError, msgspec.EncodeError) as exc:
        raise InvalidMemoryError(f"metadata is not JSON-serialisable: {exc}") from exc


def _row_to_record(row: Sequence[Any]) -> MemoryRecord:
    meta = row[17]
    return MemoryRecord(
        id=row[0],
        namespace=Namespace.from_key((row[1], row[2], row[3], row[4])),
        kind=row[5],
        content=row[6],
        content_hash=row[7],
        importance=float(row[8]),
        tags=tuple(row[9] or ()),
        source_ids=tuple(row[10] or ()),
        created_at=row[11] / 1_000_000,
        updated_at=row[12] / 1_000_000,
        last_accessed=row[13] / 1_000_000,
        access_count=int(row[14]),
        superseded_by=row[15],
        deleted_at=_sec(row[16]),
        metadata=json.loads(meta) if meta else {},
    )


def _scope_sql(namespace: Namespace, prefix: str = "") -> tuple[str, list[Any]]:
    """``(where_clause, params)`` selecting rows inside the scope ``namespace``."""
    if not isinstance(namespace, Namespace):
        raise NamespaceError(f"namespace must be a Namespace, got {type(namespace).__name__}")
    parts = []
    params: list[Any] = []
    for name, value in namespace.items():
        parts.append(f"{prefix}{name} = ?")
        params.append(value)
    return " AND ".join(parts), params


def _exact_sql(namespace: Namespace) -> tuple[str, list[Any]]:
    """``(where_clause, params)`` selecting rows of exactly ``namespace`` (journal tables)."""
    if not isinstance(namespace, Namespace):
        raise NamespaceError(f"namespace must be a Namespace, got {type(namespace).__name__}")
    return " AND ".join(f"{c} = ?" for c in _NS_COLS), list(namespace.key())


_LOG_SELECT: Final = (
    "id, user_id, agent_id, run_id, session_id, seq, epoch_us(ts), entry_type, content, "
    "CAST(metadata AS VARCHAR), compaction_id"
)
_COMPACTION_SELECT: Final = (
    "id, user_id, agent_id, run_id, session_id, epoch_us(ts), entries, first_seq, last_seq, "
    "summary_id, summary, summarizer, bytes_before, bytes_after"
)


def _row_to_log(row: Sequence[Any]) -> LogRecord:
    return LogRecord(
        id=row[0],
        namespace=Namespace.from_key((row[1], row[2], row[3], row[4])),
        seq=int(row[5]),
        ts=row[6] / 1_000_000,
        entry_type=row[7],
        content=row[8],
        metadata=json.loads(row[9]) if row[9] else {},
        compaction_id=row[10],
    )


def _row_to_compaction(row: Sequence[Any]) -> LogCompaction:
    return LogCompaction(
        id=row[0],
        namespace=Namespace.from_key((row[1], row[2], row[3], row[4])),
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


def _union(a: Sequence[str], b: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys([*a, *b]))


@dataclass
class _Change:
    """State change of an existing row (no content change)."""

    record: MemoryRecord
    access_delta: int = 0
    content_vector: F32 | None = None


@dataclass
class _Tables:
    """A batch's Arrow tables, built before its transaction."""

    insert: tuple[pa.Table, str, str] | None
    history: pa.Table | None


@dataclass
class _Batch:
    """Everything one write transaction does."""

    inserts: list[tuple[MemoryRecord, F32]] = field(default_factory=list)
    changes: dict[str, _Change] = field(default_factory=dict)
    removed: list[str] = field(default_factory=list)
    history: list[tuple[str, Namespace, str, str | None, str | None, str]] = field(
        default_factory=list
    )

    def log(
        self, memory_id: str, ns: Namespace, op: str, old: str | None, new: str | None, reason: str
    ) -> None:
        self.history.append((memory_id, ns, op, old, new, reason))


class DuckDBStore:
    """Long-term memory in one DuckDB file with an in-memory hybrid index.

    Example:
        >>> store = DuckDBStore("memories.duckdb")            # doctest: +SKIP
        >>> ns = Namespace(user_id="u1")                       # doctest: +SKIP
        >>> store.add(ns, "Alice prefers green tea")           # doctest: +SKIP
        >>> store.search("what does Alice drink?", ns)         # doctest: +SKIP
    """

    def __init__(
        self,
        path: str | os.PathLike[str] = "actormem.duckdb",
        *,
        embedder: Embedder | None = None,
        near_duplicate_threshold: float | None = 0.95,
        max_memories: int | None = None,
        search_config: SearchConfig | None = None,
        relevance_weights: RelevanceWeights | None = None,
        on_embedder_mismatch: Literal["error", "reembed"] = "error",
        touch_flush_interval: float | None = 5.0,
        clock: Callable[[], float] = time.time,
        progress: ProgressCallback | None = None,
        checkpoint_mb: int = 256,
        approx_search_min_rows: int | None = APPROX_MIN_ROWS,
    ) -> None:
        """Open (or create) the store.

        Args:
            path: The database file (created with its folder if missing), or
                ``":memory:"``.
            embedder: Vectors for memories and queries; default: the bundled
                WordLlama model.
            near_duplicate_threshold: Cosine at or above which a new memory is
                merged into an existing one of the same namespace; ``None``
                turns near-duplicate detection off (exact duplicates are
                always merged when ``dedup=True``).
            max_memories: Cap per concrete namespace; after each write the
                least relevant memories beyond it are evicted.
            search_config: Default fusion settings of :meth:`search`.
            relevance_weights: Seed 000's relevance weights.
            on_embedder_mismatch: ``"error"`` raises
                :class:`EmbedderMismatchError` when the file was built with
                another embedder; ``"reembed"`` rebuilds the vectors on open.
            touch_flush_interval: Seconds between background flushes of access
                counters; ``None`` flushes only on writes, flush and close.
            clock: Time source (Unix seconds); tests inject a fake clock.
            progress: Called as ``progress(done, total)`` while rebuilding the
                index or re-embedding on open.
            checkpoint_mb: WAL size (MB) at which DuckDB checkpoints.  Larger
                means faster batched writes and a longer WAL replay after a
                crash; commits are durable either way.
            approx_search_min_rows: Scope size from which vector search ranks
                by projected vectors first and re-scores the best exactly
                (see :class:`~actormem.store._index.MemoryIndex`; recall@10
                against exact search about 0.98 at 1M); ``None`` keeps every
                search exact.

        Raises:
            StoreLockedError: Another process has the file open.
            SchemaVersionError: The file is from a newer actormem.
            EmbedderMismatchError: See ``on_embedder_mismatch``.
            StoreError: The file cannot be opened.
        """
        if embedder is None:
            from actormem.models.embedders import WordLlamaEmbedder

            embedder = WordLlamaEmbedder()
        if not isinstance(embedder, Embedder):
            raise InvalidMemoryError("embedder must implement the Embedder protocol")
        if near_duplicate_threshold is not None and not 0 < near_duplicate_threshold <= 1:
            raise InvalidMemoryError("near_duplicate_threshold must be in (0, 1] or None")
        if not isinstance(checkpoint_mb, int) or not 1 <= checkpoint_mb <= 65_536:
            raise InvalidMemoryError("checkpoint_mb must be an int in 1..65536")
        if max_memories is not None and max_memories < 1:
            raise InvalidMemoryError("max_memories must be >= 1 or None")
        if approx_search_min_rows is not None and approx_search_min_rows < 1:
            raise InvalidMemoryError("approx_search_min_rows must be >= 1 or None")
        self._approx_min = approx_search_min_rows
        self._embedder = embedder
        self._dim = int(embedder.dim)
        self._near = near_duplicate_threshold
        self._max_memories = max_memories
        self._config = search_config or SearchConfig()
        self._reranker = Reranker(embedder)
        self._weights = relevance_weights or RelevanceWeights()
        self._clock = clock
        self._closed = False
        self._write_lock = threading.RLock()
        self._touch_lock = threading.Lock()
        self._pending: dict[str, tuple[int, float]] = {}
        self._local = threading.local()
        self._cursors: builtins.list[tuple[threading.Thread, Any]] = []
        self._cursors_lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

        self.path = str(path)
        if self.path != ":memory:":
            file = Path(self.path)
            if file.is_dir():
                raise StoreError(f"{self.path} is a directory, expected a database file")
            file.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._con = duckdb.connect(self.path)
        except duckdb.IOException as exc:
            if "lock" in str(exc).lower():
                raise StoreLockedError(
                    f"{self.path} is locked by another process (DuckDB allows one writer "
                    f"process per file): {exc}"
                ) from exc
            raise StoreError(f"cannot open {self.path}: {exc}") from exc
        except duckdb.Error as exc:
            raise StoreError(f"cannot open {self.path}: {exc}") from exc
        try:
            self._wcur = self._con.cursor()
            # A commit appends to the WAL (and syncs it); DuckDB folds the WAL into
            # the file at this size and on close.  The default (16MB) checkpoints
            # every few batches and cut batched ingest by a factor of two.
            self._wcur.execute(f"SET checkpoint_threshold = '{checkpoint_mb}MB'")
            ensure_schema(self._wcur, self._dim, self.path)
            #: The report of the re-embedding done on open (on_embedder_mismatch="reembed").
            self.last_reembed: ReembedReport | None = None
            self._check_embedder(on_embedder_mismatch, progress)
            self._index = MemoryIndex(self._dim, approx_min_rows=self._approx_min)
            self._rebuild_index(progress)
            self._keep_private()
        except BaseException:
            self._con.close()
            raise
        self._stop = threading.Event()
        self._flusher: threading.Thread | None = None
        if touch_flush_interval is not None:
            self._flusher = threading.Thread(
                target=self._flush_loop,
                args=(touch_flush_interval,),
                name=f"actormem-store-flush:{Path(self.path).name}",
                daemon=True,
            )
            self._flusher.start()
        log.info("store.opened", path=self.path, memories=len(self._index), dim=self._dim)

    # -- lifecycle -------------------------------------------------------------------

    @property
    def embedder(self) -> Embedder:
        """The embedder in use."""
        return self._embedder

    @property
    def dim(self) -> int:
        """The vector size."""
        return self._dim

    def __enter__(self) -> DuckDBStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{len(self._index)} live memories"
        return f"DuckDBStore({self.path!r}, {state})"

    def _keep_private(self) -> None:
        """Make the database file and its WAL readable by their owner only.

        DuckDB creates both with the process umask (usually 0644) and deletes
        and re-creates the WAL at every checkpoint, so this runs after each
        commit (one ``stat`` when nothing needs changing).
        """
        if self.path == ":memory:":
            return
        for p in (self.path, self.path + ".wal"):
            try:
                if os.stat(p).st_mode & 0o077:
                    os.chmod(p, 0o600)
            except FileNotFoundError:
                pass
            except OSError as exc:  # pragma: no cover - e.g. a file owned by another user
                log.warning("store.chmod_failed", path=p, error=str(exc))

    def _commit_txn(self, cur: Any) -> None:
        cur.execute("COMMIT")
        self._keep_private()

    def close(self) -> None:
        """Flush access counters, stop the flusher and close the file (idempotent)."""
        if self._closed:
            return
        self._stop.set()
        if self._flusher is not None:
            self._flusher.join(timeout=5)
        with self._write_lock:
            try:
                self._flush_touches(self._wcur, own_txn=True)
            except duckdb.Error as exc:  # pragma: no cover - disk failure on close
                log.warning("store.flush_failed_on_close", path=self.path, error=str(exc))
            self._closed = True
            with self._cursors_lock:
                for _, cur in self._cursors:
                    with suppress(duckdb.Error):
                        cur.close()
                self._cursors.clear()
            if self._pool is not None:
                self._pool.shutdown(wait=True)
            with suppress(duckdb.Error):
                self._wcur.close()
            self._con.close()
        self._keep_private()
        log.info("store.closed", path=self.path)

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError(f"store {self.path} is closed")

    def _reader(self) -> Any:
        """This thread's read cursor."""
        self._check_open()
        cur = getattr(self._local, "cursor", None)
        if cur is None:
            cur = self._con.cursor()
            self._local.cursor = cur
            me = threading.current_thread()
            with self._cursors_lock:
                # Close the cursors of threads that have ended (a thread-per-request
                # server would otherwise keep one cursor per request forever).
                live = []
                for thread, old in self._cursors:
                    if thread.is_alive():
                        live.append((thread, old))
                    else:
                        with suppress(duckdb.Error):
                            old.close()
                self._cursors = [*live, (me, cur)]
        return cur

    def _flush_loop(self, interval: float) -> None:
        while not self._stop.wait(interval):
            if self._pending:
                try:
                    self.flush()
                except StoreClosedError:
                    return
                except Exception as exc:  # keep the thread alive; the next tick retries
                    log.warning("store.touch_flush_failed", path=self.path, error=str(exc))

    def flush(self) -> None:
        """Write pending access counters to the file now."""
        with self._write_lock:
            self._check_open()
            self._flush_touches(self._wcur, own_txn=True)

    def _flush_touches(self, cur: Any, *, own_txn: bool) -> int:
        with self._touch_lock:
            pending, self._pending = self._pending, {}
        if not pending:
            return 0
        ids = list(pending)
        tbl = pa.table(
            {
                "id": pa.array(ids, type=pa.string()),
                "n": pa.array([pending[i][0] for i in ids], type=pa.int64()),
                "ts": _ts_array([pending[i][1] for i in ids]),
            }
        )
        sql = (
            "UPDATE memories SET access_count = memories.access_count + t.n, "
            "last_accessed = greatest(memories.last_accessed, t.ts) "
            "FROM _touch t WHERE memories.id = t.id"
        )
        try:
            if own_txn:
                cur.execute("BEGIN TRANSACTION")
            cur.register("_touch", tbl)
            try:
                cur.execute(sql)
            finally:
                cur.unregister("_touch")
            if own_txn:
                self._commit_txn(cur)
        except BaseException:
            if own_txn:
                with suppress(duckdb.Error):
                    cur.execute("ROLLBACK")
            with self._touch_lock:  # put them back for the next attempt
                for mid, (n, ts) in pending.items():
                    old_n, old_ts = self._pending.get(mid, (0, 0.0))
                    self._pending[mid] = (old_n + n, max(old_ts, ts))
            raise
        return len(ids)

    # -- open-time checks ---------------------------------------------------------------

    def _check_embedder(
        self, on_mismatch: Literal["error", "reembed"], progress: ProgressCallback | None
    ) -> None:
        meta = read_meta(self._wcur)
        name = meta.get("embedder_name")
        dim = int(meta.get("embedder_dim", "0") or 0)
        column_dim = self._column_dim()
        if name is None:
            if column_dim not in (None, self._dim) and self._count_all() > 0:
                raise EmbedderMismatchError(
                    f"{self.path} holds {column_dim}-d vectors but embedder "
                    f"{self._embedder.name!r} makes {self._dim}-d vectors"
                )
            self._wcur.execute("BEGIN TRANSACTION")
            if column_dim != self._dim:
                self._set_embedding_column(self._dim)
            write_meta(
                self._wcur,
                {"embedder_name": self._embedder.name, "embedder_dim": str(self._dim)},
            )
            self._commit_txn(self._wcur)
            return
        if name == self._embedder.name and dim == self._dim:
            return
        if on_mismatch != "reembed":
            raise EmbedderMismatchError(
                f"{self.path} was built with embedder {name!r} ({dim}-d); the store was opened "
                f"with {self._embedder.name!r} ({self._dim}-d). Open it with the old embedder, "
                "or pass on_embedder_mismatch='reembed' to rebuild every vector"
            )
        self.last_reembed = self._reembed(name, dim, progress)

    def _column_dim(self) -> int | None:
        row = _one(
            self._wcur,
            "SELECT data_type FROM information_schema.columns "
            "WHERE table_name = 'memories' AND column_name = 'embedding'",
        )
        if row is None:
            return None
        match = re.search(r"\[(\d+)\]", str(row[0]))
        return int(match.group(1)) if match else None

    def _count_all(self) -> int:
        row = _one(self._wcur, "SELECT count(*) FROM memories")
        return int(row[0]) if row else 0

    def _set_embedding_column(self, dim: int) -> None:
        self._wcur.execute("ALTER TABLE memories DROP COLUMN embedding")
        self._wcur.execute(f"ALTER TABLE memories ADD COLUMN embedding FLOAT[{int(dim)}]")

    def _rebuild_index(self, progress: ProgressCallback | None = None) -> None:
        """Load every live memory (and its vector) from the file into a fresh index."""
        index = MemoryIndex(self._dim, approx_min_rows=self._approx_min)
        total = self._count_live()
        done = 0
        reader = self._wcur.execute(
            f"SELECT {_SELECT}, embedding FROM memories WHERE {_LIVE} ORDER BY created_at"
        ).to_arrow_reader(50_000)
        for batch in reader:
            cols = [batch.column(i).to_pylist() for i in range(18)]
            records = [_row_to_record(row) for row in zip(*cols, strict=True)]
            emb = batch.column(18)
            vectors = self._vectors_from_arrow(emb, len(records))
            index.add(records, vectors)
            done += len(records)
            if progress is not None:
                progress(done, total)
        self._index = index

    def _vectors_from_arrow(self, column: Any, n: int) -> F32:
        if column.null_count:
            filled = [v if v is not None else [0.0] * self._dim for v in column.to_pylist()]
            return np.asarray(filled, dtype=np.float32).reshape(n, self._dim)
        flat = column.flatten().to_numpy(zero_copy_only=False)
        return np.ascontiguousarray(flat, dtype=np.float32).reshape(n, self._dim)

    def _count_live(self) -> int:
        row = _one(self._wcur, f"SELECT count(*) FROM memories WHERE {_LIVE}")
        return int(row[0]) if row else 0

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
        if not np.issubdtype(raw.dtype, np.number):
            raise EmbeddingError(f"embedder {self._embedder.name!r} returned dtype {raw.dtype}")
        vecs = np.array(raw, dtype=np.float32, order="C")
        finite = np.isfinite(vecs).all(axis=1)
        if not finite.all():
            raise EmbeddingError(
                f"embedder {self._embedder.name!r} returned NaN or infinite values for text "
                f"{int(np.flatnonzero(~finite)[0])}; nothing was stored"
            )
        norms = np.linalg.norm(vecs, axis=1, keepdims=True)
        np.divide(vecs, norms, out=vecs, where=norms > 0)
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
            ``ADD`` with the new id, or ``MERGE`` with the survivor's id.

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
        is marked ``superseded_by`` the survivor.

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
        ns = self._concrete(namespace)
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
        for item in news:
            item.validate()
            if item.id is not None:
                if item.id in explicit:
                    raise InvalidMemoryError(f"id {item.id!r} appears twice in the batch")
                explicit.add(item.id)
        if not news:
            return []
        vectors = self._embed([m.content for m in news])
        hashes = [content_hash(m.content) for m in news]
        with self._write_lock:
            self._check_open()
            now = self._clock()
            batch = _Batch()
            results = self._plan_adds(ns, news, vectors, hashes, now, dedup, batch)
            self._commit(batch, now)
        if self._max_memories is not None:
            self.enforce_cap(ns, self._max_memories)
        return results

    def _concrete(self, namespace: Namespace) -> Namespace:
        if not isinstance(namespace, Namespace):
            raise NamespaceError(f"namespace must be a Namespace, got {type(namespace).__name__}")
        return namespace

    def _new_record(
        self, ns: Namespace, item: NewMemory, chash: str, now: float, mid: str | None = None
    ) -> MemoryRecord:
        created = item.created_at if item.created_at is not None else now
        return MemoryRecord(
            id=mid or item.id or os.urandom(16).hex(),
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

    def _plan_adds(
        self,
        ns: Namespace,
        news: builtins.list[NewMemory],
        vectors: F32,
        hashes: builtins.list[str],
        now: float,
        dedup: bool,
        batch: _Batch,
    ) -> builtins.list[WriteResult]:
        key = ns.key()
        results: builtins.list[WriteResult | None] = [None] * len(news)
        # exact duplicates: against the store, then earlier items of the batch
        fresh: builtins.list[int] = []
        seen: dict[str, int] = {}
        random_ids = os.urandom(16 * len(news)).hex()  # one call, 32 hex digits per item
        for i, (item, chash) in enumerate(zip(news, hashes, strict=True)):
            if item.id is not None and (
                self._index.row_of(item.id) is not None or self._exists(item.id)
            ):
                raise InvalidMemoryError(f"a memory with id {item.id!r} already exists")
            if not dedup:
                fresh.append(i)
                continue
            existing = self._index.find_hash(key, chash)
            if existing is not None:
                self._fold(batch, existing, item, now, 1.0, "exact duplicate")
                results[i] = WriteResult(id=existing, op="MERGE", similarity=1.0)
                continue
            if chash in seen:
                fresh_pos = seen[chash]
                target = batch.inserts[fresh_pos][0]
                batch.inserts[fresh_pos] = (self._absorb(target, item), batch.inserts[fresh_pos][1])
                results[i] = WriteResult(id=target.id, op="MERGE", similarity=1.0)
                continue
            fresh.append(i)
            rec = self._new_record(
                ns, item, chash, now, item.id or random_ids[32 * i : 32 * i + 32]
            )
            seen[chash] = len(batch.inserts)
            batch.inserts.append((rec, vectors[i]))
            results[i] = WriteResult(id=rec.id, op="ADD")
        if not dedup:
            ids = set()
            for i in fresh:
                rec = self._new_record(ns, news[i], hashes[i], now)
                if rec.id in ids:
                    raise InvalidMemoryError(f"id {rec.id!r} appears twice in the batch")
                ids.add(rec.id)
                batch.inserts.append((rec, vectors[i]))
                results[i] = WriteResult(id=rec.id, op="ADD")
            return [r for r in results if r is not None]
        if self._near is not None and batch.inserts:
            planned = {i: r.id for i, r in enumerate(results) if r is not None and r.op == "ADD"}
            self._near_duplicates(ns, key, batch, results, now)
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

    def _exists(self, mid: str) -> bool:
        row = _one(self._wcur, "SELECT 1 FROM memories WHERE id = ?", [mid])
        return row is not None

    def _absorb(self, target: MemoryRecord, item: NewMemory) -> MemoryRecord:
        meta = dict(item.metadata)
        meta.update(target.metadata)
        return msgspec.structs.replace(
            target,
            importance=max(target.importance, float(item.importance)),
            tags=_union(target.tags, item.tags),
            source_ids=_union(target.source_ids, item.source_ids),
            metadata=meta,
        )

    def _fold(
        self, batch: _Batch, existing: str, item: NewMemory, now: float, sim: float, why: str
    ) -> None:
        """Merge a new item into an existing live memory (no new row)."""
        change = batch.changes.get(existing)
        current = change.record if change else self._index.record(existing)
        assert current is not None
        merged = msgspec.structs.replace(self._absorb(current, item), updated_at=now)
        if change:
            change.record = merged
        else:
            batch.changes[existing] = _Change(merged)
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
        ns: Namespace,
        key: tuple[str, str, str, str],
        batch: _Batch,
        results: builtins.list[WriteResult | None],
        now: float,
    ) -> None:
        assert self._near is not None
        threshold = self._near
        rows = self._index.exact_rows(key)
        new_vecs = np.stack([v for _, v in batch.inserts])
        best_sim = np.full(len(batch.inserts), -1.0, dtype=np.float32)
        best_row = np.full(len(batch.inserts), -1, dtype=np.int64)
        if rows.size:
            for start in range(0, len(batch.inserts), 256):
                chunk = new_vecs[start : start + 256]
                sims = self._index.cosine_many(rows, chunk)  # (rows, chunk)
                arg = sims.argmax(axis=0)
                best_sim[start : start + len(chunk)] = sims[arg, np.arange(len(chunk))]
                best_row[start : start + len(chunk)] = rows[arg]
        # within the batch: later items against earlier ones
        kept: builtins.list[int] = []
        if len(batch.inserts) > 1:
            inner = new_vecs @ new_vecs.T
        else:
            inner = np.ones((1, 1), dtype=np.float32)
        id_to_result = {r.id: i for i, r in enumerate(results) if r is not None and r.op == "ADD"}
        survivors: builtins.list[tuple[MemoryRecord, F32]] = []
        terms = [key_terms(rec.content) for rec, _ in batch.inserts]
        for j, (rec, vec) in enumerate(batch.inserts):
            res_pos = id_to_result[rec.id]
            earlier = [k for k in kept if inner[j, k] >= threshold and terms[k] == terms[j]]
            if earlier:
                k = max(earlier, key=lambda e: float(inner[j, e]))
                target_pos = kept.index(k)
                target = survivors[target_pos][0]
                survivors[target_pos] = (
                    msgspec.structs.replace(
                        target,
                        importance=max(target.importance, rec.importance),
                        tags=_union(target.tags, rec.tags),
                        source_ids=_union(target.source_ids, rec.source_ids),
                    ),
                    survivors[target_pos][1],
                )
                sim_in = min(float(inner[j, k]), 1.0)
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
            old_match = (
                self._index.records([int(best_row[j])])[0] if best_sim[j] >= threshold else None
            )
            if old_match is not None and key_terms(old_match.content) == terms[j]:
                old = old_match
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
                sim = min(float(best_sim[j]), 1.0)
                if old.id in batch.changes or old_rel >= new_rel:
                    self._fold(
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
                    tags=_union(rec.tags, old.tags),
                    source_ids=_union(rec.source_ids, old.source_ids),
                    access_count=old.access_count,
                )
                loser = msgspec.structs.replace(old, superseded_by=rec.id, updated_at=now)
                batch.changes[old.id] = _Change(loser)
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
            kept.append(j)
            survivors.append((rec, vec))
        batch.inserts = survivors

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
        if content is not None:
            NewMemory(content=content).validate()
        if kind is not None and (not isinstance(kind, str) or not 0 < len(kind) <= 64):
            raise InvalidMemoryError(f"kind must be a non-empty str of <= 64 chars: {kind!r}")
        if importance is not None:
            importance = check_importance(importance)
        new_tags = None if tags is None else check_str_tuple("tags", tags)
        if metadata is not None and not isinstance(metadata, dict):
            raise InvalidMemoryError("metadata must be a dict")
        vector = self._embed([content])[0] if content is not None else None
        with self._write_lock:
            self._check_open()
            current = self._live_record(namespace, memory_id)
            now = self._clock()
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
                _json(metadata)
                changes["metadata"] = dict(metadata)
            if not changes:
                return WriteResult(id=memory_id, op="NOOP")
            record = msgspec.structs.replace(current, updated_at=now, **changes)
            batch = _Batch()
            batch.changes[memory_id] = _Change(
                record, content_vector=vector if "content" in changes else None
            )
            batch.log(
                memory_id, record.namespace, "UPDATE", current.content, record.content, reason
            )
            self._commit(batch, now)
            return WriteResult(id=memory_id, op="UPDATE")

    def _live_record(self, namespace: Namespace, memory_id: str) -> MemoryRecord:
        if not isinstance(memory_id, str):
            raise InvalidMemoryError(f"memory_id must be a str, got {type(memory_id).__name__}")
        scope = self._concrete(namespace)
        rec = self._index.record(memory_id)
        if rec is None or not scope.contains(rec.namespace):
            raise MemoryNotFoundError(f"no live memory {memory_id!r} in namespace {scope}")
        return rec

    def delete(self, namespace: Namespace, memory_id: str, *, reason: str = "") -> WriteResult:
        """Soft-delete a memory (``deleted_at`` set, history row written).

        Raises:
            MemoryNotFoundError: No live memory with that id in the scope.
        """
        self._check_open()
        with self._write_lock:
            self._check_open()
            current = self._live_record(namespace, memory_id)
            now = self._clock()
            batch = _Batch()
            batch.changes[memory_id] = _Change(
                msgspec.structs.replace(current, deleted_at=now, updated_at=now)
            )
            batch.removed.append(memory_id)
            batch.log(memory_id, current.namespace, "DELETE", current.content, None, reason)
            self._commit(batch, now)
            return WriteResult(id=memory_id, op="DELETE")

    def _commit(self, batch: _Batch, now: float) -> None:
        """Write ``batch`` in one transaction, then apply it to the index.

        For large batches the transaction runs on the store's writer thread
        while this thread tokenizes the new memories for the index: DuckDB
        releases the GIL while it inserts and syncs the WAL, so the two overlap.
        The index changes only after the commit succeeded.
        """
        if not (batch.inserts or batch.changes or batch.history):
            return
        prepared: Prepared | None = None
        if len(batch.inserts) >= 512:
            # The Arrow tables are built here first, so the writer thread runs
            # nothing but DuckDB (which releases the GIL) while this one tokenizes.
            tables = self._tables(batch, now)
            future = self._writer_pool().submit(self._transaction, batch, now, tables)
            try:
                prepared = prepare([r for r, _ in batch.inserts])
            finally:
                error = future.exception()
            if error is not None:
                raise error
        else:
            self._transaction(batch, now)
        try:
            self._apply_to_index(batch, prepared)
        except Exception as exc:  # keep the index in step with the file no matter what
            log.error("store.index_apply_failed", path=self.path, error=str(exc))
            self._rebuild_index()

    def _writer_pool(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="actormem-store-writer")
        return self._pool

    def _tables(self, batch: _Batch, now: float) -> _Tables:
        """The Arrow tables of a batch's inserts and history rows."""
        return _Tables(
            insert=self._insert_table([r for r, _ in batch.inserts], [v for _, v in batch.inserts])
            if batch.inserts
            else None,
            history=self._history_table(batch.history, now) if batch.history else None,
        )

    def _transaction(self, batch: _Batch, now: float, tables: _Tables | None = None) -> None:
        built = tables if tables is not None else self._tables(batch, now)

        def write(cur: Any) -> None:
            self._flush_touches(cur, own_txn=False)
            if built.insert is not None:
                self._execute_insert(cur, built.insert)
            if batch.changes:
                self._update_rows(cur, list(batch.changes.values()))
            if built.history is not None:
                self._execute_history(cur, built.history)

        self._run_txn("write", write)

    def _apply_to_index(self, batch: _Batch, prepared: Prepared | None = None) -> None:
        index = self._index
        if batch.removed:
            index.remove(batch.removed)
        for change in batch.changes.values():
            rec = change.record
            if not rec.alive:
                continue
            if change.content_vector is not None:
                index.add([rec], change.content_vector[None, :])
            else:
                index.replace_record(rec)
        if batch.inserts:
            index.add(
                [r for r, _ in batch.inserts], np.stack([v for _, v in batch.inserts]), prepared
            )
        if index.dead_fraction > 0.3 and index.rows > 10_000:
            index.compact()

    def _insert_table(
        self, records: Sequence[MemoryRecord], vectors: Sequence[F32]
    ) -> tuple[pa.Table, str, str]:
        """``(table, column list, select list)`` of an insert into ``memories``."""
        n = len(records)
        namespaces = {id(r.namespace): r.namespace for r in records}
        if len(namespaces) == 1:  # the usual batch: one namespace, constant columns
            key = next(iter(namespaces.values())).key()
            keys_cols = [pa.array([k] * n, type=pa.string()) for k in key]
        else:
            keys = [r.namespace.key() for r in records]
            keys_cols = [pa.array([k[i] for k in keys], type=pa.string()) for i in range(4)]
        flat = np.ascontiguousarray(np.stack(vectors), dtype=np.float32).reshape(-1)
        deleted = [r.deleted_at for r in records]
        superseded = [r.superseded_by for r in records]
        metadata = [r.metadata for r in records]
        columns = {
            "id": pa.array([r.id for r in records], type=pa.string()),
            "user_id": keys_cols[0],
            "agent_id": keys_cols[1],
            "run_id": keys_cols[2],
            "session_id": keys_cols[3],
            "kind": pa.array([r.kind for r in records], type=pa.string()),
            "content": pa.array([r.content for r in records], type=pa.string()),
            "content_hash": pa.array([r.content_hash for r in records], type=pa.string()),
            "embedding": pa.FixedSizeListArray.from_arrays(pa.array(flat), self._dim),
            "importance": pa.array([r.importance for r in records], type=pa.float64()),
            "tags": _str_lists([r.tags for r in records]),
            "source_ids": _str_lists([r.source_ids for r in records]),
            "created_at": _ts_array([r.created_at for r in records]),
            "updated_at": _ts_array([r.updated_at for r in records]),
            "last_accessed": _ts_array([r.last_accessed for r in records]),
            "access_count": pa.array([r.access_count for r in records], type=pa.int64()),
            "superseded_by": (
                pa.nulls(n, type=pa.string())
                if superseded.count(None) == n
                else pa.array(superseded, type=pa.string())
            ),
            "deleted_at": (
                pa.nulls(n, type=pa.timestamp("us"))
                if deleted.count(None) == n
                else _ts_array(deleted)
            ),
        }
        names = ", ".join(columns)
        select = names
        if any(metadata):  # else the column default '{}' (no JSON parse of n empty objects)
            columns["metadata"] = pa.array([_json(m) for m in metadata], type=pa.string())
            names += ", metadata"
            select += ", CAST(metadata AS JSON)"
        tbl = pa.table(columns)
        assert tbl.num_rows == n
        return tbl, names, select

    def _execute_insert(self, cur: Any, insert: tuple[pa.Table, str, str]) -> None:
        tbl, names, select = insert
        cur.register("_ins", tbl)
        try:
            cur.execute(f"INSERT INTO memories ({names}) SELECT {select} FROM _ins")
        finally:
            cur.unregister("_ins")

    def _update_rows(self, cur: Any, changes: Sequence[_Change]) -> None:
        recs = [c.record for c in changes]
        tbl = pa.table(
            {
                "id": pa.array([r.id for r in recs], type=pa.string()),
                "kind": pa.array([r.kind for r in recs], type=pa.string()),
                "content": pa.array([r.content for r in recs], type=pa.string()),
                "content_hash": pa.array([r.content_hash for r in recs], type=pa.string()),
                "importance": pa.array([r.importance for r in recs], type=pa.float64()),
                "tags": pa.array([list(r.tags) for r in recs], type=pa.list_(pa.string())),
                "source_ids": pa.array(
                    [list(r.source_ids) for r in recs], type=pa.list_(pa.string())
                ),
                "updated_at": _ts_array([r.updated_at for r in recs]),
                "access_delta": pa.array([c.access_delta for c in changes], type=pa.int64()),
                "superseded_by": pa.array([r.superseded_by for r in recs], type=pa.string()),
                "deleted_at": _ts_array([r.deleted_at for r in recs]),
                "metadata": pa.array([_json(r.metadata) for r in recs], type=pa.string()),
            }
        )
        cur.register("_upd", tbl)
        try:
            cur.execute(
                "UPDATE memories SET kind = u.kind, content = u.content, "
                "content_hash = u.content_hash, importance = u.importance, "
                "updated_at = u.updated_at, "
                "access_count = memories.access_count + u.access_delta, "
                "superseded_by = u.superseded_by, deleted_at = u.deleted_at, "
                "metadata = CAST(u.metadata AS JSON) FROM _upd u WHERE memories.id = u.id"
            )
            # DuckDB updates a LIST column by deleting and re-inserting the whole
            # row (~2.8 KB of memory kept per updated row, not given back by a
            # checkpoint); the other columns are updated in place.  So only the
            # rows whose lists changed are rewritten.
            cur.execute(
                "UPDATE memories SET tags = u.tags, source_ids = u.source_ids FROM _upd u "
                "WHERE memories.id = u.id AND (memories.tags IS DISTINCT FROM u.tags "
                "OR memories.source_ids IS DISTINCT FROM u.source_ids)"
            )
        finally:
            cur.unregister("_upd")
        with_vec = [c for c in changes if c.content_vector is not None]
        if with_vec:
            flat = np.stack([c.content_vector for c in with_vec if c.content_vector is not None])
            vtbl = pa.table(
                {
                    "id": pa.array([c.record.id for c in with_vec], type=pa.string()),
                    "embedding": pa.FixedSizeListArray.from_arrays(
                        pa.array(flat.astype(np.float32).reshape(-1)), self._dim
                    ),
                }
            )
            cur.register("_vec", vtbl)
            try:
                cur.execute(
                    "UPDATE memories SET embedding = v.embedding FROM _vec v "
                    "WHERE memories.id = v.id"
                )
            finally:
                cur.unregister("_vec")

    def _history_table(
        self,
        rows: Sequence[tuple[str, Namespace, str, str | None, str | None, str]],
        now: float,
    ) -> pa.Table:
        """The Arrow table of history rows written at ``now``."""
        keys = [r[1].key() for r in rows]
        prefix = uuid.uuid4().hex
        tbl = pa.table(
            {
                "id": pa.array([f"{prefix}-{i}" for i in range(len(rows))], type=pa.string()),
                "memory_id": pa.array([r[0] for r in rows], type=pa.string()),
                "user_id": pa.array([k[0] for k in keys], type=pa.string()),
                "agent_id": pa.array([k[1] for k in keys], type=pa.string()),
                "run_id": pa.array([k[2] for k in keys], type=pa.string()),
                "session_id": pa.array([k[3] for k in keys], type=pa.string()),
                "op": pa.array([r[2] for r in rows], type=pa.string()),
                "old_content": pa.array([r[3] for r in rows], type=pa.string()),
                "new_content": pa.array([r[4] for r in rows], type=pa.string()),
                "ts": _ts_array([now] * len(rows)),
                "reason": pa.array([r[5] for r in rows], type=pa.string()),
            }
        )
        return tbl

    def _execute_history(self, cur: Any, tbl: pa.Table) -> None:
        cur.register("_hist", tbl)
        try:
            cur.execute(
                "INSERT INTO history (id, memory_id, user_id, agent_id, run_id, session_id, op, "
                "old_content, new_content, ts, reason) SELECT id, memory_id, user_id, agent_id, "
                "run_id, session_id, op, old_content, new_content, ts, reason FROM _hist"
            )
        finally:
            cur.unregister("_hist")

    def forget(self, namespace: Namespace) -> ForgetReport:
        """Remove every memory in the scope and its history, for good.

        The journal's rows in the scope (activity log, compactions, journal
        state) go too.

        The rows are deleted (not soft-deleted), the in-memory copies erased
        and the file checkpointed so the WAL no longer holds them.

        Returns:
            How many memories and history rows were removed.
        """
        self._check_open()
        where, params = _scope_sql(self._concrete(namespace))

        def delete_all(cur: Any) -> tuple[builtins.list[str], Any]:
            self._flush_touches(cur, own_txn=False)
            ids = [
                r[0]
                for r in cur.execute(f"SELECT id FROM memories WHERE {where}", params).fetchall()
            ]
            n_hist = cur.execute(f"SELECT count(*) FROM history WHERE {where}", params).fetchone()
            cur.execute(f"DELETE FROM history WHERE {where}", params)
            cur.execute(f"DELETE FROM memories WHERE {where}", params)
            for table in ("activity_log", "log_compactions", "journal_state"):
                cur.execute(f"DELETE FROM {table} WHERE {where}", params)
            return ids, n_hist

        with self._write_lock:
            ids, n_hist = self._write_txn("forget", delete_all)
            self._index.remove(ids, purge=True)
            self._reranker.clear()  # its caches hold words of the forgotten memories
            with self._touch_lock:
                for mid in ids:
                    self._pending.pop(mid, None)
            if self.path != ":memory:":
                with suppress(duckdb.Error):
                    self._wcur.execute("CHECKPOINT")
        report = ForgetReport(
            namespace=namespace, memories=len(ids), history=int(n_hist[0]) if n_hist else 0
        )
        log.info(
            "store.forgot",
            namespace=str(namespace),
            memories=report.memories,
            history=report.history,
        )
        return report

    # -- reads --------------------------------------------------------------------------

    def get(
        self, namespace: Namespace, memory_id: str, *, include_deleted: bool = False
    ) -> MemoryRecord | None:
        """The memory ``memory_id`` if it lies in the scope, else ``None``.

        Args:
            namespace: A scope.
            memory_id: The id.
            include_deleted: Also return deleted or superseded memories.
        """
        if not isinstance(memory_id, str):
            raise InvalidMemoryError(f"memory_id must be a str, got {type(memory_id).__name__}")
        where, params = _scope_sql(namespace)
        live = "" if include_deleted else f" AND {_LIVE}"
        row = _one(
            self._reader(),
            f"SELECT {_SELECT} FROM memories WHERE id = ? AND {where}{live}",
            [memory_id, *params],
        )
        if row is None:
            return None
        rec = _row_to_record(row)
        pending = self._pending.get(memory_id)
        if pending is not None:
            rec = msgspec.structs.replace(
                rec,
                access_count=rec.access_count + pending[0],
                last_accessed=max(rec.last_accessed, pending[1]),
            )
        return rec

    def list(
        self,
        namespace: Namespace,
        *,
        kinds: Sequence[str] | None = None,
        limit: int = 100,
        offset: int = 0,
        include_deleted: bool = False,
    ) -> builtins.list[MemoryRecord]:
        """Memories in the scope, newest first.

        Args:
            namespace: A scope.
            kinds: Only these kinds.
            limit: At most this many (1..100,000).
            offset: Skip this many.
            include_deleted: Also list deleted and superseded memories.
        """
        _check_limit(limit)
        if not isinstance(offset, int) or offset < 0:
            raise InvalidMemoryError("offset must be an int >= 0")
        where, params = _scope_sql(namespace)
        if not include_deleted:
            where += f" AND {_LIVE}"
        if kinds is not None:
            where += " AND list_contains(?, kind)"
            params.append(list(check_str_tuple("kinds", kinds)))
        rows = (
            self._reader()
            .execute(
                f"SELECT {_SELECT} FROM memories WHERE {where} "
                "ORDER BY created_at DESC, id LIMIT ? OFFSET ?",
                [*params, limit, offset],
            )
            .fetchall()
        )
        return [_row_to_record(r) for r in rows]

    def count(self, namespace: Namespace, *, include_deleted: bool = False) -> int:
        """Number of memories in the scope."""
        where, params = _scope_sql(namespace)
        if not include_deleted:
            where += f" AND {_LIVE}"
        row = _one(self._reader(), f"SELECT count(*) FROM memories WHERE {where}", params)
        return int(row[0]) if row else 0

    def history(
        self, namespace: Namespace, memory_id: str | None = None
    ) -> builtins.list[HistoryRecord]:
        """The audit trail in the scope (optionally of one memory), oldest first."""
        where, params = _scope_sql(namespace)
        if memory_id is not None:
            where += " AND memory_id = ?"
            params.append(memory_id)
        rows = (
            self._reader()
            .execute(
                "SELECT id, memory_id, user_id, agent_id, run_id, session_id, op, old_content, "
                f"new_content, epoch_us(ts), reason FROM history WHERE {where} ORDER BY ts, rowid",
                params,
            )
            .fetchall()
        )
        return [
            HistoryRecord(
                id=r[0],
                memory_id=r[1],
                namespace=Namespace.from_key((r[2], r[3], r[4], r[5])),
                op=r[6],
                old_content=r[7],
                new_content=r[8],
                ts=r[9] / 1_000_000,
                reason=r[10],
            )
            for r in rows
        ]

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
            query: The text to look for.
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
        _check_limit(limit)
        scope = self._concrete(namespace)
        if filters is not None and not isinstance(filters, SearchFilters):
            raise InvalidMemoryError("filters must be a SearchFilters")
        if mode not in ("hybrid", "keyword", "vector"):
            raise InvalidMemoryError(f"unknown search mode {mode!r}")
        cfg = config or self._config
        terms = tokenize(query)
        rerank = self._reranker.prepare(query, cfg) if mode == "hybrid" else None
        qvec = self._embed([_query_text(query)])[0] if mode != "keyword" and query.strip() else None
        now = self._clock()
        # Row numbers are only valid until the next compaction of the index (a
        # write on another thread): score, touch and read the records under one lock.
        with self._index.lock:
            scored = self._index.search(
                scope, terms, qvec, limit, filters, cfg, mode, now, self._weights, rerank
            )
            if not scored:
                return []
            rows = [s.row for s in scored]
            if touch:
                self._index.touch(rows, now)
            records = self._index.records(rows)
        if touch:
            with self._touch_lock:
                for rec in records:
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
            for s, rec in zip(scored, records, strict=True)
        ]

    # -- maintenance ----------------------------------------------------------------------

    def _live_in_scope(
        self, namespace: Namespace
    ) -> tuple[npt.NDArray[np.int64], builtins.list[MemoryRecord]]:
        rows = self._index.scope_rows(self._concrete(namespace))
        return rows, self._index.records(rows)

    def _remove(
        self, records: Sequence[MemoryRecord], action: str, now: float, reason: str
    ) -> tuple[str, ...]:
        if not records:
            return ()
        batch = _Batch()
        for rec in records:
            batch.changes[rec.id] = _Change(
                msgspec.structs.replace(rec, deleted_at=now, updated_at=now)
            )
            batch.removed.append(rec.id)
            batch.log(rec.id, rec.namespace, "DELETE", rec.content, None, f"{action}: {reason}")
        self._commit(batch, now)
        return tuple(r.id for r in records)

    def decay(
        self, namespace: Namespace, *, rate: float = 0.95, threshold: float = 0.10
    ) -> MaintenanceReport:
        """Seed 000's decay: forget memories whose ``relevance * rate ** days_unused`` < threshold.

        Args:
            namespace: The scope.
            rate: Daily retention factor.
            threshold: Decayed relevance below which a memory is soft-deleted.
        """
        if not 0 < rate <= 1:
            raise InvalidMemoryError("rate must be in (0, 1]")
        with self._write_lock:
            self._check_open()
            now = self._clock()
            rows, recs = self._live_in_scope(namespace)
            if not recs:
                return MaintenanceReport(action="decay", examined=0)
            rel = self._index.relevance_of(rows, now, self._weights)
            arrays = self._index.arrays(rows)
            dec = decayed_relevance(rel, arrays["last"], now, rate)
            victims = [r for r, d in zip(recs, dec, strict=True) if d < threshold]
            removed = self._remove(victims, "decay", now, f"decayed relevance < {threshold}")
            return MaintenanceReport(
                action="decay",
                examined=len(recs),
                removed=removed,
                details={
                    "rate": rate,
                    "threshold": threshold,
                    "mean_decayed": float(dec.mean()),
                    "min_decayed": float(dec.min()),
                },
            )

    def auto_forget(self, namespace: Namespace, *, threshold: float = 0.15) -> MaintenanceReport:
        """Soft-delete memories whose relevance is below ``threshold``."""
        with self._write_lock:
            self._check_open()
            now = self._clock()
            rows, recs = self._live_in_scope(namespace)
            rel = self._index.relevance_of(rows, now, self._weights)
            victims = [r for r, s in zip(recs, rel, strict=True) if s < threshold]
            removed = self._remove(victims, "auto_forget", now, f"relevance < {threshold}")
            return MaintenanceReport(
                action="auto_forget",
                examined=len(recs),
                removed=removed,
                details={"threshold": threshold},
            )

    def prune_stale(self, namespace: Namespace, *, max_age_days: float = 30.0) -> MaintenanceReport:
        """Soft-delete memories not accessed for more than ``max_age_days``."""
        if max_age_days < 0:
            raise InvalidMemoryError("max_age_days must be >= 0")
        with self._write_lock:
            self._check_open()
            now = self._clock()
            rows, recs = self._live_in_scope(namespace)
            last = self._index.arrays(rows)["last"]
            cutoff = now - max_age_days * DAY_SECONDS
            victims = [r for r, t in zip(recs, last, strict=True) if t < cutoff]
            removed = self._remove(victims, "prune_stale", now, f"unused > {max_age_days} days")
            return MaintenanceReport(
                action="prune_stale",
                examined=len(recs),
                removed=removed,
                details={"max_age_days": max_age_days},
            )

    def enforce_cap(self, namespace: Namespace, max_memories: int) -> MaintenanceReport:
        """Keep at most ``max_memories`` per concrete namespace, evicting the least relevant."""
        if not isinstance(max_memories, int) or max_memories < 0:
            raise InvalidMemoryError("max_memories must be an int >= 0")
        with self._write_lock:
            self._check_open()
            now = self._clock()
            rows, recs = self._live_in_scope(namespace)
            rel = self._index.relevance_of(rows, now, self._weights)
            groups: dict[tuple[str, str, str, str], list[tuple[float, float, MemoryRecord]]] = {}
            for rec, score in zip(recs, rel, strict=True):
                groups.setdefault(rec.namespace.key(), []).append(
                    (float(score), rec.created_at, rec)
                )
            victims: builtins.list[MemoryRecord] = []
            for members in groups.values():
                if len(members) > max_memories:
                    members.sort(key=lambda m: (m[0], m[1]))
                    victims.extend(m[2] for m in members[: len(members) - max_memories])
            removed = self._remove(victims, "enforce_cap", now, f"over cap of {max_memories}")
            return MaintenanceReport(
                action="enforce_cap",
                examined=len(recs),
                removed=removed,
                details={"max_memories": max_memories},
            )

    def _similar_pairs(
        self, rows: npt.NDArray[np.int64], threshold: float
    ) -> builtins.list[tuple[int, int, float]]:
        """``(i, j, cosine)`` with i < j (positions in ``rows``) at or above ``threshold``."""
        vecs = self._index.vectors(rows)
        pairs: builtins.list[tuple[int, int, float]] = []
        for start in range(0, len(rows), 1024):
            block = vecs[start : start + 1024] @ vecs.T
            ii, jj = np.nonzero(block >= threshold)
            for i, j in zip(ii.tolist(), jj.tolist(), strict=True):
                gi = start + i
                if gi < j:
                    pairs.append((gi, j, float(block[i, j])))
        pairs.sort(key=lambda p: -p[2])
        return pairs

    def _merge_pairs(
        self,
        action: str,
        namespace: Namespace,
        accept: Callable[[MemoryRecord, MemoryRecord, float], bool],
        prefilter: float,
    ) -> MaintenanceReport:
        with self._write_lock:
            self._check_open()
            now = self._clock()
            rows, recs = self._live_in_scope(namespace)
            if len(recs) < 2:
                return MaintenanceReport(action=action, examined=len(recs))
            rel = self._index.relevance_of(rows, now, self._weights)
            pairs = self._similar_pairs(rows, prefilter)
            gone: set[int] = set()
            current: dict[int, MemoryRecord] = {}
            batch = _Batch()
            merged: builtins.list[tuple[str, str]] = []
            for i, j, sim in pairs:
                if i in gone or j in gone:
                    continue
                a, b = current.get(i, recs[i]), current.get(j, recs[j])
                if a.namespace != b.namespace or not accept(a, b, sim):
                    continue
                if not mergeable(a.content, b.content):
                    continue
                keep, lose = (i, j) if rel[i] >= rel[j] else (j, i)
                survivor, loser = current.get(keep, recs[keep]), current.get(lose, recs[lose])
                survivor = msgspec.structs.replace(
                    survivor,
                    importance=max(survivor.importance, loser.importance),
                    tags=_union(survivor.tags, loser.tags),
                    source_ids=_union(survivor.source_ids, loser.source_ids),
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
                batch.changes[survivor.id] = _Change(survivor, access_delta=delta)
                batch.changes[loser.id] = _Change(
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
            self._commit(batch, now)
            for mid, change in batch.changes.items():
                if change.access_delta and change.record.alive:
                    self._index.add_access(mid, change.access_delta)
            return MaintenanceReport(
                action=action,
                examined=len(recs),
                removed=tuple(loser for _, loser in merged),
                merged=tuple(merged),
            )

    def prune_duplicates(
        self, namespace: Namespace, *, threshold: float = 0.7
    ) -> MaintenanceReport:
        """Merge near-identical texts: word-set Jaccard >= ``threshold`` (seed 000).

        Pairs are first found by cosine (>= 0.5) to avoid comparing every pair.
        """

        def accept(a: MemoryRecord, b: MemoryRecord, sim: float) -> bool:
            return _jaccard(a.content, b.content) >= threshold

        return self._merge_pairs("prune_duplicates", namespace, accept, min(0.5, threshold))

    def consolidate(self, namespace: Namespace, *, threshold: float = 0.9) -> MaintenanceReport:
        """Merge memories whose vectors have cosine >= ``threshold``.

        The more relevant one survives and absorbs the other's access count,
        the larger importance and the union of tags and source ids; the other
        is marked ``superseded_by`` the survivor.
        """
        if not 0 < threshold <= 1:
            raise InvalidMemoryError("threshold must be in (0, 1]")
        return self._merge_pairs("consolidate", namespace, lambda a, b, s: True, threshold)

    # -- activity log and journal state (actormem.journal) --------------------------------

    def _write_txn(self, what: str, fn: Callable[[Any], Any]) -> Any:
        """Run ``fn(cursor)`` in one write transaction under the writer lock."""
        with self._write_lock:
            self._check_open()
            return self._run_txn(what, fn)

    def _run_txn(self, what: str, fn: Callable[[Any], Any]) -> Any:
        """Run ``fn(cursor)`` in one transaction on the write cursor; roll back on error.

        The caller holds the writer lock (possibly on another thread: batched
        writes commit on the writer pool while the caller's thread holds it).
        """
        cur = self._wcur
        try:
            cur.execute("BEGIN TRANSACTION")
            out = fn(cur)
            self._commit_txn(cur)
        except BaseException as exc:
            with suppress(duckdb.Error):
                cur.execute("ROLLBACK")
            if isinstance(exc, duckdb.Error):
                raise StoreError(
                    f"{what} in {self.path} failed and was rolled back: {exc}"
                ) from exc
            raise
        return out

    def log_append(
        self,
        namespace: Namespace,
        entry_type: str,
        content: str,
        *,
        metadata: dict[str, Any] | None = None,
        ts: float | None = None,
    ) -> LogRecord:
        """Append one entry to the activity log of the concrete ``namespace``.

        Committed when it returns.

        Args:
            namespace: The agent's namespace (exact, not a scope).
            entry_type: ``TOOL_USE``, ``THOUGHT``, ``USER_FEEDBACK``, ``ERROR``, ``SYSTEM``
                (any non-empty name of at most 32 characters is accepted).
            content: The text (non-empty).
            metadata: Extra JSON fields.
            ts: When (default: the store's clock).

        Returns:
            The stored entry with its ``seq``.

        Raises:
            InvalidMemoryError: A bad type, content or metadata.
        """
        where, params = _exact_sql(namespace)
        if not isinstance(entry_type, str) or not 0 < len(entry_type) <= 32:
            raise InvalidMemoryError(f"entry_type must be a str of 1-32 chars: {entry_type!r}")
        NewMemory(content=content).validate()
        meta = dict(metadata or {})
        meta_json = _json(meta)
        when = self._clock() if ts is None else float(ts)
        rid = os.urandom(16).hex()

        def write(cur: Any) -> int:
            row = cur.execute(
                f"SELECT coalesce(max(seq), 0) FROM activity_log WHERE {where}", params
            ).fetchone()
            seq = int(row[0]) + 1
            cur.execute(
                "INSERT INTO activity_log (id, user_id, agent_id, run_id, session_id, seq, ts, "
                "entry_type, content, metadata) VALUES (?, ?, ?, ?, ?, ?, make_timestamp(?), "
                "?, ?, ?)",
                [rid, *params, seq, _us(when), entry_type, content, meta_json],
            )
            return seq

        seq = self._write_txn("log append", write)
        return LogRecord(
            id=rid,
            namespace=namespace,
            seq=seq,
            ts=_us(when) / 1_000_000,
            entry_type=entry_type,
            content=content,
            metadata=meta,
        )

    def log_entries(
        self,
        namespace: Namespace,
        *,
        compacted: bool | None = False,
        after_seq: int = 0,
        limit: int | None = None,
    ) -> builtins.list[LogRecord]:
        """Entries of the activity log of ``namespace``, oldest first.

        Args:
            namespace: The agent's namespace (exact).
            compacted: ``False``: only live (not yet compacted) entries; ``True``:
                only compacted ones; ``None``: all.
            after_seq: Only entries with ``seq > after_seq``.
            limit: At most this many (the *latest* ones when set).
        """
        where, params = _exact_sql(namespace)
        if compacted is not None:
            where += " AND compaction_id IS " + ("NOT NULL" if compacted else "NULL")
        where += " AND seq > ?"
        params.append(int(after_seq))
        sql = f"SELECT {_LOG_SELECT} FROM activity_log WHERE {where} ORDER BY seq"
        if limit is not None:
            _check_limit(limit)
            sql = (
                f"SELECT * FROM (SELECT {_LOG_SELECT} FROM activity_log WHERE {where} "
                f"ORDER BY seq DESC LIMIT {int(limit)}) ORDER BY seq"
            )
        return [_row_to_log(r) for r in self._reader().execute(sql, params).fetchall()]

    def log_compact(
        self,
        namespace: Namespace,
        entry_ids: Sequence[str],
        *,
        summary_id: str,
        summary: str,
        summarizer: str = "",
        bytes_before: int = 0,
        bytes_after: int = 0,
    ) -> LogCompaction:
        """Mark live entries as summarized by ``summary_id`` and record the compaction.

        One transaction: either every entry is marked and the row written, or
        nothing changes.  Entries are never deleted.

        Raises:
            InvalidMemoryError: ``entry_ids`` is empty, or one of them is not a
                live entry of ``namespace``.
        """
        where, params = _exact_sql(namespace)
        ids = builtins.list(dict.fromkeys(check_str_tuple("entry_ids", tuple(entry_ids))))
        if not ids:
            raise InvalidMemoryError("log_compact needs at least one entry id")
        cid = os.urandom(16).hex()
        now = self._clock()

        def write(cur: Any) -> LogCompaction:
            tbl = pa.table({"id": pa.array(ids, type=pa.string())})
            cur.register("_ids", tbl)
            try:
                row = cur.execute(
                    f"SELECT count(*), min(seq), max(seq) FROM activity_log WHERE {where} "
                    "AND compaction_id IS NULL AND id IN (SELECT id FROM _ids)",
                    params,
                ).fetchone()
                if row is None or int(row[0]) != len(ids):
                    raise InvalidMemoryError(
                        f"{len(ids) - int(row[0] if row else 0)} of the {len(ids)} entries are "
                        f"not live log entries of {namespace}"
                    )
                cur.execute(
                    f"UPDATE activity_log SET compaction_id = ? WHERE {where} "
                    "AND id IN (SELECT id FROM _ids)",
                    [cid, *params],
                )
            finally:
                cur.unregister("_ids")
            rec = LogCompaction(
                id=cid,
                namespace=namespace,
                ts=_us(now) / 1_000_000,
                entries=len(ids),
                first_seq=int(row[1]),
                last_seq=int(row[2]),
                summary_id=summary_id,
                summary=summary,
                summarizer=summarizer,
                bytes_before=int(bytes_before),
                bytes_after=int(bytes_after),
            )
            cur.execute(
                "INSERT INTO log_compactions (id, user_id, agent_id, run_id, session_id, ts, "
                "entries, first_seq, last_seq, summary_id, summary, summarizer, bytes_before, "
                "bytes_after) VALUES (?, ?, ?, ?, ?, make_timestamp(?), ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    cid,
                    *params,
                    _us(now),
                    rec.entries,
                    rec.first_seq,
                    rec.last_seq,
                    summary_id,
                    summary,
                    summarizer,
                    rec.bytes_before,
                    rec.bytes_after,
                ],
            )
            return rec

        result: LogCompaction = self._write_txn("log compaction", write)
        return result

    def log_compactions(self, namespace: Namespace) -> builtins.list[LogCompaction]:
        """The compactions of the activity log of ``namespace``, oldest first."""
        where, params = _exact_sql(namespace)
        rows = (
            self._reader()
            .execute(
                f"SELECT {_COMPACTION_SELECT} FROM log_compactions WHERE {where} ORDER BY ts, "
                "first_seq",
                params,
            )
            .fetchall()
        )
        return [_row_to_compaction(r) for r in rows]

    def journal_state(self, namespace: Namespace) -> dict[str, str]:
        """The journal's key/value state of the concrete ``namespace``."""
        where, params = _exact_sql(namespace)
        rows = (
            self._reader()
            .execute(f"SELECT key, value FROM journal_state WHERE {where}", params)
            .fetchall()
        )
        return {str(k): str(v) for k, v in rows}

    def set_journal_state(self, namespace: Namespace, values: dict[str, str]) -> None:
        """Upsert ``values`` into the journal state of ``namespace`` (one transaction)."""
        _, params = _exact_sql(namespace)
        for key, value in values.items():
            if not isinstance(key, str) or not key or not isinstance(value, str):
                raise InvalidMemoryError(f"journal state needs str keys and values: {key!r}")
        now = _us(self._clock())

        def write(cur: Any) -> None:
            for key, value in values.items():
                cur.execute(
                    "INSERT INTO journal_state (user_id, agent_id, run_id, session_id, key, "
                    "value, updated_at) VALUES (?, ?, ?, ?, ?, ?, make_timestamp(?)) "
                    "ON CONFLICT (user_id, agent_id, run_id, session_id, key) "
                    "DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
                    [*params, key, value, now],
                )

        self._write_txn("journal state write", write)

    # -- analytics ------------------------------------------------------------------------

    def counts_by(
        self, namespace: Namespace, field: Literal["agent_id", "run_id", "session_id", "kind"]
    ) -> dict[str, int]:
        """Live memories per agent, run, session or kind inside the scope."""
        if field not in ("agent_id", "run_id", "session_id", "kind"):
            raise InvalidMemoryError(f"cannot count by {field!r}")
        where, params = _scope_sql(namespace)
        rows = (
            self._reader()
            .execute(
                f"SELECT {field}, count(*) FROM memories WHERE {where} AND {_LIVE} "
                f"GROUP BY {field} ORDER BY count(*) DESC, {field}",
                params,
            )
            .fetchall()
        )
        return {str(k): int(v) for k, v in rows}

    def timeline(self, namespace: Namespace) -> builtins.list[tuple[str, int]]:
        """Memories created per day (UTC, ``YYYY-MM-DD``) in the scope, oldest first."""
        where, params = _scope_sql(namespace)
        rows = (
            self._reader()
            .execute(
                f"SELECT strftime(date_trunc('day', created_at), '%Y-%m-%d') AS day, count(*) "
                f"FROM memories WHERE {where} AND {_LIVE} GROUP BY day ORDER BY day",
                params,
            )
            .fetchall()
        )
        return [(str(d), int(c)) for d, c in rows]

    def top_tags(self, namespace: Namespace, limit: int = 10) -> builtins.list[tuple[str, int]]:
        """The most used tags in the scope."""
        _check_limit(limit)
        where, params = _scope_sql(namespace)
        rows = (
            self._reader()
            .execute(
                f"SELECT tag, count(*) AS n FROM (SELECT unnest(tags) AS tag FROM memories "
                f"WHERE {where} AND {_LIVE}) GROUP BY tag ORDER BY n DESC, tag LIMIT ?",
                [*params, limit],
            )
            .fetchall()
        )
        return [(str(t), int(n)) for t, n in rows]

    def most_accessed(self, namespace: Namespace, limit: int = 10) -> builtins.list[MemoryRecord]:
        """The most retrieved live memories in the scope."""
        _check_limit(limit)
        self.flush()
        where, params = _scope_sql(namespace)
        rows = (
            self._reader()
            .execute(
                f"SELECT {_SELECT} FROM memories WHERE {where} AND {_LIVE} "
                "ORDER BY access_count DESC, last_accessed DESC, id LIMIT ?",
                [*params, limit],
            )
            .fetchall()
        )
        return [_row_to_record(r) for r in rows]

    def stats(self, namespace: Namespace) -> builtins.list[NamespaceStats]:
        """Figures per concrete namespace inside the scope."""
        self.flush()
        where, params = _scope_sql(namespace)
        rows = (
            self._reader()
            .execute(
                "SELECT user_id, agent_id, run_id, session_id, "
                f"count(*) FILTER (WHERE {_LIVE}), "
                "count(*) FILTER (WHERE deleted_at IS NOT NULL), "
                "count(*) FILTER (WHERE superseded_by IS NOT NULL AND deleted_at IS NULL), "
                f"coalesce(avg(importance) FILTER (WHERE {_LIVE}), 0), "
                f"coalesce(sum(access_count) FILTER (WHERE {_LIVE}), 0), "
                f"epoch_us(min(created_at) FILTER (WHERE {_LIVE})), "
                f"epoch_us(max(created_at) FILTER (WHERE {_LIVE})) "
                f"FROM memories WHERE {where} GROUP BY ALL ORDER BY ALL",
                params,
            )
            .fetchall()
        )
        kinds_rows = (
            self._reader()
            .execute(
                f"SELECT user_id, agent_id, run_id, session_id, kind, count(*) FROM memories "
                f"WHERE {where} AND {_LIVE} GROUP BY ALL",
                params,
            )
            .fetchall()
        )
        kinds: dict[tuple[str, str, str, str], dict[str, int]] = {}
        for u, a, r, s, k, c in kinds_rows:
            kinds.setdefault((u, a, r, s), {})[k] = int(c)
        return [
            NamespaceStats(
                namespace=Namespace.from_key((row[0], row[1], row[2], row[3])),
                live=int(row[4]),
                deleted=int(row[5]),
                superseded=int(row[6]),
                kinds=kinds.get((row[0], row[1], row[2], row[3]), {}),
                avg_importance=float(row[7]),
                total_access=int(row[8]),
                first_created=_sec(row[9]),
                last_created=_sec(row[10]),
            )
            for row in rows
        ]

    # -- export / import ------------------------------------------------------------------

    def export(
        self,
        namespace: Namespace,
        path: str | os.PathLike[str],
        *,
        overwrite: bool = False,
        progress: ProgressCallback | None = None,
    ) -> ExportReport:
        """Write every memory in the scope (live and deleted) to Parquet or JSONL.

        The format follows the suffix (``.parquet`` or ``.jsonl``).  The file
        is written beside the target and renamed into place when complete.

        Raises:
            InvalidMemoryError: Unknown suffix, missing folder, or the file
                exists and ``overwrite`` is false.
        """
        target, fmt = _check_path(path, must_exist=False)
        if target.exists() and not overwrite:
            raise InvalidMemoryError(f"{target} exists; pass overwrite=True to replace it")
        self.flush()
        where, params = _scope_sql(namespace)
        cur = self._reader()
        total_row = _one(cur, f"SELECT count(*) FROM memories WHERE {where}", params)
        total = int(total_row[0]) if total_row else 0
        reader = cur.execute(
            "SELECT id, user_id, agent_id, run_id, session_id, kind, content, content_hash, "
            "embedding, importance, tags, source_ids, epoch_us(created_at) AS created_at, "
            "epoch_us(updated_at) AS updated_at, epoch_us(last_accessed) AS last_accessed, "
            "access_count, superseded_by, epoch_us(deleted_at) AS deleted_at, "
            "CAST(metadata AS VARCHAR) AS metadata "
            f"FROM memories WHERE {where} ORDER BY created_at, id",
            params,
        ).to_arrow_reader(10_000)
        tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.tmp")
        done = 0
        try:
            if fmt == "parquet":
                import pyarrow.parquet as pq

                writer: Any = None
                for batch in reader:
                    if writer is None:
                        writer = pq.ParquetWriter(str(tmp), batch.schema)
                    writer.write_batch(batch)
                    done += batch.num_rows
                    if progress is not None:
                        progress(done, total)
                if writer is None:
                    empty = reader.schema.empty_table()
                    pq.write_table(empty, str(tmp))
                else:
                    writer.close()
            else:
                with os.fdopen(
                    os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb"
                ) as fh:
                    for batch in reader:
                        for row in batch.to_pylist():
                            row["metadata"] = json.loads(row["metadata"]) if row["metadata"] else {}
                            fh.write(msgspec.json.encode(row))
                            fh.write(b"\n")
                        done += batch.num_rows
                        if progress is not None:
                            progress(done, total)
                    fh.flush()
                    os.fsync(fh.fileno())
            os.chmod(tmp, 0o600)  # memories are private: never the umask's 0644
            os.replace(tmp, target)
        finally:
            with suppress(FileNotFoundError):
                tmp.unlink()
        log.info("store.exported", path=str(target), format=fmt, memories=done)
        return ExportReport(path=str(target), format=fmt, memories=done)

    def import_(
        self,
        path: str | os.PathLike[str],
        *,
        namespace: Namespace | None = None,
        progress: ProgressCallback | None = None,
    ) -> ImportReport:
        """Load memories exported by :meth:`export`.

        Ids, timestamps, access counts and history-free state are kept; rows
        whose id already exists are skipped, exact duplicates merged.
        Vectors are reused when their size matches this store's, else
        re-embedded.

        Args:
            path: A ``.parquet`` or ``.jsonl`` file.
            namespace: Put every memory here instead of its own namespace.
            progress: ``progress(done, total)``.

        Raises:
            InvalidMemoryError: Bad path or malformed rows.
        """
        self._check_open()
        source, fmt = _check_path(path, must_exist=True)
        rows = _read_rows(source, fmt)
        total = len(rows)
        added = merged = done = 0
        for start in range(0, total, 5_000):
            chunk = rows[start : start + 5_000]
            a, m = self._import_chunk(chunk, namespace)
            added += a
            merged += m
            done += len(chunk)
            if progress is not None:
                progress(done, total)
        log.info("store.imported", path=str(source), read=total, added=added, merged=merged)
        return ImportReport(path=str(source), read=total, added=added, merged=merged)

    def _import_chunk(
        self, rows: Sequence[dict[str, Any]], namespace: Namespace | None
    ) -> tuple[int, int]:
        records: builtins.list[MemoryRecord] = []
        vectors: builtins.list[F32 | None] = []
        try:
            for row in rows:
                ns = namespace or Namespace.from_key(
                    (
                        row.get("user_id") or "",
                        row.get("agent_id") or "",
                        row.get("run_id") or "",
                        row.get("session_id") or "",
                    )
                )
                meta = row.get("metadata") or {}
                if isinstance(meta, str):
                    meta = json.loads(meta)
                rec = MemoryRecord(
                    id=str(row["id"]),
                    namespace=ns,
                    kind=str(row["kind"]),
                    content=str(row["content"]),
                    content_hash=content_hash(str(row["content"])),
                    importance=check_importance(float(row["importance"])),
                    tags=check_str_tuple("tags", list(row.get("tags") or [])),
                    source_ids=check_str_tuple("source_ids", list(row.get("source_ids") or [])),
                    created_at=int(row["created_at"]) / 1e6,
                    updated_at=int(row["updated_at"]) / 1e6,
                    last_accessed=int(row["last_accessed"]) / 1e6,
                    access_count=int(row.get("access_count") or 0),
                    superseded_by=row.get("superseded_by"),
                    deleted_at=None
                    if row.get("deleted_at") is None
                    else int(row["deleted_at"]) / 1e6,
                    metadata=dict(meta),
                )
                NewMemory(content=rec.content, kind=rec.kind, id=rec.id).validate()
                emb = row.get("embedding")
                vec = None
                if emb is not None and len(emb) == self._dim:
                    vec = np.asarray(emb, dtype=np.float32)
                    if not np.isfinite(vec).all():
                        vec = None
                records.append(rec)
                vectors.append(vec)
        except (KeyError, TypeError, ValueError, msgspec.ValidationError) as exc:
            if isinstance(exc, StoreError):
                raise
            raise InvalidMemoryError(f"malformed row in import: {exc}") from exc
        missing = [i for i, v in enumerate(vectors) if v is None]
        if missing:
            fresh = self._embed([records[i].content for i in missing])
            for pos, i in enumerate(missing):
                vectors[i] = fresh[pos]
        with self._write_lock:
            self._check_open()
            now = self._clock()
            existing = {
                r[0]
                for r in self._wcur.execute(
                    "SELECT id FROM memories WHERE list_contains(?, id)", [[r.id for r in records]]
                ).fetchall()
            }
            batch = _Batch()
            merged = 0
            seen: set[str] = set()
            for rec, vec in zip(records, vectors, strict=True):
                if rec.id in existing or rec.id in seen:
                    continue
                seen.add(rec.id)
                if rec.alive:
                    dup = self._index.find_hash(rec.namespace.key(), rec.content_hash)
                    if dup is not None:
                        self._fold(
                            batch,
                            dup,
                            NewMemory(
                                content=rec.content, importance=rec.importance, tags=rec.tags
                            ),
                            now,
                            1.0,
                            "import duplicate",
                        )
                        merged += 1
                        continue
                assert vec is not None
                batch.inserts.append((rec, vec))
                batch.log(rec.id, rec.namespace, "ADD", None, rec.content, "import")
            live = [(r, v) for r, v in batch.inserts if r.alive]
            dead = [(r, v) for r, v in batch.inserts if not r.alive]
            batch.inserts = live + dead
            self._commit_import(batch, now, dead_ids=[r.id for r, _ in dead])
        return len(batch.inserts), merged

    def _commit_import(self, batch: _Batch, now: float, dead_ids: builtins.list[str]) -> None:
        self._commit(batch, now)
        if dead_ids:  # deleted or superseded rows are kept in the file, not searchable
            self._index.remove(dead_ids)

    # -- re-embedding ---------------------------------------------------------------------

    def reembed(
        self, *, embedder: Embedder | None = None, progress: ProgressCallback | None = None
    ) -> ReembedReport:
        """Rebuild every vector with ``embedder`` (default: the current one).

        Args:
            embedder: A new embedder to switch to (any dimension).
            progress: ``progress(done, total)``; see :func:`rich_progress`.
        """
        with self._write_lock:
            self._check_open()
            self._flush_touches(self._wcur, own_txn=True)
            meta = read_meta(self._wcur)
            if embedder is not None:
                self._embedder = embedder
                self._dim = int(embedder.dim)
            report = self._reembed(
                meta.get("embedder_name", ""), int(meta.get("embedder_dim", "0") or 0), progress
            )
            self._rebuild_index()
            return report

    def _reembed(
        self, old_name: str, old_dim: int, progress: ProgressCallback | None
    ) -> ReembedReport:
        started = time.perf_counter()
        cur = self._wcur
        ids_contents = cur.execute("SELECT id, content FROM memories ORDER BY id").fetchall()
        total = len(ids_contents)
        cur.execute("BEGIN TRANSACTION")
        try:
            if self._column_dim() != self._dim:
                self._set_embedding_column(self._dim)
            done = 0
            for start in range(0, total, 4096):
                chunk = ids_contents[start : start + 4096]
                vecs = self._embed([c for _, c in chunk])
                tbl = pa.table(
                    {
                        "id": pa.array([i for i, _ in chunk], type=pa.string()),
                        "embedding": pa.FixedSizeListArray.from_arrays(
                            pa.array(vecs.reshape(-1)), self._dim
                        ),
                    }
                )
                cur.register("_vec", tbl)
                try:
                    cur.execute(
                        "UPDATE memories SET embedding = v.embedding FROM _vec v "
                        "WHERE memories.id = v.id"
                    )
                finally:
                    cur.unregister("_vec")
                done += len(chunk)
                if progress is not None:
                    progress(done, total)
            write_meta(cur, {"embedder_name": self._embedder.name, "embedder_dim": str(self._dim)})
            self._commit_txn(cur)
        except BaseException:
            with suppress(duckdb.Error):
                cur.execute("ROLLBACK")
            raise
        seconds = time.perf_counter() - started
        log.info(
            "store.reembedded",
            path=self.path,
            old=old_name,
            new=self._embedder.name,
            memories=total,
        )
        return ReembedReport(
            embedder=self._embedder.name,
            dim=self._dim,
            previous_embedder=old_name,
            previous_dim=old_dim,
            memories=total,
            seconds=seconds,
        )


# -- helpers --------------------------------------------------------------------------------


def _query_text(query: str) -> str:
    """The text embedded for a query: its words without stopwords (if any remain).

    Question words ("when did", "what is") pull a static embedding towards
    other questions rather than towards the facts that answer them.
    """
    words = [w for w in _WORD_RE.findall(query) if w.casefold() not in STOPWORDS]
    return " ".join(words) if words else query


def _check_limit(limit: object) -> None:
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= _MAX_LIMIT:
        raise InvalidMemoryError(f"limit must be an int in 1..{_MAX_LIMIT}, got {limit!r}")


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


def _jaccard(a: str, b: str) -> float:
    sa, sb = set(a.casefold().split()), set(b.casefold().split())
    if not sa and not sb:
        return 1.0
    return len(sa & sb) / len(sa | sb)


def _check_path(
    path: str | os.PathLike[str], *, must_exist: bool
) -> tuple[Path, Literal["parquet", "jsonl"]]:
    if not isinstance(path, str | os.PathLike):
        raise InvalidMemoryError(f"path must be a str or PathLike, got {type(path).__name__}")
    target = Path(path).expanduser()
    if "\x00" in str(target):
        raise InvalidMemoryError("path contains a NUL byte")
    try:
        os.fsencode(target)
    except UnicodeEncodeError:
        raise InvalidMemoryError(
            f"path {str(target)!r} cannot be encoded for the file system"
        ) from None
    suffix = target.suffix.lower()
    fmt: Literal["parquet", "jsonl"]
    if suffix == ".parquet":
        fmt = "parquet"
    elif suffix in (".jsonl", ".ndjson"):
        fmt = "jsonl"
    else:
        raise InvalidMemoryError(f"{target}: expected a .parquet or .jsonl file")
    if target.is_dir():
        raise InvalidMemoryError(f"{target} is a directory")
    if must_exist and not target.is_file():
        raise InvalidMemoryError(f"{target} does not exist")
    if not must_exist and not target.parent.is_dir():
        raise InvalidMemoryError(f"folder {target.parent} does not exist")
    return target, fmt


def _read_rows(source: Path, fmt: Literal["parquet", "jsonl"]) -> list[dict[str, Any]]:
    if fmt == "parquet":
        import pyarrow.parquet as pq

        try:
            rows: list[dict[str, Any]] = pq.read_table(str(source)).to_pylist()
        except (pa.ArrowException, OSError) as exc:
            raise InvalidMemoryError(f"{source} is not a readable Parquet file: {exc}") from exc
        return rows
    out: list[dict[str, Any]] = []
    with open(source, "rb") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                value = msgspec.json.decode(line)
            except msgspec.DecodeError as exc:
                raise InvalidMemoryError(f"{source}:{lineno}: invalid JSON: {exc}") from exc
            if not isinstance(value, dict):
                raise InvalidMemoryError(f"{source}:{lineno}: expected a JSON object")
            out.append(value)
    return out


@contextmanager
def rich_progress(description: str = "re-embedding") -> Iterator[ProgressCallback]:
    """A ``progress(done, total)`` callback that draws a rich progress bar.

    Example:
        >>> with rich_progress() as cb:                     # doctest: +SKIP
        ...     store.reembed(progress=cb)
    """
    from rich.progress import Progress

    with Progress(transient=True) as bar:
        task = bar.add_task(description, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update

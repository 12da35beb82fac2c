"""DuckDBStore: the embedded long-term memory store.

Storage
    One DuckDB file is the store of record (``memories``, ``history``,
    ``schema_version``, ``store_meta``; see :mod:`actormem.store._schema`).
    A small write (a single memory, a keyed fact, a group commit of up to 64
    inserts, the journal's tables) is acknowledged once its record is synced
    in the store's own log, ``<db>.acklog``
    (:mod:`~actormem.store._acklog`, :mod:`~actormem.store._duckdb_logged`):
    when the write method returns it is on disk and in the index, and a
    background applier moves pending records into DuckDB in one transaction
    (one literal ``BEGIN; ...; COMMIT`` call, the inserts as one Arrow table
    when there are many).  Every read that goes to DuckDB and every direct
    write applies the pending records first; at open, records DuckDB lacks
    are replayed.  Larger batches are committed directly, as Arrow tables
    (``INSERT ... SELECT`` from a registered table) -- never
    ``executemany``; when such a write returns, it is committed.

Search
    A :class:`~actormem.store._index.MemoryIndex` in RAM holds the live
    memories' vectors and BM25 postings.  At open it is loaded from its
    snapshot beside the file (``<db>.index``) when that is valid, else rebuilt
    from the rows (:mod:`~actormem.store._duckdb_open`).  It is updated right
    after each commit, before the write returns, so the very next search sees
    the write.  Searches never touch DuckDB: the query
    vector is never bound as a SQL parameter.  A scope of 20k memories or
    more (``approx_search_min_rows``) is ranked by vectors projected onto a
    quarter of the dimensions first and its best 2,000 re-scored exactly;
    smaller scopes are exact.

Concurrency
    One process owns the file; a second one gets :class:`StoreLockedError`
    naming the file, and so does a second store object on it in the same
    process (:mod:`~actormem.store._duckdb_claim`).  Inside the process,
    writes are serialised by a single writer lock and run on one writer
    cursor; reads that go to DuckDB (``get``, ``list``, analytics, export)
    use one cursor per thread, so many threads may read while one writes
    (DuckDB's MVCC shows them committed data).  Searches read the index
    under its own short lock.

Access statistics
    A search counts its hits (``access_count``/``last_accessed``) in the index
    at once and in a pending buffer for the file; the buffer is written in one
    batched UPDATE at the start of the next write, on :meth:`flush`, on
    :meth:`close` and every ``touch_flush_interval`` seconds by a background
    thread.  A crash can lose at most those unflushed counters.

Shared with every backend (:class:`~actormem.store._base.StoreBase`): the
public write, maintenance, import/export and search entry points; the
decisions of :mod:`~actormem.store._planning`, the ranking of
:mod:`~actormem.store._ranking`, the file formats of
:mod:`~actormem.store._files`.  This module keeps the connection, open and
close, the transactions' plumbing and search; the rest is in mixins, one
responsibility each: the direct write path and access counts in
:mod:`~actormem.store._duckdb_write`, small writes through the acknowledgement
log in :mod:`~actormem.store._duckdb_logged`, open-time checks and the index
snapshot in :mod:`~actormem.store._duckdb_open`, reads and analytics in
:mod:`~actormem.store._duckdb_queries`, the journal's tables in
:mod:`~actormem.store._duckdb_journal`.

Values reach DuckDB as bound parameters, Arrow tables, or -- for small
writes and reads on the turn's path -- literals written by
:func:`~actormem.store._duckdb_sql.lit` (only ``None``, bools, numbers and
NUL-free strings, quoted the SQL-standard way; see that module for why).
Column names in generated SQL come from fixed tuples, never from callers.
"""

from __future__ import annotations

import builtins
import os
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from pathlib import Path
from typing import Any, Final, Literal, TypeVar

import duckdb
import numpy as np
import numpy.typing as npt
import structlog

from actormem._pace import mark_background, rest
from actormem._special_files import check_regular
from actormem.models.base import Embedder
from actormem.store._acklog import AckLog, replay
from actormem.store._acklog_start import StartSlot, replay_start
from actormem.store._at_exit import OPEN_STORES
from actormem.store._base import StoreBase
from actormem.store._commits import CommitRecord, check_commits, start_commit_count
from actormem.store._content_hash import content_hash
from actormem.store._duckdb_claim import claim_file, locked_message, release_file
from actormem.store._duckdb_journal import DuckDBJournal
from actormem.store._duckdb_logged import DuckDBLogged
from actormem.store._duckdb_open import DuckDBOpening
from actormem.store._duckdb_queries import DuckDBQueries, _scope_sql
from actormem.store._duckdb_rows import import_arrow_scan
from actormem.store._duckdb_sql import lit
from actormem.store._duckdb_write import DuckDBWrites
from actormem.store._files import rich_progress
from actormem.store._group_commit import GroupCommit
from actormem.store._index import APPROX_MIN_ROWS
from actormem.store._index_file import INDEX_SNAPSHOT_MIN_ROWS, SnapshotCheck
from actormem.store._index_since import SinceLog
from actormem.store._limits import STORE_SETTINGS
from actormem.store._protocol import ProgressCallback
from actormem.store._ranking import Scored
from actormem.store._records import (
    check_namespace,
)
from actormem.store._relevance import RelevanceWeights
from actormem.store._rerank import QueryRerank
from actormem.store._schema import ensure_schema
from actormem.store._types import (
    ForgetReport,
    InvalidMemoryError,
    MemoryRecord,
    Namespace,
    ReembedReport,
    SearchConfig,
    SearchFilters,
    SearchMode,
    StoreClosedError,
    StoreError,
    StoreLockedError,
)

__all__ = ["DuckDBStore", "content_hash", "rich_progress"]

log = structlog.get_logger(__name__)

#: The storage format of the store files this creates (a file keeps the format
#: it was created with).  DuckDB's default stays readable by DuckDB 1.0 and for
#: that converts the primary key's whole ART index to the old layout at every
#: checkpoint: 44% of a checkpoint's CPU at 1M memories, growing with the
#: table; with 1.2's format a checkpoint after 5,000 new keys of 300k took
#: 0.04 s of CPU against 0.15 s.  DuckDB is pinned to 1.5, which reads both.
STORAGE_VERSION: Final = "v1.2.0"

#: Stores not closed yet: closed at interpreter exit after the runtimes (``_at_exit``).
_OPEN_STORES = OPEN_STORES


#: Longest ``close()`` waits for the background warm-up's current step (a model load).
_WARM_JOIN_TIMEOUT = 120.0

F32 = npt.NDArray[np.float32]
T = TypeVar("T")
Key = tuple[str, str, str, str]


class DuckDBStore(
    DuckDBLogged, DuckDBWrites, DuckDBOpening, DuckDBQueries, DuckDBJournal, StoreBase
):
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
        on_lost_commits: Literal["error", "warn"] = "error",
        index_snapshot_min_rows: int | None = INDEX_SNAPSHOT_MIN_ROWS,
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
                (see :mod:`~actormem.store._index_vectors`; recall@10
                against exact search 0.996-1.0 at 100k with WordLlama);
                ``None`` keeps every search exact.
            on_lost_commits: What to do when commits that were acknowledged
                are missing after DuckDB replayed its WAL (a damaged or
                removed ``.wal``; see :mod:`actormem.store._commits`):
                ``"error"`` refuses to open and leaves the files as they are;
                ``"warn"`` accepts the loss, opens, logs
                ``store.commits_lost`` and sets :attr:`lost_commits`.
            index_snapshot_min_rows: On close, a store holding at least this
                many live memories writes its search index beside the file
                (``<file>.index``, see :mod:`actormem.store._index_file`) when
                it changed, so the next open loads it instead of rebuilding
                it from the file; ``None`` never writes one (a snapshot found
                is still used when valid).

        Raises:
            StoreLockedError: Another process has the file open.
            SchemaVersionError: The file is from a newer actormem.
            EmbedderMismatchError: See ``on_embedder_mismatch``.
            StoreError: The file cannot be opened: it is damaged (a garbled
                or truncated database file), or acknowledged commits are
                missing (see ``on_lost_commits``).  The message names the file.
        """

        def check_duckdb_args() -> None:
            for name, value in (
                ("checkpoint_mb", checkpoint_mb),
                ("approx_search_min_rows", approx_search_min_rows),
                ("touch_flush_interval", touch_flush_interval),
                ("index_snapshot_min_rows", index_snapshot_min_rows),
            ):
                STORE_SETTINGS[name].check(value, name, error=InvalidMemoryError)
            if on_lost_commits not in ("error", "warn"):
                raise InvalidMemoryError(
                    f"on_lost_commits must be 'error' or 'warn', got {on_lost_commits!r}"
                )

        self._init_common(
            embedder,
            near_duplicate_threshold,
            max_memories,
            search_config,
            relevance_weights,
            clock,
            check_duckdb_args,
        )
        # an embedder whose vectors spread evenly over every dimension by construction
        # (hashed features) loses neighbours in any projection: its searches stay exact
        isotropic = getattr(embedder, "isotropic", False) is True
        self._approx_min = None if isotropic else approx_search_min_rows
        self._snapshot_min = index_snapshot_min_rows
        self._closed = False
        self._write_lock = threading.RLock()
        self._local = threading.local()
        self._cursors: builtins.list[tuple[threading.Thread, Any]] = []
        self._cursors_lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._log_seqs: dict[tuple[str, str, str, str], int] = {}
        #: The ids the transaction in progress writes (None: not declared, see
        #: :meth:`_committing`) and the index's since-file (see _index_since).
        self._txn_ids: set[str] | None = None
        self._since: SinceLog | None = None
        self._group = GroupCommit(
            self._write_lock, self._commit, lambda: self._clock(), self._check_open
        )

        self.path = str(path)
        if self.path != ":memory:":
            file = Path(self.path)
            if file.is_dir():
                raise StoreError(f"{self.path} is a directory, expected a database file")
            # DuckDB opens these itself: a FIFO among them would block it forever.
            for part, what in ((self.path, "store file"), (self.path + ".wal", "store WAL")):
                check_regular(part, what, StoreError)
            file.parent.mkdir(parents=True, exist_ok=True)
        self._commits = CommitRecord(self.path) if self.path != ":memory:" else None
        if self.path != ":memory:":
            self._init_logged(AckLog(self.path), StartSlot(self.path))
        else:
            self._init_logged(None)
        self._store_id, self._seq = "", 0
        #: Acknowledged commits found missing on open (``on_lost_commits="warn"``).
        self.lost_commits = 0
        # The index snapshot's checksums are verified while DuckDB opens (see _open_index).
        self._snapshot_check = (
            SnapshotCheck(self.path + ".index")
            if self.path != ":memory:" and os.path.isfile(self.path + ".index")
            else None
        )
        try:
            self._con = duckdb.connect(
                self.path, config={"storage_compatibility_version": STORAGE_VERSION}
            )
        except BaseException as exc:
            self._cancel_snapshot_check()
            if isinstance(exc, duckdb.IOException) and "could not set lock" in str(exc).lower():
                raise StoreLockedError(locked_message(self.path, str(exc))) from exc
            if isinstance(exc, duckdb.Error):
                raise StoreError(f"cannot open {self.path} (damaged?): {exc}") from exc
            raise
        self._file_key: tuple[int, int] | None = None
        try:
            if self.path != ":memory:":
                self._file_key = claim_file(self.path)
            self._wcur = self._con.cursor()
            # A commit appends to the WAL (and syncs it); DuckDB folds the WAL into
            # the file at this size and on close.  The default (16MB) checkpoints
            # every few batches and cut batched ingest by a factor of two.
            self._wcur.execute(f"SET checkpoint_threshold = '{checkpoint_mb}MB'")
            # Embeddings are 4-byte floats with random low bits: ALP_RD, DuckDB's
            # choice for them, made the 1M-memory file 44% larger than storing
            # them raw (1,863 MB against 1,294 MB) and costs CPU at every
            # checkpoint.  This connection is the store's own database instance.
            self._wcur.execute("SET disabled_compression_methods = 'alp,alprd'")
            recorded = None
            if self._acklog is not None:  # acknowledged writes DuckDB lacks, first
                replay(self._wcur, self._acklog, self.path)
                if self._slot is not None:  # then a turn's start the log never got
                    replay_start(self._wcur, self._slot, self._acklog.path, self.path)
            if self._commits is not None:  # before anything is written to the file
                recorded, self.lost_commits = check_commits(
                    self._wcur, self._commits, self.path, on_lost_commits
                )
            ensure_schema(self._wcur, self._dim, self.path)
            self._store_id, self._seq = start_commit_count(
                self._wcur, self._commits, recorded, self.lost_commits
            )
            #: The report of the re-embedding done on open (on_embedder_mismatch="reembed").
            self.last_reembed: ReembedReport | None = None
            self._check_embedder(on_embedder_mismatch, progress)
            self._open_index(progress)
            if self._acklog is not None:  # every record it held is in DuckDB now
                self._acklog.start(self._store_id)
            if self._slot is not None:
                self._slot.start(self._store_id)
            self._keep_private()
        except BaseException as exc:
            self._cancel_snapshot_check()
            with suppress(duckdb.Error):
                self._con.close()
            if self._commits is not None:
                self._commits.close()
            if self._acklog is not None:
                self._acklog.close(remove=False)
            if self._slot is not None:
                self._slot.close(clear=False)
            release_file(self._file_key)
            if isinstance(exc, duckdb.Error):  # a damaged file: name it, not a raw duckdb error
                raise StoreError(f"cannot open {self.path} (damaged?): {exc}") from exc
            raise
        if self._acklog is not None:  # its applier's first batched insert scans Arrow
            import_arrow_scan()
        self._start_flusher(touch_flush_interval, f"actormem-store-flush:{Path(self.path).name}")
        self._start_applier()
        self._warmer: threading.Thread | None = None
        if getattr(self._embedder, "warm_on_open", False):  # local models; never a network call
            self._warmer = threading.Thread(
                target=self._warm_up,
                name=f"actormem-store-warmup:{Path(self.path).name}",
                daemon=True,
            )
            self._warmer.start()
        self._owner_pid = os.getpid()
        _OPEN_STORES.add(self)
        log.info("store.opened", path=self.path, memories=len(self._index), dim=self._dim)

    def _cancel_snapshot_check(self) -> None:
        check, self._snapshot_check = self._snapshot_check, None
        if check is not None:
            check.cancel()

    def __enter__(self) -> DuckDBStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{len(self._index)} live memories"
        return f"DuckDBStore({self.path!r}, {state})"

    def _warm_up(self) -> None:
        """Load the embedder and the second stage's word vectors off the caller's path.

        Runs once in the background after open when the embedder sets
        ``warm_on_open`` (the bundled WordLlama does), so the first search does not
        pay for loading the model (about 0.4-0.8 s for WordLlama here); a
        search that arrives earlier waits for the load it would have done
        anyway.  Failures are left for the real call to report.
        """
        stopping = self._stop.is_set  # set first thing by close()
        mark_background()  # its long loops pause now and then (see actormem._pace)
        try:
            if not stopping():
                self._embed(["warm up the query path"])
            words = getattr(self._embedder, "word_vectors", None)
            if callable(words) and not stopping():
                words(["warm"])  # builds the model's whole-word table (~0.15 s)
            if not stopping():
                self._reranker.prepare("warm up the query path", self._config)
        except Exception as exc:
            log.debug("store.warm_up_failed", path=self.path, error=str(exc))
        finally:
            rest()  # its paced work is done: another thread's turn (see actormem._pace)

    def _join_warmer(self) -> None:
        """Wait for the warm-up to end its step: no thread of the store outlives ``close()``.

        A warm-up still loading the model when the interpreter exits is a daemon
        thread killed inside native code: the process aborted ("FATAL: exception
        not rethrown", SIGABRT) in 1 of 5 loaded runs of a short ``actormem chat``.
        Each step first checks the stop event ``close()`` has set, so this waits
        for one step at most.
        """
        warmer = self._warmer
        if warmer is None or warmer is threading.current_thread():
            return
        warmer.join(_WARM_JOIN_TIMEOUT)
        if warmer.is_alive():  # pragma: no cover - a model load stuck for minutes
            log.warning("store.warm_up_still_running", path=self.path)

    def _keep_private(self) -> None:
        """Make the database file and its WAL readable by their owner only.

        DuckDB creates both with the process umask (usually 0644) and deletes
        and re-creates the WAL at every checkpoint, so this runs after each
        commit (one ``stat`` when nothing needs changing).
        """
        if self.path == ":memory:":
            return
        for p in (self.path, self.path + ".wal", self.path + ".commits"):
            try:
                if os.stat(p).st_mode & 0o077:
                    os.chmod(p, 0o600)
            except FileNotFoundError:
                pass
            except OSError as exc:  # pragma: no cover - e.g. a file owned by another user
                log.warning("store.chmod_failed", path=p, error=str(exc))

    def _seq_sql(self) -> str:
        """The statement that counts the next commit in the file."""
        # a literal, not a parameter (see actormem.store._duckdb_sql)
        return f"UPDATE store_meta SET value = {lit(str(self._seq + 1))} WHERE key = 'commit_seq'"

    def _committed(self) -> None:
        """Count a commit that returned in the commit record."""
        self._seq += 1
        if self._commits is not None:  # after the commit: the record never runs ahead
            self._commits.write(self._store_id, self._seq)
        self._keep_private()

    def _committing(self) -> None:
        """Note the ids the transaction declared for the next commit number, before it commits.

        A transaction that declared nothing (``_txn_ids`` None) ends the
        since-file: the index snapshot cannot be caught up past it.
        """
        ids, self._txn_ids = self._txn_ids, None
        self._note_commit(self._seq + 1, ids)

    def _commit_txn(self, cur: Any) -> None:
        """Commit, counting the commit in the file and then in the commit record."""
        cur.execute(self._seq_sql())
        self._committing()
        cur.execute("COMMIT")
        self._committed()

    def _run_script(
        self, what: str, statements: builtins.list[str], ids: Iterable[str] | None = None
    ) -> None:
        """Run ``statements`` and the commit count as one transaction in one call.

        One ``execute`` of ``BEGIN; ...; COMMIT`` instead of one per statement:
        each call into DuckDB's client costs its own round of parsing, binding
        and Python overhead.  A failing statement leaves the transaction open
        and aborted; it is rolled back.  The caller holds the writer lock.
        ``ids``: the memories the statements write (None: unknown).
        """
        self._drain()
        cur = self._wcur
        script = ";\n".join(["BEGIN TRANSACTION", *statements, self._seq_sql(), "COMMIT"])
        self._txn_ids = None if ids is None else set(ids)
        self._committing()
        try:
            cur.execute(script)
        except BaseException as exc:
            with suppress(duckdb.Error):
                cur.execute("ROLLBACK")
            if isinstance(exc, duckdb.Error):
                raise StoreError(
                    f"{what} in {self.path} failed and was rolled back: {exc}"
                ) from exc
            raise
        self._committed()

    def close(self) -> None:
        """Flush access counters, stop the flusher and close the file (idempotent)."""
        if self._closed:
            return
        _OPEN_STORES.discard(self)
        if os.getpid() != getattr(self, "_owner_pid", os.getpid()):
            # A forked child (its exit closes what is open): the files, the log
            # and the threads are the parent's; closing them here truncated the
            # parent's log under its pending records.  Only forget the store.
            self._closed = True
            log.warning("store.close_in_forked_child", path=self.path, owner=self._owner_pid)
            return
        self._stop_flusher()
        self._stop_applier()
        self._join_warmer()
        with self._write_lock:
            applied = True
            try:
                try:
                    self._drain()
                except Exception as exc:  # whatever failed, the log is kept
                    # they stay in the log: the next open replays them.  Any
                    # failure counts: cutting the log over records DuckDB does
                    # not hold loses acknowledged writes.
                    applied = False
                    log.error("store.apply_failed_on_close", path=self.path, error=repr(exc))
                if applied:  # a failed drain would fail the touches' flush too
                    try:
                        self._flush_touches(self._wcur, own_txn=True)
                    except (duckdb.Error, StoreError) as exc:  # disk failure on close
                        log.warning("store.flush_failed_on_close", path=self.path, error=str(exc))
                    else:  # the index then holds access counts the file lacks: no snapshot
                        self._save_index_checkpointing()
            finally:  # whatever failed above, the file and its logs are closed
                self._close_files(applied=applied)
        self._keep_private()
        log.info("store.closed", path=self.path)

    def _save_index_checkpointing(self) -> None:
        """Write the index snapshot on close while DuckDB checkpoints beside it.

        Closing the connection checkpoints DuckDB (folds the WAL, up to
        ``checkpoint_mb``, into the file); the snapshot is the index's copy.
        They share nothing: the checkpoint runs first on the writer thread
        (DuckDB releases the GIL) while this thread encodes and writes the
        snapshot, so a close waits for the longer of the two, not their sum
        (1M memories: a 3.8 s checkpoint beside a 21 s snapshot at load 8).
        A failed checkpoint is left to the connection's close, as before.
        """
        if self.path == ":memory:":
            self._save_index()
            return

        def checkpoint() -> None:
            try:
                self._wcur.execute("CHECKPOINT")
            except duckdb.Error as exc:  # e.g. a reader's transaction still open
                log.info("store.close_checkpoint_deferred", path=self.path, error=str(exc))

        try:
            done = self._writer_pool().submit(checkpoint)
        except RuntimeError:  # the interpreter is shutting down (a close at exit): no new threads
            checkpoint()
            self._save_index()
            return
        try:
            self._save_index()
        finally:
            done.result()

    def _close_files(self, *, applied: bool) -> None:
        """The closing steps of :meth:`close` that must run whatever failed before them."""
        self._closed = True
        try:
            if self._acur is not None:
                with suppress(duckdb.Error):
                    self._acur.close()
            if self._since is not None:
                self._since.close()
            with self._cursors_lock:
                for _, cur in self._cursors:
                    with suppress(duckdb.Error):
                        cur.close()
                self._cursors.clear()
            if self._pool is not None:
                self._pool.shutdown(wait=True)
        finally:
            with suppress(duckdb.Error):
                self._wcur.close()
            try:
                self._con.close()
            finally:
                if self._commits is not None:
                    self._commits.close()
                if self._acklog is not None:
                    self._acklog.close(remove=applied)
                if self._slot is not None:
                    self._slot.close(clear=applied)
                release_file(self._file_key)

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError(f"store {self.path} is closed")

    def _indexed_record(self, memory_id: str) -> MemoryRecord | None:
        """The live memory ``memory_id`` from the index (current access figures)."""
        return self._index.record(memory_id)

    def _indexed_tagged(self, namespace: Namespace, kind: str, tag: str) -> list[MemoryRecord]:
        """The live memories of ``kind`` inside ``namespace`` tagged ``tag``, from the index.

        What :class:`~actormem.recorder.KeyedFacts` asks on a key it does not
        know: answered without a DuckDB read (which first applies every pending
        write: tens of milliseconds on a busy machine, a save's p99).
        """
        self._check_open()
        rows = self._index.scope_rows(
            check_namespace(namespace), SearchFilters(kinds=(kind,), tags_all=(tag,))
        )
        return [r for r in self._index.records(rows) if tag in r.tags]

    @property
    def change_counter(self) -> int:
        """The number of this store's last commit: unchanged means nothing was written."""
        return self._seq

    def _reader(self) -> Any:
        """This thread's read cursor (acknowledged writes applied to DuckDB first)."""
        self._check_open()
        self._drain_locked()
        return self._cursor()

    def _cursor(self) -> Any:
        """This thread's read cursor as it is: DuckDB lacks the writes still pending
        in the store's log (a read that looks at them itself, see ``last_ops``)."""
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
        where, params = _scope_sql(check_namespace(namespace))

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
            self._log_seqs.clear()
            return ids, n_hist

        with self._write_lock:
            ids, n_hist = self._write_txn("forget", delete_all)
            self._index.remove(ids, purge=True)
            self._reranker.clear()  # its caches hold words of the forgotten memories
            self._drop_pending(ids)
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

    # -- search ---------------------------------------------------------------------------

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
        """Rank from the in-memory index (never DuckDB: no vector bound as a parameter)."""
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
        return list(zip(scored, records, strict=True))

    def _write_txn(
        self, what: str, fn: Callable[[Any], Any], ids: Iterable[str] | None = None
    ) -> Any:
        """Run ``fn(cursor)`` in one write transaction under the writer lock."""
        with self._write_lock:
            self._check_open()
            return self._run_txn(what, fn, ids)

    def _run_txn(
        self, what: str, fn: Callable[[Any], Any], ids: Iterable[str] | None = None
    ) -> Any:
        """Run ``fn(cursor)`` in one transaction on the write cursor; roll back on error.

        The caller holds the writer lock (possibly on another thread: batched
        writes commit on the writer pool while the caller's thread holds it).
        ``ids``: the memories ``fn`` writes, besides those it declares itself
        (:meth:`_declare`); None: unknown (ends the since-file).
        """
        self._drain()
        cur = self._wcur
        try:
            cur.execute("BEGIN TRANSACTION")
            self._txn_ids = None if ids is None else set(ids)
            out = fn(cur)
            self._commit_txn(cur)
        except BaseException as exc:
            self._txn_ids = None
            with suppress(duckdb.Error):
                cur.execute("ROLLBACK")
            if isinstance(exc, duckdb.Error):
                raise StoreError(
                    f"{what} in {self.path} failed and was rolled back: {exc}"
                ) from exc
            raise
        return out

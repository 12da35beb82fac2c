"""Open-time checks, the search index's snapshot or rebuild, and re-embedding.

A mixin of :class:`~actormem.store.DuckDBStore`, kept apart from its writes
and searches: everything here runs when the store opens (is the embedder the
one the file was built with? is the index snapshot beside the file still
valid, or must the index be rebuilt from the rows?) or when every vector is
rebuilt (:meth:`reembed`).  All of it runs under the store's writer lock on
the writer cursor.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Sequence
from contextlib import suppress
from typing import TYPE_CHECKING, Any, Literal

import duckdb
import numpy as np
import numpy.typing as npt
import pyarrow as pa
import structlog

from actormem.models.base import Embedder
from actormem.store._duckdb_queries import _SELECT, _one
from actormem.store._duckdb_sql import UnsafeLiteral, lit
from actormem.store._duckdb_vectors import blob_array, vectors_of
from actormem.store._index import MemoryIndex
from actormem.store._index_file import (
    SnapshotCheck,
    SnapshotError,
    SnapshotIdentity,
    drop_snapshot,
    load_index,
    save_index,
)
from actormem.store._index_since import SinceLog, read_since, remove_since, since_cap
from actormem.store._protocol import ProgressCallback
from actormem.store._records import LIVE, row_to_record
from actormem.store._schema import SCHEMA_VERSION, read_meta, write_meta
from actormem.store._types import EmbedderMismatchError, MemoryRecord, ReembedReport

__all__ = ["DuckDBOpening"]

log = structlog.get_logger(__name__)

F32 = npt.NDArray[np.float32]

#: Ids per literal ``IN`` list of a catch-up (see ``_read_ids``).
_ID_LIST = 2_048
#: Up to this many ids a catch-up sends as literal lists; more are joined.
_MAX_LISTED_IDS = 32_768


class DuckDBOpening:
    """Open-time checks, index snapshot/rebuild and re-embedding of a DuckDB store."""

    path: str
    last_reembed: ReembedReport | None
    _wcur: Any
    _write_lock: threading.RLock
    _embedder: Embedder
    _dim: int
    _index: MemoryIndex
    _approx_min: int | None
    _snapshot_min: int | None
    _snapshot_seq: int
    _seq: int
    _store_id: str
    _since: SinceLog | None
    _txn_ids: set[str] | None
    #: The snapshot's checksums being verified since before DuckDB opened (see _open_index).
    _snapshot_check: SnapshotCheck | None
    lost_commits: int

    if TYPE_CHECKING:  # provided by DuckDBStore and StoreBase

        def _check_open(self) -> None: ...

        def _commit_txn(self, cur: Any) -> None: ...

        def _flush_touches(self, cur: Any, *, own_txn: bool) -> int: ...

        def _embed(self, texts: Sequence[str]) -> F32: ...

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
            self._txn_ids = None  # changes the whole store: not caught up
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
                "or pass on_embedder_mismatch='reembed' to rebuild every vector",
                stored_name=None if name is None else str(name),
                stored_dim=dim,
            )
        self.last_reembed = self._reembed(name, dim, progress)

    def _column_dim(self) -> int | None:
        """The size of the stored vectors (of the first row holding one), None for none."""
        row = _one(
            self._wcur,
            "SELECT octet_length(embedding) FROM memories WHERE embedding IS NOT NULL LIMIT 1",
        )
        return None if row is None else int(row[0]) // 4

    def _count_all(self) -> int:
        row = _one(self._wcur, "SELECT count(*) FROM memories")
        return int(row[0]) if row else 0

    def _set_embedding_column(self, dim: int) -> None:
        """Forget vectors of another size than ``dim`` (the column holds bytes of any size)."""
        self._wcur.execute(
            f"UPDATE memories SET embedding = NULL WHERE octet_length(embedding) <> {int(dim) * 4}"
        )

    def _snapshot_identity(self, seq: int | None = None) -> SnapshotIdentity:
        return SnapshotIdentity(
            store_id=self._store_id,
            commit_seq=self._seq if seq is None else seq,
            schema_version=SCHEMA_VERSION,
            embedder=self._embedder.name,
            dim=self._dim,
            approx_min_rows=self._approx_min,
        )

    def _open_index(self, progress: ProgressCallback | None) -> None:
        """Load the index snapshot when it is valid, else rebuild the index from the file.

        A snapshot older than the file (the process died after writing) is
        still used when the since-file (:mod:`actormem.store._index_since`)
        names every commit after it: the rows those commits wrote are read
        again from DuckDB (:meth:`_catch_up`).
        """
        self._index = MemoryIndex(self._dim, approx_min_rows=self._approx_min)
        #: The commit number the index snapshot on disk matches (-1: none does).
        self._snapshot_seq = -1
        self._since = None
        if self.path == ":memory:":
            self._rebuild_index(progress)
            return
        snapshot, since_path = self.path + ".index", self.path + ".index.since"
        base, ids = self._seq, None
        since = None if self.lost_commits else read_since(since_path)
        if since is not None and since.store_id == self._store_id and since.base_seq < self._seq:
            ids = since.ids_through(self._seq)
            if ids is not None:
                base = since.base_seq
        check, self._snapshot_check = self._snapshot_check, None
        try:
            if load_index(self._index, snapshot, self._snapshot_identity(base), check):
                caught = ids is None or self._catch_up_checked(ids, base, check)
                if self._verified(check, snapshot):
                    if ids is None:
                        self._snapshot_seq = self._seq
                        self._since = SinceLog.start(since_path, self._store_id, self._seq)
                        return
                    if caught:
                        assert since is not None  # ids came from it
                        self._snapshot_seq = base
                        self._since = SinceLog.reopen(since_path, since)
                        return
                    drop_snapshot(snapshot)
                self._index = MemoryIndex(self._dim, approx_min_rows=self._approx_min)
        finally:
            if check is not None:
                check.cancel()  # done by now, or of no use
        remove_since(since_path)
        self._rebuild_index(progress)

    def _catch_up_checked(self, ids: set[str], base: int, check: SnapshotCheck | None) -> bool:
        """:meth:`_catch_up` of an index whose checksums may still be being verified.

        A snapshot that turns out damaged can make the catch-up fail in any
        way: its error then stands only if the checksums matched.
        """
        try:
            return self._catch_up(ids, base)
        except Exception:
            if check is None or not self._verified(check, self.path + ".index"):
                raise
            return False  # damaged: _verified logged it; the caller rebuilds

    def _verified(self, check: SnapshotCheck | None, snapshot: str) -> bool:
        """Whether the snapshot's checksums matched (no ``check``: verified at its load)."""
        if check is None:
            return True
        try:
            check.verified()
        except SnapshotError as exc:
            log.warning("store.index_snapshot_rebuilt", path=snapshot, reason=exc.reason)
            drop_snapshot(snapshot)
            return False
        return True

    def _catch_up(self, ids: set[str], base: int) -> bool:
        """Bring the index loaded as of commit ``base`` to the file's: re-read ``ids``.

        Returns:
            Whether the index then holds as many live memories as the file
            (else the caller rebuilds it).
        """
        t0 = time.perf_counter()
        index = self._index
        if ids:
            index.remove(ids)
            listed = self._read_listed(sorted(ids))
            if listed is None:
                self._read_joined(index, ids)
            elif listed[0]:
                index.add(*listed)
        live = self._count_live()
        if len(index) != live:
            log.warning(
                "store.index_snapshot_rebuilt",
                path=self.path,
                reason=f"caught up from commit {base} to {self._seq} it holds {len(index)} "
                f"live memories, the file {live}",
            )
            return False
        log.info(
            "store.index_caught_up",
            path=self.path,
            snapshot_seq=base,
            commit_seq=self._seq,
            rows=len(ids),
            seconds=round(time.perf_counter() - t0, 3),
        )
        return True

    def _note_commit(self, seq: int, ids: Iterable[str] | None) -> None:
        """Note in the since-file that commit ``seq`` writes ``ids`` (None: unknown, end it)."""
        since = self._since
        if since is None:
            return
        if ids is None:
            since.drop("a commit that does not say which memories it writes", seq)
        else:
            since.note(seq, ids)
            cap = since_cap(self._index.rows)
            if since.noted > cap:  # bounded: a crash from here on rebuilds (see _index_since)
                since.drop(f"its entries name {since.noted} ids, past its cap of {cap}", seq)
        if not since.active:
            self._since = None

    def _declare(self, ids: Iterable[str]) -> None:
        """Add ``ids`` to what the transaction in progress writes (if it declares at all)."""
        if self._txn_ids is not None:
            self._txn_ids.update(ids)

    def _save_index(self) -> None:
        """Write the index snapshot on close when the index changed since the one on disk.

        The since-file goes first and a new one is started after the
        snapshot is written: a crash in between leaves the new snapshot
        alone, never paired with the old snapshot's entries.
        """
        if self.path == ":memory:" or self._snapshot_seq == self._seq:
            return
        snapshot, since_path = self.path + ".index", self.path + ".index.since"
        if self._since is not None:
            self._since.close()
            self._since = None
        remove_since(since_path)
        if self._snapshot_min is None or len(self._index) < self._snapshot_min:
            drop_snapshot(snapshot)  # stale now: never leave it to be misread
            return
        if save_index(self._index, snapshot, self._snapshot_identity()):
            self._snapshot_seq = self._seq
            self._since = SinceLog.start(since_path, self._store_id, self._seq)

    def _rebuild_index(self, progress: ProgressCallback | None = None) -> None:
        """Load every live memory (and its vector) from the file into a fresh index."""
        index = MemoryIndex(self._dim, approx_min_rows=self._approx_min)
        total = self._count_live()
        done = 0
        reader = self._wcur.execute(
            f"SELECT {_SELECT}, embedding FROM memories WHERE {LIVE} ORDER BY created_at, rowid"
        ).to_arrow_reader(50_000)
        for batch in reader:
            done += self._add_rows(index, batch)
            if progress is not None:
                progress(done, total)
        self._index = index

    def _read_listed(self, ids: list[str]) -> tuple[list[MemoryRecord], F32] | None:
        """The live records of ``ids`` with their vectors, in the rebuild's order.

        A few thousand ids (a crash's catch-up) are asked for in lists of
        literals: DuckDB filters the id column alone and fetches the other
        columns of the matching rows only (0.06 s for 5,250 ids at 1M, where
        an Arrow table of ids joined by rowid took 0.3 s plus 0.2-0.3 s to
        import ``pyarrow.dataset`` at its first registration).

        Returns:
            None for too many ids, or one with no literal (a NUL character):
            the caller joins them (:meth:`_read_joined`).
        """
        if len(ids) > _MAX_LISTED_IDS:
            return None
        try:
            chunks = [
                ",".join(map(lit, ids[i : i + _ID_LIST])) for i in range(0, len(ids), _ID_LIST)
            ]
        except UnsafeLiteral:
            return None
        records: list[MemoryRecord] = []
        parts: list[F32] = []
        keys: list[Any] = []
        for chunk in chunks:
            table = self._wcur.execute(
                f"SELECT {_SELECT}, embedding, rowid FROM memories WHERE {LIVE} AND id IN ({chunk})"
            ).to_arrow_table()
            for batch in table.to_batches():
                got, vecs = self._decode_rows(batch)
                records.extend(got)
                parts.append(vecs)
                keys.append(batch.column(19).to_numpy())
        if not records:
            return [], np.zeros((0, self._dim), dtype=np.float32)
        created = np.array([r.created_at for r in records])
        order = np.lexsort((np.concatenate(keys), created)).tolist()  # created_at, rowid
        return [records[i] for i in order], np.concatenate(parts)[order]

    def _read_joined(self, index: MemoryIndex, ids: set[str]) -> None:
        """Add the live rows of many ``ids`` to ``index``, joined from a registered table."""
        cur = self._wcur
        # Rows by id, then by rowid: a filter on ids alone made DuckDB read
        # every column of every row (the vectors: a gigabyte at 1M) before
        # joining -- 7.6 s against 0.4 s for 5,250 ids at 1M.
        cur.register("_since_ids", pa.table({"id": pa.array(sorted(ids), type=pa.string())}))
        try:
            found = cur.execute(
                "SELECT rowid FROM memories WHERE id IN (SELECT id FROM _since_ids)"
            ).to_arrow_table()
        finally:
            cur.unregister("_since_ids")
        cur.register("_since_rows", pa.table({"r": found.column(0)}))
        try:
            reader = cur.execute(
                f"SELECT {_SELECT}, embedding FROM memories WHERE {LIVE} "
                "AND rowid IN (SELECT r FROM _since_rows) ORDER BY created_at, rowid"
            ).to_arrow_reader(50_000)
            for batch in reader:
                self._add_rows(index, batch)
        finally:
            cur.unregister("_since_rows")

    def _decode_rows(self, batch: Any) -> tuple[list[MemoryRecord], F32]:
        """Records and vectors of an Arrow batch of ``SELECT {_SELECT}, embedding`` rows."""
        cols = [batch.column(i).to_pylist() for i in range(18)]
        records = [row_to_record(row) for row in zip(*cols, strict=True)]
        return records, self._vectors_from_arrow(batch.column(18), len(records))

    def _add_rows(self, index: MemoryIndex, batch: Any) -> int:
        """Add one Arrow batch of ``SELECT {_SELECT}, embedding`` rows to ``index``."""
        records, vectors = self._decode_rows(batch)
        index.add(records, vectors)
        return len(records)

    def _vectors_from_arrow(self, column: Any, n: int) -> F32:
        return vectors_of(column, n, self._dim)

    def _count_live(self) -> int:
        row = _one(self._wcur, f"SELECT count(*) FROM memories WHERE {LIVE}")
        return int(row[0]) if row else 0

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
        self._txn_ids = None  # every vector changes: the since-file ends
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
                        "embedding": blob_array(vecs, self._dim),
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

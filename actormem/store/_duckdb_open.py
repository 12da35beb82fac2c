"""Open-time checks, the search index's snapshot or rebuild, and re-embedding.

A mixin of :class:`~actormem.store.DuckDBStore`, kept apart from its writes
and searches: everything here runs when the store opens (is the embedder the
one the file was built with? is the index snapshot beside the file still
valid, or must the index be rebuilt from the rows?) or when every vector is
rebuilt (:meth:`reembed`).  All of it runs under the store's writer lock on
the writer cursor.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Sequence
from contextlib import suppress
from typing import TYPE_CHECKING, Any, Literal

import duckdb
import numpy as np
import numpy.typing as npt
import pyarrow as pa
import structlog

from actormem.models.base import Embedder
from actormem.store._duckdb_queries import _LIVE, _SELECT, _one
from actormem.store._index import MemoryIndex
from actormem.store._index_file import SnapshotIdentity, drop_snapshot, load_index, save_index
from actormem.store._protocol import ProgressCallback
from actormem.store._records import row_to_record
from actormem.store._schema import SCHEMA_VERSION, read_meta, write_meta
from actormem.store._types import EmbedderMismatchError, ReembedReport

__all__ = ["DuckDBOpening"]

log = structlog.get_logger(__name__)

F32 = npt.NDArray[np.float32]


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

    def _snapshot_identity(self) -> SnapshotIdentity:
        return SnapshotIdentity(
            store_id=self._store_id,
            commit_seq=self._seq,
            schema_version=SCHEMA_VERSION,
            embedder=self._embedder.name,
            dim=self._dim,
            approx_min_rows=self._approx_min,
        )

    def _open_index(self, progress: ProgressCallback | None) -> None:
        """Load the index snapshot when it is valid, else rebuild the index from the file."""
        self._index = MemoryIndex(self._dim, approx_min_rows=self._approx_min)
        #: The commit number the index snapshot on disk matches (-1: none does).
        self._snapshot_seq = -1
        if self.path == ":memory:":
            self._rebuild_index(progress)
            return
        if load_index(self._index, self.path + ".index", self._snapshot_identity()):
            self._snapshot_seq = self._seq
        else:
            self._rebuild_index(progress)

    def _save_index(self) -> None:
        """Write the index snapshot on close when the index changed since the one on disk."""
        if self.path == ":memory:" or self._snapshot_seq == self._seq:
            return
        snapshot = self.path + ".index"
        if self._snapshot_min is None or len(self._index) < self._snapshot_min:
            drop_snapshot(snapshot)  # stale now: never leave it to be misread
            return
        if save_index(self._index, snapshot, self._snapshot_identity()):
            self._snapshot_seq = self._seq

    def _rebuild_index(self, progress: ProgressCallback | None = None) -> None:
        """Load every live memory (and its vector) from the file into a fresh index."""
        index = MemoryIndex(self._dim, approx_min_rows=self._approx_min)
        total = self._count_live()
        done = 0
        reader = self._wcur.execute(
            f"SELECT {_SELECT}, embedding FROM memories WHERE {_LIVE} ORDER BY created_at, rowid"
        ).to_arrow_reader(50_000)
        for batch in reader:
            cols = [batch.column(i).to_pylist() for i in range(18)]
            records = [row_to_record(row) for row in zip(*cols, strict=True)]
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

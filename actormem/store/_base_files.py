"""Export and import, the same on every backend.

Why a module of its own: the file formats live in :mod:`actormem.store._files`
and the database side in each backend's ``_export_source`` and ``_write``;
what is left -- the two passes of an import (check every row, then write one
transaction per batch), duplicate folding and the export's atomic rename --
is backend-independent and separate from search and single writes.
:class:`StoreBase` inherits these methods; nothing else should.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec
import numpy as np
import numpy.typing as npt
import pyarrow as pa
import structlog

from actormem.store import _files
from actormem.store._base_hooks import BackendHooks
from actormem.store._files import check_path, iter_rows, records_from_rows, write_export
from actormem.store._kinds import merge_kind
from actormem.store._planning import Planner
from actormem.store._protocol import ProgressCallback
from actormem.store._records import Batch, check_namespace
from actormem.store._types import (
    ExportReport,
    ImportReport,
    InvalidMemoryError,
    Namespace,
    NewMemory,
)

__all__ = ["Transfer", "copy_id"]

log = structlog.get_logger("actormem.store._base")

T = TypeVar("T")


class Transfer(BackendHooks):
    """Export to Parquet/JSONL and import from it."""

    _dim: int

    if TYPE_CHECKING:

        def flush(self) -> None: ...

        def _embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]: ...

        def _export_source(
            self, namespace: Namespace
        ) -> tuple[int, Iterable[pa.RecordBatch], pa.Schema]: ...

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
        target, fmt = check_path(path, must_exist=False)
        if target.exists() and not overwrite:
            raise InvalidMemoryError(f"{target} exists; pass overwrite=True to replace it")
        self.flush()
        total, batches, schema = self._export_source(check_namespace(namespace))
        done = write_export(target, fmt, batches, schema, total, progress)
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

        Ids, timestamps, access counts and history-free state are kept; exact
        duplicates are merged.  A row whose id the store already holds in the
        same namespace is skipped (importing a file again adds nothing).  Into
        ``namespace``, a row whose id lives in another namespace (a user's
        export imported for another user) is copied: a new id derived from the
        namespace and the source id, which ``metadata["copied_from"]`` keeps
        (the same copy is not made twice).  Without ``namespace`` such a row is
        skipped.  ``skipped`` and ``copied`` count them.  Vectors are reused
        when their size matches this store's, else re-embedded.

        Args:
            path: A ``.parquet`` or ``.jsonl`` file.
            namespace: Put every memory here instead of its own namespace.
            progress: ``progress(done, total)``.

        Raises:
            InvalidMemoryError: Bad path or malformed rows.
        """
        self._check_open()
        if namespace is not None:
            namespace = check_namespace(namespace)
        source, fmt = check_path(path, must_exist=True)
        batch_size = _files.IMPORT_BATCH
        # First pass: every row decoded and checked, one batch at a time, before
        # anything is written -- a bad row late in the file stores nothing.
        total = 0
        for chunk in iter_rows(source, fmt, batch_size):
            records_from_rows(chunk, namespace, self._dim, first=total + 1)
            total += len(chunk)
        # Second pass: the same batches, each one write transaction.
        counts = _Counts()
        done = 0
        for chunk in iter_rows(source, fmt, batch_size):
            self._import_chunk(chunk, namespace, counts, first=done + 1)
            done += len(chunk)
            if progress is not None:
                progress(done, total)
        log.info(
            "store.imported",
            path=str(source),
            read=done,
            added=counts.added,
            merged=counts.merged,
            copied=counts.copied,
            skipped=counts.skipped,
        )
        return ImportReport(
            path=str(source),
            read=done,
            added=counts.added,
            merged=counts.merged,
            copied=counts.copied,
            skipped=counts.skipped,
        )

    def _import_chunk(
        self,
        rows: Sequence[dict[str, Any]],
        namespace: Namespace | None,
        counts: _Counts,
        first: int = 1,
    ) -> None:
        records, vectors = records_from_rows(rows, namespace, self._dim, first=first)
        missing = [i for i, v in enumerate(vectors) if v is None]
        if missing:
            fresh = self._embed([records[i].content for i in missing])
            for pos, i in enumerate(missing):
                vectors[i] = fresh[pos]

        def plan(planner: Planner, now: float, batch: Batch) -> _Counts:
            owners = planner.view.id_keys([r.id for r in records])
            # into a chosen namespace each row has a copy id; one that exists is a
            # copy an earlier import made (even if the source is gone since)
            copies = {r.id: copy_id(r.namespace, r.id) for r in records} if namespace else {}
            copied_before = planner.view.existing_ids(list(copies.values())) if copies else set()
            got = _Counts()
            seen: set[str] = set()
            for rec, vec in zip(records, vectors, strict=True):
                source = rec.id
                if source in copies and copies[source] in copied_before:
                    got.skipped += 1  # copied by an earlier import
                    continue
                if source in owners and source in copies:
                    if owners[source] == rec.namespace.key():
                        got.skipped += 1  # in this namespace already
                        continue
                    # its id lives in another namespace: a copy with an id of its own
                    rec = msgspec.structs.replace(
                        rec, id=copies[source], metadata={**rec.metadata, "copied_from": source}
                    )
                elif source in owners:
                    got.skipped += 1  # in the store already
                    continue
                if rec.id in seen:
                    got.skipped += 1  # twice in the file
                    continue
                seen.add(rec.id)
                if rec.alive and merge_kind(rec.kind):  # episodes and other events never merge
                    dup = planner.view.find_hash(rec.namespace.key(), rec.content_hash)
                    twin = planner.view.record(dup) if dup is not None else None
                    if dup is not None and twin is not None and twin.kind == rec.kind:
                        planner.fold(
                            batch,
                            dup,
                            NewMemory(
                                content=rec.content,
                                kind=rec.kind,
                                importance=rec.importance,
                                tags=rec.tags,
                            ),
                            now,
                            1.0,
                            "import duplicate",
                        )
                        got.merged += 1
                        continue
                assert vec is not None
                got.copied += rec.id != source
                batch.inserts.append((rec, vec))
                batch.log(rec.id, rec.namespace, "ADD", None, rec.content, "import")
            live = [(r, v) for r, v in batch.inserts if r.alive]
            dead = [(r, v) for r, v in batch.inserts if not r.alive]
            batch.inserts = live + dead
            got.added = len(batch.inserts)
            return got

        counts.add(self._write("import", plan))


def copy_id(namespace: Namespace, source_id: str) -> str:
    """The id of the copy of memory ``source_id`` imported into ``namespace``: the same
    every time (an import done again finds it), 32 hex digits like a new memory's."""
    text = "\x1f".join((*namespace.key(), source_id))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


@dataclass
class _Counts:
    added: int = 0
    merged: int = 0
    copied: int = 0
    skipped: int = 0

    def add(self, other: _Counts) -> None:
        self.added += other.added
        self.merged += other.merged
        self.copied += other.copied
        self.skipped += other.skipped

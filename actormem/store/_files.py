"""Export and import files (Parquet, JSONL), shared by every store backend.

A backend supplies the rows to export as Arrow record batches with the
columns of :data:`EXPORT_COLUMNS` (timestamps as integer microseconds,
metadata as JSON text) and receives imported rows as
:class:`~actormem.store._types.MemoryRecord` values with their vectors; the
file formats, their atomic writing and the checks on every imported row live
here.
"""

from __future__ import annotations

import builtins
import json
import math
import os
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, Final, Literal

import msgspec
import numpy as np
import numpy.typing as npt
import pyarrow as pa
import structlog

from actormem._special_files import check_regular
from actormem.store._checks import check_str_tuple
from actormem.store._content_hash import content_hash
from actormem.store._limits import MEMORY_FIELDS
from actormem.store._protocol import ProgressCallback
from actormem.store._types import InvalidMemoryError, MemoryRecord, Namespace, NewMemory, StoreError

__all__ = [
    "EXPORT_COLUMNS",
    "IMPORT_BATCH",
    "check_path",
    "iter_rows",
    "read_rows",
    "records_from_rows",
    "rich_progress",
    "write_export",
]

log = structlog.get_logger(__name__)

F32 = npt.NDArray[np.float32]

#: The columns of an export file, in order.
EXPORT_COLUMNS: Final = (
    "id",
    "user_id",
    "agent_id",
    "run_id",
    "session_id",
    "kind",
    "content",
    "content_hash",
    "embedding",
    "importance",
    "tags",
    "source_ids",
    "created_at",
    "updated_at",
    "last_accessed",
    "access_count",
    "superseded_by",
    "deleted_at",
    "metadata",
)


def check_path(
    path: str | os.PathLike[str], *, must_exist: bool
) -> tuple[Path, Literal["parquet", "jsonl"]]:
    """The file and its format (from the suffix), or :class:`InvalidMemoryError`."""
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
    if must_exist:  # a FIFO or device: say what it is, not "missing"
        check_regular(target, "import file", InvalidMemoryError)
    if must_exist and not target.is_file():
        raise InvalidMemoryError(f"{target} does not exist")
    if not must_exist and not target.parent.is_dir():
        raise InvalidMemoryError(f"folder {target.parent} does not exist")
    return target, fmt


def write_export(
    target: Path,
    fmt: Literal["parquet", "jsonl"],
    batches: Iterable[pa.RecordBatch],
    schema: pa.Schema,
    total: int,
    progress: ProgressCallback | None,
) -> int:
    """Write ``batches`` to ``target`` atomically (temp file, fsync, rename); rows written."""
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.tmp")
    done = 0
    try:
        if fmt == "parquet":
            import pyarrow.parquet as pq

            writer: Any = None
            for batch in batches:
                if writer is None:
                    writer = pq.ParquetWriter(str(tmp), batch.schema)
                writer.write_batch(batch)
                done += batch.num_rows
                if progress is not None:
                    progress(done, total)
            if writer is None:
                empty = schema.empty_table()
                pq.write_table(empty, str(tmp))
            else:
                writer.close()
        else:
            with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as fh:
                for batch in batches:
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
    except OSError as exc:
        # The temporary file is how the export is written, not what was asked
        # for: the error names the target (the temporary file is removed below).
        detail = (exc.strerror or str(exc)).replace(str(tmp), str(target))
        message = f"cannot write the export {target}: {detail}"
        raise (OSError(exc.errno, message) if exc.errno else OSError(message)) from None
    finally:
        with suppress(FileNotFoundError):
            tmp.unlink()
    return done


#: Rows decoded, checked and written at a time by an import: the memory an
#: import needs beyond the store's own index does not grow with the file.
IMPORT_BATCH: Final = 5_000


def iter_rows(
    source: Path, fmt: Literal["parquet", "jsonl"], batch: int = IMPORT_BATCH
) -> Iterator[builtins.list[dict[str, Any]]]:
    """The rows of an export file as dicts, ``batch`` at a time (JSONL checked line by line).

    Only one batch is held at once: Parquet is read by record batches,
    JSONL line by line.

    Raises:
        InvalidMemoryError: The file is not readable Parquet, a line is not a
            JSON object (naming the line).
    """
    # A FIFO would block the open (or the Parquet reader) forever.
    check_regular(source, "import file", InvalidMemoryError)
    if fmt == "parquet":
        import pyarrow.parquet as pq

        try:
            pf = pq.ParquetFile(str(source))
            for rb in pf.iter_batches(batch_size=batch):
                yield rb.to_pylist()
        except (pa.ArrowException, OSError) as exc:
            raise InvalidMemoryError(f"{source} is not a readable Parquet file: {exc}") from exc
        return
    out: builtins.list[dict[str, Any]] = []
    decoder = msgspec.json.Decoder()
    with open(source, "rb") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                value = decoder.decode(line)
            except msgspec.DecodeError as exc:
                raise InvalidMemoryError(f"{source}:{lineno}: invalid JSON: {exc}") from exc
            if not isinstance(value, dict):
                raise InvalidMemoryError(f"{source}:{lineno}: expected a JSON object")
            out.append(value)
            if len(out) >= batch:
                yield out
                out = []
    if out:
        yield out


def read_rows(source: Path, fmt: Literal["parquet", "jsonl"]) -> list[dict[str, Any]]:
    """Every row of an export file as a dict (small files; imports use :func:`iter_rows`)."""
    return [row for chunk in iter_rows(source, fmt) for row in chunk]


def _text(row: dict[str, Any], name: str, *, optional: bool = False) -> str | None:
    value = row.get(name)
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise InvalidMemoryError(f"{name} must be a str, got {type(value).__name__} {value!r:.80}")
    return value


def _micros(row: dict[str, Any], name: str) -> float | None:
    """A timestamp column (integer microseconds) as seconds, inside its declared range."""
    span = MEMORY_FIELDS[name]
    value = row.get(name)
    if value is None and span.optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        got = f"{type(value).__name__} {value!r:.80}"
        raise InvalidMemoryError(f"{name} must be integer microseconds, got {got}")
    seconds = value / 1e6 if math.isfinite(value) else value
    span.check(seconds, f"{name} (microseconds / 1e6)", error=InvalidMemoryError)
    return float(seconds)


def _record_from_row(row: dict[str, Any], namespace: Namespace | None) -> MemoryRecord:
    """One imported row, every column checked (the error names the column)."""
    ns = namespace or Namespace.from_key(
        tuple(_text(row, c, optional=True) or "" for c in _NS_COLUMNS)  # type: ignore[arg-type]
    )
    meta = row.get("metadata")
    if meta is None:
        meta = {}
    elif isinstance(meta, str):
        try:
            meta = json.loads(meta) if meta else {}
        except ValueError as exc:
            raise InvalidMemoryError(f"metadata is not valid JSON: {exc}") from None
    if not isinstance(meta, dict):
        raise InvalidMemoryError(f"metadata must be a JSON object, got {type(meta).__name__}")
    content = _text(row, "content")
    assert content is not None
    superseded = _text(row, "superseded_by", optional=True)
    created = _micros(row, "created_at")
    updated = _micros(row, "updated_at")
    last = _micros(row, "last_accessed")
    assert created is not None and updated is not None and last is not None
    importance = MEMORY_FIELDS["importance"].check(
        row.get("importance"), "importance", error=InvalidMemoryError
    )
    access = row.get("access_count")
    access = MEMORY_FIELDS["access_count"].check(
        0 if access is None else access, "access_count", error=InvalidMemoryError
    )
    rec = MemoryRecord(
        id=_text(row, "id") or "",
        namespace=ns,
        kind=_text(row, "kind") or "",
        content=content,
        content_hash=content_hash(content),
        importance=float(importance or 0.0),
        tags=check_str_tuple("tags", row.get("tags") or []),
        source_ids=check_str_tuple("source_ids", row.get("source_ids") or []),
        created_at=created,
        updated_at=updated,
        last_accessed=last,
        access_count=int(access or 0),
        superseded_by=superseded,
        deleted_at=_micros(row, "deleted_at"),
        metadata=dict(meta),
    )
    NewMemory(
        content=rec.content,
        kind=rec.kind,
        id=rec.id,
        metadata=rec.metadata,
        tags=rec.tags,
        source_ids=rec.source_ids,
    ).validate()
    if superseded is not None:
        try:
            NewMemory(content="x", id=superseded).validate()
        except InvalidMemoryError as exc:  # it checks an id: say which column held it
            raise InvalidMemoryError(f"superseded_by: {exc}") from None
    return rec


_NS_COLUMNS: Final = ("user_id", "agent_id", "run_id", "session_id")


def records_from_rows(
    rows: Sequence[dict[str, Any]], namespace: Namespace | None, dim: int, first: int = 1
) -> tuple[builtins.list[MemoryRecord], builtins.list[F32 | None]]:
    """Check and decode imported rows; a vector is kept when it has ``dim`` finite values.

    Every column is checked against what the store accepts (numbers against
    their declared ranges, :mod:`actormem.store._limits`); a vector of the
    wrong size or with non-finite values is dropped (the memory is
    re-embedded).

    Args:
        rows: The rows.
        namespace: Put every memory here instead of its own namespace.
        dim: The store's vector size.
        first: The number of ``rows[0]`` in the file (for error messages).

    Raises:
        InvalidMemoryError: A malformed row, naming its number, id and column.
    """
    records: builtins.list[MemoryRecord] = []
    vectors: builtins.list[F32 | None] = []
    for n, row in enumerate(rows, first):
        try:
            rec = _record_from_row(row, namespace)
        except (StoreError, TypeError, ValueError, msgspec.ValidationError) as exc:
            rid = row.get("id") if isinstance(row, dict) else None
            raise InvalidMemoryError(
                f"import row {n}" + (f" (id {rid!r:.80})" if rid is not None else "") + f": {exc}"
            ) from None
        emb = row.get("embedding")
        vec = None
        if isinstance(emb, list | tuple | np.ndarray) and len(emb) == dim:
            try:
                vec = np.asarray(emb, dtype=np.float32)
            except (TypeError, ValueError):
                vec = None
            if vec is not None and not np.isfinite(vec).all():
                vec = None
        records.append(rec)
        vectors.append(vec)
    return records, vectors


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

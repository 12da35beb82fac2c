"""Embeddings in a DuckDB store: one ``BLOB`` of little-endian float32 values per row.

Schema 5 stores ``memories.embedding`` as raw bytes instead of ``FLOAT[dim]``.
DuckDB keeps min/max statistics for every element of an array column: an
insert of a 256-d vector ran a compare and a NaN check per float (about 20
us of CPU per row, measured at 100k-300k rows, against 13 us for the whole
row with the vector as a ``BLOB``), and every checkpoint scanned the floats
again.  Nothing reads the vectors inside SQL (search runs on the in-memory
index), so the store writes them as bytes and decodes them with numpy:

* :func:`blob_array` -- a batch's vectors as an Arrow binary array (one
  buffer copy, no per-row Python);
* :func:`vectors_of` -- an Arrow binary column back to an ``(n, dim)``
  matrix (a zero-copy view when every row holds ``dim`` floats);
* :func:`actormem.store._duckdb_sql.vector_lit` -- one vector as a SQL
  literal for the small-write path (``unhex('...')``: DuckDB parsed it in
  0.06 ms of CPU against 0.22 ms for 256 float literals, one run);
* :func:`fixed_list` -- the reverse of the storage, for exports, which keep
  their ``fixed_size_list<float>[dim]`` column.
"""

from __future__ import annotations

from typing import Any, Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa

__all__ = ["LE_F32", "blob_array", "fixed_list", "vectors_of"]

F32 = npt.NDArray[np.float32]

#: The stored byte order of every float (the file reads the same on any machine).
LE_F32: Final = np.dtype("<f4")


def blob_array(vectors: F32 | list[F32], dim: int) -> pa.Array:
    """``vectors`` (``n`` rows of ``dim`` floats) as an Arrow binary array, one value per row."""
    flat = np.ascontiguousarray(
        np.stack(vectors) if isinstance(vectors, list) else vectors, dtype=LE_F32
    ).reshape(-1)
    width = int(dim) * 4
    n = flat.size * 4 // width if width else 0
    if n * width != flat.size * 4:
        raise ValueError(f"{flat.size} floats are not rows of {dim}")
    big = (n + 1) * width > np.iinfo(np.int32).max
    offsets = np.arange(0, (n + 1) * width, width, dtype=np.int64 if big else np.int32)
    return pa.Array.from_buffers(
        pa.large_binary() if big else pa.binary(),
        n,
        [None, pa.py_buffer(offsets), pa.py_buffer(flat)],
        null_count=0,
    )


def vectors_of(column: Any, n: int, dim: int) -> F32:
    """The ``(n, dim)`` float32 matrix of a binary column (rows of ``dim`` floats).

    A NULL or a value of another length (never written by this store) reads
    as a zero vector, as a NULL ``FLOAT[dim]`` did.
    """
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    width = int(dim) * 4
    if n == 0:
        return np.zeros((0, dim), dtype=np.float32)
    offsets = np.frombuffer(
        column.buffers()[1],
        dtype=np.int64 if pa.types.is_large_binary(column.type) else np.int32,
        count=n + 1,
        offset=column.offset * (8 if pa.types.is_large_binary(column.type) else 4),
    )
    data = column.buffers()[2]
    if (
        column.null_count == 0
        and offsets[-1] - offsets[0] == n * width
        and (np.all(np.diff(offsets) == width))
    ):
        raw = np.frombuffer(data, dtype=LE_F32, count=n * dim, offset=int(offsets[0]))
        return raw.astype(np.float32, copy=False).reshape(n, dim)
    out = np.zeros((n, dim), dtype=np.float32)
    for i, value in enumerate(column.to_pylist()):
        if value is not None and len(value) == width:
            out[i] = np.frombuffer(value, dtype=LE_F32)
    return out


def fixed_list(column: Any, dim: int) -> pa.Array:
    """A binary column of vectors as ``fixed_size_list<float>[dim]`` (NULL stays NULL)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    n = len(column)
    flat = vectors_of(column, n, dim).reshape(-1)
    mask = None
    if column.null_count:
        mask = pa.array(np.array([v is None for v in column.to_pylist()], dtype=bool))
    return pa.FixedSizeListArray.from_arrays(pa.array(flat, type=pa.float32()), dim, mask=mask)

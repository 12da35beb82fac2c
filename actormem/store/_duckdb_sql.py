"""SQL literals for DuckDB's small writes: one-row inserts and updates without bound parameters.

Why not parameters: DuckDB's Python client (1.5.5) tries ``import pandas``
for every bound parameter (about 1.6 failed imports per value; pandas is
not a dependency, and a failed import is not cached, so each one walks
``sys.path``: ~135 us here).  A one-row insert of a memory with its ~20
values cost more in those look-ups than in DuckDB, and a FLOAT[256] vector
bound as a list costs ~45 ms.  Registering an Arrow table (the batched
path) costs ~0.5 ms per table plus its own look-ups.

So small writes are sent as SQL text with the values written as literals
by :func:`lit`, which accepts only ``None``, ``bool``, ``int``, finite
``float`` and ``str``; strings are quoted the SQL-standard way (DuckDB's
plain ``'...'`` literal has no backslash escapes: the only special
character is the quote, which is doubled).  A string holding a NUL
character is refused (:class:`UnsafeLiteral`): callers fall back to bound
parameters for it.  Vectors are stored as bytes (schema 5) and written as
``unhex('...')`` of their float32 bytes: exact, and parsed in C++.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt

__all__ = ["UnsafeLiteral", "array_vector_literals", "lit", "row_sql", "vector_lit"]


class UnsafeLiteral(ValueError):
    """A value that :func:`lit` does not write as a literal (use a parameter)."""


def lit(value: Any) -> str:
    """``value`` as a DuckDB SQL literal.

    Raises:
        UnsafeLiteral: Not ``None``/bool/int/finite float/str, or a str with a NUL.
    """
    if value is None:
        return "NULL"
    kind = type(value)
    if kind is str:
        if "\x00" in value:
            raise UnsafeLiteral("a string with a NUL character")
        text: str = value
        return "'" + text.replace("'", "''") + "'"
    if kind is bool:
        return "TRUE" if value else "FALSE"
    if kind is int:
        return str(value)
    if kind is float:
        if not math.isfinite(value):
            raise UnsafeLiteral(f"a non-finite float {value!r}")
        # a bare 0.1 would be a DECIMAL; the string parses to the same double
        return f"CAST('{value!r}' AS DOUBLE)"
    raise UnsafeLiteral(f"no literal for {kind.__name__}")


#: Set while the acknowledgement log of a file still at schema 4 or older is
#: replayed (before its migration): vectors go into a ``FLOAT[dim]`` column.
_ARRAY_VECTORS: ContextVar[bool] = ContextVar("actormem_array_vectors", default=False)


@contextmanager
def array_vector_literals(on: bool = True) -> Iterator[None]:
    """Make :func:`vector_lit` write ``CAST('[...]' AS FLOAT[dim])`` in this context."""
    token = _ARRAY_VECTORS.set(on)
    try:
        yield
    finally:
        _ARRAY_VECTORS.reset(token)


def vector_lit(vector: npt.NDArray[np.float32], dim: int) -> str:
    """A float32 vector as the literal of its stored bytes, ``unhex('...')`` (schema 5:
    see :mod:`actormem.store._duckdb_vectors`), or as a ``FLOAT[dim]`` array literal
    inside :func:`array_vector_literals`."""
    values = np.asarray(vector, dtype="<f4").reshape(-1)
    if values.size != dim or not np.isfinite(values).all():
        raise UnsafeLiteral(f"a vector of {values.size} values (or non-finite), expected {dim}")
    if _ARRAY_VECTORS.get():
        # msgspec writes the shortest repr of each double, which parses back to the float32
        return f"CAST('{msgspec.json.encode(values.tolist()).decode()}' AS FLOAT[{int(dim)}])"
    return f"unhex('{values.tobytes().hex()}')"


def row_sql(values: Sequence[str]) -> str:
    """One ``(...)`` row of a ``VALUES`` list from already written literals."""
    return "(" + ", ".join(values) + ")"

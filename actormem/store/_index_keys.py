"""Key maps of a loaded index: memory id -> row, (namespace, content hash) -> row.

An index rebuilt from DuckDB keeps these as plain dicts.  One loaded from its
snapshot would have to build a million-entry dict on open (a second or more
of the GIL at 1M: the first searches after a reopen waited on it), so the
snapshot stores each map as its keys, sorted, in a fixed-width bytes array
with their rows beside them, and :class:`KeyRows` answers from those mapped
arrays by binary search (a few microseconds a key), with the changes since
the load in a dict and a set.  Nothing is built on open.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, MutableMapping, Sequence
from typing import Any, Generic, TypeVar

import numpy as np
import numpy.typing as npt

__all__ = ["KeyRows", "encode_keys", "hash_key", "id_key", "rows_of", "sorted_keys"]

K = TypeVar("K")
I64 = npt.NDArray[np.int64]

_SEP = "\x1f"


def id_key(memory_id: str) -> bytes:
    """A memory id as stored in the sorted key array."""
    return memory_id.encode()


def hash_key(key: tuple[tuple[str, str, str, str], str]) -> bytes:
    """A (namespace key, content hash) pair as stored in the sorted key array."""
    (a, b, c, d), h = key
    return _SEP.join((a, b, c, d, h)).encode()


def encode_keys(keys: Iterable[Any], encode: Callable[[Any], bytes]) -> list[bytes]:
    """``[encode(k) for k in keys]``, with the two key encoders inlined (a million
    keys when a snapshot is written: the function call per key cost as much again)."""
    if encode is id_key:
        return list(map(str.encode, keys))
    if encode is hash_key:
        join = _SEP.join  # exactly hash_key's bytes (a str subclass's text, not its format)
        return [join((*ns, h)).encode() for ns, h in keys]
    return [encode(k) for k in keys]


def rows_of(keymap: MutableMapping[K, int], keys: Sequence[K]) -> list[int | None]:
    """The row of each of ``keys`` in ``keymap`` (a dict or a :class:`KeyRows`), None if absent."""
    if isinstance(keymap, KeyRows):
        return keymap.rows_of(keys)
    get = keymap.get
    return [get(k) for k in keys]


def sorted_keys(keys: list[bytes], rows: I64) -> tuple[npt.NDArray[Any], I64]:
    """``keys`` as a sorted fixed-width bytes array, and their ``rows`` in that order."""
    arr = np.array(keys, dtype=np.bytes_) if keys else np.zeros(0, dtype="S1")
    order = np.argsort(arr, kind="stable")
    return arr[order], np.ascontiguousarray(rows[order], dtype=np.int64)


class KeyRows(MutableMapping[K, int], Generic[K]):
    """A key -> row map over sorted mapped arrays plus the changes since the load."""

    def __init__(self, keys: npt.NDArray[Any], rows: I64, encode: Callable[[K], bytes]) -> None:
        if keys.shape != rows.shape:
            raise ValueError("keys and rows do not match")
        self._keys = keys
        self._rows = rows
        self._encode = encode
        self._width = keys.dtype.itemsize
        #: Keys set since the load (new, or moved to another row).
        self._changed: dict[K, int] = {}
        #: Keys of the arrays deleted since the load.
        self._gone: set[K] = set()

    def _base(self, key: K) -> int | None:
        raw = self._encode(key)
        if len(raw) > self._width or not self._keys.size:
            return None
        at = int(np.searchsorted(self._keys, raw))
        if at < self._keys.size and self._keys[at] == raw:
            return int(self._rows[at])
        return None

    def rows_of(self, keys: Sequence[K]) -> list[int | None]:
        """The row of each of ``keys`` (None: absent), the arrays searched once for all.

        A catch-up or a large write looks up thousands of keys: one
        :func:`numpy.searchsorted` over all of them instead of one call each
        (about 20 us a key at 1M, mostly the call's overhead).
        """
        out: list[int | None] = [None] * len(keys)
        where: list[int] = []
        raws: list[bytes] = []
        changed, gone, encode, width = self._changed, self._gone, self._encode, self._width
        for i, key in enumerate(keys):
            row = changed.get(key)
            if row is not None:
                out[i] = row
            elif key not in gone:
                raw = encode(key)
                if len(raw) <= width:
                    where.append(i)
                    raws.append(raw)
        size = self._keys.size
        if raws and size:
            wanted = np.array(raws, dtype=self._keys.dtype)
            at = np.minimum(np.searchsorted(self._keys, wanted), size - 1)
            hit = np.flatnonzero(self._keys[at] == wanted)
            rows = self._rows[at[hit]].tolist()
            for j, row in zip(hit.tolist(), rows, strict=True):
                out[where[j]] = row
        return out

    def __getitem__(self, key: K) -> int:
        found = self._changed.get(key)
        if found is not None:
            return found
        if key not in self._gone:
            row = self._base(key)
            if row is not None:
                return row
        raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        try:
            self[key]  # type: ignore[index]
        except (KeyError, TypeError, ValueError):
            return False
        return True

    def get(self, key: K, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def __setitem__(self, key: K, row: int) -> None:
        self._changed[key] = row

    def __delitem__(self, key: K) -> None:
        if key in self._changed:
            del self._changed[key]
            if self._base(key) is not None:
                self._gone.add(key)
            return
        if key in self._gone or self._base(key) is None:
            raise KeyError(key)
        self._gone.add(key)

    def update(self, other: Any = (), /, **kwargs: int) -> None:
        pairs: Iterable[tuple[K, int]] = other.items() if hasattr(other, "items") else other
        self._changed.update(pairs)

    def __iter__(self) -> Iterator[K]:
        raise TypeError("KeyRows are not iterated: use encoded_items()")

    def __len__(self) -> int:
        base = self._keys.size - len(self._gone)
        return base + sum(1 for k in self._changed if self._base(k) is None or k in self._gone)

    def encoded_items(self) -> tuple[list[bytes], I64]:
        """Every key (encoded) with its row: the arrays' live keys, then the changed ones."""
        keep = np.ones(self._keys.size, dtype=bool)
        for key in (*self._gone, *self._changed):
            raw = self._encode(key)
            at = int(np.searchsorted(self._keys, raw))
            if at < self._keys.size and self._keys[at] == raw:
                keep[at] = False
        keys = self._keys[keep].tolist()
        rows = [*self._rows[keep].tolist()]
        for key, row in self._changed.items():
            keys.append(self._encode(key))
            rows.append(row)
        return keys, np.asarray(rows, dtype=np.int64)

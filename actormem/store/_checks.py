"""The store's errors and the checks of single values that raise them.

Split from :mod:`actormem.store._types` (the value types) because these are
the leaves every other store module needs -- the backends and the query
builders raise the errors and run the checks without needing the records.
:mod:`actormem.store._types` re-exports all of them, so both are one surface.
"""

from __future__ import annotations

import math

__all__ = [
    "EmbedderMismatchError",
    "EmbeddingError",
    "InvalidMemoryError",
    "MemoryNotFoundError",
    "NamespaceError",
    "SchemaVersionError",
    "StoreClosedError",
    "StoreError",
    "StoreLockedError",
    "check_importance",
    "check_no_nul",
    "check_str_tuple",
    "finite_number",
    "plain_label",
    "utf8",
]


# -- errors -----------------------------------------------------------------------


class StoreError(Exception):
    """Base class of every error the store raises."""


class StoreLockedError(StoreError):
    """Another process holds the database file open."""


class StoreClosedError(StoreError):
    """The store was used after :meth:`close`."""


class SchemaVersionError(StoreError):
    """The file's schema is newer than this version of actormem understands."""


class EmbedderMismatchError(StoreError):
    """The store was built with another embedder (name or dimension).

    Attributes:
        stored_name: The name of the embedder the store was built with (None when
            the store does not say).
        stored_dim: Its vector size (0 when unknown).
    """

    def __init__(self, message: str, *, stored_name: str | None = None, stored_dim: int = 0):
        super().__init__(message)
        self.stored_name = stored_name
        self.stored_dim = stored_dim


class EmbeddingError(StoreError):
    """The embedder failed or returned unusable vectors; nothing was stored."""


class NamespaceError(StoreError, ValueError):
    """A namespace is empty or holds an invalid id."""


class InvalidMemoryError(StoreError, ValueError):
    """A memory, filter or argument has a wrong type or value."""


class MemoryNotFoundError(StoreError, KeyError):
    """No live memory with that id in that namespace."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "memory not found"


# -- shared checks -----------------------------------------------------------------------


def finite_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def check_importance(value: object) -> float:
    """Return ``value`` as a float in ``[0, 1]`` or raise InvalidMemoryError."""
    if not finite_number(value) or not 0.0 <= float(value) <= 1.0:  # type: ignore[arg-type]
        raise InvalidMemoryError(f"importance must be a number in [0, 1], got {value!r}")
    return float(value)  # type: ignore[arg-type]


def plain_label(text: object, limit: int) -> bool:
    """Whether ``text`` is an exact ``str`` of 1 to ``limit`` ASCII characters, no NUL.

    What the full checks of a kind (``limit`` 64), a tag or a source id (256)
    accept without looking further; anything else takes those checks.
    """
    return type(text) is str and 0 < len(text) <= limit and text.isascii() and "\x00" not in text


def utf8(text: str) -> bool:
    """Whether ``text`` encodes as UTF-8 (no lone surrogates)."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_no_nul(value: object, path: str) -> None:
    """Refuse a NUL character (U+0000) in any key or string of JSON ``value``.

    PostgreSQL's ``jsonb`` cannot hold one; refused on every backend alike.
    """
    if isinstance(value, str):
        if "\x00" in value:
            raise InvalidMemoryError(
                f"{path} holds a NUL character (U+0000), which no backend keeps"
            )
    elif isinstance(value, dict):
        for key, item in value.items():
            check_no_nul(key, f"{path} key {key!r}")
            check_no_nul(item, f"{path}.{key}")
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            check_no_nul(item, f"{path}[{i}]")


def check_str_tuple(name: str, value: object) -> tuple[str, ...]:
    """Return ``value`` as a tuple of non-empty exact strings or raise InvalidMemoryError."""
    if isinstance(value, str) or not isinstance(value, tuple | list):
        raise InvalidMemoryError(f"{name} must be a tuple of str, got {type(value).__name__}")
    exact = True
    for item in value:
        if not isinstance(item, str) or not item or len(item) > 256:
            raise InvalidMemoryError(f"{name} holds an invalid item {item!r}")
        exact = exact and item.__class__ is str
    if exact:
        return tuple(value)
    # A str subclass (a StrEnum tag) is kept as its plain text: every record
    # holds exact str, which is what the backends write and read back.
    return tuple(str.__str__(item) for item in value)

"""How a forwarded call travels to the hosting actor and back: one ``bytes`` each way.

Why not let Ray serialise the arguments: Ray serialises every argument of
an actor method on its own (its serialisation context, cloudpickle, a
metadata header), and deserialises each one in the actor, which costs far
more than the round trip's transport for small calls.  Measured here (one
node, load 5-6, CPU time per call on each side): a bare method with no
argument 570 µs driver / 500 µs actor; the handle's five arguments
``(name, args, kwargs, expect, retry)`` 715-866 µs / 775-831 µs; the same
call pickled into one ``bytes`` (which Ray passes with little work) 565 /
585-607 µs,
the cost of a call without arguments.  The answer ``(incarnation, result)``
comes back the same way.

:func:`pack` uses the standard pickle (protocol 5), and cloudpickle -- what
Ray itself uses -- only when the standard pickle cannot serialise the value
by reference: a lambda or local class fails to pickle, and a class defined in
the caller's ``__main__`` (which the actor's ``__main__`` does not have) is
detected by its module name in the bytes.  So whatever Ray could send as an
argument, this sends too.  Errors raised in the actor still travel as Ray's
task errors (``_handle`` unwraps them).

A call whose arguments cannot be pickled at all (a lock in a message's
metadata, in a tool's arguments, in the fleeting memory) is refused before
it is sent by :func:`unsendable`'s error, which names the call and the
argument down to the value that cannot travel (``add(): msgs.metadata['lock']``),
as the local runtime's ``MessageError`` names the field -- never the value's
text (it may hold a DSN), only its type.
"""

from __future__ import annotations

import dataclasses
import inspect
import pickle
from collections.abc import Iterator, Mapping
from typing import Any

import msgspec

from actormem.messages import MessageError, Msg

__all__ = ["pack", "unpack", "unsendable"]

#: How deep :func:`unsendable` looks for the value that cannot be pickled.
_MAX_DEPTH = 12
#: The handle's own calls for ``handle.fleeting[...]``: named as the user wrote them.
_FLEETING = ("fleeting_get", "fleeting_set", "fleeting_delete")

_MAIN = b"__main__"


def pack(value: Any) -> bytes:
    """``value`` pickled so that the other process can load it."""
    try:
        data = pickle.dumps(value, protocol=5)
    except (pickle.PicklingError, AttributeError, TypeError):
        data = None
    if data is None or _MAIN in data:  # a false alarm (a text naming __main__) costs only time
        from ray import cloudpickle

        data = cloudpickle.dumps(value, protocol=5)  # type: ignore[no-untyped-call]
    return data


def unpack(data: bytes) -> Any:
    """The value :func:`pack` pickled."""
    return pickle.loads(data)


def _picklable(value: Any) -> bool:
    try:
        pack(value)
    except Exception:
        return False
    return True


def _parts(value: Any, path: str) -> Iterator[tuple[str, Any]]:
    """The values ``value`` holds, each with its path (what pickling it pickles)."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield f"{path}[{key!r}]", item
    elif isinstance(value, list | tuple | set | frozenset):
        for i, item in enumerate(value):
            yield f"{path}[{i}]", item
    elif isinstance(value, msgspec.Struct):
        for field in value.__struct_fields__:
            yield f"{path}.{field}", getattr(value, field)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            yield f"{path}.{f.name}", getattr(value, f.name)
    elif isinstance(getattr(value, "__dict__", None), dict):
        for attr, item in vars(value).items():
            yield f"{path}.{attr}", item


def _culprit(value: Any, path: str, depth: int = 0) -> tuple[str, Any, bool] | None:
    """``(path, value, in a message)`` of the innermost value that cannot be pickled."""
    if _picklable(value):
        return None
    if depth < _MAX_DEPTH:
        for part_path, part in _parts(value, path):
            found = _culprit(part, part_path, depth + 1)
            if found is not None:
                return found[0], found[1], found[2] or isinstance(value, Msg)
    return path, value, isinstance(value, Msg)


def _named(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[tuple[str, Any]]:
    """The call's arguments by the names the user knows them by."""
    if name in _FLEETING:
        (what,) = args
        if name == "fleeting_set" and isinstance(what, Mapping):
            return [(f"fleeting[{k!r}]", v) for k, v in what.items()]
        return [("the fleeting key", what)]
    from actormem.runtime import MemoryRuntime

    method = getattr(MemoryRuntime, name, None)
    try:
        bound = inspect.signature(method).bind(None, *args, **kwargs)  # type: ignore[arg-type]
    except (TypeError, ValueError):  # not a runtime method, or its arguments do not fit
        return [*((f"argument {i + 1}", a) for i, a in enumerate(args)), *kwargs.items()]
    return [(k, v) for k, v in bound.arguments.items() if k != "self"]


def unsendable(
    name: str, args: tuple[Any, ...], kwargs: dict[str, Any], exc: BaseException
) -> Exception:
    """The error to raise for call ``name`` whose arguments :func:`pack` could not pickle.

    A :class:`~actormem.messages.MessageError` when the value is inside a
    message (as the local runtime's), else a ``TypeError``; both name the
    call and the argument's path and the value's type, never its text.
    """
    call = "fleeting" if name in _FLEETING else f"{name}()"
    for arg, value in _named(name, args, kwargs):
        found = _culprit(value, arg)
        if found is None:
            continue
        path, culprit, in_msg = found
        text = (
            f"{call}: {path} cannot be sent to the agent's actor: a "
            f"{type(culprit).__name__} cannot be pickled (a remote call's arguments travel "
            "pickled; use plain values)"
        )
        return MessageError(text) if in_msg else TypeError(text)
    return TypeError(  # each argument alone pickles: say what failed, not the values
        f"{call}: its arguments cannot be sent to the agent's actor ({type(exc).__name__})"
    )

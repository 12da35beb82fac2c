"""The door: one check of everything that enters the runtime from outside.

Why a module of its own: a value accepted at the door and refused later
fails far from its cause, often for every call after it.  A message whose
``created_at`` was NaN, whose ``name`` was 5 or whose tool-call input was a
list was added and saved, and then the session never loaded again (every
message of it lost); metadata nested 989 levels deep made every save raise
``RecursionError``.  So every way in -- messages given to ``add()`` and
``record()``, their metadata, the arguments of a tool call, the runtime's
numeric settings -- goes through the checks here, which accept exactly
what the session reader accepts, and refuse the rest with
:class:`~actormem.messages.MessageError` naming the field
(``messages[0].metadata.a.b``).

What a message may hold (the types of :class:`~actormem.messages.Msg`, as
the JSON reader decodes them):

* ``role`` one of the four roles; ``id`` a non-empty string; ``name`` a string;
* ``created_at`` a finite number of Unix seconds from 1970 to 9999 (the
  range :mod:`actormem.store._limits` gives every timestamp);
* ``content`` a tuple of the known blocks, each field of its declared type
  (a tool call's ``input`` is a JSON object);
* ``metadata`` and tool-call input: JSON values only (``None``, ``bool``,
  ``int``, finite ``float``, ``str``, lists, objects with string keys), at
  most :data:`MAX_DEPTH` containers deep.

Values that mean the same in JSON are normalised rather than refused, so
that what is saved reads back equal: a tuple becomes a list, a ``float``
or ``str`` subclass (a numpy float, a str enum) its plain value, a list of
blocks a tuple.  The last step encodes the
message and decodes it with the reader's own decoder: a message that does
not read back equal is refused, so the invariant "whatever ``add()``
accepts, a save then a load restores equal" holds by construction.

Store rows and imports are checked at the store's own door
(:mod:`actormem.store._limits`, :mod:`actormem.store._files`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

import msgspec

from actormem.messages import (
    DEFAULT_MAX_MSG_BYTES,
    ImageBlock,
    MessageError,
    Msg,
    OffloadRefBlock,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from actormem.store._limits import TIMESTAMP, Span

__all__ = [
    "MAX_DEPTH",
    "RUNTIME_SETTINGS",
    "check_json_object",
    "check_json_value",
    "check_msg",
    "check_msgs",
    "check_settings",
    "without_nul",
]

#: Deepest nesting of lists and objects accepted in metadata and tool arguments
#: (far below the interpreter's recursion limit, which the encoder and decoder need).
MAX_DEPTH: Final = 64

_ROLES: Final = frozenset({"system", "user", "assistant", "tool"})
_ENCODER: Final = msgspec.json.Encoder()
_DECODER: Final = msgspec.json.Decoder(Msg)
_MAX_PATH_KEY: Final = 40


def _key_path(path: str, key: str) -> str:
    if key.isidentifier() and len(key) <= _MAX_PATH_KEY:
        return f"{path}.{key}"
    return f"{path}[{key[:_MAX_PATH_KEY]!r}]"


def check_json_value(value: object, path: str, *, depth: int = 0) -> Any:
    """Return ``value`` as JSON reads it back (normalised), or raise naming ``path``.

    Raises:
        MessageError: a value JSON cannot hold, a non-string key, a NaN or
            infinity, or nesting deeper than :data:`MAX_DEPTH`.
    """
    # Exact types first: the common case costs one lookup.
    kind = type(value)
    if value is None or kind is str or kind is bool or kind is int:
        return value
    if kind is float:
        if not math.isfinite(value):  # type: ignore[arg-type]
            raise MessageError(f"{path}: {value!r} cannot be stored as JSON (a finite number)")
        return value
    if isinstance(value, dict | list | tuple):
        if depth >= MAX_DEPTH:
            raise MessageError(f"{path}: nested deeper than {MAX_DEPTH} levels")
        if isinstance(value, dict):
            return _check_object(value, path, depth + 1)
        items = list(value)
        changed = not isinstance(value, list) or type(value) is not list
        for i, item in enumerate(items):
            new = check_json_value(item, f"{path}[{i}]", depth=depth + 1)
            if new is not item:
                items[i] = new
                changed = True
        return items if changed else value
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return check_json_value(float(value), path, depth=depth)
    raise MessageError(
        f"{path}: a {type(value).__name__} cannot be stored as JSON "
        "(use None, bool, int, float, str, lists and objects with string keys)"
    )


def _check_object(value: Mapping[Any, Any], path: str, depth: int) -> dict[str, Any]:
    # Copy only from the first value that changes (most objects come back as they are).
    out: dict[str, Any] | None = None if type(value) is dict else {}
    for n, (key, item) in enumerate(value.items()):
        if not isinstance(key, str):
            raise MessageError(
                f"{path}: key {key!r} is a {type(key).__name__}; JSON object keys are strings"
            )
        new = check_json_value(item, _key_path(path, key), depth=depth)
        if out is None and (new is not item or type(key) is not str):
            out = dict(list(value.items())[:n])
        if out is not None:
            out[str(key)] = new
    return value if out is None else out  # type: ignore[return-value]


def check_json_object(
    value: object, path: str, *, error: type[Exception] = MessageError
) -> dict[str, Any]:
    """A JSON object (tool arguments, metadata), normalised, or raise naming ``path``.

    Args:
        value: what was given.
        path: how errors name it.
        error: the exception raised (the store's doors raise ``InvalidMemoryError``).
    """
    try:
        if not isinstance(value, Mapping):
            raise MessageError(f"{path} must be a JSON object (a dict), got {type(value).__name__}")
        if not isinstance(value, dict):
            value = dict(value)
        result: dict[str, Any] = check_json_value(value, path)
    except MessageError as exc:
        if error is MessageError:
            raise
        raise error(str(exc)) from None
    return result


def _need_str(value: object, path: str, *, empty: bool = True) -> str:
    if not isinstance(value, str):
        raise MessageError(f"{path} must be a str, got {type(value).__name__} {value!r}"[:300])
    if not empty and not value:
        raise MessageError(f"{path} must be a non-empty str")
    return str(value)


def _need_int(value: object, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise MessageError(f"{path} must be an int, got {type(value).__name__} {value!r}"[:300])
    return int(value)


def _check_block(block: object, path: str) -> object:
    if isinstance(block, TextBlock):
        return TextBlock(_need_str(block.text, f"{path}.text"))
    if isinstance(block, ToolUseBlock):
        return ToolUseBlock(
            id=_need_str(block.id, f"{path}.id"),
            name=_need_str(block.name, f"{path}.name"),
            input=check_json_object(block.input, f"{path}.input"),
        )
    if isinstance(block, ToolResultBlock):
        if type(block.is_error) is not bool:
            raise MessageError(f"{path}.is_error must be a bool, got {block.is_error!r}"[:300])
        return ToolResultBlock(
            tool_use_id=_need_str(block.tool_use_id, f"{path}.tool_use_id"),
            output=_need_str(block.output, f"{path}.output"),
            is_error=block.is_error,
            name=_need_str(block.name, f"{path}.name"),
        )
    if isinstance(block, ImageBlock):
        return ImageBlock(
            url=_need_str(block.url, f"{path}.url"),
            media_type=_need_str(block.media_type, f"{path}.media_type"),
        )
    if isinstance(block, OffloadRefBlock):
        return OffloadRefBlock(
            offload_id=_need_str(block.offload_id, f"{path}.offload_id"),
            preview=_need_str(block.preview, f"{path}.preview"),
            original_tokens=_need_int(block.original_tokens, f"{path}.original_tokens"),
            message_count=_need_int(block.message_count, f"{path}.message_count"),
        )
    raise MessageError(f"{path}: unknown content block {type(block).__name__}")


def check_msg(msg: object, path: str = "message", *, max_bytes: int = DEFAULT_MAX_MSG_BYTES) -> Msg:
    """Check one message against what the session reader accepts; return it (normalised).

    Args:
        msg: what was given.
        path: how errors name it (``messages[3]``).
        max_bytes: the largest JSON encoding accepted.

    Raises:
        MessageError: naming the first field found wrong.
    """
    if not isinstance(msg, Msg):
        raise MessageError(f"{path}: expected an actormem Msg, got {type(msg).__name__}")
    if not isinstance(msg.role, str) or msg.role not in _ROLES:
        raise MessageError(
            f"{path}.role: unknown role {msg.role!r} (expected one of {sorted(_ROLES)})"
        )
    msg_id = _need_str(msg.id, f"{path}.id", empty=False)
    name = _need_str(msg.name, f"{path}.name")
    created = TIMESTAMP.check(msg.created_at, f"{path}.created_at", error=MessageError)
    if not isinstance(msg.content, tuple | list):
        raise MessageError(
            f"{path}.content must be a tuple of blocks, got {type(msg.content).__name__}"
        )
    content = tuple(_check_block(b, f"{path}.content[{i}]") for i, b in enumerate(msg.content))
    metadata = check_json_object(msg.metadata, f"{path}.metadata")
    checked = Msg(
        role=msg.role,
        content=content,  # type: ignore[arg-type]
        name=name,
        id=msg_id,
        metadata=metadata,
        created_at=float(created),  # type: ignore[arg-type]
    )
    # The proof: encode (no lone surrogates; the size) and read back with the
    # reader's own decoder.
    try:
        data = _ENCODER.encode(checked)
    except (UnicodeEncodeError, TypeError, msgspec.EncodeError, RecursionError) as exc:
        raise MessageError(f"{path} cannot be stored as JSON: {exc}") from None
    if len(data) > max_bytes:
        raise MessageError(f"{path} is {len(data)} bytes, over the limit of {max_bytes}")
    nul_free = _replace_nul(data)
    try:
        back = _DECODER.decode(nul_free)
    except (msgspec.DecodeError, RecursionError) as exc:
        raise MessageError(f"{path} would not load back: {exc}") from None
    if nul_free is not data:  # NUL characters replaced: compare with what was meant
        checked = _DECODER.decode(nul_free)
    if back != checked:
        raise MessageError(f"{path} would not load back equal to what was given")
    return back if msg != back else msg


#: A JSON ``\u0000`` escape (a NUL character), not a literal backslash before "u0000":
#: an even number of backslashes, then the escape.
_NUL_ESCAPE: Final = re.compile(rb"(?<!\\)((?:\\\\)*)\\u0000")


def _replace_nul(data: bytes) -> bytes:
    """``data`` (a message as JSON) with every NUL character replaced by U+FFFD.

    Neither backend can keep a NUL in text (PostgreSQL's text and jsonb
    refuse it, so the store refuses it on DuckDB too), and no model reads
    one; a tool's output with binary junk must still be recorded.  So a NUL
    in any string of a message -- text, tool output, ids, metadata -- becomes
    the replacement character at the door.  Returns ``data`` itself when
    there is none (the common case costs one ``in`` test).
    """
    if b"\\u0000" not in data:
        return data
    fixed = _NUL_ESCAPE.sub(rb"\1\\ufffd", data)
    return data if fixed == data else fixed


def check_msgs(
    msgs: Iterable[object], what: str = "messages", *, max_bytes: int = DEFAULT_MAX_MSG_BYTES
) -> tuple[Msg, ...]:
    """Check a sequence of messages (errors name ``what[i]``)."""
    return tuple(check_msg(m, f"{what}[{i}]", max_bytes=max_bytes) for i, m in enumerate(msgs))


#: The runtime's own numeric settings (``MemoryRuntime(...)`` arguments).
RUNTIME_SETTINGS: Final[Mapping[str, Span]] = {
    "max_msg_bytes": Span(64, 256 * 1024 * 1024, integer=True),
    "max_restarts": Span(0, 1_000_000, integer=True),
}


def check_settings(values: Mapping[str, object], spans: Mapping[str, Span], owner: str) -> None:
    """Check numeric settings against their declared ranges (errors say ``owner.name``).

    Raises:
        ValueError: a value outside its range, or of the wrong type.
    """
    for name, span in spans.items():
        if name in values:
            span.check(values[name], f"{owner}.{name}", error=ValueError)


def without_nul(value: Any) -> Any:
    """``value`` (a str or a JSON value) with every NUL character replaced by U+FFFD.

    For texts that enter elsewhere than as messages and are kept the same way
    (the journal's entries and working status): see :func:`_replace_nul`.
    """
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd") if "\x00" in value else value
    data = _ENCODER.encode(value)
    fixed = _replace_nul(data)
    return value if fixed is data else msgspec.json.decode(fixed)

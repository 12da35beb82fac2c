"""Messages: the unit of conversation that every memory tier stores.

A :class:`Msg` is a frozen msgspec Struct with a role and a tuple of typed
content blocks (a tagged union on the ``type`` field).  Messages round-trip
through JSON with :func:`encode_msgs` / :func:`decode_msgs` and convert to and
from the OpenAI chat-completions format with :func:`to_openai` /
:func:`from_openai`.

msgspec constructors do not validate field types (decoding does), so code
that accepts messages from users calls :func:`validate_msg`, which raises
:class:`MessageError` naming the problem.
"""

from __future__ import annotations

import json
import os
import random
import time
import uuid
from collections.abc import Iterable, Sequence
from typing import Any, Final, Literal, cast, get_args

import msgspec

__all__ = [
    "DEFAULT_MAX_MSG_BYTES",
    "ContentBlock",
    "ImageBlock",
    "MessageError",
    "Msg",
    "OffloadRefBlock",
    "Role",
    "TextBlock",
    "ToolResultBlock",
    "ToolUseBlock",
    "decode_msgs",
    "encode_msgs",
    "from_openai",
    "msgs_from_openai",
    "new_id",
    "to_openai",
    "validate_msg",
]

Role = Literal["system", "user", "assistant", "tool"]
_ROLES: Final = frozenset(get_args(Role))

#: Default size limit of one message (its JSON encoding), enforced by the runtime.
DEFAULT_MAX_MSG_BYTES: Final = 4 * 1024 * 1024


class MessageError(ValueError):
    """A message is malformed: wrong type, unknown role, oversized, ..."""


#: Ids come from a generator seeded once from the system (again in a forked
#: child), not an ``os.urandom`` call each as in ``uuid.uuid4``: each such call
#: releases the GIL, and with the library's threads busy getting it back cost
#: 0.2-0.4 ms, five times per agent turn (its messages and context blocks).
_ids = random.Random(os.urandom(32))
os.register_at_fork(after_in_child=lambda: _ids.seed(os.urandom(32)))


def new_id() -> str:
    """Return a new random message/memory id (32 hex characters, a version 4 UUID)."""
    return uuid.UUID(int=_ids.getrandbits(128), version=4).hex


class TextBlock(msgspec.Struct, frozen=True, tag="text", tag_field="type", omit_defaults=True):
    """Plain text."""

    text: str


class ToolUseBlock(
    msgspec.Struct, frozen=True, tag="tool_use", tag_field="type", omit_defaults=True
):
    """A tool call made by the assistant."""

    id: str
    name: str
    input: dict[str, Any] = msgspec.field(default_factory=dict)


class ToolResultBlock(
    msgspec.Struct, frozen=True, tag="tool_result", tag_field="type", omit_defaults=True
):
    """The result of a tool call, paired with its :class:`ToolUseBlock` by id."""

    tool_use_id: str
    output: str
    is_error: bool = False
    name: str = ""


class ImageBlock(msgspec.Struct, frozen=True, tag="image", tag_field="type", omit_defaults=True):
    """An image by URL (``data:`` URLs included)."""

    url: str
    media_type: str = ""


class OffloadRefBlock(
    msgspec.Struct, frozen=True, tag="offload_ref", tag_field="type", omit_defaults=True
):
    """A placeholder for content moved out of the context window.

    The original messages can be loaded back with ``context_reload(offload_id)``.
    """

    offload_id: str
    preview: str
    original_tokens: int = 0
    message_count: int = 1


ContentBlock = TextBlock | ToolUseBlock | ToolResultBlock | ImageBlock | OffloadRefBlock


class Msg(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One message of a conversation.

    Attributes:
        role: ``system``, ``user``, ``assistant`` or ``tool``.
        content: the typed content blocks, in order.
        name: the speaker's name (optional).
        id: unique id; generated when not given.
        metadata: free-form JSON-serialisable metadata (tags live in ``metadata["tags"]``).
        created_at: Unix time in seconds.
    """

    role: Role
    content: tuple[ContentBlock, ...]
    name: str = ""
    id: str = msgspec.field(default_factory=new_id)
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    created_at: float = msgspec.field(default_factory=time.time)

    # -- constructors -------------------------------------------------------

    @classmethod
    def user(cls, text: str, *, name: str = "", **metadata: Any) -> Msg:
        """A user message with one text block."""
        return cls(role="user", content=(TextBlock(text),), name=name, metadata=metadata)

    @classmethod
    def assistant(
        cls,
        text: str = "",
        *,
        tool_calls: Sequence[ToolUseBlock] = (),
        name: str = "",
        **metadata: Any,
    ) -> Msg:
        """An assistant message: text, tool calls, or both."""
        blocks: tuple[ContentBlock, ...] = ((TextBlock(text),) if text else ()) + tuple(tool_calls)
        return cls(role="assistant", content=blocks, name=name, metadata=metadata)

    @classmethod
    def system(cls, text: str, **metadata: Any) -> Msg:
        """A system message with one text block."""
        return cls(role="system", content=(TextBlock(text),), metadata=metadata)

    @classmethod
    def tool_call(
        cls,
        name: str,
        input: dict[str, Any] | None = None,
        *,
        call_id: str | None = None,
        text: str = "",
        **metadata: Any,
    ) -> Msg:
        """An assistant message that calls one tool."""
        block = ToolUseBlock(id=call_id or "call_" + new_id()[:24], name=name, input=input or {})
        return cls.assistant(text, tool_calls=(block,), **metadata)

    @classmethod
    def tool_result(
        cls,
        tool_use_id: str,
        output: str,
        *,
        is_error: bool = False,
        name: str = "",
        **metadata: Any,
    ) -> Msg:
        """A tool message carrying the result of the call ``tool_use_id``."""
        block = ToolResultBlock(
            tool_use_id=tool_use_id, output=output, is_error=is_error, name=name
        )
        return cls(role="tool", content=(block,), name=name, metadata=metadata)

    # -- views ----------------------------------------------------------------

    @property
    def text(self) -> str:
        """The text of the message: text blocks, tool outputs and offload previews."""
        parts: list[str] = []
        for b in self.content:
            if isinstance(b, TextBlock):
                parts.append(b.text)
            elif isinstance(b, ToolResultBlock):
                parts.append(b.output)
            elif isinstance(b, OffloadRefBlock):
                parts.append(b.preview)
        return "\n".join(parts)

    @property
    def tool_uses(self) -> tuple[ToolUseBlock, ...]:
        """The tool calls in this message."""
        return tuple(b for b in self.content if isinstance(b, ToolUseBlock))

    @property
    def tool_results(self) -> tuple[ToolResultBlock, ...]:
        """The tool results in this message."""
        return tuple(b for b in self.content if isinstance(b, ToolResultBlock))

    @property
    def tags(self) -> tuple[str, ...]:
        """Tags from ``metadata["tags"]`` (used to protect messages from compression)."""
        tags = self.metadata.get("tags", ())
        return tuple(str(t) for t in tags) if isinstance(tags, list | tuple) else ()

    def with_content(self, content: Iterable[ContentBlock], **metadata: Any) -> Msg:
        """A copy with other content (same id, role, name, time) and merged metadata."""
        return msgspec.structs.replace(
            self, content=tuple(content), metadata={**self.metadata, **metadata}
        )

    def to_json(self) -> bytes:
        """Encode as JSON."""
        return _ENCODER.encode(self)

    @classmethod
    def from_json(cls, data: bytes | str) -> Msg:
        """Decode from JSON, validating every field.

        Raises:
            MessageError: the data is not a valid message.
        """
        try:
            return _MSG_DECODER.decode(data)
        except msgspec.DecodeError as exc:
            raise MessageError(f"invalid message JSON: {exc}") from None


_ENCODER: Final = msgspec.json.Encoder()
_MSG_DECODER: Final = msgspec.json.Decoder(Msg)
_MSGS_DECODER: Final = msgspec.json.Decoder(list[Msg])
_BLOCK_TYPES: Final = get_args(ContentBlock)


def encode_msgs(msgs: Sequence[Msg]) -> bytes:
    """Encode a list of messages as a JSON array."""
    return _ENCODER.encode(msgs)


def decode_msgs(data: bytes | str) -> list[Msg]:
    """Decode a JSON array of messages, validating every field.

    Raises:
        MessageError: the data is not a valid list of messages.
    """
    try:
        return _MSGS_DECODER.decode(data)
    except msgspec.DecodeError as exc:
        raise MessageError(f"invalid message list JSON: {exc}") from None


def validate_msg(msg: object, *, max_bytes: int = DEFAULT_MAX_MSG_BYTES) -> Msg:
    """Check that ``msg`` is a well-formed :class:`Msg` and return it.

    msgspec constructors do not check types, so a ``Msg(role="robot", ...)``,
    a NaN ``created_at`` or a tool call whose input is a list would
    otherwise travel into the actors, be saved, and make the session
    unloadable.  This is the runtime's door check
    (:func:`actormem._door.check_msg`): it accepts exactly what the session
    reader reads back equal (values JSON means the same are normalised: a
    tuple in metadata becomes a list).

    Raises:
        MessageError: naming the first field found wrong.
    """
    from actormem._door import check_msg  # the door imports this module

    return check_msg(msg, "message", max_bytes=max_bytes)


# -- OpenAI chat-completions format -------------------------------------------


def to_openai(msgs: Iterable[Msg]) -> list[dict[str, Any]]:
    """Convert messages to the OpenAI chat-completions ``messages`` format.

    Assistant tool calls become ``tool_calls``; each tool result becomes a
    ``role: tool`` message with its ``tool_call_id``; offload references are
    rendered as text that tells the model how to reload them.
    """
    out: list[dict[str, Any]] = []
    for m in msgs:
        if m.tool_results and m.role != "assistant":
            rest = [b for b in m.content if not isinstance(b, ToolResultBlock)]
            extra = m.with_content(rest).text if rest and m.role == "tool" else ""
            results = m.tool_results
            for i, r in enumerate(results):
                output = r.output + (f"\n{extra}" if extra and i == len(results) - 1 else "")
                out.append({"role": "tool", "tool_call_id": r.tool_use_id, "content": output})
            if m.role == "tool" or not rest:
                continue
            m = m.with_content(rest)  # a user's own text follows its tool results
        if m.role == "tool":
            raise MessageError(f"tool message {m.id!r} has no tool_result block to send")
        texts: list[str] = []
        images: list[ImageBlock] = []
        calls: list[dict[str, Any]] = []
        for b in m.content:
            if isinstance(b, TextBlock):
                texts.append(b.text)
            elif isinstance(b, OffloadRefBlock):
                texts.append(
                    f"[offloaded {b.message_count} message(s), id={b.offload_id}; "
                    f"call context_reload to read them] {b.preview}"
                )
            elif isinstance(b, ImageBlock):
                images.append(b)
            elif isinstance(b, ToolUseBlock):
                calls.append(
                    {
                        "id": b.id,
                        "type": "function",
                        "function": {"name": b.name, "arguments": json.dumps(b.input)},
                    }
                )
        item: dict[str, Any] = {"role": m.role}
        if images:
            parts: list[dict[str, Any]] = [{"type": "text", "text": t} for t in texts]
            parts += [{"type": "image_url", "image_url": {"url": i.url}} for i in images]
            item["content"] = parts
        else:
            # Always a string: strict servers (llama.cpp's, validated by typed request
            # models) reject ``null`` content on an assistant message with tool calls.
            item["content"] = "\n".join(texts)
        if m.name and m.role in ("user", "assistant", "system"):
            item["name"] = m.name
        if calls:
            item["tool_calls"] = calls
        out.append(item)
    return out


def from_openai(item: dict[str, Any]) -> Msg:
    """Convert one OpenAI chat-completions message (or a response ``message``) to a Msg.

    Raises:
        MessageError: the item is not a valid chat message.
    """
    if not isinstance(item, dict):
        raise MessageError(f"OpenAI message must be an object, got {type(item).__name__}")
    role = item.get("role")
    if not isinstance(role, str) or role not in _ROLES:
        raise MessageError(f"OpenAI message has unknown role {role!r}")
    content = item.get("content")
    blocks: list[ContentBlock] = []
    if role == "tool":
        call_id = item.get("tool_call_id")
        if not isinstance(call_id, str):
            raise MessageError("OpenAI tool message needs a string tool_call_id")
        return Msg(
            role="tool",
            content=(ToolResultBlock(tool_use_id=call_id, output=_content_text(content)),),
            name=str(item.get("name") or ""),
        )
    if isinstance(content, list):
        for part in content:
            if not isinstance(part, dict):
                raise MessageError("OpenAI content parts must be objects")
            if part.get("type") == "text":
                blocks.append(TextBlock(str(part.get("text", ""))))
            elif part.get("type") == "image_url":
                url = part.get("image_url", {})
                blocks.append(
                    ImageBlock(url=str(url.get("url", "") if isinstance(url, dict) else url))
                )
    elif isinstance(content, str):
        if content:
            blocks.append(TextBlock(content))
    elif content is not None:
        raise MessageError(
            f"OpenAI message content must be a string or list, got {type(content).__name__}"
        )
    for call in item.get("tool_calls") or ():
        try:
            fn = call["function"]
            raw_args = fn.get("arguments") or "{}"
            args = json.loads(raw_args) if isinstance(raw_args, str) else raw_args
            if not isinstance(args, dict):
                raise ValueError("arguments are not a JSON object")
            blocks.append(
                ToolUseBlock(id=str(call.get("id") or new_id()), name=str(fn["name"]), input=args)
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise MessageError(f"malformed OpenAI tool call {call!r}: {exc}") from None
    return Msg(role=cast(Role, role), content=tuple(blocks), name=str(item.get("name") or ""))


def msgs_from_openai(items: Iterable[dict[str, Any]]) -> list[Msg]:
    """Convert a list of OpenAI messages; consecutive tool messages stay separate Msgs."""
    return [from_openai(i) for i in items]


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content)

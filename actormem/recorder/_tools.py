"""The two memory tools of AGENT_CONTROL mode: definitions, argument checks, result text.

``record_to_memory(thinking, content)`` stores what the model decided is
worth keeping; ``retrieve_from_memory(keywords, limit=5)`` searches the
long-term memory.  :func:`record_to_memory_tool` and
:func:`retrieve_from_memory_tool` are the OpenAI function-calling
definitions; :func:`parse_record_args` / :func:`parse_retrieve_args` check
the arguments a model sent (raising :class:`ValueError` that names what is
wrong); :func:`render_recorded` / :func:`render_retrieved` write the text
the model reads back.  The runtime wires them to its store
(:meth:`actormem.runtime.MemoryRuntime.call_tool`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from actormem.models.base import ToolSpec
from actormem.recorder._inject import format_hit
from actormem.store import SearchHit, WriteResult

__all__ = [
    "MAX_RETRIEVE_LIMIT",
    "RECORD_TOOL",
    "RETRIEVE_TOOL",
    "UnknownToolError",
    "parse_record_args",
    "parse_retrieve_args",
    "record_to_memory_tool",
    "render_recorded",
    "render_retrieved",
    "retrieve_from_memory_tool",
]

RECORD_TOOL: Final = "record_to_memory"
RETRIEVE_TOOL: Final = "retrieve_from_memory"
MAX_RETRIEVE_LIMIT: Final = 50
_MAX_ITEMS: Final = 50
_MAX_ITEM_CHARS: Final = 10_000


class UnknownToolError(KeyError):
    """``call_tool`` was given a name that the runtime does not offer."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown tool"


def record_to_memory_tool() -> ToolSpec:
    """The ``record_to_memory`` definition (OpenAI function-calling format)."""
    return {
        "type": "function",
        "function": {
            "name": RECORD_TOOL,
            "description": (
                "Save information to long-term memory so it is available in later "
                "conversations: facts about the user, their preferences, decisions, plans and "
                "anything they ask you to remember. Write each item as a self-contained "
                "statement (e.g. 'User's daughter Mia was born on 2019-04-02')."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "thinking": {
                        "type": "string",
                        "description": "Why these items are worth remembering.",
                    },
                    "content": {
                        "type": "array",
                        "items": {"type": "string"},
                        "minItems": 1,
                        "description": "The items to remember, one self-contained statement each.",
                    },
                },
                "required": ["thinking", "content"],
                "additionalProperties": False,
            },
        },
    }


def retrieve_from_memory_tool() -> ToolSpec:
    """The ``retrieve_from_memory`` definition (OpenAI function-calling format)."""
    return {
        "type": "function",
        "function": {
            "name": RETRIEVE_TOOL,
            "description": (
                "Search long-term memory for what was learned in earlier conversations "
                "(the user's facts, preferences, past events). Use it before answering "
                "questions that depend on the user's history."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "keywords": {
                        "type": "array",
                        "items": {"type": "string"},
                        "minItems": 1,
                        "description": "Words or short phrases to search for.",
                    },
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": MAX_RETRIEVE_LIMIT,
                        "default": 5,
                        "description": "How many memories to return at most.",
                    },
                },
                "required": ["keywords"],
                "additionalProperties": False,
            },
        },
    }


def _check_keys(tool: str, arguments: object, allowed: set[str], required: set[str]) -> None:
    if not isinstance(arguments, Mapping):
        raise ValueError(f"{tool}: arguments must be a JSON object, got {type(arguments).__name__}")
    missing = sorted(required - set(arguments))
    unknown = sorted(set(arguments) - allowed)
    if missing or unknown:
        parts = []
        if missing:
            parts.append(f"missing required argument(s) {', '.join(map(repr, missing))}")
        if unknown:
            parts.append(f"unknown argument(s) {', '.join(map(repr, unknown))}")
        raise ValueError(f"{tool}: " + "; ".join(parts))


def _str_list(tool: str, name: str, value: object) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple):
        raise ValueError(f"{tool}: {name!r} must be a list of strings, got {type(value).__name__}")
    out = []
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise ValueError(f"{tool}: {name}[{i}] must be a string, got {type(item).__name__}")
        if item.strip():
            out.append(item.strip())
    if not out:
        raise ValueError(f"{tool}: {name!r} must hold at least one non-empty string")
    if len(out) > _MAX_ITEMS:
        raise ValueError(f"{tool}: {name!r} holds {len(out)} items, the limit is {_MAX_ITEMS}")
    for i, item in enumerate(out):
        if len(item) > _MAX_ITEM_CHARS:
            raise ValueError(
                f"{tool}: {name}[{i}] has {len(item)} characters, the limit is {_MAX_ITEM_CHARS}"
            )
        _check_unicode(tool, f"{name}[{i}]", item)
    return out


def _check_unicode(tool: str, name: str, value: str) -> None:
    """Refuse text that cannot be stored (lone surrogates are not valid UTF-8)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"{tool}: {name} is not valid Unicode text ({exc.reason} at position {exc.start})"
        ) from None


def parse_record_args(arguments: Mapping[str, Any]) -> tuple[str, list[str]]:
    """Check ``record_to_memory`` arguments.

    Returns:
        ``(thinking, content items)``.

    Raises:
        ValueError: naming the missing, unknown or mistyped argument.
    """
    _check_keys(RECORD_TOOL, arguments, {"thinking", "content"}, {"content"})
    thinking = arguments.get("thinking", "")
    if not isinstance(thinking, str):
        raise ValueError(
            f"{RECORD_TOOL}: 'thinking' must be a string, got {type(thinking).__name__}"
        )
    _check_unicode(RECORD_TOOL, "'thinking'", thinking)
    return thinking.strip(), _str_list(RECORD_TOOL, "content", arguments["content"])


def parse_retrieve_args(arguments: Mapping[str, Any]) -> tuple[list[str], int]:
    """Check ``retrieve_from_memory`` arguments.

    Returns:
        ``(keywords, limit)``.

    Raises:
        ValueError: naming the missing, unknown or mistyped argument.
    """
    _check_keys(RETRIEVE_TOOL, arguments, {"keywords", "limit"}, {"keywords"})
    keywords = _str_list(RETRIEVE_TOOL, "keywords", arguments["keywords"])
    limit = arguments.get("limit", 5)
    if isinstance(limit, float) and limit.is_integer():
        limit = int(limit)
    valid = isinstance(limit, int) and not isinstance(limit, bool)
    if not valid or not 1 <= limit <= MAX_RETRIEVE_LIMIT:
        raise ValueError(
            f"{RETRIEVE_TOOL}: 'limit' must be an integer from 1 to {MAX_RETRIEVE_LIMIT}, "
            f"got {limit!r}"
        )
    return keywords, limit


def render_recorded(items: Sequence[str], results: Sequence[WriteResult]) -> str:
    """What ``record_to_memory`` tells the model."""
    new = sum(1 for r in results if r.op == "ADD")
    known = len(results) - new
    lines = [
        f"Recorded {len(items)} item(s) to long-term memory ({new} new, {known} already known):"
    ]
    lines.extend(f"- {item}" for item in items)
    return "\n".join(lines)


def render_retrieved(keywords: Sequence[str], hits: Sequence[SearchHit]) -> str:
    """What ``retrieve_from_memory`` tells the model."""
    query = ", ".join(keywords)
    if not hits:
        return f"No long-term memories match: {query}."
    lines = [f"{len(hits)} long-term memor{'y' if len(hits) == 1 else 'ies'} for: {query}"]
    lines.extend(format_hit(h) for h in hits)
    return "\n".join(lines)

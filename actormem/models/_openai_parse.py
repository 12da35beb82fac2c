"""Parsing one OpenAI-compatible chat-completions reply into a :class:`~actormem.messages.Msg`.

Split from :mod:`actormem.models.openai`, which does the requests, the
retries and the reading of bodies: this module only judges a decoded reply
-- its choices, its message and role, and whether every tool call carries a
JSON object of arguments (a malformed call raises
:class:`~actormem.models.base.MalformedToolCallError` with every call and
whether the reply was truncated).  Errors are built by the model (its
endpoint, its secrets redacted) so they read the same as the transport's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import msgspec
import structlog

from actormem.messages import MessageError, Msg, from_openai
from actormem.models._openai_reply import error_text
from actormem.models._openai_reply import usage as reply_usage
from actormem.models.base import MalformedCall, MalformedToolCallError

if TYPE_CHECKING:
    from actormem.models.openai import OpenAIChatModel

__all__ = ["check_tool_calls", "parse_reply"]

log = structlog.get_logger("actormem.models.openai")

_JSON: Final = msgspec.json.Encoder()


def parse_reply(model: OpenAIChatModel, data: Any) -> Msg:
    """The assistant message of one (non-streamed) reply; ModelError naming what is wrong."""
    if not isinstance(data, dict):
        raise model._error(f"the reply is not a JSON object but {type(data).__name__}")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        if data.get("error"):
            raise model._error(
                f"the server returned an error: {error_text(data['error'])}",
                problem="error in the reply",
            )
        raise model._error("the reply has no choices")
    choice = choices[0]
    message = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(message, dict):
        raise model._error("choices[0] of the reply has no message object")
    finish = choice.get("finish_reason") if isinstance(choice, dict) else None
    check_tool_calls(model, message, str(finish or ""), reply_usage(data.get("usage")))
    try:
        msg = from_openai({**message, "role": message.get("role") or "assistant"})
    except (MessageError, AttributeError, TypeError, ValueError, RecursionError) as exc:
        # from_openai lets AttributeError escape for a non-object "function".
        raise model._error(f"the reply message is unusable: {exc}") from None
    if msg.role != "assistant":
        raise model._error(f"the reply message has role {msg.role!r}, expected 'assistant'")
    metadata: dict[str, Any] = {"model": str(data.get("model") or model.model)}
    if isinstance(choice, dict) and choice.get("finish_reason"):
        metadata["finish_reason"] = str(choice["finish_reason"])
    usage = reply_usage(data.get("usage"))
    if usage is not None:
        metadata["usage"] = usage
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        metadata["reasoning"] = reasoning
    return msg.with_content(msg.content, **metadata)


def check_tool_calls(
    model: OpenAIChatModel,
    message: dict[str, Any],
    finish_reason: str,
    usage: dict[str, int] | None,
) -> None:
    """Raise MalformedToolCallError when a tool call's arguments are unusable."""
    raw_calls = message.get("tool_calls")
    if not isinstance(raw_calls, list) or not raw_calls:
        return
    calls: list[MalformedCall] = []
    for i, call in enumerate(raw_calls):
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            return  # not a tool call at all: from_openai names the problem
        raw = fn.get("arguments")
        call_id = str(call.get("id") or f"call_{i}")
        problem = ""
        if isinstance(raw, str) and raw.strip():
            try:
                args = msgspec.json.decode(raw)
            except (msgspec.DecodeError, UnicodeError) as exc:
                problem = f"the arguments are not valid JSON ({exc})"
            except RecursionError:
                problem = "the arguments are JSON nested too deeply to parse"
            else:
                if not isinstance(args, dict):
                    problem = f"the arguments are JSON {type(args).__name__}, not an object"
        elif raw is not None and not isinstance(raw, str | dict):
            problem = f"the arguments are {type(raw).__name__}, not a JSON object"
        text = raw if isinstance(raw, str) else _JSON.encode(raw).decode()
        calls.append(MalformedCall(call_id, fn["name"], text, problem))
    bad = [c for c in calls if c.problem]
    if not bad:
        return
    limit = model.extra_body.get("max_tokens") or model.extra_body.get("max_completion_tokens")
    used = (usage or {}).get("completion_tokens", 0)
    if finish_reason == "length":
        cut = "; the reply was truncated at the token limit (finish_reason=length)"
    elif isinstance(limit, int) and limit > 0 and used >= limit:
        # llama.cpp's server says "tool_calls" even when max_tokens cut the call.
        cut = (
            f"; the reply was truncated: it used all {limit} max_tokens "
            f"(the server said finish_reason={finish_reason or 'none'})"
        )
        finish_reason = "length"
    else:
        cut = ""
    truncated = finish_reason == "length"
    first = bad[0]
    reason = (
        f"{len(bad)} tool call(s) unusable: {first.name}: {first.problem}; "
        f"arguments start with {first.arguments[:80]!r}{cut}"
    )
    log.warning(
        "model_tool_call_malformed",
        model=model.name,
        endpoint=model._display_url,
        calls=len(bad),
        truncated=truncated,
        reason=model._redact(reason),
    )
    content = message.get("content")
    raise MalformedToolCallError(
        f"{model._display_url}: {model._redact(reason)}",
        text=content if isinstance(content, str) else "",
        calls=calls,
        finish_reason=finish_reason,
        usage=usage,
        endpoint=model._display_url,
    )

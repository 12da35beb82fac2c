"""Memory behaviour for any agent loop, in two calls.

Someone with their own loop gets what :class:`~actormem.agent.ReActAgent`
does::

    hooks = MemoryHooks(runtime)
    runtime.add(Msg.user(question))
    context = hooks.before_reasoning()          # compress if needed, inject long-term memory
    reply = my_model(to_openai(context))         # any model, any loop
    runtime.add(reply)
    hooks.after_reply([user_msg, reply])         # record the turn, end it

``before_reasoning`` enforces the compressor's budget (when the runtime
runs one), reads the working messages and, in STATIC_CONTROL or BOTH mode,
puts a ``<long_term_memory>`` block retrieved for the latest user message
right before that message.  When the runtime keeps a journal, a
``<working_memory>`` block (NOW and the latest LOG entries) goes there too,
on every call.  ``after_reply`` records the turn (STATIC_CONTROL or BOTH),
writes it to the activity log (journal) and calls ``on_turn_end``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import structlog

from actormem.messages import Msg
from actormem.recorder import LongTermMemoryMode

if TYPE_CHECKING:
    from actormem.runtime import MemoryRuntime

__all__ = ["MemoryHooks", "log_messages"]

log = structlog.get_logger(__name__)

_STATIC = (LongTermMemoryMode.STATIC_CONTROL, LongTermMemoryMode.BOTH)


class MemoryHooks:
    """Retrieval before a reasoning step and recording after a reply.

    Args:
        runtime: the memory runtime.
        inject_max_tokens: token budget of the injected long-term memory block.
        system: messages put first in every context (e.g. the system prompt).
    """

    def __init__(
        self,
        runtime: MemoryRuntime,
        *,
        inject_max_tokens: int = 800,
        system: Sequence[Msg] = (),
        log_turns: bool = True,
    ) -> None:
        self.runtime = runtime
        self.inject_max_tokens = inject_max_tokens
        self.system = list(system)
        self.log_turns = log_turns

    @property
    def static(self) -> bool:
        """Whether retrieval and recording happen automatically (STATIC_CONTROL or BOTH)."""
        return self.runtime.long_term_mode in _STATIC

    def before_reasoning(self, messages: Sequence[Msg] | None = None) -> list[Msg]:
        """The context to send to the model for the next step.

        Args:
            messages: the working messages to use (default: the runtime's,
                after a compression pass if the context is over budget).

        Returns:
            ``system`` + the working messages, with the working-memory block
            (journal) and a long-term memory block (when the mode retrieves
            statically) before the latest user message.
        """
        rt = self.runtime
        if messages is None:
            if rt.compressor_enabled:
                rt.compress_now()
            messages = rt.messages()
        context = [*self.system, *messages]
        last_user = next(
            (i for i in range(len(context) - 1, -1, -1) if context[i].role == "user"), None
        )
        if self.static and last_user is not None:
            # A failing store or embedder degrades to no long-term block (logged).
            block = _safe(rt.format_for_injection, context[last_user].text, self.inject_max_tokens)
            if block:
                context.insert(last_user, Msg.user(block, actormem="long_term_memory"))
        working = _safe(rt.working_memory)
        if working:
            at = last_user if last_user is not None else len(context)
            context.insert(at, Msg.user(working, actormem="working_memory"))
        return context

    def after_reply(self, turn: Sequence[Msg]) -> None:
        """Record ``turn`` (STATIC_CONTROL / BOTH), log it (journal) and end the turn."""
        if self.static and turn:
            self.runtime.record(turn)
        if self.log_turns:
            log_messages(self.runtime, turn)
        self.runtime.on_turn_end()


def _safe(fn: Any, *args: Any) -> Any:
    """Call a memory function; a failure is logged, never raised into the agent's turn."""
    try:
        return fn(*args)
    except Exception:
        log.exception("hooks.memory_call_failed", call=getattr(fn, "__name__", "?"))
        return None


def log_messages(runtime: MemoryRuntime, msgs: Sequence[Msg]) -> None:
    """Write messages to the runtime's activity log (nothing without a journal).

    user text: USER_FEEDBACK; assistant text: THOUGHT; a tool call: TOOL_USE;
    a tool result: TOOL_USE (ERROR when it is an error).  Injected blocks are skipped.
    """
    if runtime.journal is None:
        return
    entries = message_entries(msgs)
    if not entries:
        return
    try:  # one transaction for the lot
        runtime.log_many(entries)
        return
    except Exception:
        log.debug("hooks.log_many_failed", exc_info=True)
    for entry_type, text, meta in entries:  # then one by one: a bad entry fails alone
        _safe(functools.partial(runtime.log, entry_type, text, **meta))


def message_entries(msgs: Sequence[Msg]) -> list[tuple[str, str, dict[str, Any]]]:
    """The activity-log entries of ``msgs`` (see :func:`log_messages`)."""
    return [entry for m in msgs for entry in _entries(m)]


def _entries(m: Msg) -> list[tuple[str, str, dict[str, Any]]]:
    if m.metadata.get("actormem") in ("long_term_memory", "working_memory"):
        return []
    out: list[tuple[str, str, dict[str, Any]]] = []
    text = m.text.strip()
    if m.role == "user" and text:
        out.append(("USER_FEEDBACK", text, {"msg_id": m.id}))
    elif m.role == "assistant" and text:
        out.append(("THOUGHT", text, {"msg_id": m.id}))
    for call in m.tool_uses:
        args = json.dumps(call.input, ensure_ascii=False, default=str)[:300]
        out.append(("TOOL_USE", f"{call.name}({args})", {"tool": call.name, "call_id": call.id}))
    for res in m.tool_results:
        kind = "ERROR" if res.is_error else "TOOL_USE"
        label = res.name or "tool"
        out.append((kind, f"{label} -> {res.output}", {"tool": label, "call_id": res.tool_use_id}))
    return out

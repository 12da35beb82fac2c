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
right before that message.  ``after_reply`` records the turn (STATIC_CONTROL
or BOTH) and calls ``on_turn_end``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import structlog

from actormem.messages import Msg
from actormem.recorder import LongTermMemoryMode

if TYPE_CHECKING:
    from actormem.runtime import MemoryRuntime

__all__ = ["MemoryHooks"]

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
        self, runtime: MemoryRuntime, *, inject_max_tokens: int = 800, system: Sequence[Msg] = ()
    ) -> None:
        self.runtime = runtime
        self.inject_max_tokens = inject_max_tokens
        self.system = list(system)

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
            ``system`` + the working messages, with a long-term memory block
            before the latest user message when the mode retrieves statically.
        """
        rt = self.runtime
        if messages is None:
            if rt.compressor_enabled:
                rt.compress_now()
            messages = rt.messages()
        context = [*self.system, *messages]
        if not self.static:
            return context
        last_user = next(
            (i for i in range(len(context) - 1, -1, -1) if context[i].role == "user"), None
        )
        if last_user is None:
            return context
        block = rt.format_for_injection(context[last_user].text, self.inject_max_tokens)
        if block:
            context.insert(last_user, Msg.user(block, actormem="long_term_memory"))
        return context

    def after_reply(self, turn: Sequence[Msg]) -> None:
        """Record ``turn`` (STATIC_CONTROL / BOTH) and end the turn."""
        if self.static and turn:
            self.runtime.record(turn)
        self.runtime.on_turn_end()

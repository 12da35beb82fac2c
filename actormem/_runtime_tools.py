"""The tools a :class:`~actormem.runtime.MemoryRuntime` offers the model, and running them.

``context_reload`` (when the compressor runs) loads compressed-away messages
back; ``record_to_memory`` and ``retrieve_from_memory`` (in ``AGENT_CONTROL``
and ``BOTH`` modes) are carried out by
:class:`~actormem.recorder.MemoryToolHandlers`.  A mixin kept apart so
``runtime.py`` reads as the wiring of the actors.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from actormem._door import check_json_object
from actormem.actors.autocontext import (
    CONTEXT_RELOAD,
    context_reload_tool,
    parse_context_reload_args,
)
from actormem.compress import render_transcript
from actormem.models.base import ToolSpec
from actormem.recorder import (
    RECORD_TOOL,
    RETRIEVE_TOOL,
    LongTermMemoryMode,
    MemoryToolHandlers,
    UnknownToolError,
)
from actormem.recorder._tool_calls import ToolHandler

if TYPE_CHECKING:
    from actormem.actors._supervisor import Supervisor
    from actormem.messages import Msg

__all__ = ["ToolCalls"]


class ToolCalls:
    """``tools``, ``call_tool`` and ``context_reload``."""

    _compressor: Supervisor | None
    _memory_tools: MemoryToolHandlers | None
    _mode: LongTermMemoryMode | None
    _last_activity: float

    if TYPE_CHECKING:

        def reload(self, offload_id: str) -> list[Msg]: ...

    def context_reload(self, offload_id: str) -> str:
        """The ``context_reload`` tool: the originals rendered as a transcript.

        Unknown ids give an error message (for the model) instead of raising.
        """
        try:
            msgs = self.reload(offload_id)
        except KeyError as exc:
            return f"Error: {exc}"
        return f"Original content of {offload_id} ({len(msgs)} message(s)):\n" + render_transcript(
            msgs
        )

    def tools(self) -> list[ToolSpec]:
        """The tool definitions the agent should offer the model for this runtime.

        ``context_reload`` when the compressor runs; ``record_to_memory`` and
        ``retrieve_from_memory`` in ``AGENT_CONTROL`` and ``BOTH`` modes.
        """
        out: list[ToolSpec] = []
        if self._compressor is not None:
            out.append(context_reload_tool())
        if self._memory_tools is not None:
            out.extend(self._memory_tools.specs())
        return out

    def call_tool(self, name: str, arguments: Mapping[str, Any]) -> str:
        """Run one of :meth:`tools` and return the text the model reads back.

        Args:
            name: the tool name.
            arguments: its arguments (the decoded JSON object of the call).

        Returns:
            The tool's result text.

        Raises:
            UnknownToolError: (a KeyError) the runtime does not offer ``name``.
            ValueError: the arguments are missing, unknown or mistyped (named).
        """
        handlers = self._tool_handlers()
        handler = handlers.get(name) if isinstance(name, str) else None
        if handler is None:
            offered = ", ".join(sorted(handlers)) or "none"
            hint = ""
            if name in (RECORD_TOOL, RETRIEVE_TOOL):
                mode = self._mode.name if self._mode is not None else "no long-term memory"
                hint = f" (memory tools need AGENT_CONTROL or BOTH mode; this runtime has {mode})"
            raise UnknownToolError(f"unknown tool {name!r}{hint}; this runtime offers: {offered}")
        # The door: the same JSON check as a stored message's (depth, types, keys).
        arguments = check_json_object(arguments, f"{name}.arguments")
        self._last_activity = time.monotonic()
        return handler(arguments)

    def _tool_handlers(self) -> dict[str, ToolHandler]:
        handlers: dict[str, ToolHandler] = {}
        if self._compressor is not None:
            handlers[CONTEXT_RELOAD] = self._context_reload_tool
        if self._memory_tools is not None:
            handlers.update(self._memory_tools.handlers())
        return handlers

    def _context_reload_tool(self, arguments: Mapping[str, Any]) -> str:
        return self.context_reload(parse_context_reload_args(arguments))

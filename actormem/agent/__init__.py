"""Embed the memory runtime in an agent: the ReAct agent, hooks for your own loop, tools."""

from __future__ import annotations

from actormem.agent._hooks import MemoryHooks
from actormem.agent._react import AgentStatus, AutosaveError, ReActAgent
from actormem.agent.tools import Tool, ToolError, ToolRegistry, tool
from actormem.logs import _configure_default

_configure_default()  # quiet logging unless the application configured structlog

__all__ = [
    "AgentStatus",
    "AutosaveError",
    "MemoryHooks",
    "ReActAgent",
    "Tool",
    "ToolError",
    "ToolRegistry",
    "tool",
]

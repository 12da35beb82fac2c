"""Embed the memory runtime in an agent: the ReAct agent, hooks for your own loop, tools."""

from __future__ import annotations

from actormem.agent._hooks import MemoryHooks
from actormem.agent._react import AgentStatus, AutosaveError, ReActAgent
from actormem.agent.tools import Tool, ToolError, ToolRegistry, tool

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

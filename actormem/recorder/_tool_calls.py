"""Running the memory tools: a model's ``record_to_memory`` / ``retrieve_from_memory`` call.

:mod:`actormem.recorder._tools` defines the tools and checks their
arguments; this module carries a call out against a store for one
namespace and writes the text the model reads back.  The runtime offers
these handlers in ``AGENT_CONTROL`` and ``BOTH`` modes
(:meth:`actormem.runtime.MemoryRuntime.call_tool`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from actormem.events import Event, MemoryRecorded
from actormem.models.base import ToolSpec
from actormem.recorder._tools import (
    RECORD_TOOL,
    RETRIEVE_TOOL,
    parse_record_args,
    parse_retrieve_args,
    record_to_memory_tool,
    render_recorded,
    render_retrieved,
    retrieve_from_memory_tool,
)
from actormem.store import MemoryStore, Namespace, NewMemory, SearchHit

__all__ = ["MemoryToolHandlers", "ToolHandler"]

#: A tool handler: the decoded JSON arguments in, the text for the model out.
ToolHandler = Callable[[Mapping[str, Any]], str]


class MemoryToolHandlers:
    """The two memory tools of one runtime, bound to its store and namespace.

    Args:
        store: the long-term store the records go to.
        namespace: whose memories they are.
        publish: where ``MemoryRecorded`` goes (the runtime's event bus).
        retrieve: the runtime's search (keyed facts included; emits its event).
        source: the ``source`` of the events published.
    """

    def __init__(
        self,
        store: MemoryStore,
        namespace: Namespace,
        publish: Callable[[Event], None],
        retrieve: Callable[[str, int], list[SearchHit]],
        source: str,
    ) -> None:
        self._store = store
        self._namespace = namespace
        self._publish = publish
        self._retrieve = retrieve
        self._source = source

    @staticmethod
    def specs() -> list[ToolSpec]:
        """The definitions offered to the model (OpenAI function-calling format)."""
        return [record_to_memory_tool(), retrieve_from_memory_tool()]

    def handlers(self) -> dict[str, ToolHandler]:
        """Tool name -> handler."""
        return {RECORD_TOOL: self.record, RETRIEVE_TOOL: self.retrieve}

    def record(self, arguments: Mapping[str, Any]) -> str:
        """``record_to_memory``: store each item as a fact (synchronously: on disk when it returns).

        Raises:
            ValueError: the arguments are missing, unknown or mistyped (named).
        """
        thinking, items = parse_record_args(arguments)
        t0 = time.perf_counter()
        meta = {"thinking": thinking[:2_000]} if thinking else {}
        news = [
            NewMemory(
                content=item,
                kind="fact",
                importance=0.7,
                tags=("agent-recorded",),
                metadata=meta,
            )
            for item in items
        ]
        results = self._store.add_many(self._namespace, news)
        self._publish(
            MemoryRecorded(
                source=self._source,
                ids=tuple(r.id for r in results),
                added=sum(1 for r in results if r.op == "ADD"),
                unchanged=sum(1 for r in results if r.op != "ADD"),
                duration_ms=(time.perf_counter() - t0) * 1e3,
            )
        )
        return render_recorded(items, results)

    def retrieve(self, arguments: Mapping[str, Any]) -> str:
        """``retrieve_from_memory``: search and render the hits.

        Raises:
            ValueError: the arguments are missing, unknown or mistyped (named).
        """
        keywords, limit = parse_retrieve_args(arguments)
        return render_retrieved(keywords, self._retrieve(" ".join(keywords), limit))

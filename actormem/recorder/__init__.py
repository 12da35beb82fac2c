"""The pure parts of long-term recording: modes, config, extraction, reconciliation, tools.

Nothing here starts a thread: the recorder actor
(:mod:`actormem.actors.recorder`) batches turns and calls these pieces, and
the runtime (:class:`actormem.runtime.MemoryRuntime`) exposes them.
"""

from __future__ import annotations

from actormem.logs import _configure_default
from actormem.recorder._config import MAINTENANCE_ACTIONS, RecorderConfig
from actormem.recorder._extract import (
    EXTRACTION_PROMPT,
    ExtractedFact,
    ExtractionError,
    ModelExtractor,
    RuleExtractor,
    ask_json,
    facts_from_json,
    last_question,
    parse_json_reply,
    render_turn,
    reply_context,
    speaker_label,
    turn_speaker,
)
from actormem.recorder._facts import FACTS_SUFFIX, KEYED_KIND, KeyedFacts, facts_namespace
from actormem.recorder._fleeting import FleetingMemory
from actormem.recorder._inject import CLOSE_TAG, OPEN_TAG, format_for_injection, format_hit
from actormem.recorder._modes import LongTermMemoryMode
from actormem.recorder._reconcile import (
    RECONCILE_PROMPT,
    Decision,
    ModelReconciler,
    ReconcileOp,
    decisions_from_json,
    reconcile_by_slot,
)
from actormem.recorder._tool_calls import MemoryToolHandlers
from actormem.recorder._tools import (
    RECORD_TOOL,
    RETRIEVE_TOOL,
    UnknownToolError,
    parse_record_args,
    parse_retrieve_args,
    record_to_memory_tool,
    render_recorded,
    render_retrieved,
    retrieve_from_memory_tool,
)

_configure_default()  # quiet logging unless the application configured structlog

__all__ = [
    "CLOSE_TAG",
    "EXTRACTION_PROMPT",
    "FACTS_SUFFIX",
    "KEYED_KIND",
    "MAINTENANCE_ACTIONS",
    "OPEN_TAG",
    "RECONCILE_PROMPT",
    "RECORD_TOOL",
    "RETRIEVE_TOOL",
    "Decision",
    "ExtractedFact",
    "ExtractionError",
    "FleetingMemory",
    "KeyedFacts",
    "LongTermMemoryMode",
    "MemoryToolHandlers",
    "ModelExtractor",
    "ModelReconciler",
    "ReconcileOp",
    "RecorderConfig",
    "RuleExtractor",
    "UnknownToolError",
    "ask_json",
    "decisions_from_json",
    "facts_from_json",
    "facts_namespace",
    "format_for_injection",
    "format_hit",
    "last_question",
    "parse_json_reply",
    "parse_record_args",
    "parse_retrieve_args",
    "reconcile_by_slot",
    "record_to_memory_tool",
    "render_recorded",
    "render_retrieved",
    "render_turn",
    "reply_context",
    "retrieve_from_memory_tool",
    "speaker_label",
    "turn_speaker",
]

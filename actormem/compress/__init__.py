"""The pure core of the AutoContext compressor: budgets, token counts, summarizers, strategies.

Nothing here starts a thread of its own (except :class:`ModelSummarizer`,
which runs each model call in a worker thread to enforce its timeout) or
keeps state between calls: the compressor actor reads the working
messages, calls :func:`compress`, and applies the returned
:class:`CompressionOutcome`.
"""

from __future__ import annotations

from actormem.compress._config import DEFAULT_PROMPTS, STRATEGY_NAMES, AutoContextConfig
from actormem.compress._driver import (
    AppliedStrategy,
    CompressionOutcome,
    compress,
    needs_compression,
)
from actormem.compress._edits import StrategyResult
from actormem.compress._extractive import ExtractiveSummarizer
from actormem.compress._strategies import (
    STRATEGIES,
    compress_current_round,
    offload_old,
    offload_recent,
    summarize_large_current,
    summarize_rounds,
    tool_runs,
)
from actormem.compress._summarize import (
    ModelSummarizer,
    Summarizer,
    Summary,
    render_transcript,
)
from actormem.compress._tokens import EstimateTokenCounter, TokenCounter, TokenizerCounter
from actormem.compress._view import OFFLOADED, SUMMARIZED, SUMMARY, is_protected
from actormem.logs import _configure_default

_configure_default()  # quiet logging unless the application configured structlog

__all__ = [
    "DEFAULT_PROMPTS",
    "OFFLOADED",
    "STRATEGIES",
    "STRATEGY_NAMES",
    "SUMMARIZED",
    "SUMMARY",
    "AppliedStrategy",
    "AutoContextConfig",
    "CompressionOutcome",
    "EstimateTokenCounter",
    "ExtractiveSummarizer",
    "ModelSummarizer",
    "StrategyResult",
    "Summarizer",
    "Summary",
    "TokenCounter",
    "TokenizerCounter",
    "compress",
    "compress_current_round",
    "is_protected",
    "needs_compression",
    "offload_old",
    "offload_recent",
    "render_transcript",
    "summarize_large_current",
    "summarize_rounds",
    "tool_runs",
]

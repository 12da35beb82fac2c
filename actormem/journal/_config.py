"""JournalConfig: where the agent's files live, LOG thresholds, context budgets, dream schedule."""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from actormem._settings import JOURNAL_FIELDS, check_fields

__all__ = ["JournalConfig"]


def _positive(name: str, value: object, *, integer: bool = False, low: float = 1) -> None:
    ok = isinstance(value, int) if integer else isinstance(value, int | float)
    if (
        not ok
        or isinstance(value, bool)
        or not math.isfinite(float(value))  # type: ignore[arg-type]
        or float(value) < low  # type: ignore[arg-type]
    ):
        kind = "an int" if integer else "a number"
        raise ValueError(f"JournalConfig.{name} must be {kind} >= {low}, got {value!r}")


@dataclasses.dataclass(frozen=True)
class JournalConfig:
    """Settings of the human-readable memory (NOW, LOG, daily journal, deep dream).

    Attributes:
        memory_dir: Root of the agents' folders; each namespace gets
            ``<memory_dir>/<user>/<agent>/`` (None: ``<session_dir>/memory``).
        log_max_entries: ``LOG.md`` is compacted when it holds more live
            entries than this...
        log_max_bytes: ...or when it grows past this many bytes.
        log_keep_entries: Latest entries a compaction leaves verbatim.
        entry_max_chars: Longer log entries are clipped (the full text stays in
            ``metadata["chars"]`` as a count; tool outputs are rarely worth more).
        summary_tokens: Token target of a compaction summary.
        context_max_tokens: Budget of the working-memory block (NOW and the
            latest LOG entries) injected before every model call.
        context_log_entries: Latest LOG entries offered in that block.
        journal_line_chars: A daily-journal line shows at most this many
            characters of the memory.
        dream_lookback_days: Journal days a dream reads by default.
        dream_interval_seconds: ``on_idle`` runs a dream when the last one is
            at least this old (None: dreams run only on demand).
        memory_max_items: Most items ``MEMORY.md`` keeps.
        dream_kinds: Memory kinds that may become durable knowledge.
        dream_duplicate_threshold: Word-set Jaccard of the dream's duplicate pruning.
        dream_consolidate_threshold: Cosine of the dream's consolidation.
        model_timeout: Seconds a model summary or dream call may take.
        clock: Time source (Unix seconds); tests inject a fake clock.
    """

    memory_dir: str | os.PathLike[str] | None = None
    log_max_entries: int = 100
    log_max_bytes: int = 50_000
    log_keep_entries: int = 10
    entry_max_chars: int = 2_000
    summary_tokens: int = 300
    context_max_tokens: int = 400
    context_log_entries: int = 8
    journal_line_chars: int = 240
    dream_lookback_days: int = 7
    dream_interval_seconds: float | None = 86_400.0
    memory_max_items: int = 50
    dream_kinds: tuple[str, ...] = ("fact", "preference", "procedure")
    dream_duplicate_threshold: float = 0.7
    dream_consolidate_threshold: float = 0.9
    model_timeout: float = 60.0
    clock: Callable[[], float] = time.time

    def __post_init__(self) -> None:
        if self.memory_dir is not None and not isinstance(self.memory_dir, str | os.PathLike):
            raise ValueError(f"JournalConfig.memory_dir must be a path, got {self.memory_dir!r}")
        _positive("log_max_entries", self.log_max_entries, integer=True, low=2)
        _positive("log_max_bytes", self.log_max_bytes, integer=True, low=1_000)
        _positive("log_keep_entries", self.log_keep_entries, integer=True, low=0)
        if self.log_keep_entries >= self.log_max_entries:
            raise ValueError("JournalConfig.log_keep_entries must be below log_max_entries")
        _positive("entry_max_chars", self.entry_max_chars, integer=True, low=80)
        _positive("summary_tokens", self.summary_tokens, integer=True, low=20)
        _positive("context_max_tokens", self.context_max_tokens, integer=True, low=40)
        _positive("context_log_entries", self.context_log_entries, integer=True, low=0)
        _positive("journal_line_chars", self.journal_line_chars, integer=True, low=40)
        _positive("dream_lookback_days", self.dream_lookback_days, integer=True, low=1)
        if self.dream_interval_seconds is not None:
            _positive("dream_interval_seconds", self.dream_interval_seconds, low=0)
        _positive("memory_max_items", self.memory_max_items, integer=True, low=1)
        if isinstance(self.dream_kinds, str) or not all(
            isinstance(k, str) and k for k in self.dream_kinds
        ):
            raise ValueError("JournalConfig.dream_kinds must be a tuple of kind names")
        object.__setattr__(self, "dream_kinds", tuple(self.dream_kinds))
        for name in ("dream_duplicate_threshold", "dream_consolidate_threshold"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not 0 < value <= 1:
                raise ValueError(f"JournalConfig.{name} must be in (0, 1], got {value!r}")
        _positive("model_timeout", self.model_timeout, low=0.001)
        if not callable(self.clock):
            raise ValueError("JournalConfig.clock must be callable")
        # Every numeric field has a declared range, upper bound included (actormem._settings).
        check_fields(self, JOURNAL_FIELDS, "JournalConfig", error=ValueError)

    def folder_root(self, session_dir: str | os.PathLike[str]) -> Path:
        """The root of the agents' folders for a runtime whose sessions live in ``session_dir``."""
        return (
            Path(self.memory_dir) if self.memory_dir is not None else Path(session_dir) / "memory"
        )

    def replace(self, **changes: Any) -> JournalConfig:
        """A copy with ``changes`` applied (validated again)."""
        return dataclasses.replace(self, **changes)

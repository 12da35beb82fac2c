"""RecorderConfig: batching, back-pressure, extraction, promotion and maintenance settings."""

from __future__ import annotations

import dataclasses
from typing import Any, Final

from actormem.store._limits import RECORDER_FIELDS, check_fields

__all__ = ["MAINTENANCE_ACTIONS", "RecorderConfig"]

#: The store maintenance actions ``on_idle`` may run, in the order it runs them.
MAINTENANCE_ACTIONS: Final = (
    "decay",
    "auto_forget",
    "prune_stale",
    "prune_duplicates",
    "consolidate",
    "enforce_cap",
)


@dataclasses.dataclass(frozen=True)
class RecorderConfig:
    """Settings of the long-term recorder.

    Attributes:
        batch_seconds: A batch closes this long after its first turn...
        batch_count: ...or as soon as it holds this many turns.  One batch
            costs one extraction call and one store transaction for its adds.
        backlog_limit: When this many submitted turns are not yet committed, a
            ``RecordingBacklog`` event is published (again each time the
            backlog doubles; re-armed once it drains below half the limit).
        max_pending: Hard bound on uncommitted turns held in memory; at the
            bound ``record()`` waits for the recorder to catch up (back-pressure;
            nothing is dropped).  ``None`` means no bound.
        confidence_threshold: Extracted facts below this confidence are not stored.
        record_episodes: Also store every turn as an ``episode`` memory (the
            raw material: nothing said is lost even when extraction finds
            nothing or the model fails).
        episode_importance: Importance of episode memories.
        max_episode_chars: Episodes longer than this are clipped (head and tail).
        similar_limit: Stored memories shown to the model per new fact when
            reconciling (ADD / UPDATE / DELETE / NONE).
        model_timeout: Seconds one extraction or reconciliation call may take.
        model_retries: Extra attempts after malformed model output or a failed call.
        yield_to_turns: Run extraction and reconciliation calls only between
            conversation turns, streamed, and abandon one when a turn starts (it
            is retried after the turn, then the offline path takes the batch),
            so memory work never delays the conversation on a server that
            answers one request at a time.  ``False``: calls run as soon as a
            batch closes.
        promote_importance: ``on_session_end`` promotes short-term messages whose
            ``metadata["importance"]`` is at least this...
        promote_access_count: ...or whose ``metadata["access_count"]`` is at least this.
        summary_tokens: Token target of the session summary ``on_session_end`` stores.
        idle_seconds: Quiet period after which the runtime runs ``on_idle`` by
            itself (``None`` turns the timer off).
        inject_limit: Memories retrieved for ``format_for_injection``.
        maintenance: Store actions ``on_idle`` runs (see :data:`MAINTENANCE_ACTIONS`).
        decay_rate: Daily retention factor for ``decay``.
        decay_threshold: Decayed relevance below which ``decay`` forgets.
        forget_threshold: Relevance below which ``auto_forget`` forgets.
        stale_days: ``prune_stale`` forgets memories unused this many days.
        duplicate_threshold: Word-set Jaccard for ``prune_duplicates``.
        consolidate_threshold: Cosine for ``consolidate``.
        max_memories: Cap for ``enforce_cap`` (the action is skipped when None).
    """

    batch_seconds: float = 0.2
    batch_count: int = 1_024
    backlog_limit: int = 5_000
    max_pending: int | None = 100_000
    confidence_threshold: float = 0.6
    record_episodes: bool = True
    episode_importance: float = 0.3
    max_episode_chars: int = 4_000
    similar_limit: int = 5
    model_timeout: float = 60.0
    model_retries: int = 1
    yield_to_turns: bool = True
    promote_importance: float = 0.5
    promote_access_count: int = 3
    summary_tokens: int = 300
    idle_seconds: float | None = 300.0
    inject_limit: int = 20
    maintenance: tuple[str, ...] = ("decay", "prune_duplicates", "consolidate", "enforce_cap")
    decay_rate: float = 0.95
    decay_threshold: float = 0.10
    forget_threshold: float = 0.15
    stale_days: float = 30.0
    duplicate_threshold: float = 0.7
    consolidate_threshold: float = 0.9
    max_memories: int | None = None

    def __post_init__(self) -> None:
        # every numeric field has a declared range (actormem.store._limits)
        check_fields(self, RECORDER_FIELDS, "RecorderConfig", error=ValueError)
        if not isinstance(self.record_episodes, bool):
            raise ValueError("RecorderConfig.record_episodes must be a bool")
        if not isinstance(self.yield_to_turns, bool):
            raise ValueError("RecorderConfig.yield_to_turns must be a bool")
        if isinstance(self.maintenance, str) or not isinstance(self.maintenance, tuple | list):
            raise ValueError("RecorderConfig.maintenance must be a tuple of action names")
        unknown = [a for a in self.maintenance if a not in MAINTENANCE_ACTIONS]
        if unknown:
            raise ValueError(
                f"RecorderConfig.maintenance has unknown action(s) {unknown} "
                f"(known: {', '.join(MAINTENANCE_ACTIONS)})"
            )
        object.__setattr__(self, "maintenance", tuple(self.maintenance))

    def replace(self, **changes: Any) -> RecorderConfig:
        """A copy with ``changes`` applied (validated again)."""
        return dataclasses.replace(self, **changes)

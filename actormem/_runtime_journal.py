"""The human-readable memory calls of :class:`~actormem.runtime.MemoryRuntime`.

NOW.md, the activity log, the ``<working_memory>`` block and the deep dream
all go through the runtime's :class:`~actormem.journal.Journal`; this mixin
holds those thin calls so ``runtime.py`` reads as the wiring of the actors.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from actormem._settings import check_arg
from actormem.journal import DreamReport, Journal, NowStatus
from actormem.store import LogRecord

__all__ = ["JournalCalls"]


class JournalCalls:
    """``update_now``, ``now``, ``log``, ``working_memory`` and ``dream``."""

    journal: Journal | None
    _last_activity: float

    if TYPE_CHECKING:
        _recorder: object | None

        def flush(self, timeout: float | None = 60) -> None: ...

    def _need_journal(self) -> Journal:
        if self.journal is None:
            raise RuntimeError(
                "this runtime keeps no journal: create it with "
                "MemoryRuntime(store=..., journal=True) or journal=JournalConfig(...)"
            )
        return self.journal

    def update_now(
        self,
        objective: str,
        next_steps: Sequence[str] = (),
        *,
        state: str = "in_flight",
        note: str = "",
        also_log: Sequence[tuple[str, str, dict[str, Any]]] = (),
        sync: bool = True,
    ) -> NowStatus:
        """Replace the working status (NOW.md, session state, DuckDB); emits ``NowUpdated``.

        Args:
            objective: what the agent is working on.
            next_steps: the immediate next steps, in order.
            state: ``in_flight``, ``done``, ``error``, ``idle`` (or another word).
            note: a free note (an error, a hint for whoever resumes).
            also_log: ``(entry_type, content, metadata)`` log entries committed
                in the same transaction as the status.
            sync: False: return once written to the store's log and sync in the
                background (see :meth:`actormem.journal.Journal.update_now`);
                :meth:`sync_journal` waits for it.

        Raises:
            RuntimeError: the runtime keeps no journal.
            ValueError: an argument has the wrong type.
        """
        self._last_activity = time.monotonic()
        return self._need_journal().update_now(
            objective, next_steps, state=state, note=note, also_log=also_log, sync=sync
        )

    def sync_journal(self) -> None:
        """Return once every journal write is synced (see ``update_now(sync=False)``).

        Raises:
            StoreError: A background sync of the store's log failed.
        """
        if self.journal is not None:
            self.journal.sync_store()

    def now(self) -> NowStatus:
        """The working status (a hand edit of NOW.md is imported first).

        Raises:
            RuntimeError: the runtime keeps no journal.
        """
        return self._need_journal().now()

    def log(self, entry_type: str, content: str, **metadata: Any) -> LogRecord:
        """Append a typed entry (TOOL_USE, THOUGHT, USER_FEEDBACK, ERROR, SYSTEM) to the
        activity log: DuckDB first, then LOG.md; past the threshold the log is compacted.

        Raises:
            RuntimeError: the runtime keeps no journal.
            ValueError: an unknown type or empty text.
        """
        self._last_activity = time.monotonic()
        return self._need_journal().log(entry_type, content, **metadata)

    def log_many(self, entries: Sequence[tuple[str, str, dict[str, Any]]]) -> list[LogRecord]:
        """Append ``(entry_type, content, metadata)`` entries in one transaction (see
        :meth:`log`); LOG.md is rewritten once.

        Raises:
            RuntimeError: the runtime keeps no journal.
            ValueError: an unknown type or empty text (nothing is written).
        """
        self._last_activity = time.monotonic()
        return self._need_journal().log_many(entries)

    def working_memory(self, max_tokens: int | None = None) -> str:
        """The ``<working_memory>`` block (NOW and the latest LOG entries) for the model,
        within ``max_tokens`` (default ``JournalConfig.context_max_tokens``); "" without a
        journal or when there is nothing to say.

        Raises:
            ValueError: ``max_tokens`` is not None or an int from 1 to 10,000,000.
        """
        check_arg("MemoryRuntime.working_memory", "max_tokens", max_tokens, kind="max_tokens?")
        if self.journal is None:
            return ""
        return self.journal.context(max_tokens)

    def dream(self, lookback_days: int | None = None, *, force: bool = False) -> DreamReport:
        """Deep dream now: consolidate, rewrite MEMORY.md, add a diary entry to DREAMS.md.

        Idempotent: unchanged input (memories and journal days, by content
        hash) gives a skipped report and writes nothing unless ``force``.

        Raises:
            RuntimeError: the runtime keeps no journal.
            ValueError: ``lookback_days`` is not None or an int from 1 to 36,500.
        """
        check_arg("MemoryRuntime.dream", "lookback_days", lookback_days)
        journal = self._need_journal()
        self._last_activity = time.monotonic()
        if self._recorder is not None:
            self.flush()
        return journal.dream(lookback_days, force=force)

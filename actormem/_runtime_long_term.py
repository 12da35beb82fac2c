"""The long-term memory reads and synchronous writes of :class:`~actormem.runtime.MemoryRuntime`.

``retrieve``, ``format_for_injection``, ``save_fact`` and ``get_fact`` run on
the caller's thread against the store (which serialises writers itself), so
they never wait behind a recording batch; they publish their events on the
runtime's bus.  The compressor's offloads reach the store through here too.
A mixin kept apart so ``runtime.py`` reads as the wiring.
"""

from __future__ import annotations

import hashlib
import time
from typing import TYPE_CHECKING

from actormem._runtime_args import check_retrieve_args
from actormem._settings import check_arg
from actormem.actors.recorder import RECORDER
from actormem.compress import render_transcript
from actormem.events import FactReconciled, MemoryRetrieved
from actormem.messages import Msg
from actormem.recorder import KeyedFacts, LongTermMemoryMode, RecorderConfig, format_for_injection
from actormem.store import InvalidMemoryError, MemoryStore, Namespace, NewMemory, SearchHit

if TYPE_CHECKING:
    from actormem.actors.recorder import RecordingTracker
    from actormem.streams import EventBus

__all__ = ["LongTermCalls"]


class LongTermCalls:
    """The long-term properties, searches and keyed facts of a runtime."""

    _mode: LongTermMemoryMode | None
    _store: MemoryStore | None
    _namespace: Namespace
    _recorder_config: RecorderConfig
    _keyed: KeyedFacts | None
    _tracker: RecordingTracker
    _last_activity: float
    bus: EventBus

    @property
    def long_term_mode(self) -> LongTermMemoryMode | None:
        """The long-term memory mode (None: this runtime has no long-term memory)."""
        return self._mode

    @property
    def store(self) -> MemoryStore | None:
        """The long-term store (None: no long-term memory)."""
        return self._store

    @property
    def namespace(self) -> Namespace:
        """Whose long-term memories this runtime reads and writes."""
        return self._namespace

    @property
    def recorder_config(self) -> RecorderConfig:
        """The recorder's settings."""
        return self._recorder_config

    def _need_store(self) -> MemoryStore:
        if self._store is None:
            raise RuntimeError(
                "this runtime has no long-term memory: create it with "
                "MemoryRuntime(store='memory.duckdb') or long_term=LongTermMemoryMode.BOTH"
            )
        return self._store

    def retrieve(self, query: str, limit: int = 5) -> list[SearchHit]:
        """Search the long-term memory (keyed facts included), best first.

        Runs on the caller's thread; emits ``MemoryRetrieved``.

        Args:
            query: what to look for.
            limit: how many hits at most (1 to 1,000).

        Raises:
            RuntimeError: the runtime has no long-term memory.
            ValueError: ``query`` is not a string or ``limit`` is out of range.
        """
        store = self._need_store()
        check_retrieve_args(query, limit)
        self._last_activity = time.monotonic()
        t0 = time.perf_counter()
        hits = store.search(query, self._namespace, limit)
        if self._keyed is not None:
            keyed = store.search(query, self._keyed.namespace, limit)
            if keyed:
                hits = sorted([*hits, *keyed], key=lambda h: -h.score)[:limit]
        ms = (time.perf_counter() - t0) * 1e3
        self.bus.publish(
            MemoryRetrieved(
                source=RECORDER,
                query=query,
                hit_ids=tuple(h.memory.id for h in hits),
                scores=tuple(h.score for h in hits),
                latency_ms=ms,
            )
        )
        return hits

    def format_for_injection(self, query: str, max_tokens: int = 800) -> str:
        """The ``<long_term_memory>`` block for ``query`` within ``max_tokens`` ("" when no hits).

        Retrieves ``RecorderConfig.inject_limit`` memories and keeps the best
        that fit, each with its date and kind.

        Raises:
            RuntimeError: the runtime has no long-term memory.
            ValueError: ``query`` is not a string or ``max_tokens`` is not an int
                from 1 to 10,000,000.
        """
        check_arg("MemoryRuntime.format_for_injection", "max_tokens", max_tokens)
        hits = self.retrieve(query, self._recorder_config.inject_limit)
        return format_for_injection(hits, max_tokens)

    def recording_stats(self) -> dict[str, int]:
        """Turns submitted, committed (or failed), failed and pending; memories refused.

        ``refused`` counts memories (not turns) the store refused while the
        rest of their batch was recorded: their turns count as finished, not
        failed (``flush()`` raises :class:`RecordingError` naming them).
        """
        t = self._tracker
        return {
            "submitted": t.submitted,
            "finished": t.finished,
            "failed": t.failed,
            "pending": t.pending,
            "refused": t.refused,
        }

    def save_fact(self, key: str, value: str, category: str = "general") -> None:
        """Store an exact fact under ``key`` (a later save replaces it; history is kept).

        Synchronous: when it returns, the fact is on disk.

        Raises:
            ValueError: an argument is empty, too long or not a string.
            RuntimeError: no long-term memory.
        """
        self._need_store()
        assert self._keyed is not None
        self._last_activity = time.monotonic()
        res = self._keyed.save(key, value, category)
        op = {"ADD": "ADD", "UPDATE": "UPDATE"}.get(res.op, "NONE")
        self.bus.publish(
            FactReconciled(source=RECORDER, op=op, memory_id=res.id, new=f"{key}: {value}")
        )

    def get_fact(self, key: str) -> str | None:
        """The exact value saved under ``key`` in this namespace, or None.

        Raises:
            ValueError: ``key`` is empty or not a string.
            RuntimeError: no long-term memory.
        """
        self._need_store()
        assert self._keyed is not None
        self._last_activity = time.monotonic()
        return self._keyed.get(key)

    @property
    def facts(self) -> KeyedFacts:
        """The keyed facts (``items()``, ``history(key)``, ``delete(key)``)."""
        self._need_store()
        assert self._keyed is not None
        return self._keyed

    def _offload_to_store(self, offload_id: str, originals: tuple[Msg, ...]) -> None:
        """Copy compressed-away messages to the long-term store (searchable, durable)."""
        store = self._store
        if store is None:
            return
        # One offload is one memory: its id follows from the offload id, so a
        # compression repeated after a restart (the session was saved before
        # the offload reached the store, or the process died in between)
        # finds the memory it already wrote instead of adding a second one.
        memory_id = hashlib.sha256(f"{self._namespace.key()}\x00{offload_id}".encode()).hexdigest()[
            :32
        ]
        if store.get(self._namespace, memory_id, include_deleted=True) is not None:
            return
        item = NewMemory(
            content=f"Offloaded conversation {offload_id}:\n{render_transcript(originals)}",
            kind="offload",
            importance=0.3,
            tags=("offload",),
            source_ids=tuple(m.id for m in originals),
            metadata={"offload_id": offload_id, "messages": len(originals)},
            created_at=originals[0].created_at if originals else None,
            id=memory_id,
        )
        try:
            store.add(self._namespace, item)
        except InvalidMemoryError:
            # Another runtime on this namespace wrote the same offload first.
            if store.get(self._namespace, memory_id, include_deleted=True) is None:
                raise

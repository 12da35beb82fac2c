"""The store's maintenance actions, the same on every backend.

Why a module of its own: decay, forgetting, caps and merges are policy --
which memories to remove or fold, and why -- and none of it depends on the
database.  Each action checks its arguments, then hands a planning function
to the backend's :meth:`~actormem.store._base.StoreBase._write`, which runs
it inside one write transaction.  Keyed facts are never touched here
(``maintained()``), and only facts, preferences and procedures ever merge
(``merging()``).  :class:`StoreBase` inherits these methods; nothing else
should.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Mapping
from typing import TypeVar

from actormem.store._base_hooks import BackendHooks
from actormem.store._limits import MAINTENANCE_ARGS, Span
from actormem.store._planning import (
    Planner,
    jaccard,
    plan_merges,
    remove_records,
    similar_pairs,
)
from actormem.store._records import Batch, check_namespace
from actormem.store._relevance import DAY_SECONDS, RelevanceWeights, decayed_relevance
from actormem.store._types import InvalidMemoryError, MaintenanceReport, MemoryRecord, Namespace

__all__ = ["Maintenance", "check_args"]

T = TypeVar("T")


class Maintenance(BackendHooks):
    """Decay, forgetting, caps and merges, planned here and written by the backend."""

    _weights: RelevanceWeights

    def decay(
        self, namespace: Namespace, *, rate: float = 0.95, threshold: float = 0.10
    ) -> MaintenanceReport:
        """Seed 000's decay: forget memories whose ``relevance * rate ** days_unused`` < threshold.

        Args:
            namespace: The scope.
            rate: Daily retention factor.
            threshold: Decayed relevance below which a memory is soft-deleted.
        """
        check_args(MAINTENANCE_ARGS, "decay", rate=rate, threshold=threshold)
        self._check_open()
        scope = check_namespace(namespace)

        def plan(planner: Planner, now: float, batch: Batch) -> MaintenanceReport:
            state = planner.view.scope_state(scope).maintained()  # never a keyed fact
            if not state.records:
                return MaintenanceReport(action="decay", examined=0)
            rel = state.relevance(now, self._weights)
            dec = decayed_relevance(rel, state.last, now, rate)
            victims = [r for r, d in zip(state.records, dec, strict=True) if d < threshold]
            removed = remove_records(
                batch, victims, "decay", now, f"decayed relevance < {threshold}"
            )
            return MaintenanceReport(
                action="decay",
                examined=len(state.records),
                removed=removed,
                details={
                    "rate": rate,
                    "threshold": threshold,
                    "mean_decayed": float(dec.mean()),
                    "min_decayed": float(dec.min()),
                },
            )

        return self._write("decay", plan)

    def auto_forget(self, namespace: Namespace, *, threshold: float = 0.15) -> MaintenanceReport:
        """Soft-delete memories whose relevance is below ``threshold``."""
        check_args(MAINTENANCE_ARGS, "auto_forget", threshold=threshold)
        self._check_open()
        scope = check_namespace(namespace)

        def plan(planner: Planner, now: float, batch: Batch) -> MaintenanceReport:
            state = planner.view.scope_state(scope).maintained()  # never a keyed fact
            rel = state.relevance(now, self._weights)
            victims = [r for r, s in zip(state.records, rel, strict=True) if s < threshold]
            removed = remove_records(batch, victims, "auto_forget", now, f"relevance < {threshold}")
            return MaintenanceReport(
                action="auto_forget",
                examined=len(state.records),
                removed=removed,
                details={"threshold": threshold},
            )

        return self._write("auto_forget", plan)

    def prune_stale(self, namespace: Namespace, *, max_age_days: float = 30.0) -> MaintenanceReport:
        """Soft-delete memories not accessed for more than ``max_age_days``."""
        check_args(MAINTENANCE_ARGS, "prune_stale", max_age_days=max_age_days)
        self._check_open()
        scope = check_namespace(namespace)

        def plan(planner: Planner, now: float, batch: Batch) -> MaintenanceReport:
            state = planner.view.scope_state(scope).maintained()  # never a keyed fact
            cutoff = now - max_age_days * DAY_SECONDS
            victims = [r for r, t in zip(state.records, state.last, strict=True) if t < cutoff]
            removed = remove_records(
                batch, victims, "prune_stale", now, f"unused > {max_age_days} days"
            )
            return MaintenanceReport(
                action="prune_stale",
                examined=len(state.records),
                removed=removed,
                details={"max_age_days": max_age_days},
            )

        return self._write("prune_stale", plan)

    def enforce_cap(self, namespace: Namespace, max_memories: int) -> MaintenanceReport:
        """Keep at most ``max_memories`` per concrete namespace, evicting the least relevant."""
        check_args(MAINTENANCE_ARGS, "enforce_cap", max_memories=max_memories)
        self._check_open()
        scope = check_namespace(namespace)

        def plan(planner: Planner, now: float, batch: Batch) -> MaintenanceReport:
            state = planner.view.scope_state(scope).maintained()  # never a keyed fact
            rel = state.relevance(now, self._weights)
            groups: dict[tuple[str, str, str, str], list[tuple[float, float, MemoryRecord]]] = {}
            for rec, score in zip(state.records, rel, strict=True):
                groups.setdefault(rec.namespace.key(), []).append(
                    (float(score), rec.created_at, rec)
                )
            victims: builtins.list[MemoryRecord] = []
            for members in groups.values():
                if len(members) > max_memories:
                    members.sort(key=lambda m: (m[0], m[1]))
                    victims.extend(m[2] for m in members[: len(members) - max_memories])
            removed = remove_records(
                batch, victims, "enforce_cap", now, f"over cap of {max_memories}"
            )
            return MaintenanceReport(
                action="enforce_cap",
                examined=len(state.records),
                removed=removed,
                details={"max_memories": max_memories},
            )

        return self._write("enforce_cap", plan)

    def _merge_pairs(
        self,
        action: str,
        namespace: Namespace,
        accept: Callable[[MemoryRecord, MemoryRecord, float], bool],
        prefilter: float,
    ) -> MaintenanceReport:
        self._check_open()
        scope = check_namespace(namespace)

        def plan(planner: Planner, now: float, batch: Batch) -> MaintenanceReport:
            state = planner.view.scope_state(scope).maintained()  # never a keyed fact
            examined = len(state.records)
            state = state.merging()  # only facts merge, never episodes or other events
            recs = state.records
            if len(recs) < 2:
                return MaintenanceReport(action=action, examined=examined)
            rel = state.relevance(now, self._weights)
            pairs = similar_pairs(state.vectors(), prefilter)
            merged = plan_merges(action, recs, rel, pairs, accept, now, batch)
            return MaintenanceReport(
                action=action,
                examined=examined,
                removed=tuple(loser for _, loser in merged),
                merged=tuple(merged),
            )

        return self._write(action, plan)

    def prune_duplicates(
        self, namespace: Namespace, *, threshold: float = 0.7
    ) -> MaintenanceReport:
        """Merge near-identical texts: word-set Jaccard >= ``threshold`` (seed 000).

        Pairs are first found by cosine (>= 0.5) to avoid comparing every pair.
        """
        check_args(MAINTENANCE_ARGS, "prune_duplicates", threshold=threshold)

        def accept(a: MemoryRecord, b: MemoryRecord, sim: float) -> bool:
            return jaccard(a.content, b.content) >= threshold

        return self._merge_pairs("prune_duplicates", namespace, accept, min(0.5, threshold))

    def consolidate(self, namespace: Namespace, *, threshold: float = 0.9) -> MaintenanceReport:
        """Merge memories whose vectors have cosine >= ``threshold``.

        The more relevant one survives and absorbs the other's access count,
        the larger importance and the union of tags and source ids; the other
        is marked ``superseded_by`` the survivor.
        """
        check_args(MAINTENANCE_ARGS, "consolidate", threshold=threshold)
        return self._merge_pairs("consolidate", namespace, lambda a, b, s: True, threshold)


def check_args(table: Mapping[str, Span], operation: str = "", **values: object) -> None:
    """Check arguments against their declared ranges (:mod:`actormem.store._limits`)."""
    for name, value in values.items():
        span = table[f"{operation}.{name}" if operation else name]
        span.check(value, name, error=InvalidMemoryError)

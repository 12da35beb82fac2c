"""Group commit: concurrent writes to different namespaces share one DuckDB transaction.

A DuckDB commit syncs the WAL (``fsync``, 2-12 ms on these machines), so
one thread that adds memories one at a time is bound by the disk.  When
several threads write at once, the first to take the writer lock becomes
the *leader*: it takes every queued request (at most one per concrete
namespace, oldest first), plans each into its own :class:`Batch` against
the index, writes them all in one transaction and commits once; the other
threads wake up to find their request done.  Requests of a namespace that
is already in the group wait for the next one, so a request is always
planned against an index that holds every earlier commit of its namespace
(duplicate detection, merges and caps stay exact); writes without a
namespace (maintenance over a scope, imports) never share a transaction.

What "acknowledged" means does not change: a write returns only after what
holds it is durable -- the group's record synced in the store's log
(:mod:`actormem.store._acklog`: one sync for the whole group), or for a large
batch the DuckDB transaction committed (its WAL record synced).  If a
request's plan fails, only that request fails.  If the shared transaction
fails, it is rolled back and each request is committed again on its own,
so one bad request (e.g. an explicit id taken in another namespace of the
same group) cannot fail the others.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from actormem.store._records import Batch

__all__ = ["GroupCommit", "merge_batches"]

T = TypeVar("T")
Key = tuple[str, str, str, str]


@dataclass(eq=False)
class _Request(Generic[T]):
    plan: Callable[[float, Batch], T]
    key: Key
    batch: Batch = field(default_factory=Batch)
    out: Any = None
    error: BaseException | None = None
    done: bool = False


def merge_batches(batches: list[Batch]) -> Batch:
    """One batch doing what ``batches`` do (they touch disjoint memories)."""
    merged = Batch()
    for b in batches:
        merged.inserts.extend(b.inserts)
        merged.changes.update(b.changes)
        merged.removed.extend(b.removed)
        merged.history.extend(b.history)
    return merged


class GroupCommit:
    """The queue of namespace-keyed writes waiting for the writer lock.

    Args:
        lock: The store's writer lock (re-entrant).
        commit: Writes a batch in one transaction and applies it to the index.
        clock: The store's clock.
        before: Called by the leader under the lock before planning (e.g. an
            is-open check); an exception fails every request of the group.
    """

    def __init__(
        self,
        lock: threading.RLock,
        commit: Callable[[Batch, float], None],
        clock: Callable[[], float],
        before: Callable[[], None],
    ) -> None:
        self._lock = lock
        self._commit = commit
        self._clock = clock
        self._before = before
        self._queue: list[_Request[Any]] = []
        self._queue_lock = threading.Lock()
        self._cv = threading.Condition(self._queue_lock)
        self._leading = False
        #: Transactions committed and requests they held (for tests and benchmarks).
        self.groups = 0
        self.grouped = 0

    def write(self, key: Key, plan: Callable[[float, Batch], T]) -> T:
        """Plan and commit ``plan`` (possibly with other namespaces' requests)."""
        req: _Request[T] = _Request(plan, key)
        with self._cv:
            self._queue.append(req)
            # Followers sleep until their request is done or nobody leads (one
            # wake-up each, instead of handing the writer lock on one by one).
            while not req.done and self._leading:
                self._cv.wait()
            lead = not req.done
            if lead:
                self._leading = True
        if lead:
            try:
                while not req.done:
                    with self._lock:
                        self._lead()
            finally:
                with self._cv:
                    self._leading = False
                    self._cv.notify_all()
        if req.error is not None:
            raise req.error
        out: T = req.out
        return out

    def _take(self) -> list[_Request[Any]]:
        with self._queue_lock:
            group: list[_Request[Any]] = []
            keys: set[Key] = set()
            rest: list[_Request[Any]] = []
            for r in self._queue:
                if r.key in keys:
                    rest.append(r)
                else:
                    keys.add(r.key)
                    group.append(r)
            self._queue = rest
        return group

    def _lead(self) -> None:
        group = self._take()
        try:
            self._before()
            now = self._clock()
            planned: list[_Request[Any]] = []
            for r in group:
                try:
                    r.out = r.plan(now, r.batch)
                except Exception as exc:  # this request only
                    r.error, r.done = exc, True
                else:
                    planned.append(r)
            if len(planned) > 1:
                try:
                    self._commit(merge_batches([r.batch for r in planned]), now)
                    planned = []
                except Exception:  # rolled back: commit each on its own
                    pass
            for r in planned:
                try:
                    self._commit(r.batch, now)
                except Exception as exc:  # the error goes to its own caller
                    r.error = exc
            self.groups += 1
            self.grouped += len(group)
        except BaseException as exc:
            for r in group:
                if not r.done and r.error is None:
                    r.error = exc
            raise
        finally:
            for r in group:
                r.done = True

"""What the slow journaled turns of ``bench_reply`` wait for (``bench_reply --breakdown``).

Bench-only instrumentation, kept apart from ``bench_reply`` (which measures
the turns untouched): the library's calls on a turn's path and on its
background threads are wrapped to note each call's thread and wall span, the
store's writer, log and apply locks to note each wait longer than 0.2 ms, and
a ``gc.callbacks`` hook notes collections.  Then each turn over 10 ms is
put down to what took most of it on the turn's own thread -- a wait for the
writer lock or the log's lock (another writer's record and its sync), its
own ``fdatasync``, the retrieval, the short-term actor's round trips, the
journal's working memory -- or to none of them when no one step took 30%
of it (getting a core and the GIL back between steps), and the background
work it overlapped is counted too: a DuckDB apply of the pending records,
a LOG compaction, the recorder's write, the NOW.md writer's sync, a
collection.  Wrapping costs a few microseconds per call: the turns measured
this way are a little slower than ``bench_reply``'s.
"""

from __future__ import annotations

import functools
import gc
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

Span = tuple[str, str, float, float]  # label, thread name, start, end

#: The turn thread's steps a slow turn is put down to (label -> cause).
CAUSES = {
    "wait: writer lock": "writer-lock wait",
    "wait: log lock": "log-lock wait",
    "wait: apply lock": "apply-lock wait",
    "AckLog._write_dsync": "own sync",
    "DuckDBStore.search": "retrieval",
    "ShortTermCalls.messages": "short-term actor",
    "ShortTermCalls.add": "short-term actor",
    "JournalCalls.working_memory": "working memory",
}


class _TimedLock:
    """A lock that notes waits longer than 0.2 ms (same acquire/release as the one it wraps)."""

    def __init__(self, inner: Any, label: str, spans: list[Span]) -> None:
        self._inner, self._label, self._spans = inner, label, spans

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        t0 = time.perf_counter()
        ok: bool = self._inner.acquire(blocking, timeout)
        t1 = time.perf_counter()
        if t1 - t0 > 0.0002:
            self._spans.append((self._label, threading.current_thread().name, t0, t1))
        return ok

    def release(self) -> None:
        self._inner.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()

    def _is_owned(self) -> bool:
        owned: bool = self._inner._is_owned()
        return owned


class Tracer:
    """Wraps the calls below while installed; :meth:`remove` puts them back."""

    def __init__(self) -> None:
        self.spans: list[Span] = []
        self._undo: list[Callable[[], None]] = []
        self._gc_start: dict[int, float] = {}

    def _wrap(self, owner: Any, name: str, label: str) -> None:
        fn = owner.__dict__[name]  # a KeyError names a call that moved: fix the list below
        spans = self.spans

        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spans.append((label, threading.current_thread().name, t0, time.perf_counter()))

        setattr(owner, name, timed)
        self._undo.append(lambda: setattr(owner, name, fn))

    def _gc(self, phase: str, info: dict[str, Any]) -> None:
        me = threading.get_ident()
        if phase == "start":
            self._gc_start[me] = time.perf_counter()
        elif me in self._gc_start:
            t0 = self._gc_start.pop(me)
            name = threading.current_thread().name
            self.spans.append((f"gc{info['generation']}", name, t0, time.perf_counter()))

    def install(self) -> None:
        from actormem import _runtime_journal, _runtime_short_term
        from actormem.store import _acklog, _duckdb_logged
        from actormem.store._duckdb import DuckDBStore

        calls: list[tuple[Any, str, str]] = [
            (_acklog.AckLog, "_write_dsync", "AckLog._write_dsync"),
            (_duckdb_logged.DuckDBLogged, "_apply", "DuckDB apply"),
            (_runtime_short_term.ShortTermCalls, "messages", "ShortTermCalls.messages"),
            (_runtime_short_term.ShortTermCalls, "add", "ShortTermCalls.add"),
            (_runtime_journal.JournalCalls, "working_memory", "JournalCalls.working_memory"),
        ]
        for name in ("search", "add_many", "log_compact", "journal_write"):
            owner = next(c for c in DuckDBStore.__mro__ if name in c.__dict__)
            calls.append((owner, name, f"DuckDBStore.{name}"))
        for owner, name, label in calls:
            self._wrap(owner, name, label)
        gc.callbacks.append(self._gc)
        self._undo.append(lambda: gc.callbacks.remove(self._gc))

    def watch_locks(self, store: Any) -> None:
        """Note waits for the store's writer, log and apply locks (after it opened)."""
        writer = _TimedLock(store._write_lock, "wait: writer lock", self.spans)
        store._write_lock = store._group._lock = writer
        store._logged_lock = _TimedLock(store._logged_lock, "wait: log lock", self.spans)
        store._apply_lock = _TimedLock(store._apply_lock, "wait: apply lock", self.spans)

    def remove(self) -> None:
        while self._undo:
            self._undo.pop()()


def _background(label: str, thread: str) -> str | None:
    """What background work a span on another thread is, or None."""
    if label == "DuckDB apply":
        return "DuckDB apply"
    if "compact" in thread:
        return "LOG compaction"
    if label == "DuckDBStore.add_many" and "Recorder" in thread:
        return "recorder write"
    if label == "AckLog._write_dsync" and "views" in thread:
        return "NOW.md writer's sync"
    if label.startswith("gc"):
        return "garbage collection"
    return None


def classify(turns: list[tuple[float, float]], spans: list[Span]) -> dict[str, Any]:
    """Turns over 10 and over 20 ms: their main cause, the background work they overlapped."""
    main = threading.main_thread().name
    out: dict[str, Any] = {}
    for floor in (10, 20):
        causes: Counter[str] = Counter()
        beside: Counter[str] = Counter()
        for a, b in turns:
            ms = (b - a) * 1000
            if ms <= floor:
                continue
            own: dict[str, float] = {}
            bg: set[str] = set()
            for label, thread, t0, t1 in spans:
                overlap = min(b, t1) - max(a, t0)
                if overlap <= 0:
                    continue
                if thread == main:
                    cause = CAUSES.get(label, "garbage collection" if label[:2] == "gc" else "")
                    if cause:
                        own[cause] = own.get(cause, 0.0) + overlap * 1000
                else:
                    kind = _background(label, thread)
                    if kind is not None:
                        bg.add(kind)
            top = max(own.items(), key=lambda kv: kv[1], default=("", 0.0))
            causes[top[0] if top[1] >= 0.3 * ms else "none over 30% (CPU, GIL)"] += 1
            beside.update(bg or {"nothing"})
        out[f"over {floor} ms"] = {"turns": sum(causes.values()), "main cause": dict(causes)}
        out[f"over {floor} ms"]["overlapping"] = dict(beside)
    syncs: Counter[str] = Counter()
    for label, thread, *_ in spans:
        if label == "AckLog._write_dsync":
            syncs["turn thread" if thread == main else thread.split(":")[0]] += 1
    out["log syncs by thread"] = dict(syncs)
    return out

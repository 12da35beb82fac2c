"""Event streams: actors publish, subscribers receive on their own threads.

Each actor publishes its events from its own thread (one producer per
source).  :class:`EventBus` hands every event to each subscription's queue
and returns at once; a delivery thread per subscription calls the
subscriber.  So a slow subscriber delays only itself, and a subscriber that
raises is logged (``stream.subscriber_error``) and keeps receiving: neither
ever blocks or breaks an actor.

Subscribers see a reactivex :class:`~reactivex.Observable`, so the whole
operator library applies (``filter``, ``buffer_with_time_or_count``, ...).
Events of one source reach each subscriber in the order they were published.
Queues are unbounded (RxPY has no back-pressure either): a subscriber that
stays slower than the event rate grows its queue, and a warning is logged
each time its backlog crosses a power of ten from 10,000 up.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any, Final

import reactivex
import structlog
from reactivex import abc as rx_abc
from reactivex.disposable import Disposable

from actormem._settings import check_arg
from actormem.events import Event
from actormem.logs import _configure_default

__all__ = ["EventBus"]

log = structlog.get_logger(__name__)
_configure_default()  # quiet logging unless the application configured structlog

_STOP: Final = object()
_WARN_FROM: Final = 10_000


class _Subscription:
    __slots__ = ("accept", "name", "observer", "queue", "thread", "warn_at")

    def __init__(
        self,
        observer: rx_abc.ObserverBase[Event],
        accept: Callable[[Event], bool] | None,
        name: str,
    ) -> None:
        self.observer = observer
        self.accept = accept
        self.name = name
        self.queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.warn_at = _WARN_FROM
        self.thread = threading.Thread(
            target=self._run, name=f"actormem-events-{name}", daemon=True
        )

    def _run(self) -> None:
        q = self.queue
        on_next = self.observer.on_next
        while True:
            item = q.get()
            if item is _STOP:
                break
            try:
                on_next(item)
            except Exception as exc:  # a subscriber's bug must not stop delivery
                log.error(
                    "stream.subscriber_error",
                    subscriber=self.name,
                    event_type=type(item).__name__,
                    error=repr(exc),
                    exc_info=True,
                )
        try:
            self.observer.on_completed()
        except Exception as exc:
            log.error(
                "stream.subscriber_error",
                subscriber=self.name,
                event_type="completed",
                error=repr(exc),
            )


def _accepts(sub: _Subscription, event: Event) -> bool:
    """Run a subscription's filter on the publishing (actor) thread; never raise there."""
    try:
        return bool(sub.accept(event))  # type: ignore[misc]
    except Exception as exc:
        log.error("stream.filter_error", subscriber=sub.name, error=repr(exc))
        return False


class EventBus:
    """Fan-out of events from actor threads to any number of subscribers."""

    def __init__(self) -> None:
        self._subs: tuple[_Subscription, ...] = ()
        self._lock = threading.Lock()
        self._closed = False
        self._count = 0

    @property
    def subscriber_count(self) -> int:
        """How many subscriptions are live."""
        return len(self._subs)

    def publish(self, event: Event) -> None:
        """Queue ``event`` for every subscriber; never blocks, never raises."""
        for sub in self._subs:
            if sub.accept is None or _accepts(sub, event):
                sub.queue.put(event)
        self._count += 1
        if self._count & 0x3FF == 0:
            self._check_backlog()

    def _check_backlog(self) -> None:
        for sub in self._subs:
            pending = sub.queue.qsize()
            if pending >= sub.warn_at:
                log.warning("stream.subscriber_backlog", subscriber=sub.name, pending=pending)
                sub.warn_at *= 10

    def observable(
        self, accept: Callable[[Event], bool] | None = None, name: str = "subscriber"
    ) -> reactivex.Observable[Event]:
        """A hot Observable of the events that pass ``accept`` (all if None).

        Each subscription gets its own delivery thread; disposing of the
        subscription stops it.
        """

        def subscribe(
            observer: rx_abc.ObserverBase[Event], scheduler: rx_abc.SchedulerBase | None = None
        ) -> rx_abc.DisposableBase:
            sub = _Subscription(observer, accept, name)
            with self._lock:
                if self._closed:
                    observer.on_completed()
                    return Disposable()
                self._subs = (*self._subs, sub)
            sub.thread.start()

            def dispose() -> None:
                with self._lock:
                    if sub not in self._subs:
                        return
                    self._subs = tuple(s for s in self._subs if s is not sub)
                sub.queue.put(_STOP)

            return Disposable(dispose)

        return reactivex.create(subscribe)

    def close(self, timeout: float = 5.0) -> None:
        """Complete every subscription after it has received what was published."""
        check_arg("EventBus.close", "timeout", timeout)
        with self._lock:
            self._closed = True
            subs, self._subs = self._subs, ()
        for sub in subs:
            sub.queue.put(_STOP)
        for sub in subs:
            if sub.thread is not threading.current_thread():
                sub.thread.join(timeout)

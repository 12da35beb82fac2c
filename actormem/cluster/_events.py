"""Event streams of a remote agent: a sequence-numbered buffer in the actor,
long-polled by each subscriber in its own process.

Ray has no push to a driver, so the actor keeps its runtime's events in
order, numbered, and each subscriber asks for "everything after n", waiting
up to a second for something new (a long poll, in a concurrency group of
its own so it never holds up the agent's calls).  An event is kept until
every connected subscriber has asked past it: **nothing is dropped while a
subscriber is connected**, and the order is the order the runtime published
them.  A subscriber that has not polled for ``DISCONNECT_AFTER`` seconds is
disconnected (a slow one polls again within a third of that while it works
through what it got: only one whose process stopped asking, or one
``on_next`` that takes that long, is); one that falls ``LIMIT`` events
behind loses the oldest and is told (:class:`EventsLostError`) instead of
silently skipping them.

**How a stream ends**, as a local runtime's stream ends at ``close()``:

* ``stop()`` (by any handle) ends the buffer after the runtime closed, and
  waits (up to ``DRAIN`` seconds) for each connected subscriber to take
  every event left: its stream then **completes** (``on_completed``), with
  nothing dropped.  The poll that reaches past the last event answers the
  end, and the subscriber then confirms it has it (``events_unregister``):
  only that confirmation lets the stop end the actor, so the actor's exit
  never races the end's answer on its way back (an answer lost to the exit
  reads as a lost actor, which the subscriber must report as lost events).
  A subscriber that registers once the buffer ended completes at once.  One
  that does not poll (or confirm) in time is treated as below.
* The agent's actor is lost while subscribed (its node died, or it ended
  before the subscriber took its last events): the stream ends with
  :class:`EventsLostError` (what it published after the last poll may never
  have arrived); subscribing again follows the restarted agent.
* A subscription never creates nor keeps an agent: subscribing to an agent
  whose actor is not running (stopped, or released idle) **completes at
  once** -- as subscribing to a closed local runtime -- and creates nothing
  (a call of any handle brings a released agent back; subscribe after it).
  A choice: following a released agent into its next incarnation would lose
  that incarnation's first events (nothing is kept before a subscriber
  registers) or make every incarnation keep them for subscribers that may
  come, and Ray gives no event when a named actor appears (the subscriber
  would poll the GCS while the agent stays released).
* An idle release never happens while a subscriber is connected (the
  agent stays resident while someone listens), so a connected stream never
  sees one; a subscriber that stopped polling for ``DISCONNECT_AFTER`` is
  no longer connected, and its next poll gets :class:`EventsLostError`.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

import structlog

from actormem.cluster._spec import ClusterError
from actormem.events import Event

if TYPE_CHECKING:
    from reactivex import abc as rx_abc

__all__ = ["DISCONNECT_AFTER", "DRAIN", "LIMIT", "EventBuffer", "EventPump", "EventsLostError"]

log = structlog.get_logger(__name__)

#: Events a lagging subscriber may be behind before it loses the oldest.
LIMIT: Final = 100_000
#: A subscriber that has not polled for this long is disconnected.
DISCONNECT_AFTER: Final = 30.0
#: How long one poll waits for a new event.
POLL_WAIT: Final = 1.0
#: The Ray concurrency group the polls run in (the agent's calls keep theirs).
GROUP: Final = "events"
#: How long ``stop()`` waits for the connected subscribers to take their last events.
DRAIN: Final = 5.0


class EventsLostError(ClusterError):
    """A subscriber fell too far behind (or was disconnected): events were lost."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (str(self),))


class _Cursor:
    __slots__ = ("acked", "seen")

    def __init__(self, acked: int) -> None:
        self.acked = acked
        self.seen = time.monotonic()


class EventBuffer:
    """The actor's side: numbered events kept for the connected subscribers."""

    def __init__(self, limit: int = LIMIT, disconnect_after: float = DISCONNECT_AFTER) -> None:
        self._cond = threading.Condition()
        self._events: deque[tuple[int, Event]] = deque()
        self._last = 0  # number of the last event appended
        self._subs: dict[str, _Cursor] = {}
        self._limit = limit
        self._disconnect_after = disconnect_after
        #: no event follows (the agent stopped): a poll that is past the last one ends
        self._ended = False

    def append(self, event: Event) -> None:
        """Number and keep one event (the runtime's bus calls it, in publish order)."""
        with self._cond:
            self._last += 1
            self._events.append((self._last, event))
            self._trim()
            self._cond.notify_all()

    def register(self) -> tuple[str, int]:
        """A new subscriber: its id, and the number after which its events start.

        After :meth:`end` the id is ``""``: no event follows, its stream is
        complete (nothing is kept for it, and a stop does not wait for it).
        """
        with self._cond:
            if self._ended:
                return "", self._last
            sub = uuid.uuid4().hex
            self._subs[sub] = _Cursor(self._last)
            return sub, self._last

    def connected(self) -> int:
        """How many subscribers are connected."""
        with self._cond:
            self._trim()
            return len(self._subs)

    def end(self) -> None:
        """No event follows (the agent stopped): each subscriber's stream completes
        once it has taken the events left."""
        with self._cond:
            self._ended = True
            self._cond.notify_all()

    def drained(self, timeout: float) -> bool:
        """Wait until every connected subscriber took its end and confirmed it
        (:meth:`unregister`), or was disconnected.

        Returns:
            Whether none is left waiting for events.
        """
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                self._trim()
                left = deadline - time.monotonic()
                if not self._subs or left <= 0:
                    return not self._subs
                self._cond.wait(min(left, 0.5))  # notified as each one ends; a stale one times out

    def unregister(self, sub: str) -> None:
        """The subscriber is gone (disposed, or it confirms it has its end):
        its events need not be kept for it."""
        with self._cond:
            self._subs.pop(sub, None)
            self._trim()
            self._cond.notify_all()  # a stop waiting in drained() for it

    def poll(
        self, sub: str, after: int, wait: float, most: int = 1000
    ) -> list[tuple[int, Event | None]]:
        """The events after number ``after`` (waiting up to ``wait`` s for one).

        After :meth:`end`, the poll that reaches past the last event gets
        ``(n, None)``: the stream is complete.  The subscriber stays
        registered until it confirms with :meth:`unregister`, so that
        :meth:`drained` does not let the actor end before the subscriber
        has the answer.

        Raises:
            EventsLostError: the subscriber is unknown (disconnected, or this
                is another incarnation) or events after ``after`` were dropped.
        """
        deadline = time.monotonic() + wait
        with self._cond:
            cur = self._subs.get(sub)
            if cur is None:
                raise EventsLostError(
                    f"subscription {sub[:8]} is not connected to this agent (it was idle for "
                    f"over {self._disconnect_after}s, or the agent restarted)"
                )
            cur.acked = max(cur.acked, after)
            cur.seen = time.monotonic()
            self._trim()
            first = self._events[0][0] if self._events else self._last + 1
            if after + 1 < first:
                self._subs.pop(sub, None)
                raise EventsLostError(
                    f"subscription {sub[:8]} fell {self._last - after} events behind (more "
                    f"than {self._limit}): events {after + 1}-{first - 1} were dropped"
                )
            while self._last <= after and not self._ended:
                left = deadline - time.monotonic()
                if left <= 0:
                    return []
                self._cond.wait(left)
                if self._subs.get(sub) is not cur:  # unregistered or disconnected meanwhile
                    raise EventsLostError(f"subscription {sub[:8]} ended while it waited")
                cur.seen = time.monotonic()
            if self._last <= after:  # ended, and it has everything: complete
                # kept until it confirms it has this answer (unregister), so drained()
                # does not let the actor exit before the answer reached it
                return [(self._last + 1, None)]
            start = after + 1 - self._events[0][0]
            return [self._events[i] for i in range(start, min(start + most, len(self._events)))]

    def _trim(self) -> None:
        now = time.monotonic()
        gone = [s for s, c in self._subs.items() if now - c.seen > self._disconnect_after]
        for s in gone:
            del self._subs[s]
            log.warning("cluster.subscriber_disconnected", subscription=s[:8])
        floor = min((c.acked for c in self._subs.values()), default=self._last)
        events = self._events
        while events and (events[0][0] <= floor or len(events) > self._limit):
            events.popleft()


class EventPump:
    """The subscriber's side: a thread that long-polls the actor and delivers in order."""

    def __init__(
        self,
        handle: Any,
        accept: Callable[[Event], bool] | None,
        observer: rx_abc.ObserverBase[Event],
    ) -> None:
        self._handle = handle
        self._accept = accept
        self._observer = observer
        self._stop = threading.Event()
        # Registered before subscribe() returns: nothing published after it is missed.
        registered = self._register()
        if registered is None or not registered[0]:  # not running, or stopping: nothing follows
            self._sub, self._after = "", 0
            self._stop.set()
            observer.on_completed()
            return
        self._sub, self._after = registered
        self._thread = threading.Thread(
            target=self._run, daemon=True, name="actormem-remote-events"
        )
        self._thread.start()

    def _register(self) -> tuple[str, int] | None:
        """Register with the agent's running actor; None when none runs (never creates one)."""
        h = self._handle
        result: tuple[str, int] | None = h._register_events()
        return result

    def dispose(self) -> None:
        """Stop delivering and let the actor drop what it kept for this subscriber."""
        if self._stop.is_set() and not self._sub:  # completed at once, or unregistered
            return
        self._stop.set()
        self._unregister()

    def _unregister(self) -> None:
        sub, self._sub = self._sub, ""
        try:  # not waited for: a stopping actor ends once it has run
            self._handle._actor.events_unregister.remote(sub)
        except Exception as exc:  # best effort: the actor disconnects it by itself
            log.debug("cluster.events_unregister_failed", error=repr(exc))

    def _run(self) -> None:
        import ray

        lost = (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError)
        h = self._handle
        while not self._stop.is_set():
            try:
                ref = h._actor.events_poll.options(concurrency_group=GROUP).remote(
                    self._sub, self._after, POLL_WAIT
                )
                items = h._get(ref)
            except lost as exc:
                if self._stop.is_set():  # disposed: the subscriber asked for nothing more
                    return
                # (a stop completes the stream through the buffer's end, before the actor
                # ends; a handle closed or stopped meanwhile does not make a loss an end)
                # What it published after the last poll ended with it: say so, never skip.
                log.warning("cluster.events_agent_lost", session_id=h.session_id)
                self._observer.on_error(
                    EventsLostError(
                        f"the agent {h.session_id!r} restarted or ended "
                        f"({type(exc).__name__}) while subscribed: its events after number "
                        f"{self._after} may be lost; subscribe again to follow the agent from "
                        "its restored state"
                    )
                )
                return
            except EventsLostError as exc:
                if not self._stop.is_set():  # disposed: the subscriber asked for nothing more
                    self._observer.on_error(exc)
                return
            polled = time.monotonic()
            for seq, event in items:
                if time.monotonic() - polled > DISCONNECT_AFTER / 3:
                    break  # a slow subscriber: poll again (it stays connected); the rest follows
                self._after = seq
                if self._stop.is_set():
                    return
                if event is None:  # the agent stopped, and every event of it arrived
                    self._stop.set()
                    self._unregister()  # confirms the end arrived: the stop may end the actor
                    self._observer.on_completed()
                    return
                if self._accept is None or self._accept(event):
                    try:
                        self._observer.on_next(event)
                    except Exception as exc:  # like the local bus: log, keep delivering
                        log.exception("cluster.subscriber_error", error=repr(exc))

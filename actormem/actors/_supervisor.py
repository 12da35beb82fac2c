"""Supervision for pykka actors: restart with the last state, lose no queued message.

pykka has no supervision: an exception while handling a ``tell`` stops the
actor and its queued tells are dropped.  :class:`Supervisor` holds the
current :class:`pykka.ActorRef` of one actor.  When the actor fails, its
``on_failure`` hook (running on the dying actor's thread) asks the
supervisor to restart it: a new actor starts with the old one's last state,
the failed command is delivered once more (a transient fault heals; a
command that fails twice is dropped and named in the event), every envelope
still queued in the old inbox moves to the new one in order, and the
reference is swapped.  Senders hold the supervisor's lock only while
enqueueing, so no message slips into the dead inbox during the swap.

Every call is a ``tell``: a request that needs an answer carries a
:class:`concurrent.futures.Future` (:class:`Request`), which gives the
synchronous API ``result()`` and the asyncio API ``asyncio.wrap_future``
without blocking the event loop (pykka's own ``await`` does block it).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from types import TracebackType
from typing import Any, Final

import pykka
import structlog

from actormem._pace import mark_background, rest
from actormem.events import ActorRestarted, Event

__all__ = ["ActorUnavailableError", "Request", "SupervisedActor", "Supervisor"]

log = structlog.get_logger(__name__)

_DEFAULT_TIMEOUT: Final = 30.0


class ActorUnavailableError(RuntimeError):
    """The actor is stopped, or failed more often than its restart budget allows."""


class Request:
    """A command that expects an answer through ``reply``."""

    __slots__ = ("cmd", "reply")

    def __init__(self, cmd: Any) -> None:
        self.cmd = cmd
        self.reply: concurrent.futures.Future[Any] = concurrent.futures.Future()


class SupervisedActor(pykka.ThreadingActor):
    """Base of actormem's actors.

    Subclasses implement :meth:`handle` (one command in, a result out),
    :meth:`restart_state` (the state a replacement starts from) and accept
    ``state`` in ``__init__``.  A :class:`Request` that raises sets the
    exception on its future and the actor lives; a plain command that raises
    triggers a supervised restart.
    """

    #: Daemon threads: a program that never closes its runtime can still exit
    #: (the runtime closes itself at exit, see ``actormem.runtime``).
    use_daemon_thread = True

    def __init__(self, supervisor: Supervisor | None = None) -> None:
        super().__init__()
        self._supervisor = supervisor
        self._current: Any = None
        self._replaced = False

    def handle(self, cmd: Any) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def restart_state(self) -> Any:  # pragma: no cover - abstract
        """The state a replacement actor starts from after a failure."""
        raise NotImplementedError

    def on_start(self) -> None:
        # The actor's own thread: long loops in it pause now and then (see _pace).
        mark_background()

    def on_receive(self, message: Any) -> Any:
        try:
            return self._receive(message)
        finally:
            rest()  # the message's paced work is done: another thread's turn

    def _receive(self, message: Any) -> Any:
        if isinstance(message, Request):
            try:
                message.reply.set_result(self.handle(message.cmd))
            except Exception as exc:
                message.reply.set_exception(exc)
            return None
        self._current = message
        try:
            self.handle(message)
        except Exception as exc:
            # Restart now, while this actor still counts as alive: senders never
            # see a dead reference in the window before pykka's own on_failure.
            if self._supervisor is not None:
                self._supervisor.restart(self, exc, message)
                self._replaced = True
                self._hand_over()
            raise
        self._current = None
        return None

    def on_failure(
        self,
        exception_type: type[BaseException] | None,
        exception_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._supervisor is not None and not self._replaced:
            self._supervisor.restart(self, exception_value, self._current)
            self._hand_over()

    def _hand_over(self) -> None:
        try:
            self.on_replaced()
        except Exception:
            log.exception("actor.hand_over_failed", actor=type(self).__name__)

    def on_replaced(self) -> None:
        """Called on this (failed) actor's thread once its replacement runs.

        Release what this instance holds (timers, subscriptions) and pass on
        anything buffered that is not in the inbox; ``on_stop`` does not run
        for a failed actor.
        """


class Supervisor:
    """Owns one supervised actor: sends to it, restarts it when it fails.

    Args:
        name: the actor's name (events' ``actor`` field).
        factory: ``factory(supervisor, state)`` starts a new actor and returns
            its ref; ``state`` is None the first time.
        publish: where ActorRestarted events go.
        max_restarts: restarts allowed within ``window`` seconds before the
            actor is given up (calls then raise ActorUnavailableError).
    """

    def __init__(
        self,
        name: str,
        factory: Callable[[Supervisor, Any], pykka.ActorRef[Any]],
        publish: Callable[[Event], None],
        *,
        max_restarts: int = 5,
        window: float = 60.0,
    ) -> None:
        self.name = name
        self._factory = factory
        self._publish = publish
        self._max_restarts = max_restarts
        self._window = window
        self._lock = threading.Lock()
        self._restarts: deque[float] = deque()
        self._redelivered: Any = None
        self.restart_count = 0
        self._ref: pykka.ActorRef[Any] | None = factory(self, None)
        self._given_up = ""

    # -- sending ----------------------------------------------------------------

    def tell(self, cmd: Any) -> None:
        """Enqueue ``cmd`` (fire and forget, in order with every other send)."""
        with self._lock:
            ref = self._ref
            if ref is None:
                raise ActorUnavailableError(self._why_unavailable())
            try:
                ref.tell(cmd)
            except pykka.ActorDeadError:
                raise ActorUnavailableError(self._why_unavailable()) from None

    def request(self, cmd: Any) -> concurrent.futures.Future[Any]:
        """Enqueue ``cmd`` and return the future of its answer."""
        req = Request(cmd)
        self.tell(req)
        return req.reply

    def ask(self, cmd: Any, timeout: float | None = _DEFAULT_TIMEOUT) -> Any:
        """Send ``cmd`` and wait for the answer (re-raising the handler's exception).

        Raises:
            TimeoutError: no answer within ``timeout`` seconds (the message says
                which actor and command).
        """
        future = self.request(cmd)
        rest()  # a background caller waits: its turn of paced work goes to others
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            if future.done():  # the handler itself raised a TimeoutError
                raise
            raise TimeoutError(
                f"actor {self.name!r} did not answer {type(cmd).__name__} within {timeout}s"
            ) from None

    def _why_unavailable(self) -> str:
        return self._given_up or f"actor {self.name!r} is stopped"

    @property
    def alive(self) -> bool:
        """Whether the actor is running."""
        ref = self._ref
        return ref is not None and ref.is_alive()

    # -- lifecycle ----------------------------------------------------------------

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the actor after it has handled everything queued before this call."""
        with self._lock:
            ref, self._ref = self._ref, None
        if ref is not None:
            with contextlib.suppress(pykka.ActorDeadError):
                ref.stop(block=True, timeout=timeout)

    def restart(self, old: SupervisedActor, error: BaseException | None, failed_cmd: Any) -> None:
        """Replace ``old`` (called on its thread when a command fails)."""
        with self._lock:
            if self._ref is None:
                # Stopped meanwhile: answer the requests still queued (nobody would),
                # leave the rest (pykka's stop message) to the actor's teardown.
                for env in _drain(old.actor_inbox):
                    if isinstance(env.message, Request):
                        env.message.reply.set_exception(
                            ActorUnavailableError(self._why_unavailable())
                        )
                    else:
                        old.actor_inbox.put(env)
                return
            if self._ref.actor_urn != old.actor_urn:
                return  # already replaced
            now = time.monotonic()
            self._restarts.append(now)
            while self._restarts and now - self._restarts[0] > self._window:
                self._restarts.popleft()
            pending = _drain(old.actor_inbox)
            if len(self._restarts) > self._max_restarts:
                self._given_up = (
                    f"actor {self.name!r} failed {len(self._restarts)} times in "
                    f"{self._window:.0f}s and was not restarted (last error: {error!r})"
                )
                self._ref = None
                for env in pending:
                    msg = env.message
                    if isinstance(msg, Request):
                        msg.reply.set_exception(ActorUnavailableError(self._given_up))
                log.error(
                    "actor.given_up", actor=self.name, error=repr(error), dropped=len(pending)
                )
                return
            dropped = ""
            redeliver = failed_cmd is not None and failed_cmd is not self._redelivered
            if failed_cmd is not None and not redeliver:
                dropped = type(failed_cmd).__name__
            self._redelivered = failed_cmd if redeliver else None
            new_ref = self._factory(self, old.restart_state())
            if redeliver:
                new_ref.tell(failed_cmd)
            for env in pending:
                new_ref.actor_inbox.put(env)
            self._ref = new_ref
            self.restart_count += 1
            count = self.restart_count
        log.error(
            "actor.restarted",
            actor=self.name,
            error=repr(error),
            restarts=count,
            redelivered=redeliver,
            dropped_command=dropped,
        )
        self._publish(
            ActorRestarted(
                source=self.name,
                actor=self.name,
                error=repr(error),
                restarts=count,
                dropped_command=dropped,
            )
        )


def _drain(inbox: Any) -> list[Any]:
    out = []
    while True:
        try:
            out.append(inbox.get_nowait())
        except queue.Empty:
            return out

"""TurnGate: background model work gives way to the conversation.

The recorder's extraction and reconciliation calls go to the same model
server as the agent's replies.  A local server (llama.cpp's) serves one
request at a time, so a memory call still running when the user's next turn
starts would make that turn wait behind it.  The gate prevents that:

* the runtime marks a turn active from the user's message until the turn is
  recorded (:meth:`TurnGate.begin` / :meth:`TurnGate.end`);
* background model work starts only between turns (:meth:`wait_idle`), and a
  call in flight when a turn starts is abandoned: it is streamed, so the
  client closes it at the next token and the server stops generating (llama.cpp's
  server also interrupts a stream when another request waits).  The caller
  gets :class:`TurnStartedError` and retries after the turn, or falls back to
  the offline path (the recorder's ``ModelFallback``).

See :func:`call_between_turns`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import structlog

from actormem.messages import Msg
from actormem.models.base import ChatModel, ModelError, ModelTimeoutError

__all__ = ["TurnGate", "TurnStartedError", "call_between_turns"]

log = structlog.get_logger(__name__)


class TurnStartedError(ModelError):
    """A background model call gave way to a conversation turn (or waited too long for one)."""


class TurnGate:
    """Whether a conversation turn is in progress, and a counter of the turns started."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._active = False
        self._started = 0

    @property
    def active(self) -> bool:
        """True while a turn is in progress."""
        return self._active

    @property
    def started(self) -> int:
        """How many turns have started (a call compares it before and after)."""
        return self._started

    def begin(self) -> None:
        """A turn starts: calls in flight are abandoned, new ones wait."""
        with self._cond:
            if not self._active:
                self._active = True
                self._started += 1
                self._cond.notify_all()

    def end(self) -> None:
        """The turn is over: background calls may run."""
        with self._cond:
            if self._active:
                self._active = False
                self._cond.notify_all()

    def wait_idle(self, timeout: float | None) -> bool:
        """Wait until no turn is in progress; False when ``timeout`` passed first."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._active, timeout)

    def wait_until(self, done: Callable[[], bool], since: int, timeout: float | None) -> bool:
        """Wait until ``done()`` or a turn started after ``since``; returns ``done()``."""
        with self._cond:
            self._cond.wait_for(lambda: done() or self._started != since, timeout)
            return done()

    def notify(self) -> None:
        """Wake :meth:`wait_until` callers (a call finished)."""
        with self._cond:
            self._cond.notify_all()


def call_between_turns(
    model: ChatModel, messages: Sequence[Msg], timeout: float, gate: TurnGate
) -> Msg:
    """One background model call that waits for a pause and gives way to the next turn.

    Args:
        model: the chat model; its ``stream`` method is used when it has one,
            so that an abandoned call stops at the next token.
        messages: the prompt.
        timeout: seconds to wait for a pause between turns, and again for
            the reply.
        gate: the conversation's turn gate.

    Returns:
        The reply (text only when streamed).

    Raises:
        TurnStartedError: a turn started while the call ran, or no pause came
            within ``timeout``.
        ModelTimeoutError: no reply within ``timeout``.
        ModelError: the call failed.
    """
    if not gate.wait_idle(timeout):
        raise TurnStartedError(f"no pause between conversation turns within {timeout:g} s")
    since = gate.started
    box: dict[str, Any] = {}
    done = threading.Event()
    cancel = threading.Event()
    stream = getattr(model, "stream", None)

    def run() -> None:
        try:
            if callable(stream):
                pieces: list[str] = []
                gen = stream(list(messages), timeout=timeout)
                try:
                    for piece in gen:
                        if cancel.is_set():
                            break  # closing the stream tells the server to stop
                        pieces.append(piece)
                finally:
                    gen.close()
                box["reply"] = Msg.assistant("".join(pieces))
            else:
                box["reply"] = model.chat(list(messages), timeout=timeout)
        except BaseException as exc:  # handed to the caller's thread
            box["error"] = exc
        finally:
            done.set()
            gate.notify()

    threading.Thread(target=run, name="actormem-model-between-turns", daemon=True).start()
    if not gate.wait_until(done.is_set, since, timeout):
        cancel.set()
        name = getattr(model, "name", type(model).__name__)
        if gate.started != since:
            log.info("model_call_gave_way", model=name, reason="a conversation turn started")
            raise TurnStartedError(
                f"model {name}: the call was abandoned because a conversation turn started"
            )
        raise ModelTimeoutError(f"model {name} did not answer within {timeout:g} s")
    if "error" in box:
        raise box["error"]
    reply = box.get("reply")
    if not isinstance(reply, Msg):
        raise ModelError(f"the model returned {type(reply).__name__}, expected a Msg")
    return reply

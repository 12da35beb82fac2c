"""ScriptedModel: a ChatModel whose replies are written in advance.

For tests and the offline demo.  Replies come from a list of steps, used one
per call, or from a function of the conversation::

    model = ScriptedModel([
        Msg.tool_call("search", {"query": "cats"}),   # first call: a tool call
        "Cats sleep a lot.",                          # second call: the answer
    ])
    model = ScriptedModel(lambda messages, tools: "You said: " + messages[-1].text)

A step is a reply (:class:`~actormem.messages.Msg` or ``str``), a function
``(messages, tools) -> Msg | str`` (may be async for :meth:`ScriptedModel.achat`),
an exception (instance or class) to raise, or a :class:`Hang`.  Every call is
recorded in :attr:`ScriptedModel.calls` for assertions.

Failures can also be injected without touching the script: ``fail_at={2:
ModelError("boom")}`` makes call #2 (0-based) raise, and the script step stays
for the next call (like a retry that then succeeds); ``delay`` slows every
call.  Delays and hangs honour the ``timeout`` of the call: when the caller's
limit is shorter, the call sleeps for the limit and raises :class:`ModelError`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, TypeAlias, cast

import structlog

from actormem._settings import check_arg
from actormem.messages import Msg
from actormem.models.base import ModelError, ToolSpec

__all__ = [
    "Hang",
    "ModelCall",
    "ScriptExhaustedError",
    "ScriptFn",
    "ScriptStep",
    "ScriptedModel",
]

log = structlog.get_logger(__name__)

#: A function that writes a reply from the conversation and the offered tools.
ScriptFn: TypeAlias = Callable[
    [Sequence[Msg], Sequence[ToolSpec] | None], Msg | str | Awaitable[Msg | str]
]


@dataclasses.dataclass(frozen=True)
class Hang:
    """A script step that makes the call hang.

    The call sleeps ``seconds`` (cut short by the call's ``timeout``, which
    then raises :class:`ModelError`).  If it was not cut short, it returns
    ``reply``, or raises :class:`ModelError` when there is none.

    Attributes:
        seconds: how long the model "thinks".
        reply: what it says afterwards, if anything.
    """

    seconds: float = 60.0
    reply: Msg | str | None = None


#: One entry of a script.
ScriptStep: TypeAlias = Msg | str | ScriptFn | BaseException | type[BaseException] | Hang


@dataclasses.dataclass(frozen=True)
class ModelCall:
    """One recorded call of a :class:`ScriptedModel`.

    Attributes:
        index: the call number, from 0.
        messages: the messages the model was given.
        tools: the tool definitions it was offered (``None`` when none were given).
        timeout: the caller's time limit.
    """

    index: int
    messages: tuple[Msg, ...]
    tools: tuple[ToolSpec, ...] | None
    timeout: float | None

    @property
    def last_message(self) -> Msg | None:
        """The last message of the conversation, if any."""
        return self.messages[-1] if self.messages else None

    @property
    def tool_names(self) -> tuple[str, ...]:
        """The names of the offered tools."""
        return tuple(str(t.get("function", {}).get("name", "")) for t in self.tools or ())


class ScriptExhaustedError(ModelError):
    """A :class:`ScriptedModel` was called more times than its script has steps."""


class ScriptedModel:
    """A :class:`~actormem.models.base.ChatModel` that replies from a script.

    Args:
        script: a list of steps (one per call), or one function called for
            every call.
        name: the model name.
        delay: seconds every call takes (honouring the call's ``timeout``).
        fail_at: failures to inject by call index (0-based): an exception
            (instance or class) or a :class:`Hang`.  The script step is not
            consumed by an injected failure.
        cycle: start the script again when it runs out (instead of raising
            :class:`ScriptExhaustedError`).
    """

    def __init__(
        self,
        script: Iterable[ScriptStep] | ScriptFn = (),
        *,
        name: str = "scripted",
        delay: float = 0.0,
        fail_at: Mapping[int, BaseException | type[BaseException] | Hang] | None = None,
        cycle: bool = False,
    ) -> None:
        self.name = name
        self.delay = float(delay)
        self.cycle = cycle
        self._fail_at = dict(fail_at or {})
        self._lock = threading.Lock()
        self._calls: list[ModelCall] = []
        self._fn: ScriptFn | None = None
        self._steps: list[ScriptStep] = []
        self._pos = 0
        if callable(script) and not isinstance(script, list | tuple):
            self._fn = script
        else:
            self._steps = list(script)

    # -- helpers to build common scripts ---------------------------------------

    @classmethod
    def tool_then_answer(
        cls,
        tool_name: str,
        tool_input: dict[str, Any] | None = None,
        answer: str | Msg = "Done.",
        *,
        call_id: str | None = None,
        text: str = "",
        **kwargs: Any,
    ) -> ScriptedModel:
        """A model that calls one tool, then answers.

        Args:
            tool_name: the tool to call first.
            tool_input: its arguments.
            answer: the reply of the second call.
            call_id: the tool call id (generated when omitted).
            text: text that accompanies the tool call.
            **kwargs: passed to the constructor (``name``, ``delay``, ...).

        Returns:
            The model.
        """
        call = Msg.tool_call(tool_name, tool_input or {}, call_id=call_id, text=text)
        return cls([call, answer], **kwargs)

    @classmethod
    def echo(cls, prefix: str = "", **kwargs: Any) -> ScriptedModel:
        """A model that answers every call with the text of the last user message.

        Args:
            prefix: text put before the echoed text.
            **kwargs: passed to the constructor.

        Returns:
            The model.
        """

        def reply(messages: Sequence[Msg], tools: Sequence[ToolSpec] | None) -> str:
            last = next((m for m in reversed(messages) if m.role == "user"), None)
            return prefix + (last.text if last else "")

        return cls(reply, **kwargs)

    @classmethod
    def failing(cls, error: BaseException | None = None, **kwargs: Any) -> ScriptedModel:
        """A model whose every call raises (to test fallbacks and degradation).

        Args:
            error: what to raise; a :class:`ModelError` by default.
            **kwargs: passed to the constructor.

        Returns:
            The model.
        """
        exc = error if error is not None else ModelError("scripted model failure")

        def fail(messages: Sequence[Msg], tools: Sequence[ToolSpec] | None) -> str:
            raise exc

        return cls(fail, **kwargs)

    @classmethod
    def hanging(cls, seconds: float = 60.0, **kwargs: Any) -> ScriptedModel:
        """A model whose every call hangs (until its ``timeout``, or ``seconds``).

        Args:
            seconds: how long each call hangs when no timeout is given.
            **kwargs: passed to the constructor.

        Returns:
            The model.
        """
        return cls([Hang(seconds)], cycle=True, **kwargs)

    # -- inspection --------------------------------------------------------------

    @property
    def calls(self) -> list[ModelCall]:
        """Every call so far, in order (a copy)."""
        with self._lock:
            return list(self._calls)

    @property
    def call_count(self) -> int:
        """How many calls were made."""
        with self._lock:
            return len(self._calls)

    @property
    def last_call(self) -> ModelCall:
        """The most recent call.

        Raises:
            IndexError: the model was never called.
        """
        with self._lock:
            if not self._calls:
                raise IndexError(f"ScriptedModel {self.name!r} was never called")
            return self._calls[-1]

    @property
    def remaining(self) -> int | None:
        """Script steps not used yet (``None`` for a function script or ``cycle``)."""
        with self._lock:
            if self._fn is not None or self.cycle:
                return None
            return len(self._steps) - self._pos

    def extend(self, *steps: ScriptStep) -> None:
        """Append steps to a list script.

        Args:
            *steps: the steps.

        Raises:
            TypeError: the script is a function.
        """
        with self._lock:
            if self._fn is not None:
                raise TypeError("cannot extend a ScriptedModel driven by a function")
            self._steps.extend(steps)

    # -- the ChatModel protocol -----------------------------------------------------

    def chat(
        self,
        messages: Sequence[Msg],
        *,
        tools: Sequence[ToolSpec] | None = None,
        timeout: float | None = None,
    ) -> Msg:
        """Reply with the next step of the script.

        Args:
            messages: the conversation.
            tools: the tool definitions offered to the model.
            timeout: the caller's limit in seconds.

        Returns:
            The scripted assistant message.

        Raises:
            ModelError: a delay or hang went past ``timeout``, a hang ended
                without a reply, or the step said so.
            ScriptExhaustedError: the script has no more steps.
            BaseException: an exception given as a step or in ``fail_at``.
        """
        deadline = _deadline(timeout)
        call, step = self._begin(messages, tools, timeout)
        if self.delay:
            self._sleep(self.delay, deadline, call)
        if isinstance(step, Hang):
            self._sleep(step.seconds, deadline, call)
            return self._hang_over(step, call)
        return self._reply(self._run(step, call, awaitable_ok=False), call)

    async def achat(
        self,
        messages: Sequence[Msg],
        *,
        tools: Sequence[ToolSpec] | None = None,
        timeout: float | None = None,
    ) -> Msg:
        """Async :meth:`chat`: sleeps without blocking the loop; async functions are awaited.

        Args:
            messages: the conversation.
            tools: the tool definitions offered to the model.
            timeout: the caller's limit in seconds.

        Returns:
            The scripted assistant message.

        Raises:
            ModelError: see :meth:`chat`.
            ScriptExhaustedError: the script has no more steps.
            BaseException: an exception given as a step or in ``fail_at``.
        """
        deadline = _deadline(timeout)
        call, step = self._begin(messages, tools, timeout)
        if self.delay:
            await self._asleep(self.delay, deadline, call)
        if isinstance(step, Hang):
            await self._asleep(step.seconds, deadline, call)
            return self._hang_over(step, call)
        result = self._run(step, call, awaitable_ok=True)
        if inspect.isawaitable(result):
            result = await result
        return self._reply(result, call)

    # -- internals --------------------------------------------------------------------

    def _begin(
        self, messages: Sequence[Msg], tools: Sequence[ToolSpec] | None, timeout: float | None
    ) -> tuple[ModelCall, ScriptStep]:
        with self._lock:
            call = ModelCall(
                index=len(self._calls),
                messages=tuple(messages),
                tools=tuple(tools) if tools is not None else None,
                timeout=timeout,
            )
            self._calls.append(call)
            if call.index in self._fail_at:
                return call, self._fail_at[call.index]
            if self._fn is not None:
                return call, self._fn
            if self._pos >= len(self._steps):
                if not (self.cycle and self._steps):
                    last = call.last_message
                    raise ScriptExhaustedError(
                        f"ScriptedModel {self.name!r} ran out of script: call #{call.index} "
                        f"but the script has {len(self._steps)} step(s); last message: "
                        f"{_preview(last)}"
                    )
                self._pos = 0
            step = self._steps[self._pos]
            self._pos += 1
            return call, step

    def _run(self, step: ScriptStep, call: ModelCall, *, awaitable_ok: bool) -> Any:
        if isinstance(step, BaseException):
            raise step
        if isinstance(step, type) and issubclass(step, BaseException):
            raise step(f"scripted failure at call #{call.index} of {self.name!r}")
        if isinstance(step, Msg | str):
            return step
        if isinstance(step, Hang):  # handled by the caller; a Hang is not a reply
            raise TypeError(f"ScriptedModel {self.name!r}: misplaced Hang step")
        if callable(step):
            result = cast("ScriptFn", step)(call.messages, call.tools)
            if inspect.isawaitable(result) and not awaitable_ok:
                if inspect.iscoroutine(result):
                    result.close()
                raise TypeError(
                    f"ScriptedModel {self.name!r}: the script function is async; call achat()"
                )
            return result
        raise TypeError(f"ScriptedModel {self.name!r}: unsupported script step {step!r}")

    def _reply(self, result: Any, call: ModelCall) -> Msg:
        if isinstance(result, str):
            result = Msg.assistant(result)
        if not isinstance(result, Msg):
            raise TypeError(
                f"ScriptedModel {self.name!r}: call #{call.index} produced "
                f"{type(result).__name__}, expected Msg or str"
            )
        log.debug("scripted_reply", model=self.name, call=call.index, tools=len(result.tool_uses))
        return result

    def _hang_over(self, step: Hang, call: ModelCall) -> Msg:
        if step.reply is None:
            raise ModelError(
                f"ScriptedModel {self.name!r}: call #{call.index} hung for {step.seconds}s "
                "without replying"
            )
        return self._reply(step.reply, call)

    def _wait_time(self, seconds: float, deadline: float | None) -> tuple[float, bool]:
        if deadline is None:
            return seconds, False
        left = max(0.0, deadline - time.monotonic())
        return (left, True) if seconds > left else (seconds, False)

    def _timed_out(self, call: ModelCall) -> ModelError:
        return ModelError(
            f"ScriptedModel {self.name!r}: call #{call.index} timed out after {call.timeout}s"
        )

    def _sleep(self, seconds: float, deadline: float | None, call: ModelCall) -> None:
        wait, cut = self._wait_time(seconds, deadline)
        time.sleep(wait)
        if cut:
            raise self._timed_out(call)

    async def _asleep(self, seconds: float, deadline: float | None, call: ModelCall) -> None:
        wait, cut = self._wait_time(seconds, deadline)
        await asyncio.sleep(wait)
        if cut:
            raise self._timed_out(call)

    def __repr__(self) -> str:
        kind = "function" if self._fn is not None else f"{len(self._steps)} steps"
        return f"ScriptedModel(name={self.name!r}, script={kind}, calls={self.call_count})"


def _deadline(timeout: float | None) -> float | None:
    # the same range as a real model's call (a NaN or negative limit is a bug)
    check_arg("ScriptedModel.chat", "timeout", timeout)
    if timeout is None:
        return None
    return time.monotonic() + timeout


def _preview(msg: Msg | None, limit: int = 80) -> str:
    if msg is None:
        return "(none)"
    text = msg.text.replace("\n", " ")
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return f"{msg.role}: {text!r}"

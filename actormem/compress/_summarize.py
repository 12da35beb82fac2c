"""Summarizers: an offline extractive one and a model-backed one with fallback.

Both turn a span of messages into a third-person record that keeps names,
numbers, dates, decisions, errors and open tasks.  Neither adds the header
("Summary of earlier conversation ...") that the strategies put in front.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import structlog

from actormem.messages import Msg, OffloadRefBlock, TextBlock, ToolResultBlock, ToolUseBlock

if TYPE_CHECKING:
    from actormem.compress._config import AutoContextConfig
    from actormem.models.base import ChatModel

__all__ = [
    "ModelSummarizer",
    "Summarizer",
    "Summary",
    "render_transcript",
]

log = structlog.get_logger("actormem.compress")


@dataclasses.dataclass(frozen=True)
class Summary:
    """The result of one summarization.

    Attributes:
        text: the summary body (third person, no header).
        summarizer: the name of the summarizer that produced ``text``.
        error: why the preferred summarizer was not used (empty when it was);
            non-empty means a fallback happened and the caller should say so
            (``ModelFallback`` event).
    """

    text: str
    summarizer: str
    error: str = ""

    @property
    def fallback(self) -> bool:
        """True when ``text`` came from a fallback summarizer."""
        return bool(self.error)


@runtime_checkable
class Summarizer(Protocol):
    """Turns a span of messages into a short third-person summary."""

    name: str

    def summarize(self, msgs: Sequence[Msg], *, target_tokens: int, instruction: str) -> Summary:
        """Summarize ``msgs`` in about ``target_tokens`` tokens.

        Args:
            msgs: the messages, oldest first.
            target_tokens: the length to aim for.
            instruction: the strategy's prompt (a model summarizer sends it;
                an offline one may ignore it).

        Returns:
            The summary.
        """
        ...


# -- shared rendering ----------------------------------------------------------------


def _tool_names(msgs: Sequence[Msg]) -> dict[str, str]:
    return {b.id: b.name for m in msgs for b in m.content if isinstance(b, ToolUseBlock)}


def _speaker(msg: Msg) -> str:
    if msg.metadata.get("actormem") == "summary":
        return "earlier summary"
    return f"{msg.name} ({msg.role})" if msg.name else msg.role


def _call_text(block: ToolUseBlock, limit: int = 160) -> str:
    args = (
        json.dumps(block.input, ensure_ascii=False, separators=(", ", ": ")) if block.input else ""
    )
    if len(args) > limit:
        args = args[: limit - 1] + "…"
    return f"called {block.name}({args})"


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = limit * 3 // 4
    return text[:head] + " … " + text[-(limit - head) :]


def _summary_body(msg: Msg) -> str:
    """The text of a message, without the header line of an earlier summary."""
    text = msg.text
    if msg.metadata.get("actormem") == "summary" and "\n" in text:
        return text.split("\n", 1)[1]
    return text


def _units(msgs: Sequence[Msg], limit: int) -> list[tuple[int, str, str]]:
    """(message index, speaker, text) for every piece of content worth reading."""
    names = _tool_names(msgs)
    out: list[tuple[int, str, str]] = []
    for i, m in enumerate(msgs):
        speaker = _speaker(m)
        if m.metadata.get("actormem") == "summary":
            out.append((i, speaker, _clip(_summary_body(m), limit)))
            continue
        for b in m.content:
            if isinstance(b, TextBlock) and b.text.strip():
                out.append((i, speaker, _clip(b.text, limit)))
            elif isinstance(b, ToolUseBlock):
                out.append((i, speaker, _call_text(b)))
            elif isinstance(b, ToolResultBlock):
                tool = b.name or names.get(b.tool_use_id, "") or "tool"
                verb = "failed" if b.is_error else "returned"
                out.append((i, f"{tool} result", f"{tool} {verb}: " + _clip(b.output, limit)))
            elif isinstance(b, OffloadRefBlock):
                out.append((i, speaker, f"[offloaded {b.offload_id}] " + b.preview))
    return out


def render_transcript(msgs: Sequence[Msg], *, max_chars: int = 400_000) -> str:
    """Render messages as a plain transcript for a summarization prompt.

    Each message's text is clipped (head and tail kept) so that the whole
    transcript stays within about ``max_chars`` characters.

    Args:
        msgs: the messages.
        max_chars: the size limit of the transcript.

    Returns:
        One ``[speaker] text`` line per piece of content.
    """
    per_msg = max(400, max_chars // max(1, len(msgs)))
    return "\n".join(f"[{who}] {text}" for _, who, text in _units(msgs, per_msg))


# -- model ----------------------------------------------------------------------------


class ModelSummarizer:
    """Summaries written by a chat model, with a timeout and an offline fallback.

    The model gets the strategy's instruction (third person, keep names,
    numbers, dates, decisions, errors, open tasks) as a system message and
    the rendered transcript as a user message.  The call runs in a daemon
    worker thread and is abandoned after ``timeout`` seconds even when the
    model ignores its own ``timeout`` argument; any error, timeout or empty
    answer falls back to ``fallback`` and the returned :class:`Summary`
    names the summarizer used and the error.

    Args:
        model: the chat model.
        config: supplies ``model_timeout``, the token counter and the window
            size that bounds the transcript (default: ``AutoContextConfig()``).
        fallback: the summarizer used when the model fails (default: an
            :class:`ExtractiveSummarizer` with the config's counter).
        timeout: overrides ``config.model_timeout``.
    """

    def __init__(
        self,
        model: ChatModel,
        config: AutoContextConfig | None = None,
        *,
        fallback: Summarizer | None = None,
        timeout: float | None = None,
    ) -> None:
        if config is None:
            from actormem.compress._config import AutoContextConfig

            config = AutoContextConfig()
        self._model = model
        self._timeout = config.model_timeout if timeout is None else timeout
        if not self._timeout > 0:
            raise ValueError(f"ModelSummarizer timeout must be > 0 seconds, got {self._timeout}")
        if fallback is None:
            # Imported here: the extractive summarizer builds on this module's rendering.
            from actormem.compress._extractive import ExtractiveSummarizer

            fallback = ExtractiveSummarizer(config.token_counter)
        self._fallback = fallback
        self._counter = config.token_counter
        # Keep the transcript within about half the model's window.
        self._max_chars = config.max_token * 2
        self.name = f"model:{getattr(model, 'name', type(model).__name__)}"

    def summarize(self, msgs: Sequence[Msg], *, target_tokens: int, instruction: str) -> Summary:
        """Ask the model for a summary; fall back to the offline summarizer on failure.

        Args:
            msgs: the messages, oldest first.
            target_tokens: the length to aim for (sent as a word limit).
            instruction: the strategy's prompt.

        Returns:
            The model's summary, or the fallback's with ``error`` set.
        """
        words = max(20, int(target_tokens * 0.7))
        prompt = [
            Msg.system(f"{instruction}\nUse at most about {words} words."),
            Msg.user(
                "Summarize this part of the conversation:\n\n"
                + render_transcript(msgs, max_chars=self._max_chars)
            ),
        ]
        try:
            text = self._call(prompt).strip()
            if not text:
                raise ValueError("the model returned an empty summary")
            # A summary no shorter than what it summarizes would make the context
            # larger (small models ramble): the offline summary is used instead.
            got, had = self._counter.count(text), self._counter.count_msgs(msgs)
            if got >= had:
                raise ValueError(
                    f"the model's summary ({got} tokens) is not shorter than the "
                    f"{len(msgs)} message(s) it summarizes ({had} tokens)"
                )
            return Summary(text, self.name)
        except Exception as exc:  # any model failure degrades to the offline summary
            error = f"{type(exc).__name__}: {exc}"
            log.warning(
                "summarizer_fallback",
                summarizer=self.name,
                fallback=self._fallback.name,
                error=error,
            )
            fb = self._fallback.summarize(
                msgs, target_tokens=target_tokens, instruction=instruction
            )
            return Summary(fb.text, fb.summarizer, error)

    def _call(self, prompt: list[Msg]) -> str:
        box: dict[str, object] = {}
        done = threading.Event()

        def run() -> None:
            try:
                box["reply"] = self._model.chat(prompt, timeout=self._timeout)
            except BaseException as exc:  # reported to the caller's thread
                box["error"] = exc
            finally:
                done.set()

        worker = threading.Thread(target=run, name="actormem-summarize", daemon=True)
        worker.start()
        if not done.wait(self._timeout):
            raise TimeoutError(f"model {self.name} did not answer within {self._timeout:g} s")
        if "error" in box:
            err = box["error"]
            assert isinstance(err, BaseException)
            raise err
        reply = box.get("reply")
        if not isinstance(reply, Msg):
            raise TypeError(f"model returned {type(reply).__name__}, expected a Msg")
        return reply.text

"""Summarizers: an offline extractive one and a model-backed one with fallback.

Both turn a span of messages into a third-person record that keeps names,
numbers, dates, decisions, errors and open tasks.  Neither adds the header
("Summary of earlier conversation ...") that the strategies put in front.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import threading
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final, Protocol, runtime_checkable

import structlog

from actormem.compress._tokens import EstimateTokenCounter, TokenCounter
from actormem.messages import Msg, OffloadRefBlock, TextBlock, ToolResultBlock, ToolUseBlock

if TYPE_CHECKING:
    from actormem.compress._config import AutoContextConfig
    from actormem.models.base import ChatModel

__all__ = [
    "ExtractiveSummarizer",
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


# -- extractive ---------------------------------------------------------------------

_SPLIT: Final = re.compile(r"(?<=[.!?])\s+|\s*\n\s*")
_WORDS: Final = re.compile(r"[a-z0-9]+")
_CAP_WORD: Final = re.compile(r"(?<=[\s(\"'])[A-Z][a-zA-Z]+")
_DIGIT: Final = re.compile(r"\d")
_LONG_NUM: Final = re.compile(r"\d{2,}")
_NUM_DATE: Final = re.compile(
    r"\b\d{4}-\d{2}-\d{2}\b|\b\d{1,2}/\d{1,2}(?:/\d{2,4})?\b|\b(?:19|20)\d{2}\b"
)
# Keyword sets are matched against a sentence's lower-cased words (one set
# intersection each, much cheaper than one regex scan per category).
_DATE_WORDS: Final = frozenset(
    [
        "jan",
        "january",
        "feb",
        "february",
        "mar",
        "march",
        "apr",
        "april",
        "may",
        "jun",
        "june",
        "jul",
        "july",
        "aug",
        "august",
        "sep",
        "sept",
        "september",
        "oct",
        "october",
        "nov",
        "november",
        "dec",
        "december",
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
        "yesterday",
        "tomorrow",
        "today",
        "tonight",
        "weekend",
        "ago",
    ]
)
_DECISION_WORDS: Final = frozenset(
    [
        "decide",
        "decided",
        "decides",
        "decision",
        "agreed",
        "agree",
        "agrees",
        "chose",
        "choose",
        "chosen",
        "plan",
        "plans",
        "planned",
        "will",
        "going",
        "confirm",
        "confirmed",
        "approve",
        "approved",
        "settled",
        "selected",
        "switch",
        "switched",
    ]
)
_ERROR_WORDS: Final = frozenset(
    [
        "error",
        "errors",
        "failed",
        "fail",
        "fails",
        "failure",
        "exception",
        "traceback",
        "crash",
        "crashed",
        "bug",
        "broken",
        "timeout",
        "denied",
        "invalid",
        "refused",
    ]
)
_TASK_WORDS: Final = frozenset(
    [
        "todo",
        "must",
        "should",
        "remember",
        "pending",
        "deadline",
        "due",
        "remind",
        "reminder",
        "need",
        "needs",
    ]
)
_PUNCT: Final = re.compile(r"[^\w\s]")
_STOP: Final = frozenset(
    [
        "the",
        "a",
        "an",
        "and",
        "or",
        "but",
        "if",
        "then",
        "so",
        "of",
        "to",
        "in",
        "on",
        "at",
        "by",
        "for",
        "with",
        "from",
        "as",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "i",
        "you",
        "he",
        "she",
        "we",
        "they",
        "me",
        "him",
        "her",
        "us",
        "them",
        "my",
        "your",
        "his",
        "our",
        "their",
        "what",
        "which",
        "who",
        "whom",
        "how",
        "when",
        "where",
        "why",
        "not",
        "no",
        "yes",
        "do",
        "does",
        "did",
        "done",
        "have",
        "has",
        "had",
        "can",
        "could",
        "would",
        "should",
        "will",
        "just",
        "also",
        "very",
        "really",
        "too",
        "there",
        "here",
        "about",
        "into",
        "out",
        "up",
        "down",
        "over",
        "more",
        "most",
        "some",
        "any",
        "all",
        "than",
        "like",
        "get",
        "got",
        "im",
        "dont",
        "thats",
        "its",
        "yeah",
        "okay",
        "ok",
        "oh",
    ]
)
_COMMON_CAPS: Final = frozenset(
    [
        "I",
        "The",
        "This",
        "That",
        "These",
        "Those",
        "It",
        "Its",
        "He",
        "She",
        "We",
        "They",
        "You",
        "My",
        "Your",
        "Our",
        "Their",
        "His",
        "Her",
        "A",
        "An",
        "And",
        "But",
        "Or",
        "If",
        "So",
        "Then",
        "When",
        "What",
        "Why",
        "How",
        "Where",
        "Who",
        "Yes",
        "No",
        "Oh",
        "Hey",
        "Hi",
        "Hello",
        "Thanks",
        "Thank",
        "Sure",
        "Okay",
        "Well",
        "Wow",
        "Great",
        "Also",
        "Just",
        "Not",
    ]
)

_MAX_SENTENCE: Final = 320


class ExtractiveSummarizer:
    """Offline summarizer: the most informative sentences, in their original order.

    Each message is split into sentences (long tool outputs are clipped to
    their head and tail first); each sentence gets a score from its
    centrality (how many of the span's recurring words it shares, a cheap
    bag-of-words stand-in for similarity to the centroid) plus bonuses for
    names (capitalised words inside the sentence), numbers, dates, decisions,
    errors and open tasks, and a penalty for code-like or very short
    sentences.  The best sentences are taken greedily until the token target
    is reached, exact repeats are dropped, and the survivors are printed in
    order as ``- speaker: sentence …`` lines.  Deterministic, no model, no
    network; about 1 ms per 10 kB of text.

    Args:
        counter: the token counter used for the target (default: the estimate).
        max_chars_per_message: text of one message beyond this many
            characters is clipped (head and tail kept) before scoring.
    """

    name = "extractive"

    def __init__(
        self, counter: TokenCounter | None = None, *, max_chars_per_message: int = 4000
    ) -> None:
        self._counter = counter or EstimateTokenCounter()
        self._max_chars = max_chars_per_message

    def summarize(
        self, msgs: Sequence[Msg], *, target_tokens: int, instruction: str = ""
    ) -> Summary:
        """Pick the most informative sentences of ``msgs`` within ``target_tokens``.

        Args:
            msgs: the messages, oldest first.
            target_tokens: the token budget of the summary (at least one
                sentence is always kept, clipped to the budget if needed).
            instruction: ignored (kept for the :class:`Summarizer` protocol).

        Returns:
            The summary (empty text when ``msgs`` hold no text).
        """
        sentences: list[tuple[int, str, str]] = []  # (message index, speaker, sentence)
        seen: set[str] = set()
        for idx, speaker, text in _units(msgs, self._max_chars):
            for s in _SPLIT.split(text):
                s = s.strip()
                if len(s) < 2:
                    continue
                if len(s) > _MAX_SENTENCE:
                    s = s[: _MAX_SENTENCE - 1] + "…"
                key = " ".join(s.lower().split())
                if key in seen:  # exact repeats (log spam, greetings) are read once
                    continue
                seen.add(key)
                sentences.append((idx, speaker, s))
        if not sentences:
            return Summary("", self.name)
        scores = self._score([s for _, _, s in sentences])
        order = sorted(range(len(sentences)), key=lambda k: (-scores[k], k))
        count = self._counter.count
        budget = max(8, target_tokens)
        chosen: list[int] = []
        used = 0
        for k in order:
            cost = count(sentences[k][2]) + 2
            if used + cost > budget:
                if chosen:
                    continue
                # Nothing fits yet: keep the best sentence, clipped to the budget.
                idx, who, s = sentences[k]
                sentences[k] = (idx, who, s[: max(16, budget * 3)].rstrip() + "…")
                cost = budget
            chosen.append(k)
            used += cost
            if used >= budget:
                break
        chosen.sort()
        lines: list[str] = []
        last: tuple[int, str] | None = None
        for k in chosen:
            idx, who, s = sentences[k]
            if last == (idx, who):
                lines[-1] += " " + s
            else:
                lines.append(f"- {who}: {s}")
                last = (idx, who)
        return Summary("\n".join(lines), self.name)

    @staticmethod
    def _score(sentences: Sequence[str]) -> list[float]:
        words = [frozenset(_WORDS.findall(s.lower())) for s in sentences]
        bags = [w - _STOP for w in words]
        df: Counter[str] = Counter()
        for bag in bags:
            df.update(bag)
        weight = {w: math.log1p(n) for w, n in df.items() if n > 1}
        cent = [sum(weight.get(w, 0.0) for w in bag) / (math.sqrt(len(bag)) + 1.0) for bag in bags]
        top = max(cent) or 1.0
        out: list[float] = []
        for s, ws, c in zip(sentences, words, cent, strict=True):
            score = 0.6 * c / top
            names = sum(1 for w in _CAP_WORD.findall(s) if w not in _COMMON_CAPS)
            score += 0.35 * min(names, 3)
            has_digit = _DIGIT.search(s) is not None
            if has_digit:
                score += 0.3 + (0.2 if _LONG_NUM.search(s) else 0.0)
            if not ws.isdisjoint(_DATE_WORDS) or (has_digit and _NUM_DATE.search(s)):
                score += 0.5
            if not ws.isdisjoint(_DECISION_WORDS):
                score += 0.35
            if not ws.isdisjoint(_ERROR_WORDS):
                score += 0.5
            if not ws.isdisjoint(_TASK_WORDS):
                score += 0.35
            if len(ws) < 4:
                score *= 0.4
            if len(_PUNCT.findall(s)) > 0.2 * len(s):
                score *= 0.4
            out.append(score)
        return out


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
        self._fallback = fallback or ExtractiveSummarizer(config.token_counter)
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

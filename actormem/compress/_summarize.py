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
_OFFLOADED_RESULT: Final = re.compile(r"^\[output offloaded as ([\w:.-]+)")
_TEMPLATE_DIGITS: Final = re.compile(r"\d+")
_FIRST_PERSON: Final = frozenset(["i", "im", "ive", "ill", "id", "my", "we", "our", "me"])
_MAX_REFS: Final = 24


class _Sentence:
    __slots__ = ("idx", "kind", "text", "who", "words")

    def __init__(self, idx: int, who: str, text: str, kind: str) -> None:
        self.idx = idx
        self.who = who
        self.text = text
        self.kind = kind  # "said", "tool" (a tool's output or a call) or "summary"
        self.words = frozenset(_WORDS.findall(text.lower())) - _STOP


def _sentences(msgs: Sequence[Msg], max_chars: int) -> tuple[list[_Sentence], list[str]]:
    """The sentences worth scoring, and the offload ids of outputs already offloaded."""
    names = _tool_names(msgs)
    out: list[_Sentence] = []
    refs: list[str] = []
    seen: set[str] = set()

    def add(idx: int, who: str, text: str, kind: str) -> None:
        for s in _SPLIT.split(text):
            s = s.strip()
            if len(s) < 2:
                continue
            if len(s) > _MAX_SENTENCE:
                s = s[: _MAX_SENTENCE - 1] + "…"
            # Exact repeats, and repeats of one template with other numbers (log lines,
            # "processed batch 17 in 0.3s"), are read once.
            key = _TEMPLATE_DIGITS.sub("#", " ".join(s.lower().split()))
            if key in seen:
                continue
            seen.add(key)
            out.append(_Sentence(idx, who, s, kind))

    for i, m in enumerate(msgs):
        speaker = _speaker(m)
        if m.metadata.get("actormem") == "summary":
            add(i, speaker, _clip(_summary_body(m), max_chars), "summary")
            continue
        for b in m.content:
            if isinstance(b, TextBlock) and b.text.strip():
                add(i, speaker, _clip(b.text, max_chars), "said")
            elif isinstance(b, ToolUseBlock):
                add(i, speaker, _call_text(b), "tool")
            elif isinstance(b, ToolResultBlock):
                ref = _OFFLOADED_RESULT.match(b.output)
                if ref is not None:  # already offloaded: keep the reference, not the log
                    refs.append(ref.group(1).rstrip(",."))
                    continue
                tool = b.name or names.get(b.tool_use_id, "") or "tool"
                verb = "failed" if b.is_error else "returned"
                add(i, f"{tool} result", f"{tool} {verb}: " + _clip(b.output, max_chars), "tool")
            elif isinstance(b, OffloadRefBlock):
                refs.append(b.offload_id)
    return out, list(dict.fromkeys(refs))


class ExtractiveSummarizer:
    """Offline summarizer: the sentences that carry the most information, in order.

    Each message is split into sentences.  A sentence scores for what it
    carries, not for its position or length: words that are rare in this
    span (IDF over the span's sentences), numbers, dates, names (capitalised
    words inside the sentence), first-person statements ("I", "my", "we"),
    decisions, errors and open tasks.  Words every other sentence repeats
    (chit-chat, log boilerplate) count for little.  What a person said
    outweighs tool output; tool output that was already offloaded behind a
    reference is not read at all -- its reference is kept instead, on one
    ``- offloaded: ...`` line.  Exact repeats and repeats of one template with
    other numbers (log lines) are read once, and a sentence whose words
    mostly repeat an already chosen one is skipped.  The best sentences are
    taken until the token target is filled, then printed in their original
    order as ``- speaker: sentence …`` lines (who said what is kept).
    Deterministic, no model, no network.

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
        sentences, refs = _sentences(msgs, self._max_chars)
        count = self._counter.count
        budget = max(8, target_tokens)
        ref_line = ""
        if refs:
            shown = refs[:_MAX_REFS]
            more = f" and {len(refs) - len(shown)} more" if len(refs) > len(shown) else ""
            ref_line = f"- offloaded tool output (reload by id): {', '.join(shown)}{more}"
            if count(ref_line) + 2 > budget // 4:
                ref_line = f"- offloaded tool output: {len(refs)} results (reload by id)"
        if not sentences:
            return Summary(ref_line, self.name)
        used = count(ref_line) + 2 if ref_line else 0
        scores = _score(sentences)
        order = sorted(range(len(sentences)), key=lambda k: (-scores[k], k))
        chosen: list[int] = []
        echoes = _Echoes(sentences)
        for k in order:
            sent = sentences[k]
            if echoes.repeats(sent.words):
                continue
            cost = count(sent.text) + 2
            if used + cost > budget:
                if chosen:
                    continue
                # Nothing fits yet: keep the best sentence, clipped to the budget.
                sent.text = sent.text[: max(16, (budget - used) * 3)].rstrip() + "…"
                cost = budget - used
            chosen.append(k)
            echoes.add(sent.words)
            used += cost
            if used >= budget:
                break
        chosen.sort()
        lines: list[str] = []
        last: tuple[int, str] | None = None
        for k in chosen:
            sent = sentences[k]
            if last == (sent.idx, sent.who):
                lines[-1] += " " + sent.text
            else:
                lines.append(f"- {sent.who}: {sent.text}")
                last = (sent.idx, sent.who)
        if ref_line:
            lines.append(ref_line)
        return Summary("\n".join(lines), self.name)


class _Echoes:
    """The chosen sentences, to skip one that repeats 3/4 of another's words (an echo).

    An echo shares its rarest word with what it echoes (a name, a number), so a
    candidate is compared only with the chosen sentences holding its rarest word:
    linear in practice where comparing with every chosen sentence was quadratic.
    """

    def __init__(self, sentences: Sequence[_Sentence]) -> None:
        self._df: Counter[str] = Counter()
        for s in sentences:
            self._df.update(s.words)
        self._by_word: dict[str, list[frozenset[str]]] = {}

    def repeats(self, words: frozenset[str]) -> bool:
        if len(words) < 3:
            return False
        rarest = min(words, key=lambda w: (self._df[w], w))
        need = 0.75 * len(words)
        return any(len(words & other) >= need for other in self._by_word.get(rarest, ()))

    def add(self, words: frozenset[str]) -> None:
        for w in words:
            self._by_word.setdefault(w, []).append(words)


def _score(sentences: Sequence[_Sentence]) -> list[float]:
    n = len(sentences)
    df: Counter[str] = Counter()
    for s in sentences:
        df.update(s.words)
    # Rarity: inverse document frequency over this span's sentences.  A word in
    # one sentence of a thousand carries more than one in every other line.
    idf = {w: math.log((n + 1) / c) for w, c in df.items()}
    top = math.log(n + 1) or 1.0
    out: list[float] = []
    for s in sentences:
        text = s.text
        lows = frozenset(_WORDS.findall(text.lower()))
        rare = sorted((idf[w] for w in s.words), reverse=True)[:6]
        score = 2.0 * sum(rare) / (6 * top)
        names = sum(1 for w in _CAP_WORD.findall(" " + text) if w not in _COMMON_CAPS)
        score += 0.3 * min(names, 3)
        has_digit = _DIGIT.search(text) is not None
        if has_digit:
            score += 0.35 + (0.15 if _LONG_NUM.search(text) else 0.0)
        if not lows.isdisjoint(_DATE_WORDS) or (has_digit and _NUM_DATE.search(text)):
            score += 0.35
        if not lows.isdisjoint(_FIRST_PERSON):
            score += 0.1
        if not lows.isdisjoint(_DECISION_WORDS):
            score += 0.2
        if not lows.isdisjoint(_ERROR_WORDS):
            score += 0.4
        if not lows.isdisjoint(_TASK_WORDS):
            score += 0.2
        if len(s.words) < 3:
            score *= 0.4
        if len(_PUNCT.findall(text)) > 0.2 * len(text):
            score *= 0.4
        if s.kind == "tool":
            score *= 0.45
        elif s.kind == "summary":
            score *= 1.1  # an earlier summary already holds the span's best
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

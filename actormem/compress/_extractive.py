"""The offline extractive summarizer: sentences that carry information, not volume.

Split from :mod:`actormem.compress._summarize` (the protocol, the transcript
rendering and the model-backed summarizer) because the scoring, the
deduplication and the budget filling are one responsibility of their own.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Final

from actormem.compress._lexicon import (
    _CAP_WORD,
    _COMMON_CAPS,
    _DATE_WORDS,
    _DECISION_WORDS,
    _DIGIT,
    _ERROR_WORDS,
    _FIRST_PERSON,
    _LONG_NUM,
    _NUM_DATE,
    _OFFLOADED_RESULT,
    _PUNCT,
    _SPLIT,
    _STOP,
    _TASK_WORDS,
    _TEMPLATE_DIGITS,
    _WORDS,
)
from actormem.compress._summarize import (
    Summary,
    _call_text,
    _clip,
    _speaker,
    _summary_body,
    _tool_names,
)
from actormem.compress._tokens import EstimateTokenCounter, TokenCounter
from actormem.messages import Msg, OffloadRefBlock, TextBlock, ToolResultBlock, ToolUseBlock

__all__ = ["ExtractiveSummarizer"]

_MAX_SENTENCE: Final = 320
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

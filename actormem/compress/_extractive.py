"""The offline extractive summarizer: sentences that carry information, not volume.

Split from :mod:`actormem.compress._summarize` (the protocol, the transcript
rendering and the model-backed summarizer) because the scoring, the
deduplication and the budget filling are one responsibility of their own.
"""

from __future__ import annotations

import bisect
import datetime
import heapq
import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Final

from actormem._pace import pace
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
    _summary_body,
    _tool_names,
)
from actormem.compress._tokens import EstimateTokenCounter, TokenCounter
from actormem.messages import Msg, OffloadRefBlock, TextBlock, ToolResultBlock, ToolUseBlock

__all__ = ["ExtractiveSummarizer"]

_MAX_SENTENCE: Final = 320
#: A rare word's weight once a chosen sentence holds it: the next sentence on
#: the same topic must bring something else (coverage, not repetition).
_COVERED: Final = 0.3
_STOPS: Final = frozenset(".!?…:;\"')")
#: A capitalised word in more than this share of the span's sentences is not
#: counted as a name (the two speakers of a chat, who name each other in
#: every other greeting).
_COMMON_NAME: Final = 0.02
#: What a reply to a question says carries what was asked about ("Where did you
#: go?" -> "We drove up to Galway."): the replying message's sentences score this
#: much more (LoCoMo dev, one pass: 50-66% -> 58-69% of answers kept for the
#: three longest conversations, the others unchanged).
_ANSWER: Final = 0.6
_MAX_REFS: Final = 24
_SUMMARY_LINE: Final = re.compile(r"^- ([^:\n]{1,80}?): (.+)$")
_REF_LINE: Final = re.compile(
    r"^- offloaded tool output \(reload by id\): (.+?)(?: and \d+ more)?$"
)
#: A summary's date header: the day (UTC) its following lines were said.
_DAY_LINE: Final = re.compile(r"^\[(\d{1,2} [A-Z][a-z]+ \d{4})\]$")
_MONTHS: Final = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)


class _Sentence:
    __slots__ = ("day", "idx", "kind", "text", "who", "words")

    def __init__(self, idx: int, who: str, text: str, kind: str, day: str = "") -> None:
        self.idx = idx
        self.who = who
        self.text = text
        self.kind = kind  # "said", "tool" (a tool's output or a call) or "summary"
        self.day = day  # "8 May 2023" (UTC) when known, else ""
        self.words = frozenset(_WORDS.findall(text.lower())) - _STOP


def _day(msg: Msg) -> str:
    """The UTC day a message was created, as "8 May 2023" ("" when out of range)."""
    try:
        d = datetime.datetime.fromtimestamp(msg.created_at, datetime.UTC)
    except (OverflowError, OSError, ValueError):
        return ""
    return f"{d.day} {_MONTHS[d.month - 1]} {d.year}"


def _who(msg: Msg) -> str:
    """The speaker label of a summary line: the name when there is one, else the role."""
    if msg.metadata.get("actormem") == "summary":
        return "earlier summary"
    return msg.name or msg.role


def _sentences(msgs: Sequence[Msg], max_chars: int) -> tuple[list[_Sentence], list[str]]:
    """The sentences worth scoring, and the offload ids of outputs already offloaded."""
    names = _tool_names(msgs)
    out: list[_Sentence] = []
    refs: list[str] = []
    seen: set[str] = set()

    def add(idx: int, who: str, text: str, kind: str, day: str) -> None:
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
            out.append(_Sentence(idx, who, s, kind, day))

    for i, m in enumerate(msgs):
        pace()
        speaker = _who(m)
        if m.metadata.get("actormem") == "summary":
            _read_summary(i, speaker, _summary_body(m), add, refs)
            continue
        day = _day(m)
        for b in m.content:
            if isinstance(b, TextBlock) and b.text.strip():
                add(i, speaker, _clip(b.text, max_chars), "said", day)
            elif isinstance(b, ToolUseBlock):
                add(i, speaker, _call_text(b), "tool", day)
            elif isinstance(b, ToolResultBlock):
                ref = _OFFLOADED_RESULT.match(b.output)
                if ref is not None:  # already offloaded: keep the reference, not the log
                    refs.append(ref.group(1).rstrip(",."))
                    continue
                tool = b.name or names.get(b.tool_use_id, "") or "tool"
                verb = "failed" if b.is_error else "returned"
                text = f"{tool} {verb}: " + _clip(b.output, max_chars)
                add(i, f"{tool} result", text, "tool", day)
            elif isinstance(b, OffloadRefBlock):
                refs.append(b.offload_id)
    return out, list(dict.fromkeys(refs))


def _read_summary(
    idx: int,
    speaker: str,
    body: str,
    add: Callable[[int, str, str, str, str], None],
    refs: list[str],
) -> None:
    """Read an earlier summary back as the lines it was made of.

    An extractive summary's ``- who: sentence`` lines keep their speaker (and a
    tool's line stays tool output) instead of being nested under "earlier
    summary", and the day of its last ``[8 May 2023]`` header; its line of
    offload ids joins this summary's references.  Any other text (a model's
    summary) is read as the earlier summary's own.
    """
    day = ""
    for line in body.split("\n"):
        header = _DAY_LINE.match(line)
        if header is not None:
            day = header.group(1)
            continue
        ids = _REF_LINE.match(line)
        if ids is not None:
            refs.extend(r.strip() for r in ids.group(1).split(",") if r.strip())
            continue
        said = _SUMMARY_LINE.match(line)
        if said is None:
            add(idx, speaker, line, "summary", day)
            continue
        who, text = said.group(1), said.group(2)
        tool = who.endswith(" result") or text.startswith("called ")
        add(idx, who, text, "tool" if tool else "summary", day)


class ExtractiveSummarizer:
    """Offline summarizer: the sentences that carry the most information, in order.

    Each message is split into sentences.  A sentence scores for what it
    carries, not for its position or length: words that are rare in this
    span (IDF over the span's sentences), numbers, dates, names (capitalised
    words inside the sentence that are not in every other line), first-person
    statements ("I", "my", "we"), replies to a question (they say what was
    asked about), decisions, errors and open tasks.  Words
    every other sentence repeats (chit-chat, log boilerplate) count for
    little, and a rare word counts less once a chosen sentence holds it, so
    the summary covers many topics instead of repeating one.  What a person
    said outweighs tool output; tool output that was already offloaded behind
    a reference is not read at all -- its reference is kept instead, on one
    ``- offloaded: ...`` line.  Exact repeats and repeats of one template with
    other numbers (log lines) are read once, and a sentence whose words
    mostly repeat an already chosen one is skipped.  An earlier summary in
    the span is read back line by line (its speakers kept).  The best
    sentences are taken until the token target is filled (speaker labels
    counted), then printed in their original order as ``- speaker: sentence
    …`` lines, one line per run of one speaker (who said what is kept: the
    speaker's name, or the role when the message has no name).
    Deterministic, no model, no network.

    Args:
        counter: the token counter used for the target (default: the estimate).
        max_chars_per_message: text of one message beyond this many
            characters is clipped (head and tail kept) before scoring.
        dates: start each day's lines with a ``[8 May 2023]`` header (the
            UTC day of the messages' ``created_at``), so what was said keeps
            when it was said; an earlier summary's headers are read back.
    """

    name = "extractive"

    def __init__(
        self,
        counter: TokenCounter | None = None,
        *,
        max_chars_per_message: int = 4000,
        dates: bool = True,
    ) -> None:
        self._counter = counter or EstimateTokenCounter()
        self._max_chars = max_chars_per_message
        self._dates = dates

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
        idf, top, bonuses, mults = _features(sentences)
        weight = dict(idf)

        def gain(k: int) -> float:
            rare = sorted((weight[w] for w in sentences[k].words), reverse=True)[:6]
            return (2.0 * sum(rare) / (6 * top) + bonuses[k]) * mults[k]

        heap = [(-gain(k), k) for k in range(len(sentences))]
        heapq.heapify(heap)
        picked = _Picked(sentences, count, dates=self._dates)
        echoes = _Echoes(sentences)
        while heap and used < budget:
            pace()
            neg, k = heapq.heappop(heap)
            now = gain(k)
            if heap and now < -heap[0][0] - 1e-12 and now < -neg - 1e-12:
                heapq.heappush(heap, (-now, k))  # stale: its words were covered since
                continue
            sent = sentences[k]
            if echoes.repeats(sent.words):
                continue
            cost = picked.cost(k)
            if used + cost > budget:
                if picked.order:
                    continue
                # Nothing fits yet: keep the best sentence, clipped to the budget.
                sent.text = sent.text[: max(16, (budget - used) * 3)].rstrip() + "…"
                cost = budget - used
            picked.add(k)
            echoes.add(sent.words)
            for w in sent.words:
                weight[w] = idf[w] * _COVERED
            used += cost
        lines = picked.lines()
        if ref_line:
            lines.append(ref_line)
        return Summary("\n".join(lines), self.name)


class _Picked:
    """The chosen sentences in their original order, and what one more would cost.

    Consecutive sentences of one speaker on one day share a line (``- who: a
    b c``), and a ``[8 May 2023]`` header starts each day when the messages
    carry dates (``dates=False``: no headers), so a sentence costs its own
    tokens plus a speaker label (and a header) only where it starts a line
    (a day) -- and choosing it between two sentences of another speaker
    splits their line.  Counting that exactly is what lets the summary fill
    its target without overshooting it.
    """

    def __init__(
        self, sentences: Sequence[_Sentence], count: Callable[[str], int], *, dates: bool = True
    ) -> None:
        self._sentences = sentences
        self._count = count
        self._dates = dates
        self._labels: dict[str, int] = {}
        self.order: list[int] = []

    def _label(self, text: str) -> int:
        if text not in self._labels:
            self._labels[text] = self._count(text)
        return self._labels[text]

    def _header(self, s: _Sentence, before: _Sentence | None) -> bool:
        return self._dates and bool(s.day) and (before is None or before.day != s.day)

    def _start(self, s: _Sentence, before: _Sentence | None) -> int:
        """What ``s`` costs beyond its text when ``before`` is the chosen sentence before it."""
        extra = self._label(f"[{s.day}]") + 1 if self._header(s, before) else 0
        if before is None or before.who != s.who or before.day != s.day:
            extra += self._label(f"- {s.who}: ")
        return extra

    def cost(self, k: int) -> int:
        sents = self._sentences
        at = bisect.bisect_left(self.order, k)
        prev = sents[self.order[at - 1]] if at > 0 else None
        nxt = sents[self.order[at]] if at < len(self.order) else None
        extra = self._start(sents[k], prev)
        if nxt is not None:  # the next chosen sentence may now start (or join) a line
            extra += self._start(nxt, sents[k]) - self._start(nxt, prev)
        return self._count(sents[k].text) + 1 + extra

    def add(self, k: int) -> None:
        bisect.insort(self.order, k)

    def lines(self) -> list[str]:
        out: list[str] = []
        prev: _Sentence | None = None
        for k in self.order:
            sent = self._sentences[k]
            if self._header(sent, prev):
                out.append(f"[{sent.day}]")
            elif prev is not None and prev.who == sent.who and prev.day == sent.day:
                # One line per run of a speaker: end a sentence that had no stop.
                out[-1] += (" " if out[-1][-1] in _STOPS else ". ") + sent.text
                prev = sent
                continue
            out.append(f"- {sent.who}: {sent.text}")
            prev = sent
        return out


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


def _features(
    sentences: Sequence[_Sentence],
) -> tuple[dict[str, float], float, list[float], list[float]]:
    """Per sentence: what it carries besides rare words (bonus) and a multiplier."""
    n = len(sentences)
    df: Counter[str] = Counter()
    for s in sentences:
        df.update(s.words)
    # Rarity: inverse document frequency over this span's sentences.  A word in
    # one sentence of a thousand carries more than one in every other line.
    idf = {w: math.log((n + 1) / c) for w, c in df.items()}
    top = math.log(n + 1) or 1.0
    common = max(3.0, _COMMON_NAME * n)
    bonuses: list[float] = []
    mults: list[float] = []
    replying = -1  # the message that answers a question of the message before it
    for k, s in enumerate(sentences):
        before = sentences[k - 1] if k else None
        if before is not None and before.idx != s.idx and before.text.rstrip().endswith("?"):
            replying = s.idx
        text = s.text
        lows = frozenset(_WORDS.findall(text.lower()))
        score = 0.0
        names = sum(
            1
            for w in _CAP_WORD.findall(" " + text)
            if w not in _COMMON_CAPS and df.get(w.lower(), 0) <= common
        )
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
        if s.idx == replying and s.kind != "tool":
            score += _ANSWER
        mult = 1.0
        if len(s.words) < 3:
            mult *= 0.4
        if len(_PUNCT.findall(text)) > 0.2 * len(text):
            mult *= 0.4
        if s.kind == "tool":
            mult *= 0.45
        elif s.kind == "summary":
            # An earlier summary's lines already won against their own span: a new
            # pass, whose rarity is counted over fewer and other sentences, should
            # displace them only for something clearly better (LoCoMo dev, grown as
            # the runtime compresses: 60-83% of answers kept at 1.1, 65-88% at 2).
            mult *= 2.0
        bonuses.append(score)
        mults.append(mult)
    return idf, top, bonuses, mults

"""Token counting: a protocol, an offline estimate and an exact tokenizer wrapper.

No tokenizer can be downloaded on the machines this runs on, so the default
counter is :class:`EstimateTokenCounter`, a character-class estimate
calibrated against the LLaMA-2 tokenizer (32k SentencePiece vocabulary, the
one bundled in the ``wordllama`` wheel).  Users who want exact counts pass a
:class:`TokenizerCounter` wrapping their own tokenizer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from itertools import repeat
from typing import TYPE_CHECKING, Any, Final, Protocol, runtime_checkable

from actormem._pace import pace
from actormem.messages import ImageBlock, OffloadRefBlock, TextBlock, ToolResultBlock, ToolUseBlock

if TYPE_CHECKING:
    from actormem.messages import Msg

__all__ = ["EstimateTokenCounter", "TokenCounter", "TokenizerCounter", "msg_overhead"]

#: Tokens added per message for the role markers of a chat template.
MSG_OVERHEAD: Final = 4
#: Tokens added per tool call (id, type, function wrapper) besides name and arguments.
TOOL_CALL_OVERHEAD: Final = 8
#: Tokens added per offload reference for the "call context_reload" instruction.
OFFLOAD_REF_OVERHEAD: Final = 20
#: Tokens charged for one image (providers charge from ~85 to ~1,600; this is a middle value).
IMAGE_TOKENS: Final = 512


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens of text and of messages.

    ``count_msgs`` must be additive (the count of a list is the sum of the
    counts of its messages): the compressor counts messages one by one and
    updates totals as it replaces them.
    """

    def count(self, text: str) -> int:
        """Return the number of tokens of ``text``."""
        ...

    def count_msgs(self, msgs: Sequence[Msg]) -> int:
        """Return the number of tokens of ``msgs`` as a model would receive them."""
        ...


def msg_overhead(msg: Msg, count: Callable[[str], int]) -> int:
    """Tokens of ``msg`` that are not in its text: role markers, tool calls, images, refs.

    Args:
        msg: the message.
        count: the text counter to use for tool names and arguments.

    Returns:
        The tokens to add to the count of the message's text blocks.
    """
    total = MSG_OVERHEAD
    for b in msg.content:
        if isinstance(b, ToolUseBlock):
            args = json.dumps(b.input, ensure_ascii=False, separators=(",", ":")) if b.input else ""
            total += TOOL_CALL_OVERHEAD + count(b.name) + (count(args) if args else 0)
        elif isinstance(b, ImageBlock):
            total += IMAGE_TOKENS
        elif isinstance(b, OffloadRefBlock):
            total += OFFLOAD_REF_OVERHEAD
        elif isinstance(b, ToolResultBlock):
            total += 3
    return total


def _block_texts(msg: Msg) -> list[str]:
    out: list[str] = []
    for b in msg.content:
        if isinstance(b, TextBlock):
            out.append(b.text)
        elif isinstance(b, ToolResultBlock):
            out.append(b.output)
        elif isinstance(b, OffloadRefBlock):
            out.append(b.preview)
    return out


_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_ASCII_WORD: Final = re.compile(r"[A-Za-z]+")
_WORD: Final = re.compile(rf"[^\W\d_{_CJK}]+")
# Tokens of a word by its length: short words are one piece, longer ones split.
_WORD_TOKENS: Final = (0.0, 1.0, 1.0, 1.05, 1.05, 1.15, 1.25, 1.35, 1.55, 1.6, 1.6, 1.85, 2.2, 2.4)
# (pattern, weight): the rest of the estimate is the weighted sum of match counts.
_FEATURES: Final[tuple[tuple[re.Pattern[str], float], ...]] = (
    (re.compile(r"(?<=[A-Za-z])[A-Z]"), 0.65),  # camelCase and ACRONYM boundaries
    (re.compile(r"\d"), 0.8),  # LLaMA splits numbers into single digits
    (re.compile(r"(?<!\S)\d"), 2.0),  # the space piece before a number
    (re.compile(r"  +"), 1.7),  # runs of spaces (indentation)
)
_NON_ASCII_FEATURES: Final[tuple[tuple[re.Pattern[str], float], ...]] = (
    (re.compile(rf"[{_CJK}]"), 1.3),  # CJK: about one piece per character
    (re.compile(rf"[^\W\d_\x00-\x7f{_CJK}]"), 0.35),  # letters of other scripts
    (re.compile(r"[\U00010000-\U0010ffff]"), 3.0),  # emoji: byte fallback
)
_NEWLINE_TOKENS: Final = 0.85
_PUNCT_RUN: Final = re.compile(r"[^\w\s]+")
# Punctuation: a lone mark is one piece; marks in runs ("{\"", "):") merge.
_PUNCT_TOKENS: Final = 0.45
_LONE_PUNCT_TOKENS: Final = 0.45


def _estimate(text: str) -> float:
    ascii_only = text.isascii()
    words = (_ASCII_WORD if ascii_only else _WORD).findall(text)
    table = _WORD_TOKENS
    top = len(table) - 1
    total: float = sum(map(table.__getitem__, map(min, map(len, words), repeat(top))))
    for pattern, weight in _FEATURES:
        total += weight * len(pattern.findall(text))
    if not ascii_only:
        for pattern, weight in _NON_ASCII_FEATURES:
            total += weight * len(pattern.findall(text))
    runs = list(map(len, _PUNCT_RUN.findall(text)))
    total += _PUNCT_TOKENS * sum(runs) + _LONE_PUNCT_TOKENS * runs.count(1)
    return total + _NEWLINE_TOKENS * text.count("\n")


class EstimateTokenCounter:
    """Offline token estimate from character classes, plus per-message overhead.

    The estimate is a weighted count of words (longer words count more),
    camelCase boundaries, digits (LLaMA-style tokenizers give each digit its
    own token), punctuation, newlines, indentation runs, CJK characters and
    emoji.  Weights were fitted against the LLaMA-2 tokenizer.

    Measured against the LLaMA-2 tokenizer (``tests/compress/test_compress_tokens.py``
    recomputes it on every run): aggregate error -1% on LoCoMo conversation
    prose, +2% on the markdown seed documents, 0% on Python source, -4% on
    JSON, 0% on number lists, +4% on log lines; per-text mean absolute error
    1-5% (up to ~18% on short non-Latin texts).  ``len(text) / 4`` by
    comparison is off by -15% on code, -29% on JSON and -74% on numbers.
    Tokenizers with larger vocabularies (tiktoken's cl100k/o200k) produce
    fewer tokens for the same text, so for those the estimate errs on the
    safe side (it over-counts).  Cost: about 150 ms per MB of new text.

    Counts of individual text strings are cached, so recounting the same
    messages on every compression pass is cheap.  The cache is bounded both in
    entries and in the characters of the texts it keeps alive (its keys would
    otherwise hold on to every message, summary and transcript ever counted);
    when either bound is reached it starts over.

    Args:
        cache_size: the maximum number of cached string counts.
        cache_chars: the maximum total length of the cached texts; a text longer
            than a quarter of it is counted but not cached.
    """

    name = "estimate"

    def __init__(self, *, cache_size: int = 200_000, cache_chars: int = 8_000_000) -> None:
        self._cache: dict[str, int] = {}
        self._cache_size = cache_size
        self._cache_chars = cache_chars
        self._cached_chars = 0

    def count(self, text: str) -> int:
        """Return the estimated number of tokens of ``text``.

        Args:
            text: any text.

        Returns:
            The estimate, 0 for the empty string and at least 1 otherwise.
        """
        if not text:
            return 0
        cached = self._cache.get(text)
        if cached is not None:
            return cached
        n = max(1, round(_estimate(text)))
        size = len(text)
        if size * 4 > self._cache_chars:
            return n
        if len(self._cache) >= self._cache_size or self._cached_chars + size > self._cache_chars:
            self._cache.clear()
            self._cached_chars = 0
        self._cache[text] = n
        self._cached_chars += size
        return n

    def count_uncached(self, text: str) -> int:
        """Return the same estimate as :meth:`count` without caching ``text``.

        For one-off texts (e.g. the prefixes tried while clipping a line to a
        budget), which would otherwise fill the cache and evict useful counts.

        Args:
            text: any text.

        Returns:
            The estimate, 0 for the empty string and at least 1 otherwise.
        """
        if not text:
            return 0
        cached = self._cache.get(text)
        return cached if cached is not None else max(1, round(_estimate(text)))

    def count_msgs(self, msgs: Sequence[Msg]) -> int:
        """Return the estimated tokens of ``msgs`` (texts plus per-message overhead).

        Args:
            msgs: the messages.

        Returns:
            The sum over messages.
        """
        count = self.count
        total = 0
        for m in msgs:
            pace()
            total += msg_overhead(m, count)
            for t in _block_texts(m):
                total += count(t)
        return total


class TokenizerCounter:
    """Exact counts from a real tokenizer.

    Accepts a Hugging Face ``tokenizers.Tokenizer`` (anything whose
    ``encode(text)`` returns an object with ``ids``), an object whose
    ``encode(text)`` returns a sequence (tiktoken's ``Encoding``), or a plain
    callable ``text -> int`` or ``text -> sequence of tokens``.

    Args:
        tokenizer: the tokenizer or callable.
        name: a name for logs and reports.

    Raises:
        TypeError: ``tokenizer`` is neither callable nor has an ``encode`` method.
    """

    def __init__(self, tokenizer: Any, *, name: str = "tokenizer") -> None:
        encode = getattr(tokenizer, "encode", None)
        if callable(encode):
            self._fn: Callable[..., Any] = encode
        elif callable(tokenizer):
            self._fn = tokenizer
        else:
            raise TypeError(
                f"TokenizerCounter needs a callable or an object with encode(), "
                f"got {type(tokenizer).__name__}"
            )
        self._is_hf = _accepts_add_special_tokens(tokenizer)
        self.name = name

    def count(self, text: str) -> int:
        """Return the number of tokens the tokenizer produces for ``text``.

        Args:
            text: any text.

        Returns:
            The token count (special tokens such as BOS are not counted).

        Raises:
            TypeError: the tokenizer returned something that is not countable.
        """
        if not text:
            return 0
        out = self._fn(text, add_special_tokens=False) if self._is_hf else self._fn(text)
        if isinstance(out, int):
            return out
        ids = getattr(out, "ids", out)
        try:
            return len(ids)
        except TypeError:
            raise TypeError(
                f"tokenizer {self.name!r} returned {type(out).__name__}, "
                "expected an int, a sequence or an Encoding with ids"
            ) from None

    def count_msgs(self, msgs: Sequence[Msg]) -> int:
        """Return the exact tokens of the texts of ``msgs`` plus per-message overhead.

        Args:
            msgs: the messages.

        Returns:
            The sum over messages.
        """
        total = 0
        for m in msgs:
            total += msg_overhead(m, self.count)
            for t in _block_texts(m):
                total += self.count(t)
        return total


def _accepts_add_special_tokens(tokenizer: Any) -> bool:
    # Hugging Face tokenizers.Tokenizer.encode takes add_special_tokens.
    mod = type(tokenizer).__module__ or ""
    return mod.startswith("tokenizers") and callable(getattr(tokenizer, "encode", None))

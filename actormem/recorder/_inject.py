"""Format retrieved memories for the prompt, within a token budget."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Final

from actormem._settings import check_arg
from actormem.compress import EstimateTokenCounter, TokenCounter
from actormem.store import SearchHit

__all__ = ["CLOSE_TAG", "HEADER", "OPEN_TAG", "format_for_injection", "format_hit"]

OPEN_TAG: Final = "<long_term_memory>"
CLOSE_TAG: Final = "</long_term_memory>"
HEADER: Final = (
    "Relevant memories from earlier conversations, most relevant first "
    "(use them if they help; they may be outdated):"
)
_DEFAULT_COUNTER: Final = EstimateTokenCounter()
_MIN_CLIP_TOKENS: Final = 12


def _date(ts: float) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(ts))


def format_hit(hit: SearchHit) -> str:
    """One memory as a line: ``- [2025-03-01] (fact) User lives in Paris``."""
    rec = hit.memory
    content = " ".join(rec.content.split())
    return f"- [{_date(rec.created_at)}] ({rec.kind}) {content}"


def format_for_injection(
    hits: Sequence[SearchHit], max_tokens: int = 800, counter: TokenCounter | None = None
) -> str:
    """The ``<long_term_memory>`` block for ``hits``, fitting ``max_tokens``.

    Hits are kept in order (best first) while they fit; the first that does
    not fit is clipped when enough room is left, and the rest are left out.

    Args:
        hits: Search results, best first.
        max_tokens: Token budget of the whole block, tags included.
        counter: Token counter (the offline estimate by default).

    Returns:
        The block, or ``""`` when there are no hits or the budget cannot hold one.

    Raises:
        ValueError: ``max_tokens`` is not an int from 1 to 10,000,000.
    """
    check_arg("format_for_injection", "max_tokens", max_tokens)
    if not hits:
        return ""
    counter = counter or _DEFAULT_COUNTER
    count = counter.count
    # The prefixes tried while clipping are one-off texts: keep them out of a
    # caching counter's cache (they filled it, evicting the messages' counts).
    probe: Callable[[str], int] = getattr(counter, "count_uncached", count)
    frame = count(OPEN_TAG) + count(CLOSE_TAG) + count(HEADER) + 3
    left = max_tokens - frame
    lines: list[str] = []
    for hit in hits:
        line = format_hit(hit)
        cost = count(line) + 1
        if cost <= left:
            lines.append(line)
            left -= cost
            continue
        if left >= _MIN_CLIP_TOKENS:
            clipped = _clip_to(line, left - 1, probe)
            if clipped:
                lines.append(clipped)
        break
    if not lines:
        return ""
    return "\n".join((OPEN_TAG, HEADER, *lines, CLOSE_TAG))


def _clip_to(line: str, budget: int, count: Callable[[str], int]) -> str:
    """The longest word-boundary prefix of ``line`` + " ..." within ``budget`` tokens."""
    words = line.split(" ")
    lo, hi = 0, len(words)
    while lo < hi:  # binary search on the number of words kept
        mid = (lo + hi + 1) // 2
        if count(" ".join(words[:mid]) + " ...") <= budget:
            lo = mid
        else:
            hi = mid - 1
    return " ".join(words[:lo]) + " ..." if lo > 3 else ""

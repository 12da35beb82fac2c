"""The fact type every extractor returns (its own module: the extractors import it)."""

from __future__ import annotations

import msgspec

__all__ = ["ExtractedFact"]


class ExtractedFact(msgspec.Struct, frozen=True, kw_only=True):
    """One fact found in a conversation.

    Attributes:
        content: A self-contained statement ("User lives in Paris").
        kind: ``fact``, ``preference``, ``procedure``, ``episode``, ...
        importance: How much it matters, in ``[0, 1]``.
        confidence: How sure the extractor is, in ``[0, 1]``.
        tags: Labels.
        slot: For single-valued facts, what it is about ("location",
            "pref:coffee"); a newer fact with the same slot replaces the older.
        source_ids: Ids of the messages it came from.
    """

    content: str
    kind: str = "fact"
    importance: float = 0.5
    confidence: float = 1.0
    tags: tuple[str, ...] = ()
    slot: str = ""
    source_ids: tuple[str, ...] = ()

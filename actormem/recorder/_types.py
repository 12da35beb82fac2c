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
        replaces: Slots of held facts this fact supersedes (a correction:
            "I switched from espresso to decaf"); the first one held is
            updated to this fact, any other is deleted.
        retraction: The fact takes something back ("I stopped playing
            tennis"); a later fact of the same batch that replaces the same
            held fact makes it redundant.
        swap: ``(subject, old, new)`` when the fact's text is written from
            the held fact it replaces ("not espresso any more, now decaf";
            ``new`` is "" for a bare "not X any more").
        if_held: The fact only stands as a correction: with no held fact to
            correct it is dropped.
    """

    content: str
    kind: str = "fact"
    importance: float = 0.5
    confidence: float = 1.0
    tags: tuple[str, ...] = ()
    slot: str = ""
    source_ids: tuple[str, ...] = ()
    replaces: tuple[str, ...] = ()
    retraction: bool = False
    swap: tuple[str, ...] = ()
    if_held: bool = False

"""The content hash that finds exact duplicates, in a module of its own.

The recorder, the importer, the keyed facts and the package's public name
need only this function; it lived in :mod:`actormem.store._records`, which
loads numpy for the vectors, so a process holding short-term memory only
paid for numpy to import the recorder.  Needs hashlib and
:mod:`actormem._pace` only.
"""

from __future__ import annotations

import hashlib

from actormem._pace import PIECE, pieces

__all__ = ["content_hash"]


def content_hash(text: str) -> str:
    """sha256 of the content with case and runs of whitespace normalised.

    That is ``sha256(" ".join(text.split()).casefold())``; a long text is
    normalised and hashed slice by slice (:func:`actormem._pace.pieces`, cut at
    spaces, so the words and their case folding are the same), pacing between
    slices: the whole-text ``split``/``join``/``casefold`` of an offloaded
    conversation (343k characters) held the GIL for 6-7 ms.
    """
    if len(text) <= PIECE:
        return hashlib.sha256(" ".join(text.split()).casefold().encode("utf-8")).hexdigest()
    digest = hashlib.sha256()
    sep = b""
    for piece in pieces(text):
        words = piece.split()
        if words:
            digest.update(sep + " ".join(words).casefold().encode("utf-8"))
            sep = b" "
    return digest.hexdigest()

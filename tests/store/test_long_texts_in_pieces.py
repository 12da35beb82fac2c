"""A long text is hashed and tokenized slice by slice, with the whole text's results.

The compressor offloads a conversation as one memory (343k characters in
``bench_runtime --loop-lag``): its content hash and its BM25 postings were one
C call each over the whole text, holding an asyncio loop beside them for
6-20 ms.  Now the text is cut at spaces (``actormem._pace.pieces``) with a
``pace()`` between slices; a stored hash or a posting that differed from the
whole-text one would break deduplication and keyword search of texts already
stored, so these compare against the whole-text formulas.
"""

from __future__ import annotations

import hashlib
import random
import threading
from collections import Counter

import pytest

from actormem import _pace
from actormem.store import Namespace
from actormem.store._content_hash import content_hash
from actormem.store._tokenize import prepare, tokenize
from actormem.store._types import MemoryRecord

P = _pace.PIECE


def _whole_hash(text: str) -> str:
    return hashlib.sha256(" ".join(text.split()).casefold().encode("utf-8")).hexdigest()


def _texts() -> list[str]:
    rng = random.Random(6)
    words = ["Straße", "ΣΊΣΥΦΟΣ", "item_42", "naïve", "DON'T", "x" * 70, "İstanbul", "ﬁle", "a"]
    spaces = [" ", "  ", "\t", "\n", "\u00a0", "\u3000", " \u2028 "]
    out = []
    for n in (P // 4, P // 3, P, 3 * P):
        out.append("".join(rng.choice(words) + rng.choice(spaces) for _ in range(n)))
    out += [
        " " * (3 * P),  # only spaces
        "y" * (2 * P) + " tail",  # a run longer than a slice: no cut inside it
        "  lead " + "w " * P + " trail  ",
        "a" * P + " " + "b" * (P - 1),  # a cut exactly at the boundary
        "ß" * (P + 5) + " STRASSE " * 10,  # casefold lengthens characters
    ]
    return out


def test_pieces_cut_only_at_spaces_and_rejoin_to_the_text() -> None:
    for text in [*_texts(), "", "short text"]:
        parts = list(_pace.pieces(text))
        assert "".join(parts) == text
        assert all(p.startswith(" ") for p in parts[1:])
        assert len(parts) == 1 or len(text) > P


@pytest.mark.parametrize("in_background", [False, True])
def test_long_texts_hash_as_the_whole_text(in_background: bool) -> None:
    got: list[str] = []

    def run() -> None:
        if in_background:
            _pace.mark_background()  # pace() really pauses between slices here
        got.extend(content_hash(t) for t in _texts())
        _pace.rest()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert got == [_whole_hash(t) for t in _texts()]
    assert len({*got}) == len(got)


def _record(text: str) -> MemoryRecord:
    return MemoryRecord(
        id="m",
        namespace=Namespace(user_id="u"),
        kind="summary",
        content=text,
        content_hash=_whole_hash(text),
        importance=0.5,
    )


def test_long_texts_get_the_whole_texts_postings() -> None:
    for text in _texts():
        prepared = prepare([_record(text)])
        want = Counter(tokenize(text))  # first occurrence order, as the index numbers terms
        assert prepared.terms == list(want)
        assert prepared.counts == list(want.values())
        assert prepared.tfs.tolist() == [float(c) for c in want.values()]
        assert prepared.doclen.tolist() == [float(sum(want.values()))]


def test_a_batch_of_long_and_short_texts_gets_each_texts_postings() -> None:
    # The batch path joins texts up to _CHUNK texts and _CHUNK_CHARS characters
    # per step (a longer text alone); the postings must not depend on the cuts.
    from actormem.store import _tokenize

    rng = random.Random(16)
    vocab = ["alpha", "Beta", "gammas", "running", "x9", "the", "stories", "z" * 80]
    sizes = [3, _tokenize._CHUNK_CHARS + 11, 40, 0, 5_000] + [
        rng.randrange(1, 60) for _ in range(600)
    ]
    texts = [" ".join(rng.choice(vocab) for _ in range(n // 6 + 1)) for n in sizes]
    texts[3] = ""
    prepared = prepare([_record(t) for t in texts])
    got: dict[str, dict[int, float]] = {}
    for i, term in enumerate(prepared.terms):
        lo, hi = int(prepared.starts[i]), int(prepared.starts[i + 1])
        got[term] = dict(
            zip(prepared.rows[lo:hi].tolist(), prepared.tfs[lo:hi].tolist(), strict=True)
        )
    want: dict[str, dict[int, float]] = {}
    for row, text in enumerate(texts):
        for term, n in Counter(tokenize(text)).items():
            want.setdefault(term, {})[row] = float(n)
    assert got == want
    assert prepared.doclen.tolist() == [float(len(tokenize(t))) for t in texts]

"""BM25 terms: tokenizing, stemming and the postings of a batch.

Pure functions with no index state, kept apart from the index because three
places share them: the DuckDB store's in-memory index, the PostgreSQL
backend's term table and the second-stage reranker.  A batch's postings are
computed here (:func:`prepare`) while DuckDB commits it, before the index
takes its lock.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

import msgspec
import numpy as np
import numpy.typing as npt

from actormem._pace import pace, pieces
from actormem.store._types import MemoryRecord

__all__ = ["MAX_TERM_CHARS", "STOPWORDS", "Prepared", "prepare", "tokenize"]

I64 = npt.NDArray[np.int64]

_TOKEN_RE: Final = re.compile(r"[^\W_]+", re.UNICODE)

#: Words too common to carry meaning for BM25 (a short English list).
_STOPWORDS_TEXT: Final = """
a about above after again against all am an and any are as at be because been before
being below between both but by can could did do does doing down during each few for
from further had has have having he her here hers herself him himself his how i if in
into is it its itself just me more most my myself no nor not now of off on once only or
other our ours ourselves out over own same she should so some such than that the their
theirs them themselves then there these they this those through to too under until up
very was we were what when where which while who whom why will with would you your yours
yourself yourselves s t d ll m re ve don didn doesn isn wasn
"""
STOPWORDS: Final = frozenset(_STOPWORDS_TEXT.split())

#: A term is cut to its first this many characters (after stemming).  Without
#: a cap a long unbroken run of letters and digits (a hex blob, a signed URL's
#: token) became one term: PostgreSQL refused the whole batch holding it (a
#: btree key is at most 2,704 bytes) while DuckDB stored it.  Cut rather than
#: dropped: a query holding the same long run is cut the same way, so it still
#: finds the memory by keyword; two runs sharing their first 64 characters
#: share a term, which only makes BM25 a little less sharp for them.  64 keeps
#: a SHA-256 hex digest whole.  Changing it changes the terms of stored texts:
#: DuckDB's index snapshot format and the PostgreSQL term repair
#: (:mod:`actormem.store._pg_terms`) name the cap they were written with.
MAX_TERM_CHARS: Final = 64


def _stem(word: str) -> str:
    """A light English suffix stripper: plurals, ``-ing`` and ``-ed``.

    ``painting``/``painted``/``paints`` -> ``paint``, ``running`` -> ``run``,
    ``stories`` -> ``story``.  Words of four letters or fewer and numbers are
    kept as they are.  Measured on LoCoMo it lifts BM25 recall@10 by about
    1.5 points (see ``benchmarks/bench_locomo.py``).
    """
    if len(word) <= 4 or word.isdigit():
        return word
    if word.endswith("ies"):
        return word[:-3] + "y"
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    for suffix in ("ing", "ed"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            word = word[: -len(suffix)]
            if len(word) > 2 and word[-1] == word[-2] and word[-1] not in "lsz":
                word = word[:-1]
            return word
    return word


class _TermCache(dict[str, str]):
    """Casefolded word -> BM25 term (``""`` for a stopword), computed on first use.

    A plain dict read through ``map(cache.__getitem__, words)`` costs one C-level
    lookup per word; :meth:`__missing__` stems a word the first time it is seen.
    Cleared when it reaches ``_TERM_CACHE_SIZE`` words so it stays bounded.
    """

    def __missing__(self, word: str) -> str:
        if len(self) >= _TERM_CACHE_SIZE:
            self.clear()
        term = self[word] = "" if word in STOPWORDS else _stem(word)[:MAX_TERM_CHARS]
        return term


_TERM_CACHE_SIZE: Final = 1 << 18
_TERMS: Final = _TermCache()


def _term(word: str) -> str:
    """The BM25 term of a casefolded word, ``""`` for a stopword."""
    return _TERMS[word]


def tokenize(text: str) -> list[str]:
    """Split ``text`` into BM25 terms: casefolded words and numbers, no stopwords.

    Digits are kept (``"item4242"`` stays one term), underscores split words,
    plurals and ``-ing``/``-ed`` endings are stripped (:func:`_stem`), and a term is
    cut to :data:`MAX_TERM_CHARS` characters.
    """
    return [t for t in map(_TERMS.__getitem__, _TOKEN_RE.findall(text.casefold())) if t]


class _BatchIds(dict[str, int]):
    """Casefolded word -> id of its term within one batch (0 for a stopword)."""

    def __init__(self) -> None:
        super().__init__()
        self.terms: list[str] = [""]
        self._term_ids: dict[str, int] = {"": 0}

    def __missing__(self, word: str) -> int:
        term = _TERMS[word]
        found = self._term_ids.get(term)
        if found is None:
            found = self._term_ids[term] = len(self.terms)
            self.terms.append(term)
        self[word] = found
        return found


class Prepared(msgspec.Struct, frozen=True):
    """BM25 postings of a batch with rows relative to the batch (see :func:`prepare`).

    Term ``terms[i]`` occurs in batch rows ``rows[starts[i]:starts[i + 1]]``
    (ascending) with term frequencies ``tfs[starts[i]:starts[i + 1]]``.
    """

    count: int
    doclen: npt.NDArray[np.float32]
    terms: list[str]
    starts: I64
    rows: I64
    tfs: npt.NDArray[np.float32]
    #: One record's term frequencies as ints, in ``terms`` order (None for a
    #: batch): the index appends them to its postings without the arrays.
    counts: list[int] | None = None


def prepare(records: Sequence[MemoryRecord]) -> Prepared:
    """Tokenize a batch and build its postings, without touching any index.

    Pure computation (the store runs it while DuckDB commits the batch): one
    regular-expression pass per text, one dict lookup per word, then the
    postings are sorted out with numpy.
    """
    if len(records) == 1:
        return _prepare_one(records[0].content)
    return _prepare_batch(records)


#: Stands between two texts in :func:`_ascii_words` (no ASCII text of a batch holds it).
_SEP: Final = "\x01"
#: ASCII bytes -> the byte :data:`_TOKEN_RE` and ``casefold`` make of them: letters
#: lower-cased, digits kept, :data:`_SEP` kept, everything else a space.
_ASCII: Final = bytes(
    c + 32 if 65 <= c <= 90 else c if 48 <= c <= 57 or 97 <= c <= 122 or c == 1 else 32
    for c in range(256)
)
#: Texts joined per :func:`_ascii_words` step (a :func:`pace` point each).
_CHUNK: Final = 256
#: ... and at most this many characters (one text longer than it goes alone).
_CHUNK_CHARS: Final = 1 << 15
#: Words looked up per ``np.fromiter`` call of :func:`_prepare_batch`.
_WORDS: Final = 8_192


def _ascii_words(texts: Sequence[str]) -> list[str] | None:
    """The words of all ``texts`` with :data:`_SEP` between two texts, or None.

    For ASCII text ``[^\\W_]+`` of the casefolded text is ``[a-z0-9]+`` of the
    lower-cased text, so a chunk of texts is joined, mapped byte by byte and
    split in three C calls instead of one regular-expression pass and one
    ``casefold`` per text (0.6 against 3.1 us per 84-character text).  None
    when a text is not ASCII or holds :data:`_SEP` (the caller splits per text).
    """
    out: list[str] = []
    lo, n = 0, len(texts)
    while lo < n:
        pace()
        # Up to _CHUNK texts and _CHUNK_CHARS characters (a longer text alone):
        # 256 texts of 4,000 characters were one 1 MB join/translate/split,
        # 6 ms with the GIL held.
        hi, size = lo + 1, len(texts[lo])
        while hi < n and hi - lo < _CHUNK and size + len(texts[hi]) <= _CHUNK_CHARS:
            size += len(texts[hi])
            hi += 1
        chunk = texts[lo:hi]
        joined = " \x01 ".join(chunk)
        if not joined.isascii() or joined.count(_SEP) != len(chunk) - 1:
            return None
        if lo:
            out.append(_SEP)
        out.extend(joined.encode("ascii").translate(_ASCII).decode("ascii").split())
        lo = hi
    return out


def _prepare_batch(records: Sequence[MemoryRecord]) -> Prepared:
    """:func:`prepare` of any number of records (numpy does the sorting out)."""
    ids = _BatchIds()
    lookup = ids.__getitem__
    count = len(records)
    words = _ascii_words([rec.content for rec in records])
    if words is not None:
        ids[_SEP] = -1  # never a term: marks where the next text starts
        # One np.fromiter over a batch's words runs no Python bytecode between
        # known words, so it kept the GIL for all of them (100 texts of 4,000
        # characters: ~70k words); in pieces, with a pace() point between.
        tids = np.empty(len(words), dtype=np.int64)
        for lo in range(0, len(words), _WORDS):
            pace()
            piece = words[lo : lo + _WORDS]
            tids[lo : lo + len(piece)] = np.fromiter(
                map(lookup, piece), dtype=np.int64, count=len(piece)
            )
        docs = np.cumsum(tids < 0)
    else:
        findall = _TOKEN_RE.findall
        flat: list[int] = []
        extend = flat.extend
        lengths: list[int] = []
        for rec in records:
            pace()
            found = findall(rec.content.casefold())
            lengths.append(len(found))
            extend(map(lookup, found))
        tids = np.array(flat, dtype=np.int64)
        docs = np.repeat(np.arange(count, dtype=np.int64), lengths)
    keep = tids > 0
    tids, docs = tids[keep], docs[keep]
    doclen = np.bincount(docs, minlength=count).astype(np.float32)
    pairs, tf = np.unique(tids * max(count, 1) + docs, return_counts=True)
    term_of = pairs // max(count, 1)
    bounds = np.flatnonzero(np.diff(term_of)) + 1
    starts = np.concatenate(([0], bounds, [pairs.size])).astype(np.int64)
    present = term_of[starts[:-1]] if pairs.size else np.zeros(0, dtype=np.int64)
    return Prepared(
        count=count,
        doclen=doclen,
        terms=[ids.terms[int(t)] for t in present],
        starts=starts if pairs.size else np.zeros(1, dtype=np.int64),
        rows=pairs % max(count, 1),
        tfs=tf.astype(np.float32),
    )


def _prepare_one(text: str) -> Prepared:
    """:func:`prepare` of one record, in plain Python (a single write's case).

    The batch path's dozen numpy calls cost more than the text's few words
    (~50 us against ~10 us here); the result is the same, field for field.
    """
    tf: dict[str, int] = {}
    # A long text slice by slice (cut at spaces: the same words), pacing
    # between: one findall and one Python loop over an offloaded
    # conversation's 343k characters held the loop 10-20 ms.
    for piece in pieces(text):
        for word in _TOKEN_RE.findall(piece.casefold()):
            term = _TERMS[word]
            if term:
                tf[term] = tf.get(term, 0) + 1
    terms = list(tf)  # in order of first occurrence, as the batch path numbers them
    counts = list(tf.values())
    n = len(terms)
    return Prepared(
        count=1,
        doclen=np.array([sum(counts)], dtype=np.float32),
        terms=terms,
        starts=np.arange(n + 1, dtype=np.int64),
        rows=np.zeros(n, dtype=np.int64),
        tfs=np.array(counts, dtype=np.float32),
        counts=counts,
    )

"""Second stage of hybrid search: soft term, speaker and time matching.

The first stage (BM25 + cosine, fused, see :class:`SearchConfig`) ranks the
candidates; this module re-scores the best ``rerank_depth`` of them with two
more signals in ``[0, 1]`` and folds them into the same normalised weighted
sum (:meth:`QueryRerank.apply`):

Soft term match (needs an embedder with word vectors, :class:`WordVectors`)
    For each query term ``t`` (casefolded, stopwords dropped, one word per
    BM25 term), ``m(t, d)`` is 1 when the memory ``d`` holds the same term
    (after the BM25 stemmer), otherwise ``min(1, max(0, max_w cos(t, w)) /
    soft_match_full)`` over the words ``w`` of ``d`` -- a ColBERT-like max-sim
    with the static word vectors of the embedder (a word's vector is the mean
    of its tokens').  The signal is the IDF-weighted mean
    ``sum(idf(t) * m(t, d)) / sum(idf(t))``, with BM25's IDF.  It credits
    synonyms and other word forms that BM25 misses ("movies" ~ "film", "kids"
    ~ "children", "married" ~ "wedding") while an exact match keeps full
    weight; unrelated words have cosines near 0.  Words with digits (numbers,
    dates, ids) match only exactly: "2022" is not half of "2023".

Speaker match
    A memory's *speaker* is its metadata ``"speaker"`` (a string) or else the
    ``"Name: "`` prefix of its content (how conversation turns are stored,
    e.g. ``render_turn``'s ``"user: ..."``), of one to three words.  The
    signal is 1 when every word of the speaker's name is a word of the query:
    a question about Nate is most often answered by something Nate said.

Time match
    The query names calendar periods (:func:`query_periods`: "in June",
    "October 13, 2023", "in 2023"); the signal is 1 for a memory whose
    ``created_at`` (UTC) falls in one of them -- a month (of the given year,
    if any) or a year.

A signal takes part only when it can say something for this query: the soft
match when the embedder has word vectors and the query has terms, the
speaker match when at least one reranked candidate's speaker is named, the
time match when the query names a period and it splits the candidates (some
in it, some not).  So a store with a plain embedder and memories without
speakers, asked without dates, ranks exactly as the first stage does.

Costs: a query's preparation is one pass over its text, and the soft match
weighs at most :data:`MAX_QUERY_TERMS` distinct terms (the first ones), so
a megabyte query costs about what a long paragraph does.  Word vectors are
cached per word and each memory's word list per
memory (both bounded, cleared when full), so a warm re-score of 50
candidates is a few numpy calls.
"""

from __future__ import annotations

import math
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import Final

import msgspec
import numpy as np
import numpy.typing as npt
import structlog

from actormem.models.base import WordVectors
from actormem.store._blas import unsplit_matmul
from actormem.store._tokenize import _TOKEN_RE, _term
from actormem.store._types import MemoryRecord, SearchConfig

__all__ = ["MAX_QUERY_TERMS", "QueryRerank", "Reranked", "Reranker", "query_periods", "speaker_of"]

log = structlog.get_logger(__name__)

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]
I32 = npt.NDArray[np.int32]
I64 = npt.NDArray[np.int64]

_SPEAKER_RE: Final = re.compile(r"\s*([^\W\d_][\w'.-]*(?: [^\W\d_][\w'.-]*){0,2}):(?:\s|$)")
_WORD_RE: Final = re.compile(r"\w+", re.UNICODE)
#: Distinct query terms the soft match weighs (the first ones of the query):
#: each costs a word vector and a column of the similarity matrix, so a huge
#: query (``add()`` takes messages up to 4 MB) is bounded work, not a stall.
MAX_QUERY_TERMS: Final = 256
_MONTH_NAMES: Final = (
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
_MONTH_RE: Final = re.compile(
    r"\b(?:(in|on|of|since|until|before|after|early|late|mid|during)\s+)?"
    r"(" + "|".join(_MONTH_NAMES) + r")\b(?:\s+(\d{1,2})(?:st|nd|rd|th)?\b)?(?:,?\s+(\d{4})\b)?"
)
_YEAR_RE: Final = re.compile(r"\b(1[89]\d\d|2[01]\d\d)\b")


def query_periods(query: str) -> tuple[tuple[int | None, int | None], ...]:
    """The calendar periods a query names, as ``(year, month)`` pairs (``None``: any).

    A capitalised English month name, optionally with a day and a year
    ("in June", "October 13, 2023", "1 February, 2023") gives its month (of
    that year when one is given); a year on its own ("in 2023") gives the
    year.  "May" counts only with a day, a year or a preposition before it.
    """
    periods: list[tuple[int | None, int | None]] = []
    taken: list[tuple[int, int]] = []
    for m in _MONTH_RE.finditer(query):
        prep, name, day, year = m.groups()
        if name == "May" and not (prep or day or year):
            continue
        periods.append((int(year) if year else None, _MONTH_NAMES.index(name) + 1))
        taken.append(m.span())
    for m in _YEAR_RE.finditer(query):
        if not any(a <= m.start() < b for a, b in taken):
            periods.append((int(m.group(1)), None))
    return tuple(dict.fromkeys(periods))


def speaker_of(record: MemoryRecord) -> str | None:
    """The speaker of a memory: metadata ``speaker`` or a ``"Name: "`` content prefix."""
    meta = record.metadata.get("speaker") if record.metadata else None
    if isinstance(meta, str) and meta.strip():
        return meta.strip()
    content = record.content
    colon = content.find(":", 0, 48)
    if colon < 1:
        return None
    m = _SPEAKER_RE.match(content, 0, colon + 2)
    return m.group(1) if m else None


class _Doc(msgspec.Struct, frozen=True):
    """What the reranker keeps of one memory: word rows, term ids, speaker words."""

    soft: bool
    words: I32
    terms: I32
    speaker: tuple[str, ...]


class Reranked(msgspec.Struct, frozen=True):
    """The second stage's result: candidates re-sorted, with new scores and signals."""

    order: I64
    fused: F64
    final: F64
    soft: F64
    speaker: F64
    time: F64


class Reranker:
    """Per-store state of the second stage: the word-vector and memory caches.

    Thread-safe (one internal lock); the store calls it under its index lock
    anyway.
    """

    def __init__(
        self,
        embedder: object,
        *,
        max_words: int = 32_768,
        max_docs: int = 16_384,
    ) -> None:
        """Create the reranker for the store's embedder.

        Args:
            embedder: The store's embedder; soft term matching is on only when
                it implements :class:`~actormem.models.base.WordVectors`.
            max_words: Word vectors cached (``max_words * dim * 4`` bytes:
                32 MiB for WordLlama at the default, reached only by stores
                whose memories hold that many distinct words); all caches are
                cleared before a search once it is reached, or once
                ``8 * max_words`` words are known (words with digits take an
                entry but no vector); one search may overshoot by its own words.
            max_docs: Memories whose word lists are cached (LRU).
        """
        self._wv: Callable[[Sequence[str]], F32] | None = (
            embedder.word_vectors if isinstance(embedder, WordVectors) else None
        )
        self._max_words = max(16, max_words)
        self._max_docs = max(16, max_docs)
        self._max_entries = 8 * self._max_words
        self._lock = threading.Lock()
        self._info: dict[str, int] = {}
        self._rows = 1  # row 0: the zero vector of words with digits
        self._vecs: F32 = np.zeros((0, 0), dtype=np.float32)
        self._term_ids: dict[str, int] = {}
        self._docs: OrderedDict[tuple[str, str, str | None], _Doc] = OrderedDict()
        # The same record objects come back search after search (the DuckDB
        # index hands out the records it holds): ``id(record) -> (record, doc)``
        # finds their views without computing the speaker and the key again
        # (~1 us a candidate, 50 a search).  Holding the record keeps its id
        # from being reused while the entry lives; cleared with the rest, and
        # wholesale once it holds ``max_docs`` entries.
        self._same: dict[int, tuple[MemoryRecord, _Doc]] = {}
        if self._wv is None:
            log.debug("rerank.no_word_vectors", embedder=getattr(embedder, "name", "?"))

    @property
    def has_word_vectors(self) -> bool:
        """Whether the embedder offers word vectors (soft term matching possible)."""
        return self._wv is not None

    def prepare(self, query: str, config: SearchConfig) -> QueryRerank | None:
        """The second stage for one query, or ``None`` when it has nothing to add."""
        if config.rerank_depth <= 0:
            return None
        soft = config.soft_match_weight > 0 and self._wv is not None
        speak = config.speaker_weight > 0
        periods = query_periods(query) if config.time_weight > 0 else ()
        if not soft and not speak and not periods:
            return None
        words: list[str] = []
        terms: dict[str, None] = {}  # ordered set: one membership test per word
        if soft:
            for match in _TOKEN_RE.finditer(query.casefold()):
                word = match.group()
                term = _term(word)
                if term and term not in terms:
                    terms[term] = None
                    words.append(word)
                    if len(terms) >= MAX_QUERY_TERMS:
                        break
            soft = bool(terms)
        qwords = frozenset(_WORD_RE.findall(query.casefold())) if speak else frozenset()
        if not soft and not qwords and not periods:
            return None
        return QueryRerank(self, words, list(terms), qwords, periods, config, soft=soft)

    def clear(self) -> None:
        """Drop every cached word and memory.

        ``forget`` calls it, so no word of a forgotten memory stays in RAM.
        """
        with self._lock:
            self._clear()

    # -- caches (under self._lock) ---------------------------------------------------

    def _clear(self) -> None:
        self._info.clear()
        self._term_ids.clear()
        self._docs.clear()
        self._same.clear()
        self._vecs = np.zeros((0, 0), dtype=np.float32)
        self._rows = 1

    def _resolve(self, words: Iterable[str]) -> None:
        """Make ``self._info`` know ``words``: one embedder call for the new ones.

        ``_info[word]`` is ``row << 32 | term_id`` (its vector's row and its
        BM25 term's id), or -1 for a stopword.  Words with digits (numbers,
        dates, ids) get row 0, the zero vector: they only match exactly.
        """
        info = self._info
        new = [w for w in words if w not in info]
        if not new:
            return
        keep: list[str] = []
        term_ids = self._term_ids
        tids: list[int] = []
        for word in new:
            term = _term(word)
            if not term:
                info[word] = -1
                continue
            tid = term_ids.get(term)
            if tid is None:
                tid = term_ids[term] = len(term_ids)
            if not word.isalpha():
                info[word] = tid  # row 0
                continue
            keep.append(word)
            tids.append(tid)
        if not keep:
            return
        assert self._wv is not None
        vecs = np.asarray(self._wv(keep), dtype=np.float32)
        start = self._rows
        end = start + len(keep)
        if self._vecs.shape[0] < end:
            cap = max(256, min(2 * end, self._max_words), end)
            grown = np.zeros((cap, vecs.shape[1]), dtype=np.float32)
            if self._vecs.size:
                grown[:start] = self._vecs[:start]
            self._vecs = grown
        self._vecs[start:end] = vecs
        for offset, (word, tid) in enumerate(zip(keep, tids, strict=True)):
            info[word] = (start + offset) << 32 | tid
        self._rows = end

    def _docs_of(self, records: Sequence[MemoryRecord], soft: bool) -> list[_Doc]:
        """The cached views of ``records``, building the missing ones in one batch."""
        cache = self._docs
        same = self._same
        if len(same) >= self._max_docs:
            same.clear()
        out: list[_Doc | None] = []
        todo: list[tuple[int, tuple[str, str, str | None], list[str], tuple[str, ...]]] = []
        seen: set[str] = set()
        for i, rec in enumerate(records):
            known = same.get(id(rec))
            if known is not None and known[0] is rec and (known[1].soft or not soft):
                out.append(known[1])
                continue
            # The speaker is part of the key: an update of the metadata keeps the hash.
            speaker = speaker_of(rec)
            key = (rec.id, rec.content_hash, speaker)
            doc = cache.get(key)
            if doc is not None and (doc.soft or not soft):
                cache.move_to_end(key)
                same[id(rec)] = (rec, doc)
                out.append(doc)
                continue
            out.append(None)
            spk = tuple(_WORD_RE.findall(speaker.casefold())) if speaker else ()
            words = list(dict.fromkeys(_TOKEN_RE.findall(rec.content.casefold()))) if soft else []
            seen.update(words)
            todo.append((i, key, words, spk))
        if not todo:
            return [d for d in out if d is not None]
        if soft:
            self._resolve(seen)
        if soft:
            # One lookup and one filter for the whole batch; each memory's
            # rows and terms are slices (views) of the batch's arrays.
            flat = [w for _, _, words, _ in todo for w in words]
            packed = np.fromiter(map(self._info.__getitem__, flat), dtype=np.int64, count=len(flat))
            keep = packed >= 0
            packed = packed[keep]
            wrows = (packed >> 32).astype(np.int32)
            wterms = (packed & 0xFFFFFFFF).astype(np.int32)
            ends = np.cumsum([len(words) for _, _, words, _ in todo])
            kept = np.concatenate(([0], np.cumsum(keep)))[np.concatenate(([0], ends))].tolist()
            for j, (i, key, _, spk) in enumerate(todo):
                a, b = kept[j], kept[j + 1]
                doc = _Doc(soft=True, words=wrows[a:b], terms=wterms[a:b], speaker=spk)
                out[i] = cache[key] = doc
                same[id(records[i])] = (records[i], doc)
        else:
            empty = np.zeros(0, dtype=np.int32)
            for i, key, _, spk in todo:
                doc = cache[key] = _Doc(soft=False, words=empty, terms=empty, speaker=spk)
                out[i] = doc
                same[id(records[i])] = (records[i], doc)
        while len(cache) > self._max_docs:
            cache.popitem(last=False)
        return [d for d in out if d is not None]

    def _query_rows(self, words: Sequence[str]) -> tuple[list[int], I32]:
        """Vector rows and term ids of the query's (non-stopword) words."""
        self._resolve(words)
        packed = [self._info[w] for w in words]
        rows = [p >> 32 for p in packed]
        terms = np.asarray([p & 0xFFFFFFFF for p in packed], dtype=np.int32)
        return rows, terms


class QueryRerank:
    """The second stage bound to one query (made by :meth:`Reranker.prepare`)."""

    def __init__(
        self,
        owner: Reranker,
        words: list[str],
        terms: list[str],
        query_words: frozenset[str],
        periods: tuple[tuple[int | None, int | None], ...],
        config: SearchConfig,
        *,
        soft: bool,
    ) -> None:
        self._owner = owner
        self._words = words
        self._terms = terms
        self._qwords = query_words
        self._periods = periods
        self._config = config
        self._soft = soft

    @property
    def idf_terms(self) -> list[str]:
        """The terms whose document frequency :meth:`signals` asks for (soft match only)."""
        return list(self._terms) if self._soft else []

    @property
    def term_count(self) -> int:
        """How many distinct query terms the soft match weighs (at most ``MAX_QUERY_TERMS``)."""
        return len(self._terms)

    @property
    def depth(self) -> int:
        """How many of the best first-stage candidates are re-scored."""
        return self._config.rerank_depth

    def signals(
        self, records: Sequence[MemoryRecord], doc_freq: Callable[[str], int], n_docs: int
    ) -> tuple[F64 | None, F64 | None, F64 | None]:
        """Soft term, speaker and time match of ``records`` (``None``: not applicable)."""
        owner = self._owner
        with owner._lock:
            # Words with digits take no vector row but do take an entry: bound both.
            if owner._rows >= owner._max_words or len(owner._info) >= owner._max_entries:
                owner._clear()
            docs = owner._docs_of(records, self._soft)
            soft: F64 | None = None
            if self._soft:
                qrows, qterms = owner._query_rows(self._words)
                soft = self._soft_scores(docs, owner._vecs, qrows, qterms, doc_freq, n_docs)
        speaker: F64 | None = None
        if self._qwords:
            qw = self._qwords
            named: dict[tuple[str, ...], bool] = {(): False}
            match = np.zeros(len(docs), dtype=np.float64)
            for i, d in enumerate(docs):
                hit = named.get(d.speaker)
                if hit is None:
                    hit = named[d.speaker] = all(w in qw for w in d.speaker)
                if hit:
                    match[i] = 1.0
            if match.any():
                speaker = match
        when: F64 | None = None
        if self._periods:
            when = self._time_match(records)
        return soft, speaker, when

    def _time_match(self, records: Sequence[MemoryRecord]) -> F64 | None:
        created = np.fromiter((r.created_at for r in records), dtype=np.float64, count=len(records))
        months = created.astype("datetime64[s]").astype("datetime64[M]").astype(np.int64)
        year, month = months // 12 + 1970, months % 12 + 1
        match = np.zeros(len(records), dtype=bool)
        for y, m in self._periods:
            hit = np.ones(len(records), dtype=bool)
            if y is not None:
                hit &= year == y
            if m is not None:
                hit &= month == m
            match |= hit
        return match.astype(np.float64) if match.any() and not match.all() else None

    def _soft_scores(
        self,
        docs: Sequence[_Doc],
        table: F32,
        qrows: list[int],
        qterms: I32,
        doc_freq: Callable[[str], int],
        n_docs: int,
    ) -> F64:
        n = max(n_docs, 1)
        idf = np.zeros(len(self._terms), dtype=np.float64)
        for i, term in enumerate(self._terms):  # BM25's IDF
            df = min(doc_freq(term), n)
            idf[i] = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
        lengths = np.fromiter((d.words.size for d in docs), dtype=np.int64, count=len(docs))
        out = np.zeros(len(docs), dtype=np.float64)
        total = int(lengths.sum())
        if total == 0 or idf.sum() <= 0:
            return out
        rows = np.concatenate([d.words for d in docs])
        dterms = np.concatenate([d.terms for d in docs])
        sims = np.zeros((rows.size, len(qrows)), dtype=np.float32)
        if table.size:  # else every word so far had digits: exact matches only
            words = table[rows]
            qmat = np.ascontiguousarray(table[np.asarray(qrows, dtype=np.int64)].T)
            # Blocks OpenBLAS runs on the calling thread: a large or transposed
            # operand sends it to its threaded path, which costs milliseconds on a
            # busy two-core machine and leaves its worker spinning after it (a
            # block of 256 words against 8 query words was still split; see
            # actormem.store._blas).
            sims[:] = unsplit_matmul(words, qmat)
        sims /= np.float32(self._config.soft_match_full)
        sims[dterms[:, None] == qterms[None, :]] = 1.0
        has = lengths > 0
        starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))[has]
        best = np.clip(np.maximum.reduceat(sims, starts, axis=0), 0.0, 1.0)
        out[has] = best.astype(np.float64) @ idf / idf.sum()
        return out

    def apply(
        self,
        order: I64,
        records: Sequence[MemoryRecord],
        fused: F64,
        relevance: F64,
        base_weight: float,
        doc_freq: Callable[[str], int],
        n_docs: int,
    ) -> Reranked:
        """Re-score the candidates ``order`` (best first-stage ones, ``records`` theirs).

        ``fused`` and ``relevance`` are the first stage's values of all
        candidates; ``base_weight`` is the weight behind ``fused``
        (``vector_weight + keyword_weight`` of the retrievers used).
        """
        cfg = self._config
        soft, speaker, when = self.signals(records, doc_freq, n_docs)
        sub_fused = fused[order]
        num = base_weight * sub_fused
        den = base_weight
        for weight, signal in (
            (cfg.soft_match_weight, soft),
            (cfg.speaker_weight, speaker),
            (cfg.time_weight, when),
        ):
            if signal is not None:
                num = num + weight * signal
                den += weight
        new_fused = num / den if den > 0 else sub_fused
        rw = cfg.relevance_weight
        final = (1.0 - rw) * new_fused + rw * relevance[order]
        resort = np.argsort(-final, kind="stable")
        zero = np.zeros(len(order), dtype=np.float64)
        return Reranked(
            order=order[resort],
            fused=new_fused[resort],
            final=final[resort],
            soft=(zero if soft is None else soft)[resort],
            speaker=(zero if speaker is None else speaker)[resort],
            time=(zero if when is None else when)[resort],
        )

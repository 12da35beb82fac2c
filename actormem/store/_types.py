"""Value types and errors of the long-term store.

Everything that crosses the store's API is a msgspec Struct: the input
(:class:`NewMemory`), the stored record (:class:`MemoryRecord`), the scope
(:class:`Namespace`), search input and output (:class:`SearchFilters`,
:class:`SearchConfig`, :class:`SearchHit`) and the reports of writes and
maintenance.  Times are Unix seconds (floats, UTC).  The store's errors and
the checks of single values live in :mod:`actormem.store._checks` and are
re-exported here.

Namespaces
    A memory is written into a concrete :class:`Namespace` -- any combination
    of ``user_id``, ``agent_id``, ``run_id`` and ``session_id`` with at least
    one set.  A namespace used to *read* is a scope: a memory is inside it when
    every field the scope sets is equal to the memory's field (unset fields are
    wildcards).  So ``Namespace(user_id="u1")`` reads all of u1's memories
    across agents and runs, and ``forget(Namespace(user_id="u1"))`` removes
    them all, while ``Namespace(user_id="u2")`` never sees any of them.
"""

from __future__ import annotations

import re
from contextvars import ContextVar
from typing import Any, Final, Literal

import msgspec

# A module import, not a name: actormem._door imports the store's limits, so
# whichever of the two is imported first finds the other half-initialised.
from actormem import _door
from actormem.store._checks import (
    EmbedderMismatchError,
    EmbeddingError,
    InvalidMemoryError,
    MemoryNotFoundError,
    NamespaceError,
    SchemaVersionError,
    StoreClosedError,
    StoreError,
    StoreLockedError,
    check_importance,
    check_no_nul,
    check_str_tuple,
    plain_label,
    utf8,
)
from actormem.store._limits import SEARCH_FIELDS, TIMESTAMP, check_fields

__all__ = [
    "KINDS",
    "NAMESPACE_MAX_BYTES",
    "EmbedderMismatchError",
    "EmbeddingError",
    "ExportReport",
    "ForgetReport",
    "FusionMethod",
    "HistoryRecord",
    "ImportReport",
    "InvalidMemoryError",
    "LogCompaction",
    "LogRecord",
    "MaintenanceReport",
    "MemoryNotFoundError",
    "MemoryRecord",
    "Namespace",
    "NamespaceError",
    "NamespaceStats",
    "NewMemory",
    "ReembedReport",
    "SchemaVersionError",
    "SearchConfig",
    "SearchFilters",
    "SearchHit",
    "SearchMode",
    "StoreClosedError",
    "StoreError",
    "StoreLockedError",
    "WriteOp",
    "WriteResult",
]

#: The memory kinds the runtime uses; other non-empty names are accepted too.
KINDS: Final = ("fact", "episode", "summary", "offload", "preference", "procedure")

WriteOp = Literal["ADD", "UPDATE", "DELETE", "MERGE", "NOOP"]
SearchMode = Literal["hybrid", "keyword", "vector"]
FusionMethod = Literal["weighted", "rrf"]

_ID_RE: Final = re.compile(r"^[^\x00-\x1f\x7f]{1,256}$")
_MAX_CONTENT: Final = 1_000_000


# -- namespace ----------------------------------------------------------------------

_NS_FIELDS: Final = ("user_id", "agent_id", "run_id", "session_id")
#: UTF-8 bytes all parts of a namespace may take together.  PostgreSQL keeps
#: the whole namespace in its btree keys (posting groups: term + namespace +
#: group; journal state: namespace + key), and an index entry past ~2,700
#: bytes is refused at every write; 1,024 leaves room for a 64-character term
#: (256 bytes) or a 256-character journal key (1,024 bytes) beside it.  Every
#: backend applies it, so what one accepts the other does.  Four ASCII parts of
#: 256 characters fit exactly.
NAMESPACE_MAX_BYTES: Final = 1024


class Namespace(msgspec.Struct, frozen=True, kw_only=True):
    """Who a memory belongs to, and the scope of a read (see module docstring).

    Attributes:
        user_id: The end user.
        agent_id: The agent.
        run_id: One run / task of an agent.
        session_id: One conversation session.
    """

    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None
    session_id: str | None = None

    def __post_init__(self) -> None:
        multibyte = False
        for name in _NS_FIELDS:
            value = getattr(self, name)
            if value is None:
                continue
            if not isinstance(value, str):
                raise NamespaceError(f"namespace {name} must be a str, got {type(value).__name__}")
            if not _ID_RE.match(value) or not utf8(value):
                raise NamespaceError(
                    f"namespace {name} {value!r} must be 1-256 characters, no control characters"
                )
            multibyte = multibyte or not value.isascii()
        if all(getattr(self, name) is None for name in _NS_FIELDS):
            raise NamespaceError(
                "a namespace needs at least one of user_id, agent_id, run_id, session_id"
            )
        if multibyte:  # four ASCII parts of at most 256 characters always fit
            _check_namespace_bytes(self)

    def items(self) -> tuple[tuple[str, str], ...]:
        """The fields that are set, as ``(name, value)`` pairs in a fixed order."""
        return tuple(
            (name, value) for name in _NS_FIELDS if (value := getattr(self, name)) is not None
        )

    def contains(self, other: Namespace) -> bool:
        """Whether a memory written into ``other`` is inside this scope."""
        return all(getattr(other, name) == value for name, value in self.items())

    def key(self) -> tuple[str, str, str, str]:
        """The four fields with ``""`` for unset ones (how the store keeps them)."""
        return (
            self.user_id or "",
            self.agent_id or "",
            self.run_id or "",
            self.session_id or "",
        )

    @classmethod
    def from_key(cls, key: tuple[str, str, str, str] | list[str]) -> Namespace:
        """Inverse of :meth:`key`."""
        u, a, r, s = key
        return cls(user_id=u or None, agent_id=a or None, run_id=r or None, session_id=s or None)

    def __str__(self) -> str:
        return "/".join(f"{name}={value}" for name, value in self.items())


#: Set while a namespace read back from stored rows is built (:func:`stored_namespace`).
_READING_STORED: ContextVar[bool] = ContextVar("actormem_reading_stored", default=False)


def stored_namespace(key: tuple[str, str, str, str]) -> Namespace:
    """The namespace of a stored row (``Namespace.from_key``), even one past the byte limit.

    A DuckDB file written before the limit existed may hold such rows: they
    stay readable (and can be forgotten); only new writes are refused.
    """
    try:
        return Namespace.from_key(key)
    except NamespaceError:
        token = _READING_STORED.set(True)
        try:
            return Namespace.from_key(key)
        finally:
            _READING_STORED.reset(token)


def _check_namespace_bytes(ns: Namespace) -> None:
    """Refuse a namespace whose parts take more than ``NAMESPACE_MAX_BYTES`` together."""
    sizes = [(name, len(value.encode("utf-8"))) for name, value in ns.items()]
    total = sum(size for _, size in sizes)
    if total <= NAMESPACE_MAX_BYTES or _READING_STORED.get():
        return
    longest = max(sizes, key=lambda item: item[1])[0]
    listed = ", ".join(f"{name} {size:,}" for name, size in sizes)
    raise NamespaceError(
        f"namespace parts take {total:,} bytes of UTF-8 together ({listed}); the limit is "
        f"{NAMESPACE_MAX_BYTES:,} bytes for all parts (PostgreSQL indexes the whole namespace "
        f"as one key; every backend applies the limit): shorten {longest}"
    )


# -- records -------------------------------------------------------------------------


class NewMemory(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A memory to add.

    Not tracked by Python's cyclic garbage collector (``gc=False``; its
    fields cannot form a cycle through it), so a batch of a million does not
    lengthen every full collection.

    Attributes:
        content: The text (non-empty, at most 1,000,000 characters).
        kind: fact, episode, summary, offload, preference, ... (non-empty).
        importance: Manual weight in ``[0, 1]``.
        tags: Free labels.
        source_ids: Ids of the messages this memory came from.
        metadata: JSON-serialisable extra fields.
        created_at: When it happened (Unix seconds); ``None`` means now.
        id: A caller-chosen id; ``None`` lets the store make one.
    """

    content: str
    kind: str = "fact"
    importance: float = 0.5
    tags: tuple[str, ...] = ()
    source_ids: tuple[str, ...] = ()
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    created_at: float | None = None
    id: str | None = None

    def validate(self) -> None:
        """Check types and ranges.

        Raises:
            InvalidMemoryError: Naming the first field that is wrong.
        """
        content = self.content
        kind = self.kind
        if (  # fast path: ASCII texts, no metadata, time or id (most adds)
            type(content) is str
            and 0 < len(content) <= _MAX_CONTENT
            and content.isascii()
            and not content.isspace()
            and "\x00" not in content
            and (kind == "fact" or plain_label(kind, 64))
            and type(self.importance) is float
            and 0.0 <= self.importance <= 1.0
            and type(self.tags) is tuple
            and (not self.tags or all(plain_label(t, 256) for t in self.tags))
            and type(self.source_ids) is tuple
            and (not self.source_ids or all(plain_label(t, 256) for t in self.source_ids))
            and type(self.metadata) is dict
            and not self.metadata
            and self.created_at is None
            and self.id is None
        ):
            return
        if not isinstance(self.content, str):
            raise InvalidMemoryError(f"content must be a str, got {type(self.content).__name__}")
        if not self.content.strip():
            raise InvalidMemoryError("content must not be empty")
        if len(self.content) > _MAX_CONTENT:
            raise InvalidMemoryError(
                f"content has {len(self.content)} characters, the limit is {_MAX_CONTENT}"
            )
        if not isinstance(self.kind, str) or not 0 < len(self.kind) <= 64:
            raise InvalidMemoryError(f"kind must be a non-empty str of <= 64 chars: {self.kind!r}")
        check_importance(self.importance)
        check_str_tuple("tags", self.tags)
        check_str_tuple("source_ids", self.source_ids)
        if not isinstance(self.metadata, dict):
            raise InvalidMemoryError(f"metadata must be a dict, got {type(self.metadata).__name__}")
        if self.created_at is not None:
            TIMESTAMP.check(self.created_at, "created_at", error=InvalidMemoryError)
        if self.id is not None and (not isinstance(self.id, str) or not _ID_RE.match(self.id)):
            raise InvalidMemoryError(f"id must be 1-256 printable characters: {self.id!r}")
        for name, text in (("content", self.content), ("kind", self.kind), ("id", self.id or "")):
            if not utf8(text):
                raise InvalidMemoryError(f"{name} is not valid Unicode text (a lone surrogate?)")
        for name in ("tags", "source_ids"):
            if not all(utf8(t) for t in getattr(self, name)):
                raise InvalidMemoryError(f"{name} hold text that is not valid Unicode")
        # PostgreSQL's text cannot hold a NUL: refused on every backend alike, so
        # what one store accepts another does (and an export moves between them).
        for name, text in (("content", self.content), ("kind", self.kind)):
            if "\x00" in text:
                raise InvalidMemoryError(
                    f"{name} holds a NUL character (U+0000), which no backend keeps"
                )
        for name in ("tags", "source_ids"):
            if any("\x00" in t for t in getattr(self, name)):
                raise InvalidMemoryError(
                    f"{name} hold a NUL character (U+0000), which no backend keeps"
                )
        # The door's JSON check (actormem._door): JSON values only, string keys, no
        # NaN, at most MAX_DEPTH levels (deeper made every later encode recurse out).
        _door.check_json_object(self.metadata, "metadata", error=InvalidMemoryError)
        try:
            encoded = msgspec.json.encode(self.metadata)
        except (TypeError, UnicodeEncodeError, msgspec.EncodeError) as exc:
            raise InvalidMemoryError(f"metadata cannot be stored as JSON: {exc}") from None
        if b"\\u0000" in encoded:
            check_no_nul(self.metadata, "metadata")


class MemoryRecord(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A stored memory (without its vector).

    Not tracked by Python's cyclic garbage collector (``gc=False``): the
    store's index keeps one per memory, and a million tracked records made
    every full collection walk them (about 12% of a 1M-row ingest).  The
    fields hold strings, tuples, a :class:`Namespace` and JSON metadata,
    none of which can refer back to the record, so no cycle runs through it.

    Attributes:
        id: Unique id.
        namespace: Where it lives.
        kind: fact, episode, summary, ...
        content: The text.
        content_hash: sha256 hex of the normalised content (dedup key).
        importance: Weight in ``[0, 1]``.
        tags: Labels.
        source_ids: Source message ids.
        created_at: Creation time (Unix seconds).
        updated_at: Last change of content or attributes.
        last_accessed: Last retrieval (or creation).
        access_count: Number of retrievals (plus those absorbed in merges).
        superseded_by: Id of the memory that absorbed this one.
        deleted_at: Soft-deletion time.
        metadata: Extra JSON fields.
    """

    id: str
    namespace: Namespace
    kind: str
    content: str
    content_hash: str
    importance: float
    tags: tuple[str, ...] = ()
    source_ids: tuple[str, ...] = ()
    created_at: float = 0.0
    updated_at: float = 0.0
    last_accessed: float = 0.0
    access_count: int = 0
    superseded_by: str | None = None
    deleted_at: float | None = None
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)

    @property
    def alive(self) -> bool:
        """Neither deleted nor superseded."""
        return self.deleted_at is None and self.superseded_by is None


class WriteResult(msgspec.Struct, frozen=True, kw_only=True):
    """What a write did to one memory.

    Attributes:
        id: The memory that now holds the content (for a merge: the survivor).
        op: ``ADD``, ``UPDATE``, ``DELETE``, ``MERGE`` or ``NOOP``.
        merged_from: For ``MERGE``: the id of the absorbed memory, or ``None``
            when the new content was folded in without creating a row.
        similarity: For ``MERGE``: cosine similarity that triggered it (1.0
            for an exact duplicate).
    """

    id: str
    op: WriteOp
    merged_from: str | None = None
    similarity: float | None = None


class HistoryRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One row of the audit trail.

    Attributes:
        id: Row id.
        memory_id: The memory it is about.
        namespace: The memory's namespace.
        op: ``ADD``, ``UPDATE``, ``DELETE`` or ``MERGE``.
        old_content: Content before (``None`` for ADD).
        new_content: Content after (``None`` for DELETE).
        ts: When (Unix seconds).
        reason: Why (free text: caller's reason, maintenance action, ...).
    """

    id: str
    memory_id: str
    namespace: Namespace
    op: str
    old_content: str | None
    new_content: str | None
    ts: float
    reason: str = ""


class LogRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One entry of an agent's activity log (the record behind ``LOG.md``).

    Attributes:
        id: Unique id.
        namespace: The concrete namespace (the agent's folder) it belongs to.
        seq: Position in the namespace's log (1, 2, ...).
        ts: When (Unix seconds).
        entry_type: ``TOOL_USE``, ``THOUGHT``, ``USER_FEEDBACK``, ``ERROR`` or ``SYSTEM``.
        content: The text.
        metadata: Extra JSON fields (tool name, error type, ...).
        compaction_id: The compaction that summarized it (``None`` while it is live).
    """

    id: str
    namespace: Namespace
    seq: int
    ts: float
    entry_type: str
    content: str
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    compaction_id: str | None = None


class LogCompaction(msgspec.Struct, frozen=True, kw_only=True):
    """One compaction of an activity log into a summary memory.

    Attributes:
        id: Unique id.
        namespace: The concrete namespace.
        ts: When (Unix seconds).
        entries: How many entries it summarized.
        first_seq: ``seq`` of the first of them.
        last_seq: ``seq`` of the last of them.
        summary_id: The long-term memory (kind ``summary``) holding the summary.
        summary: The summary text.
        summarizer: Which summarizer wrote it.
        bytes_before: Size of ``LOG.md`` before.
        bytes_after: Size of ``LOG.md`` after.
    """

    id: str
    namespace: Namespace
    ts: float
    entries: int
    first_seq: int
    last_seq: int
    summary_id: str
    summary: str
    summarizer: str = ""
    bytes_before: int = 0
    bytes_after: int = 0


# -- search ---------------------------------------------------------------------------


class SearchFilters(msgspec.Struct, frozen=True, kw_only=True):
    """Extra conditions on a search (all optional; combined with AND).

    Attributes:
        kinds: Only these kinds.
        tags_any: At least one of these tags.
        tags_all: All of these tags.
        created_after: ``created_at >= created_after``.
        created_before: ``created_at < created_before``.
        agent_id: Only this agent (inside the namespace).
        run_id: Only this run.
        session_id: Only this session.
        min_importance: ``importance >= min_importance``.
    """

    kinds: tuple[str, ...] | None = None
    tags_any: tuple[str, ...] | None = None
    tags_all: tuple[str, ...] | None = None
    created_after: float | None = None
    created_before: float | None = None
    agent_id: str | None = None
    run_id: str | None = None
    session_id: str | None = None
    min_importance: float | None = None


class SearchConfig(msgspec.Struct, frozen=True, kw_only=True):
    """How hybrid search fuses its signals.

    ``fused`` combines the two retrievers, then ``score = (1 -
    relevance_weight) * fused + relevance_weight * relevance``.

    * ``weighted`` (default): ``fused = (vector_weight * max(cosine, 0) +
      keyword_weight * bm25 / max_bm25) / (vector_weight + keyword_weight)``,
      where ``max_bm25`` is the best BM25 score among the candidates, so both
      parts lie in ``[0, 1]``.
    * ``rrf``: reciprocal rank fusion, ``sum(w_i / (rrf_k + rank_i))`` over
      the retrievers that ranked the memory (ranks from 1), divided by its
      largest possible value so ``fused`` lies in ``[0, 1]``.

    Second stage (hybrid mode only, both methods): the best ``rerank_depth``
    candidates by ``score`` are re-scored with three more signals in ``[0, 1]``
    (see :mod:`actormem.store._rerank`): ``soft`` -- the soft term match, the
    IDF-weighted share of query terms found in the memory exactly or as a
    similar word by the embedder's word vectors --, ``speaker`` -- 1 when
    the query names the memory's speaker -- and ``time`` -- 1 when the memory
    was created in a month or year the query names.  They join the weighted
    sum::

        fused' = (W * fused + soft_match_weight * soft + speaker_weight * speaker
                  + time_weight * time)
                 / (W + soft_match_weight + speaker_weight + time_weight)

    with ``W = vector_weight + keyword_weight`` (for ``weighted`` this is the
    same normalised weighted sum over all the signals).  A signal that does not
    apply to the query is left out of both sums: the soft match when the
    embedder has no word vectors (:class:`~actormem.models.base.WordVectors`;
    the bundled WordLlama has them, remote and hash embedders do not) or the
    query has no terms, the speaker match when no re-scored candidate's
    speaker is named, the time match when the query names no period or all
    re-scored candidates are equally in or out of it.  Then ``score`` is
    recomputed from ``fused'`` and the re-scored candidates are re-sorted; at
    least ``limit`` candidates are re-scored, so every hit's score comes from
    the same formula.
    ``soft_match_weight=speaker_weight=time_weight=0`` (or
    ``rerank_depth=0``) gives the first stage alone.

    Neighbouring episodes as context (hybrid mode, both stages; keyword and
    vector modes rank each memory alone): a conversation turn is
    often answered, or explained, by the turn before it ("Where did your
    sister move?" -- "Lisbon, last spring."), so before candidates are
    picked each ``episode`` memory's cosine and BM25 become
    ``(s + context_prev_weight * s_prev + context_next_weight * s_next +
    context_prev2_weight * s_prev2) / (1 + context_prev_weight +
    context_next_weight + context_prev2_weight)``, where ``s_prev``,
    ``s_next`` and ``s_prev2`` are the scores of the episodes of the same
    concrete namespace added just before, just after and two before it (a
    term without such a neighbour is left out of both sums; memories of
    other kinds keep their own scores).
    The hits still report the memory's own ``cosine`` and ``bm25``.  Both
    backends keep the order memories were added in; ``0`` for all three
    weights turns it off.  It is tuned together with the
    second stage, which re-scores each candidate by its own words: without
    that stage a reply can outrank the turn that matched.  On LoCoMo the second
    stage lifts hybrid recall@10 from 0.65 to 0.69 and recall@1 from 0.35
    to 0.41 (``benchmarks/bench_locomo.py``; ``benchmarks/tune_locomo.py``
    tunes the weights on four conversations and measures on the fifth).

    Attributes:
        method: ``weighted`` or ``rrf``.
        vector_weight: Weight of the cosine similarity.
        keyword_weight: Weight of BM25.
        relevance_weight: Share of seed 000's relevance in the final score.
        rrf_k: The RRF constant.
        candidates: Top-N taken from each retriever before fusing (at least
            ``limit``).
        bm25_k1: BM25 term-frequency saturation.
        bm25_b: BM25 length normalisation (0.3: memories are short, so a
            long one is penalised less than with the usual 0.75; +2.5 points
            of LoCoMo recall@10).
        soft_match_weight: Weight of the soft term match in the second stage
            (0 turns it off).
        soft_match_full: Word cosine that counts as a full match of a query
            term (lower cosines count proportionally; an exact term is 1).
        speaker_weight: Weight of the speaker match in the second stage (0
            turns it off).
        time_weight: Weight of the time match in the second stage (0 turns
            it off).
        rerank_depth: How many of the best first-stage candidates the second
            stage re-scores (at least ``limit``; 0 turns the stage off).
        context_prev_weight: Share of the previous episode's scores in an
            episode's (0 turns it off).
        context_next_weight: Share of the next episode's scores in an
            episode's (0 turns it off).
        context_prev2_weight: Share of the scores of the episode two before
            in an episode's (0 turns it off).
    """

    method: FusionMethod = "weighted"
    vector_weight: float = 0.5
    keyword_weight: float = 0.5
    relevance_weight: float = 0.1
    rrf_k: float = 60.0
    candidates: int = 100
    bm25_k1: float = 1.2
    bm25_b: float = 0.3
    soft_match_weight: float = 0.5
    soft_match_full: float = 0.5
    speaker_weight: float = 0.4
    time_weight: float = 0.4
    rerank_depth: int = 50
    context_prev_weight: float = 1.0
    context_next_weight: float = 0.1
    context_prev2_weight: float = 0.4

    def __post_init__(self) -> None:
        if self.method not in ("weighted", "rrf"):
            raise InvalidMemoryError(f"unknown fusion method {self.method!r}")
        check_fields(self, SEARCH_FIELDS, "SearchConfig", error=InvalidMemoryError)
        if self.vector_weight + self.keyword_weight <= 0:
            raise InvalidMemoryError("vector_weight + keyword_weight must be > 0")


class SearchHit(msgspec.Struct, frozen=True, kw_only=True):
    """One search result and how its score was made.

    Attributes:
        memory: The record (``access_count``/``last_accessed`` include this
            retrieval).
        score: Final score (higher is better).
        bm25: Raw BM25 score (0 when no query word matched).
        cosine: Cosine similarity of query and memory vectors.
        fused: The fused retriever score in ``[0, 1]`` (after the second
            stage, when it ran).
        relevance: Seed 000's relevance of the memory at query time.
        soft_match: The second stage's soft term match in ``[0, 1]`` (0 when
            it did not run).
        speaker_match: 1.0 when the query names the memory's speaker and the
            second stage used that signal, else 0.0.
        time_match: 1.0 when the memory was created in a month (or year)
            the query names and the second stage used that signal, else 0.0.
    """

    memory: MemoryRecord
    score: float
    bm25: float
    cosine: float
    fused: float
    relevance: float
    soft_match: float = 0.0
    speaker_match: float = 0.0
    time_match: float = 0.0


# -- reports ----------------------------------------------------------------------------


class ForgetReport(msgspec.Struct, frozen=True, kw_only=True):
    """What :meth:`forget` removed for good."""

    namespace: Namespace
    memories: int
    history: int


class MaintenanceReport(msgspec.Struct, frozen=True, kw_only=True):
    """What one maintenance action did.

    Attributes:
        action: ``decay``, ``auto_forget``, ``prune_stale``,
            ``prune_duplicates``, ``consolidate`` or ``enforce_cap``.
        examined: Live memories looked at.
        removed: Ids soft-deleted or superseded.
        merged: ``(survivor, absorbed)`` pairs.
        details: Action-specific figures.
    """

    action: str
    examined: int
    removed: tuple[str, ...] = ()
    merged: tuple[tuple[str, str], ...] = ()
    details: dict[str, Any] = msgspec.field(default_factory=dict)


class NamespaceStats(msgspec.Struct, frozen=True, kw_only=True):
    """Figures for one concrete namespace."""

    namespace: Namespace
    live: int
    deleted: int
    superseded: int
    kinds: dict[str, int]
    avg_importance: float
    total_access: int
    first_created: float | None
    last_created: float | None


class ExportReport(msgspec.Struct, frozen=True, kw_only=True):
    """What an export wrote."""

    path: str
    format: Literal["parquet", "jsonl"]
    memories: int


class ImportReport(msgspec.Struct, frozen=True, kw_only=True):
    """What an import did.

    Attributes:
        path: The file.
        read: Its rows.
        added: New memories (copies included).
        merged: Rows folded into an exact duplicate already stored.
        copied: Of ``added``, rows imported into a namespace other than the one
            their id already lives in: copies with a new id (the source id in
            ``metadata["copied_from"]``).
        skipped: Rows not written because they are in the store already: their
            id in the same namespace (an import done again), a copy of them
            made by an earlier import, or their id twice in the file.
    """

    path: str
    read: int
    added: int
    merged: int
    copied: int = 0
    skipped: int = 0


class ReembedReport(msgspec.Struct, frozen=True, kw_only=True):
    """What :meth:`reembed` rebuilt."""

    embedder: str
    dim: int
    previous_embedder: str
    previous_dim: int
    memories: int
    seconds: float

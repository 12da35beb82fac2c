"""The second stage of hybrid search: soft term matching and speaker matching."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from actormem.models.base import WordVectors
from actormem.models.embedders import HashEmbedder, OpenAIEmbedder, WordLlamaEmbedder
from actormem.store import (
    DuckDBStore,
    InvalidMemoryError,
    Namespace,
    NewMemory,
    SearchConfig,
)
from actormem.store._records import MAX_QUERY_CHARS, clip_query
from actormem.store._rerank import MAX_QUERY_TERMS, Reranker, query_periods, speaker_of
from actormem.store._types import MemoryRecord
from tests.store._low_rank import LowRankEmbedder

#: The backends the second-stage tests run on (it is shared by both).
BACKENDS = ["duckdb", "postgres"]


def _now() -> float:
    return 1_700_000_000.0


OFF = SearchConfig(soft_match_weight=0.0, speaker_weight=0.0, time_weight=0.0)
NS = Namespace(user_id="u")

FILMS = [
    "We watched a great film with the children on Saturday",
    "The night bus was late again",
    "I paid the electricity bill",
    "My sister moved to Lisbon",
    "The printer on the second floor is broken",
]


@pytest.fixture(scope="module")
def wordllama() -> WordLlamaEmbedder:
    return WordLlamaEmbedder()


def _store(request: pytest.FixtureRequest, tmp_path: Path, embedder: Any, name: str) -> Any:
    """A store of the parametrised backend (the second stage is shared by both)."""
    kwargs: dict[str, Any] = {
        "embedder": embedder,
        "touch_flush_interval": None,
        "near_duplicate_threshold": None,
        "clock": _now,
    }
    if request.param == "duckdb":
        return DuckDBStore(tmp_path / f"{name}.duckdb", **kwargs)
    from actormem.store._postgres import PostgresStore

    return PostgresStore(request.getfixturevalue("pg_dsn"), **kwargs)


@pytest.fixture(params=BACKENDS)
def wl_store(
    request: pytest.FixtureRequest, tmp_path: Path, wordllama: WordLlamaEmbedder
) -> Iterator[Any]:
    with _store(request, tmp_path, wordllama, "wl") as store:
        yield store


@pytest.fixture(params=BACKENDS)
def hash_store(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], Any]:
    """``hash_store()`` opens one store of the parametrised backend (one per test)."""
    return lambda: _store(request, tmp_path, HashEmbedder(64), "h")


def _record(content: str, **meta: Any) -> MemoryRecord:
    return MemoryRecord(
        id=content[:20],
        namespace=NS,
        kind="episode",
        content=content,
        content_hash=content[:20],
        importance=0.5,
        metadata=meta,
    )


def test_wordllama_word_vectors_pool_like_embed(wordllama: WordLlamaEmbedder) -> None:
    words = ["painting", "karendor", "x"]
    vecs = wordllama.word_vectors(words)
    assert vecs.shape == (3, 256) and vecs.dtype == np.float32
    np.testing.assert_allclose(vecs, wordllama.embed(words), atol=1e-5)
    assert np.abs(wordllama.word_vectors([""])).sum() == 0
    assert wordllama.word_vectors([]).shape == (0, 256)


def test_only_static_embedders_offer_word_vectors(wordllama: WordLlamaEmbedder) -> None:
    assert isinstance(wordllama, WordVectors)
    assert not isinstance(HashEmbedder(16), WordVectors)
    with OpenAIEmbedder(model="m", dim=8, base_url="http://127.0.0.1:9") as remote:
        assert not isinstance(remote, WordVectors)
        assert not Reranker(remote).has_word_vectors


def test_soft_match_ranks_a_synonym_above_an_exact_but_unrelated_word(
    wl_store: Any,
) -> None:
    wl_store.add_many(NS, FILMS)
    query = "movie night with the kids"
    first = wl_store.search(query, NS, limit=3, config=OFF, touch=False)
    assert first[0].memory.content == FILMS[1]  # BM25 matches "night"
    assert all(h.soft_match == 0 for h in first)
    cfg = SearchConfig(soft_match_weight=2.0)
    hits = wl_store.search(query, NS, limit=5, config=cfg, touch=False)
    assert hits[0].memory.content == FILMS[0]  # film ~ movie, children ~ kids
    soft = {h.memory.content: h.soft_match for h in hits}
    assert soft[FILMS[0]] > 0.7
    assert soft[FILMS[2]] < 0.3 and soft[FILMS[3]] < 0.3
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_soft_match_signal_formula(wl_store: Any) -> None:
    wl_store.add_many(NS, FILMS)
    cfg = SearchConfig(speaker_weight=0.0, relevance_weight=0.0)
    hits = wl_store.search("film children", NS, limit=5, config=cfg, touch=False)
    # both query terms occur verbatim in the first memory: a full match
    assert hits[0].memory.content == FILMS[0]
    assert hits[0].soft_match == pytest.approx(1.0)
    best_bm25 = max(h.bm25 for h in hits)
    for h in hits:
        first = 0.5 * max(h.cosine, 0.0) + 0.5 * h.bm25 / best_bm25
        assert h.fused == pytest.approx((first + 0.5 * h.soft_match) / 1.5, rel=1e-5)
        assert h.score == pytest.approx(h.fused, rel=1e-6)


def test_rerank_off_is_the_first_stage(wl_store: Any) -> None:
    wl_store.add_many(NS, FILMS)
    for cfg in (OFF, SearchConfig(rerank_depth=0)):
        hits = wl_store.search("movie night", NS, limit=5, config=cfg, touch=False)
        best_bm25 = max(h.bm25 for h in hits)
        for h in hits:
            expected = 0.5 * max(h.cosine, 0.0) + 0.5 * h.bm25 / best_bm25
            assert h.fused == pytest.approx(expected, rel=1e-5)
            assert h.soft_match == 0 and h.speaker_match == 0 and h.time_match == 0


def test_keyword_and_vector_modes_are_not_reranked(wl_store: Any) -> None:
    wl_store.add_many(NS, FILMS)
    for mode in ("keyword", "vector"):
        on = wl_store.search("movie night", NS, mode=mode, touch=False)
        off = wl_store.search("movie night", NS, mode=mode, config=OFF, touch=False)
        assert [(h.memory.id, h.score) for h in on] == [(h.memory.id, h.score) for h in off]
        assert all(h.soft_match == 0 for h in on)


def test_embedder_without_word_vectors_skips_the_soft_match(hash_store: Callable[[], Any]) -> None:
    with hash_store() as store:
        store.add_many(NS, FILMS)
        on = store.search("movie night with the kids", NS, touch=False)
        off = store.search("movie night with the kids", NS, config=OFF, touch=False)
        assert [(h.memory.id, h.score, h.fused) for h in on] == [
            (h.memory.id, h.score, h.fused) for h in off
        ]
        assert all(h.soft_match == 0 for h in on)


def test_speaker_of() -> None:
    assert speaker_of(_record("Caroline: I went to the support group")) == "Caroline"
    assert speaker_of(_record("user: what is the weather")) == "user"
    assert speaker_of(_record("Mary Ann Lee: hi")) == "Mary Ann Lee"
    assert speaker_of(_record("hi", speaker="Nate")) == "Nate"
    for content in (
        "no speaker here",
        "see http://example.com",
        "12: not a name",
        "A long sentence that has a colon much later: here",
    ):
        assert speaker_of(_record(content)) is None


def test_speaker_match_prefers_the_named_speakers_turns(hash_store: Callable[[], Any]) -> None:
    with hash_store() as store:
        store.add_many(
            NS,
            [
                NewMemory(content="Joanna: I adopted two turtles last week", id="j"),
                NewMemory(content="Nate: I adopted two turtles last week", id="n"),
                NewMemory(
                    content="We adopted two turtles last week", id="m", metadata={"speaker": "Nate"}
                ),
            ],
            dedup=False,
        )
        hits = store.search("Which turtles did Nate adopt?", NS, touch=False)
        assert {h.memory.id for h in hits[:2]} == {"n", "m"}
        assert hits[2].memory.id == "j"
        assert [h.speaker_match for h in hits] == [1.0, 1.0, 0.0]
        # nobody named: the signal is left out and the first stage decides
        plain = store.search("Which turtles were adopted?", NS, touch=False)
        off = store.search("Which turtles were adopted?", NS, config=OFF, touch=False)
        assert [(h.memory.id, h.score) for h in plain] == [(h.memory.id, h.score) for h in off]


def test_caches_are_bounded_and_do_not_change_results(
    tmp_path: Path, wordllama: WordLlamaEmbedder
) -> None:
    texts = [f"Note {i}: the {w} meeting about project {i}" for i, w in enumerate(FILMS * 8)]
    queries = ["film meeting", "bus project", "sister moved", "broken printer", "paid bill"]
    with DuckDBStore(
        tmp_path / "c.duckdb",
        embedder=wordllama,
        touch_flush_interval=None,
        near_duplicate_threshold=None,
    ) as store:
        store.add_many(NS, texts)
        big = [[h.memory.id for h in store.search(q, NS, touch=False)] for q in queries]
        small = Reranker(wordllama, max_words=16, max_docs=16)
        store._reranker = small  # a tiny cache: cleared and evicted all the time
        again = [[h.memory.id for h in store.search(q, NS, touch=False)] for q in queries * 2]
        assert again == big * 2
        assert len(small._docs) <= 16
        assert small._rows < 16 + 200


def test_search_config_validates_the_new_fields() -> None:
    for bad in (
        {"soft_match_weight": -1.0},
        {"speaker_weight": float("nan")},
        {"soft_match_full": 0.0},
        {"soft_match_full": 1.5},
        {"rerank_depth": -1},
        {"time_weight": -0.1},
    ):
        with pytest.raises(InvalidMemoryError):
            SearchConfig(**bad)


def test_query_periods() -> None:
    assert query_periods("When did Melanie go camping in June?") == ((None, 6),)
    assert query_periods("What did she paint on October 13, 2023?") == ((2023, 10),)
    assert query_periods("What did Gina find on 1 February, 2023?") == ((2023, 2),)
    assert query_periods("How often did we meet in 2023?") == ((2023, None),)
    assert query_periods("What happened in May?") == ((None, 5),)
    assert query_periods("May I ask what you did?") == ()
    assert query_periods("what did we march for") == ()
    assert query_periods("in March 2022 and in 2024") == ((2022, 3), (2024, None))


def test_time_match_prefers_memories_of_the_named_month(hash_store: Callable[[], Any]) -> None:
    june = 1_686_000_000.0  # 2023-06-05
    july = 1_689_000_000.0  # 2023-07-10
    with hash_store() as store:
        store.add_many(
            NS,
            [
                NewMemory(content="went camping by the lake", id="jul", created_at=july),
                NewMemory(content="went camping by the lake", id="jun", created_at=june),
            ],
            dedup=False,
        )
        hits = store.search("When did we go camping in June?", NS, touch=False)
        assert [h.memory.id for h in hits] == ["jun", "jul"]
        assert [h.time_match for h in hits] == [1.0, 0.0]
        hits = store.search("When did we go camping in July 2023?", NS, touch=False)
        assert [h.memory.id for h in hits] == ["jul", "jun"]
        # a year both are in does not split them: the signal is left out
        on = store.search("camping in 2023", NS, touch=False)
        off = store.search("camping in 2023", NS, config=OFF, touch=False)
        assert [(h.memory.id, h.score) for h in on] == [(h.memory.id, h.score) for h in off]
        assert all(h.time_match == 0 for h in on)
        cfg = SearchConfig(time_weight=0.0)
        assert all(h.time_match == 0 for h in store.search("camping in June", NS, config=cfg))


def test_words_with_digits_match_only_exactly(wordllama: WordLlamaEmbedder) -> None:
    rerank = Reranker(wordllama).prepare("invoice 2023", SearchConfig())
    assert rerank is not None
    recs = [_record("invoice 2022"), _record("invoice for 2023")]
    soft, speaker, when = rerank.signals(recs, lambda term: 1, 10)
    assert soft is not None
    assert soft.tolist() == pytest.approx([0.5, 1.0])  # "2022" gives nothing to "2023"
    assert speaker is None and when is None  # "2023" is a period, but no memory is in it


def test_only_numbers_seen_so_far(wordllama: WordLlamaEmbedder) -> None:
    rerank = Reranker(wordllama).prepare("2023", SearchConfig())
    assert rerank is not None
    soft, _, _ = rerank.signals([_record("42 2023"), _record("7")], lambda term: 1, 10)
    assert soft is not None and soft.tolist() == [1.0, 0.0]


def test_forget_clears_the_caches(wl_store: Any) -> None:
    wl_store.add_many(Namespace(user_id="gone"), ["Zanzibar holiday with Rosalind"])
    wl_store.add_many(NS, FILMS)
    wl_store.search("Zanzibar trip", Namespace(user_id="gone"), touch=False)
    assert "zanzibar" in wl_store._reranker._info
    wl_store.forget(Namespace(user_id="gone"))
    assert "zanzibar" not in wl_store._reranker._info
    assert not wl_store._reranker._docs
    assert wl_store.search("movie night", NS, touch=False)


def test_words_with_digits_do_not_grow_the_cache_without_bound(
    wordllama: WordLlamaEmbedder,
) -> None:
    owner = Reranker(wordllama, max_words=16, max_docs=16)
    peak = 0
    for batch in range(40):  # ids, dates, order numbers: every one a new word
        recs = [_record(f"order {batch}x{i} shipped 2024{batch:02d}{i:03d}") for i in range(20)]
        rerank = owner.prepare("order shipped", SearchConfig())
        assert rerank is not None
        rerank.signals(recs, lambda term: 1, 100)
        peak = max(peak, len(owner._info))
    assert peak <= 8 * 16 + 2 * 20 + 2  # cleared at its bound, overshoot of one search


def test_speaker_follows_a_metadata_update(hash_store: Callable[[], Any]) -> None:
    with hash_store() as store:
        store.add_many(
            NS,
            [
                NewMemory(content="We went hiking at dawn", id="m", metadata={"speaker": "Nate"}),
                NewMemory(content="We went hiking in the rain", id="o"),
            ],
        )
        hits = {h.memory.id: h for h in store.search("Nate hiking", NS, touch=False)}
        assert hits["m"].speaker_match == 1.0
        store.update(NS, "m", metadata={"speaker": "Joanna"})
        hits = {h.memory.id: h for h in store.search("Nate hiking", NS, touch=False)}
        assert hits["m"].speaker_match == 0.0
        hits = {h.memory.id: h for h in store.search("Joanna hiking", NS, touch=False)}
        assert hits["m"].speaker_match == 1.0


def test_the_second_stage_also_runs_on_the_approximate_path(tmp_path: Path) -> None:
    with DuckDBStore(
        tmp_path / "a.duckdb",
        embedder=LowRankEmbedder(),
        touch_flush_interval=None,
        near_duplicate_threshold=None,
        approx_search_min_rows=32,
        clock=_now,
    ) as store:
        who = ["Nate", "Joanna"]
        store.add_many(NS, [f"{who[i % 2]}: walk number {i} by the river" for i in range(80)])
        assert store._index.approximate  # the projection is learned: the scope is approximate
        hits = store.search("Where did Nate walk by the river?", NS, limit=10, touch=False)
        assert hits and all(h.memory.content.startswith("Nate:") for h in hits)
        assert all(h.speaker_match == 1.0 for h in hits)


# -- huge queries: bounded work (issue 12, point 5) -----------------------------------------


def _distinct_words(nbytes: int) -> str:
    """Alphabetic words, all different ("aaa aab aac ..."), ``nbytes`` long in all."""
    import itertools
    import string

    out: list[str] = []
    size = 0
    for letters in itertools.product(string.ascii_lowercase, repeat=4):
        out.append("".join(letters))
        size += 5
        if size >= nbytes:
            break
    return " ".join(out)


def test_a_megabyte_query_weighs_a_bounded_number_of_terms(wordllama: WordLlamaEmbedder) -> None:
    # The soft match used to collect every distinct term of the query with a
    # membership test on a list: quadratic (1 MB took minutes).  Now one pass,
    # and at most MAX_QUERY_TERMS terms (the first ones) are weighed.
    query = _distinct_words(1_000_000)
    prepared = Reranker(wordllama).prepare(query, SearchConfig())
    assert prepared is not None
    assert prepared.term_count == MAX_QUERY_TERMS
    short = Reranker(wordllama).prepare("films with the kids", SearchConfig())
    assert short is not None and short.term_count == 2  # "with", "the": stopwords


def test_a_search_reads_a_bounded_part_of_a_megabyte_query(wl_store: DuckDBStore) -> None:
    wl_store.add_many(NS, [NewMemory(content=t) for t in FILMS])
    filler = _distinct_words(1_000_000)
    assert len(filler) > 60 * MAX_QUERY_CHARS
    clipped = clip_query(filler)
    assert len(clipped) <= MAX_QUERY_CHARS + 1  # what every step of the search reads
    assert clipped.startswith(filler[:100]) and clipped.endswith(filler[-100:])
    # A question after a pasted document, and one before it, are both still read.
    for query in (f"{filler} where did my sister move?", f"where did my sister move? {filler}"):
        hits = wl_store.search(query, NS, 3)
        assert hits and "Lisbon" in hits[0].memory.content


def test_each_hit_reports_its_own_second_stage_signals_when_tied() -> None:
    """Hits of equal final score are put in id order after the second stage; each
    must still report its own signals, not those of the hit the stage put there."""
    from actormem.store._ranking import rank_candidates
    from actormem.store._relevance import DEFAULT_WEIGHTS
    from actormem.store._rerank import Reranked

    ids = ["m2", "m0", "m1"]  # candidate i has id ids[i]

    class Tied:
        depth = 3

        def apply(self, order: Any, *args: Any) -> Reranked:
            # all three equal after the stage, candidate 0 ("m2") put first
            return Reranked(
                order=np.array([0, 1, 2]),
                fused=np.full(3, 0.5),
                final=np.full(3, 0.5),
                soft=np.array([0.9, 0.1, 0.4]),
                speaker=np.array([1.0, 0.0, 0.0]),
                time=np.array([0.0, 0.0, 1.0]),
            )

    scored = rank_candidates(
        rows=np.array([20, 21, 22], dtype=np.int64),
        cosine=np.array([0.3, 0.2, 0.1]),
        bm25=np.array([1.0, 2.0, 3.0]),
        vec_rank=np.array([1.0, 2.0, 3.0]),
        kw_rank=np.array([3.0, 2.0, 1.0]),
        importance=np.full(3, 0.5),
        access=np.zeros(3),
        last=np.full(3, _now()),
        created=np.full(3, _now()),
        limit=3,
        config=SearchConfig(),
        use_vec=True,
        use_kw=True,
        now=_now(),
        weights=DEFAULT_WEIGHTS,
        rerank=Tied(),  # type: ignore[arg-type]
        records=lambda top: [],
        ids=lambda pos: [ids[int(i)] for i in pos],
        doc_freq=lambda term: 1,
        n_docs=3,
    )
    assert [s.row for s in scored] == [21, 22, 20]  # m0, m1, m2
    by_row = {s.row: (s.soft_match, s.speaker_match, s.time_match, s.bm25) for s in scored}
    assert by_row == {20: (0.9, 1.0, 0.0, 1.0), 21: (0.1, 0.0, 0.0, 2.0), 22: (0.4, 0.0, 1.0, 3.0)}

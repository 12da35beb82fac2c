"""Long runs of letters and digits: one capped term, stored on both backends alike.

A hex blob or a signed URL's token used to become one term of thousands of
characters: PostgreSQL refused the whole batch holding it (its posting
groups' btree keys are at most 2,704 bytes) while DuckDB stored it (pgprobe
finding 2).  Terms are now cut to ``MAX_TERM_CHARS``; a PostgreSQL database
written before the cap has its stored terms recomputed once on open.
"""

from __future__ import annotations

import secrets
from typing import Any

import psycopg
import pytest

from actormem.models.embedders import HashEmbedder
from actormem.store import DuckDBStore, Namespace, NewMemory
from actormem.store import _tokenize as tokenize_mod
from actormem.store._tokenize import MAX_TERM_CHARS, tokenize

NS = Namespace(user_id="u", agent_id="a")


def test_a_long_run_is_one_term_cut_to_the_cap() -> None:
    run = "f" + secrets.token_hex(3000)
    terms = tokenize(f"payload {run} end")
    assert terms == ["payload", run[:MAX_TERM_CHARS], "end"]
    assert tokenize(run.upper()) == [run[:MAX_TERM_CHARS]]  # casefolded, then cut
    assert tokenize("é" * 500) == ["é" * MAX_TERM_CHARS]


@pytest.mark.parametrize("kind", ["fact", "episode"])
def test_a_long_run_is_stored_with_its_batch_and_found(make_store: Any, kind: str) -> None:
    store = make_store()
    run = "a" + secrets.token_hex(2000)
    results = store.add_many(
        NS,
        [
            NewMemory(content=f"payload {run}", kind=kind),
            NewMemory(content="the innocent neighbour", kind=kind),
        ],
    )
    assert [r.op for r in results] == ["ADD", "ADD"]
    store.add(NS, f"url https://example.com/x?sig={run}X&t=1", kind=kind)
    hits = store.search(run, NS, 5, mode="keyword", touch=False)
    assert {h.memory.content[:7] for h in hits} == {"payload", "url htt"}
    assert all(h.bm25 > 0 for h in hits)
    assert [h.memory.content for h in store.search("innocent", NS, 1, touch=False)] == [
        "the innocent neighbour"
    ]


def test_terms_stored_before_the_cap_are_recomputed_on_open(
    pg_dsn: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from actormem.store._postgres import PostgresStore

    run = "b" + "9c" * 150  # 301 characters: a term PostgreSQL stored before the cap
    texts = [f"the token {run} was issued", "token two", f"another {run[:200]} here"]
    kw: dict[str, Any] = {
        "embedder": HashEmbedder(32),
        "touch_flush_interval": None,
        "near_duplicate_threshold": None,
        "clock": lambda: 1_700_000_000.0,
    }
    with monkeypatch.context() as m:  # the tokenizer as it was: no cap
        m.setattr(tokenize_mod, "MAX_TERM_CHARS", 100_000)
        m.setattr(tokenize_mod, "_TERMS", tokenize_mod._TermCache())
        with PostgresStore(pg_dsn, **kw) as old:
            for t in texts:
                old.add(NS, t)
            old.delete(NS, old.add(NS, f"gone {run}").id)
        with psycopg.connect(pg_dsn) as conn:
            n = conn.execute("SELECT count(*) FROM posting_groups WHERE length(term) > 64")
            assert n.fetchone()[0] == 2  # type: ignore[index]
    with PostgresStore(pg_dsn, **kw) as store, DuckDBStore(tmp_path / "d.duckdb", **kw) as duck:
        for t in texts:
            duck.add(NS, t)
        for q in (run, "token", f"another {run[:200]}"):
            got = [
                (h.memory.content, round(h.bm25, 6)) for h in store.search(q, NS, 5, touch=False)
            ]
            want = [
                (h.memory.content, round(h.bm25, 6)) for h in duck.search(q, NS, 5, touch=False)
            ]
            assert got == want, q
        assert store.search(run, NS, 1, touch=False)[0].bm25 > 0
    with psycopg.connect(pg_dsn) as conn:
        for table in ("posting_groups", "term_stats"):
            n = conn.execute(f"SELECT count(*) FROM {table} WHERE length(term) > 64")
            assert n.fetchone()[0] == 0, table  # type: ignore[index]
        stored = conn.execute("SELECT value FROM store_meta WHERE key = 'term_cap'").fetchone()
        assert stored == (str(MAX_TERM_CHARS),)

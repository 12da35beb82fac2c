"""Exact ties are ordered by memory id on every backend (pgprobe finding 6).

The README's tie rule is (score, then id).  Each backend finds its candidates
in its own order -- DuckDB's rows, PostgreSQL's heap (moved by updates), the
search cache's copy -- and a stable sort kept that order for equal scores,
so DuckDB, the PostgreSQL SQL path and its cache returned different memories
at the limit.  30 rows with equal scores, written out of id order and some
updated, must come back in id order on all three.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from actormem.store import Namespace, NewMemory, SearchConfig

T0 = 1_700_000_000.0
NS = Namespace(user_id="tie")
IDS = [f"m{i:02d}" for i in range(30)]


def _fill(store: Any, content: str) -> None:
    order = IDS[:]
    random.Random(5).shuffle(order)
    store.add_many(
        NS, [NewMemory(id=i, content=content, created_at=T0 - 100) for i in order], dedup=False
    )
    for i in ("m03", "m17", "m11", "m29"):  # move rows in the table's heap
        store.update(NS, i, importance=0.5)


@pytest.mark.parametrize("content", ["alpha beta", "alpha gamma delta"])
def test_equal_scores_come_back_in_id_order(make_store: Any, clock: Any, content: str) -> None:
    clock.now = T0
    stores = [make_store("mem")]
    if type(stores[0]).__name__ == "PostgresStore":
        stores.append(make_store("mem", search_cache_bytes=None))  # the SQL path
    _fill(stores[0], content)
    if hasattr(stores[0], "warm_cache"):
        stores[0].warm_cache(NS)
    for method in ("weighted", "rrf"):
        config = SearchConfig(method=method)
        for mode in ("keyword", "vector", "hybrid"):
            for limit in (1, 5, 12, 30):
                for store in stores:
                    hits = store.search(
                        "alpha", NS, limit=limit, mode=mode, config=config, touch=False
                    )
                    assert [h.memory.id for h in hits] == IDS[:limit], (method, mode, limit)
                    assert len({h.score for h in hits}) == 1
    if len(stores) == 2:
        assert stores[0]._cache.hits > 0  # the cached path answered

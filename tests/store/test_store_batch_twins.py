"""Near duplicates inside one ``add_many`` batch: the rule, checked against a plain reference.

``add_many`` compared every pair of a batch in Python (10,000 items in one
namespace took minutes); it now reads the cosines a block of rows at a time
and looks only at those above the threshold.  The rule it must keep: an item
of a kind that merges (fact, preference, procedure) merges into the closest
*earlier* item of the batch that was kept (not itself merged), is of the same
kind, has the same key terms (names and numbers) and a cosine at or above
``near_duplicate_threshold`` -- the first such item on a tie; otherwise it is
kept.  The embedder below gives each text a chosen vector, so the cosines
(clusters, exact ties, NaN-free) are known and a plain pairwise loop in this
file says what each item must become.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from actormem.store import Namespace, NewMemory
from actormem.store._planning import key_terms
from tests.store.conftest import StoreFactory

_DIM = 32
_THRESHOLD = 0.9


class _ChosenVectors:
    """Each text's vector is the one registered for it (unit rows)."""

    name = "chosen-32"
    dim = _DIM

    def __init__(self) -> None:
        self.vectors: dict[str, np.ndarray[Any, Any]] = {}

    def embed(self, texts: Sequence[str]) -> Any:
        return np.stack([self.vectors[t] for t in texts]).astype(np.float32)


def _word(i: int) -> str:
    letters = "abcdefghijklmnopqrstuvwxyz"
    out = ""
    i += 26 * 26
    while i:
        i, r = divmod(i, 26)
        out += letters[r]
    return out


def _batch(seed: int, n: int, emb: _ChosenVectors) -> list[NewMemory]:
    rnd = random.Random(seed)
    gen = np.random.default_rng(seed)
    centres = [gen.standard_normal(_DIM) for _ in range(max(2, n // 8))]
    items: list[NewMemory] = []
    for i in range(n):
        centre = centres[rnd.randrange(len(centres))]
        noise = rnd.choice([0.0, 0.0, 0.05, 0.2, 0.6, 3.0])  # exact ties, near, far
        vec = centre + noise * gen.standard_normal(_DIM)
        vec = vec / np.linalg.norm(vec)
        name = rnd.choice(["", "", " Paris", " Rome"])  # a key term keeps two apart
        text = f"note {_word(i)}{name}"
        emb.vectors[text] = vec
        kind = rnd.choice(["fact", "fact", "preference", "episode"])
        items.append(NewMemory(content=text, kind=kind))
    return items


def _expected(items: list[NewMemory], emb: _ChosenVectors) -> list[int]:
    """Per item, the batch position it merges into, or its own when it is kept."""
    vecs = [emb.vectors[m.content].astype(np.float32) for m in items]
    mergeable = {"fact", "preference", "procedure"}
    kept: list[int] = []
    into: list[int] = []
    for j, item in enumerate(items):
        best, best_sim = j, -2.0
        if item.kind in mergeable:
            for k in kept:  # ascending: the first on a tie
                sim = float(np.dot(vecs[j], vecs[k]))
                if (
                    items[k].kind == item.kind
                    and sim >= _THRESHOLD
                    and key_terms(items[k].content) == key_terms(item.content)
                    and sim > best_sim
                ):
                    best, best_sim = k, sim
        if best == j:
            kept.append(j)
        into.append(best)
    return into


@pytest.mark.parametrize("seed", [1, 2])
def test_batch_twins_follow_the_rule(make_store: StoreFactory, seed: int) -> None:
    emb = _ChosenVectors()
    items = _batch(seed, 400, emb)
    into = _expected(items, emb)
    assert 40 < sum(1 for j, k in enumerate(into) if k != j) < 360  # both outcomes occur
    store = make_store(embedder=emb, near_duplicate_threshold=_THRESHOLD)
    ns = Namespace(user_id="twins")
    results = store.add_many(ns, items)
    for j, (res, k) in enumerate(zip(results, into, strict=True)):
        if k == j:
            assert res.op == "ADD", (j, res)
        else:
            assert res.op == "MERGE" and res.id == results[k].id, (j, k, res)
    assert store.count(ns) == sum(1 for j, k in enumerate(into) if k == j)

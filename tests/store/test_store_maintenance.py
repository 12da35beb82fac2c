"""The store suite, maintenance: decay, forgetting, caps, merges, and what
maintenance may never touch (runs once per backend)."""

from __future__ import annotations

from typing import Any

import pytest

from actormem.recorder import facts_namespace
from actormem.store import (
    InvalidMemoryError,
    Namespace,
    NewMemory,
    relevance,
)
from tests.store.conftest import FakeClock, StoreFactory

# -- maintenance -----------------------------------------------------------------------


def test_decay_arithmetic_and_pruning(store: Any, ns: Namespace, clock: FakeClock) -> None:
    t0 = clock.now
    keep = store.add(ns, "important rule", importance=1.0)
    drop = store.add(ns, "passing remark", importance=0.0)
    clock.advance(days=10)
    rel_keep = float(relevance(1.0, 0, t0, t0, clock.now))
    expected_keep = rel_keep * 0.95**10
    assert rel_keep == pytest.approx(0.3 / 11 + 0.4 + 0.1 * 0.95**10)
    rel_drop = float(relevance(0.0, 0, t0, t0, clock.now))
    assert rel_drop == pytest.approx(0.3 / 11 + 0.1 * 0.95**10)
    assert rel_drop * 0.95**10 < 0.10 < expected_keep
    report = store.decay(ns, rate=0.95, threshold=0.10)
    assert report.action == "decay"
    assert report.examined == 2
    assert report.removed == (drop.id,)
    assert report.details["min_decayed"] == pytest.approx(rel_drop * 0.95**10)
    assert store.get(ns, keep.id) is not None
    assert store.get(ns, drop.id) is None
    assert "decay" in store.history(ns, drop.id)[-1].reason


def test_auto_forget_and_prune_stale(store: Any, ns: Namespace, clock: FakeClock) -> None:
    low = store.add(ns, "low value", importance=0.0)
    high = store.add(ns, "high value", importance=1.0)
    clock.advance(days=10)
    fresh = store.add(ns, "fresh value", importance=0.0)
    rep = store.auto_forget(ns, threshold=0.15)
    assert rep.removed == (low.id,)
    rep = store.prune_stale(ns, max_age_days=5)
    assert rep.removed == (high.id,)
    assert [r.id for r in store.list(ns)] == [fresh.id]


def test_consolidate_merges_similar(make_store: StoreFactory, ns: Namespace) -> None:
    store = make_store(near_duplicate_threshold=None)
    a = store.add(ns, "the cat sat on the red mat", importance=0.9, tags=("x",))
    b = store.add(ns, "the cat sat on the red mat today", importance=0.2, tags=("y",))
    c = store.add(ns, "quantum chromodynamics lecture notes")
    store.search("cat today", ns, mode="keyword")  # b: one access
    rep = store.consolidate(ns, threshold=0.8)
    assert rep.merged == ((a.id, b.id),)
    survivor = store.get(ns, a.id)
    assert set(survivor.tags) == {"x", "y"}
    assert survivor.access_count >= 1
    assert store.get(ns, b.id, include_deleted=True).superseded_by == a.id
    assert {r.id for r in store.list(ns)} == {a.id, c.id}


def test_prune_duplicates_uses_jaccard(make_store: StoreFactory, ns: Namespace) -> None:
    store = make_store(near_duplicate_threshold=None)
    store.add(ns, "user likes dark mode in the editor")
    store.add(ns, "user likes dark mode in the editor!")
    store.add(ns, "user dislikes light themes entirely")
    rep = store.prune_duplicates(ns, threshold=0.7)
    assert len(rep.merged) == 1
    assert store.count(ns) == 2


def test_enforce_cap_evicts_least_relevant(make_store: StoreFactory, ns: Namespace) -> None:
    store = make_store(max_memories=3)
    res = store.add_many(
        ns,
        [NewMemory(content=f"memory {w}", importance=i / 10) for i, w in enumerate("abcde")],
    )
    assert store.count(ns) == 3
    kept = {r.content for r in store.list(ns)}
    assert kept == {"memory c", "memory d", "memory e"}
    assert len(res) == 5
    rep = store.enforce_cap(ns, 1)
    assert len(rep.removed) == 2
    assert [r.content for r in store.list(ns)] == ["memory e"]


# -- what maintenance may touch: keyed facts never, events never merge ----------------------

_LEVELS = (
    Namespace(user_id="ada"),
    Namespace(user_id="ada", agent_id="bot"),
    Namespace(user_id="ada", agent_id="bot", run_id="r1"),
    Namespace(user_id="ada", agent_id="bot", run_id="r1", session_id="s1"),
)


def _maintain_everything(store: Any, scope: Namespace) -> list[Any]:
    return [
        store.decay(scope, rate=0.5, threshold=0.99),
        store.auto_forget(scope, threshold=0.99),
        store.prune_stale(scope, max_age_days=0),
        store.prune_duplicates(scope, threshold=0.1),
        store.consolidate(scope, threshold=0.01),
        store.enforce_cap(scope, 0),
    ]


@pytest.mark.parametrize("level", range(len(_LEVELS)))
def test_maintenance_never_touches_keyed_facts_at_any_level(
    make_store: StoreFactory, clock: FakeClock, level: int
) -> None:
    """Regression: an agent-level on_idle pruned and merged a run's keyed facts."""
    store = make_store(max_memories=2)
    owner = _LEVELS[level]
    fns = facts_namespace(owner)
    facts = [
        store.add_many(
            fns,
            [
                NewMemory(
                    content=f"phone: 555-000{i}",
                    kind="keyed_fact",
                    importance=0.0,
                    metadata={"key": f"phone{i}", "value": f"555-000{i}"},
                )
            ],
            dedup=False,
        )[0].id
        for i in range(6)
    ]
    plain = store.add_many(fns, [NewMemory(content=f"note {w}", importance=0.0) for w in "abc"])
    clock.advance(days=400)
    before = {mid: store.get(fns, mid) for mid in facts}
    # every scope that contains the facts' namespace, from the user down to it
    scopes = [s for s in (*_LEVELS, fns) if s.contains(fns)]
    assert len(scopes) == level + 1
    for scope in scopes:
        for report in _maintain_everything(store, scope):
            assert not set(report.removed) & set(facts), report
            assert not {m for pair in report.merged for m in pair} & set(facts), report
    for mid in facts:
        assert store.get(fns, mid) == before[mid]  # alive and unchanged, field by field
    assert [h.op for h in store.history(fns, facts[0])] == ["ADD"]
    # the other memories of that namespace were maintained (the test can fail)
    assert all(store.get(fns, r.id) is None for r in plain)


def test_keyed_facts_change_only_through_their_own_namespace(store: Any) -> None:
    fns = Namespace(user_id="ada", agent_id="bot", run_id="r1#facts")
    mid = store.add(fns, "plan: gold", kind="keyed_fact", metadata={"key": "plan"}).id
    wide = Namespace(user_id="ada", agent_id="bot")
    with pytest.raises(InvalidMemoryError, match="keyed fact"):
        store.update(wide, mid, content="plan: silver")
    with pytest.raises(InvalidMemoryError, match="keyed fact"):
        store.delete(wide, mid)
    assert store.get(fns, mid).content == "plan: gold"
    assert store.update(fns, mid, content="plan: silver").op == "UPDATE"
    assert store.delete(fns, mid).op == "DELETE"


@pytest.mark.parametrize("kind", ["episode", "summary", "offload", "keyed_fact", "my_event"])
def test_events_never_merge_at_write_time_or_in_maintenance(
    make_store: StoreFactory, ns: Namespace, kind: str
) -> None:
    """Regression: near-duplicate merging left 22% of distinct recorded turns without an episode."""
    store = make_store(near_duplicate_threshold=0.5)
    turns = [f"user: I walked the dog at {h} o'clock. assistant: nice walk" for h in range(40)]
    turns += ["user: ok. assistant: ok"] * 5  # exactly equal turns are still five turns
    first = store.add_many(ns, [NewMemory(content=t, kind=kind) for t in turns[:20]])
    rest = store.add_many(ns, [NewMemory(content=t, kind=kind) for t in turns[20:]])
    one = [store.add(ns, turns[0], kind=kind), store.add(ns, turns[-1], kind=kind)]
    results = first + rest + one
    assert [r.op for r in results] == ["ADD"] * len(results)
    assert len({r.id for r in results}) == len(turns) + 2
    for scope in (ns, Namespace(user_id=ns.user_id)):
        assert store.consolidate(scope, threshold=0.01).merged == ()
        assert store.prune_duplicates(scope, threshold=0.01).merged == ()
    assert store.count(ns) == len(turns) + 2


def test_only_facts_of_one_kind_merge(make_store: StoreFactory, ns: Namespace) -> None:
    store = make_store(near_duplicate_threshold=0.8)
    fact = store.add(ns, "the cat sat on the red mat")
    assert store.add(ns, "the cat sat on the red mat", kind="episode").op == "ADD"
    assert store.add(ns, "the cat sat on the red mat", kind="preference").op == "ADD"
    assert store.add(ns, "the cat sat on the red mat").id == fact.id  # same kind: merged
    assert store.add(ns, "the cat sat on the red mat today").id == fact.id
    assert store.consolidate(ns, threshold=0.5).merged == ()
    assert store.count(ns) == 3

"""The same event written twice is stored once, on every backend.

A recorded turn carries the ids of its messages (``source_ids``).  A retry, a
resumed agent or a second ``record()`` of the same messages must not leave two
episodes of one turn; two distinct turns that read alike must stay two.
"""

from __future__ import annotations

import pytest

from actormem.store import Namespace, NewMemory
from tests.store.conftest import StoreFactory

TURN = "user: shall we walk the dog at six? assistant: yes, at six"


def _episode(text: str = TURN, sources: tuple[str, ...] = ("m1", "m2"), **kw: object) -> NewMemory:
    return NewMemory(content=text, kind="episode", source_ids=sources, **kw)  # type: ignore[arg-type]


def test_the_same_turn_recorded_again_is_a_noop(make_store: StoreFactory, ns: Namespace) -> None:
    store = make_store()
    first = store.add_many(ns, [_episode()])[0]
    history = len(store.history(ns, first.id))
    again = store.add_many(ns, [_episode()])[0]
    one = store.add(ns, TURN, kind="episode", source_ids=("m1", "m2"))
    assert first.op == "ADD"
    assert (again.op, again.id) == ("NOOP", first.id)
    assert (one.op, one.id) == ("NOOP", first.id)
    assert store.count(ns) == 1
    assert len(store.history(ns, first.id)) == history  # nothing was written


def test_the_same_event_twice_in_one_batch_is_one_row(
    make_store: StoreFactory, ns: Namespace
) -> None:
    store = make_store()
    res = store.add_many(ns, [_episode(), _episode(sources=("m3",)), _episode()])
    assert [r.op for r in res] == ["ADD", "ADD", "NOOP"]
    assert res[2].id == res[0].id
    assert store.count(ns) == 2


@pytest.mark.parametrize(
    "other",
    [
        _episode(sources=("m1", "m9")),  # another turn that reads alike
        _episode(sources=("m2", "m1")),  # the order of the messages is part of the event
        _episode(sources=()),  # nothing says which turn it is
        _episode(text=TURN + "!"),  # other content
        NewMemory(content=TURN, kind="summary", source_ids=("m1", "m2")),  # another kind
    ],
)
def test_a_different_event_is_kept(
    make_store: StoreFactory, ns: Namespace, other: NewMemory
) -> None:
    store = make_store()
    first = store.add_many(ns, [_episode()])[0]
    second = store.add_many(ns, [other])[0]
    assert second.op == "ADD" and second.id != first.id
    assert store.count(ns) == 2


def test_events_without_sources_and_dedup_off_stay_apart(
    make_store: StoreFactory, ns: Namespace
) -> None:
    store = make_store()
    bare = [NewMemory(content=TURN, kind="episode")] * 2
    assert [r.op for r in store.add_many(ns, bare)] == ["ADD", "ADD"]
    assert [r.op for r in store.add_many(ns, [_episode(), _episode()], dedup=False)] == [
        "ADD",
        "ADD",
    ]
    assert store.count(ns) == 4


def test_another_namespace_is_another_event(make_store: StoreFactory, ns: Namespace) -> None:
    store = make_store()
    other = Namespace(user_id=ns.user_id, agent_id="someone-else")
    a = store.add_many(ns, [_episode()])[0]
    b = store.add_many(other, [_episode()])[0]
    assert b.op == "ADD" and b.id != a.id
    assert store.count(ns) == 1 and store.count(other) == 1


def test_an_older_event_behind_a_look_alike_is_found(
    make_store: StoreFactory, ns: Namespace
) -> None:
    """Turn A, then turn B with the same text: recording A again finds A, not B."""
    store = make_store()
    a = store.add_many(ns, [_episode(sources=("a",))])[0]
    b = store.add_many(ns, [_episode(sources=("b",))])[0]
    again = store.add_many(ns, [_episode(sources=("a",)), _episode(sources=("b",))])
    assert [(r.op, r.id) for r in again] == [("NOOP", a.id), ("NOOP", b.id)]
    assert store.count(ns) == 2


def test_a_deleted_event_recorded_again_is_added(make_store: StoreFactory, ns: Namespace) -> None:
    store = make_store()
    first = store.add_many(ns, [_episode()])[0]
    store.delete(ns, first.id)
    again = store.add_many(ns, [_episode()])[0]
    assert again.op == "ADD" and again.id != first.id
    assert store.count(ns) == 1


def test_recognised_after_reopening(make_store: StoreFactory, ns: Namespace) -> None:
    store = make_store(name="events")
    first = store.add_many(ns, [_episode(sources=("a",)), _episode(sources=("b",))])
    store.close()
    reopened = make_store(name="events")
    again = reopened.add_many(ns, [_episode(sources=("b",)), _episode(sources=("a",))])
    assert [r.id for r in again] == [first[1].id, first[0].id]
    assert {r.op for r in again} == {"NOOP"}
    assert reopened.count(ns) == 2

"""The write fence of a PostgreSQL store (``actormem.store._pg_fence``), store by store.

Two ``PostgresStore`` objects on one database play an agent's old and new
incarnation; a raw connection plays a take-over caught in the middle.  The
fence must order every write against the take-over: committed before it
(and then seen by the new holder) or refused, never after.  A store never
told a fence must not touch the fence at all.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from actormem.models.embedders import HashEmbedder
from actormem.store import (
    InvalidMemoryError,
    Namespace,
    StoreFencedError,
)
from actormem.store import _pg_schema as schema
from actormem.store._postgres import PostgresStore

psycopg = pytest.importorskip("psycopg")

NS = Namespace(user_id="alice", agent_id="helper")
HOLDER = '[["alice", "helper", "", ""], "s1"]'


class _Hooked(PostgresStore):
    """Runs ``hook(conn)`` inside each write transaction just before it commits."""

    hook: Any = None

    def _before_commit(self, conn: Any) -> None:
        if self.hook is not None:
            self.hook(conn)


def _open(dsn: str, **kwargs: Any) -> _Hooked:
    kwargs.setdefault("embedder", HashEmbedder(32))
    kwargs.setdefault("touch_flush_interval", None)
    kwargs.setdefault("near_duplicate_threshold", None)
    return _Hooked(dsn, **kwargs)


@pytest.fixture
def stores(pg_dsn: str) -> Iterator[list[_Hooked]]:
    made: list[_Hooked] = []
    yield made
    for s in made:
        s.close()


def _pair(dsn: str, stores: list[_Hooked]) -> tuple[_Hooked, _Hooked]:
    """The old holder (fenced at epoch 1) and the store its successor will use."""
    old, new = _open(dsn), _open(dsn)
    stores += [old, new]
    old.fence(HOLDER, 1)
    return old, new


def _someone_waits_on_a_lock(dsn: str) -> bool:
    with psycopg.connect(dsn, autocommit=True) as admin:
        row = admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND datname = current_database()"
        ).fetchone()
    return bool(row and row[0])


def _until_someone_waits(dsn: str, done: threading.Event | None = None) -> None:
    for _ in range(6000):
        if _someone_waits_on_a_lock(dsn) or (done is not None and done.wait(0.01)):
            return
    raise AssertionError("nobody ever waited on the fence row")


def _contents(store: PostgresStore) -> set[str]:
    return {m.content for m in store.list(NS, limit=10_000)}


def test_a_replaced_holders_writes_are_refused_and_nothing_of_them_is_stored(
    pg_dsn: str, stores: list[_Hooked]
) -> None:
    old, new = _pair(pg_dsn, stores)
    kept = old.add(NS, "written before the take-over")
    new.fence(HOLDER, 2)
    with pytest.raises(StoreFencedError) as err:
        old.add(NS, "written after the take-over")
    e = err.value
    assert (e.holder, e.epoch, e.newer) == (HOLDER, 1, 2)
    assert HOLDER in str(e) and "epoch 2" in str(e) and "epoch 1" in str(e)
    assert old.fenced_out == 2
    # every kind of write is refused; the new holder's are not
    with pytest.raises(StoreFencedError):
        old.update(NS, kept.id, content="changed by the old holder")
    with pytest.raises(StoreFencedError):
        old.delete(NS, kept.id)
    with pytest.raises(StoreFencedError):
        old.log_append(NS, "SYSTEM", "a journal line of the old holder")
    with pytest.raises(StoreFencedError):
        old.forget(NS)
    new.add(NS, "written by the new holder")
    assert _contents(new) == {"written before the take-over", "written by the new holder"}
    assert new.log_entries(NS) == []
    assert new.fenced_out is None


def test_a_replaced_holders_access_counts_are_dropped_without_an_error(
    pg_dsn: str, stores: list[_Hooked]
) -> None:
    old, new = _pair(pg_dsn, stores)
    res = old.add(NS, "tea with lemon")
    new.fence(HOLDER, 2)
    assert old.search("tea", NS, limit=1)  # a read: counted in the pending buffer
    old.flush()  # refused by the fence: dropped, neither raised nor kept
    assert old._pending == {}
    assert old.fenced_out == 2
    rec = new.get(NS, res.id)
    assert rec is not None and rec.access_count == 0


def test_a_take_over_waits_for_a_write_in_flight_which_the_new_holder_then_sees(
    pg_dsn: str, stores: list[_Hooked]
) -> None:
    old, new = _pair(pg_dsn, stores)
    took_over = threading.Event()

    def hold(conn: Any) -> None:  # the write has read its epoch; the take-over starts now
        old.hook = None
        taker.start()
        _until_someone_waits(pg_dsn, took_over)
        assert not took_over.is_set()  # the take-over waits for this write to commit

    def take_over() -> None:
        new.fence(HOLDER, 2)
        took_over.set()

    taker = threading.Thread(target=take_over)
    old.hook = hold
    res = old.add(NS, "in flight during the take-over")
    taker.join(60)
    assert took_over.is_set()
    assert new.get(NS, res.id) is not None  # committed before the take-over
    with pytest.raises(StoreFencedError):
        old.add(NS, "after it")


def test_a_write_that_meets_a_take_over_in_flight_waits_and_is_refused(
    pg_dsn: str, stores: list[_Hooked]
) -> None:
    old, new = _pair(pg_dsn, stores)
    outcome: list[BaseException | str] = []

    def write() -> None:
        try:
            outcome.append(old.add(NS, "met the take-over").id)
        except BaseException as exc:
            outcome.append(exc)

    with psycopg.connect(pg_dsn) as taker:  # a take-over, not yet committed
        taker.execute("UPDATE agent_fences SET epoch = 2 WHERE holder = %s", (HOLDER,))
        writer = threading.Thread(target=write)
        writer.start()
        _until_someone_waits(pg_dsn)
        taker.commit()
    writer.join(60)
    assert len(outcome) == 1 and isinstance(outcome[0], StoreFencedError), outcome
    assert outcome[0].newer == 2
    assert _contents(new) == set()


def test_writes_racing_a_take_over_are_each_stored_or_refused_never_after(
    pg_dsn: str, stores: list[_Hooked]
) -> None:
    old, new = _pair(pg_dsn, stores)
    returned: list[str] = []
    refused: list[str] = []
    some_written = threading.Event()
    lock = threading.Lock()

    def writer(w: int) -> None:
        for i in range(2000):  # 6000 rows at most: list()'s limit below holds them
            text = f"writer {w} note {i}"
            try:
                old.add(NS, text)
            except StoreFencedError:
                with lock:
                    refused.append(text)
                return
            with lock:
                returned.append(text)
                if len(returned) >= 20:
                    some_written.set()

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(3)]
    for t in threads:
        t.start()
    assert some_written.wait(120)
    new.fence(HOLDER, 2)
    stored_at_take_over = _contents(new)
    for t in threads:
        t.join(120)
    assert len(refused) == 3  # every writer ended on a refusal
    # what returned was committed before the take-over: the new holder saw it then
    assert set(returned) == stored_at_take_over == _contents(new)
    assert not set(refused) & _contents(new)


def test_an_unfenced_store_never_touches_the_fence(pg_dsn: str, stores: list[_Hooked]) -> None:
    _old, plain = _pair(pg_dsn, stores)
    with psycopg.connect(pg_dsn) as taker:  # the fence row locked by a take-over in flight
        taker.execute("UPDATE agent_fences SET epoch = 2 WHERE holder = %s", (HOLDER,))
        # a fenced write would wait for it; the unfenced store writes at once
        res = plain.add(NS, "an unfenced write")
        plain.delete(NS, res.id)
        plain.add(NS, "another one")
        taker.commit()
    assert plain.fenced_out is None
    assert _contents(plain) == {"another one"}


def test_a_fence_older_than_the_stored_one_is_refused_and_changes_nothing(
    pg_dsn: str, stores: list[_Hooked]
) -> None:
    _old, new = _pair(pg_dsn, stores)
    new.fence(HOLDER, 3)
    late = _open(pg_dsn)
    stores.append(late)
    with pytest.raises(StoreFencedError) as err:
        late.fence(HOLDER, 2)
    assert err.value.newer == 3
    assert late.fence_epoch(HOLDER) == 3  # never lowered
    late.add(NS, "still unfenced")  # the refused store was left as it was
    assert late.fenced_out is None
    assert new.fence_epoch('["someone else"]') == 0


@pytest.mark.parametrize(
    ("holder", "epoch"),
    [("", 1), ("x" * 1001, 1), ("a\x00b", 1), ("h", 0), ("h", True), ("h", 2**63)],
)
def test_a_bad_fence_is_refused_by_name(
    pg_dsn: str, stores: list[_Hooked], holder: str, epoch: Any
) -> None:
    store = _open(pg_dsn)
    stores.append(store)
    with pytest.raises(InvalidMemoryError, match="epoch" if holder == "h" else "holder"):
        store.fence(holder, epoch)


def test_a_v11_store_migrates_to_the_fences(
    pg_dsn: str, stores: list[_Hooked], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(schema, "PG_SCHEMA_VERSION", 11)
    old = _open(pg_dsn)
    old.add(NS, "a memory of version 11")
    old.close()
    monkeypatch.undo()
    store = _open(pg_dsn)
    stores.append(store)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        assert conn.execute("SELECT max(version) FROM schema_version").fetchone() == (12,)
    store.fence(HOLDER, 1)
    store.add(NS, "a fenced memory")
    assert _contents(store) == {"a memory of version 11", "a fenced memory"}

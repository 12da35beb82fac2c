"""Runtimes sharing one PostgresSession object are checked each against what it loaded
(probe s10, finding 2).

The remembered version was per storage object: two runtimes given ONE
``PostgresSession`` both loaded "s", the first saved (acknowledged), the
second saved too -- the object remembered the first one's new version -- and
the first one's message was gone.  Each ``MemoryRuntime`` now keeps its own
record (``session_versions``) and its saves and loads use it, directly and
as a component of a ``ReActAgent`` or a ``SessionManager``; direct calls on
the storage keep the object's own record.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from actormem import MemoryRuntime, Msg, ReActAgent
from actormem.agent import AutosaveError
from actormem.models.scripted import ScriptedModel
from actormem.session import (
    PostgresSession,
    SessionConflictError,
    SessionError,
    SessionManager,
)


@pytest.fixture
def shared(pg_dsn: str) -> Iterator[PostgresSession]:
    with PostgresSession(pg_dsn) as s:
        yield s


def _texts(storage: PostgresSession, sid: str) -> list[str]:
    stored = storage.read(sid)["runtime"]["short_term"]["messages"]
    return [b["text"] for m in stored for b in m["content"]]


def test_two_runtimes_sharing_one_storage_cannot_both_save_over_one_version(
    shared: PostgresSession, tmp_path: Path
) -> None:
    with MemoryRuntime(session_dir=tmp_path, sessions=shared) as r0:
        r0.add(Msg.user("m0"))
        r0.save_session("s")
    with (
        MemoryRuntime(session_dir=tmp_path, sessions=shared) as r1,
        MemoryRuntime(session_dir=tmp_path, sessions=shared) as r2,
    ):
        assert r1.load_session("s") and r2.load_session("s")
        r1.add(Msg.user("from r1 (acknowledged)"))
        r1.save_session("s")
        r2.add(Msg.user("from r2"))
        with pytest.raises(SessionConflictError, match="saved by another writer") as err:
            r2.save_session("s")
        assert (err.value.expected_version, err.value.stored_version) == (1, 2)
        assert _texts(shared, "s") == ["m0", "from r1 (acknowledged)"]
        # r2 goes on by loading again; then r1 is the stale one
        assert r2.load_session("s")
        r2.add(Msg.user("from r2, after loading"))
        r2.save_session("s")
        with pytest.raises(SessionConflictError):
            r1.save_session("s")
        assert _texts(shared, "s")[-1] == "from r2, after loading"
        assert r2.session_versions.version(shared.location("s")) == 3
        assert r1.session_versions.version(shared.location("s")) == 2


def test_a_runtime_that_never_loaded_a_session_cannot_save_over_it(
    shared: PostgresSession, tmp_path: Path
) -> None:
    """Even when another runtime on the same object loaded it."""
    with (
        MemoryRuntime(session_dir=tmp_path, sessions=shared) as r1,
        MemoryRuntime(session_dir=tmp_path, sessions=shared) as r2,
    ):
        r1.add(Msg.user("r1's"))
        r1.save_session("s")
        r2.add(Msg.user("r2's"))
        with pytest.raises(SessionConflictError, match="has not loaded it"):
            r2.save_session("s")
        assert _texts(shared, "s") == ["r1's"]


def test_agents_on_runtimes_sharing_one_storage_cannot_overwrite_each_other(
    shared: PostgresSession, tmp_path: Path
) -> None:
    with (
        MemoryRuntime(session_dir=tmp_path, sessions=shared) as m1,
        MemoryRuntime(session_dir=tmp_path, sessions=shared) as m2,
    ):
        a1 = ReActAgent("bot", ScriptedModel.echo("one: "), m1, session_id="trip")
        a1.reply("first question")
        a2 = ReActAgent("bot", ScriptedModel.echo("two: "), m2, session_id="trip")
        assert a1.load_session() and a2.load_session()
        a1.reply("from a1")  # saved after the turn: acknowledged
        with pytest.raises(AutosaveError, match="saved by another writer"):
            a2.reply("from a2")
        with pytest.raises(SessionConflictError):
            a2.save_session()
        assert _texts(shared, "trip")[-2:] == ["from a1", "one: from a1"]
        assert a2.load_session() and m2.messages()[-1].text == "one: from a1"
        a2.reply("from a2 again")
        with pytest.raises(SessionConflictError):
            a1.save_session()


def test_runtimes_sharing_one_storage_keep_their_own_sessions_without_conflicts(
    shared: PostgresSession, tmp_path: Path
) -> None:
    """Sharing a storage object across runtimes (different session ids) is normal use."""
    with (
        MemoryRuntime(session_dir=tmp_path, sessions=shared) as r1,
        MemoryRuntime(session_dir=tmp_path, sessions=shared) as r2,
    ):
        for i in range(3):
            r1.add(Msg.user(f"one {i}"))
            r2.add(Msg.user(f"two {i}"))
            r1.save_session("s1")
            r2.save_session("s2")
        assert {i.session_id: i.version for i in shared.list()} == {"s1": 3, "s2": 3}
        with MemoryRuntime(session_dir=tmp_path, sessions=shared) as again:
            assert again.load_session("s1") and again.size() == 3


def test_direct_calls_on_the_storage_keep_the_objects_own_record(
    shared: PostgresSession, pg_dsn: str, tmp_path: Path
) -> None:
    with MemoryRuntime(session_dir=tmp_path, sessions=shared) as rt:
        rt.add(Msg.user("hello"))
        rt.save_session("s")
        # the object's record follows every save made through it, the runtime's included
        assert shared.version("s") == 1
        assert shared.put("s", {"runtime": rt.state_dict()}).version == 2
        # and the runtime, which did not make that save, is now behind
        with pytest.raises(SessionConflictError):
            rt.save_session("s")
        # a SessionManager with the runtime as a component uses the runtime's record
        m = SessionManager("s").with_session(shared).add_component(rt, "runtime")
        assert m.load_if_exists()
        assert rt.session_versions.version(shared.location("s")) == 2
        rt.add(Msg.user("again"))
        rt.save_session("s")
        m.save()
        assert shared.version("s") == 4


def test_a_session_loaded_from_one_table_saves_into_another_as_new(
    shared: PostgresSession, pg_dsn: str, tmp_path: Path
) -> None:
    """A runtime's record is per location: what it loaded from one table is not the
    version it expects in another."""
    with (
        PostgresSession(pg_dsn, table="archive") as archive,
        MemoryRuntime(session_dir=tmp_path, sessions=shared) as rt,
    ):
        rt.add(Msg.user("keep me"))
        rt.save_session("s")
        rt.save_session("s")
        assert rt.load_session("s")
        copy = SessionManager("s").with_session(archive).add_component(rt, "runtime")
        assert copy.save().endswith("#archive/s")
        assert _texts(archive, "s") == _texts(shared, "s") == ["keep me"]


def test_components_loaded_from_different_versions_are_not_saved_together(
    shared: PostgresSession, tmp_path: Path
) -> None:
    with (
        MemoryRuntime(session_dir=tmp_path, sessions=shared) as r1,
        MemoryRuntime(session_dir=tmp_path, sessions=shared) as r2,
    ):
        r1.save_session("s")
        assert r2.load_session("s")
        r1.save_session("s")  # r1 is at version 2, r2 at 1
        both = SessionManager("s").with_session(shared)
        both.add_component(r1, "one").add_component(r2, "two")
        with pytest.raises(SessionError, match="different versions"):
            both.save()
        assert shared.version("s") == 2 and set(shared.read("s")) == {"runtime"}


def test_a_runtime_that_opened_its_storage_shares_the_storages_record(
    pg_dsn: str, tmp_path: Path
) -> None:
    """sessions= a URL: the runtime is the storage's only user, so a delete through
    ``rt.session`` is its own and the next save creates the session again."""
    from tests._postgres import pg_url

    with MemoryRuntime(session_dir=tmp_path, sessions=pg_url(pg_dsn)) as rt:
        assert isinstance(rt.session, PostgresSession)
        assert rt.session_versions is rt.session.versions
        rt.add(Msg.user("first"))
        rt.save_session("s")
        assert rt.session.delete("s")
        rt.save_session("s")  # not a conflict: the runtime deleted it itself
        assert rt.session.version("s") == 1


def test_a_delete_through_a_given_storage_object_is_another_writers_for_the_runtime(
    shared: PostgresSession, tmp_path: Path
) -> None:
    with MemoryRuntime(session_dir=tmp_path, sessions=shared) as rt:
        assert rt.session_versions is not shared.versions
        rt.add(Msg.user("first"))
        rt.save_session("s")
        assert shared.delete("s")
        with pytest.raises(SessionConflictError, match="deleted by another writer"):
            rt.save_session("s")
        assert not shared.exists("s")
        assert rt.load_session("s") is False  # known absent now: the next save creates it
        rt.save_session("s")
        assert shared.version("s") == 1

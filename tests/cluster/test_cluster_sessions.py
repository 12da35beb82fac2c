"""Who may write an agent's session, and which incarnation of the agent: in this process.

The hosting actor's class without Ray (``MemoryHost``; building a second
host on the same spec is what Ray runs on a restart), on the suite's real
PostgreSQL.  A session written through the cluster carries its owner's
namespace, so one namespace's agent can neither plant nor read another's;
each incarnation takes the session over with a higher epoch, so an older
incarnation (a node cut off from the cluster) that saves late is refused
and ends instead of wedging the current one, and a writer outside the
agent does not wedge it either.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from actormem.cluster import AgentRestartedError, ClusterConfigError
from actormem.cluster._host import MemoryHost
from actormem.cluster._spec import AgentSpec, make_spec
from actormem.messages import Msg
from actormem.models.embedders import HashEmbedder
from actormem.recorder import RecorderConfig
from actormem.runtime import MemoryRuntime
from actormem.session import PostgresSession, SessionError, SessionStorageError
from actormem.store import Namespace
from tests._postgres import pg_url

ALICE = Namespace(user_id="alice", agent_id="helper")
BOB = Namespace(user_id="bob", agent_id="helper")
REFUSED = "belongs to another namespace's agent"


@pytest.fixture
def url(pg_dsn: str) -> str:
    return pg_url(pg_dsn)


def spec(url: str, ns: Namespace = ALICE, sid: str = "s1", adopt: bool = False) -> AgentSpec:
    options = {"embedder": HashEmbedder(32), "recorder": RecorderConfig(batch_seconds=0.05)}
    return make_spec(sid, ns, url, url, False, options, adopt_session=adopt)


@pytest.fixture
def host(url: str) -> Iterator[Any]:
    made: list[MemoryHost] = []

    def make(ns: Namespace = ALICE, sid: str = "s1") -> MemoryHost:
        h = MemoryHost(spec(url, ns, sid))
        made.append(h)
        return h

    yield make
    for h in made:
        if not h._closed:
            h._rt.close()


def add(h: MemoryHost, text: str) -> None:
    h.call("add", (Msg.user(text),), {}, None, False)


def texts(h: MemoryHost) -> list[str]:
    return [m.text for m in h.call("messages", (), {}, None, False)[1]]


def test_a_session_planted_under_another_id_carries_the_planters_namespace(host: Any) -> None:
    bob = host(BOB, "bob-1")
    add(bob, "bob injected")
    bob.call("save_session", ("alice-2",), {}, None, False)
    # a forged owner component is replaced by the writer's own
    forged = {"cluster": {"namespace": list(ALICE.key()), "epoch": 99}, "note": {"x": 1}}
    bob.session_put("alice-3", forged, "runtime")
    for sid in ("alice-2", "alice-3"):
        with pytest.raises(ClusterConfigError, match=REFUSED):
            host(ALICE, sid)  # alice's agent never starts from what bob wrote
    assert "bob" in texts(host(BOB, "alice-2"))[0]  # bob's own agent may


def test_an_agent_neither_writes_reads_nor_lists_another_namespaces_session(
    host: Any, url: str
) -> None:
    alice = host()
    add(alice, "alice's secret")
    alice.call("flush", (), {}, None, False)
    bob = host(BOB, "bob-1")
    with pytest.raises(ClusterConfigError, match=REFUSED):
        bob.call("save_session", ("s1",), {}, None, False)
    with pytest.raises(ClusterConfigError, match=REFUSED):
        bob.session_put("s1", {"agent": {"x": 1}}, "runtime")
    _absent_to(bob, "s1", "nowhere", ALICE)
    assert [i.session_id for i in bob.session_call("list", ())] == ["bob-1"]
    assert [i.session_id for i in alice.session_call("list", ())] == ["s1"]
    with PostgresSession(url) as raw:
        assert "secret" in str(raw.read("s1")["runtime"])  # nothing of alice's was touched
        assert raw.read("s1")["cluster"]["namespace"] == list(ALICE.key())


def _absent_to(h: MemoryHost, sid: str, missing: str, owner: Namespace | None) -> None:
    """``sid`` is, to the agent ``h``, exactly as absent as the never-saved ``missing``:
    its reads answer the same (the owner and the stored state never show), and
    a save over it is refused without naming the owner."""
    for s in (sid, missing):
        assert h.session_call("exists", (s,)) is False
        assert h.session_call("delete", (s,)) is False
        with pytest.raises(SessionError, match=f"session '{s}' not found") as err:
            h.session_call("read", (s,))
        assert not isinstance(err.value, ClusterConfigError)
        assert h.session_load(s, "runtime", True, True) == (h.incarnation, (False, {}))
        with pytest.raises(SessionError, match="not found"):
            h.session_load(s, "runtime", True, False)
        assert h.call("load_session", (s,), {}, None, False) == (h.incarnation, False)
    assert h.session_call("location", (sid,)).endswith(sid)
    with pytest.raises(ClusterConfigError) as refused:
        h.call("save_session", (sid,), {}, None, False)
    if owner is not None:
        assert str(owner.user_id) not in str(refused.value)


def _local_save(url: str, sid: str, text: str, ns: Namespace | None) -> None:
    """A local MemoryRuntime on the same database saves session ``sid`` (no cluster owner);
    with ``ns``, it has long-term memory in that namespace, else short-term memory only."""
    kwargs: dict[str, Any] = {"sessions": url}
    if ns is not None:
        kwargs.update(store=url, namespace=ns, embedder=HashEmbedder(32))
    with MemoryRuntime(**kwargs) as rt:
        rt.add(Msg.user(text))
        rt.save_session(sid)


def test_a_local_runtimes_session_is_another_namespaces_to_a_cluster_agent(
    host: Any, url: str
) -> None:
    _local_save(url, "loc-1", "bob's local secret", BOB)
    with PostgresSession(url) as raw:
        assert raw.read("loc-1")["runtime"]["namespace"] == list(BOB.key())
    with pytest.raises(ClusterConfigError) as err:
        host(ALICE, "loc-1")  # never taken over by another namespace's agent
    assert "bob" not in str(err.value)
    alice = host(ALICE, "a-1")
    _absent_to(alice, "loc-1", "never-saved", BOB)
    assert texts(alice) == []  # nothing of bob's was loaded
    assert "loc-1" not in [i.session_id for i in alice.session_call("list", ())]
    with PostgresSession(url) as raw:  # nothing stored was touched
        assert "secret" in str(raw.read("loc-1")["runtime"])
        assert "cluster" not in raw.read("loc-1")
    # the way to move it: bob's own agent takes it over (its runtime recorded bob)
    moved = host(BOB, "loc-1")
    assert texts(moved) == ["bob's local secret"]
    with PostgresSession(url) as raw:
        assert raw.read("loc-1")["cluster"]["namespace"] == list(BOB.key())


def test_a_session_that_records_no_namespace_is_adopted_only_when_asked(
    host: Any, url: str
) -> None:
    _local_save(url, "old-1", "short-term only", None)  # records no namespace
    with pytest.raises(ClusterConfigError, match="adopt_session=True"):
        host(ALICE, "old-1")
    bob = host(BOB, "bob-1")
    _absent_to(bob, "old-1", "never-saved", None)  # an opt-in is for the agent's own id only
    adopted = MemoryHost(spec(url, ALICE, "old-1", adopt=True))
    try:
        assert texts(adopted) == ["short-term only"]
    finally:
        adopted.shutdown()
    assert texts(host(ALICE, "old-1")) == ["short-term only"]  # now alice's: no opt-in needed
    with pytest.raises(ClusterConfigError, match=REFUSED):
        host(BOB, "old-1")


def test_a_stale_incarnation_is_refused_and_ends_and_the_current_one_keeps_working(
    host: Any,
) -> None:
    first = host()
    add(first, "one")
    first.call("flush", (), {}, None, False)
    current = host()  # Ray restarted the agent elsewhere; the first one was cut off, not dead
    add(first, "from the cut-off node")
    with pytest.raises(AgentRestartedError, match="superseded"):
        first.call("flush", (), {}, None, False)
    with pytest.raises(AgentRestartedError, match="superseded"):
        first.call("messages", (), {}, None, False)  # it ended: it answers nothing more
    assert first._closed
    add(current, "two")
    current.call("flush", (), {}, None, False)
    current.call("save_session", (None,), {}, None, False)
    assert texts(host()) == ["one", "two"]  # nothing the current one acknowledged was lost


def test_another_writer_of_the_session_does_not_wedge_the_agent(host: Any, url: str) -> None:
    agent = host()
    add(agent, "one")
    agent.call("flush", (), {}, None, False)
    with PostgresSession(url) as other:  # a second writer, outside the agent
        other.load("s1", {}, strict=False)
        other.put("s1", {"runtime": other.read("s1")["runtime"], "note": {"by": "other"}})
    add(agent, "two")
    agent.call("flush", (), {}, None, False)  # saved over the other writer's save
    add(agent, "three")
    agent.session_put("s1", {"agent": {"turn": 3}}, "runtime")
    agent.shutdown()
    assert texts(host()) == ["one", "two", "three"]


def test_a_save_or_load_through_the_session_storage_is_refused_by_a_restarted_agent(
    host: Any,
) -> None:
    first = host()
    add(first, "one")
    first.call("save_session", (None,), {}, None, False)
    add(first, "unacknowledged")
    again = host()  # the restart: "unacknowledged" is gone
    with pytest.raises(AgentRestartedError, match="restarted"):
        again.session_put("s1", {"agent": {"x": 1}}, "runtime", first.incarnation)
    with pytest.raises(AgentRestartedError, match="restarted"):
        again.session_load("s1", "runtime", True, True, first.incarnation)
    inc, _ = again.session_put("s1", {"agent": {"x": 1}}, "runtime", again.incarnation)
    assert inc == again.incarnation
    assert texts(again) == ["one"]


def test_a_session_whose_owner_cannot_be_read_is_absent_and_never_deleted(
    host: Any, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another id whose stored document cannot be read (damaged, or from a newer
    version): whose it is cannot be told, so to the agent it is absent -- its
    delete deletes nothing and exists() does not tell it is stored; a failure of
    the database itself is raised, not read as "absent"."""
    h = host()
    _local_save(url, "theirs", "bob's secret", BOB)
    storage = h._rt.session
    real_read = storage.read

    def damaged(session_id: str) -> dict[str, Any]:
        if session_id == "theirs":
            raise SessionError("session 'theirs' cannot be decoded")
        return real_read(session_id)

    monkeypatch.setattr(storage, "read", damaged)
    assert h.session_call("exists", ("theirs",)) is False
    assert h.session_call("delete", ("theirs",)) is False
    monkeypatch.setattr(storage, "read", real_read)
    assert storage.exists("theirs")  # still stored: nothing was deleted

    def down(session_id: str) -> dict[str, Any]:
        raise SessionStorageError("the database is unreachable")

    monkeypatch.setattr(storage, "read", down)
    with pytest.raises(SessionStorageError):
        h.session_call("delete", ("theirs",))

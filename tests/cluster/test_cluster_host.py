"""The agent-hosting actor's class, in this process (no Ray): what a restart restores.

Ray runs ``MemoryHost.__init__`` again when it restarts an actor; building a
second host on the same spec is that restart.  Real PostgreSQL (the suite's).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from actormem.cluster import AgentRestartedError, ClusterConfigError
from actormem.cluster._host import MemoryHost
from actormem.cluster._spec import AgentSpec, check_backends, make_spec
from actormem.messages import Msg
from actormem.models.embedders import HashEmbedder
from actormem.recorder import RecorderConfig
from actormem.store import Namespace
from tests._postgres import pg_url

ALICE = Namespace(user_id="alice", agent_id="helper")


@pytest.fixture
def url(pg_dsn: str) -> str:
    return pg_url(pg_dsn)


def spec(url: str, ns: Namespace = ALICE, sid: str = "s1", **kw: Any) -> AgentSpec:
    options = {"embedder": HashEmbedder(32), "recorder": RecorderConfig(batch_seconds=0.05)}
    return make_spec(sid, ns, url, url, kw.pop("write_through", False), {**options, **kw})


@pytest.fixture
def hosts() -> Iterator[list[MemoryHost]]:
    made: list[MemoryHost] = []
    yield made
    for h in made:
        h._rt.close()


def texts(h: MemoryHost) -> list[str]:
    return [m.text for m in h.call("messages", (), {}, None, False)[1]]


def test_a_restart_restores_what_flush_acknowledged_and_nothing_after(
    url: str, hosts: list[MemoryHost]
) -> None:
    first = MemoryHost(spec(url))
    hosts.append(first)
    assert first.restored is False
    first.call("add", (Msg.user("I live in Porto."),), {}, None, False)
    first.call("record", ([Msg.user("I live in Porto.")],), {}, None, False)
    first.call("flush", (), {}, None, False)
    first.call("add", (Msg.user("not acknowledged"),), {}, None, False)
    again = MemoryHost(spec(url))  # what Ray runs on the new node
    hosts.append(again)
    assert again.restored is True
    assert again.incarnation != first.incarnation
    assert texts(again) == ["I live in Porto."]
    hits = again.call("retrieve", ("Porto",), {}, None, False)[1]
    assert any("Porto" in h.memory.content for h in hits)


def test_a_caller_with_unacknowledged_changes_is_refused_by_another_incarnation(
    url: str, hosts: list[MemoryHost]
) -> None:
    first = MemoryHost(spec(url))
    hosts.append(first)
    first.call("add", (Msg.user("one"),), {}, None, False)
    first.call("save_session", (None,), {}, None, False)
    again = MemoryHost(spec(url))
    hosts.append(again)
    with pytest.raises(AgentRestartedError, match="restarted") as info:
        again.call("add", (Msg.user("two"),), {}, first.incarnation, False)
    assert info.value.call == "add"
    assert texts(again) == ["one"]  # the refused call did nothing


def test_a_resent_add_is_not_added_twice(url: str, hosts: list[MemoryHost]) -> None:
    h = MemoryHost(spec(url))
    hosts.append(h)
    m, n = Msg.user("once"), Msg.user("also once")
    h.call("add", (m,), {}, None, False)
    h.call("add", (m,), {}, None, True)
    h.call("add_many", ([m, n],), {}, None, True)
    assert texts(h) == ["once", "also once"]


def test_write_through_acknowledges_every_returned_call(url: str, hosts: list[MemoryHost]) -> None:
    h = MemoryHost(spec(url, write_through=True))
    hosts.append(h)
    h.call("add", (Msg.user("kept without a flush"),), {}, None, False)
    h.call("record", ([Msg.user("My cat is called Miso.")],), {}, None, False)
    again = MemoryHost(spec(url, write_through=True))
    hosts.append(again)
    assert texts(again) == ["kept without a flush"]
    hits = again.call("retrieve", ("Miso",), {}, None, False)[1]
    assert any("Miso" in x.memory.content for x in hits)


def test_another_namespace_never_starts_from_an_agents_session(
    url: str, hosts: list[MemoryHost]
) -> None:
    alice = MemoryHost(spec(url))
    hosts.append(alice)
    alice.call("add", (Msg.user("alice's secret"),), {}, None, False)
    alice.call("flush", (), {}, None, False)
    with pytest.raises(ClusterConfigError, match="belongs to the agent of namespace"):
        MemoryHost(spec(url, ns=Namespace(user_id="bob", agent_id="helper")))
    bob = MemoryHost(spec(url, ns=Namespace(user_id="bob"), sid="s2"))
    hosts.append(bob)
    with pytest.raises(ClusterConfigError, match="belongs to the agent of namespace"):
        bob.call("load_session", ("s1",), {}, None, False)
    with pytest.raises(ClusterConfigError, match="belongs to the agent of namespace"):
        bob.session_load("s1", "runtime", False, True)
    assert texts(bob) == []
    assert bob.call("retrieve", ("secret",), {}, None, False)[1] == []


def test_only_the_runtimes_calls_are_answered(url: str, hosts: list[MemoryHost]) -> None:
    h = MemoryHost(spec(url))
    hosts.append(h)
    with pytest.raises(AttributeError, match="not a call a remote agent answers"):
        h.call("close", (), {}, None, False)
    with pytest.raises(AttributeError, match="not a session storage call"):
        h.session_call("close", ())


def test_state_on_one_nodes_disk_is_refused_on_a_multi_node_cluster(tmp_path: Any) -> None:
    pg = "postgresql://u@/db?host=/tmp/x"
    duck = make_spec("s", None, tmp_path / "m.duckdb", pg, False, {})
    folder = make_spec("s", None, pg, None, False, {})
    journal = make_spec("s", None, pg, pg, False, {"journal": True})
    for bad, what in ((duck, "local DuckDB file"), (folder, "JSON files"), (journal, "journal")):
        check_backends(bad, 1)  # one node: its disk is the cluster's
        with pytest.raises(ClusterConfigError) as info:
            check_backends(bad, 2)
        assert what in str(info.value)
        assert "PostgreSQL is the backend for a cluster" in str(info.value)
    check_backends(make_spec("s", None, pg, pg, False, {}), 5)


def test_connect_arguments_are_checked_where_they_enter() -> None:
    with pytest.raises(ClusterConfigError, match="namespace= is not an option"):
        make_spec("s", None, None, None, False, {"namespace": ALICE})
    with pytest.raises(ClusterConfigError, match="cannot move to the actor"):
        make_spec("s", None, object(), None, False, {})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="session id"):
        make_spec("../x", None, None, None, False, {})

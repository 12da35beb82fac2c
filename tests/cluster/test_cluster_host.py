"""The agent-hosting actor's class, in this process (no Ray): what a restart restores.

Ray runs ``MemoryHost.__init__`` again when it restarts an actor; building a
second host on the same spec is that restart.  Real PostgreSQL (the suite's).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actormem.cluster import AgentRestartedError, ClusterConfigError, ClusterError
from actormem.cluster._host import MemoryHost
from actormem.cluster._spec import AgentSpec, check_actor_options, check_backends, make_spec
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


def test_a_resent_add_with_keyword_arguments_is_added(url: str, hosts: list[MemoryHost]) -> None:
    h = MemoryHost(spec(url))
    hosts.append(h)
    m, n = Msg.user("by keyword"), Msg.user("a batch by keyword")
    h.call("add", (), {"msg": m}, None, True)  # handle.add(msg=m), sent again after a loss
    h.call("add", (), {"msg": m}, None, True)
    h.call("add_many", (), {"msgs": [m, n]}, None, True)
    assert texts(h) == ["by keyword", "a batch by keyword"]


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
    with pytest.raises(ClusterConfigError, match="belongs to another namespace's agent"):
        MemoryHost(spec(url, ns=Namespace(user_id="bob", agent_id="helper")))
    bob = MemoryHost(spec(url, ns=Namespace(user_id="bob"), sid="s2"))
    hosts.append(bob)
    # to bob's agent, alice's session is absent: nothing loaded, nothing of alice's said
    assert bob.call("load_session", ("s1",), {}, None, False) == (bob.incarnation, False)
    assert bob.session_load("s1", "runtime", False, True) == (bob.incarnation, (False, {}))
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
    for userless in (Namespace(agent_id="helper"), Namespace(session_id="s9")):
        # every user's memories of the agent would be its own: refused, the field named
        with pytest.raises(ClusterConfigError, match="sets no user_id"):
            make_spec("s", userless, None, None, False, {})


def test_an_agent_with_short_term_memory_only_is_created_and_restored(
    url: str, hosts: list[MemoryHost]
) -> None:
    # no store: a normal agent (no long-term memory), its session still owned by its namespace
    only = make_spec("st", ALICE, None, url, False, {})
    first = MemoryHost(only)
    hosts.append(first)
    assert first._rt.long_term_mode is None
    first.call("add", (Msg.user("short-term only"),), {}, None, False)
    first.call("flush", (), {}, None, False)
    assert first.describe(only)["namespace"] == ALICE
    again = MemoryHost(only)
    hosts.append(again)
    assert again.restored is True
    assert texts(again) == ["short-term only"]
    with pytest.raises(ClusterConfigError, match="belongs to another namespace's agent"):
        MemoryHost(make_spec("st", Namespace(user_id="bob"), None, url, False, {}))


def test_a_connect_with_other_settings_is_refused_naming_each(
    url: str, hosts: list[MemoryHost]
) -> None:
    h = MemoryHost(spec(url))
    hosts.append(h)
    assert h.describe(spec(url))["incarnation"] == h.incarnation  # equal settings, new objects
    for other, named in (
        (spec(url, embedder=HashEmbedder(16)), "another embedder"),
        (spec(url, recorder=RecorderConfig(batch_seconds=1.0)), "another recorder"),
        (spec(url, autocontext=True), "another autocontext"),
        (spec(url, write_through=True), "another write_through"),
        (make_spec("s1", ALICE, url, url, False, {}, idle_release=5), "another idle_release"),
        (make_spec("s1", ALICE, url, url, False, {}, max_restarts=2), "another max_restarts"),
    ):
        with pytest.raises(ClusterConfigError, match=named):
            h.describe(other)


def test_actor_options_may_not_change_what_the_handle_decides() -> None:
    assert check_actor_options({"num_cpus": 0.5}) == {"num_cpus": 0.5}
    assert check_actor_options(None) == {}
    for key in ("name", "namespace", "lifetime", "get_if_exists", "max_task_retries"):
        with pytest.raises(ClusterConfigError, match=f"may not set {key}"):
            check_actor_options({key: 1, "num_cpus": 1})
    with pytest.raises(ClusterConfigError, match=r"pass max_restarts= to RemoteRuntime\.connect"):
        check_actor_options({"max_restarts": 3})
    with pytest.raises(ClusterConfigError, match="must be a mapping"):
        check_actor_options([("num_cpus", 1)])


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"num_cpus": -1}, "num_cpus=-1"),
        ({"num_gpus": "one"}, "num_gpus='one'"),
        ({"memory": -5}, "memory=-5"),
        ({"resources": {"CPU": 1}}, "resources="),
        ({"resources": {"slot": -1}}, "resources="),
        ({"numcpus": 1}, "numcpus=1"),
    ],
)
def test_an_actor_option_ray_refuses_is_named_where_it_enters(
    options: dict[str, Any], named: str
) -> None:
    with pytest.raises(ClusterConfigError, match="is refused by Ray") as err:
        check_actor_options(options)
    assert named in str(err.value) and "actor_options" in str(err.value)
    assert check_actor_options({"num_cpus": 0.01, "scheduling_strategy": "SPREAD"})


def test_max_restarts_is_checked_where_it_enters() -> None:
    for bad in (-2, 1.5, True, "3"):
        with pytest.raises(ClusterConfigError, match=r"max_restarts=\.\.\.\) must be -1"):
            make_spec("s", None, None, None, False, {}, max_restarts=bad)  # type: ignore[arg-type]
    assert make_spec("s", None, None, None, False, {}, max_restarts=0).max_restarts == 0


def test_a_refused_actor_start_is_a_cluster_config_error_with_rays_error_as_cause() -> None:
    from ray.exceptions import RayActorError

    from actormem.cluster._connect import creation_error

    s = make_spec("s1", ALICE, None, None, False, {})
    text = (
        "The actor died because of an error raised in its creation task, ray::x:MemoryHost\n"
        '  File "/x/_host.py", line 9, in _owned\n    raise ClusterConfigError(\n'
        "actormem.cluster._spec.ClusterConfigError: session 's1' belongs to another "
        "namespace's agent, not to ('alice', 'helper', '', ''): a session id names one agent"
    )
    died = RayActorError(error_msg=text, actor_init_failed=True)
    err = creation_error(s, died)
    assert type(err) is ClusterConfigError
    assert "could not start: ClusterConfigError: session 's1' belongs to" in str(err)
    other = creation_error(s, RayActorError(error_msg="...\nOSError: disk full"))
    assert type(other) is ClusterError and "OSError: disk full" in str(other)


def test_save_session_answers_as_the_local_runtime(
    url: str, tmp_path: Any, hosts: list[MemoryHost]
) -> None:
    on_pg = MemoryHost(spec(url))
    hosts.append(on_pg)
    assert isinstance(on_pg.call("save_session", (None,), {}, None, False)[1], str)
    folder = MemoryHost(
        make_spec("s1", ALICE, url, tmp_path, False, {"embedder": HashEmbedder(32)})
    )
    hosts.append(folder)
    path = folder.call("save_session", (None,), {}, None, False)[1]
    assert isinstance(path, Path) and path == tmp_path / "s1.json" and path.exists()
    other = folder.call("save_session", ("s2",), {}, None, False)[1]
    assert isinstance(other, Path) and other == tmp_path / "s2.json"


def test_the_fleeting_memory_is_reached_through_the_handle_and_restored(
    url: str, hosts: list[MemoryHost]
) -> None:
    from actormem.cluster._remote_state import RemoteFleeting

    class Direct:  # the handle's round trip, without Ray: straight to the host
        def __init__(self, host: MemoryHost) -> None:
            self.host = host

        def _call(self, name: str, *args: Any) -> Any:
            return self.host.call(name, args, {}, None, False)[1]

    h = MemoryHost(spec(url))
    hosts.append(h)
    notes = RemoteFleeting(Direct(h))  # type: ignore[arg-type]
    notes["plan"] = "book a table"
    notes.update(step=2, done=False)
    assert notes["plan"] == "book a table" and dict(notes) == dict(h._rt.fleeting)
    assert list(notes) == ["plan", "step", "done"] and len(notes) == 3
    assert "step" in notes and "nope" not in notes
    del notes["done"]
    with pytest.raises(KeyError):
        del notes["done"]
    with pytest.raises(KeyError):
        notes["done"]
    with pytest.raises(TypeError, match="keys must be str"):
        notes[1] = "x"  # type: ignore[index]
    h.call("flush", (), {}, None, False)  # acknowledged: saved with the session
    again = MemoryHost(spec(url))
    hosts.append(again)
    assert dict(RemoteFleeting(Direct(again))) == {"plan": "book a table", "step": 2}  # type: ignore[arg-type]
    RemoteFleeting(Direct(again)).clear()  # type: ignore[arg-type]
    assert dict(again._rt.fleeting) == {}

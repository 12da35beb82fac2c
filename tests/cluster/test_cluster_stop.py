"""Ending an agent: an idle release or a stop whose save fails, a stop that meets a lost
actor, arguments that cannot travel.  In this process, on the suite's real PostgreSQL.

The hosting actor's class runs here (``MemoryHost``; building a second one on
the same spec is Ray's restart after a node death).  For the handle's side, a
stand-in for Ray's actor handle runs each method in the current host as it is
sent; the test says when the node dies (the next answer is Ray's
``ActorDiedError``, and Ray restarts the actor, same actor id, from the
session).  Ray's lookup by name and the actor's state in the GCS are the
stand-in's too.  Found by a hostile test of session 11, each on a real
2-node cluster (``/work/wt-rayprobe``'s scenarios).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
import ray
from ray._private import worker as ray_worker
from ray.exceptions import ActorDiedError

from actormem.cluster import AgentRestartedError, ClusterError
from actormem.cluster import _capacity as capacity_module
from actormem.cluster import _connect as connect_module
from actormem.cluster import _events as events_module
from actormem.cluster._events import EventsLostError
from actormem.cluster._handle import RemoteRuntime
from actormem.cluster._host import MemoryHost
from actormem.cluster._spec import AgentSpec, make_spec
from actormem.events import MessageAdded
from actormem.messages import MessageError, Msg
from actormem.models.embedders import HashEmbedder
from actormem.session import SessionStorageError
from actormem.store import Namespace
from tests._postgres import pg_url

ALICE = Namespace(user_id="alice", agent_id="helper")


@pytest.fixture
def url(pg_dsn: str) -> str:
    return pg_url(pg_dsn)


def spec(url: str, idle_release: float | None = None) -> AgentSpec:
    return make_spec("stops", ALICE, url, url, False, {"embedder": HashEmbedder(32)}, idle_release)


@pytest.fixture
def hosts() -> Iterator[list[MemoryHost]]:
    made: list[MemoryHost] = []
    yield made
    for h in made:
        if not h._closed:
            h._rt.close()


def texts(host: MemoryHost, expect: str | None = None) -> list[str]:
    return [m.text for m in host.call("messages", (), {}, expect, False)[1]]


# -- F2: a release (or stop) whose save fails ---------------------------------------------


class _DatabaseDown:
    """Every update of a stored session fails in PostgreSQL (a trigger), as in a failover."""

    def __init__(self, dsn: str) -> None:
        self.conn = psycopg.connect(dsn, autocommit=True)

    def __enter__(self) -> _DatabaseDown:
        self.conn.execute(
            "CREATE FUNCTION down() RETURNS trigger AS $$ BEGIN "
            "RAISE EXCEPTION 'the database is failing over'; END $$ LANGUAGE plpgsql"
        )
        self.conn.execute(
            "CREATE TRIGGER down BEFORE UPDATE ON actormem_sessions "
            "FOR EACH ROW EXECUTE FUNCTION down()"
        )
        return self

    def __exit__(self, *exc: object) -> None:
        self.conn.execute("DROP TRIGGER down ON actormem_sessions")
        self.conn.close()


@pytest.mark.parametrize("ending", ["release", "shutdown", "stop"])
def test_an_ending_whose_save_failed_does_not_record_the_incarnation_released(
    url: str, pg_dsn: str, hosts: list[MemoryHost], ending: str
) -> None:
    first = MemoryHost(spec(url, idle_release=3600))
    hosts.append(first)
    mine = first.incarnation
    first.call("add", (Msg.user("acknowledged"),), {}, None, False)
    first.call("flush", (), {}, None, False)
    first._last_call -= 7200  # idle for two hours: the release goes ahead
    with _DatabaseDown(pg_dsn):
        if ending == "release":
            assert first.release_if_idle() is False  # logged; the watcher asks again
        else:
            with pytest.raises(SessionStorageError, match="failing over"):
                getattr(first, ending)(30)
    assert not first._closed  # it did not end: it keeps serving
    assert mine not in first.released()[1]
    first.call("save_session", (), {}, None, False)  # another handle's save succeeds
    # a handle adds on the running incarnation, and the node dies before a flush
    first.call("add", (Msg.user("unacknowledged"),), {}, mine, False)
    again = MemoryHost(spec(url, idle_release=3600))
    hosts.append(again)
    assert mine not in again.released()[1]
    # the handle's change is lost: it is told, never carried on silently
    with pytest.raises(AgentRestartedError, match="restarted"):
        texts(again, expect=mine)
    assert texts(again) == ["acknowledged"]


def test_a_release_whose_save_failed_goes_ahead_once_the_database_is_back(
    url: str, pg_dsn: str, hosts: list[MemoryHost]
) -> None:
    first = MemoryHost(spec(url, idle_release=3600))
    hosts.append(first)
    mine = first.incarnation
    first.call("add", (Msg.user("saved by the release"),), {}, None, False)
    first._last_call -= 7200
    with _DatabaseDown(pg_dsn):
        assert first.release_if_idle() is False
    assert first._held  # its watcher asks again (no call needed) ...
    assert first.release_if_idle() is True  # ... and the release goes ahead now
    assert first._closed
    again = MemoryHost(spec(url, idle_release=3600))
    hosts.append(again)
    assert mine in again.released()[1]  # a handle with changes on it lost nothing
    assert texts(again, expect=mine) == ["saved by the release"]


# -- F1: stop() when the agent's node dies ------------------------------------------------


class _Dead:
    """What ``.remote()`` answers once the actor is lost: ``ray.get`` raises it."""

    def __init__(self) -> None:
        self.error = ActorDiedError()


class _Actor:
    """A Ray actor handle's stand-in (one actor id): calls run in its current host.

    ``node_dies()``: the host's process is gone; the call in flight (or the
    next one) meets :class:`ActorDiedError`, and Ray restarts the actor (a new
    ``MemoryHost`` from the session) for the call after -- unless no node has
    room (``fake.room`` False): then it waits, restarting, without a process.
    """

    def __init__(self, fake: _Ray, spec: AgentSpec) -> None:
        self.fake, self.spec = fake, spec
        self._actor_id = object()
        self.host: MemoryHost | None = fake.start(spec)
        self.dies_next = False
        self.ended = False  # exited or killed: Ray does not restart it
        #: the node dies right after the host ran this method (before the answer)
        self.die_after: str | None = None

    def node_dies(self) -> None:
        self.dies_next = True

    def state(self) -> tuple[str, int]:
        if self.ended:
            return "DEAD", 0
        if self.host is None or self.dies_next:
            return ("RESTARTING", 0) if not self.fake.room else ("RESTARTING", 1)
        return "ALIVE", 1

    def run(self, method: str, args: tuple[Any, ...]) -> Any:
        if self.ended:
            return _Dead()
        if self.dies_next:
            self.dies_next, self.host = False, None
            return _Dead()
        if self.host is None:
            assert self.fake.room, "sent to an actor that waits for room: it never answers"
            self.host = self.fake.start(self.spec)  # Ray's restart on another node
        if getattr(self.host, "_stopped", False):  # a stopped host ends at its next call
            self.ended = True
            return _Dead()
        result = getattr(self.host, method)(*args)
        if method == "exit" and result is True:
            self.ended = True
            return _Dead()
        if self.die_after == method:
            self.die_after, self.host = None, None
            return _Dead()
        return result

    def __getattr__(self, method: str) -> Any:
        actor = self

        class _Method:
            @staticmethod
            def options(**_: Any) -> Any:
                return _Method

            @staticmethod
            def remote(*args: Any) -> Any:
                return actor.run(method, args)

        return _Method


class _Ray:
    """Ray as the handle sees it: the agent's named actor, its state, kill."""

    def __init__(self) -> None:
        self.actor: _Actor | None = None
        self.hosts: list[MemoryHost] = []
        self.room = True
        self.killed = 0

    def start(self, spec: AgentSpec) -> MemoryHost:
        host = MemoryHost(spec)
        self.hosts.append(host)
        return host

    def get_actor(self, name: str, namespace: str | None = None) -> _Actor:
        if self.actor is None or self.actor.ended:
            raise ValueError(f"Failed to look up actor with name {name!r}")
        return self.actor

    def get_or_create(self, spec: AgentSpec, connect: Any) -> _Actor:
        if self.actor is None or self.actor.ended:
            self.actor = _Actor(self, spec)
        return self.actor

    def kill(self, actor: _Actor, no_restart: bool = True) -> None:
        assert no_restart
        actor.ended = True
        self.killed += 1


def _get(ref: Any) -> Any:
    if isinstance(ref, _Dead):
        raise ref.error
    return ref


@pytest.fixture
def fake_ray(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Ray]:
    fake = _Ray()
    monkeypatch.setattr(ray, "is_initialized", lambda: True)
    monkeypatch.setattr(ray, "nodes", lambda: [{"Alive": True}, {"Alive": True}])
    monkeypatch.setattr(ray, "get", _get)
    monkeypatch.setattr(ray, "wait", lambda refs, **_: (list(refs), []))  # answered as sent
    monkeypatch.setattr(ray, "get_actor", fake.get_actor)
    monkeypatch.setattr(ray, "kill", fake.kill)
    monkeypatch.setattr(ray, "available_resources", dict)
    monkeypatch.setattr(connect_module, "_get_or_create", fake.get_or_create)
    monkeypatch.setattr(capacity_module, "_state", lambda actor: actor.state())
    monkeypatch.setattr(RemoteRuntime, "_get", lambda self, ref: _get(ref))
    yield fake
    for h in fake.hosts:
        if not h._closed:
            h._rt.close()
    # nothing here may start Ray (it would bind the host's external interface)
    assert not ray_worker.global_worker.connected


def connect(url: str) -> RemoteRuntime:
    return RemoteRuntime.connect(
        "stops",
        namespace=ALICE,
        store=url,
        sessions=url,
        embedder=HashEmbedder(32),
        failover_timeout=10,
    )


def _restored(url: str, hosts: list[MemoryHost]) -> list[str]:
    """What the agent's session holds: a new incarnation restores it."""
    again = MemoryHost(spec(url))
    hosts.append(again)
    return texts(again)


def test_a_stop_after_the_node_died_says_the_unsaved_changes_are_lost(
    url: str, fake_ray: _Ray, hosts: list[MemoryHost]
) -> None:
    h = connect(url)
    h.add(Msg.user("m1 flushed"))
    h.flush()
    h.add(Msg.user("m2 given to stop() to save"))
    assert not h.acknowledged
    assert fake_ray.actor is not None
    fake_ray.actor.node_dies()
    with pytest.raises(AgentRestartedError, match="lost before stop"):
        h.stop()
    # ... and the agent Ray restarted elsewhere was stopped too: nothing of it runs
    assert fake_ray.actor.ended
    with pytest.raises(ValueError):
        ray.get_actor("stops", namespace="actormem")
    assert len(fake_ray.hosts) == 2 and fake_ray.hosts[1]._closed  # (the first died)
    assert _restored(url, hosts) == ["m1 flushed"]


def test_a_stop_whose_node_died_after_it_saved_loses_nothing_and_stops_the_restart(
    url: str, fake_ray: _Ray, hosts: list[MemoryHost]
) -> None:
    h = connect(url)
    h.add(Msg.user("m1"))
    assert fake_ray.actor is not None
    fake_ray.actor.die_after = "stop"  # saved and recorded released; the answer is lost
    h.stop()  # the restarted agent accepts the handle: nothing of it was lost
    assert fake_ray.actor.ended
    assert len(fake_ray.hosts) == 2 and all(x._closed for x in fake_ray.hosts)
    assert _restored(url, hosts) == ["m1"]


def test_a_node_death_between_the_save_and_the_exit_stops_the_restarted_agent(
    url: str, fake_ray: _Ray, hosts: list[MemoryHost]
) -> None:
    h = connect(url)
    h.add(Msg.user("m1"))
    assert fake_ray.actor is not None
    fake_ray.actor.die_after = "stop"
    fake_ray.actor.dies_next = False
    actor = fake_ray.actor
    original = actor.run

    def run(method: str, args: tuple[Any, ...]) -> Any:
        if method == "exit" and actor.host is not None and actor.host is fake_ray.hosts[0]:
            actor.host = None  # the node died as the exit was sent: Ray restarts the actor
            return _Dead()
        return original(method, args)

    actor.die_after = None
    actor.run = run  # type: ignore[method-assign]
    h.stop()
    assert actor.ended  # the restart, which answered nothing yet, was removed
    assert fake_ray.killed == 1 and len(fake_ray.hosts) == 1 and fake_ray.hosts[0]._closed
    assert _restored(url, hosts) == ["m1"]


def test_a_stop_after_the_node_died_with_no_room_removes_the_waiting_restart(
    url: str, fake_ray: _Ray, hosts: list[MemoryHost]
) -> None:
    h = connect(url)
    h.add(Msg.user("p1"))
    h.flush()
    assert fake_ray.actor is not None
    fake_ray.room = False  # every node is full: the restart waits for room
    fake_ray.actor.node_dies()
    h.stop()  # nothing of this handle was unsaved: it returns, the agent really ended
    assert fake_ray.actor.ended and fake_ray.killed == 1
    assert len(fake_ray.hosts) == 1  # the restart never ran
    fake_ray.room = True
    assert _restored(url, hosts) == ["p1"]


def test_a_stop_of_an_agent_that_restarted_before_it_refuses_to_save_over_lost_changes(
    url: str, fake_ray: _Ray, hosts: list[MemoryHost]
) -> None:
    h = connect(url)
    h.add(Msg.user("m1"))
    h.flush()
    h.add(Msg.user("m2 unsaved"))
    assert fake_ray.actor is not None
    fake_ray.actor.node_dies()
    fake_ray.actor.run("where", ())  # another handle's call meets the death; Ray restarts it
    with pytest.raises(AgentRestartedError, match="lost before stop"):
        h.stop()  # the restarted one does not save its restored state as if m2 were there
    assert fake_ray.actor.ended
    assert _restored(url, hosts) == ["m1"]


# -- F3: arguments that cannot travel ---------------------------------------------------------


def test_an_argument_that_cannot_be_pickled_is_refused_naming_the_call_and_the_argument(
    url: str, fake_ray: _Ray
) -> None:
    h = connect(url)
    with pytest.raises(MessageError, match=r"add\(\): msg\.metadata\['lock'\] .* lock") as err:
        h.add(Msg.user("hi", lock=threading.Lock()))
    with pytest.raises(MessageError, match=r"add_many\(\): msgs\[1\]\.metadata\['lock'\]"):
        h.add_many([Msg.user("fine"), Msg.user("hi", lock=threading.Lock())])
    with pytest.raises(TypeError, match=r"call_tool\(\): arguments\['x'\]\[0\] .* lock"):
        h.call_tool("record_to_memory", {"x": [threading.Lock()]})
    with pytest.raises(TypeError, match=r"fleeting: fleeting\['k'\] .* lock"):
        h.fleeting["k"] = threading.Lock()
    assert url not in str(err.value) and "postgres" not in str(err.value)
    # nothing was sent: the agent holds none of it
    assert h.messages() == [] and dict(h.fleeting) == {}


# -- events: a closed handle's stream when the agent is lost -----------------------------


def test_a_closed_handles_stream_ends_with_events_lost_when_the_agent_is_lost(
    url: str, fake_ray: _Ray
) -> None:
    h = connect(url)
    seen, ended = threading.Event(), threading.Event()
    errors: list[BaseException] = []
    completed: list[bool] = []

    def failed(exc: BaseException) -> None:
        errors.append(exc)
        ended.set()

    def done() -> None:
        completed.append(True)
        ended.set()

    h.events.subscribe(on_next=lambda e: seen.set(), on_error=failed, on_completed=done)
    h.add(Msg.user("seen"))
    assert seen.wait(60)
    h.close()  # lets go of the agent; the subscription goes on
    assert fake_ray.actor is not None
    fake_ray.actor.node_dies()  # the next poll meets the loss
    assert ended.wait(60)
    assert completed == []  # not a normal end: events after the last poll may be lost
    assert len(errors) == 1 and isinstance(errors[0], EventsLostError)


def test_a_slow_subscriber_stays_connected_while_it_works_through_a_batch(
    url: str, fake_ray: _Ray, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(events_module, "DISCONNECT_AFTER", 3.0)
    h = connect(url)
    assert fake_ray.actor is not None and fake_ray.actor.host is not None
    fake_ray.actor.host._buffer._disconnect_after = 3.0  # 30 s in production
    texts_seen: list[str] = []
    errors: list[BaseException] = []
    enough = threading.Event()

    def slow(event: Any) -> None:  # a subscriber that takes 0.1 s per event
        time.sleep(0.1)
        if isinstance(event, MessageAdded):
            texts_seen.append(event.msg.text)
        if len(texts_seen) == 60:
            enough.set()

    def failed(exc: BaseException) -> None:
        errors.append(exc)
        enough.set()

    h.events.subscribe(on_next=slow, on_error=failed)
    # another subscriber's polls (as any call, or the idle watcher) check who is connected
    h.events.subscribe(on_next=lambda e: None, on_error=failed)
    h.add_many([Msg.user(f"e{i}") for i in range(60)])  # one batch: 6 s of work, 3 s limit
    assert enough.wait(120)
    assert errors == [] and texts_seen == [f"e{i}" for i in range(60)]


def test_an_exit_that_meets_a_restart_waiting_for_room_removes_it(
    url: str, fake_ray: _Ray, hosts: list[MemoryHost], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stop answered (everything saved); the node dies before the exit, and Ray's
    restart waits for a node with room: the exit is bounded by failover_timeout (it
    waited for ever: end-of-session review, SEV2) and the waiting restart is removed."""
    h = connect(url)
    h.add(Msg.user("saved by the stop"))
    actor = fake_ray.actor
    assert actor is not None
    bounded = RemoteRuntime._bounded

    def exit_waits_for_room(self: RemoteRuntime, ref: Any, deadline: float, name: str) -> Any:
        if ref is None or not getattr(ref, "exit_ref", False):
            return bounded(self, ref, deadline, name)
        raise ClusterError("did not come back for stop() within failover_timeout=10s")

    class _ExitRef:
        exit_ref = True

    original = actor.run

    def run(method: str, args: tuple[Any, ...]) -> Any:
        if method == "exit":
            return _ExitRef()  # sent to the restart that waits: never answered
        return original(method, args)

    actor.run = run  # type: ignore[method-assign]
    monkeypatch.setattr(RemoteRuntime, "_bounded", exit_waits_for_room)
    h.stop()  # returns: the stop's answer acknowledged everything
    assert actor.ended and fake_ray.killed == 1
    assert _restored(url, hosts) == ["saved by the stop"]

"""A handle meeting an actor that ends: connects during an idle release, streams
across a stop or a release.  In this process, on the suite's real PostgreSQL.

The hosting actor's class runs here (``MemoryHost``), reached through a
stand-in for Ray's actor handle that runs each method as it is sent and,
once the host ended (stopped or released), answers as Ray answers for a dead
actor (``ActorDiedError``).  Ray's lookup by name (``ray.get_actor``) and
get-or-create (``_get_or_create``) are replaced by what the test says is
running, and count what they are asked.  Found by a hostile test of the
second round.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import ray
from ray._private import worker as ray_worker
from ray.exceptions import ActorDiedError, RayActorError

from actormem.cluster import ClusterConfigError, ClusterError, RemoteRuntime
from actormem.cluster import _connect as connect_module
from actormem.cluster._host import MemoryHost
from actormem.cluster._spec import AgentSpec, make_spec
from actormem.events import Event, MessageAdded
from actormem.messages import Msg
from actormem.models.embedders import HashEmbedder
from actormem.store import Namespace
from tests._postgres import pg_url

ALICE = Namespace(user_id="alice", agent_id="helper")


class _Dead:
    """What ``.remote()`` answers once the actor ended: ``ray.get`` raises it."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


class _Method:
    def __init__(self, actor: _Actor, name: str) -> None:
        self.actor, self.name = actor, name

    def options(self, **_: Any) -> _Method:
        return self

    def remote(self, *args: Any) -> Any:
        if self.actor.ended():
            return _Dead(ActorDiedError())
        return getattr(self.actor.host, self.name)(*args)


class _Actor:
    """A Ray actor handle's stand-in: every call runs in ``host`` as it is sent."""

    def __init__(self, host: MemoryHost) -> None:
        self.host = host

    def ended(self) -> bool:
        return self.host._closed

    def __getattr__(self, name: str) -> _Method:
        return _Method(self, name)


def _get(ref: Any) -> Any:
    if isinstance(ref, _Dead):
        raise ref.error
    return ref


@pytest.fixture
def url(pg_dsn: str) -> str:
    return pg_url(pg_dsn)


def spec(url: str, idle_release: float | None = None) -> AgentSpec:
    return make_spec("races", ALICE, url, url, False, {"embedder": HashEmbedder(32)}, idle_release)


class _Ray:
    """What Ray is asked while a test runs: the lookups by name, the get-or-creates."""

    def __init__(self) -> None:
        self.running: _Actor | None = None
        self.created: list[AgentSpec] = []
        #: what the next get-or-creates hand back (then ``running``)
        self.next: list[Any] = []
        self.hosts: list[MemoryHost] = []

    def get_actor(self, name: str, namespace: str | None = None) -> Any:
        if self.running is None or self.running.ended():
            raise ValueError(f"Failed to look up actor with name {name!r}")
        return self.running

    def get_or_create(self, spec: AgentSpec, connect: Any) -> Any:
        self.created.append(spec)
        if self.next:
            return self.next.pop(0)
        if self.running is None or self.running.ended():
            host = MemoryHost(spec)
            self.hosts.append(host)
            self.running = _Actor(host)
        return self.running


@pytest.fixture
def fake_ray(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Ray]:
    fake = _Ray()
    monkeypatch.setattr(ray, "is_initialized", lambda: True)
    monkeypatch.setattr(ray, "nodes", lambda: [{"Alive": True}])
    monkeypatch.setattr(ray, "get", _get)
    monkeypatch.setattr(ray, "wait", lambda refs, **_: (list(refs), []))  # answered as sent
    monkeypatch.setattr(ray, "get_actor", fake.get_actor)
    monkeypatch.setattr(connect_module, "_get_or_create", fake.get_or_create)
    monkeypatch.setattr(RemoteRuntime, "_get", lambda self, ref: _get(ref))
    yield fake
    for h in fake.hosts:
        if not h._closed:
            h._rt.close()
    # nothing here may start Ray (it would bind the host's external interface)
    assert not ray_worker.global_worker.connected


def connect(url: str, idle_release: float | None = None) -> RemoteRuntime:
    return RemoteRuntime.connect(
        "races",
        namespace=ALICE,
        store=url,
        sessions=url,
        embedder=HashEmbedder(32),
        idle_release=idle_release,
        failover_timeout=10,
    )


# -- a connect that meets an ending actor ----------------------------------------------


def _ending() -> _Actor:
    """An actor Ray's get-or-create handed back as it ended (released between the two)."""
    gone = _Actor.__new__(_Actor)
    gone.ended = lambda: True  # type: ignore[method-assign]
    return gone


def test_a_connect_that_meets_an_ending_actor_reaches_the_agent_again(
    url: str, fake_ray: _Ray
) -> None:
    fake_ray.next = [_ending(), _ending()]  # released twice in a row while connecting
    h = connect(url)
    assert len(fake_ray.created) == 3
    h.add(Msg.user("reached"))
    assert [m.text for m in h.messages()] == ["reached"]


def test_a_connect_that_meets_only_ending_actors_gives_up_saying_so(
    url: str, fake_ray: _Ray
) -> None:
    fake_ray.next = [_ending() for _ in range(10)]
    with pytest.raises(ClusterError, match="ended before answering 5 times") as err:
        connect(url)
    assert not isinstance(err.value, ClusterConfigError)
    assert isinstance(err.value.__cause__, RayActorError)
    assert len(fake_ray.created) == 5


def test_an_actor_that_could_not_start_is_not_created_again(url: str, fake_ray: _Ray) -> None:
    text = (
        "The actor died because of an error raised in its creation task\n"
        "actormem.cluster._spec.ClusterConfigError: session 'races' belongs to another "
        "namespace's agent, not to ('alice', 'helper', '', '')"
    )
    failed = RayActorError(error_msg=text, actor_init_failed=True)

    class _Failed:
        class describe:  # an actor method's stand-in
            @staticmethod
            def remote(_: Any) -> _Dead:
                return _Dead(failed)

    fake_ray.next = [_Failed()]
    with pytest.raises(ClusterConfigError, match="could not start: ClusterConfigError") as err:
        connect(url)
    assert err.value.__cause__ is failed
    assert len(fake_ray.created) == 1


# -- streams across a stop and a release ---------------------------------------------------


class _Subscriber:
    def __init__(self) -> None:
        self.events: list[Event] = []
        self.completed = threading.Event()
        self.errors: list[BaseException] = []

    def subscribe(self, h: RemoteRuntime) -> Any:
        return h.events.subscribe(
            on_next=self.events.append,
            on_error=self.errors.append,
            on_completed=self.completed.set,
        )


def _stop_in_the_actor(fake_ray: _Ray) -> Callable[[], Any]:
    assert fake_ray.running is not None
    return fake_ray.running.host.stop


class _EndsWhenItsStopReturns(_Actor):
    """Answers polls until ``stop()`` returned, as a Ray actor serves its other
    concurrency group until ``exit_actor`` -- not from the runtime's close on."""

    def __init__(self, host: MemoryHost, exited: threading.Event) -> None:
        super().__init__(host)
        self.exited = exited

    def ended(self) -> bool:
        return self.exited.is_set()


def test_a_stop_completes_a_connected_stream_after_its_last_event(url: str, fake_ray: _Ray) -> None:
    h = connect(url)
    other = connect(url)  # another handle, subscribed
    assert fake_ray.running is not None
    host = fake_ray.running.host
    exited = threading.Event()
    fake_ray.running = _EndsWhenItsStopReturns(host, exited)  # what the subscription reaches
    sub = _Subscriber()
    stopping = threading.Event()
    slow = sub.events.append

    def on_next(event: Event) -> None:  # a slow subscriber: still busy when the stop runs
        stopping.wait(60)
        slow(event)

    other.events.subscribe(
        on_next=on_next, on_error=sub.errors.append, on_completed=sub.completed.set
    )
    h.add_many([Msg.user(f"m{i}") for i in range(50)])

    def stop_in_the_actor() -> None:  # h.stop(), in the actor: the process exits as it returns
        host.stop()
        exited.set()

    stop = threading.Thread(target=stop_in_the_actor)
    stop.start()
    stopping.set()
    stop.join(60)
    assert not stop.is_alive()  # it returned once the subscriber had taken its end
    assert sub.completed.wait(60)
    assert sub.errors == []
    texts = [e.msg.text for e in sub.events if isinstance(e, MessageAdded)]
    assert texts == [f"m{i}" for i in range(50)]  # every event, in order, then completed


def test_a_subscription_never_brings_a_stopped_agent_back(url: str, fake_ray: _Ray) -> None:
    h = connect(url)
    other = connect(url)
    h.add(Msg.user("kept"))
    _stop_in_the_actor(fake_ray)()
    created = len(fake_ray.created)
    sub = _Subscriber()
    disposable = sub.subscribe(other)  # another handle subscribes after the stop
    assert sub.completed.is_set()  # at once, as subscribing to a closed local runtime
    assert sub.errors == [] and sub.events == []
    disposable.dispose()
    assert len(fake_ray.created) == created  # nothing was created
    assert fake_ray.running is not None and fake_ray.running.ended()
    assert [m.text for m in other.messages()] == ["kept"]  # a call does bring it back


def test_an_agent_is_not_released_while_a_subscriber_is_connected(url: str, fake_ray: _Ray) -> None:
    h = connect(url, idle_release=0.01)
    sub = _Subscriber()
    subscription = sub.subscribe(h)
    h.add(Msg.user("while listened to"))
    assert fake_ray.running is not None
    host = fake_ray.running.host
    host._last_call -= 60  # idle for a minute
    assert host.release_if_idle() is False  # a subscriber listens: the agent stays
    assert not host._closed and not sub.completed.is_set() and sub.errors == []
    subscription.dispose()
    assert host.release_if_idle() is True  # nobody listens: released, everything saved
    assert host._closed
    late = _Subscriber()
    late.subscribe(h)  # a released agent is not brought back by a subscription either
    assert late.completed.is_set()
    assert [m.text for m in h.messages()] == ["while listened to"]  # a call brings it back


class _Parks:
    """Counts the stop's waits in ``drained()`` (each a point where it cannot go on alone)."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.count = 0
        self.stopper: threading.Thread | None = None
        self.exited = False

    def parked(self) -> None:
        with self.cond:
            self.count += 1
            self.cond.notify_all()

    def exit(self) -> None:
        with self.cond:
            self.exited = True
            self.cond.notify_all()

    def after(self, count: int) -> None:
        """Until the stop parked again after ``count``, or its actor exited."""
        with self.cond:
            assert self.cond.wait_for(lambda: self.count > count or self.exited, 60)


class _WatchedCondition(threading.Condition):
    def __init__(self, parks: _Parks) -> None:
        super().__init__()
        self.parks = parks

    def wait(self, timeout: float | None = None) -> bool:
        if threading.current_thread() is self.parks.stopper:
            self.parks.parked()
        return super().wait(timeout)


class _Reply:
    """A poll's answer on its way back: lost when the actor's process exits first."""

    def __init__(self, value: Any, parks: _Parks, count: int) -> None:
        self.value, self.parks, self.count = value, parks, count


class _ExitingActor(_Actor):
    """Ends when its process would: once ``stop()`` returned (Ray's ``exit_actor``), not
    at the runtime's close.  The end of a stream's answer travels back only once the stop
    waits again (it cannot exit then) or has exited (then the answer is lost, as Ray
    fails what an actor that exits has not answered)."""

    def __init__(self, host: MemoryHost, parks: _Parks) -> None:
        super().__init__(host)
        self.parks = parks

    def ended(self) -> bool:
        return self.parks.exited

    def __getattr__(self, name: str) -> _Method:
        method = _Method(self, name)
        if name != "events_poll":
            return method
        parks = self.parks

        class _Poll(_Method):
            def remote(self, *args: Any) -> Any:
                answer = method.remote(*args)
                if isinstance(answer, list) and answer and answer[-1][1] is None:
                    return _Reply(answer, parks, parks.count)  # the end: its way back races
                return answer

        return _Poll(self, name)


def test_a_subscriber_that_received_everything_completes_when_the_stop_crosses_its_poll(
    url: str, fake_ray: _Ray, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = connect(url)
    other = connect(url)  # another handle's subscriber: the stop is not its own
    assert fake_ray.running is not None
    host = fake_ray.running.host
    parks = _Parks()
    host._buffer._cond = _WatchedCondition(parks)
    fake_ray.running = _ExitingActor(host, parks)  # what the subscription looks up

    def get(self: RemoteRuntime, ref: Any) -> Any:
        if isinstance(ref, _Reply):
            ref.parks.after(ref.count)  # the stop goes on first, as far as it can alone
            if ref.parks.exited:
                raise ActorDiedError()
            return ref.value
        return _get(ref)

    monkeypatch.setattr(RemoteRuntime, "_get", get)
    sub = _Subscriber()
    got_all = threading.Event()

    def on_next(event: Event) -> None:
        sub.events.append(event)
        if sum(isinstance(e, MessageAdded) for e in sub.events) == 20:
            got_all.set()

    other.events.subscribe(
        on_next=on_next, on_error=sub.errors.append, on_completed=sub.completed.set
    )
    h.add_many([Msg.user(f"m{i}") for i in range(20)])
    assert got_all.wait(60)

    def stop() -> None:  # h.stop(), in the actor: the process exits as it returns
        host.stop()
        parks.exit()

    stopper = threading.Thread(target=stop)
    parks.stopper = stopper
    stopper.start()
    stopper.join(60)
    assert not stopper.is_alive()
    assert sub.completed.wait(60), sub.errors
    assert sub.errors == []  # it lost nothing: completed, not EventsLostError
    texts = [e.msg.text for e in sub.events if isinstance(e, MessageAdded)]
    assert texts == [f"m{i}" for i in range(20)]
    assert host._buffer.connected() == 0  # the stop ended the actor after its confirmation

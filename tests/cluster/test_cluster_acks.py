"""What a returned call acknowledges through a handle, in this process (no Ray).

The hosting actor's class runs here (``MemoryHost``; building a second one on
the same spec is Ray's restart) and, for the handle's bookkeeping, a stand-in
for the Ray actor handle that runs each call in the host as it arrives and
lets the test hold back the moment its answer reaches the caller.  Real
PostgreSQL (the suite's).  Found by a hostile test of the second round.
"""

from __future__ import annotations

import asyncio
import pickle
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from actormem.cluster import AgentRestartedError, ClusterConfigError, ClusterError
from actormem.cluster._handle import RemoteRuntime
from actormem.cluster._host import MemoryHost
from actormem.cluster._spec import AgentSpec, check_actor_options, make_spec
from actormem.cluster._wire import unpack
from actormem.events import RecordingFailed
from actormem.messages import MessageError, Msg
from actormem.models.embedders import HashEmbedder
from actormem.recorder import RecorderConfig
from actormem.store import Namespace, PostgresStore
from tests._postgres import pg_url

ALICE = Namespace(user_id="alice", agent_id="helper")


@pytest.fixture
def url(pg_dsn: str) -> str:
    return pg_url(pg_dsn)


def spec(url: str, *, write_through: bool = False, **more: Any) -> AgentSpec:
    options = {"embedder": HashEmbedder(32), "recorder": RecorderConfig(batch_seconds=0.05)}
    options.update(more)
    return make_spec("acks", ALICE, url, url, write_through, options)


@pytest.fixture
def hosts() -> Iterator[list[MemoryHost]]:
    made: list[MemoryHost] = []
    yield made
    for h in made:
        h._rt.close()


def fleeting(h: MemoryHost) -> Any:
    return h.call("fleeting_get", (None,), {}, None, False)[1]


@pytest.mark.parametrize("hook", ["on_turn_end", "on_session_end"])
def test_with_write_through_a_returned_hook_survives_a_restart(
    url: str, hosts: list[MemoryHost], hook: str
) -> None:
    first = MemoryHost(spec(url, write_through=True))
    hosts.append(first)
    first.call("fleeting_set", ({"plan": "step 1"},), {}, None, False)
    first.call(hook, (), {}, None, False)  # clears the scratchpad, and returned
    assert not fleeting(first)
    again = MemoryHost(spec(url, write_through=True))  # the node died right after
    hosts.append(again)
    assert not fleeting(again)  # the cleared scratchpad, not the one before the hook


class _Answer:
    """What ``.remote()`` returns: the host's answer, released to the caller at ``gate``."""

    def __init__(self, value: bytes, gate: threading.Event | None) -> None:
        self.value, self.gate = value, gate


class _StandIn:
    """A Ray actor handle's stand-in: every call runs in ``host`` as it is sent."""

    def __init__(self, host: MemoryHost, hold: dict[str, threading.Event]) -> None:
        self.host, self.hold = host, hold
        self.ran: dict[str, threading.Event] = {}

    def __getattr__(self, method: str) -> Any:
        stand_in = self

        class _Method:
            @staticmethod
            def remote(*args: Any) -> _Answer:
                value = getattr(stand_in.host, method)(*args)
                name = unpack(args[0])[0] if method == "call_packed" else method
                stand_in.ran.setdefault(name, threading.Event()).set()
                return _Answer(value, stand_in.hold.get(name))

        return _Method()


def _get(self: RemoteRuntime, ref: _Answer) -> Any:
    if ref.gate is not None:
        assert ref.gate.wait(60)
    return ref.value


def _handle(
    url: str, hosts: list[MemoryHost], monkeypatch: pytest.MonkeyPatch, actor_of: Any
) -> tuple[AgentSpec, RemoteRuntime, Any]:
    """A handle on a host in this process, reached through ``actor_of(host)``."""
    sp = spec(url)
    host = MemoryHost(sp)
    hosts.append(host)
    monkeypatch.setattr(RemoteRuntime, "_get", _get)
    actor = actor_of(host)
    connect = {"failover_timeout": 5.0, "max_restarts": -1, "actor_options": {}}
    return sp, RemoteRuntime(actor, sp, host.describe(sp), connect), actor


def test_a_flush_answered_after_an_add_that_ran_after_it_acknowledges_nothing(
    url: str, hosts: list[MemoryHost], monkeypatch: pytest.MonkeyPatch
) -> None:
    answer_flush = threading.Event()
    sp, h, actor = _handle(
        url, hosts, monkeypatch, lambda host: _StandIn(host, {"flush": answer_flush})
    )
    h.add(Msg.user("acknowledged by the flush"))
    flusher = threading.Thread(target=h.flush)
    flusher.start()
    actor.ran.setdefault("flush", threading.Event())
    assert actor.ran["flush"].wait(60)  # the flush ran in the actor; its answer is held
    h.add(Msg.user("added after the flush ran"))  # another thread's add, answered first
    answer_flush.set()
    flusher.join(60)
    assert not flusher.is_alive()
    assert not h.acknowledged  # the flush did not cover the add
    # the node dies: the restarted agent has only what the flush saved, and says so
    again = MemoryHost(sp)
    hosts.append(again)
    h._actor = _StandIn(again, {})
    with pytest.raises(AgentRestartedError):
        h.messages()
    assert [m.text for m in h.messages()] == ["acknowledged by the flush"]


def test_a_quiet_flush_acknowledges_everything_before_it(
    url: str, hosts: list[MemoryHost], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, h, _ = _handle(url, hosts, monkeypatch, lambda host: _StandIn(host, {}))
    h.add(Msg.user("one"))
    assert not h.acknowledged
    h.flush()
    assert h.acknowledged


@pytest.mark.parametrize("option", ["max_concurrency", "concurrency_groups", "max_pending_calls"])
def test_options_that_would_run_an_agents_calls_at_once_are_refused(option: str) -> None:
    with pytest.raises(ClusterConfigError, match=option):
        check_actor_options({option: 4})


class _Client:
    """An embedder-like client holding a lock, as the shipped HTTP clients do."""

    def __init__(self) -> None:
        self.lock = threading.Lock()


def test_an_option_that_cannot_travel_is_refused_by_name_without_the_dsn() -> None:
    dsn = "postgresql://alice:S3cretPW@db.example/mem"
    with pytest.raises(ClusterConfigError) as err:
        make_spec("s1", ALICE, dsn, dsn, False, {"embedder": _Client()})
    text = str(err.value)
    assert "embedder=" in text and "_Client" in text and "pickle" in text
    assert "S3cretPW" not in text and dsn not in text


def test_after_another_handles_stop_saved_everything_a_handle_with_changes_goes_on(
    url: str, hosts: list[MemoryHost]
) -> None:
    first = MemoryHost(spec(url))
    hosts.append(first)
    was = first.incarnation
    first.call("add", (Msg.user("from a handle that did not flush"),), {}, None, False)
    first.shutdown()  # another handle's stop(): flushes and saves everything first
    again = MemoryHost(spec(url))  # the next call of any handle re-creates the agent
    hosts.append(again)
    # the handle's changes were on the stopped incarnation: nothing of them is lost,
    # so its next call is answered, not refused with AgentRestartedError
    again.call("add", (Msg.user("and it goes on"),), {}, was, False)
    assert [m.text for m in again.call("messages", (), {}, None, False)[1]] == [
        "from a handle that did not flush",
        "and it goes on",
    ]


#: What the current incarnation restores after :func:`_cut_off`, and must keep restoring.
ACKED = ["one", "acknowledged by the new incarnation"]


def _cut_off(url: str, hosts: list[MemoryHost], **more: Any) -> MemoryHost:
    """An agent that flushed, then was restarted elsewhere while its old node was cut off
    (still running); the new incarnation flushed too.  Returns the old one."""
    old = MemoryHost(spec(url, **more))
    hosts.append(old)
    old.call("add", (Msg.user("one"),), {}, None, False)
    old.call("flush", (), {}, None, False)
    new = MemoryHost(spec(url, **more))
    hosts.append(new)
    new.call("add", (Msg.user("acknowledged by the new incarnation"),), {}, None, False)
    new.call("flush", (), {}, None, False)
    return old


def test_a_stale_incarnation_cannot_take_its_session_back_with_load_session(
    url: str, hosts: list[MemoryHost]
) -> None:
    old = _cut_off(url, hosts)
    with pytest.raises(AgentRestartedError, match="superseded"):
        old.call("load_session", ("acks",), {}, None, False)
    with pytest.raises(AgentRestartedError, match="superseded"):
        old.call("flush", (), {}, None, False)
    again = MemoryHost(spec(url))  # the new incarnation's node dies too
    hosts.append(again)
    assert [m.text for m in again.call("messages", (), {}, None, False)[1]] == ACKED


def test_another_agent_saving_over_a_session_keeps_its_fencing(
    url: str, hosts: list[MemoryHost]
) -> None:
    old = _cut_off(url, hosts)
    other = MemoryHost(make_spec("other", ALICE, url, url, False, {"embedder": HashEmbedder(32)}))
    hosts.append(other)
    other.call("load_session", ("acks",), {}, None, False)
    other.call("save_session", ("acks",), {}, None, False)  # same namespace: allowed
    old.call("add", (Msg.user("stale"),), {}, None, False)
    with pytest.raises(AgentRestartedError, match="superseded"):
        old.call("flush", (), {}, None, False)
    again = MemoryHost(spec(url))
    hosts.append(again)
    assert [m.text for m in again.call("messages", (), {}, None, False)[1]] == ACKED


def _stored(url: str) -> list[str]:
    """The contents of every memory of the agent's namespace, read by a store of its own."""
    with PostgresStore(url, embedder=HashEmbedder(32), touch_flush_interval=None) as store:
        return [m.content for m in store.list(ALICE, limit=1000)]


def test_a_stale_incarnations_save_fact_is_refused_and_not_stored(
    url: str, hosts: list[MemoryHost]
) -> None:
    old = _cut_off(url, hosts)
    old_fact = old.call("get_fact", ("drink",), {}, None, False)[1]
    with pytest.raises(AgentRestartedError, match="superseded") as err:
        old.call("save_fact", ("drink", "coffee"), {}, None, False)
    assert "save_fact" in str(err.value)
    assert old_fact is None and not any("coffee" in c for c in _stored(url))
    # and it ended: it answers nothing more
    with pytest.raises(AgentRestartedError, match="superseded"):
        old.call("messages", (), {}, None, False)
    new = hosts[1]  # the current incarnation writes on
    new.call("save_fact", ("drink", "tea"), {}, None, False)
    assert new.call("get_fact", ("drink",), {}, None, False)[1] == "tea"


def test_a_stale_incarnations_recorded_turns_are_refused_at_its_flush_and_not_stored(
    url: str, hosts: list[MemoryHost]
) -> None:
    old = _cut_off(url, hosts)
    before = _stored(url)
    old.call("record", ([Msg.user("stale turn about zanzibar")],), {}, None, False)
    with pytest.raises(AgentRestartedError, match="superseded"):
        old.call("flush", (), {}, None, False)
    assert _stored(url) == before
    new = hosts[1]
    new.call("record", ([Msg.user("current turn about kyoto")],), {}, None, False)
    new.call("flush", (), {}, None, False)
    assert any("kyoto" in c for c in _stored(url))
    assert not any("zanzibar" in c for c in _stored(url))
    again = MemoryHost(spec(url))  # the current incarnation's session is intact too
    hosts.append(again)
    assert [m.text for m in again.call("messages", (), {}, None, False)[1]] == ACKED


def test_a_stale_incarnations_tool_write_is_refused_and_not_stored(
    url: str, hosts: list[MemoryHost]
) -> None:
    old = _cut_off(url, hosts, long_term="both")
    args = {"content": "the user lives in zanzibar"}
    with pytest.raises(AgentRestartedError, match="superseded"):
        old.call("call_tool", ("record_to_memory", args), {}, None, False)
    assert not any("zanzibar" in c for c in _stored(url))


def test_a_recorder_batch_refused_between_calls_ends_the_stale_incarnation(
    url: str, hosts: list[MemoryHost]
) -> None:
    old = _cut_off(url, hosts)
    failed = threading.Event()
    old._rt.subscribe(lambda e: failed.set(), RecordingFailed)
    old.call("record", ([Msg.user("stale turn about zanzibar")],), {}, None, False)
    assert failed.wait(60)  # the recorder's own batch met the fence (no retry, no loop)
    assert old._rt.recording_stats()["failed"] == 1
    with pytest.raises(AgentRestartedError, match="superseded"):
        old.call("messages", (), {}, None, False)  # even a read: the incarnation ended
    assert not any("zanzibar" in c for c in _stored(url))


def test_a_take_over_starts_past_a_fence_left_ahead_of_the_session(
    url: str, hosts: list[MemoryHost]
) -> None:
    old = _cut_off(url, hosts)  # session and fence at epoch 2
    holder = old._holder()
    with PostgresStore(url, embedder=HashEmbedder(32), touch_flush_interval=None) as store:
        store.fence(holder, 7)  # a take-over that died after raising the fence
    again = MemoryHost(spec(url))
    hosts.append(again)
    assert again._epoch == 8
    again.call("save_fact", ("drink", "tea"), {}, None, False)
    assert [m.text for m in again.call("messages", (), {}, None, False)[1]] == ACKED


@pytest.mark.parametrize("ending", ["stop", "shutdown"])
def test_a_stale_incarnations_stop_saves_nothing_and_says_it_was_superseded(
    url: str, hosts: list[MemoryHost], ending: str
) -> None:
    old = _cut_off(url, hosts)
    old.call("record", ([Msg.user("stale turn about zanzibar")],), {}, None, False)
    old.call("add", (Msg.user("stale message"),), {}, None, False)
    with pytest.raises(AgentRestartedError, match="superseded"):
        getattr(old, ending)(30)  # its flush meets the store's fence: not a RecordingError
    assert not any("zanzibar" in c for c in _stored(url))
    again = MemoryHost(spec(url))  # the current incarnation's session is untouched
    hosts.append(again)
    assert [m.text for m in again.call("messages", (), {}, None, False)[1]] == ACKED


class _NeverAnswers:
    """A stand-in whose calls run in ``host`` as they are sent and whose answers never
    reach the caller (awaited: a future left pending; ``ran`` is set once it ran)."""

    def __init__(self, host: MemoryHost, ran: asyncio.Event) -> None:
        self.host, self.ran = host, ran

    def __getattr__(self, method: str) -> Any:
        stand_in = self

        class _Method:
            @staticmethod
            def remote(*args: Any) -> asyncio.Future[bytes]:
                getattr(stand_in.host, method)(*args)
                stand_in.ran.set()
                return asyncio.get_running_loop().create_future()

        return _Method()


CANCELLED = [
    ("aadd", (Msg.user("cancelled, but the actor added it"),)),
    ("arecord", ([Msg.user("cancelled turn about the locker code")],)),
]


@pytest.mark.parametrize(("method", "args"), CANCELLED, ids=["aadd", "arecord"])
def test_a_cancelled_call_the_actor_ran_is_not_acknowledged(
    url: str,
    hosts: list[MemoryHost],
    monkeypatch: pytest.MonkeyPatch,
    method: str,
    args: tuple[Any, ...],
) -> None:
    sp, h, actor = _handle(url, hosts, monkeypatch, lambda host: _StandIn(host, {}))
    h.add(Msg.user("flushed"))
    h.flush()
    assert h.acknowledged

    async def cancel_once_it_ran() -> None:
        ran = asyncio.Event()
        h._actor = _NeverAnswers(actor.host, ran)
        task = asyncio.ensure_future(getattr(h, method)(*args))
        await ran.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel_once_it_ran())
    h._actor = actor
    assert not h.acknowledged
    h.save_session()  # saves the added message; a recorded turn waits for flush()
    assert h.acknowledged is (method == "aadd")
    if method == "aadd":
        return
    again = MemoryHost(sp)  # the node dies: the restarted agent says so, once
    hosts.append(again)
    h._actor = _StandIn(again, {})
    with pytest.raises(AgentRestartedError):
        h.messages()
    assert h.acknowledged


def test_an_interrupted_add_the_actor_ran_is_reported_after_a_failover(
    url: str, hosts: list[MemoryHost], monkeypatch: pytest.MonkeyPatch
) -> None:
    sp, h, _ = _handle(url, hosts, monkeypatch, lambda host: _StandIn(host, {}))
    h.add(Msg.user("flushed"))
    h.flush()

    def interrupted(self: RemoteRuntime, ref: _Answer) -> Any:
        raise KeyboardInterrupt  # Ctrl-C while waiting for the answer: the add ran

    monkeypatch.setattr(RemoteRuntime, "_get", interrupted)
    with pytest.raises(KeyboardInterrupt):
        h.add(Msg.user("interrupted, but the actor added it"))
    monkeypatch.setattr(RemoteRuntime, "_get", _get)
    assert not h.acknowledged
    again = MemoryHost(sp)  # the node dies before anything saved the add
    hosts.append(again)
    h._actor = _StandIn(again, {})
    with pytest.raises(AgentRestartedError):
        h.messages()
    assert [m.text for m in h.messages()] == ["flushed"]


def test_a_refused_add_leaves_the_handle_acknowledged(
    url: str, hosts: list[MemoryHost], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, h, _ = _handle(url, hosts, monkeypatch, lambda host: _StandIn(host, {}))
    h.flush()
    with pytest.raises(MessageError, match="takes a Msg"):
        h.add("not a message")
    assert h.acknowledged  # the runtime refused it: nothing changed


def test_a_closed_handle_is_not_sent_to_another_process(
    url: str, hosts: list[MemoryHost], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, h, _ = _handle(url, hosts, monkeypatch, lambda host: _StandIn(host, {}))
    h._closed = True  # close() without an actor to wait for
    with pytest.raises(ClusterError, match="closed RemoteRuntime handle"):
        pickle.dumps(h)


def test_a_handle_without_a_ray_connection_never_starts_one() -> None:
    """ray.get starts a local Ray (bound to the host's external interface) when none is
    connected: a handle used after ray.shutdown() -- or a test's event pump outliving
    its stand-in for Ray, which did start one -- gets a ClusterError instead."""
    from ray._private import worker

    h = RemoteRuntime.__new__(RemoteRuntime)
    with pytest.raises(ClusterError, match="Ray connection is gone"):
        h._get(object())
    assert not worker.global_worker.connected

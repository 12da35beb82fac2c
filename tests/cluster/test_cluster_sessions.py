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
from actormem.state import StateModule
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
    import psycopg

    h = host()
    _local_save(url, "theirs", "bob's secret", BOB)
    with psycopg.connect(url, autocommit=True) as conn:  # damaged in the database itself
        conn.execute(
            "UPDATE actormem_sessions SET document = %s WHERE session_id = 'theirs'",
            (b'{"format": "actormem.session", "schema_version": 1, "comp',),
        )
    assert h.session_call("exists", ("theirs",)) is False
    assert h.session_call("delete", ("theirs",)) is False
    with pytest.raises(SessionError, match="'theirs' not found"):
        h.session_call("read", ("theirs",))
    assert h.session_load("theirs", "runtime", True, True) == (h.incarnation, (False, {}))
    with PostgresSession(url) as raw:
        assert raw.exists("theirs")  # still stored: nothing was deleted

    def down(self: PostgresSession) -> Any:
        raise SessionStorageError("the database is unreachable")

    h._rt.session._drop()  # type: ignore[attr-defined]
    monkeypatch.setattr(PostgresSession, "_connection", down)
    for op in ("delete", "exists", "read"):
        with pytest.raises(SessionStorageError):
            h.session_call(op, ("theirs",))
    with pytest.raises(SessionStorageError):
        h.session_load("theirs", "runtime", True, True)


# -- one read: whose a session is is checked on the document that is used ------------------


def _after_read(monkeypatch: pytest.MonkeyPatch, sid: str, nth: int, then: Any) -> list[str]:
    """Run ``then()`` once, right after the ``nth`` read of session ``sid`` by anyone
    (``exists`` or a fetch of its document): a moment between an owner check made on
    one read and a later read that would use the document.  Answers the reads made
    up to then (fewer than ``nth``: the hook never ran)."""
    reads: list[str] = []

    def wrap(name: str) -> Any:
        real = getattr(PostgresSession, name)

        def read(self: PostgresSession, session_id: str, *args: Any, **kwargs: Any) -> Any:
            result = real(self, session_id, *args, **kwargs)
            if session_id == sid and len(reads) < nth:
                reads.append(name)
                if len(reads) == nth:
                    then()
            return result

        return read

    monkeypatch.setattr(PostgresSession, "exists", wrap("exists"))
    monkeypatch.setattr(PostgresSession, "_fetch", wrap("_fetch"))
    return reads


def _at_every_read(
    monkeypatch: pytest.MonkeyPatch,
    sid: str,
    then: Any,
    setup: Any,
    op: Any,
    check: Any,
    *,
    may_read_none: bool = False,
) -> None:
    """For nth = 1, 2, ...: ``setup(nth)`` gives an agent, ``op(agent)`` runs with
    ``then()`` hooked after its nth read of ``sid``, ``check(agent, answer, fired)``;
    until an ``op`` makes fewer reads than nth (the hook did not fire).  An op that
    reads nothing this way fails, unless ``may_read_none`` (a delete that reads in
    its own transaction: tested by the lock it holds)."""
    nth = 0
    while True:
        nth += 1
        agent = setup(nth)
        reads = _after_read(monkeypatch, sid, nth, then)
        try:
            answer: Any = op(agent)
        except SessionError as exc:  # a read of an absent id: "not found", as for any
            assert "not found" in str(exc) and not isinstance(exc, ClusterConfigError)
            answer = exc
        finally:
            monkeypatch.undo()
        fired = len(reads) == nth
        check(agent, answer, fired)
        if not fired:
            assert nth > 1 or may_read_none, "the hook never ran: nothing read the session"
            return


def _bob_saves_first(url: str, bob: MemoryHost, sid: str) -> Any:
    """Another namespace's agent saves ``sid`` for the first time (any earlier row of
    that id deleted first, as its owner's delete would)."""

    def save() -> None:
        _clear(url, sid)
        bob.session_load(sid, "runtime", False, True)  # bob saw it absent: his first save
        bob.call("save_session", (sid,), {}, None, False)

    return save


def _clear(url: str, sid: str) -> None:
    with PostgresSession(url) as raw:
        raw.delete(sid)


def _bobs(url: str, sid: str) -> bool:
    with PostgresSession(url) as raw:
        stored = raw.read(sid)
    return "bob's secret" in str(stored["runtime"]) and stored["cluster"]["namespace"] == list(
        BOB.key()
    )


LOADS = {
    "session_load": lambda h, sid: h.session_load(sid, "runtime", True, True)[1],
    "session_load_not_strict": lambda h, sid: h.session_load(sid, "runtime", False, True)[1],
    "load_session": lambda h, sid: h.call("load_session", (sid,), {}, None, False)[1],
}


@pytest.mark.parametrize("stored_before", [False, True], ids=["absent", "alices"])
@pytest.mark.parametrize("how", sorted(LOADS))
def test_another_namespaces_save_between_the_owner_check_and_the_load_is_never_loaded(
    host: Any, url: str, monkeypatch: pytest.MonkeyPatch, how: str, stored_before: bool
) -> None:
    """A load of another id reads the session once: another namespace's first save of
    that id landing after any of the agent's reads of it is either not seen (the id
    is absent, or alice's) or seen and refused -- never loaded into alice's agent."""
    bob = host(BOB, "bob-1")
    add(bob, "bob's secret")

    def setup(nth: int) -> MemoryHost:
        _clear(url, "x")
        alice: MemoryHost = host(ALICE, f"a{nth}")
        add(alice, "alice's own")
        if stored_before:
            alice.call("save_session", ("x",), {}, None, False)
        return alice

    def check(alice: MemoryHost, answer: Any, fired: bool) -> None:
        assert "bob's secret" not in str(answer)
        assert texts(alice) == ["alice's own"]  # nothing of bob's, alice's state kept
        if fired:  # bob's now: alice never saves over it
            with pytest.raises(ClusterConfigError, match=REFUSED):
                alice.call("save_session", ("x",), {}, None, False)
            assert _bobs(url, "x")

    op = LOADS[how]
    _at_every_read(
        monkeypatch, "x", _bob_saves_first(url, bob, "x"), setup, lambda a: op(a, "x"), check
    )


@pytest.mark.parametrize("op", ["read", "delete", "exists"])
def test_a_read_or_delete_of_another_id_never_reaches_a_session_saved_in_between(
    host: Any, url: str, monkeypatch: pytest.MonkeyPatch, op: str
) -> None:
    """The same for ``read``, ``delete`` and ``exists``: alice's session ``x``
    replaced by bob's first save after any of alice's reads of it is neither shown
    to her nor deleted."""
    bob = host(BOB, "bob-1")
    add(bob, "bob's secret")

    def setup(nth: int) -> MemoryHost:
        _clear(url, "x")
        alice: MemoryHost = host(ALICE, f"a{nth}")
        alice.call("save_session", ("x",), {}, None, False)
        return alice

    def check(alice: MemoryHost, answer: Any, fired: bool) -> None:
        assert "bob's secret" not in str(answer)
        if fired:
            assert _bobs(url, "x"), f"{op} deleted or changed bob's session"

    _at_every_read(
        monkeypatch,
        "x",
        _bob_saves_first(url, bob, "x"),
        setup,
        lambda a: a.session_call(op, ("x",)),
        check,
        may_read_none=op == "delete",
    )


def test_a_delete_checks_whose_the_session_is_on_the_row_it_deletes(
    host: Any, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The delete of another id reads the document in its own transaction with the
    row locked: while the owner is checked, no other writer can replace or delete
    that row (another connection's lock request is refused at once), so the
    document checked is the one deleted; another namespace's is never deleted."""
    import psycopg

    from actormem.session import _postgres

    alice = host()
    alice.call("save_session", ("x",), {}, None, False)
    bob = host(BOB, "bob-1")
    add(bob, "bob's secret")
    bob.call("save_session", ("y",), {}, None, False)
    real = _postgres.decode_document
    refused: list[str] = []

    def locked(data: bytes, where: str, decoder: Any) -> Any:
        with (
            psycopg.connect(url, autocommit=True) as other,
            pytest.raises(psycopg.errors.LockNotAvailable),
        ):
            other.execute(
                "SELECT 1 FROM actormem_sessions WHERE session_id = ANY(%s) FOR UPDATE NOWAIT",
                (["x", "y"],),
            )
        refused.append(where)
        return real(data, where, decoder)

    monkeypatch.setattr(_postgres, "decode_document", locked)
    assert alice.session_call("delete", ("x",)) is True
    assert alice.session_call("delete", ("y",)) is False  # bob's: absent to alice
    monkeypatch.undo()
    assert len(refused) == 2  # both checked with the row locked
    assert _bobs(url, "y")
    assert alice.session_call("exists", ("x",)) is False


def test_an_agent_starting_while_another_namespace_first_saves_its_id_never_loads_it(
    host: Any, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The start (``_restore``): bob's first save of alice's id landing after any of
    alice's reads of it makes her start refused, and is never loaded into her runtime,
    even for a moment."""
    bob = host(BOB, "bob-1")
    add(bob, "bob's secret")
    applied: list[str] = []
    real = MemoryRuntime.load_state_json

    def spy(self: MemoryRuntime, data: Any, strict: bool = True) -> None:
        applied.append(bytes(data).decode())
        real(self, data, strict)

    def start(_: Any) -> Any:
        monkeypatch.setattr(MemoryRuntime, "load_state_json", spy)
        try:
            return host(ALICE, "x")
        except ClusterConfigError as exc:
            return exc

    def check(_: Any, answer: Any, fired: bool) -> None:
        assert not [a for a in applied if "bob's secret" in a]
        if fired:  # bob's save landed during alice's start: refused, as for any of his
            assert isinstance(answer, ClusterConfigError) and REFUSED in str(answer)
            assert _bobs(url, "x")
        else:  # it landed after alice took the id over: alice's
            assert isinstance(answer, MemoryHost)

    _at_every_read(
        monkeypatch,
        "x",
        _bob_saves_first(url, bob, "x"),
        lambda nth: _clear(url, "x"),
        start,
        check,
    )


def test_a_save_that_conflicts_never_saves_over_a_take_over_landing_in_between(
    host: Any, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a refused save (a writer outside the agent saved), the agent reads the
    stored epoch and takes the stored version from ONE read: a newer incarnation's
    take-over landing after any of its reads is seen -- the stale one ends -- and is
    never saved over (on two reads, its version was taken without its epoch seen)."""
    newest: list[MemoryHost] = []

    def setup(nth: int) -> MemoryHost:
        _clear(url, "x")
        first: MemoryHost = host(ALICE, "x")
        add(first, "one")
        first.call("flush", (), {}, None, False)
        with PostgresSession(url) as other:  # a writer outside the agent: the next save conflicts
            other.load("x", {}, strict=False)
            other.put("x", {**other.read("x"), "note": {"by": "other"}})
        add(first, "from the cut-off node")
        return first

    def flush(first: MemoryHost) -> Any:
        try:
            return first.call("flush", (), {}, None, False)
        except AgentRestartedError as exc:
            return exc

    def check(first: MemoryHost, answer: Any, fired: bool) -> None:
        with PostgresSession(url) as raw:
            stored = raw.read("x")
        if fired:  # the take-over landed: the stale one ended, the take-over's save stands
            assert isinstance(answer, AgentRestartedError) and "superseded" in str(answer)
            assert stored["cluster"]["epoch"] == newest[-1]._epoch
            assert texts(newest[-1]) == ["one"]
        else:
            assert stored["cluster"]["epoch"] == first._epoch
        assert first._closed == fired

    _at_every_read(monkeypatch, "x", lambda: newest.append(host(ALICE, "x")), setup, flush, check)


class _Direct:
    """A handle's round trips without Ray: each actor call straight to the host."""

    def __init__(self, host: MemoryHost) -> None:
        self.session_id = host._spec.session_id
        self._actor = self
        self._host = host

    def __getattr__(self, method: str) -> Any:
        call = getattr(self._host, method)

        class Remote:
            @staticmethod
            def remote(*args: Any) -> Any:
                return call(*args)

        return Remote

    def _attempt(self, send: Any, name: str) -> Any:
        return send()


class _Note(StateModule):
    def __init__(self) -> None:
        super().__init__()
        self.text = ""
        self.register_state("text")


def test_a_handles_load_of_components_only_decides_on_one_read(
    host: Any, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``RemoteSessions.load`` of components without the runtime reads the session
    once: deleted after any of its reads, the load answers what that read saw (the
    session, or absent with ``allow_missing``), never "not found" for a session it
    was told exists; another namespace's session is absent to it."""
    from actormem.cluster._remote_state import RemoteSessions

    alice = host()
    sessions = RemoteSessions(_Direct(alice))  # type: ignore[arg-type]

    def setup(nth: int) -> MemoryHost:
        _clear(url, "x")
        alice.session_load("x", "runtime", False, True)  # seen absent: her save is the first
        alice.session_put("x", {"note": {"text": "kept"}}, None)
        return alice

    def load(_: Any) -> Any:
        note = _Note()
        return sessions.load("x", {"note": note}, strict=True, allow_missing=True), note.text

    def check(_: Any, answer: Any, fired: bool) -> None:
        assert answer in ((True, "kept"), (False, "")), answer

    _at_every_read(monkeypatch, "x", lambda: _clear(url, "x"), setup, load, check)
    bob = host(BOB, "bob-1")
    add(bob, "bob's secret")
    bob.session_put("y", {"note": {"text": "bob's note"}}, None)
    note = _Note()
    assert sessions.load("y", {"note": note}, strict=True, allow_missing=True) is False
    with pytest.raises(SessionError, match="not found"):
        sessions.load("y", {"note": note}, strict=True, allow_missing=False)
    assert note.text == ""


def test_an_agent_never_saves_over_another_namespaces_session_of_its_id(
    host: Any, url: str
) -> None:
    """The agent's session is deleted while it runs and another namespace's agent takes
    the id and saves: the first agent's next save meets a version it did not load, and
    must not take that document over (end-of-session review, SEV1: it did)."""
    alice = host()
    add(alice, "alice's")
    alice.call("flush", (), {}, None, False)
    with PostgresSession(url) as outside:
        assert outside.delete("s1")
    bob = host(BOB, "s1")  # its start claims the free id for bob's namespace
    add(bob, "bob's")
    bob.call("flush", (), {}, None, False)  # acknowledged
    add(alice, "alice's second")
    with pytest.raises(ClusterConfigError, match="another namespace"):
        alice.call("flush", (), {}, None, False)
    bob.shutdown()
    assert texts(host(BOB, "s1")) == ["bob's"]

"""Drives a real 2-node Ray cluster for tests/cluster/test_cluster.py.

Run only inside a private network and PID namespace (the test does it, with
``actormem.cluster._sandbox.run_isolated``): Ray binds the host's external
interface otherwise, and when this process ends the kernel ends every Ray
process it started.  PostgreSQL is reached through its unix socket, which a
network namespace does not hide.

``python _driver.py main PG_URL OUT.json TMPDIR``: starts one cluster (a head
and a worker), plays every scenario on it and writes what it observed (the
test asserts on it).  Scenarios that do not interfere overlap: the second
driver runs while the ReActAgent scenario does, an idle agent is released
while the others run, and one kill of the worker node takes two agents
down at once (one with an unacknowledged change, one with a read in flight).
``python _driver.py second ADDRESS PG_URL OUT.json``: the second driver.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

import psutil
import ray

from actormem.agent import ReActAgent
from actormem.cluster import RAY_NAMESPACE, RemoteRuntime, _capacity, actor_name
from actormem.cluster._capacity import _no_process, _state
from actormem.cluster._sandbox import kill_node, on_node, start_cluster
from actormem.cluster._spec import make_spec
from actormem.events import MessageAdded
from actormem.messages import Msg
from actormem.models.embedders import HashEmbedder
from actormem.models.scripted import ScriptedModel
from actormem.recorder import RecorderConfig
from actormem.store import Namespace

ALICE = Namespace(user_id="alice", agent_id="helper")
BOB = Namespace(user_id="bob", agent_id="helper")
#: A query holding this word blocks in the actor (see GatedEmbedder).
GATE = "gatedquery"
#: Every node holds one agent that asks for this Ray resource (the capacity scenario).
SLOT = "agent"
BOUNDED = {"resources": {SLOT: 1}}


class GatedEmbedder(HashEmbedder):
    """The hashing embedder, except that the first query holding GATE blocks in the actor.

    Lets the driver kill a node while a read is genuinely in flight: the
    first such embed (in any process; a file created with O_EXCL decides)
    tells the driver it started (it opens the ``started`` FIFO for writing,
    which returns once the driver reads it), then waits on the ``gate`` FIFO,
    which nobody opens: the node dies under it.  Every embed of GATE appends
    its process id to ``runs``.
    """

    def __init__(self, folder: str) -> None:
        super().__init__(64)
        self.folder = folder

    def embed(self, texts: Sequence[str]) -> Any:
        if any(GATE in t for t in texts):
            with open(os.path.join(self.folder, "runs"), "a") as f:
                f.write(f"{os.getpid()}\n")
            try:
                fd = os.open(os.path.join(self.folder, "first"), os.O_CREAT | os.O_EXCL)
            except FileExistsError:
                pass  # not the first: answer
            else:
                os.close(fd)
                with open(os.path.join(self.folder, "started"), "w") as f:
                    f.write("started")
                with open(os.path.join(self.folder, "gate")) as f:
                    f.read()  # never opened for writing: the node is killed meanwhile
        return super().embed(texts)


def agent(session: str, ns: Namespace, pg: str, **kw: Any) -> RemoteRuntime:
    kw.setdefault("embedder", HashEmbedder(64))
    kw.setdefault("recorder", RecorderConfig(batch_seconds=0.05))
    kw.setdefault("failover_timeout", 90)
    return RemoteRuntime.connect(session, namespace=ns, store=pg, sessions=pg, **kw)


class CrashingEmbedder(HashEmbedder):
    """Ends its process, as a dying node would, once it has counted a text with CRASH in it."""

    def __init__(self, count_file: str) -> None:
        super().__init__(64)
        self.count_file = count_file

    def embed(self, texts: Sequence[str]) -> Any:
        if any("CRASH" in t for t in texts):
            with open(self.count_file, "a") as f:
                f.write("ran\n")
            os._exit(1)
        return super().embed(texts)


def wait_released(rt: RemoteRuntime) -> None:
    """Until the idle agent's actor is gone (Ray gives no event for it: poll its name, bounded)."""
    name = actor_name(rt._spec)
    deadline = time.monotonic() + 60
    while True:
        try:
            ray.get_actor(name, namespace=RAY_NAMESPACE)
        except ValueError:
            return
        if time.monotonic() > deadline:
            raise TimeoutError("the idle agent was not released within 60 s")
        time.sleep(0.1)


def until(what: str, check: Any, seconds: float = 60) -> None:
    """Until ``check()`` holds (Ray's GCS gives no event for an actor's state: poll, bounded)."""
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {seconds} s")
        time.sleep(0.05)


def pending(session: str, ns: Namespace) -> bool:
    """Whether the agent's actor exists and waits for a node with room (no process yet)."""
    name = actor_name(make_spec(session, ns, None, None, False, {}, None))
    try:
        actor = ray.get_actor(name, namespace=RAY_NAMESPACE)
    except ValueError:
        return False
    return _no_process(actor)[0]


def named(session: str, ns: Namespace) -> bool:
    """Whether an actor of that agent exists (pending or running)."""
    name = actor_name(make_spec(session, ns, None, None, False, {}, None))
    try:
        ray.get_actor(name, namespace=RAY_NAMESPACE)
    except ValueError:
        return False
    return True


PAT, PIA, PEG, POL = (Namespace(user_id=u) for u in ("pat", "pia", "peg", "pol"))


def capacity(pg: str, node_names: dict[str, str], out: dict[str, Any]) -> list[RemoteRuntime]:
    """Nodes that hold one agent each (Ray resource SLOT): placement, a connect that waits
    for an idle release, one that times out, a reload that finds no room.

    Returns the two agents left holding both nodes' room (for the restart scenario).
    """
    p1 = agent("p1", PAT, pg, actor_options=BOUNDED, idle_release=0.5, failover_timeout=1.5)
    p1.add(Msg.user("kept by the release"))
    # a subscriber keeps the idle agent resident (the release waits for it to go)
    held = p1.events.subscribe(on_next=lambda e: None)
    p2 = agent("p2", PIA, pg, actor_options=BOUNDED)
    first = {"p1": p1.where(), "p2": p2.where()}
    out["first_two"] = sorted(node_names.get(w["node_id"], "?") for w in first.values())
    # both nodes full: a third agent's connect waits for room
    got: list[Any] = []
    waiter = threading.Thread(
        target=lambda: got.append(
            error_of(
                lambda: got.append(agent("p3", PEG, pg, actor_options=BOUNDED, start_timeout=60))
            )
        ),
        daemon=True,
    )
    waiter.start()
    until("p3 pending", lambda: pending("p3", PEG))
    out["p3_waiting_while_full"] = waiter.is_alive() and not got
    held.dispose()  # no call after it: the release follows once nobody listens
    waiter.join(120)
    p3 = got[0] if got and isinstance(got[0], RemoteRuntime) else None
    out["p3_connect"] = got[-1] if got else {"type": "hung", "message": "", "cause": None}
    out["p1_process_exited"] = exited(first["p1"]["pid"])
    out["p3_node_was_p1s"] = p3 is not None and p3.where()["node_id"] == first["p1"]["node_id"]
    # still full, nobody idle: a connect gives up at start_timeout, naming the resource
    t = time.monotonic()
    out["p4_connect"] = error_of(
        lambda: agent("p4", POL, pg, actor_options=BOUNDED, start_timeout=1.0)
    )
    out["p4_failed_after_s"] = time.monotonic() - t
    out["p4_left_behind"] = named("p4", POL)
    out["infeasible"] = error_of(
        lambda: agent("p5", POL, pg, actor_options={"resources": {"gpu": 1}}, start_timeout=0.5)
    )
    # the released agent's next call re-creates it; no room: failover_timeout, then the error
    out["p1_reload_full"] = error_of(p1.messages)
    out["p1_left_behind"] = named("p1", PAT)
    assert p3 is not None, out["p3_connect"]
    return [p2, p3]


#: The slow-start agent's worker blocks at boot on this FIFO when the variable names it
#: (``sitecustomize``, imported by Python as the worker process starts).
BOOT_GATE_ENV = "ACTORMEM_TEST_BOOT_GATE"
SITECUSTOMIZE = f"""import os
if os.environ.get({BOOT_GATE_ENV!r}):
    with open(os.environ[{BOOT_GATE_ENV!r}]) as f:  # a FIFO: returns once the driver opens it
        f.read()
"""


class InitGatedEmbedder(HashEmbedder):
    """The hashing embedder, whose first unpickling in an actor's process (in the
    actor's ``__init__``: Ray passes the spec to it) blocks until the driver opens ``gate``."""

    def __init__(self, gate: str) -> None:
        super().__init__(64)
        self.gate = gate

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if os.environ.get(BOOT_GATE_ENV):  # only the slow agent's worker has it
            try:
                fd = os.open(self.gate + ".once", os.O_CREAT | os.O_EXCL)
            except FileExistsError:
                return
            os.close(fd)
            with open(self.gate) as f:
                f.read()


def release(fifo: str) -> None:
    """Open a gate FIFO for its reader, from a thread of its own: opening for writing
    returns once the reader opens it, which a killed worker never does."""

    def opened() -> None:
        with open(fifo, "w"):
            pass

    threading.Thread(target=opened, daemon=True).start()


def slow_start(pg: str, tmp: str, out: dict[str, Any]) -> None:
    """A connect whose agent starts for longer than ``start_timeout`` (1 s): its worker
    process boots (blocked on one FIFO), then its ``__init__`` runs (blocked on another).
    Each gate opens only after the connect checked the actor past its deadline: a
    starting actor must be waited for, never removed as one without room."""
    site = os.path.join(tmp, "slow-site")
    os.mkdir(site)
    with open(os.path.join(site, "sitecustomize.py"), "w") as f:
        f.write(SITECUSTOMIZE)
    boot, init = os.path.join(site, "boot"), os.path.join(site, "init")
    os.mkfifo(boot)
    os.mkfifo(init)
    path = os.pathsep.join(filter(None, [site, os.environ.get("PYTHONPATH")]))
    env = {"PYTHONPATH": path, BOOT_GATE_ENV: boot}
    checks: list[dict[str, Any]] = []
    seen = threading.Condition()
    got: list[Any] = []
    real = _capacity._no_process

    def watched(actor: Any, wanted: Any = None) -> tuple[bool, str]:
        answer = real(actor, wanted)
        if threading.current_thread() is connector:  # only this connect's checks
            with seen:
                checks.append(
                    {"state": answer[1], "pid": _state(actor)[1] != 0, "no_room": answer[0]}
                )
                seen.notify_all()
        return answer

    def connect() -> None:
        got.append(
            error_of(
                lambda: got.append(
                    agent(
                        "sam-s1",
                        Namespace(user_id="sam"),
                        pg,
                        start_timeout=1.0,
                        embedder=InitGatedEmbedder(init),
                        actor_options={"runtime_env": {"env_vars": env}},
                    )
                )
            )
        )

    _capacity._no_process = watched
    connector = threading.Thread(target=connect, daemon=True)
    connector.start()
    with seen:  # the first check is at the deadline, the worker still booting
        seen.wait_for(lambda: checks or not connector.is_alive(), 120)
    out["boot_check"] = dict(checks[0]) if checks else None
    release(boot)  # the worker boots on
    with seen:  # a check while __init__ runs (the worker has its process id)
        seen.wait_for(lambda: any(c["pid"] for c in checks) or not connector.is_alive(), 120)
    out["init_check"] = next((dict(c) for c in checks if c["pid"]), None)
    release(init)  # __init__ goes on
    connector.join(120)
    _capacity._no_process = real
    out["connect"] = got[-1] if got else {"type": "hung", "message": "", "cause": None}
    sam = got[0] if got and isinstance(got[0], RemoteRuntime) else None
    if sam is not None:
        sam.add(Msg.user("started slowly"))
        out["texts"] = texts(sam)
        sam.stop()
    out["left_behind"] = named("sam-s1", Namespace(user_id="sam"))


def texts(rt: RemoteRuntime) -> list[str]:
    return [m.text for m in rt.messages()]


def error_of(fn: Any) -> dict[str, Any]:
    try:
        fn()
    except Exception as exc:
        cause = exc.__cause__
        return {
            "type": type(exc).__name__,
            "message": str(exc),
            "cause": None if cause is None else type(cause).__name__,
        }
    return {"type": "none", "message": "", "cause": None}


def exited(pid: int) -> bool:
    """Whether the process ends within 60 s (an event: its exit; bounded)."""
    try:
        psutil.Process(pid).wait(timeout=60)
    except psutil.NoSuchProcess:
        return True
    except psutil.TimeoutExpired:
        return False
    return True


def main(pg: str, out: str, tmp: str) -> None:
    t0 = time.monotonic()
    # the interpreter's start and this module's imports (Ray, actormem), before t0
    res: dict[str, Any] = {"phases": {}, "imports_s": time.time() - psutil.Process().create_time()}
    last = [t0]

    def mark(phase: str) -> None:  # where the run's time goes (printed by the test)
        now = time.monotonic()
        res["phases"][phase] = round(now - last[0], 1)
        last[0] = now

    cluster, (worker,) = start_cluster(tmp, resources={SLOT: 1})
    head_id = cluster.head_node.node_id
    node_names = {head_id: "head", worker.node_id: "worker"}
    res["cluster_up_s"] = time.monotonic() - t0
    res["nodes"] = sum(1 for n in ray.nodes() if n["Alive"])
    mark("cluster up")

    # -- refused: state on one node's disk ---------------------------------------------
    res["refused_duckdb"] = error_of(
        lambda: RemoteRuntime.connect("dk", store=f"{tmp}/m.duckdb", sessions=pg)
    )
    res["refused_json_sessions"] = error_of(lambda: RemoteRuntime.connect("js", store=pg))

    # -- capacity: one bounded agent per node; beside the scenarios up to the kill --------
    res["capacity"] = {}
    bounded: list[RemoteRuntime] = []

    def run_capacity() -> None:
        try:
            bounded.extend(capacity(pg, node_names, res["capacity"]))
        except Exception as exc:  # recorded, asserted on by the test
            res["capacity"]["failed"] = f"{type(exc).__name__}: {exc}"

    capacity_thread = threading.Thread(target=run_capacity, daemon=True)
    capacity_thread.start()

    # -- a start that outlasts start_timeout (worker boot, then __init__): beside the others
    res["slow_start"] = {}

    def run_slow_start() -> None:
        try:
            slow_start(pg, tmp, res["slow_start"])
        except Exception as exc:  # recorded, asserted on by the test
            res["slow_start"]["failed"] = f"{type(exc).__name__}: {exc}"

    slow_thread = threading.Thread(target=run_slow_start, daemon=True)
    slow_thread.start()

    # -- an idle agent (on the head): released while the other scenarios run -----------
    tool_runs = os.path.join(tmp, "dave-tool-runs")
    dave = agent(
        "dave-s1",
        Namespace(user_id="dave"),
        pg,
        idle_release=1.0,
        embedder=CrashingEmbedder(tool_runs),
        long_term="both",  # the memory tools too
        failover_timeout=20,  # bounds the old code's resending below (it never restarts elsewhere)
    )
    dave_pid = dave.where()["pid"]
    dave.add(Msg.user("Remember me."))  # not flushed: the release saves it

    mark("idle agent")

    # -- one agent, two drivers ---------------------------------------------------------
    t = time.monotonic()
    alice = agent("alice-s1", ALICE, pg, actor_options=on_node(worker.node_id))
    res["first_connect_s"] = time.monotonic() - t
    res["alice_node_is_worker"] = alice.where()["node_id"] == worker.node_id
    alice.add(Msg.user("I live in Porto."))
    alice.record([Msg.user("I live in Porto."), Msg.assistant("Noted.")])
    alice.flush()
    second_out = os.path.join(tmp, "second.json")
    mark("first agent")
    second = subprocess.Popen([sys.executable, __file__, "second", cluster.address, pg, second_out])

    # -- meanwhile: a ReActAgent with the remote memory, unchanged ---------------------
    bot_mem = agent("bot-s1", Namespace(user_id="alice", agent_id="bot"), pg)
    model = ScriptedModel.tool_then_answer("add", {"a": 2, "b": 3}, answer="2 + 3 = 5")

    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    bot = ReActAgent("bot", model, bot_mem, tools=[add], session_id="bot-s1")
    res["bot_reply"] = bot.reply("What is 2 + 3?").text
    res["bot_roles"] = [m.role for m in bot_mem.messages()]
    bot_mem.flush()
    res["bot_recorded"] = bot_mem.recording_stats()["finished"]
    bot2 = ReActAgent("bot", ScriptedModel([]), bot_mem, session_id="bot-s1")
    res["bot_loaded"] = bot2.load_session()
    res["bot_status"] = bot2.status.state
    bot_pid = bot_mem.where()["pid"]
    bot_mem.stop()
    res["stopped_process_exited"] = exited(bot_pid)

    mark("react agent")

    # -- a handle sent to a Ray task and through the object store -------------------------
    tina = agent("tina-s1", Namespace(user_id="tina"), pg)
    tina.add(Msg.user("from the driver"))

    @ray.remote
    def in_a_task(handle: RemoteRuntime) -> dict[str, Any]:
        handle.add(Msg.user("from a task"))
        acknowledged_after_add = handle.acknowledged
        handle.flush()
        return {"texts": texts(handle), "dirty_after_add": not acknowledged_after_add}

    res["task"] = ray.get(in_a_task.remote(tina), timeout=120)
    res["task_driver_sees"] = texts(tina)
    res["task_driver_acknowledged"] = tina.acknowledged  # the task's flush is not its own
    res["task_via_put"] = texts(ray.get(ray.put(tina), timeout=60))
    tina.stop()
    mark("handle in a task")
    if second.wait(timeout=180) != 0:
        raise RuntimeError(f"the second driver failed ({second.returncode})")
    with open(second_out) as f:
        res["second"] = json.load(f)
    res["first_pid"] = alice.where()["pid"]
    res["actor_rss_mb"] = alice.where()["rss_bytes"] / 2**20
    res["after_second"] = texts(alice)

    mark("second driver")

    # -- on the same node: saves through the session storage (a ReActAgent's) ----------
    gina_ns = Namespace(user_id="gina")
    slow = RecorderConfig(batch_seconds=600)  # the turn stays uncommitted until flush()
    gina = agent("gina-s1", gina_ns, pg, recorder=slow, actor_options=on_node(worker.node_id))
    res["gina_on_worker"] = gina.where()["node_id"] == worker.node_id
    gina.record([Msg.user("My bike is called Blitz."), Msg.assistant("Noted.")])
    gina.save_session()  # the short-term state only: the turn is still being recorded
    res["gina_acknowledged_after_save"] = gina.acknowledged
    gina_mem = agent("gina-s1", gina_ns, pg, recorder=slow)  # another handle, a ReActAgent's
    gina_bot = ReActAgent("gina", ScriptedModel([]), gina_mem, session_id="gina-s1")
    gina_mem.add(Msg.user("unsaved"))
    # a subscriber to alice's events, connected when her node dies
    alice_told = threading.Event()
    alice_stream: list[str] = []

    def alice_lost(exc: Exception) -> None:
        alice_stream.append(f"{type(exc).__name__}: {exc}")
        alice_told.set()

    alice.events.subscribe(on_next=lambda e: None, on_error=alice_lost)

    # -- a write-through agent on the same node, a read in flight ----------------------
    gate = os.path.join(tmp, "gate-dir")
    os.mkdir(gate)
    os.mkfifo(os.path.join(gate, "started"))
    os.mkfifo(os.path.join(gate, "gate"))
    carol = agent(
        "carol-s1",
        Namespace(user_id="carol"),
        pg,
        write_through=True,
        embedder=GatedEmbedder(gate),
        actor_options=on_node(worker.node_id),
    )
    res["carol_on_worker"] = carol.where()["node_id"] == worker.node_id
    carol_pid = carol.where()["pid"]
    carol.add(Msg.user("one"))
    carol.add([Msg.user("two"), Msg.assistant("three")])
    carol.record([Msg.user("My cat is called Miso.")])  # write-through: flushed on return
    answers: list[Any] = []

    def read_in_flight() -> None:
        try:
            answers.append([h.memory.content for h in carol.retrieve(f"{GATE} Miso", 3)])
        except Exception as exc:  # recorded, asserted on by the test
            answers.append({"type": type(exc).__name__, "message": str(exc)})

    reader = threading.Thread(target=read_in_flight, daemon=True)  # never keeps the driver alive
    reader.start()
    started = threading.Event()

    def wait_started() -> None:
        with open(os.path.join(gate, "started")) as f:  # returns once the actor opened it
            f.read()
        started.set()

    threading.Thread(target=wait_started, daemon=True).start()
    if not started.wait(120):
        raise TimeoutError("the gated read did not start in the actor within 120 s")

    # -- an agent whose stop() comes after its node died, with a change it was to save --
    pete_ns = Namespace(user_id="pete")
    pete = agent("pete-s1", pete_ns, pg, actor_options=on_node(worker.node_id))
    res["pete_on_worker"] = pete.where()["node_id"] == worker.node_id
    pete.add(Msg.user("flushed"))
    pete.flush()
    pete.add(Msg.user("given to stop() to save"))

    # -- kill the node hosting alice (mid-conversation) and carol (mid-read) -----------
    alice.add(Msg.user("My sister lives in Lisbon."))
    alice.flush()  # acknowledged: must survive
    alice.add(Msg.user("unacknowledged"))  # not acknowledged
    res["alice_dirty"] = not alice.acknowledged
    capacity_thread.join(180)
    res["capacity_done"] = not capacity_thread.is_alive()
    mark("read in flight")
    res["read_unanswered_at_kill"] = not answers and reader.is_alive()
    t = time.monotonic()
    bounded_on = {node_names.get(b.where()["node_id"], "?"): b for b in bounded}
    kill_node(cluster, worker)
    # the bounded agent of the dead worker restarts only where there is room: none yet
    moved: list[Any] = []
    movers = threading.Thread(
        target=lambda: moved.append(error_of(lambda: moved.append(texts(bounded_on["worker"])))),
        daemon=True,
    )
    if len(bounded_on) == 2:
        movers.start()
    res["after_kill_first_call"] = error_of(alice.messages)
    res["failover_s"] = time.monotonic() - t
    reader.join(120)
    res["read_answers"] = answers

    def runs() -> list[int]:
        with open(os.path.join(gate, "runs")) as f:
            return [int(line) for line in f.read().split()]

    res["read_runs"] = runs()
    carol.retrieve(f"{GATE} Miso", 3)  # the baseline: how many embeds one read makes
    res["embeds_per_read"] = len(runs()) - len(res["read_runs"])
    res["carol_old_pid"] = carol_pid
    res["carol_new_pid"] = carol.where()["pid"]
    res["carol_after_kill"] = error_of(carol.messages)
    res["carol_texts"] = texts(carol)
    res["after_failover"] = texts(alice)
    where = alice.where()
    res["moved_to_head"] = where["node_id"] == head_id
    res["moved_pid_differs"] = where["pid"] != res["first_pid"]
    res["retrieve_after_failover"] = [h.memory.content for h in alice.retrieve("Porto", 3)]
    alice.add(Msg.user("After the failover."))
    alice.flush()
    res["continued"] = texts(alice)
    res["alice_stream_told"] = alice_told.wait(60)  # the old code re-registered silently
    res["alice_stream_errors"] = alice_stream
    res["gina_bot_save_after_kill"] = error_of(gina_bot.save_session)
    res["gina_bot_save_again"] = error_of(gina_bot.save_session)  # told once, carries on
    res["pete_stop_after_kill"] = error_of(pete.stop)  # the old code returned: m2 gone
    res["pete_left_running"] = named("pete-s1", pete_ns)  # the old code: restarted, alive
    pete_again = agent("pete-s1", pete_ns, pg)
    res["pete_restored"] = texts(pete_again)
    pete_again.stop()
    res["gina_after_kill"] = error_of(lambda: gina.retrieve("Blitz", 3))
    res["gina_texts"] = texts(gina)
    res["gina_blitz"] = [h.memory.content for h in gina.retrieve("Blitz", 3)]
    # another handle's stream completes at the stop; subscribing after it creates nothing
    gina_done, gina_errors = threading.Event(), []
    gina_mem.events.subscribe(
        on_next=lambda e: None, on_error=gina_errors.append, on_completed=gina_done.set
    )
    gina_mem.add(Msg.user("seen before the stop"))
    gina.stop()
    res["gina_stream_completed"] = gina_done.wait(60)
    res["gina_stream_errors"] = [repr(e) for e in gina_errors]
    gina_late = threading.Event()
    gina_mem.events.subscribe(on_next=lambda e: None, on_completed=gina_late.set)
    res["gina_late_subscription_completed"] = gina_late.is_set()
    res["gina_after_stop"] = error_of(
        lambda: ray.get_actor(actor_name(gina_mem._spec), namespace=RAY_NAMESPACE)
    )
    if len(bounded_on) == 2:
        cap = res["capacity"]
        w = bounded_on["worker"]
        until("the bounded agent restarting", lambda: _state(w._actor)[0] == "RESTARTING")
        cap["restarting_state"] = _state(w._actor)
        try:  # the raylets report their queued leases a moment after the state changes
            until(
                "the restarting agent waiting for room",
                lambda: _no_process(w._actor, {SLOT: 1})[0],
                30,
            )
            cap["restarting_no_room"] = True
        except TimeoutError:
            cap["restarting_no_room"] = False
        cap["restart_waits_for_room"] = movers.is_alive() and not moved
        bounded_on["head"].stop()  # room on the head
        movers.join(120)
        cap["restart_call"] = moved[-1] if moved else {"type": "hung"}
        cap["restarted_on"] = node_names.get(w.where()["node_id"], "?")
        w.stop()
        # room again: the agent whose reload found none comes back with what it had
        cap["p1_after_room"] = error_of(
            lambda: cap.update(
                p1_texts=texts(
                    agent(
                        "p1", PAT, pg, actor_options=BOUNDED, idle_release=0.5, failover_timeout=1.5
                    )
                )
            )
        )

    # -- the agent's events reach a subscriber in this (another) process, in order ------
    # (carol, back after the failover: no new actor process for it)
    mark("failover")
    got: list[str] = []
    enough = threading.Event()

    def seen(event: Any) -> None:
        got.append(event.msg.text)
        if len(got) >= 60:
            enough.set()

    sub = carol.subscribe(seen, MessageAdded)
    for i in range(30):
        carol.add(Msg.user(f"e{i}"))
    carol.add([Msg.user(f"e{i}") for i in range(30, 60)])
    res["events_all_arrived"] = enough.wait(60)
    sub.dispose()
    res["events"] = got
    mark("events")

    # -- the idle agent was released meanwhile; back on the next call --------------------
    wait_released(dave)
    res["released_process_exited"] = exited(dave_pid)
    # record() is never resent after a crash; the released actor never ran it: resent
    dave.record([Msg.user("My dog is called Rex.")])
    dave.flush()
    res["dave_texts"] = texts(dave)
    res["dave_new_process"] = dave.where()["pid"] != dave_pid
    res["dave_rex"] = [h.memory.content for h in dave.retrieve("Rex", 3)]
    # released again; the next call is not safe to repeat, and the re-created actor dies
    # while running it (after it took effect): it must not be sent again
    wait_released(dave)
    res["dave_tool_lost"] = error_of(
        lambda: dave.call_tool("record_to_memory", {"thinking": "t", "content": ["CRASH now"]})
    )
    res["dave_tool_runs"] = 0
    with contextlib.suppress(FileNotFoundError), open(tool_runs) as f:
        res["dave_tool_runs"] = len(f.readlines())
    dave.stop()
    mark("idle release")

    # -- a stopped agent is re-created from its session by the next call ---------------
    alice.stop()
    again = agent("alice-s1", ALICE, pg)
    res["restored_after_stop"] = texts(again)
    res["bob_same_session"] = error_of(lambda: agent("alice-s1", BOB, pg))
    res["alice_unchanged_by_bob"] = texts(again)
    again.stop()
    carol.stop()
    mark("restore after stop")
    slow_thread.join(300)
    res["total_s"] = time.monotonic() - t0
    with open(out, "w") as f:
        json.dump(res, f)
        f.flush()
        os.fsync(f.fileno())
    # No graceful shutdown (ray.shutdown + cluster.shutdown: 1.3-3 s): this process is the
    # PID namespace's first, so when it ends the kernel ends every Ray process it started.
    os._exit(0)


def second(address: str, pg: str, out: str) -> None:
    ray.init(address=address, logging_level="WARNING")
    alice = agent("alice-s1", ALICE, pg)
    res: dict[str, Any] = {"seen": texts(alice), "pid": alice.where()["pid"]}
    alice.add(Msg.assistant("Second driver was here."))
    alice.fleeting["plan"] = "visit Porto"  # the runtime's fleeting memory, in the actor
    res["fleeting"] = dict(alice.fleeting)
    del alice.fleeting["plan"]
    res["fleeting_after_delete"] = dict(alice.fleeting)
    res["no_bus"] = error_of(lambda: alice.bus)
    alice.flush()
    res["hits"] = [h.memory.content for h in alice.retrieve("Porto", 3)]
    res["bob_retrieve"] = [h.memory.content for h in agent("bob-s1", BOB, pg).retrieve("Porto", 3)]
    res["other_write_through"] = error_of(lambda: agent("alice-s1", ALICE, pg, write_through=True))
    res["other_embedder"] = error_of(
        lambda: agent("alice-s1", ALICE, pg, embedder=HashEmbedder(32))
    )
    # an agent with short-term memory only (no long-term store)
    frank_ns = Namespace(user_id="frank")
    frank = error_of(lambda: RemoteRuntime.connect("frank-s1", namespace=frank_ns, sessions=pg))
    res["short_term_only_connect"] = frank
    if frank["type"] == "none":  # its restore is tested on the host (test_cluster_host)
        st = RemoteRuntime.connect("frank-s1", namespace=frank_ns, sessions=pg)
        st.add(Msg.user("short-term only"))
        st.flush()
        res["short_term_only_mode"] = st.long_term_mode
        res["short_term_only_namespace"] = st.namespace.key()
        res["short_term_only_texts"] = texts(st)
        st.stop()
    with open(out, "w") as f:
        json.dump(res, f)
    ray.shutdown()


if __name__ == "__main__":
    if sys.argv[1] == "main":
        main(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        second(sys.argv[2], sys.argv[3], sys.argv[4])

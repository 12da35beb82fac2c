"""Drives a real 2-node Ray cluster for tests/cluster/test_cluster.py.

Run only inside a private network and PID namespace (the test does it:
``unshare --net --pid --fork --mount-proc``): Ray binds the host's external
interface otherwise, and when this process ends the kernel ends every Ray
process it started.  PostgreSQL is reached through its unix socket, which
a network namespace does not hide.

``python _driver.py main PG_URL OUT.json TMPDIR``: starts the cluster, plays the
scenarios in order and writes what it observed (the test asserts on it).
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
from typing import Any

import ray
from ray.cluster_utils import Cluster
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from actormem.agent import ReActAgent
from actormem.cluster import (
    RAY_NAMESPACE,
    ClusterConfigError,
    ClusterError,
    RemoteRuntime,
    actor_name,
)
from actormem.events import MessageAdded
from actormem.messages import Msg
from actormem.models.embedders import HashEmbedder
from actormem.models.scripted import ScriptedModel
from actormem.recorder import RecorderConfig
from actormem.store import Namespace

ALICE = Namespace(user_id="alice", agent_id="helper")
BOB = Namespace(user_id="bob", agent_id="helper")
#: Failure detection in about a second instead of Ray's default half minute.
FAST_HEALTH = {
    "health_check_initial_delay_ms": 0,
    "health_check_period_ms": 200,
    "health_check_timeout_ms": 200,
    "health_check_failure_threshold": 3,
}
NODE = {"num_cpus": 1, "node_ip_address": "127.0.0.1", "object_store_memory": 80 * 2**20}


def agent(session: str, ns: Namespace, pg: str, **kw: Any) -> RemoteRuntime:
    return RemoteRuntime.connect(
        session,
        namespace=ns,
        store=pg,
        sessions=pg,
        embedder=HashEmbedder(64),
        recorder=RecorderConfig(batch_seconds=0.05),
        failover_timeout=90,
        **kw,
    )


def on(node_id: str) -> dict[str, Any]:
    # soft: when that node dies, Ray may restart the actor on another one.  A
    # zero-CPU actor's soft affinity was ignored 1 time in 4 here; a small share is not.
    return {
        "scheduling_strategy": NodeAffinitySchedulingStrategy(node_id, soft=True),
        "num_cpus": 0.01,
    }


def texts(rt: RemoteRuntime) -> list[str]:
    return [m.text for m in rt.messages()]


def kill_node(cluster: Cluster, node: Any) -> None:
    """Kill a node like a machine that dies: its raylet and every process it started.

    ``remove_node`` alone kills the raylet, but its workers (the agent's
    actor among them) notice only much later; on a dead machine they are
    gone with it.  Waits until they have exited: Ray gives no event for it.
    """
    import psutil

    raylet = node.all_processes["raylet"][0].process.pid
    procs = psutil.Process(raylet).children(recursive=True)
    cluster.remove_node(node, allow_graceful=False)
    for p in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()
    psutil.wait_procs(procs, timeout=30)


def error_of(fn: Any) -> dict[str, str]:
    try:
        fn()
    except Exception as exc:
        return {"type": type(exc).__name__, "message": str(exc)}
    return {"type": "none", "message": ""}


def main(pg: str, out: str, tmp: str) -> None:
    t0 = time.monotonic()
    res: dict[str, Any] = {}
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            **NODE,
            "temp_dir": tmp,
            "include_dashboard": False,
            "_system_config": FAST_HEALTH,
        },
    )
    worker = cluster.add_node(**NODE)
    ray.init(address=cluster.address, logging_level="WARNING")
    cluster.wait_for_nodes()
    head_id = cluster.head_node.node_id
    res["cluster_up_s"] = time.monotonic() - t0
    res["nodes"] = sum(1 for n in ray.nodes() if n["Alive"])

    # -- refused: state on one node's disk ---------------------------------------------
    res["refused_duckdb"] = error_of(
        lambda: RemoteRuntime.connect("dk", store=f"{tmp}/m.duckdb", sessions=pg)
    )
    res["refused_json_sessions"] = error_of(lambda: RemoteRuntime.connect("js", store=pg))

    # -- one agent, two drivers ---------------------------------------------------------
    t = time.monotonic()
    alice = agent("alice-s1", ALICE, pg, actor_options=on(worker.node_id))
    res["first_connect_s"] = time.monotonic() - t
    res["alice_node_is_worker"] = alice.where()["node_id"] == worker.node_id
    alice.add(Msg.user("I live in Porto."))
    alice.record([Msg.user("I live in Porto."), Msg.assistant("Noted.")])
    alice.flush()
    second = os.path.join(tmp, "second.json")
    subprocess.run(
        [sys.executable, __file__, "second", cluster.address, pg, second], check=True, timeout=120
    )
    with open(second) as f:
        res["second"] = json.load(f)
    res["first_pid"] = alice.where()["pid"]
    res["actor_rss_mb"] = alice.where()["rss_bytes"] / 2**20
    res["after_second"] = texts(alice)

    # -- a ReActAgent with the remote memory, unchanged --------------------------------
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
    bot_mem.stop()

    # -- kill the node hosting alice mid-conversation ----------------------------------
    alice.add(Msg.user("My sister lives in Lisbon."))
    alice.flush()  # acknowledged: must survive
    alice.add(Msg.user("unacknowledged"))  # not acknowledged
    res["alice_dirty"] = not alice.acknowledged
    t = time.monotonic()
    kill_node(cluster, worker)
    res["after_kill_first_call"] = error_of(alice.messages)
    res["failover_s"] = time.monotonic() - t
    res["after_failover"] = texts(alice)
    where = alice.where()
    res["moved_to_head"] = where["node_id"] == head_id
    res["moved_pid_differs"] = where["pid"] != res["first_pid"]
    res["retrieve_after_failover"] = [h.memory.content for h in alice.retrieve("Porto", 3)]
    alice.add(Msg.user("After the failover."))
    alice.flush()
    res["continued"] = texts(alice)

    # -- write-through: every returned call survives, in-flight reads are resent --------
    worker2 = cluster.add_node(**NODE)
    cluster.wait_for_nodes()
    carol = agent(
        "carol-s1",
        Namespace(user_id="carol"),
        pg,
        write_through=True,
        actor_options=on(worker2.node_id),
    )
    res["carol_on_worker2"] = carol.where()["node_id"] == worker2.node_id
    carol.add(Msg.user("one"))
    carol.add([Msg.user("two"), Msg.assistant("three")])
    kill_node(cluster, worker2)
    res["carol_after_kill"] = error_of(carol.messages)
    res["carol_texts"] = texts(carol)

    # -- the agent's events reach a subscriber in this (another) process, in order ------
    erin = agent("erin-s1", Namespace(user_id="erin"), pg)
    got: list[str] = []
    enough = threading.Event()

    def seen(event: Any) -> None:
        got.append(event.msg.text)
        if len(got) >= 60:
            enough.set()

    sub = erin.subscribe(seen, MessageAdded)
    for i in range(30):
        erin.add(Msg.user(f"e{i}"))
    erin.add([Msg.user(f"e{i}") for i in range(30, 60)])
    res["events_all_arrived"] = enough.wait(60)
    sub.dispose()
    res["events"] = got
    erin.stop()

    # -- idle release: saved and gone after a quiet second, back on the next call -------
    dave = agent("dave-s1", Namespace(user_id="dave"), pg, idle_release=1.0)
    dave_pid = dave.where()["pid"]
    dave.add(Msg.user("Remember me."))  # not flushed: the release saves it
    name = actor_name(dave._spec)
    deadline = time.monotonic() + 60
    while True:  # Ray gives no event for an actor's exit: poll its name, bounded
        try:
            ray.get_actor(name, namespace=RAY_NAMESPACE)
        except ValueError:
            break
        if time.monotonic() > deadline:
            raise TimeoutError("the idle agent was not released within 60 s")
        time.sleep(0.1)
    res["dave_released_s"] = 60 - (deadline - time.monotonic())
    # record() is never resent after a crash; the released actor never ran it: resent
    dave.record([Msg.user("My dog is called Rex.")])
    dave.flush()
    res["dave_texts"] = texts(dave)
    res["dave_new_process"] = dave.where()["pid"] != dave_pid
    res["dave_rex"] = [h.memory.content for h in dave.retrieve("Rex", 3)]
    dave.stop()

    # -- a stopped agent is re-created from its session by the next call ---------------
    alice.stop()
    again = agent("alice-s1", ALICE, pg)
    res["restored_after_stop"] = texts(again)
    res["bob_same_session"] = error_of(lambda: agent("alice-s1", BOB, pg))
    res["alice_unchanged_by_bob"] = texts(again)
    again.stop()
    carol.stop()
    res["total_s"] = time.monotonic() - t0
    with open(out, "w") as f:
        json.dump(res, f)
    ray.shutdown()
    cluster.shutdown()


def second(address: str, pg: str, out: str) -> None:
    ray.init(address=address, logging_level="WARNING")
    alice = agent("alice-s1", ALICE, pg)
    res: dict[str, Any] = {"seen": texts(alice), "pid": alice.where()["pid"]}
    alice.add(Msg.assistant("Second driver was here."))
    alice.flush()
    res["hits"] = [h.memory.content for h in alice.retrieve("Porto", 3)]
    res["bob_retrieve"] = [h.memory.content for h in agent("bob-s1", BOB, pg).retrieve("Porto", 3)]
    try:
        agent("alice-s1", ALICE, pg, write_through=True)
        res["other_settings"] = "accepted"
    except (ClusterConfigError, ClusterError) as exc:
        res["other_settings"] = f"{type(exc).__name__}: {exc}"
    with open(out, "w") as f:
        json.dump(res, f)
    ray.shutdown()


if __name__ == "__main__":
    if sys.argv[1] == "main":
        main(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        second(sys.argv[2], sys.argv[3], sys.argv[4])

"""A real 2-node Ray cluster: one agent reached from two drivers, its node killed.

One run of ``_driver.py`` (one cluster for every scenario; those that do not
interfere overlap) inside a private network and PID namespace
(``actormem.cluster._sandbox``, shared with ``benchmarks/bench_cluster.py``):
Ray binds the host's external interface otherwise, and the PID namespace
ends every Ray process when the driver ends, whatever happens.  PostgreSQL
is reached through its unix socket (the suite's server, or a private one
when ``ACTORMEM_PG_DSN`` is a TCP address).  Each test asserts one
behaviour on what the run observed.

These tests FAIL where they cannot run (no ``unshare``/``ip``, no user or
network namespaces, Ray not installed), so a green ``make test`` means the
cluster scenarios ran.  ``ACTORMEM_SKIP_CLUSTER_TESTS=1`` skips them, saying
so, for a machine that cannot make namespaces.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actormem.cluster._sandbox import SKIP_ENV, isolation_problem, ray_tmpdir, run_isolated
from tests._postgres import _with_dbname, pg_url, private_server

DRIVER = Path(__file__).with_name("_driver.py")
_HOW = (
    f"the cluster tests are part of `make test`; set {SKIP_ENV}=1 to skip them "
    "on a machine that cannot run them"
)


def _unix_socket(dsn: str) -> bool:
    from psycopg.conninfo import conninfo_to_dict

    host = str(conninfo_to_dict(dsn).get("host") or "")
    return host.startswith("/") or host == ""


@pytest.fixture(scope="module")
def socket_server_dsn(pg_server_dsn: str) -> Iterator[str]:
    """A server reached through a unix socket (a network namespace hides TCP ones)."""
    if _unix_socket(pg_server_dsn):
        yield pg_server_dsn
        return
    with private_server("amc") as uri:
        yield uri


@pytest.fixture(scope="module")
def run(
    socket_server_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    if os.environ.get(SKIP_ENV) == "1":
        pytest.skip(f"{SKIP_ENV}=1: the 2-node cluster scenarios did not run")
    if importlib.util.find_spec("ray") is None:
        pytest.fail(f"Ray is not installed (pip install 'actormem[ray]'): {_HOW}")
    problem = isolation_problem()
    if problem is not None:
        pytest.fail(
            f"Ray must run in a private network namespace here and none can be made: "
            f"{problem}. {_HOW}"
        )
    import psycopg

    dsn = socket_server_dsn
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute('DROP DATABASE IF EXISTS "t_cluster" WITH (FORCE)')
        conn.execute('CREATE DATABASE "t_cluster"')
    url = pg_url(_with_dbname(dsn, "t_cluster"))
    out = tmp_path_factory.mktemp("cluster") / "run.json"
    try:
        with ray_tmpdir() as tmp:
            started = time.monotonic()
            proc = run_isolated(
                [sys.executable, str(DRIVER), "main", url, str(out), tmp],
                tmp,
                timeout=900,  # a hang guard: the run took 255 s at load 35
                cwd=Path(__file__).parents[2],
                capture=True,
            )
            assert proc.returncode == 0, proc.stderr[-6000:]
            driver_s = time.monotonic() - started
        result: dict[str, Any] = json.loads(out.read_text())
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute('DROP DATABASE IF EXISTS "t_cluster" WITH (FORCE)')
    # the run's costs (not asserted: timings are for benchmarks), shown with -s / -rA
    print(
        f"\ncluster up {result['cluster_up_s']:.1f}s, first connect "
        f"{result['first_connect_s']:.1f}s, failover {result['failover_s']:.1f}s, whole run "
        f"{result['total_s']:.1f}s (driver process {driver_s:.1f}s, its imports "
        f"{result['imports_s']:.1f}s), one agent's actor {result['actor_rss_mb']:.0f} MB resident, "
        f"load {os.getloadavg()[0]:.1f}; phases (s): {result['phases']}"
    )
    yield result


def test_the_cluster_has_two_nodes(run: dict[str, Any]) -> None:
    assert run["nodes"] == 2


def test_a_duckdb_store_or_a_session_folder_is_refused_on_a_multi_node_cluster(
    run: dict[str, Any],
) -> None:
    for key, what in (("refused_duckdb", "DuckDB"), ("refused_json_sessions", "JSON files")):
        assert run[key]["type"] == "ClusterConfigError", run[key]
        assert what in run[key]["message"]
        assert "PostgreSQL is the backend for a cluster" in run[key]["message"]


def test_two_drivers_reach_the_same_agent(run: dict[str, Any]) -> None:
    assert run["alice_node_is_worker"]
    assert run["second"]["seen"] == ["I live in Porto."]
    assert run["second"]["pid"] == run["first_pid"]
    assert run["after_second"] == ["I live in Porto.", "Second driver was here."]
    assert any("Porto" in h for h in run["second"]["hits"])


def test_namespaces_are_never_crossed(run: dict[str, Any]) -> None:
    assert run["second"]["bob_retrieve"] == []  # bob's agent does not see alice's memories
    # the actor's refusal to start, as the documented type, with Ray's error as the cause
    assert run["bob_same_session"]["type"] == "ClusterConfigError", run["bob_same_session"]
    assert "belongs to another namespace's agent" in run["bob_same_session"]["message"]
    assert run["bob_same_session"]["cause"] == "ActorDiedError"
    assert run["alice_unchanged_by_bob"] == run["restored_after_stop"]


def test_a_second_connect_with_other_settings_is_refused_naming_them(
    run: dict[str, Any],
) -> None:
    for key, option in (("other_write_through", "write_through"), ("other_embedder", "embedder")):
        refused = run["second"][key]
        assert refused["type"] == "ClusterConfigError", refused
        assert f"another {option}" in refused["message"], refused


def test_the_handle_has_the_runtimes_members_or_says_what_to_use(run: dict[str, Any]) -> None:
    assert run["second"]["fleeting"] == {"plan": "visit Porto"}
    assert run["second"]["fleeting_after_delete"] == {}
    assert run["second"]["no_bus"]["type"] == "AttributeError"
    assert "subscribe" in run["second"]["no_bus"]["message"]


def test_an_agent_with_short_term_memory_only_runs(run: dict[str, Any]) -> None:
    assert run["second"]["short_term_only_connect"]["type"] == "none", run["second"]
    assert run["second"]["short_term_only_mode"] is None
    assert run["second"]["short_term_only_namespace"][0] == "frank"  # the agent's own
    assert run["second"]["short_term_only_texts"] == ["short-term only"]


def test_a_react_agent_runs_with_the_remote_memory_unchanged(run: dict[str, Any]) -> None:
    assert run["bot_reply"] == "2 + 3 = 5"
    assert run["bot_roles"] == ["user", "assistant", "tool", "assistant"]
    assert run["bot_recorded"] >= 1
    assert run["bot_loaded"] is True
    assert run["bot_status"] == "idle"


def test_a_handle_travels_to_a_ray_task_and_reaches_the_same_agent(run: dict[str, Any]) -> None:
    both = ["from the driver", "from a task"]
    assert run["task"] == {"texts": both, "dirty_after_add": True}
    assert run["task_driver_sees"] == both
    assert run["task_via_put"] == both
    # the task's flush saved the driver's add too, but each handle tells only what its
    # own calls acknowledged: the driver's handle waits for its own flush
    assert run["task_driver_acknowledged"] is False


def test_killing_the_node_loses_nothing_acknowledged_and_says_what_was_lost(
    run: dict[str, Any],
) -> None:
    assert run["alice_dirty"]
    # the handle had an unacknowledged add: the first call says the agent restarted
    assert run["after_kill_first_call"]["type"] == "AgentRestartedError"
    acknowledged = ["I live in Porto.", "Second driver was here.", "My sister lives in Lisbon."]
    assert run["after_failover"] == acknowledged  # "unacknowledged" is gone, nothing else
    assert run["moved_to_head"] and run["moved_pid_differs"]
    assert any("Porto" in h for h in run["retrieve_after_failover"])
    assert run["continued"] == [*acknowledged, "After the failover."]


def test_a_stop_after_the_node_died_says_what_was_lost_and_ends_the_agent(
    run: dict[str, Any],
) -> None:
    assert run["pete_on_worker"]
    stop = run["pete_stop_after_kill"]
    assert stop["type"] == "AgentRestartedError" and "lost before stop()" in stop["message"]
    assert not run["pete_left_running"]  # Ray's restart of it was stopped too
    assert run["pete_restored"] == ["flushed"]


def test_with_write_through_every_returned_call_survives_the_node(run: dict[str, Any]) -> None:
    assert run["carol_on_worker"]
    assert run["carol_after_kill"]["type"] == "none"
    assert run["carol_texts"] == ["one", "two", "three"]


def test_a_read_in_flight_when_the_node_dies_is_resent_and_answered_once(
    run: dict[str, Any],
) -> None:
    # the read was blocked inside the actor (on the dying node) when the node was killed
    assert run["read_unanswered_at_kill"]
    assert run["read_runs"][0] == run["carol_old_pid"]
    # sent again, to the restarted actor, which answered it: one answer for one call
    assert run["read_runs"][-1] == run["carol_new_pid"] != run["carol_old_pid"]
    assert set(run["read_runs"]) == {run["carol_old_pid"], run["carol_new_pid"]}
    # run once there: as many embeds of the query as one read makes (measured after it)
    assert run["read_runs"].count(run["carol_new_pid"]) == run["embeds_per_read"] >= 1
    assert len(run["read_answers"]) == 1
    assert any("Miso" in h for h in run["read_answers"][0]), run["read_answers"]


def test_a_save_through_the_session_storage_after_a_restart_says_what_was_lost(
    run: dict[str, Any],
) -> None:
    # a ReActAgent's save_session (RemoteSessions.save, as its autosave) on a handle with an
    # unsaved add, after the node died: refused like the handle's own calls, then carries on
    assert run["gina_on_worker"]
    assert run["gina_bot_save_after_kill"]["type"] == "AgentRestartedError"
    assert run["gina_bot_save_again"]["type"] == "none"
    assert run["gina_texts"] == []  # "unsaved" is gone: the refusal was due


def test_save_session_does_not_acknowledge_turns_still_being_recorded(
    run: dict[str, Any],
) -> None:
    assert run["gina_acknowledged_after_save"] is False
    # the recorded turn died with the node uncommitted: the handle is told, not silent
    assert run["gina_after_kill"]["type"] == "AgentRestartedError"
    assert not any("Blitz" in h for h in run["gina_blitz"])


def test_a_subscriber_is_told_when_the_agent_it_follows_is_lost(run: dict[str, Any]) -> None:
    assert run["alice_stream_told"]
    assert run["alice_stream_errors"][0].startswith("EventsLostError: the agent 'alice-s1'")


def test_a_stop_completes_streams_and_a_later_subscription_creates_nothing(
    run: dict[str, Any],
) -> None:
    assert run["gina_stream_completed"], run["gina_stream_errors"]
    assert run["gina_stream_errors"] == []
    assert run["gina_late_subscription_completed"]
    assert run["gina_after_stop"]["type"] == "ValueError"  # no actor of that name: not re-created


def test_after_a_release_a_call_not_safe_to_repeat_is_not_sent_again(
    run: dict[str, Any],
) -> None:
    # the released actor never ran it; the re-created one ran it and died before answering
    assert run["dave_tool_runs"] == 1, run["dave_tool_lost"]
    assert run["dave_tool_lost"]["type"] == "AgentRestartedError"
    assert "may or may not have taken effect" in run["dave_tool_lost"]["message"]


def test_events_reach_a_subscriber_in_another_process_in_order(run: dict[str, Any]) -> None:
    assert run["events_all_arrived"]
    assert run["events"] == [f"e{i}" for i in range(60)]


def test_an_idle_agent_is_released_and_comes_back_with_everything(run: dict[str, Any]) -> None:
    assert run["dave_new_process"]
    # the add was not flushed: the release saved it; the record queued behind the
    # release never ran there and was sent to the re-created actor, once
    assert run["dave_texts"] == ["Remember me."]
    assert sum("Rex" in h for h in run["dave_rex"]) >= 1


def test_a_stopped_agent_is_restored_from_its_session_on_the_next_connect(
    run: dict[str, Any],
) -> None:
    assert run["restored_after_stop"] == [
        "I live in Porto.",
        "Second driver was here.",
        "My sister lives in Lisbon.",
        "After the failover.",
    ]


def test_stopping_or_releasing_an_agent_frees_its_process(run: dict[str, Any]) -> None:
    # what makes idle_release and stop() free a node's memory: the actor's process exits
    assert run["stopped_process_exited"]
    assert run["released_process_exited"]


# -- capacity and placement: each node holds one agent that asks for Ray resource "agent" --


def test_bounded_agents_spread_over_the_nodes_with_room(run: dict[str, Any]) -> None:
    cap = run["capacity"]
    assert "failed" not in cap, cap
    assert cap["first_two"] == ["head", "worker"]  # one per node: the second went where room was


def test_a_connect_to_a_full_cluster_waits_for_an_idle_release(run: dict[str, Any]) -> None:
    cap = run["capacity"]
    assert cap["p3_waiting_while_full"]  # pending while the idle agent was held by a subscriber
    assert cap["p3_connect"]["type"] == "none", cap["p3_connect"]
    assert cap["p1_process_exited"]
    assert cap["p3_node_was_p1s"]  # it took the room the release freed


def test_a_start_longer_than_start_timeout_is_waited_for_not_taken_for_no_room(
    run: dict[str, Any],
) -> None:
    slow = run["slow_start"]
    assert "failed" not in slow, slow
    # checked past its deadline while its worker booted: no process id yet (Ray's actor
    # table shows it as it shows an actor waiting for room), and not taken for one
    boot = slow["boot_check"]
    assert boot is not None and boot["state"] in ("DEPENDENCIES_UNREADY", "PENDING_CREATION")
    assert not boot["pid"] and not boot["no_room"], boot
    # and while its __init__ ran
    assert slow["init_check"] == {"state": "PENDING_CREATION", "pid": True, "no_room": False}
    assert slow["connect"]["type"] == "none", slow["connect"]  # it started, then answered
    assert slow["texts"] == ["started slowly"]
    assert not slow["left_behind"]  # stopped


def test_a_connect_that_finds_no_room_in_time_fails_naming_the_resource(
    run: dict[str, Any],
) -> None:
    cap = run["capacity"]
    refused = cap["p4_connect"]
    assert refused["type"] == "ClusterError", refused
    assert "'p4' could not start within start_timeout=1s" in refused["message"]
    assert "no node has room" in refused["message"]
    assert "agent 1: 0 of 2 free in the cluster" in refused["message"]
    assert not cap["p4_left_behind"]  # no pending actor keeps the name: the next connect is new
    # a resource no node has: said so (Ray keeps such an actor pending for an autoscaler)
    assert cap["infeasible"]["type"] == "ClusterError", cap["infeasible"]
    assert "gpu 1: no node has that much (infeasible" in cap["infeasible"]["message"]
    assert "start nodes that have it" in cap["infeasible"]["message"]


def test_a_released_agents_reload_that_finds_no_room_fails_and_loses_nothing(
    run: dict[str, Any],
) -> None:
    cap = run["capacity"]
    refused = cap["p1_reload_full"]
    assert refused["type"] == "ClusterError", refused
    assert (
        "failover_timeout=1.5s" in refused["message"] and "no node has room" in refused["message"]
    )
    assert not cap["p1_left_behind"]
    # once there is room again, it comes back with what its release saved
    assert cap["p1_after_room"]["type"] == "none", cap["p1_after_room"]
    assert cap["p1_texts"] == ["kept by the release"]


def test_a_restarted_agent_waits_for_room_and_goes_where_there_is_some(
    run: dict[str, Any],
) -> None:
    cap = run["capacity"]
    assert cap["restart_waits_for_room"], cap  # its node died; the head was full
    assert cap["restarting_no_room"]  # what names the cause if failover_timeout ends first
    assert cap["restart_call"]["type"] == "none", cap["restart_call"]
    assert cap["restarted_on"] == "head"

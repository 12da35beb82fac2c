"""A real 2-node Ray cluster: one agent reached from two drivers, its node killed.

One run of ``_driver.py`` (a cluster, every scenario in order; about a
minute on 2 busy cores) inside a private network and PID namespace: Ray
binds the host's external interface otherwise, and the PID namespace ends
every Ray process when the driver ends, whatever happens.  PostgreSQL is
the suite's, reached through its unix socket.  Each test asserts one
behaviour on what the run observed.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests._postgres import pg_url

pytest.importorskip("ray")

DRIVER = Path(__file__).with_name("_driver.py")


def _namespaces_work() -> bool:
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    probe = subprocess.run(
        ["unshare", "--net", "sh", "-c", "ip link set lo up"], capture_output=True, timeout=30
    )
    return probe.returncode == 0


@pytest.fixture(scope="module")
def run(pg_server_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if not _namespaces_work():
        pytest.skip("needs unshare --net and ip (root): Ray must not bind the host network")
    import psycopg

    if "host=/" not in pg_server_dsn and "host=%2F" not in pg_server_dsn:
        pytest.skip("the cluster reaches PostgreSQL through its unix socket only")
    with psycopg.connect(pg_server_dsn, autocommit=True) as conn:
        conn.execute('DROP DATABASE IF EXISTS "t_cluster" WITH (FORCE)')
        conn.execute('CREATE DATABASE "t_cluster"')
    from tests._postgres import _with_dbname

    url = pg_url(_with_dbname(pg_server_dsn, "t_cluster"))
    out = tmp_path_factory.mktemp("cluster") / "run.json"
    # Ray's sockets live under its temp folder: keep the path short (unix socket limit)
    tmp = tempfile.mkdtemp(prefix="rayam", dir="/tmp")
    os.mkdir(os.path.join(tmp, "ray"))  # Cluster writes ray/ray_current_cluster before making it
    env = {
        **os.environ,
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": secrets.token_hex(32),
        "RAY_USAGE_STATS_ENABLED": "0",
        "RAY_TMPDIR": tmp,  # every file Ray writes (it writes some outside temp_dir)
    }
    script = f'ip link set lo up && exec "{sys.executable}" "{DRIVER}" main "$0" "{out}" "{tmp}"'
    try:
        proc = subprocess.run(
            ["unshare", "--net", "--pid", "--fork", "--mount-proc", "sh", "-c", script, url],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
            cwd=Path(__file__).parents[2],
        )
        assert proc.returncode == 0, proc.stderr[-6000:]
        result: dict[str, Any] = json.loads(out.read_text())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        with psycopg.connect(pg_server_dsn, autocommit=True) as conn:
            conn.execute('DROP DATABASE IF EXISTS "t_cluster" WITH (FORCE)')
    return result


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
    assert run["bob_same_session"]["type"] in ("ClusterError", "ClusterConfigError")
    assert "belongs to the agent of namespace" in run["bob_same_session"]["message"]
    assert run["alice_unchanged_by_bob"] == run["restored_after_stop"]
    assert "ClusterConfigError" in run["second"]["other_settings"]
    assert "write_through" in run["second"]["other_settings"]


def test_a_react_agent_runs_with_the_remote_memory_unchanged(run: dict[str, Any]) -> None:
    assert run["bot_reply"] == "2 + 3 = 5"
    assert run["bot_roles"] == ["user", "assistant", "tool", "assistant"]
    assert run["bot_recorded"] >= 1
    assert run["bot_loaded"] is True
    assert run["bot_status"] == "idle"


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


def test_with_write_through_every_returned_call_survives_the_node(run: dict[str, Any]) -> None:
    assert run["carol_on_worker2"]
    assert run["carol_after_kill"]["type"] == "none"  # a read in flight is resent
    assert run["carol_texts"] == ["one", "two", "three"]


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


def test_the_run_stays_small(run: dict[str, Any]) -> None:
    # not a timing assertion: a record of the cost, printed with -s / -rA
    print(
        f"cluster up {run['cluster_up_s']:.1f}s, first connect {run['first_connect_s']:.1f}s, "
        f"failover {run['failover_s']:.1f}s, idle release seen after "
        f"{run['dave_released_s']:.1f}s, whole run {run['total_s']:.1f}s, "
        f"one agent's actor {run['actor_rss_mb']:.0f} MB resident"
    )

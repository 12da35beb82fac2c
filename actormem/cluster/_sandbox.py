"""A loopback Ray cluster in a private network namespace, for the cluster tests and benchmarks.

Not part of the API: the one start-up that ``tests/cluster`` and
``benchmarks/bench_cluster.py`` share, so the two never drift apart.

Why a namespace: ``ray start --node-ip-address=127.0.0.1`` still binds the
host's external interface (the GCS server listens on ``*:6379``), so a test
cluster must never run on the host network.  :func:`run_isolated` runs a
command inside a new network and PID namespace (``unshare --net --pid
--fork --mount-proc``, a user namespace too when not root) with only
loopback up; when the command ends, the kernel ends every process it
started (the PID namespace's first process is gone), whatever happened.
PostgreSQL is reached through its unix socket, which a network namespace
does not hide.  Every Ray process joins with token authentication and
writes under one temporary folder (``RAY_TMPDIR``) that the caller removes.

Inside the namespace, :func:`start_cluster` starts a head and worker nodes
with fast failure detection and connects this process as a driver;
:func:`kill_node` kills a node the way a machine dies.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

__all__ = [
    "FAST_HEALTH",
    "NODE",
    "SKIP_ENV",
    "isolation_problem",
    "kill_node",
    "on_node",
    "ray_tmpdir",
    "run_isolated",
    "start_cluster",
]

#: Set to 1 to skip the cluster tests where they cannot run (no user or network
#: namespaces); the skip then names this variable. Unset, they fail instead.
SKIP_ENV: Final = "ACTORMEM_SKIP_CLUSTER_TESTS"

#: Failure detection in about a second instead of Ray's default half minute.
FAST_HEALTH: Final[dict[str, int]] = {
    "health_check_initial_delay_ms": 0,
    "health_check_period_ms": 200,
    "health_check_timeout_ms": 200,
    "health_check_failure_threshold": 3,
}
#: One small node on loopback (the machine has few cores; Ray's object store is not used much).
NODE: Final[dict[str, Any]] = {
    "num_cpus": 1,
    "node_ip_address": "127.0.0.1",
    "object_store_memory": 80 * 2**20,
}


def _unshare() -> list[str]:
    # --kill-child: when unshare is killed (a timeout), its child -- the namespace's
    # first process -- dies with it, and so does every process in the namespace
    unshare = _tool("unshare") or "unshare"
    cmd = [unshare, "--net", "--pid", "--fork", "--kill-child", "--mount-proc"]
    if os.geteuid() != 0:  # an unprivileged user makes a user namespace to hold the others
        cmd[1:1] = ["--user", "--map-root-user"]
    return cmd


def _tool(name: str) -> str | None:
    # a user's PATH often lacks the sbin folders, where ip lives
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")


def _lo_up() -> str:
    return f"'{_tool('ip') or 'ip'}' link set lo up"


def isolation_problem() -> str | None:
    """Why a private network namespace with loopback cannot be made here (None: it can)."""
    for tool, package in (("unshare", "util-linux"), ("ip", "iproute2")):
        if _tool(tool) is None:
            return f"{tool!r} is not installed (Debian package {package})"
    probe = subprocess.run(
        [*_unshare(), "sh", "-c", _lo_up()],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if probe.returncode != 0:
        return (
            f'`{" ".join(_unshare())} sh -c "{_lo_up()}"` failed '
            f"({probe.returncode}): {probe.stderr.strip()[-400:]}"
        )
    return None


@contextlib.contextmanager
def ray_tmpdir() -> Iterator[str]:
    """A short folder under /tmp for everything Ray writes (removed at the end).

    Short: Ray's unix sockets live in it (a socket path has ~107 bytes).
    """
    tmp = tempfile.mkdtemp(prefix="rayam", dir="/tmp")
    # Cluster writes ray/ray_current_cluster before it makes the folder
    os.mkdir(os.path.join(tmp, "ray"))
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run_isolated(
    argv: Sequence[str],
    tmp: str,
    *,
    timeout: float,
    cwd: str | os.PathLike[str] | None = None,
    capture: bool = False,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` in a new network and PID namespace with only loopback up.

    Args:
        argv: the command (``sys.executable``, a script, its arguments).
        tmp: Ray's folder (:func:`ray_tmpdir`).
        timeout: seconds; on expiry the namespace's first process is killed,
            and with it every process in the namespace.
        capture: keep stdout and stderr (as text) instead of passing them through.
        env: more environment variables.
    """
    full = {
        **os.environ,
        **(env or {}),
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": secrets.token_hex(32),
        "RAY_USAGE_STATS_ENABLED": "0",
        "RAY_TMPDIR": tmp,  # every file Ray writes (it writes some outside temp_dir)
    }
    script = f'{_lo_up()} && exec "$@"'
    return subprocess.run(
        [*_unshare(), "sh", "-c", script, "sh", *argv],
        env=full,
        timeout=timeout,
        cwd=cwd,
        capture_output=capture,
        text=True,
    )


def start_cluster(
    tmp: str, workers: int = 1, resources: Mapping[str, float] | None = None
) -> tuple[Any, list[Any]]:
    """Start a head and ``workers`` worker nodes and connect this process (in the namespace).

    Args:
        resources: custom Ray resources every node has (a capacity agents can ask for).

    Returns:
        The ``ray.cluster_utils.Cluster`` and its worker nodes.
    """
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            **NODE,
            "temp_dir": tmp,
            "include_dashboard": False,
            "_system_config": FAST_HEALTH,
            "resources": dict(resources or {}),
        },
    )
    nodes = [cluster.add_node(**NODE, resources=dict(resources or {})) for _ in range(workers)]
    ray.init(address=cluster.address, logging_level=logging.WARNING)
    cluster.wait_for_nodes()
    return cluster, nodes


def on_node(node_id: str) -> dict[str, Any]:
    """``actor_options`` that place an agent on a node, softly (it may move when the node dies).

    A zero-CPU actor's soft affinity was ignored 1 time in 4 here; a small
    CPU share is not.
    """
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return {
        "scheduling_strategy": NodeAffinitySchedulingStrategy(node_id, soft=True),
        "num_cpus": 0.01,
    }


def kill_node(cluster: Any, node: Any) -> None:
    """Kill a node like a machine that dies: its raylet and every process it started.

    ``remove_node`` alone kills the raylet, but its workers (the agents'
    actors among them) notice only much later; on a dead machine they are
    gone with it.  Returns when they have exited.
    """
    import psutil  # a dependency of Ray

    raylet = node.all_processes["raylet"][0].process.pid
    procs = psutil.Process(raylet).children(recursive=True)
    cluster.remove_node(node, allow_graceful=False)
    for p in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()
    psutil.wait_procs(procs, timeout=30)

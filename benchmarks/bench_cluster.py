"""Cluster benchmark: the remote handle's cost next to a local runtime, capacity, failover.

In one run, on a 2-node Ray cluster on loopback (inside a private network and
PID namespace, as the tests: Ray binds the host's external interface
otherwise), PostgreSQL store and sessions (a private pgserver, or
``ACTORMEM_PG_DSN``; reached through its unix socket):

* round trip: a local ``MemoryRuntime.size()`` (a pykka ask; the baseline),
  a bare Ray actor method, ``RemoteRuntime.size()``, and the same call with
  the five Ray arguments the handle sent before ``_wire`` packed them into
  one: p50 and p99, and the ratios to the local ask and to the bare method;
* memory of one process: a bare Ray actor against an agent's actor (RSS,
  USS, PSS: a resident agent costs about its PSS, the shared libraries'
  pages counted once across the processes that map them);
* placement of 8 agents over the 2 nodes, without ``actor_options`` and with
  ``scheduling_strategy="SPREAD"``;
* adds/s and retrieves/s (and each call's p50/p99) for N agents spread over
  the 2 nodes, one asyncio caller per agent (``aadd`` / ``aretrieve`` in a
  loop).  Up to ``--wave`` agents are resident at once; more run in waves
  with ``idle_release``, so earlier waves are saved and released while
  later ones run: the peak of resident agents (and their PSS) is sampled,
  then every agent is called again (a reload from its session), and the
  messages nobody flushed must all be there;
* failover: the node hosting an agent killed (its raylet and every process
  it started), time until the first call after it answers.

``python -m benchmarks.bench_cluster [--agents 1 8 64] [--calls 2000] [--wave 12]
[--idle-release 15] [--failovers 3]``.  Figures go in the README as ratios
with the load average.  The embedder is the hashing one (the store's work is
not what this measures).  Each resident agent holds 3 PostgreSQL connections
(PostgreSQL's default ``max_connections`` is 100): a wave of 12 keeps the
resident agents of two waves under it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks._common import print_table, summary, write_results


def _timed(fn: Any, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e6)
    return out


def _memory_mb(pid: int) -> dict[str, float]:
    """RSS, USS (pages only this process has) and PSS (its share of shared ones), MB."""
    import psutil

    m = psutil.Process(pid).memory_full_info()
    return {"rss": m.rss / 2**20, "uss": m.uss / 2**20, "pss": m.pss / 2**20}


def _agent_pids() -> list[int]:
    """The agent actors' processes (the benchmark runs in its own PID namespace)."""
    import psutil

    pids = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = " ".join(p.info["cmdline"] or ())
        if cmd.startswith("ray::") and "MemoryHost" in cmd:
            pids.append(p.pid)
    return pids


class _Resident:
    """Samples the alive agent actors (count, PSS each) on a thread of its own."""

    def __init__(self, period: float = 0.5) -> None:
        self.peak = 0
        self.peak_pss_mb = 0.0
        self.pss_mb: list[float] = []
        self._period = period
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import psutil

        k = 0
        while not self._stop.wait(self._period):
            pids = _agent_pids()
            self.peak = max(self.peak, len(pids))
            k += 1
            if k % 4 == 0:  # PSS reads every mapping: less often
                each = []
                for pid in pids:
                    with contextlib.suppress(psutil.Error):
                        each.append(_memory_mb(pid)["pss"])
                self.pss_mb += each
                self.peak_pss_mb = max(self.peak_pss_mb, sum(each))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def _until_no_agents(timeout: float = 60) -> None:
    """Wait until every agent process of the previous part has exited (no event for it)."""
    deadline = time.monotonic() + timeout
    while _agent_pids():
        if time.monotonic() > deadline:
            raise TimeoutError(f"agent processes still alive after {timeout} s")
        time.sleep(0.2)


def _until_released(handles: list[Any], timeout: float = 120) -> None:
    """Wait until these agents' actors are gone (released; Ray gives no event for it)."""
    import ray

    from actormem.cluster import RAY_NAMESPACE, actor_name

    deadline = time.monotonic() + timeout
    for h in handles:
        while True:
            try:
                ray.get_actor(actor_name(h._spec), namespace=RAY_NAMESPACE)
            except ValueError:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"agents not released within {timeout} s")
            time.sleep(0.1)


def _node_counts(handles: list[Any], nodes: list[str]) -> list[int]:
    where = [h.where()["node_id"] for h in handles]
    return [where.count(n) for n in nodes]


def inner(
    pg: str,
    out: str,
    tmp: str,
    agents: list[int],
    calls: int,
    failovers: int,
    wave: int,
    idle_release: float,
) -> None:
    import psutil
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from actormem import MemoryRuntime
    from actormem.cluster import RemoteRuntime
    from actormem.cluster._sandbox import NODE, kill_node, on_node, start_cluster
    from actormem.messages import Msg
    from actormem.models.embedders import HashEmbedder
    from actormem.store import Namespace

    res: dict[str, Any] = {"load_start": os.getloadavg()}
    cluster, (worker,) = start_cluster(tmp)
    nodes = [cluster.head_node.node_id, worker.node_id]
    spread = {"num_cpus": 0.01, "scheduling_strategy": "SPREAD"}

    def connect(sid: str, options: dict[str, Any] | None, **kw: Any) -> RemoteRuntime:
        return RemoteRuntime.connect(
            sid,
            namespace=Namespace(user_id=sid),
            store=pg,
            sessions=pg,
            embedder=HashEmbedder(64),
            actor_options=options,
            **kw,
        )

    # -- round trips ---------------------------------------------------------------
    @ray.remote(num_cpus=0.01)
    class Bare:
        def size(self) -> int:
            return 0

        def pid(self) -> int:
            return os.getpid()

    bare_class: Any = Bare  # a Ray actor class, typed as the plain class
    bare = bare_class.options(
        scheduling_strategy=NodeAffinitySchedulingStrategy(worker.node_id, soft=True)
    ).remote()
    ray.get(bare.size.remote())
    remote = connect("rtt", on_node(worker.node_id))
    remote.add(Msg.user("hello"))
    actor = remote._actor

    def five_args() -> Any:
        # the handle's path before the call was pickled into one argument (_wire)
        return ray.get(actor.call.remote("size", (), {}, None, False))

    tmp = tempfile.mkdtemp(prefix="bcl", dir="/tmp")
    rows: dict[str, list[float]] = {}
    local_name = "local MemoryRuntime.size() (pykka ask)"
    with MemoryRuntime(session_dir=tmp) as local:
        local.add(Msg.user("hello"))
        for _ in range(4):  # interleaved rounds: the load moves during the run
            for name, fn in (
                (local_name, local.size),
                ("bare Ray actor method", lambda: ray.get(bare.size.remote())),
                ("RemoteRuntime.size()", remote.size),
                ("the same, 5 Ray arguments (before _wire)", five_args),
            ):
                rows.setdefault(name, []).extend(_timed(fn, calls // 4))
    shutil.rmtree(tmp, ignore_errors=True)
    base = statistics.median(rows[local_name])
    bare_p50 = statistics.median(rows["bare Ray actor method"])
    res["round_trip_us"] = {
        name: {
            **summary(v),
            "ratio_p50": statistics.median(v) / base,
            "ratio_bare": statistics.median(v) / bare_p50,
        }
        for name, v in rows.items()
    }

    # -- what an agent's process holds: a Ray worker, then actormem --------------------
    time.sleep(1)  # let both settle after the round trips
    res["memory_mb"] = {
        "bare Ray actor": _memory_mb(ray.get(bare.pid.remote())),
        "agent (PostgreSQL store, hash embedder)": _memory_mb(remote.where()["pid"]),
    }
    remote.stop()
    ray.kill(bare)

    # -- placement: where agents go without options, and with SPREAD -------------------
    res["placement"] = {}
    for k, (label, options) in enumerate(
        (("default (no actor_options)", None), ("SPREAD, num_cpus=0.01", spread))
    ):
        with ThreadPoolExecutor(8) as pool:
            placed = list(pool.map(lambda i, k=k, o=options: connect(f"pl{k}-{i}", o), range(8)))
        res["placement"][label] = _node_counts(placed, nodes)
        for h in placed:
            h.stop()
        _until_no_agents()

    # -- throughput ------------------------------------------------------------------
    res["throughput"] = []
    for n in agents:
        res["throughput"].append(
            _throughput(n, calls, wave, idle_release, connect, spread, nodes, Msg)
        )

    # -- failover --------------------------------------------------------------------
    times = []
    for k in range(failovers):
        node = cluster.add_node(**NODE)
        cluster.wait_for_nodes()
        h = connect(f"fo{k}", on_node(node.node_id))
        h.add(Msg.user("before"))
        h.flush()
        assert h.where()["node_id"] == node.node_id
        t = time.perf_counter()
        kill_node(cluster, node)
        texts = [m.text for m in h.messages()]
        times.append(time.perf_counter() - t)
        assert texts == ["before"], texts
        h.stop()
    res["failover_s"] = summary(times) if times else {}
    res["failover_values_s"] = times
    res["load_end"] = os.getloadavg()
    res["memory_available_gb_end"] = psutil.virtual_memory().available / 2**30
    with open(out, "w") as f:
        json.dump(res, f)
    ray.shutdown()
    cluster.shutdown()


def _throughput(
    n: int,
    calls: int,
    wave: int,
    idle_release: float,
    connect: Any,
    spread: dict[str, Any],
    nodes: list[str],
    msg: Any,
) -> dict[str, Any]:
    """adds/s and retrieves/s of ``n`` agents, one asyncio caller each.

    ``n <= wave``: every agent resident at once.  Otherwise the agents run in
    waves of ``wave`` with ``idle_release``: a wave's agents are released
    after the next wave started, so about two waves at most are resident;
    then every agent is called again, a wave at a time (the previous one
    released first), which reloads it from its session: nothing may be lost.
    """
    import psutil

    per = max(calls // n, 50)
    waves = [list(range(i, min(i + wave, n))) for i in range(0, n, wave)]
    released = idle_release if len(waves) > 1 else None
    need_gb = min(n, 2 * wave) * 0.25 + 1.0  # 250 MB RSS per resident agent, 1 GB spare
    free_gb = psutil.virtual_memory().available / 2**30
    if free_gb < need_gb:
        raise SystemExit(f"{n} agents: {need_gb:.1f} GB needed, {free_gb:.1f} GB available")
    _until_no_agents()
    resident = _Resident()
    handles: list[Any] = []
    start_s = add_s = ret_s = 0.0
    add_lat: list[float] = []
    ret_lat: list[float] = []
    counts = [0, 0]

    def connect_all(ids: list[int]) -> list[Any]:
        with ThreadPoolExecutor(len(ids)) as pool:  # created side by side, as callers would
            return list(
                pool.map(lambda i: connect(f"tp{n}-{i}", spread, idle_release=released), ids)
            )

    async def first_write(h: Any) -> None:  # each agent's first write (untimed, as its start)
        await h.asave_fact("city", "Porto")

    async def adds(h: Any) -> None:
        for i in range(per):
            t0 = time.perf_counter()
            await h.aadd(msg.user(f"message {i} about Porto and Lisbon"))
            add_lat.append((time.perf_counter() - t0) * 1e3)

    async def retrieves(h: Any) -> None:
        for _ in range(per // 2):
            t0 = time.perf_counter()
            await h.aretrieve("Porto", 5)
            ret_lat.append((time.perf_counter() - t0) * 1e3)

    for ids in waves:
        t = time.perf_counter()
        mine = connect_all(ids)
        start_s += time.perf_counter() - t
        for c, node in enumerate(_node_counts(mine, nodes)):
            counts[c] += node
        asyncio.run(_gather(first_write, mine))
        t = time.perf_counter()
        asyncio.run(_gather(adds, mine))
        add_s += time.perf_counter() - t
        t = time.perf_counter()
        asyncio.run(_gather(retrieves, mine))
        ret_s += time.perf_counter() - t
        handles += mine
    row: dict[str, Any] = {
        "agents": n,
        "wave": min(n, wave),
        "idle_release_s": released,
        "start_s": start_s,
        "adds_per_s": n * per / add_s,
        "retrieves_per_s": n * (per // 2) / ret_s,
        "adds": n * per,
        "add_ms": summary(add_lat),
        "retrieve_ms": summary(ret_lat),
        "per_node": counts,
    }
    if released is not None:
        first = [handles[i] for i in waves[0]]
        _until_released(first)
        reload = []
        lost = 0
        for h in first:  # one at a time: the reload of one agent
            t = time.perf_counter()
            size = h.size()
            reload.append(time.perf_counter() - t)
            lost += per - size  # the release saved the adds nobody flushed
        row["reload_s"] = summary(reload)

        async def sizes(hs: list[Any]) -> list[int]:
            return list(await asyncio.gather(*(h.asize() for h in hs)))

        t = time.perf_counter()
        before = first
        for ids in waves[1:]:  # the others, a wave at a time, the previous one released
            _until_released(before)
            before = [handles[i] for i in ids]
            lost += sum(per - s for s in asyncio.run(sizes(before)))
        row["reload_rest_s"] = time.perf_counter() - t
        row["messages_lost"] = lost
    resident.stop()
    row["resident_peak"] = resident.peak
    row["resident_peak_pss_mb"] = resident.peak_pss_mb
    row["pss_mb_each"] = statistics.median(resident.pss_mb) if resident.pss_mb else None
    for h in handles:
        h.stop()
    return row


async def _gather(fn: Any, handles: list[Any]) -> None:
    await asyncio.gather(*(fn(h) for h in handles))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agents", type=int, nargs="+", default=[1, 8, 64])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--failovers", type=int, default=3)
    ap.add_argument("--wave", type=int, default=12, help="agents started together (more: waves)")
    ap.add_argument("--idle-release", type=float, default=15.0, help="seconds, for waves")
    ap.add_argument("--inner", nargs=3, metavar=("PG_URL", "OUT", "TMP"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.inner:
        pg_url, out, tmp = args.inner
        inner(
            pg_url,
            out,
            tmp,
            args.agents,
            args.calls,
            args.failovers,
            args.wave,
            args.idle_release,
        )
        return
    from actormem.cluster._sandbox import isolation_problem, ray_tmpdir, run_isolated
    from benchmarks._pg import drop_database, fresh_database, postgres_server

    problem = isolation_problem()
    if problem is not None:  # Ray must not run on the host network
        raise SystemExit(f"bench_cluster needs a private network namespace: {problem}")
    with postgres_server() as server, ray_tmpdir() as tmp:
        url = fresh_database(server, "cluster")
        out = os.path.join(tmp, "result.json")
        argv = [
            sys.executable,
            "-m",
            "benchmarks.bench_cluster",
            "--inner",
            url,
            out,
            tmp,
            "--agents",
            *map(str, args.agents),
            "--calls",
            str(args.calls),
            "--failovers",
            str(args.failovers),
            "--wave",
            str(args.wave),
            "--idle-release",
            str(args.idle_release),
        ]
        try:
            run_isolated(argv, tmp, timeout=1800, cwd=Path(__file__).resolve().parents[1])
            res = json.loads(Path(out).read_text())
            res["pg_max_connections"] = _max_connections(url)
        finally:
            drop_database(server, url)
    report(res)
    print("results:", write_results("bench_cluster", res))


def _max_connections(url: str) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SHOW max_connections").fetchone()
    return int(row[0]) if row else 0


def report(res: dict[str, Any]) -> None:
    """The tables of one run's results."""
    rt = res["round_trip_us"]
    print_table(
        f"Round trip, µs (load {res['load_start'][0]:.1f} -> {res['load_end'][0]:.1f})",
        ["call", "p50", "p99", "p50 / local ask", "p50 / bare Ray"],
        [[k, v["p50"], v["p99"], v["ratio_p50"], v["ratio_bare"]] for k, v in rt.items()],
    )
    print_table(
        "One process's memory, MB (USS: its own pages; PSS: with its share of shared ones)",
        ["process", "RSS", "USS", "PSS"],
        [[k, v["rss"], v["uss"], v["pss"]] for k, v in res["memory_mb"].items()],
    )
    print_table(
        "Placement of 8 agents on 2 nodes",
        ["actor_options", "head", "worker"],
        [[k, *v] for k, v in res["placement"].items()],
    )
    print_table(
        "Throughput on 2 nodes (SPREAD; one asyncio caller per agent)",
        [
            "agents",
            "resident at once",
            "adds/s",
            "add p50/p99 ms",
            "retrieves/s",
            "retrieve p50/p99 ms",
            "start s",
            "PSS MB each",
            "resident peak (PSS MB)",
            "per node",
        ],
        [
            [
                t["agents"],
                t["wave"],
                t["adds_per_s"],
                f"{t['add_ms']['p50']:.1f} / {t['add_ms']['p99']:.1f}",
                t["retrieves_per_s"],
                f"{t['retrieve_ms']['p50']:.1f} / {t['retrieve_ms']['p99']:.1f}",
                t["start_s"],
                t["pss_mb_each"],
                f"{t['resident_peak']} ({t['resident_peak_pss_mb']:,.0f})",
                "/".join(map(str, t["per_node"])),
            ]
            for t in res["throughput"]
        ],
    )
    for t in res["throughput"]:
        if "reload_s" in t:
            r = t["reload_s"]
            print(
                f"{t['agents']} agents, idle_release {t['idle_release_s']} s: reload after "
                f"release (first call) p50 {r['p50']:.2f} s, max {r['p99']:.2f} s over "
                f"{int(r['n'])}; the other {t['agents'] - int(r['n'])} reloaded, a wave at a "
                f"time, in {t['reload_rest_s']:.1f} s; messages lost: {t['messages_lost']}"
            )
    if res["failover_s"]:
        f = res["failover_s"]
        print(
            f"failover (kill -> first answer): p50 {f['p50']:.2f} s, max "
            f"{max(res['failover_values_s']):.2f} s over {int(f['n'])}"
        )


if __name__ == "__main__":
    main()

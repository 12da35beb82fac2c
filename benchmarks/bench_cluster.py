"""Cluster benchmark: the remote handle's cost next to a local runtime, throughput, failover.

In one run, on a 2-node Ray cluster on loopback (inside a private network and
PID namespace, as the tests: Ray binds the host's external interface
otherwise), PostgreSQL store and sessions (a private pgserver, or
``ACTORMEM_PG_DSN``; reached through its unix socket):

* round trip: a local ``MemoryRuntime.size()`` (a pykka ask; the baseline),
  a bare Ray actor method, and ``RemoteRuntime.size()``: p50 and p99, and the
  ratio to the baseline;
* adds/s and retrieves/s for N agents spread over the 2 nodes (one asyncio
  caller per agent, ``aadd`` / ``aretrieve`` in a loop);
* failover: the node hosting an agent killed (its raylet and every process
  it started), time until the first call after it answers.

``python -m benchmarks.bench_cluster [--agents 1 8] [--calls 2000] [--failovers 3]``
Figures go in the README as ratios with the load average.  The embedder is
the hashing one (the store's work is not what this measures).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
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


def inner(pg: str, out: str, tmp: str, agents: list[int], calls: int, failovers: int) -> None:
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

    def connect(sid: str, node: str, ns: Namespace) -> RemoteRuntime:
        return RemoteRuntime.connect(
            sid,
            namespace=ns,
            store=pg,
            sessions=pg,
            embedder=HashEmbedder(64),
            actor_options=on_node(node),
        )

    # -- round trips ---------------------------------------------------------------
    @ray.remote(num_cpus=0.01)
    class Bare:
        def size(self) -> int:
            return 0

    bare = Bare.options(
        scheduling_strategy=NodeAffinitySchedulingStrategy(worker.node_id, soft=True)
    ).remote()
    ray.get(bare.size.remote())
    remote = connect("rtt", worker.node_id, Namespace(user_id="rtt"))
    remote.add(Msg.user("hello"))
    tmp = tempfile.mkdtemp(prefix="bcl", dir="/tmp")
    rows: dict[str, dict[str, float]] = {}
    with MemoryRuntime(session_dir=tmp) as local:
        local.add(Msg.user("hello"))
        for _ in range(2):  # interleaved rounds: the load moves during the run
            for name, fn in (
                ("local MemoryRuntime.size() (pykka ask)", local.size),
                ("bare Ray actor method", lambda: ray.get(bare.size.remote())),
                ("RemoteRuntime.size()", remote.size),
            ):
                rows.setdefault(name, {"values": []})["values"] += _timed(fn, calls // 2)  # type: ignore[operator]
    shutil.rmtree(tmp, ignore_errors=True)
    base = statistics.median(rows["local MemoryRuntime.size() (pykka ask)"]["values"])  # type: ignore[arg-type]
    res["round_trip_us"] = {
        name: {**summary(r["values"]), "ratio_p50": summary(r["values"])["p50"] / base}  # type: ignore[arg-type]
        for name, r in rows.items()
    }
    remote.stop()

    # -- throughput ------------------------------------------------------------------
    res["throughput"] = []
    for n in agents:
        t0 = time.perf_counter()
        handles = [
            connect(f"tp{n}-{i}", nodes[i % 2], Namespace(user_id=f"tp{n}-{i}")) for i in range(n)
        ]
        started = time.perf_counter() - t0
        per = max(calls // n, 50)
        for h in handles:
            h.save_fact("city", "Porto")

        async def adds(h: RemoteRuntime, per: int = per) -> None:
            for i in range(per):
                await h.aadd(Msg.user(f"message {i} about Porto and Lisbon"))

        async def retrieves(h: RemoteRuntime, per: int = per) -> None:
            for _ in range(per // 2):
                await h.aretrieve("Porto", 5)

        t = time.perf_counter()
        asyncio.run(_gather(adds, handles))
        add_s = time.perf_counter() - t
        t = time.perf_counter()
        asyncio.run(_gather(retrieves, handles))
        ret_s = time.perf_counter() - t
        res["throughput"].append(
            {
                "agents": n,
                "start_s": started,
                "adds_per_s": n * per / add_s,
                "retrieves_per_s": n * (per // 2) / ret_s,
                "adds": n * per,
                "rss_mb_each": statistics.median(h.where()["rss_bytes"] for h in handles) / 2**20,
            }
        )
        for h in handles:
            h.stop()

    # -- failover --------------------------------------------------------------------
    times = []
    for k in range(failovers):
        node = cluster.add_node(**NODE)
        cluster.wait_for_nodes()
        h = connect(f"fo{k}", node.node_id, Namespace(user_id=f"fo{k}"))
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
    with open(out, "w") as f:
        json.dump(res, f)
    ray.shutdown()
    cluster.shutdown()


async def _gather(fn: Any, handles: list[Any]) -> None:
    await asyncio.gather(*(fn(h) for h in handles))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agents", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--failovers", type=int, default=3)
    ap.add_argument("--inner", nargs=3, metavar=("PG_URL", "OUT", "TMP"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.inner:
        inner(*args.inner, args.agents, args.calls, args.failovers)
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
        ]
        try:
            run_isolated(argv, tmp, timeout=1800, cwd=Path(__file__).resolve().parents[1])
            res = json.loads(Path(out).read_text())
        finally:
            drop_database(server, url)
    rt = res["round_trip_us"]
    print_table(
        f"Round trip, µs (load {res['load_start'][0]:.1f} -> {res['load_end'][0]:.1f})",
        ["call", "p50", "p99", "p50 / local ask"],
        [[k, v["p50"], v["p99"], v["ratio_p50"]] for k, v in rt.items()],
    )
    print_table(
        "Throughput on 2 nodes (one asyncio caller per agent)",
        ["agents", "adds/s", "retrieves/s", "start s", "RSS MB each"],
        [
            [t["agents"], t["adds_per_s"], t["retrieves_per_s"], t["start_s"], t["rss_mb_each"]]
            for t in res["throughput"]
        ],
    )
    if res["failover_s"]:
        f = res["failover_s"]
        print(
            f"failover (kill -> first answer): p50 {f['p50']:.2f} s, max "
            f"{max(res['failover_values_s']):.2f} s over {int(f['n'])}"
        )
    print("results:", write_results("bench_cluster", res))


if __name__ == "__main__":
    main()

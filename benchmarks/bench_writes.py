"""Single durable writes: ``store.add()`` one memory at a time, keyed facts, group commit.

Side by side in one run, on one DuckDB file prefilled with ``--rows`` memories
(WordLlama vectors):

* the disk's floor: ``write`` + ``fsync`` of 2 KB appended in a loop (each
  DuckDB commit syncs its WAL once); every add rate is also given as a ratio
  to it;
* the acknowledgement log's own floor: ``pwrite`` + ``fdatasync`` of 2 KB over
  space written and synced ahead (the file's size never changes, so no
  file-system journal commit): a single thread that syncs once per add cannot
  go faster than this; the add rates are also given as a ratio to it;
* ``store.add()`` one call at a time from 1 thread (durable: each returns
  after its commit), then from 8 and 32 threads, each in its own namespace
  (group commit: concurrent writes of different namespaces share one
  transaction; the mean group size is reported);
* ``save_fact`` / ``get_fact`` / ``get_fact`` of a missing key (KeyedFacts on
  the same store), p50 and p99;
* ``add_many`` of ``--add-many`` (10,000) near-unique items into one empty
  namespace, with the near-duplicate check (threshold 0.95) and without it
  (``near_duplicate_threshold=None``, the baseline of the same run): the ratio
  is what the batch's check against itself costs (``--only-add-many`` runs
  just this; the minutes it took when every pair was compared in Python are
  why it is here).

Every "per s" is the same kind of figure: the count divided by the summed
latencies (1 / mean latency) -- the floors' too, so a ratio compares like with
like (until 2026-11 the floors' rate was 1 / p50 while the adds' was a mean, which
flattered the floors by their tail).  The p50 and p99 columns are latencies.
The single-thread measure's ``n`` adds (300 by default) take less than the
applier's 0.2 s delay on an idle machine, so its DuckDB work falls outside
them; ``-n 3000`` includes it.

Run it under ``nice -n 19`` on a shared machine; absolute times move with the
load, ratios much less.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from actormem.models.embedders import WordLlamaEmbedder
from actormem.recorder import KeyedFacts
from actormem.store import DuckDBStore, Namespace
from benchmarks._common import print_table, summary, write_results


def fsync_floor(folder: Path, n: int) -> dict[str, float]:
    """Latency of a 2 KB append + fsync (ms)."""
    path = folder / "fsync.bin"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    times = []
    try:
        for _ in range(n):
            t0 = time.perf_counter()
            os.write(fd, b"x" * 2048)
            os.fsync(fd)
            times.append((time.perf_counter() - t0) * 1000)
    finally:
        os.close(fd)
        path.unlink()
    return summary(times)


def sync_floor_in_place(folder: Path, n: int) -> dict[str, float]:
    """Latency of a 2 KB ``pwrite`` + ``fdatasync`` over space synced ahead (ms)."""
    path = folder / "inplace.bin"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    times = []
    try:
        os.pwrite(fd, bytes(2048 * (n + 1)), 0)
        os.fsync(fd)
        for i in range(n):
            t0 = time.perf_counter()
            os.pwrite(fd, b"x" * 2048, 2048 * i)
            os.fdatasync(fd)
            times.append((time.perf_counter() - t0) * 1000)
    finally:
        os.close(fd)
        path.unlink()
    return summary(times)


def single_adds(store: DuckDBStore, n: int) -> dict[str, float]:
    """One thread adds ``n`` memories one at a time; also its CPU per add and the process's."""
    ns = Namespace(user_id="single")
    times = []
    thread0, process0 = time.thread_time(), time.process_time()
    for i in range(n):
        t0 = time.perf_counter()
        store.add(ns, f"single durable write number {i} about tea and trains", tags=["bench"])
        times.append((time.perf_counter() - t0) * 1000)
    out = summary(times)
    out["per_s"] = n / (sum(times) / 1000)
    # CPU moves less with the machine's load than wall time: the adding thread's
    # (its Python and its system calls) and the whole process's (the applier and
    # DuckDB's threads too), per add
    out["thread_cpu_ms"] = (time.thread_time() - thread0) / n * 1000
    out["process_cpu_ms"] = (time.process_time() - process0) / n * 1000
    return out


def threaded_adds(store: DuckDBStore, threads: int, per_thread: int) -> dict[str, float]:
    group = getattr(store, "_group", None)  # None: a build without group commit
    groups0, grouped0 = (group.groups, group.grouped) if group is not None else (0, 0)
    start = threading.Barrier(threads + 1)

    def work(t: int) -> None:
        ns = Namespace(user_id=f"thread{threads}-{t}")
        start.wait()
        for i in range(per_thread):
            store.add(ns, f"thread {t} writes memory {i} about the weather")

    jobs = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for job in jobs:
        job.start()
    start.wait()
    t0 = time.perf_counter()
    for job in jobs:
        job.join()
    seconds = time.perf_counter() - t0
    if group is None:
        return {"per_s": threads * per_thread / seconds, "mean_group": 1.0}
    groups = group.groups - groups0
    return {
        "per_s": threads * per_thread / seconds,
        "mean_group": (group.grouped - grouped0) / max(groups, 1),
    }


def facts(store: DuckDBStore, n: int) -> dict[str, dict[str, float]]:
    kf = KeyedFacts(store, Namespace(user_id="facts"))
    save, get, miss = [], [], []
    for i in range(n):
        t0 = time.perf_counter()
        kf.save(f"key{i % 20}", f"value {i}")
        save.append((time.perf_counter() - t0) * 1000)
    for i in range(n):
        t0 = time.perf_counter()
        assert kf.get(f"key{i % 20}") is not None
        get.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        assert kf.get(f"missing{i}") is None
        miss.append((time.perf_counter() - t0) * 1000)
    return {"save_fact": summary(save), "get_fact": summary(get), "get_missing": summary(miss)}


def add_many_batch(n: int, repeat: int = 3, stored: int = 0) -> dict[str, Any]:
    """``add_many`` of ``n`` near-unique items into one namespace: check on and off.

    Each pass opens a fresh store holding ``stored`` other near-unique memories
    of that namespace (written before the clock starts; 0: empty, so only the
    batch is compared with itself) and writes the same texts; passes alternate
    on/off, ``repeat`` of each, and the medians are reported.
    """
    embedder = WordLlamaEmbedder()
    # near-unique: distinct numbers (key terms) in similar sentences, so every
    # item is compared and none merges -- the check's whole cost, no shortcut
    texts = [f"the user noted item {i} of list {i % 101} about topic {i % 37}" for i in range(n)]
    times: dict[str, list[float]] = {"on": [], "off": []}
    merged = 0
    for _ in range(repeat):
        for mode, threshold in (("on", 0.95), ("off", None)):
            with tempfile.TemporaryDirectory() as d:
                store = DuckDBStore(
                    Path(d) / "m.duckdb",
                    embedder=embedder,
                    touch_flush_interval=None,
                    near_duplicate_threshold=threshold,
                )
                try:
                    if stored:
                        store.add_many(
                            Namespace(user_id="batch"),
                            [f"an earlier note {i} on shelf {i % 89}" for i in range(stored)],
                        )
                    t0 = time.perf_counter()
                    res = store.add_many(Namespace(user_id="batch"), texts)
                    times[mode].append(time.perf_counter() - t0)
                    if mode == "on":
                        merged = sum(1 for r in res if r.op != "ADD")
                finally:
                    store.close()
    on, off = sorted(times["on"])[repeat // 2], sorted(times["off"])[repeat // 2]
    return {
        "n": n,
        "stored": stored,
        "on_s": on,
        "off_s": off,
        "ratio": on / off,
        "merged": merged,
        "all": times,
    }


def run(rows: int, n: int) -> dict[str, Any]:
    embedder = WordLlamaEmbedder()
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d)
        store = DuckDBStore(folder / "w.duckdb", embedder=embedder, touch_flush_interval=None)
        try:
            texts = [f"prefilled memory {i} on topic {i % 97}" for i in range(rows)]
            for start in range(0, rows, 10_000):
                store.add_many(Namespace(user_id="prefill"), texts[start : start + 10_000])
            floor = fsync_floor(folder, n)
            in_place = sync_floor_in_place(folder, n)
            one = single_adds(store, n)
            many = {t: threaded_adds(store, t, max(1, 2 * n // t)) for t in (8, 32)}
            fact = facts(store, n)
            floor_after = fsync_floor(folder, n)
            in_place_after = sync_floor_in_place(folder, n)
        finally:
            store.close()
    # 1 / mean latency over both passes, as the adds' rate (see the module)
    fsync_per_s = 1000 / ((floor["mean"] + floor_after["mean"]) / 2)
    in_place_per_s = 1000 / ((in_place["mean"] + in_place_after["mean"]) / 2)
    return {
        "rows": rows,
        "load_avg": os.getloadavg(),
        "fsync_ms": floor,
        "fsync_ms_after": floor_after,
        "fsync_per_s": fsync_per_s,
        "in_place_ms": in_place,
        "in_place_ms_after": in_place_after,
        "in_place_per_s": in_place_per_s,
        # the rates as earlier runs computed them (1 / p50), for comparison
        "fsync_per_s_p50": 1000 / ((floor["p50"] + floor_after["p50"]) / 2),
        "in_place_per_s_p50": 1000 / ((in_place["p50"] + in_place_after["p50"]) / 2),
        "add_1_thread": one,
        "add_threads": many,
        "facts": fact,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000, help="memories prefilled")
    parser.add_argument("-n", type=int, default=300, help="single writes per measure")
    parser.add_argument("--quick", action="store_true", help="2,000 rows, 50 writes")
    parser.add_argument("--add-many", type=int, default=10_000, help="items of one add_many")
    parser.add_argument("--only-add-many", action="store_true", help="just the add_many rows")
    parser.add_argument("--repeat", type=int, default=3, help="add_many passes of each mode")
    parser.add_argument("--stored", type=int, default=0, help="memories already in the namespace")
    args = parser.parse_args(argv)
    if args.quick:
        args.rows, args.n, args.add_many = 2_000, 50, 1_000
    batch = add_many_batch(args.add_many, args.repeat, args.stored) if args.add_many else None
    if args.only_add_many:
        assert batch is not None
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        print_table(
            f"add_many into one namespace (load {load})",
            ["measure", "median s", "items per s", "x check off"],
            _batch_rows(batch),
        )
        path = write_results("bench_writes_add_many", {"load_avg": os.getloadavg(), **batch})
        print(f"results: {path}")
        return batch
    res = run(args.rows, args.n)
    res["add_many"] = batch
    f, g = res["fsync_per_s"], res["in_place_per_s"]
    rows = [
        [
            "fsync floor (2 KB append + fsync)",
            f,
            1.0,
            f / g,
            res["fsync_ms"]["p50"],
            res["fsync_ms"]["p99"],
        ],
        [
            "in-place floor (2 KB pwrite + fdatasync)",
            g,
            g / f,
            1.0,
            res["in_place_ms"]["p50"],
            res["in_place_ms"]["p99"],
        ],
        [
            "store.add(), 1 thread",
            res["add_1_thread"]["per_s"],
            res["add_1_thread"]["per_s"] / f,
            res["add_1_thread"]["per_s"] / g,
            res["add_1_thread"]["p50"],
            res["add_1_thread"]["p99"],
        ],
    ]
    one = res["add_1_thread"]
    rows.append(
        [
            "  CPU per add: the thread / the process (ms)",
            "",
            "",
            "",
            f"{one['thread_cpu_ms']:.3f}",
            f"{one['process_cpu_ms']:.3f}",
        ]
    )
    for t, r in res["add_threads"].items():
        rows.append(
            [
                f"store.add(), {t} threads (group {r['mean_group']:.1f})",
                r["per_s"],
                r["per_s"] / f,
                r["per_s"] / g,
                "",
                "",
            ]
        )
    for name, s in res["facts"].items():
        rows.append([name, 1000 / s["mean"], "", "", s["p50"], s["p99"]])
    if batch is not None:
        for name, seconds, per_s, ratio in _batch_rows(batch):
            rows.append([name, per_s, "", "", f"{seconds} s", f"{ratio} x off"])
    load = ", ".join(f"{x:.1f}" for x in res["load_avg"])
    print_table(
        f"single durable writes, {res['rows']:,} memories prefilled (load {load})",
        ["measure", "per s (1/mean)", "x fsync floor", "x in-place floor", "p50 ms", "p99 ms"],
        rows,
    )
    path = write_results("bench_writes", res)
    print(f"results: {path}")
    return res


def _batch_rows(batch: dict[str, Any]) -> list[list[Any]]:
    n, into = batch["n"], f" into {batch['stored']:,} stored" if batch.get("stored") else ""
    return [
        [
            f"add_many {n:,} near-unique{into}, check on ({batch['merged']} merged)",
            f"{batch['on_s']:.2f}",
            n / batch["on_s"],
            f"{batch['ratio']:.2f}",
        ],
        [
            f"add_many {n:,} near-unique, check off",
            f"{batch['off_s']:.2f}",
            n / batch["off_s"],
            "1.00",
        ],
    ]


if __name__ == "__main__":
    main()

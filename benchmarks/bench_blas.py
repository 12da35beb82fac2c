"""BLAS threads: the numpy floor on the library's threads and on one, idle and busy.

The decision in ``actormem/store/_blas.py`` comes from this run: for each
size N, the cosine top-10 over N x 256 float32 rows (the store's exact
vector product; the same floor ``bench_store`` reports), 300 queries (60 at
1M), first with OpenBLAS's own thread count and then limited to one thread
with threadpoolctl, twice in alternation, first idle and then beside two
CPU-bound processes (``bench_store.BusyNeighbours``).  Each pass prints p50
and p99 in ms, with the 1-minute load average.

Usage::

    python -m benchmarks.bench_blas [--sizes 5000,100000,1000000]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
from typing import Any

import numpy as np
from threadpoolctl import ThreadpoolController

from benchmarks._common import print_table, write_results
from benchmarks.bench_store import BusyNeighbours

__all__ = ["main"]


def _pass(matrix: Any, queries: Any, reps: int) -> tuple[float, float]:
    times = []
    for i in range(reps):
        t0 = time.perf_counter()
        scores = matrix @ queries[i % len(queries)]
        np.argpartition(-scores, 9)[:10]
        times.append(time.perf_counter() - t0)
    ms = np.array(times) * 1000
    return round(float(np.percentile(ms, 50)), 3), round(float(np.percentile(ms, 99)), 3)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the comparison, print a table and write ``results/bench_blas.json``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="5000,100000,1000000")
    parser.add_argument("--quick", action="store_true", help="sizes up to 20k, fewer repeats")
    args = parser.parse_args(argv)
    controller = ThreadpoolController()
    library = [i["num_threads"] for i in controller.select(user_api="blas").info()]
    rng = np.random.default_rng(0)
    rows, results = [], []
    sizes = [int(s) for s in args.sizes.split(",")]
    for n in sorted({min(n, 20_000) for n in sizes}) if args.quick else sizes:
        matrix = rng.standard_normal((n, 256), dtype=np.float32)
        queries = rng.standard_normal((50, 256), dtype=np.float32)
        reps = 30 if args.quick else 300 if n <= 100_000 else 60
        for label in ("idle", "busy"):
            busy = BusyNeighbours(2) if label == "busy" else contextlib.nullcontext()
            with busy:
                passes: dict[str, list[tuple[float, float]]] = {"library": [], "one": []}
                for threads in ("library", "one", "library", "one"):
                    if threads == "one":
                        with controller.limit(limits=1, user_api="blas"):
                            passes[threads].append(_pass(matrix, queries, reps))
                    else:
                        passes[threads].append(_pass(matrix, queries, reps))
                load = round(os.getloadavg()[0], 1)
            results.append({"n": n, "condition": label, "load_1m": load, **passes})
            rows.append(
                [
                    f"{n:,} {label}",
                    " · ".join(f"{a} / {b}" for a, b in passes["library"]),
                    " · ".join(f"{a} / {b}" for a, b in passes["one"]),
                    load,
                ]
            )
    print_table(
        f"numpy floor p50 / p99 ms: library threads ({library}) vs one",
        ["N", "library threads", "one thread", "load 1m"],
        rows,
    )
    payload = {"benchmark": "blas_threads", "library_threads": library, "results": results}
    write_results("bench_blas", payload)
    return payload


if __name__ == "__main__":
    main()

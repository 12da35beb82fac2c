"""Cold start: the first ``retrieve()`` of a process against the hundredth.

Each measure runs in a fresh subprocess (nothing loaded, nothing cached)
that opens a store of ``--rows`` memories (WordLlama, built once by the
parent), then searches: the first search either right after open
(``immediate``: it waits for whatever the background warm-up has not
finished) or after ``--idle`` seconds (an application that opens its memory
at start-up and gets its first question a moment later), then 99 more; the
100th is the baseline of the same process.  Medians over ``--runs``
processes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from actormem.models.embedders import WordLlamaEmbedder
from actormem.store import DuckDBStore, Namespace
from benchmarks._common import print_table, write_results

_CHILD = """
import json, sys, time
t0 = time.perf_counter()
from actormem.store import DuckDBStore, Namespace
store = DuckDBStore(sys.argv[1], touch_flush_interval=None)
opened = time.perf_counter()
time.sleep(float(sys.argv[2]))
ns = Namespace(user_id="cold")
times = []
for i in range(100):
    t = time.perf_counter()
    store.search(f"what does the user drink with topic {i % 13}", ns, limit=10)
    times.append((time.perf_counter() - t) * 1000)
store.close()
out = {"open_ms": (opened - t0) * 1000, "first_ms": times[0], "hundredth_ms": times[99]}
print(json.dumps(out))
"""


def _child(path: Path, idle: float) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path), str(idle)],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--idle", type=float, default=2.0)
    parser.add_argument("--quick", action="store_true", help="200 memories, one process each")
    args = parser.parse_args(argv)
    if args.quick:
        args.rows, args.runs = 200, 1
    res: dict[str, Any] = {"rows": args.rows, "runs": args.runs, "idle_s": args.idle}
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "cold.duckdb"
        with DuckDBStore(path, embedder=WordLlamaEmbedder(), touch_flush_interval=None) as store:
            store.add_many(
                Namespace(user_id="cold"),
                [
                    f"the user said fact {i} about tea, trains and topic {i % 13}"
                    for i in range(args.rows)
                ],
            )
        for mode, idle in (("immediate", 0.0), (f"after {args.idle:g} s idle", args.idle)):
            runs = [_child(path, idle) for _ in range(args.runs)]
            res[mode] = {
                k: statistics.median(r[k] for r in runs)
                for k in ("open_ms", "first_ms", "hundredth_ms")
            }
    rows = [
        [mode, v["open_ms"], v["first_ms"], v["hundredth_ms"], v["first_ms"] / v["hundredth_ms"]]
        for mode, v in res.items()
        if isinstance(v, dict)
    ]
    print_table(
        f"first vs 100th retrieve in a fresh process, {args.rows:,} memories "
        f"(medians of {args.runs})",
        ["first search", "import+open ms", "first ms", "100th ms", "first / 100th"],
        rows,
    )
    print(f"results: {write_results('bench_coldstart', res)}")
    return res


if __name__ == "__main__":
    main()

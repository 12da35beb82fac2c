"""Start-up: a fresh process's ``import actormem`` and its first ``MemoryRuntime()``.

What a command-line call, a worker process and a cluster agent's reload pay
before they do anything.  Each measure is a fresh interpreter (nothing
loaded, the files in the page cache after the first round), timed from its
own start (``time.perf_counter`` at the first line of the child, to the
end of the row's work: "in-process") and, wall time, from the parent's
``subprocess.run`` to the child's exit -- the interpreter's start-up and the
runtime's ``close()`` included.  The baseline of the same run is ``python -c pass`` (the
interpreter alone).  The children run round-robin, so a change of load hits
every row alike.

Rows:

* ``import actormem``: the bare import;
* ``from actormem import Msg``: a client that only builds messages;
* ``import actormem.store``: the store package (its types; the stores, numpy
  and pyarrow are loaded on first use);
* ``from actormem import MemoryRuntime``: the runtime's import alone;
* ``first MemoryRuntime()``: ``from actormem import MemoryRuntime``, a runtime
  started (session folder in a temporary directory, no long-term memory) and
  closed.

``--compare DIR`` times the same rows with ``actormem`` imported from another
checkout (``PYTHONPATH=DIR``: e.g. ``main`` before a change), interleaved with
this one's, so the two trees' figures share the run's load.

Usage: ``python -m benchmarks.bench_startup [--runs 7] [--compare /path/to/tree]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._common import pct, print_table, write_results

# Each row: what is timed, then what runs after the time is taken (in the wall time).
_ROWS: dict[str, tuple[str, str]] = {
    "python -c pass": ("", ""),
    "import actormem": ("import actormem", ""),
    "from actormem import Msg": ("from actormem import Msg", ""),
    "import actormem.store": ("import actormem.store", ""),
    "from actormem import MemoryRuntime": ("from actormem import MemoryRuntime", ""),
    "first MemoryRuntime()": (
        "import sys\n"
        "from actormem import MemoryRuntime\n"
        "rt = MemoryRuntime(session_dir=sys.argv[1])",
        "rt.close()",
    ),
}

# The child prints its own time and where actormem came from, importing nothing more.
_CHILD = """
import time
_t0 = time.perf_counter()
{body}
_ms = (time.perf_counter() - _t0) * 1000
{after}
import sys
print(_ms, getattr(sys.modules.get("actormem"), "__file__", "-"))
"""


def _child(row: str, tree: str | None, folder: str) -> tuple[float, float, str]:
    body, after = _ROWS[row]
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = tree
    t0 = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", _CHILD.format(body=body, after=after), folder],
        cwd=folder,  # not this checkout: `python -c` puts the working folder first on sys.path
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env=env,
    )
    wall = (time.perf_counter() - t0) * 1000
    ms, file = out.stdout.strip().splitlines()[-1].split(" ", 1)
    return wall, float(ms), file


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="processes per row (median)")
    parser.add_argument("--compare", type=Path, help="another checkout, measured alike")
    parser.add_argument("--quick", action="store_true", help="two processes a row")
    args = parser.parse_args(argv)
    runs = 2 if args.quick else args.runs
    trees: dict[str, str | None] = {"this tree": None}
    if args.compare is not None:
        trees["compared"] = str(args.compare.resolve())
    cases = [(t, r) for t in trees for r in _ROWS if t == "this tree" or r != "python -c pass"]
    walls: dict[tuple[str, str], list[float]] = {c: [] for c in cases}
    inner: dict[tuple[str, str], list[float]] = {c: [] for c in cases}
    files: dict[str, str] = {}
    loads = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory() as folder:
        for i in range(runs + 1):  # round 0 warms the page cache and is dropped
            for tree, row in cases:
                wall, ms, file = _child(row, trees[tree], folder)
                if file != "-":
                    files[tree] = file
                if i:
                    walls[(tree, row)].append(wall)
                    inner[(tree, row)].append(ms)
        loads.append(os.getloadavg()[0])
    base = statistics.median(walls[("this tree", "python -c pass")])
    res: dict[str, Any] = {"runs": runs, "load_1m": loads, "actormem_from": files, "rows": {}}
    table = []
    for tree, row in cases:
        w, m = walls[(tree, row)], inner[(tree, row)]
        p50 = statistics.median(w)
        res["rows"][f"{tree}: {row}"] = {
            "wall_p50_ms": p50,
            "wall_p99_ms": pct(w, 99),
            "in_process_p50_ms": statistics.median(m),
            "x_python": p50 / base,
        }
        table.append([tree, row, p50, pct(w, 99), statistics.median(m), p50 / base])
    print_table(
        f"fresh-process start-up, medians of {runs} (load {loads[0]:.2f} -> {loads[1]:.2f})",
        ["tree", "row", "wall p50 ms", "wall p99 ms", "in-process p50 ms", "x python -c pass"],
        table,
    )
    print(f"actormem imported from: {files}")
    print(f"results: {write_results('bench_startup', res)}")
    return res


if __name__ == "__main__":
    main()

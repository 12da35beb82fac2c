"""Import memory: peak RSS while importing an export file, against the store it builds.

An import must stream: its memory may grow with what the store keeps (the
in-RAM index of the imported memories) but not with the file.  Each
measurement runs in a fresh child process:

* ``open``: open the store the import produced (the index rebuilt from the
  file) -- the memory a process needs to hold these memories at all;
* ``import``: import the file into an empty store; its peak RSS
  (``ru_maxrss``) and its RSS at the end.

``overhead = peak(import) - rss(open)`` is what importing costs beyond
holding the result; it must stay flat as the file grows (it grew with the
file when the whole file was read into Python dicts first: 200k rows peaked
at 1.7 GB).  Files are written with the store's own ``export`` (Parquet and
JSONL), 256-d vectors, so an import re-embeds nothing.

Usage: ``python -m benchmarks.bench_import [--rows 25000,100000] [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

from benchmarks._common import print_table, write_results

_CHILD = textwrap.dedent(
    """
    import json, resource, sys, time
    from actormem.models.embedders import HashEmbedder
    from actormem.store import DuckDBStore
    def rss():
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    mode, db, src = sys.argv[1], sys.argv[2], sys.argv[3]
    t0 = time.perf_counter()
    store = DuckDBStore(db, embedder=HashEmbedder(256), touch_flush_interval=None,
                        near_duplicate_threshold=None)
    opened = time.perf_counter() - t0
    out = {"rss_open_mb": rss(), "open_s": opened}
    if mode == "import":
        t0 = time.perf_counter()
        rep = store.import_(src)
        out.update(import_s=time.perf_counter() - t0, added=rep.added, read=rep.read)
    out["rss_end_mb"] = rss()
    out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    store.close()
    print(json.dumps(out))
    """
)


def _child(mode: str, db: Path, src: Path) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, mode, str(db), str(src)],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def _make_file(folder: Path, rows: int, fmt: str) -> Path:
    from actormem.models.embedders import HashEmbedder
    from actormem.store import DuckDBStore, Namespace, NewMemory

    path = folder / f"src-{rows}.{fmt}"
    db = folder / f"src-{rows}-{fmt}.duckdb"
    with DuckDBStore(db, embedder=HashEmbedder(256), touch_flush_interval=None) as store:
        for start in range(0, rows, 10_000):
            items = [
                NewMemory(
                    content=f"memory {i}: the user said something about topic {i % 977} "
                    f"and item {i * 7919 % 100_003} on day {i % 365}",
                    kind="fact" if i % 3 else "episode",
                    tags=(f"t{i % 50}",),
                    metadata={"n": i},
                )
                for i in range(start, min(rows, start + 10_000))
            ]
            store.add_many(Namespace(user_id="u", agent_id=f"a{start % 7}"), items, dedup=False)
        store.export(Namespace(user_id="u"), path)
    return path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", default="25000,100000")
    parser.add_argument("--formats", default="parquet,jsonl")
    parser.add_argument("--quick", action="store_true", help="2k and 8k rows (a smoke run)")
    args, _ = parser.parse_known_args(argv)
    sizes = [2_000, 8_000] if args.quick else [int(x) for x in args.rows.split(",")]
    formats = args.formats.split(",")
    load = os.getloadavg()[0]
    rows_out: list[list[Any]] = []
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-import-") as tmp:
        folder = Path(tmp)
        for fmt in formats:
            for n in sizes:
                src = _make_file(folder, n, fmt)
                db = folder / f"dst-{n}-{fmt}.duckdb"
                t0 = time.perf_counter()
                imp = _child("import", db, src)
                opened = _child("open", db, src)
                overhead = imp["peak_mb"] - opened["rss_end_mb"]
                results.append(
                    {
                        "format": fmt,
                        "rows": n,
                        "file_mb": src.stat().st_size / 2**20,
                        "import": imp,
                        "open": opened,
                        "overhead_mb": overhead,
                        "wall_s": time.perf_counter() - t0,
                    }
                )
                rows_out.append(
                    [
                        fmt,
                        n,
                        src.stat().st_size / 2**20,
                        imp["import_s"],
                        n / imp["import_s"],
                        imp["peak_mb"],
                        opened["rss_end_mb"],
                        overhead,
                        overhead * 1024 / n,
                    ]
                )
                for p in (db, src):
                    p.unlink(missing_ok=True)
    print_table(
        f"import: peak RSS vs holding the result (load average {load:.1f})",
        [
            "format",
            "rows",
            "file MB",
            "import s",
            "rows/s",
            "peak MB",
            "open MB",
            "overhead MB",
            "KB/row",
        ],
        rows_out,
    )
    out = write_results("import", {"load_average": load, "runs": results})
    print(f"results: {out}")


if __name__ == "__main__":
    main()

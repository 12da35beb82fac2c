"""Run the benchmarks (``make bench``); ``--quick`` for a smoke run.

Every benchmark in this folder runs here except the two that need a prepared
corpus of a million memories on disk (several GB): ``bench_ingest`` and
``bench_reopen``, whose commands are in ``docs/performance.md``.
"""

from __future__ import annotations

import importlib
import sys
import traceback

#: A module, or (module, its extra arguments) for a second run of it.
MODULES: list[str | tuple[str, list[str]]] = [
    "bench_runtime",
    "bench_sessions",
    "bench_store",
    ("bench_store", ["--busy", "--sizes", "5000,100000"]),  # idle beside busy
    ("bench_blas", ["--sizes", "5000,100000"]),  # BLAS threads: library vs one
    ("bench_store", ["--backend", "postgres"]),  # DuckDB beside PostgreSQL
    "bench_locomo",
    ("bench_locomo", ["--backend", "postgres"]),
    "bench_locomo_e2e",
    "bench_compress",
    "bench_recorder",
    "bench_ui",
    "bench_writes",
    "bench_import",
    "bench_peers",
    "bench_reply",
    "bench_coldstart",
    "bench_startup",
    "bench_turns",
]


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    failed = []
    for entry in MODULES:
        name, extra = (entry, []) if isinstance(entry, str) else entry
        try:
            mod = importlib.import_module(f"benchmarks.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"benchmarks.{name}":
                continue
            raise
        label = " ".join([name, *extra])
        print(f"\n=== {label} ===", flush=True)
        try:
            mod.main([*args, *extra])
        except Exception:
            traceback.print_exc()
            failed.append(label)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

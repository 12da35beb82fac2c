"""Run every benchmark in this folder (``make bench``); ``--quick`` for a smoke run."""

from __future__ import annotations

import importlib
import sys
import traceback

MODULES = [
    "bench_runtime",
    "bench_sessions",
    "bench_store",
    "bench_locomo",
    "bench_locomo_e2e",
    "bench_compress",
    "bench_recorder",
    "bench_ui",
    "bench_turns",
]


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    failed = []
    for name in MODULES:
        try:
            mod = importlib.import_module(f"benchmarks.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"benchmarks.{name}":
                continue
            raise
        print(f"\n=== {name} ===", flush=True)
        try:
            mod.main(args)
        except Exception:
            traceback.print_exc()
            failed.append(name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

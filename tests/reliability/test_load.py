"""Load, correctness only: many runtimes on one store and several processes lose nothing.

Speed is measured by ``benchmarks/bench_load.py``; this runs it small and checks
that every turn was stored in its own namespace and nothing crossed over.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.bench_load import run_procs, run_shared  # noqa: E402


def test_runtimes_sharing_one_store_lose_nothing_and_never_cross(tmp_path: Path) -> None:
    res = run_shared(tmp_path / "m.duckdb", runtimes=12, turns=80, every=2, embedder="hash")
    assert res["turns"] == 960
    assert res["lost"] == 0
    assert res["crossed"] == 0
    assert res["retrieve_ms"]["n"] == 12 * 40


def test_processes_with_their_own_files_lose_nothing(tmp_path: Path) -> None:
    res = run_procs(tmp_path, procs=2, runtimes=3, turns=40, every=4, embedder="hash")
    assert res["turns"] == 240
    assert res["lost"] == 0 and res["crossed"] == 0

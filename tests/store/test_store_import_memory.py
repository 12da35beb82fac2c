"""An import's working memory does not grow with the file (issue 12, point 7).

Importing 200k rows peaked at 1.7 GB (about 8.5 KB a row): every row was
decoded and held before anything was written.  Imports now stream in
batches; this test would catch a regression without 200k rows: with the
batch made small, a file four times longer must not need more working
memory.  What an import keeps (the new memories in the store's in-memory
index) does grow with the file by design, so the test measures the peak
*above* what is still held when the import returns (tracemalloc sees the
decoded rows, records, numpy vectors and plans; DuckDB's own buffers are
bounded by its memory limit).  JSONL only: a Parquet import differs in its
reader alone, which yields one record batch at a time.  About 10-20 s on a
loaded 2-core machine (the batches are small, so there are many commits).
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from actormem.models.embedders import HashEmbedder
from actormem.store import DuckDBStore, Namespace, NewMemory, _files

BATCH = 100
N = 300  # three batches; the long file is 4N, twelve
NS = Namespace(user_id="u")


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, int], Path]:
    d = tmp_path_factory.mktemp("exports")
    out: dict[tuple[str, int], Path] = {}
    for n in (N, 4 * N):
        with DuckDBStore(
            d / f"src{n}.duckdb",
            embedder=HashEmbedder(16),
            touch_flush_interval=None,
            near_duplicate_threshold=None,
        ) as src:
            for start in range(0, n, N):
                src.add_many(
                    NS,
                    [
                        NewMemory(
                            content=f"memory {i}: the user mentioned item {i} and "
                            f"{i * 7 % 101}" + " with a longer note" * 4,
                            metadata={"i": i, "tags": ["a", "b"]},
                        )
                        for i in range(start, start + N)
                    ],
                )
            out[("jsonl", n)] = d / f"m{n}.jsonl"
            src.export(NS, out[("jsonl", n)])
    return out


def _working_memory(path: Path, target: Path) -> tuple[int, int]:
    """(rows imported, bytes allocated at the peak beyond what the import keeps)."""
    with DuckDBStore(target, embedder=HashEmbedder(16), touch_flush_interval=None) as store:
        tracemalloc.start()
        try:
            report = store.import_(path)
            current, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    return report.added, peak - current


@pytest.mark.slow
def test_import_working_memory_does_not_grow_with_the_file(
    exports: dict[tuple[str, int], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fmt = "jsonl"
    monkeypatch.setattr(_files, "IMPORT_BATCH", BATCH)
    small_rows, small = _working_memory(exports[(fmt, N)], tmp_path / "a.duckdb")
    large_rows, large = _working_memory(exports[(fmt, 4 * N)], tmp_path / "b.duckdb")
    assert (small_rows, large_rows) == (N, 4 * N)
    # Holding every row would make the long file need about 4x; streaming in
    # batches keeps it flat (allowance: a larger index array being copied once
    # as it grows, 4N x 16 floats, and allocator noise).
    assert large < small * 1.5 + 4 * N * 16 * 4 * 2, (small, large)
    print(f"working memory: {small} bytes for {N} rows, {large} for {4 * N}")

"""BLAS threads: small index products run on one thread, the host's setting survives.

See ``actormem/store/_blas.py`` for the measurements behind the decision.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
from threadpoolctl import ThreadpoolController, threadpool_limits

from actormem.models.embedders import HashEmbedder
from actormem.store import DuckDBStore, Namespace, NewMemory
from actormem.store._blas import SINGLE_THREAD_MAX_ROWS, blas_threads_for

NS = Namespace(user_id="u", agent_id="a")


def _blas_threads() -> list[int]:
    return [int(i["num_threads"]) for i in ThreadpoolController().select(user_api="blas").info()]


def test_a_small_search_runs_on_one_blas_thread_and_restores_the_host_setting(
    tmp_path: Path,
) -> None:
    seen: list[list[int]] = []
    with threadpool_limits(limits=2, user_api="blas"):  # the host's own choice
        host = _blas_threads()
        assert host and all(n == 2 for n in host)
        with DuckDBStore(
            tmp_path / "b.duckdb", embedder=HashEmbedder(32), touch_flush_interval=None
        ) as store:
            store.add_many(NS, [NewMemory(content=f"memory number {i} item{i}") for i in range(50)])
            original = store._index.cosine

            def watching(rows: np.ndarray, query: np.ndarray) -> np.ndarray:  # type: ignore[type-arg]
                seen.append(_blas_threads())
                return original(rows, query)

            store._index.cosine = watching  # type: ignore[method-assign]
            assert store.search("memory number 7", NS, 3)[0].memory.content.endswith("item7")
            assert _blas_threads() == host
            store._index.cosine = original  # type: ignore[method-assign]

            errors: list[BaseException] = []

            def search_many() -> None:
                try:
                    for i in range(30):
                        store.search(f"item{i}", NS, 2, mode="vector")
                except BaseException as exc:  # pragma: no cover - reported below
                    errors.append(exc)

            threads = [threading.Thread(target=search_many) for _ in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert not errors
            assert _blas_threads() == host  # overlapping searches give it back once, intact
    assert seen and all(n == 1 for n in seen[0])


def test_large_products_keep_the_library_setting() -> None:
    with threadpool_limits(limits=2, user_api="blas"):
        with blas_threads_for(SINGLE_THREAD_MAX_ROWS + 1):
            assert all(n == 2 for n in _blas_threads())
        with blas_threads_for(SINGLE_THREAD_MAX_ROWS):
            assert all(n == 1 for n in _blas_threads())
        assert all(n == 2 for n in _blas_threads())

"""BLAS threads: small index products run on the calling thread, the host's setting is untouched.

See ``actormem/store/_blas.py`` for the measurements behind the decision.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from threadpoolctl import ThreadpoolController, threadpool_limits

from actormem.models.embedders import HashEmbedder
from actormem.store import DuckDBStore, Namespace, NewMemory
from actormem.store._blas import SPLIT_FREE_WORK, unsplit_matmul

NS = Namespace(user_id="u", agent_id="a")


def _blas_threads() -> list[int]:
    return [int(i["num_threads"]) for i in ThreadpoolController().select(user_api="blas").info()]


class _Watched(np.ndarray):
    """The index's matrix, noting each product of it: the BLAS threads it ran with
    and its multiply-adds."""

    seen: ClassVar[list[list[int]]] = []
    work: ClassVar[list[int]] = []

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        args = [np.asarray(x) for x in inputs]
        if "out" in kwargs:
            kwargs["out"] = tuple(np.asarray(x) for x in kwargs["out"])
        if ufunc is np.matmul:
            a, b = args
            _Watched.seen.append(_blas_threads())
            _Watched.work.append(a.shape[0] * a.shape[-1] * (b.shape[1] if b.ndim == 2 else 1))
        return getattr(ufunc, method)(*args, **kwargs)


def _watch(store: DuckDBStore) -> list[list[int]]:
    _Watched.seen, _Watched.work = [], []
    store._index._vecs = store._index._vecs.view(_Watched)
    return _Watched.seen


def test_a_search_is_never_split_and_leaves_the_host_setting_alone(tmp_path: Path) -> None:
    """1,200 rows of 256 dimensions: one product OpenBLAS splits over its threads.  The
    search computes it in blocks OpenBLAS runs on the calling thread, and the host's
    own setting (2 threads) is what every product, and the host, sees meanwhile."""
    with threadpool_limits(limits=2, user_api="blas"):  # the host's own choice
        host = _blas_threads()
        assert host and all(n == 2 for n in host)
        with DuckDBStore(
            tmp_path / "b.duckdb", embedder=HashEmbedder(256), touch_flush_interval=None
        ) as store:
            store.add_many(
                NS, [NewMemory(content=f"memory number {i} item{i}") for i in range(1200)]
            )
            seen = _watch(store)
            assert store.search("memory number 7", NS, 3)[0].memory.content.endswith("item7")
            assert seen and all(s == host for s in seen)
            assert all(w <= SPLIT_FREE_WORK for w in _Watched.work)
            assert sum(_Watched.work) >= 1200 * 256

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
            assert _blas_threads() == host


def test_a_writes_near_duplicate_check_is_never_split_over_blas_threads(tmp_path: Path) -> None:
    """300 stored rows against 20 new memories was one product OpenBLAS split, on the
    recorder's thread, where a thread limit does not hold once OpenBLAS's threads have
    run; its worker then spun ~60 ms (see actormem/store/_blas.py).  Now blocks of rows
    OpenBLAS runs on the calling thread, from any thread, with the same results."""
    with DuckDBStore(
        tmp_path / "n.duckdb", embedder=HashEmbedder(256), touch_flush_interval=None
    ) as store:
        store.add_many(
            NS, [NewMemory(content=f"stored fact {i} about item{i}") for i in range(300)]
        )
        _watch(store)
        results: list[Any] = []
        writer = threading.Thread(  # the recorder's situation: not the main thread
            target=lambda: results.extend(
                store.add_many(
                    NS, [NewMemory(content=f"new fact {i} about thing{i}") for i in range(20)]
                )
            )
        )
        writer.start()
        writer.join()
        assert [r.op for r in results] == ["ADD"] * 20
        assert _Watched.work and all(w <= SPLIT_FREE_WORK for w in _Watched.work)
        assert sum(_Watched.work) >= 300 * 20 * 256  # the whole product, in blocks
        # a twin is still found through the blocked product
        assert store.add(NS, "stored fact 7 about item7").op != "ADD"


def test_a_search_on_a_worker_thread_is_never_split_over_blas_threads(tmp_path: Path) -> None:
    """2,000 rows of 256 dimensions: one matrix-vector product OpenBLAS splits.  On a
    worker thread (``asyncio.to_thread``, a server's request thread) the thread limit
    does not hold once OpenBLAS's threads have run; the search's products are
    blocks OpenBLAS runs on the calling thread, and it finds the same memory."""
    with DuckDBStore(
        tmp_path / "w.duckdb", embedder=HashEmbedder(256), touch_flush_interval=None
    ) as store:
        store.add_many(NS, [NewMemory(content=f"memory number {i} item{i}") for i in range(2000)])
        expected = store.search("memory number 1234", NS, 3, mode="vector")
        _watch(store)
        found: list[Any] = []
        worker = threading.Thread(
            target=lambda: found.extend(store.search("memory number 1234", NS, 3, mode="vector"))
        )
        worker.start()
        worker.join()
        assert [h.memory.id for h in found] == [h.memory.id for h in expected]
        assert found[0].memory.content.endswith("item1234")
        assert _Watched.work and all(w <= SPLIT_FREE_WORK for w in _Watched.work)
        assert sum(_Watched.work) >= 2000 * 256  # the whole scope, in blocks


def test_unsplit_matmul_gives_the_product() -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3000, 256)).astype(np.float32)
    for b in (rng.standard_normal((256, 20)).astype(np.float32), a[7]):
        got = unsplit_matmul(a, b)
        assert got.shape == (a @ b).shape
        assert np.allclose(got, a @ b, atol=1e-4)
    assert unsplit_matmul(a[:5], a[:3].T).shape == (5, 3)


def test_a_wide_product_is_tiled_below_the_split_free_work() -> None:
    """1,024 or more columns at 256 dimensions put a single row past the split-free work:
    the product went a row at a time, each a product OpenBLAS could still split and that
    read the whole of ``b`` again (an add_many of 5,000 new memories against 5,000 stored:
    15 s instead of 0.4).  It is now tiled (rows x columns), every tile below the work."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal((300, 256)).astype(np.float32)
    b = rng.standard_normal((256, 2_000)).astype(np.float32)
    _Watched.seen, _Watched.work = [], []
    got = unsplit_matmul(a.view(_Watched), b)
    assert np.allclose(np.asarray(got), a @ b, atol=1e-3)
    assert _Watched.work and all(w < SPLIT_FREE_WORK for w in _Watched.work)
    assert sum(_Watched.work) == 300 * 256 * 2_000  # the whole product, once

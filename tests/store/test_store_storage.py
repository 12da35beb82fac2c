"""How DuckDBStore lays its vectors out in the file.

Embedding vectors are floats whose low bits look random: DuckDB's ALP_RD
compression, its pick for them, stored them in more bytes than raw floats
(a 1M-memory file of WordLlama vectors: 1,863 MB against 1,294 MB raw) and
spent CPU on every checkpoint.  The store turns ALP and ALP_RD off for its
own database instance.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np

from actormem.store import DuckDBStore, Namespace, NewMemory


class _Gaussian:
    """Unit vectors with random mantissas, like a real embedder's."""

    name = "gaussian-64"
    dim = 64

    def __init__(self) -> None:
        self._rng = np.random.default_rng(3)

    def embed(self, texts: list[str]) -> np.ndarray:
        v = self._rng.standard_normal((len(texts), self.dim)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_vectors_are_not_stored_with_alp(tmp_path: Path) -> None:
    path = tmp_path / "m.duckdb"
    with DuckDBStore(
        path, embedder=_Gaussian(), touch_flush_interval=None, near_duplicate_threshold=None
    ) as store:
        store.add_many(
            Namespace(user_id="u"),
            [NewMemory(content=f"memory {i} about w{i % 97} and v{i % 31}") for i in range(3000)],
        )
        live = store.count(Namespace(user_id="u"))
    con = duckdb.connect(str(path), read_only=True)
    try:
        kinds = {
            row[0]
            for row in con.execute(
                "SELECT DISTINCT compression FROM pragma_storage_info('memories') "
                "WHERE column_name = 'embedding'"
            ).fetchall()
        }
        assert con.execute("SELECT count(*) FROM memories").fetchall()[0][0] == live == 3000
    finally:
        con.close()
    assert kinds and not kinds & {"ALP", "ALPRD"}, kinds

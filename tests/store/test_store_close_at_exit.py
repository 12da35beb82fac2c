"""A DuckDB store the application never closed is closed when the interpreter exits.

At exit, ``concurrent.futures`` refuses new work ("cannot schedule new futures after
interpreter shutdown"), so a close that hands its checkpoint to a worker thread failed
there and left the index snapshot unwritten (the next open rebuilt it from the table).
Run in a real subprocess: the exit is the point.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from actormem.models.embedders import HashEmbedder
from actormem.store import DuckDBStore, Namespace


def test_a_store_left_open_is_closed_cleanly_at_interpreter_exit(tmp_path: Path) -> None:
    db = tmp_path / "left-open.duckdb"
    script = textwrap.dedent(
        f"""
        from actormem.models.embedders import HashEmbedder
        from actormem.store import DuckDBStore, Namespace
        store = DuckDBStore({str(db)!r}, embedder=HashEmbedder(dim=32))
        store.add(Namespace(user_id="u"), "left open at exit")
        # no close(): the interpreter's exit closes it
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout + done.stderr
    assert "close_at_exit_failed" not in out, out
    assert "cannot schedule new futures" not in out, out
    store = DuckDBStore(db, embedder=HashEmbedder(dim=32))
    try:
        hits = store.search("left open at exit", Namespace(user_id="u"), 3)
        assert [h.memory.content for h in hits] == ["left open at exit"]
    finally:
        store.close()

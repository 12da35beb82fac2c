"""What a store imports after it opened: nothing that stalls an application's threads.

Importing holds the GIL for the whole import (``pyarrow.compute`` and
``pyarrow.dataset`` took 30-300 ms here, ``numpy.ma`` 8 ms); the store's applier imported them
at its first batched insert, in the middle of the application's work.  The
store imports them while it opens instead.  Checked in a fresh interpreter.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path


def test_a_batched_apply_imports_no_module_after_the_open(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import sys
        from actormem.models.embedders import HashEmbedder
        from actormem.store import DuckDBStore, Namespace
        from actormem.store._duckdb_rows import LITERAL_INSERTS
        store = DuckDBStore({str(tmp_path / "s.duckdb")!r}, embedder=HashEmbedder(64),
                            touch_flush_interval=None)
        ns = Namespace(user_id="ada")
        before = set(sys.modules)
        with store._apply_lock:  # pending until the read below: one batched (Arrow) insert
            for i in range(LITERAL_INSERTS + 20):
                store.add(ns, f"memory number {{i}} about trains and tea")
        assert len(store._logged) == LITERAL_INSERTS + 20
        assert store.count(ns) == LITERAL_INSERTS + 20  # a read applies them
        store.close()
        new = set(sys.modules) - before
        print(sorted(m for m in new if m.startswith(("pyarrow", "pandas", "numpy"))))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"

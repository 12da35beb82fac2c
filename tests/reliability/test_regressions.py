"""Regression tests for bugs the hardening suite found (one test per bug)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import duckdb


def test_a_program_that_never_closes_its_runtime_exits_and_flushes(tmp_path: Path) -> None:
    # Bug: the actors ran on non-daemon threads, so a script that raised (or just
    # ended) before close() hung forever at exit.  Now it exits, and the runtime
    # closes itself at exit: the submitted turn is committed.
    script = tmp_path / "forgets_close.py"
    script.write_text(
        textwrap.dedent(
            f"""
            from actormem import MemoryRuntime, Msg
            from actormem.models.embedders import HashEmbedder
            rt = MemoryRuntime(session_dir={str(tmp_path)!r},
                               store={str(tmp_path / "m.duckdb")!r}, embedder=HashEmbedder(64))
            rt.add(Msg.user("hi"))
            rt.record([Msg.user("I live in Quito")])
            raise RuntimeError("a bug before close()")
            """
        )
    )
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "a bug before close()" in proc.stderr
    con = duckdb.connect(str(tmp_path / "m.duckdb"))
    try:
        rows = con.execute("SELECT content FROM memories WHERE kind = 'episode'").fetchall()
    finally:
        con.close()
    assert rows == [("user: I live in Quito",)]

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


def test_lone_surrogates_in_facts_and_memory_tools_are_a_clear_value_error(
    tmp_path: Path,
) -> None:
    # Bug: save_fact and record_to_memory let lone surrogates through to the store,
    # which failed with a raw UnicodeEncodeError from deep inside.
    import pytest

    from actormem import MemoryRuntime
    from actormem.models.embedders import HashEmbedder
    from actormem.recorder import LongTermMemoryMode

    with MemoryRuntime(
        session_dir=tmp_path,
        store=tmp_path / "m.duckdb",
        embedder=HashEmbedder(64),
        long_term=LongTermMemoryMode.BOTH,
    ) as rt:
        with pytest.raises(ValueError, match="key is not valid Unicode"):
            rt.save_fact("\ud800", "v")
        with pytest.raises(ValueError, match="value is not valid Unicode"):
            rt.save_fact("k", "bad \udfff")
        with pytest.raises(ValueError, match=r"content\[0\] is not valid Unicode"):
            rt.call_tool("record_to_memory", {"content": ["x \ud800"]})
        with pytest.raises(ValueError, match="'thinking' is not valid Unicode"):
            rt.call_tool("record_to_memory", {"thinking": "\ud800", "content": ["ok"]})
        assert rt.store is not None and rt.store.count(rt.namespace) == 0
        rt.save_fact("k", "fine")
        assert rt.get_fact("k") == "fine"

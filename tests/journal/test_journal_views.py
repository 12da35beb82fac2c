"""NOW.md and LOG.md written by the view writer: late, never wrong, never lost.

The files are views of what the store acknowledged.  A process killed after
an update was acknowledged but before its file was written leaves an older
NOW.md: the next start must recognise it as one of the journal's own
versions (not a person's edit), catch the files up, and lose nothing.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

from actormem.journal import parse_now

from .conftest import MakeRuntime

CHILD = textwrap.dedent(
    """
    import sys, threading
    import actormem.journal._journal as J
    from actormem import MemoryRuntime
    from actormem.journal import JournalConfig
    from actormem.models.embedders import HashEmbedder
    from actormem.recorder import RecorderConfig
    from actormem.store import DuckDBStore, Namespace

    root = sys.argv[1]
    store = DuckDBStore(root + "/mem.duckdb", embedder=HashEmbedder())
    rt = MemoryRuntime(
        session_dir=root + "/sessions",
        store=store,
        namespace=Namespace(user_id="ada", agent_id="helper"),
        recorder=RecorderConfig(idle_seconds=None),
        journal=JournalConfig(memory_dir=root + "/agents"),
    )
    rt.update_now("old objective", ["old step"])
    rt.log("THOUGHT", "before the kill")
    assert rt.journal.flush(60)
    # From here the view writer never gets a file written: every update below
    # is acknowledged in the store, none reaches NOW.md or LOG.md.
    never = threading.Event()
    J.replace_view = lambda path, text: never.wait()
    for i in range(3):
        rt.update_now(f"new objective {i}", [f"step {i}"])
    rt.log("TOOL_USE", "acknowledged, not in LOG.md yet")
    print("acked", flush=True)
    never.wait()
    """
)


def test_killed_before_the_files_were_written_restart_catches_up(
    tmp_path: Path, make_runtime: MakeRuntime
) -> None:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    proc = subprocess.Popen(
        [sys.executable, str(script), str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "acked"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    folder = tmp_path / "agents" / "ada" / "helper"
    stale = (folder / "NOW.md").read_text()
    assert "old objective" in stale  # the kill came between the acknowledgement and the file
    assert "acknowledged, not in LOG.md yet" not in (folder / "LOG.md").read_text()

    rt = make_runtime()
    assert rt.journal is not None
    now = rt.now()
    assert now.objective == "new objective 2" and now.next_steps == ("step 2",)
    entries = [e.content for e in rt.journal.entries()]
    assert not any("edited by hand" in c for c in entries)  # the old file is ours, not an edit
    assert "acknowledged, not in LOG.md yet" in entries
    # The files caught up at the start, before any flush.
    assert parse_now((folder / "NOW.md").read_text(), updated_at=0).objective == ("new objective 2")
    assert "acknowledged, not in LOG.md yet" in (folder / "LOG.md").read_text()


def test_an_edit_made_while_a_write_is_queued_is_imported_not_overwritten(
    make_runtime: MakeRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = make_runtime()
    journal = rt.journal
    assert journal is not None
    rt.update_now("first", ["a"])
    assert journal.flush()
    path = journal.folder / "NOW.md"
    gate = threading.Event()
    started = threading.Event()
    real = journal._write_now

    def held(text: str, digest: str) -> None:
        started.set()
        gate.wait(60)
        real(text, digest)

    monkeypatch.setattr(journal, "_write_now", held)
    rt.update_now("second", ["b"])  # acknowledged; its file write waits at the gate
    assert started.wait(60)
    # A person edits the file the writer is about to replace (it still shows "first").
    path.write_text("# NOW\n\n## Objective\nShip release 2.1\n\n## Next steps\n- tag\n")
    gate.set()
    assert journal.flush()
    assert "Ship release 2.1" in path.read_text()  # the queued write did not overwrite it
    now = rt.now()  # imported on use
    assert now.objective == "Ship release 2.1"
    assert journal.flush()
    assert "Ship release 2.1" in path.read_text() and "1. tag" in path.read_text()
    assert any("edited by hand" in e.content for e in journal.entries())


def test_close_writes_every_queued_update(
    make_runtime: MakeRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    import actormem.journal._journal as J

    rt = make_runtime()
    journal = rt.journal
    assert journal is not None
    closing = threading.Event()
    real_replace, real_close = J.replace_view, journal._views.close

    def held(p: Path, text: str) -> Any:
        closing.wait(60)  # nothing is written before close() is called
        return real_replace(p, text)

    def close(*args: Any) -> bool:
        closing.set()
        return real_close(*args)

    monkeypatch.setattr(J, "replace_view", held)
    monkeypatch.setattr(journal._views, "close", close)
    for i in range(5):
        rt.update_now(f"objective {i}", [f"step {i}"])
        rt.log("THOUGHT", f"thought {i}")
    journal.close()  # what the runtime's close() calls before the store closes
    assert closing.is_set()
    assert "objective 4" in (journal.folder / "NOW.md").read_text()
    assert "thought 4" in (journal.folder / "LOG.md").read_text()
    rt.update_now("after close", [])  # written on the caller's thread
    assert "after close" in (journal.folder / "NOW.md").read_text()


def test_after_close_files_and_compactions_run_on_the_callers_thread(
    make_runtime: MakeRuntime,
) -> None:
    rt = make_runtime(log_max_bytes=1_000, log_keep_entries=2)
    journal = rt.journal
    assert journal is not None
    journal.close()
    done = threading.Event()

    def work() -> None:
        for i in range(6):  # each entry alone is near the size threshold
            rt.log("TOOL_USE", f"fetch(page={i}) -> " + "x" * 400)
        done.set()

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    worker.join(60)
    assert done.is_set(), "logging after close hung"
    assert journal.last_compaction is not None  # compacted inline, nothing queued
    text = (journal.folder / "LOG.md").read_text()
    assert "fetch(page=5)" in text and "## Summary of entries" in text

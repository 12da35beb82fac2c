"""NOW.md when its writes fail for a while, and the journal's locks after close.

A full disk or a folder made read-only makes every NOW.md write fail while
the store still acknowledges the updates.  The journal must keep knowing the
version on disk as its own: when the writes work again NOW.md catches up,
and the next start does not take the journal's old file for a person's edit.
A person's edit is still imported, never overwritten.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import actormem.journal._journal as J
from actormem.journal import parse_now
from actormem.journal._files import replace_view

from .conftest import MakeRuntime


def _objective(path: Path) -> str:
    return parse_now(path.read_text(), updated_at=0).objective


def _fail_now_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(path: Path, text: str) -> Any:
        if path.name == "NOW.md":
            raise OSError(28, "No space left on device")
        return replace_view(path, text)

    monkeypatch.setattr(J, "replace_view", failing)


def test_now_md_catches_up_after_many_failed_writes_and_restart_imports_nothing(
    make_runtime: MakeRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = make_runtime()
    journal = rt.journal
    assert journal is not None
    rt.update_now("objective 0", ["s"])
    assert journal.flush()
    path = journal.folder / "NOW.md"
    _fail_now_writes(monkeypatch)
    for i in range(1, 2 * J._MAX_NOW_VERSIONS + 5):  # well past the versions kept
        rt.update_now(f"objective {i}", ["s"])
    assert journal.flush()
    assert _objective(path) == "objective 0"  # nothing could be written
    assert rt.now().objective == f"objective {2 * J._MAX_NOW_VERSIONS + 4}"  # not imported
    monkeypatch.undo()  # the disk has room again
    rt.update_now("objective final", ["s"])
    assert journal.flush()
    assert _objective(path) == "objective final"
    every = journal._store.log_entries(journal.namespace, compacted=None)  # compacted too
    assert not any("edited by hand" in e.content for e in every)

    # Fail again and restart with the old file on disk: it is the journal's own.
    _fail_now_writes(monkeypatch)
    for i in range(2 * J._MAX_NOW_VERSIONS):
        rt.update_now(f"later {i}", ["s"])
    assert journal.flush()
    monkeypatch.undo()
    rt = make_runtime()
    assert rt.journal is not None
    assert rt.now().objective == f"later {2 * J._MAX_NOW_VERSIONS - 1}"
    assert _objective(path) == f"later {2 * J._MAX_NOW_VERSIONS - 1}"  # rewritten at start
    every = rt.journal._store.log_entries(rt.journal.namespace, compacted=None)
    assert not any("edited by hand" in e.content for e in every)


def test_an_edit_made_while_writes_fail_is_imported_not_overwritten(
    make_runtime: MakeRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = make_runtime()
    journal = rt.journal
    assert journal is not None
    rt.update_now("objective 0", ["s"])
    assert journal.flush()
    path = journal.folder / "NOW.md"
    _fail_now_writes(monkeypatch)
    path.write_text("# NOW\n\n## Objective\nShip release 2.1\n\n## Next steps\n- tag\n")
    assert rt.now().objective == "Ship release 2.1"  # imported on use
    for i in range(2 * J._MAX_NOW_VERSIONS):  # its canonical form is never written
        rt.update_now(f"objective {i}", ["s"])
    assert journal.flush()
    assert "Ship release 2.1" in path.read_text()
    monkeypatch.undo()
    rt.update_now("objective final", ["s"])
    assert journal.flush()
    assert _objective(path) == "objective final"  # the imported edit is the journal's now
    every = journal._store.log_entries(journal.namespace, compacted=None)  # compacted too
    edits = [e.content for e in every if "edited by hand" in e.content]
    assert edits == ["NOW.md was edited by hand; imported: Ship release 2.1"]  # once
    rt = make_runtime()
    assert rt.now().objective == "objective final"


def test_an_edit_in_place_that_keeps_the_signature_is_imported_after_the_next_write(
    make_runtime: MakeRuntime,
) -> None:
    rt = make_runtime()
    journal = rt.journal
    assert journal is not None
    rt.update_now("alpha release", ["tag"])
    assert journal.flush()
    path = journal.folder / "NOW.md"
    assert rt.now().objective == "alpha release"  # its signature is known
    st = os.stat(path)
    data = path.read_bytes().replace(b"alpha release", b"omega release")
    with open(path, "r+b") as f:  # same inode, same size, same modification time
        f.write(data)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = os.stat(path)
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (
        st.st_ino,
        st.st_size,
        st.st_mtime_ns,
    )
    # Not noticed by its signature (the documented miss); the write reads the file.
    rt.update_now("beta release", ["ship"])
    assert journal.flush()
    assert "omega release" in path.read_text()  # never overwritten
    assert rt.now().objective == "omega release"  # imported, not a dead end
    assert journal.flush()
    assert _objective(path) == "omega release"
    assert any("imported: omega release" in e.content for e in journal.entries())
    rt.update_now("gamma release", [])
    assert journal.flush()
    assert _objective(path) == "gamma release"  # written again


CHILD = textwrap.dedent(
    """
    import os, sys, threading
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
        journal=JournalConfig(
            memory_dir=root + "/agents", log_max_bytes=1_000, log_keep_entries=2
        ),
    )
    journal = rt.journal
    for i in range(3):
        rt.log("THOUGHT", f"small {i}")
    journal.close()  # from here files and compactions run on the callers' threads
    entered, go = threading.Event(), threading.Event()
    real = journal._summarizer

    class Held:
        def summarize(self, *args, **kwargs):
            if not entered.is_set():
                entered.set()
                go.wait()
            return real.summarize(*args, **kwargs)

    object.__setattr__(journal, "_summarizer", Held())
    compacting = threading.Thread(target=journal.compact, daemon=True)
    compacting.start()  # holds the compaction lock, will want the journal lock
    assert entered.wait(60)

    def work():  # holds the journal lock; past the threshold a compaction is due
        for i in range(4):
            rt.log("TOOL_USE", f"fetch(page={i}) -> " + "x" * 400)

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    worker.join(60)
    if worker.is_alive():
        print("logging deadlocked", flush=True)
        os._exit(3)
    go.set()
    compacting.join(60)
    if compacting.is_alive():
        print("compaction deadlocked", flush=True)
        os._exit(4)
    text = open(journal.folder / "LOG.md").read()
    assert "fetch(page=3)" in text and "## Summary of entries" in text
    assert all("fetch(page=0)" not in e.content for e in journal.entries())
    rt.close()
    store.close()
    print("ok", flush=True)
    """
)


def test_after_close_a_compaction_and_a_logging_caller_do_not_deadlock(tmp_path: Path) -> None:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    # A deadlock would hang the child, never this suite: it exits after a minute.
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), (
        done.stdout + done.stderr[-2000:]
    )

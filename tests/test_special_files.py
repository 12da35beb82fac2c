"""Special files are refused with a clear error, never opened blocking (issue 12, point 6).

Every path here is a real FIFO or symbolic link.  Each call runs under
:func:`unblocked`: should it open a FIFO for reading (the bug), the guard
writes to the FIFO so the test fails instead of hanging.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from actormem import MemoryRuntime, Msg
from actormem.journal._paths import JournalPathError
from actormem.models.embedders import HashEmbedder
from actormem.session import JsonSession, SessionError
from actormem.store import DuckDBStore, InvalidMemoryError, Namespace, StoreError

_GUARD_SECONDS = 60.0


def unblocked(fifos: list[Path], fn: Callable[[], Any]) -> BaseException | None:
    """Run ``fn`` and return what it raised; fail if it blocks on one of ``fifos``."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            fn()
        except BaseException as exc:  # handed to the test
            outcome.append(exc)
        else:
            outcome.append(None)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(_GUARD_SECONDS)
    if worker.is_alive():  # blocked: release it by opening the writing end
        for fifo in fifos:
            try:
                fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
                os.close(fd)
            except OSError:
                pass
        worker.join(_GUARD_SECONDS)
        pytest.fail(f"{fn} blocked on a FIFO")
    return outcome[0]


def fifo(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    return path


def test_a_session_file_that_is_a_fifo_is_refused(tmp_path: Path) -> None:
    pipe = fifo(tmp_path / "s.json")
    with MemoryRuntime(session_dir=tmp_path) as rt:
        err = unblocked([pipe], lambda: rt.load_session("s"))
        assert isinstance(err, SessionError)
        assert "s.json is a FIFO (named pipe), not a regular file" in str(err)
        err = unblocked([pipe], lambda: JsonSession(tmp_path).read("s"))
        assert isinstance(err, SessionError) and "FIFO" in str(err)


def test_cli_sessions_show_refuses_a_fifo(tmp_path: Path) -> None:
    fifo(tmp_path / "s.json")
    r = subprocess.run(
        [sys.executable, "-m", "actormem.cli", "sessions", "show", "s", "--dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("actormem: error: session file ")
    assert "is a FIFO (named pipe), not a regular file" in r.stderr


def test_a_session_link_leaving_the_folder_is_refused(tmp_path: Path) -> None:
    outside, folder = tmp_path / "outside", tmp_path / "sessions"
    with MemoryRuntime(session_dir=outside) as rt:
        rt.add(Msg.user("someone else's secret"))
        rt.save_session("theirs")
        rt.add(Msg.user("mine"))
    folder.mkdir()
    (folder / "s.json").symlink_to(outside / "theirs.json")
    (folder / "rel.json").symlink_to(Path("..") / "outside" / "theirs.json")
    with MemoryRuntime(session_dir=folder) as rt2:
        rt2.add(Msg.user("kept"))
        for sid in ("s", "rel"):
            with pytest.raises(SessionError, match="leads outside its folder"):
                rt2.load_session(sid)
        assert [m.text for m in rt2.messages()] == ["kept"]  # unchanged
        # A link inside the folder is fine.
        rt2.save_session("real")
        (folder / "alias.json").symlink_to(folder / "real.json")
        assert rt2.load_session("alias")
    r = subprocess.run(
        [sys.executable, "-m", "actormem.cli", "sessions", "show", "s", "--dir", str(folder)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2 and "leads outside its folder" in r.stderr
    assert "secret" not in r.stdout


@pytest.mark.parametrize("part", ["", ".wal"])
def test_a_store_path_that_is_a_fifo_is_refused(tmp_path: Path, part: str) -> None:
    db = tmp_path / "m.duckdb"
    pipe = fifo(Path(str(db) + part))
    what = "store WAL" if part else "store file"
    err = unblocked([pipe], lambda: DuckDBStore(db, embedder=HashEmbedder(16)))
    assert isinstance(err, StoreError)
    assert f"{what} {pipe} is a FIFO (named pipe), not a regular file" in str(err)
    err = unblocked([pipe], lambda: MemoryRuntime(session_dir=tmp_path, store=db))
    assert isinstance(err, StoreError) and "FIFO" in str(err)


def test_a_commit_record_that_is_a_fifo_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "m.duckdb"
    with DuckDBStore(db, embedder=HashEmbedder(16)) as store:
        store.add(Namespace(user_id="u"), "a memory")
    commits = Path(str(db) + ".commits")
    commits.unlink()
    pipe = fifo(commits)
    err = unblocked([pipe], lambda: DuckDBStore(db, embedder=HashEmbedder(16)))
    assert isinstance(err, StoreError) and "commit record" in str(err) and "FIFO" in str(err)


def test_a_journal_now_md_that_is_a_fifo_is_refused(tmp_path: Path) -> None:
    pipe = fifo(tmp_path / "memory" / "default" / "agent" / "NOW.md")
    err = unblocked(
        [pipe],
        lambda: MemoryRuntime(session_dir=tmp_path, store=tmp_path / "m.duckdb", journal=True),
    )
    assert isinstance(err, JournalPathError)
    assert "NOW.md is a FIFO (named pipe), not a regular file" in str(err)


def test_a_journal_day_file_that_is_a_fifo_is_refused_on_append(tmp_path: Path) -> None:
    from actormem.journal._files import append_text

    pipe = fifo(tmp_path / "day.md")
    err = unblocked([pipe], lambda: append_text(pipe, "a line\n"))
    assert isinstance(err, JournalPathError) and str(pipe) in str(err)


def test_an_import_file_that_is_a_fifo_is_refused(tmp_path: Path) -> None:
    pipe = fifo(tmp_path / "rows.jsonl")
    with DuckDBStore(tmp_path / "m.duckdb", embedder=HashEmbedder(16)) as store:
        err = unblocked([pipe], lambda: store.import_(pipe))
    assert isinstance(err, InvalidMemoryError)
    assert "import file" in str(err) and "FIFO" in str(err)

"""``actormem ui``: serves a store, refuses a locked file with directions."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import httpx
import pytest

from actormem.store import DuckDBStore
from tests.ui._seed import seed_store


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "actormem.cli", *args], capture_output=True, text=True, timeout=120
    )


def test_a_missing_store_is_one_clear_line(tmp_path: Path) -> None:
    r = _cli("ui", "--db", str(tmp_path / "nope.duckdb"))
    assert r.returncode == 2
    assert (
        r.stderr.strip() == f"actormem: error: no memory store at {tmp_path / 'nope.duckdb'} "
        "(pass --db PATH or --db postgresql://...)"
    )


def test_a_file_held_by_a_running_agent_points_to_ui_true(tmp_path: Path) -> None:
    db = tmp_path / "m.duckdb"
    DuckDBStore(db).close()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                import sys
                from actormem.store import DuckDBStore
                s = DuckDBStore({str(db)!r})
                print("open", flush=True)
                sys.stdin.readline()
                s.close()
                """
            ),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
        r = _cli("ui", "--db", str(db), "--port", "0")
        assert r.returncode == 2
        assert "held by a running agent" in r.stderr and "ui=True" in r.stderr
        assert "rt.serve_ui()" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    finally:
        assert holder.stdin is not None
        holder.stdin.write("\n")
        holder.stdin.flush()
        holder.wait(60)


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "term"])
def test_serves_a_store_until_interrupted(tmp_path: Path, stop_signal: signal.Signals) -> None:
    db = tmp_path / "m.duckdb"
    with DuckDBStore(db) as s:
        seed_store(s)
    proc = subprocess.Popen(
        [sys.executable, "-m", "actormem.cli", "--debug", "ui", "--db", str(db), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONFAULTHANDLER": "1"},
        # A child of a background job inherits SIGINT ignored, and Python then
        # never turns Ctrl-C into KeyboardInterrupt: give it a terminal's default.
        preexec_fn=_default_sigint,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "(read-only)" in line
        url = line.strip().rsplit(" ", 1)[1]
        assert url.startswith("http://127.0.0.1:") and "token" not in url
        page = httpx.get(url, timeout=60)
        assert page.status_code == 200 and "ada" in page.text and "bob" in page.text
        timeline = httpx.get(url + "timeline?user=ada&agent=travel", timeout=60)
        assert timeline.status_code == 200 and "timeline-chart" in timeline.text
    finally:
        proc.send_signal(stop_signal)
        try:
            code = proc.wait(120)
        except subprocess.TimeoutExpired:
            # Hung on the way out: faulthandler (PYTHONFAULTHANDLER) prints
            # every thread's stack on SIGABRT, so the failure says where.
            proc.send_signal(signal.SIGABRT)
            _, err = proc.communicate(timeout=60)
            pytest.fail(
                f"actormem ui did not stop within 120 s of {stop_signal.name}:\n{err[-6000:]}"
            )
        assert code == 0, proc.stderr.read() if proc.stderr else ""
    with DuckDBStore(db) as s:  # the lock was released
        assert s.count(seed_namespace()) > 0


def seed_namespace():  # type: ignore[no-untyped-def]
    from tests.ui._seed import ADA

    return ADA

"""The demo shows NOW and the journal; `actormem journal show|today` and `actormem dream`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "actormem.cli", *args], capture_output=True, text=True, timeout=120
    )


def test_demo_journal_and_dream_commands(tmp_path: Path) -> None:
    demo = run("demo", "--dir", str(tmp_path))
    assert demo.returncode == 0, demo.stderr
    assert "NOW.md after the turn" in demo.stdout and "## Objective" in demo.stdout
    assert "memory/" in demo.stdout and "id:" in demo.stdout  # the daily journal, with ids
    assert "a second dream on the same input is skipped: True" in demo.stdout
    where = ["--memory-dir", str(tmp_path / "agents"), "--user", "ada", "--agent", "demo"]

    overview = run("journal", "show", *where, "--json")
    assert overview.returncode == 0, overview.stderr
    info = json.loads(overview.stdout)
    assert info["now"]["state"] == "done" and info["days"] and info["memory_items"] >= 1

    now = run("journal", "show", "now", *where)
    assert now.returncode == 0 and "## Objective" in now.stdout and "Porto" in now.stdout
    today = run("journal", "today", *where)
    assert today.returncode == 0 and "# Journal" in today.stdout and "id:" in today.stdout
    log = run("journal", "show", "log", *where)
    assert log.returncode == 0 and "TOOL_USE" in log.stdout

    dream = run("dream", "--db", str(tmp_path / "long_term.duckdb"), *where)
    assert dream.returncode == 0, dream.stderr
    assert "nothing new since the last dream" in dream.stdout  # the demo already dreamt
    forced = run("dream", "--db", str(tmp_path / "long_term.duckdb"), *where, "--force", "--json")
    assert forced.returncode == 0 and json.loads(forced.stdout)["items"] >= 1

    bad = run("journal", "show", "../../etc", *where)
    assert bad.returncode == 2 and "YYYY-MM-DD" in bad.stderr
    missing = run("journal", "show", "--memory-dir", str(tmp_path / "nope"))
    assert missing.returncode == 2 and "no journal folder" in missing.stderr


def test_journal_show_refuses_a_symlink_out_of_the_agents_folder(tmp_path: Path) -> None:
    """The journal and the UI refuse a file that resolves outside the agent's
    folder; `journal show` printed it (a LOG.md linked to /etc/passwd)."""
    secret = tmp_path / "secret.txt"
    secret.write_text("root:x:0:0 do not print me\n")
    folder = tmp_path / "jroot" / "ada" / "x"
    (folder / "memory").mkdir(parents=True)
    for name in ("LOG.md", "NOW.md", "MEMORY.md"):
        (folder / name).symlink_to(secret)
    (folder / "memory" / "2026-01-02.md").symlink_to(secret)
    common = ["--memory-dir", str(tmp_path / "jroot"), "--user", "ada", "--agent", "x"]
    for what in ("log", "now", "memory", "2026-01-02", None):
        r = run("journal", "show", *([what] if what else []), *common)
        assert r.returncode == 2, (what, r.stdout)
        assert "do not print me" not in r.stdout + r.stderr
        assert "outside" in r.stderr, r.stderr

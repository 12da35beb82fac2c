"""``--db postgresql://...``: the CLI's store commands and the memory explorer on PostgreSQL."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx

from actormem.store import Namespace, open_store
from tests._postgres import pg_url


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "actormem.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
    )


def test_memories_and_dream_commands_over_a_postgres_url(pg_dsn: str, tmp_path: Path) -> None:
    url = pg_url(pg_dsn)
    ada, bob = Namespace(user_id="ada", agent_id="agent"), Namespace(user_id="bob")
    with open_store(url) as store:
        store.add(ada, "Ada prefers window seats on long flights", tags=("preference",))
        store.add(ada, "Ada's locker code is 4242", kind="fact")
        store.add(bob, "Bob is allergic to peanuts")
    common = ["--db", url, "--user", "ada"]
    r = run("memories", "search", "window seat", *common, "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    hits = json.loads(r.stdout)
    assert hits[0]["memory"]["content"].startswith("Ada prefers window seats")
    assert all("Bob" not in h["memory"]["content"] for h in hits)
    r = run("memories", "stats", *common, "--json", cwd=tmp_path)
    assert r.returncode == 0 and json.loads(r.stdout)[0]["live"] == 2, r.stderr
    r = run("memories", "timeline", *common, "--json", cwd=tmp_path)
    assert r.returncode == 0 and sum(c for _, c in json.loads(r.stdout)) == 2
    out = tmp_path / "ada.jsonl"
    r = run("memories", "export", *common, "--path", str(out), cwd=tmp_path)
    assert r.returncode == 0 and len(out.read_text().splitlines()) == 2, r.stderr
    r = run("memories", "forget", *common, "--yes", "--json", cwd=tmp_path)
    assert r.returncode == 0 and json.loads(r.stdout)["memories"] == 2
    r = run("memories", "import", "--db", url, "--user", "cy", "--path", str(out), cwd=tmp_path)
    assert r.returncode == 0 and "imported 2 memories" in r.stdout, r.stderr
    r = run("memories", "stats", "--db", url, "--user", "bob", "--json", cwd=tmp_path)
    assert json.loads(r.stdout)[0]["live"] == 1
    # nothing was created in the working folder: the URL is not taken for a file name
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ada.jsonl"]
    r = run(
        "dream",
        "--db",
        url,
        "--user",
        "ada",
        "--memory-dir",
        str(tmp_path / "memory"),
        "--json",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert "skipped" in json.loads(r.stdout)


def test_a_wrong_postgres_url_is_one_clear_line(pg_dsn: str, tmp_path: Path) -> None:
    bad = pg_url(pg_dsn).replace("/t_", "/nosuchdb_", 1)
    r = run("memories", "stats", "--db", bad, "--user", "ada", cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.startswith("actormem: error:") and "nosuchdb_" in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_the_explorer_serves_a_postgres_store_while_a_worker_writes(
    pg_dsn: str, tmp_path: Path
) -> None:
    url = pg_url(pg_dsn)
    ada = Namespace(user_id="ada", agent_id="travel")
    with open_store(url) as worker:  # a worker keeps the store open: no lock to wait for
        worker.add(ada, "Ada books the night train to Vienna")
        proc = subprocess.Popen(
            [sys.executable, "-m", "actormem.cli", "ui", "--db", url, "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
        )
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert "(read-only)" in line, proc.stderr.read() if proc.stderr else ""
            assert line.startswith("memory explorer for postgresql://")
            page_url = line.strip().rsplit(" ", 1)[1]
            page = httpx.get(page_url, timeout=30)
            assert page.status_code == 200 and "ada" in page.text
            worker.add(ada, "Ada packs a green scarf for the trip")
            recent = httpx.get(page_url + "timeline?user=ada&agent=travel", timeout=30)
            assert recent.status_code == 200, recent.text[:500]
            assert "green scarf" in recent.text and "night train" in recent.text
        finally:
            # Stopping on Ctrl-C is test_cli_ui.py's business (DuckDB, where a lock is at
            # stake); here the process is ended outright, a PostgreSQL store holds no lock.
            proc.terminate()
            proc.wait(60)
            assert proc.stdout is not None and proc.stderr is not None
            proc.stdout.close()
            proc.stderr.close()


def test_memories_reembed_over_a_postgres_url(pg_dsn: str, tmp_path: Path) -> None:
    from actormem.models.embedders import HashEmbedder

    url = pg_url(pg_dsn)
    with open_store(url, embedder=HashEmbedder(32)) as store:
        store.add(Namespace(user_id="ada"), "Ada keeps her bicycle in the garden shed")
    # the store commands open it with the embedder it recorded ...
    r = run("memories", "search", "bicycle", "--db", url, "--user", "ada", "--json", cwd=tmp_path)
    assert r.returncode == 0 and "bicycle" in json.loads(r.stdout)[0]["memory"]["content"]
    # ... and another one named is a mismatch, reported clearly
    r = run(
        "memories",
        "search",
        "bicycle",
        "--db",
        url,
        "--user",
        "ada",
        "--embedder",
        "hash-64",
        cwd=tmp_path,
    )
    assert r.returncode == 2 and "embedder 'hash-32'" in r.stderr, r.stderr
    r = run("memories", "reembed", "--db", url, "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["memories"] == 1 and rep["dim"] == 256 and rep["previous_dim"] == 32
    with open_store(url) as store:  # now searchable with the bundled embedder
        hits = store.search("where is the bike", Namespace(user_id="ada"), 3)
        assert hits and "bicycle" in hits[0].memory.content

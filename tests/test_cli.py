from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from actormem import MemoryRuntime, Msg


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "actormem.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
    )


def test_demo_saves_and_restores_a_session_offline(tmp_path: Path) -> None:
    r = run("demo", "--dir", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "MessageAdded" in r.stdout and "SessionSaved" in r.stdout and "SessionLoaded" in r.stdout
    assert "every message restored with its id: True" in r.stdout
    assert (
        "ContextCompressed" in r.stdout
        and "full original history still available: True" in r.stdout
    )
    assert "recalled across restarts and corrected: True" in r.stdout
    assert (tmp_path / "demo.json").is_file()
    assert r.stderr == ""


def test_sessions_list_show_delete(tmp_path: Path) -> None:
    with MemoryRuntime(session_dir=tmp_path) as rt:
        rt.add([Msg.user("remember the milk"), Msg.assistant("ok")])
        rt.save_session("s1")
    listed = run("sessions", "list", "--dir", str(tmp_path), "--json")
    assert listed.returncode == 0
    assert [i["session_id"] for i in json.loads(listed.stdout)] == ["s1"]
    shown = run("sessions", "show", "s1", "--dir", str(tmp_path))
    assert shown.returncode == 0 and "remember the milk" in shown.stdout
    as_json = run("sessions", "show", "s1", "--dir", str(tmp_path), "--json")
    msgs = json.loads(as_json.stdout)["runtime"]["short_term"]["messages"]
    assert [m["content"][0]["text"] for m in msgs] == ["remember the milk", "ok"]
    assert run("sessions", "delete", "s1", "--dir", str(tmp_path)).returncode == 0
    assert not (tmp_path / "s1.json").exists()


def test_errors_are_one_clear_line(tmp_path: Path) -> None:
    r = run("sessions", "show", "../etc", "--dir", str(tmp_path))
    assert r.returncode == 2
    assert r.stderr.startswith("actormem: error: session id '../etc' would leave")
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    (tmp_path / "bad.json").write_text("{oops")
    r = run("sessions", "show", "bad", "--dir", str(tmp_path))
    assert r.returncode == 2 and "corrupt or not JSON" in r.stderr
    r = run("sessions", "delete", "nope", "--dir", str(tmp_path))
    assert r.returncode == 2 and "no session 'nope'" in r.stderr
    r = run("--debug", "sessions", "show", "bad", "--dir", str(tmp_path))
    assert r.returncode != 0 and "Traceback" in r.stderr


def test_memories_commands_over_a_duckdb_file(tmp_path: Path) -> None:
    from actormem.store import DuckDBStore, Namespace

    db = tmp_path / "mem.duckdb"
    with DuckDBStore(db) as store:
        ada, bob = Namespace(user_id="ada"), Namespace(user_id="bob")
        store.add(ada, "Ada prefers window seats on long flights", tags=("preference",))
        store.add(ada, "Ada's locker code is 4242", kind="fact")
        store.add(bob, "Bob is allergic to peanuts")
    common = ["--db", str(db), "--user", "ada"]
    r = run("memories", "search", "window seat", *common, "--json")
    assert r.returncode == 0, r.stderr
    hits = json.loads(r.stdout)
    assert hits[0]["memory"]["content"].startswith("Ada prefers window seats")
    assert all("Bob" not in h["memory"]["content"] for h in hits)
    r = run("memories", "stats", *common, "--json")
    assert r.returncode == 0 and json.loads(r.stdout)[0]["live"] == 2
    r = run("memories", "timeline", *common, "--json")
    assert r.returncode == 0 and sum(c for _, c in json.loads(r.stdout)) == 2
    out = tmp_path / "ada.jsonl"
    r = run("memories", "export", *common, "--path", str(out))
    assert r.returncode == 0 and len(out.read_text().splitlines()) == 2
    r = run("memories", "forget", *common)
    assert r.returncode == 2 and "--yes" in r.stderr
    r = run("memories", "forget", *common, "--yes", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["memories"] == 2
    r = run("memories", "stats", "--db", str(db), "--user", "bob", "--json")
    assert json.loads(r.stdout)[0]["live"] == 1
    r = run("memories", "stats", "--db", str(tmp_path / "none.duckdb"), "--user", "x")
    assert r.returncode == 2 and "no memory store" in r.stderr
    r = run("memories", "stats", "--db", str(db))
    assert r.returncode == 2 and "--user" in r.stderr


def test_a_command_takes_its_query_or_session_id_after_the_options(tmp_path: Path) -> None:
    """``memories search --db X --user ada "query"`` (and ``sessions show --dir X id``)
    used to fail with "unrecognized arguments": argparse fills positionals from
    the words before the first option.  Extra words are still refused."""
    from actormem.store import DuckDBStore, Namespace

    db = tmp_path / "mem.duckdb"
    with DuckDBStore(db) as store:
        store.add(Namespace(user_id="ada"), "Ada prefers window seats on long flights")
    r = run("memories", "search", "--db", str(db), "--user", "ada", "--json", "window seat")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)[0]["memory"]["content"].startswith("Ada prefers window")
    r = run("memories", "search", "--db", str(db), "--user", "ada", "window", "seat")
    assert r.returncode == 2 and "unrecognized arguments: window seat" in r.stderr
    r = run("memories", "search", "--db", str(db), "--user", "ada", "--bogus")
    assert r.returncode == 2 and "unrecognized arguments: --bogus" in r.stderr
    with MemoryRuntime(session_dir=tmp_path) as rt:
        rt.add(Msg.user("remember the milk"))
        rt.save_session("s1")
    shown = run("sessions", "show", "--dir", str(tmp_path), "s1")
    assert shown.returncode == 0 and "remember the milk" in shown.stdout, shown.stderr


def test_sessions_list_says_when_its_folder_is_not_a_folder(tmp_path: Path) -> None:
    """``sessions list --dir`` naming a file or a FIFO said "no sessions"."""
    import os

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    plain = tmp_path / "plain.txt"
    plain.write_text("not a folder")
    r = run("sessions", "list", "--dir", str(fifo))
    assert r.returncode == 2
    assert (
        r.stderr.strip()
        == f"actormem: error: session folder {fifo} is a FIFO (named pipe), not a folder"
    )
    r = run("sessions", "list", "--dir", str(plain), "--json")
    assert (
        r.returncode == 2 and f"session folder {plain} is a regular file, not a folder" in r.stderr
    )
    r = run("sessions", "list", "--dir", str(tmp_path / "not-yet"), "--json")
    assert r.returncode == 0 and json.loads(r.stdout) == []  # a folder not created yet: none


def test_memories_reembed_switches_a_store_to_the_bundled_embedder(tmp_path: Path) -> None:
    from actormem.models.embedders import HashEmbedder
    from actormem.store import DuckDBStore, Namespace

    db = tmp_path / "mem.duckdb"
    with DuckDBStore(db, embedder=HashEmbedder(32)) as store:
        store.add(Namespace(user_id="ada"), "Ada keeps her bicycle in the garden shed")
    # the store commands open it with the embedder it recorded ...
    r = run("memories", "search", "bicycle", "--db", str(db), "--user", "ada", "--json")
    assert r.returncode == 0 and "bicycle" in json.loads(r.stdout)[0]["memory"]["content"]
    # ... and another one named is a mismatch, reported clearly
    r = run(
        "memories", "search", "bicycle", "--db", str(db), "--user", "ada", "--embedder", "hash-64"
    )
    assert r.returncode == 2 and "embedder 'hash-32'" in r.stderr, r.stderr
    r = run("memories", "reembed", "--db", str(db), "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["memories"] == 1 and rep["dim"] == 256 and rep["previous_dim"] == 32
    r = run("memories", "search", "where is the bike", "--db", str(db), "--user", "ada", "--json")
    assert r.returncode == 0 and "bicycle" in json.loads(r.stdout)[0]["memory"]["content"]
    r = run("memories", "reembed", "--db", str(db), "--json")  # same embedder: a plain rebuild
    assert r.returncode == 0 and json.loads(r.stdout.strip().splitlines()[-1])["memories"] == 1


def test_stored_text_that_looks_like_rich_markup_is_printed_as_it_is(tmp_path: Path) -> None:
    """Memory content, ids, session messages and NOW.md are data, not markup:
    a "[/b]" in them ended the command with a Rich MarkupError and
    ":warning:" became an emoji."""
    from actormem.journal import JournalConfig
    from actormem.store import DuckDBStore, Namespace

    hostile = "close bold with [/b] and [red]x[/red] :warning:"
    db = tmp_path / "mem.duckdb"
    with DuckDBStore(db) as store:
        store.add(Namespace(user_id="[/b]"), f"tea notes: {hostile}")
    r = run("memories", "search", "tea", "--db", str(db), "--user", "[/b]")
    assert r.returncode == 0, r.stderr
    assert "[/b]" in r.stdout and "[red]x[/red]" in r.stdout and ":warning:" in r.stdout
    r = run("memories", "stats", "--db", str(db), "--user", "[/b]")
    assert r.returncode == 0 and "[/b]" in r.stdout, r.stderr
    with MemoryRuntime(session_dir=tmp_path) as rt:
        rt.add([Msg.user(hostile)])
        rt.save_session("s1")
    r = run("sessions", "show", "s1", "--dir", str(tmp_path))
    assert r.returncode == 0 and hostile in r.stdout, r.stderr
    mem = tmp_path / "agents"
    with MemoryRuntime(
        store=tmp_path / "j.duckdb",
        namespace=Namespace(user_id="bob", agent_id="x"),
        journal=JournalConfig(memory_dir=mem),
    ) as rt:
        rt.update_now(hostile, [":x: first"])
    for what in ((), ("now",)):
        r = run("journal", "show", *what, "--memory-dir", str(mem), "--user", "bob", "--agent", "x")
        assert r.returncode == 0 and hostile in r.stdout and ":x: first" in r.stdout, r.stderr

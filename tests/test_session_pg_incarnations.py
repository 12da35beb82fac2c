"""A remembered session version names one incarnation of the row (probe s10, finding 1).

Every new row started at version 1 and a save matched the version alone, so
after A saved "s" (version 1), B deleted it and C created it again (version 1,
acknowledged), A's next save passed the check and overwrote C's session with
A's old state.  Each row now carries a generation drawn when it is created;
a save must match it too.  Tested on the storage, through ``MemoryRuntime``
and ``ReActAgent``, across real processes, and on a table of the previous
layout migrated with sessions in it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from actormem.session import JsonSession, PostgresSession, SessionConflictError
from actormem.session import _pg_layout as layout
from actormem.session._common import encode_document
from tests._postgres import pg_url

ROOT = Path(__file__).resolve().parents[1]


def _state(who: str) -> dict[str, Any]:
    return {"n": {"who": who}}


def test_a_stale_writer_cannot_overwrite_a_session_deleted_and_created_again(
    pg_dsn: str,
) -> None:
    with (
        PostgresSession(pg_dsn) as a,
        PostgresSession(pg_dsn) as b,
        PostgresSession(pg_dsn) as c,
    ):
        assert a.put("s", _state("A-old")).version == 1
        assert b.delete("s")
        assert c.put("s", _state("C-new")).version == 1  # acknowledged
        with pytest.raises(SessionConflictError, match="deleted and created again") as err:
            a.put("s", _state("A-stale"))
        assert (err.value.expected_version, err.value.stored_version) == (1, 1)
        assert b.read("s") == _state("C-new")
        assert c.put("s", _state("C-2")).version == 2  # the creator goes on
        # A continues only by loading the new incarnation.
        assert a.load("s", {}) and a.put("s", _state("A-after-load")).version == 3


def test_the_same_number_of_saves_after_the_re_creation_is_still_a_conflict(
    pg_dsn: str,
) -> None:
    """The stale writer's version may be any number the new row reaches again."""
    with PostgresSession(pg_dsn) as a, PostgresSession(pg_dsn) as b:
        for i in range(3):
            a.put("s", _state(f"A{i}"))
        assert a.version("s") == 3
        assert b.delete("s")
        for i in range(3):
            assert b.put("s", _state(f"B{i}")).version == i + 1
        with pytest.raises(SessionConflictError, match="deleted and created again"):
            a.put("s", _state("A-stale"))
        assert a.read("s") == _state("B2")


def test_a_runtime_cannot_overwrite_a_session_re_created_by_another_runtime(
    pg_dsn: str, tmp_path: Path
) -> None:
    from actormem import MemoryRuntime, Msg

    url = pg_url(pg_dsn)
    with (
        MemoryRuntime(session_dir=tmp_path / "a", sessions=url) as ra,
        MemoryRuntime(session_dir=tmp_path / "c", sessions=url) as rc,
        PostgresSession(pg_dsn) as deleter,
    ):
        ra.add(Msg.user("from A, old"))
        ra.save_session("s")
        assert deleter.delete("s")
        rc.add(Msg.user("from C, acknowledged"))
        rc.save_session("s")
        ra.add(Msg.user("from A, stale"))
        with pytest.raises(SessionConflictError, match="deleted and created again"):
            ra.save_session("s")
        with MemoryRuntime(session_dir=tmp_path / "r", sessions=url) as reader:
            assert reader.load_session("s")
            assert [m.text for m in reader.messages()] == ["from C, acknowledged"]


_WORKER = textwrap.dedent(
    """
    import json, sys
    from actormem import MemoryRuntime, ReActAgent
    from actormem.models.scripted import ScriptedModel

    url, folder, name = sys.argv[1], sys.argv[2], sys.argv[3]
    with MemoryRuntime(session_dir=folder, sessions=url) as rt:
        agent = ReActAgent("bot", ScriptedModel.echo(name + ": "), rt, session_id="s")
        print("ready", flush=True)
        for line in sys.stdin:
            cmd, _, arg = line.rstrip("\\n").partition(" ")
            try:
                if cmd == "say":
                    agent.reply(arg)  # saves the session after the turn
                    out = "ok"
                elif cmd == "save":
                    out = "ok " + str(agent.save_session())
                elif cmd == "rtsave":
                    out = "ok " + str(rt.save_session("s"))
                elif cmd == "delete":
                    out = "ok " + str(rt.session.delete("s"))
                elif cmd == "texts":
                    out = "ok " + json.dumps([m.text for m in rt.messages()])
                else:
                    out = "error unknown " + cmd
            except Exception as exc:
                out = "error " + type(exc).__name__ + " " + str(exc).replace("\\n", " ")
            print(out, flush=True)
    """
)


class _Worker:
    """A process with its own runtime and agent, driven line by line."""

    def __init__(self, script: Path, url: str, folder: Path, name: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(script), url, str(folder), name],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        assert self.proc.stdout is not None
        first = self.proc.stdout.readline().strip()
        assert first == "ready", self.proc.stderr.read() if self.proc.stderr else first

    def do(self, command: str) -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline().strip()

    def stop(self) -> None:
        try:
            _, err = self.proc.communicate(timeout=120)  # closes stdin: the worker ends
            assert self.proc.returncode == 0, err
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def workers(pg_dsn: str, tmp_path: Path) -> Iterator[dict[str, _Worker]]:
    script = tmp_path / "worker.py"
    script.write_text(_WORKER)
    url = pg_url(pg_dsn)
    started: dict[str, _Worker] = {}
    try:
        for name in ("A", "B", "C"):
            started[name] = _Worker(script, url, tmp_path / name, name)
        yield started
    finally:
        for w in started.values():
            w.stop()


def test_agents_in_separate_processes_never_overwrite_a_re_created_session(
    workers: dict[str, _Worker], pg_dsn: str
) -> None:
    a, b, c = workers["A"], workers["B"], workers["C"]
    assert a.do("say old question") == "ok"  # A's agent creates "s" (version 1)
    assert b.do("delete") == "ok True"
    assert c.do("say new question") == "ok"  # C creates "s" again: acknowledged
    said = a.do("say stale question")  # the turn goes through, its save must not
    assert said.startswith("error AutosaveError") and "deleted and created again" in said
    assert a.do("save").startswith("error SessionConflictError")
    assert a.do("rtsave").startswith("error SessionConflictError")
    with PostgresSession(pg_dsn) as s:
        stored = s.read("s")["runtime"]["short_term"]["messages"]
    assert [b["text"] for m in stored for b in m["content"]] == [
        "new question",
        "C: new question",
    ]
    assert c.do("say next question") == "ok"  # the creator goes on


# -- the layout migration ---------------------------------------------------------------


def _previous_layout(dsn: str, rows: int) -> None:
    """A sessions table of layout 1 (before the generation), filled like actormem did."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        for statement in layout.MIGRATIONS[0]:
            conn.execute(
                statement.format(t="actormem_sessions", t_saved_at="actormem_sessions_saved_at")
            )
        conn.execute(
            "CREATE TABLE actormem_sessions_schema (one boolean PRIMARY KEY DEFAULT true "
            "CHECK (one), version integer NOT NULL, migrated_at timestamptz NOT NULL)"
        )
        conn.execute("INSERT INTO actormem_sessions_schema VALUES (true, 1, now())")
        for i in range(rows):
            doc = encode_document(f"old{i}", _state(f"old-{i}"))
            conn.execute(
                "INSERT INTO actormem_sessions (session_id, version, schema_version, document, "
                "nbytes, saved_by, save_id) VALUES (%s, %s, 1, %b, %s, 'old:1', gen_random_uuid())",
                (f"old{i}", i + 1, doc, len(doc)),
            )


def test_a_filled_table_of_the_previous_layout_migrates_and_its_rows_load_and_save(
    pg_dsn: str,
) -> None:
    assert layout.LAYOUT_VERSION == 2
    _previous_layout(pg_dsn, rows=5)
    filenode = "SELECT pg_relation_filenode('actormem_sessions')"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        before = conn.execute(filenode).fetchone()
    with PostgresSession(pg_dsn) as a, PostgresSession(pg_dsn) as b:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            assert conn.execute("SELECT version FROM actormem_sessions_schema").fetchone() == (2,)
            # not rewritten: every worker's loads and saves would wait for the whole copy
            assert conn.execute(filenode).fetchone() == before
            generations = conn.execute("SELECT generation FROM actormem_sessions").fetchall()
        # the rows of the previous layout keep none (the table is not rewritten); a
        # re-created row draws one, so a remembered "none" never matches it (below)
        assert [g for (g,) in generations] == [None] * 5
        for i in range(5):
            assert a.read(f"old{i}") == _state(f"old-{i}")
        # an old row loads and saves on, its version counting on
        assert a.load("old3", {}) and a.version("old3") == 4
        assert a.put("old3", _state("new-3")).version == 5
        assert b.read("old3") == _state("new-3")
        # and is protected like a new one: deleted and created again, A's save is refused
        assert b.load("old4", {}) and a.load("old4", {})
        assert b.delete("old4")
        with PostgresSession(pg_dsn) as c:
            for _ in range(5):  # back to the version A remembers
                c.put("old4", _state("C"))
            assert c.version("old4") == 5
        with pytest.raises(SessionConflictError, match="deleted and created again"):
            a.put("old4", _state("A-stale"))
        assert b.read("old4") == _state("C")


def test_a_process_of_the_previous_layout_still_inserting_gets_a_generation(
    pg_dsn: str,
) -> None:
    """An actormem of layout 1 that opened the table before the migration keeps
    inserting without the column: the default gives its rows a generation."""
    _previous_layout(pg_dsn, rows=0)
    with PostgresSession(pg_dsn) as new:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            doc = encode_document("x", _state("old-process"))
            conn.execute(
                "INSERT INTO actormem_sessions (session_id, schema_version, document, nbytes, "
                "saved_by, save_id, version) VALUES ('x', 1, %b, %s, 'old:2', "
                "gen_random_uuid(), 1)",
                (doc, len(doc)),
            )
        assert new.load("x", {}) and new.put("x", _state("new")).version == 2
        assert json.loads(json.dumps(new.read("x"))) == _state("new")


def test_json_files_have_no_version_check_as_the_readme_says(tmp_path: Path) -> None:
    """The JSON side of the README's claim: the last save wins, a re-created file too."""
    a, b, c = (JsonSession(tmp_path) for _ in range(3))
    a.put("s", _state("A-old"))
    assert b.delete("s")
    c.put("s", _state("C-new"))
    a.put("s", _state("A-stale"))  # no error: files have no versions
    assert b.read("s") == _state("A-stale")

"""Erasing a user leaves nothing of them: ``actormem memories forget --user`` and the
explorer's "forget this user" run the same erasure (memories, keyed facts of
every level, history and journal rows), on a store built with another embedder."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from actormem import MemoryRuntime
from actormem.models.embedders import HashEmbedder
from actormem.store import DuckDBStore, Namespace
from actormem.ui._data import Explorer

BOB_LEVELS = [
    Namespace(user_id="bob"),
    Namespace(user_id="bob", agent_id="helper"),
    Namespace(user_id="bob", agent_id="helper", run_id="r1"),
]
ALICE = Namespace(user_id="alice", agent_id="helper")


def _fill(db: Path) -> None:
    with DuckDBStore(db, embedder=HashEmbedder(32)) as store:  # not the bundled embedder
        for ns in [*BOB_LEVELS, ALICE]:
            with MemoryRuntime(store=store, namespace=ns) as rt:
                rt.save_fact("ssn", f"secret of {ns}")
            store.add(ns, f"{ns.user_id} likes sailing at {ns}")
            store.log_append(ns, "note", f"journal row of {ns}")


def _left(db: Path, user: str) -> list[str]:
    with DuckDBStore(db, embedder=HashEmbedder(32)) as store:
        left = [
            f"{ns}: {[m.content for m in store.list(ns, include_deleted=True)]}"
            for ns in store.namespaces()
            if ns.user_id is not None and ns.user_id.startswith(user)
        ]
        left += [
            f"log {ns}: {r.content}"
            for ns in [*BOB_LEVELS, ALICE]
            if ns.user_id == user
            for r in store.log_entries(ns, compacted=None)
        ]
        left += [f"history {h.memory_id}" for h in store.history(Namespace(user_id=user))]
        left += [
            f"history {h.memory_id}" for h in store.history(Namespace(user_id=user + "#facts"))
        ]
        return left


@pytest.mark.parametrize("path", ["cli", "explorer"])
def test_forgetting_a_user_leaves_nothing_of_them(tmp_path: Path, path: str) -> None:
    db = tmp_path / "mem.duckdb"
    _fill(db)
    assert len(_left(db, "bob")) > 6  # memories, keyed facts, history and journal rows
    if path == "cli":
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "actormem.cli",
                "memories",
                "forget",
                "--db",
                str(db),
                "--user",
                "bob",
                "--yes",
                "--json",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 0, r.stderr  # opened with the embedder the store recorded
        report = json.loads(r.stdout)
        # one keyed fact per level: bob#facts (outside the scope user=bob, the sibling
        # forgotten beside it) and those of bob's agent and run (inside the scope)
        assert report["keyed_facts"] == 3 and report["memories"] == 6
    else:
        with DuckDBStore(db, embedder=HashEmbedder(32)) as store:
            Explorer(store).forget_user("bob")
    assert _left(db, "bob") == []
    assert len(_left(db, "alice")) >= 3  # another user is untouched
    with DuckDBStore(db, embedder=HashEmbedder(32)) as store:
        for ns in BOB_LEVELS:
            with MemoryRuntime(store=store, namespace=ns) as rt:
                assert rt.get_fact("ssn") is None
        with MemoryRuntime(store=store, namespace=ALICE) as rt:
            assert rt.get_fact("ssn") == f"secret of {ALICE}"


def test_the_cli_opens_a_store_with_the_embedder_named(tmp_path: Path) -> None:
    db = tmp_path / "mem.duckdb"
    with DuckDBStore(db, embedder=HashEmbedder(32)) as store:
        store.add(ALICE, "alice likes sailing")

    def run(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "actormem.cli",
                "memories",
                "stats",
                "--db",
                str(db),
                "--user",
                "alice",
                "--json",
                *extra,
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )

    assert json.loads(run().stdout)[0]["live"] == 1  # the recorded one
    assert json.loads(run("--embedder", "hash-32").stdout)[0]["live"] == 1
    wrong = run("--embedder", "hash-64")
    assert wrong.returncode != 0 and "hash-32" in wrong.stderr and "Traceback" not in wrong.stderr
    bad = run("--embedder", "word2vec")
    assert bad.returncode == 2 and "none of hash-<dim>" in bad.stderr

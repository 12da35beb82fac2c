"""Path isolation: one folder per namespace, never outside the root."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from actormem.journal import JournalPathError, namespace_folder, segment
from actormem.store import Namespace

from .conftest import MakeRuntime


@pytest.mark.parametrize(
    "hostile",
    ["..", "../../etc", "/etc/passwd", "a/b", "a\\b", ".hidden", "%2E%2E", "x" * 256, "é ü", "~"],
)
def test_hostile_ids_stay_inside_the_root(tmp_path: Path, hostile: str) -> None:
    root = tmp_path / "agents"
    folder = namespace_folder(root, Namespace(user_id=hostile, agent_id=hostile, run_id=hostile))
    assert folder.resolve().is_relative_to(root.resolve())
    assert all(
        part not in ("..", ".") and "/" not in part
        for part in folder.relative_to(root.resolve()).parts
    )
    assert len(folder.relative_to(root.resolve()).parts) == 3


def test_distinct_namespaces_get_distinct_folders(tmp_path: Path) -> None:
    ids = ["ada", "Ada", "a.b", "a%2Eb", "%", "_", "run.x", "a b", "a/b", "a%2Fb"]
    folders = {namespace_folder(tmp_path, Namespace(user_id=i, agent_id="bot")) for i in ids}
    assert len(folders) == len(ids)
    assert (
        namespace_folder(tmp_path, Namespace(agent_id="bot"))
        != namespace_folder(tmp_path, Namespace(user_id="%", agent_id="bot"))
        or segment("%") != "%"
    )
    run = namespace_folder(tmp_path, Namespace(user_id="u", agent_id="a", run_id="memory"))
    assert run.name == "run.memory"  # never the daily-journal folder of the agent


def test_symlink_escape_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "agents"
    (root / "ada").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, root / "ada" / "bot")
    with pytest.raises(JournalPathError):
        namespace_folder(root, Namespace(user_id="ada", agent_id="bot"))


def test_namespaces_do_not_see_each_other(make_runtime: MakeRuntime) -> None:
    ada = make_runtime(Namespace(user_id="ada", agent_id="bot"))
    ada.update_now("Ada's secret plan", ["step"])
    ada.log("THOUGHT", "ada only")
    bob = make_runtime(Namespace(user_id="bob", agent_id="bot"))
    assert bob.now().objective == "" and bob.journal is not None and bob.journal.entries() == []
    assert "secret" not in bob.working_memory()
    with pytest.raises(JournalPathError):
        bob.journal.day_path("../../ada/bot/NOW")

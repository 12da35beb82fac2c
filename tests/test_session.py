from __future__ import annotations

import os
import random
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from actormem.session import JsonSession, SessionError, SessionManager, validate_session_id
from actormem.state import StateModule


class Counter(StateModule):
    def __init__(self, value: int = 0, notes: list[str] | None = None) -> None:
        super().__init__()
        self.value = value
        self.notes = notes or []
        self.register_state("value")
        self.register_state("notes")


def test_save_load_exists_list_delete(tmp_path: Path) -> None:
    s = JsonSession(tmp_path)
    assert not s.exists("a") and s.list() == []
    path = s.save("a", {"counter": Counter(5, ["x"])})
    assert path == tmp_path / "a.json" and s.exists("a")
    doc = msgspec.json.decode(path.read_bytes())
    assert doc["format"] == "actormem.session" and doc["schema_version"] == 1
    assert doc["session_id"] == "a" and doc["saved_at"].endswith("+00:00")
    assert doc["components"] == {"counter": {"value": 5, "notes": ["x"]}}
    c = Counter()
    assert s.load("a", {"counter": c}) and (c.value, c.notes) == (5, ["x"])
    assert s.load("missing", {"counter": c}) is False
    with pytest.raises(SessionError, match="not found"):
        s.load("missing", {"counter": c}, allow_missing=False)
    s.save("b", {"counter": Counter(1)})
    assert {i.session_id for i in s.list()} == {"a", "b"}
    assert s.delete("a") and not s.delete("a") and not s.exists("a")


def test_files_are_private_and_no_temp_files_remain(tmp_path: Path) -> None:
    s = JsonSession(tmp_path)
    p = s.save("p", {"c": Counter()})
    assert stat.S_IMODE(p.stat().st_mode) == 0o600
    assert [f.name for f in tmp_path.iterdir()] == ["p.json"]


def test_folders_created_for_memory_are_private_at_every_level(tmp_path: Path) -> None:
    """mkdir(mode=0o700, parents=True) made only the last level 0700: the
    user-id folders under memory_dir were 0755, listable by any local user."""
    from actormem import MemoryRuntime
    from actormem.journal import JournalConfig
    from actormem.store import Namespace

    JsonSession(tmp_path / "a" / "b" / "sessions").save("p", {"c": Counter()})
    for level in ("a", "a/b", "a/b/sessions"):
        assert stat.S_IMODE((tmp_path / level).stat().st_mode) == 0o700, level
    existing = tmp_path / "mine"
    existing.mkdir(mode=0o755)
    existing.chmod(0o755)
    with MemoryRuntime(
        store=tmp_path / "m.duckdb",
        namespace=Namespace(user_id="ada", agent_id="travel"),
        journal=JournalConfig(memory_dir=existing / "agents"),
    ) as rt:
        rt.log("THOUGHT", "plan the trip")
        rt.update_now("trip", ["book"])
        assert rt.journal is not None
        rt.journal.flush()
    folders = [p for p in (existing / "agents").rglob("*") if p.is_dir()]
    assert {"ada", "travel"} <= {p.name for p in folders}
    for level in [existing / "agents", *folders]:
        assert stat.S_IMODE(level.stat().st_mode) == 0o700, level
    assert stat.S_IMODE(existing.stat().st_mode) == 0o755  # the user's own folder untouched
    for f in (existing / "agents/ada/travel").rglob("*.md"):
        assert stat.S_IMODE(f.stat().st_mode) == 0o600, f


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "../x",
        "..",
        "a/../../b",
        "/etc/passwd",
        "a/b",
        "a\\b",
        "x\x00y",
        ".hidden",
        "a" * 200,
        5,
        None,
    ],
)
def test_ids_that_leave_the_folder_are_rejected(tmp_path: Path, bad: Any) -> None:
    s = JsonSession(tmp_path / "inner")
    with pytest.raises(SessionError):
        s.save(bad, {"c": Counter()})
    with pytest.raises(SessionError):
        validate_session_id(bad)
    assert not (tmp_path / "inner").exists() or list((tmp_path / "inner").iterdir()) == []
    assert not (tmp_path / "x.json").exists()


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"{not json", "corrupt or not JSON"),
        (b'{"format": "something.else", "schema_version": 1}', "not an actormem session"),
        (
            b'{"format": "actormem.session", "schema_version": 99, "session_id": "s",'
            b' "saved_at": "", "components": {}}',
            "newer than this actormem supports",
        ),
        (b'{"format": "actormem.session", "schema_version": 1}', "malformed"),
        (b"[1, 2, 3]", "corrupt or not JSON"),
    ],
)
def test_bad_files_are_rejected_without_damage(tmp_path: Path, content: bytes, needle: str) -> None:
    (tmp_path / "s.json").write_bytes(content)
    c = Counter(42, ["keep"])
    with pytest.raises(SessionError, match=needle) as info:
        JsonSession(tmp_path).load("s", {"c": c})
    assert "s.json" in str(info.value)
    assert (c.value, c.notes) == (42, ["keep"])
    assert (tmp_path / "s.json").read_bytes() == content


def test_failed_component_load_rolls_back_every_component(tmp_path: Path) -> None:
    s = JsonSession(tmp_path)
    s.save_state("s", {"a": {"value": 1, "notes": []}, "b": {"wrong": 1}})
    a, b = Counter(10), Counter(20)
    with pytest.raises(SessionError, match="component 'b' rejected"):
        s.load("s", {"a": a, "b": b})
    assert (a.value, b.value) == (10, 20)
    with pytest.raises(SessionError, match="no state for component"):
        s.load("s", {"a": a, "zzz": b})


def test_unserialisable_state_is_a_session_error(tmp_path: Path) -> None:
    c = Counter()
    c.value = object()  # type: ignore[assignment]
    with pytest.raises(SessionError, match="not JSON-serialisable"):
        JsonSession(tmp_path).save("s", {"c": c})
    assert not (tmp_path / "s.json").exists()


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.text(max_size=50)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
    max_leaves=15,
)


@given(st.dictionaries(st.text(max_size=12), json_values, max_size=5))
def test_any_json_state_round_trips(
    tmp_path_factory: pytest.TempPathFactory, notes: dict[str, Any]
) -> None:
    d = tmp_path_factory.mktemp("h")
    s = JsonSession(d)
    s.save_state("h", {"c": {"value": 1, "notes": notes}})
    c = Counter()
    s.load("h", {"c": c})
    assert c.notes == notes


def test_session_manager(tmp_path: Path) -> None:
    c1 = Counter(3)
    m = SessionManager.for_session("u1").with_session(JsonSession(tmp_path)).add_component(c1)
    assert m.load_if_exists() is False
    m.save()
    c2 = Counter()
    m2 = SessionManager.for_session("u1").with_session(JsonSession(tmp_path)).add_component(c2)
    assert m2.load_if_exists() and c2.value == 3
    with pytest.raises(SessionError, match="already added"):
        m2.add_component(Counter())
    with pytest.raises(SessionError, match="StateModule"):
        m2.add_component(object(), "x")  # type: ignore[arg-type]
    with pytest.raises(SessionError):
        SessionManager.for_session("../evil")


CHILD = textwrap.dedent(
    """
    import sys
    from actormem.session import JsonSession
    from actormem.state import StateModule

    class Big(StateModule):
        def __init__(self):
            super().__init__()
            self.n = 0
            self.items = []
            self.register_state("n")
            self.register_state("items")

    s = JsonSession(sys.argv[1])
    b = Big()
    print("ready", flush=True)
    while True:
        b.n += 1
        b.items = ["x" * 200] * (2000 + b.n % 500)
        s.save("victim", {"big": b})
    """
)


def test_sigkill_during_saves_always_leaves_a_loadable_session(tmp_path: Path) -> None:
    """Kill a process that saves in a loop at random moments: the file is always whole."""
    rng = random.Random(1234)
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    last_n = 0
    for _ in range(20):
        proc = subprocess.Popen(
            [sys.executable, str(script), str(tmp_path / "s")], stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        # At least one save must have completed (a loaded machine may need a
        # while for the first one); then a random moment of the save loop.
        deadline = time.monotonic() + 120
        while not (tmp_path / "s" / "victim.json").exists() and proc.poll() is None:
            assert time.monotonic() < deadline, "the child never completed a save"
            time.sleep(0.01)
        time.sleep(rng.uniform(0.02, 0.25))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        if not (tmp_path / "s" / "victim.json").exists():
            continue
        comps = JsonSession(tmp_path / "s").read("victim")
        big = comps["big"]
        assert len(big["items"]) == 2000 + big["n"] % 500  # a complete document
        last_n = max(last_n, big["n"])
    assert last_n > 0, "the child never completed a save"

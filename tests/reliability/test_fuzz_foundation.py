"""Fuzzing the foundation: hostile bytes, JSON and strings never crash it or damage anything.

Bounded for ``make test``; ``HYPOTHESIS_PROFILE=fuzz`` (``make fuzz``) runs thousands.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from actormem import MemoryRuntime, Msg
from actormem.messages import MessageError, TextBlock, decode_msgs, from_openai, validate_msg
from actormem.session import JsonSession, SessionError
from actormem.state import StateModule


class Box(StateModule):
    def __init__(self) -> None:
        super().__init__()
        self.items: list[Any] = ["original"]
        self.register_state("items")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
    max_leaves=20,
)

HOSTILE = [
    "'; DROP TABLE memories; --",
    "../../etc/passwd",
    "a\x00b",
    "\ud800 lone surrogate",
    "x" * 100_000,
    "\u202e right-to-left override",
    "🙂" * 1000,
    '{"role": "system"}',
]


@given(st.binary(max_size=2000))
def test_random_bytes_into_session_loading(
    tmp_path_factory: pytest.TempPathFactory, data: bytes
) -> None:
    d = tmp_path_factory.mktemp("fz")
    (d / "s.json").write_bytes(data)
    box = Box()
    with contextlib.suppress(SessionError):
        JsonSession(d).load("s", {"box": box})
    assert (d / "s.json").read_bytes() == data
    assert box.items == ["original"] or isinstance(box.items, list)


@given(json_values)
def test_random_json_components_never_crash_loading(
    tmp_path_factory: pytest.TempPathFactory, value: Any
) -> None:
    d = tmp_path_factory.mktemp("fj")
    doc = {
        "format": "actormem.session",
        "schema_version": 1,
        "session_id": "s",
        "saved_at": "",
        "components": {"box": value, "runtime": value},
    }
    raw = json.dumps(doc).encode()
    (d / "s.json").write_bytes(raw)
    box = Box()
    try:
        JsonSession(d).load("s", {"box": box})
    except SessionError:
        assert box.items == ["original"]  # all or nothing
    assert (d / "s.json").read_bytes() == raw


@given(json_values)
def test_random_json_into_the_runtime_session(
    tmp_path_factory: pytest.TempPathFactory, value: Any
) -> None:
    d = tmp_path_factory.mktemp("fr")
    doc = {
        "format": "actormem.session",
        "schema_version": 1,
        "session_id": "s",
        "saved_at": "",
        "components": {"runtime": {"short_term": value}},
    }
    (d / "s.json").write_text(json.dumps(doc))
    with MemoryRuntime(session_dir=d) as rt:
        rt.add(Msg.user("keep"))
        try:
            rt.load_session("s")
        except SessionError:
            assert [m.text for m in rt.messages()] == ["keep"]


@given(st.binary(max_size=500) | st.text(max_size=500))
def test_random_input_into_message_decoding(data: bytes | str) -> None:
    with contextlib.suppress(MessageError):
        assert all(isinstance(m, Msg) for m in decode_msgs(data))
    with contextlib.suppress(MessageError):
        assert isinstance(Msg.from_json(data), Msg)


@given(
    st.dictionaries(
        st.sampled_from(["role", "content", "tool_calls", "tool_call_id", "name"]), json_values
    )
)
def test_random_openai_items(item: dict[str, Any]) -> None:
    try:
        m = from_openai(item)
    except MessageError:
        return
    validate_msg(m)


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_strings_through_the_runtime_and_sessions(tmp_path: Path, text: str) -> None:
    with MemoryRuntime(session_dir=tmp_path) as rt:
        msg = Msg.user(text, name=text[:50])
        try:
            rt.add(msg)
        except MessageError as exc:
            assert "\ud800" in text and "cannot be stored as JSON" in str(exc)
            rt.add(Msg.user("after"))
            rt.save_session("s")  # a refused message never poisons later saves
            return
        rt.save_session("s")
    with MemoryRuntime(session_dir=tmp_path) as rt2:
        assert rt2.load_session("s")
        # the door replaces a NUL (PostgreSQL cannot store one) with U+FFFD (a7bb615)
        assert rt2.messages()[0].text == text.replace("\x00", "\ufffd")


def test_unserialisable_metadata_is_refused_up_front(tmp_path: Path) -> None:
    with MemoryRuntime(session_dir=tmp_path) as rt:
        with pytest.raises(MessageError, match="cannot be stored as JSON"):
            rt.add(Msg(role="user", content=(TextBlock("x"),), metadata={"when": object()}))
        rt.add(Msg.user("fine"))
        rt.save_session("ok")
    assert msgspec.json.decode((tmp_path / "ok.json").read_bytes())["session_id"] == "ok"

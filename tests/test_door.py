"""The door (actormem._door): whatever add() accepts, a save then a load restores equal.

Each class of value that used to be accepted and then made the session
unloadable (or every save fail) is refused at add() with MessageError
naming the field; the property test states the invariant over generated
messages.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actormem import MemoryRuntime, Msg
from actormem._door import MAX_DEPTH, check_json_object
from actormem.messages import (
    ImageBlock,
    MessageError,
    OffloadRefBlock,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)


def nested(depth: int, leaf: object = 1) -> Any:
    value: Any = leaf
    for _ in range(depth):
        value = {"a": value}
    return value


def _deep_list(depth: int) -> Any:
    value: Any = []
    for _ in range(depth):
        value = [value]
    return value


def user(**fields: Any) -> Msg:
    base = Msg.user("hello")
    return msgspec.structs.replace(base, **fields)


def call(input: Any) -> Msg:
    return Msg(role="assistant", content=(ToolUseBlock(id="c1", name="t", input=input),))


# Each: a message add() used to accept, the field the error must name.
BAD: list[tuple[str, Msg, str]] = [
    ("nan time", user(created_at=math.nan), r"messages\[0\]\.created_at"),
    ("inf time", user(created_at=math.inf), r"messages\[0\]\.created_at"),
    ("-inf time", user(created_at=-math.inf), r"messages\[0\]\.created_at"),
    ("None time", user(created_at=None), r"messages\[0\]\.created_at"),
    ("str time", user(created_at="2024-01-01"), r"messages\[0\]\.created_at"),
    ("bool time", user(created_at=True), r"messages\[0\]\.created_at"),
    ("far time", user(created_at=1e30), r"messages\[0\]\.created_at"),
    ("int name", user(name=5), r"messages\[0\]\.name"),
    ("None name", user(name=None), r"messages\[0\]\.name"),
    ("None id", user(id=None), r"messages\[0\]\.id"),
    ("list input", call([1, 2]), r"messages\[0\]\.content\[0\]\.input"),
    ("str input", call("x"), r"messages\[0\]\.content\[0\]\.input"),
    ("None input", call(None), r"messages\[0\]\.content\[0\]\.input"),
    ("deep input", call(nested(1_000)), r"messages\[0\]\.content\[0\]\.input(\.a)+: nested"),
    ("deep metadata 989", user(metadata=nested(989)), r"messages\[0\]\.metadata(\.a)+: nested"),
    ("deep metadata 988", user(metadata=nested(988)), r"messages\[0\]\.metadata(\.a)+: nested"),
    ("deep list", user(metadata={"l": _deep_list(200)}), r"metadata\.l(\[0\])+: nested"),
    ("nan meta", user(metadata={"a": {"b": math.nan}}), r"messages\[0\]\.metadata\.a\.b"),
    ("int key", user(metadata={"a": {1: "x"}}), r"messages\[0\]\.metadata\.a: key 1"),
    ("set", user(metadata={"s": {1, 2}}), r"messages\[0\]\.metadata\.s: a set"),
    ("bytes", user(metadata={"b": b"x"}), r"messages\[0\]\.metadata\.b: a bytes"),
    ("object", user(metadata={"o": object()}), r"messages\[0\]\.metadata\.o: a object"),
    ("metadata list", user(metadata=[1]), r"messages\[0\]\.metadata must be a JSON object"),
    ("surrogate", user(metadata={"x": "\ud800"}), r"messages\[0\] cannot be stored as JSON"),
    (
        "tool id",
        Msg(role="assistant", content=(ToolUseBlock(id=5, name="t"),)),  # type: ignore[arg-type]
        r"content\[0\]\.id must be a str",
    ),
    (
        "is_error",
        Msg(role="tool", content=(ToolResultBlock(tool_use_id="c", output="o", is_error="y"),)),  # type: ignore[arg-type]
        r"content\[0\]\.is_error must be a bool",
    ),
    (
        "offload tokens",
        Msg(role="user", content=(OffloadRefBlock("o", "p", original_tokens="9"),)),  # type: ignore[arg-type]
        r"content\[0\]\.original_tokens must be an int",
    ),
    (
        "image url",
        Msg(role="user", content=(ImageBlock(url=None),)),  # type: ignore[arg-type]
        r"content\[0\]\.url must be a str",
    ),
]


@pytest.mark.parametrize(("case", "msg", "field"), BAD, ids=[b[0] for b in BAD])
def test_add_refuses_what_a_session_cannot_hold(
    tmp_path: Path, case: str, msg: Msg, field: str
) -> None:
    with MemoryRuntime(session_dir=tmp_path) as rt:
        rt.add(Msg.user("kept"))
        with pytest.raises(MessageError, match=field):
            rt.add(msg)
        with pytest.raises(MessageError, match=field.replace(r"messages\[0\]", r"messages\[1\]")):
            rt.add([Msg.user("fine"), msg])
        assert [m.text for m in rt.messages()] == ["kept"]  # nothing of a refused call
        rt.save_session("s")
    with MemoryRuntime(session_dir=tmp_path) as rt2:
        assert rt2.load_session("s")
        assert [m.text for m in rt2.messages()] == ["kept"]


def test_the_depth_limit_is_inclusive_and_round_trips(tmp_path: Path) -> None:
    # MAX_DEPTH containers (the metadata object counted) are accepted and load
    # back; one more is refused.
    ok = user(metadata=nested(MAX_DEPTH))
    with MemoryRuntime(session_dir=tmp_path) as rt:
        rt.add(ok)
        with pytest.raises(MessageError, match="nested deeper than 64"):
            rt.add(user(metadata=nested(MAX_DEPTH + 1)))
        rt.save_session("deep")
    with MemoryRuntime(session_dir=tmp_path) as rt2:
        rt2.load_session("deep")
        assert rt2.messages() == [ok]


def test_values_json_means_the_same_are_normalised(tmp_path: Path) -> None:
    class Label(str):
        pass

    given_msg = Msg(
        role="assistant",
        content=[  # type: ignore[arg-type]
            TextBlock("t"),
            ToolUseBlock(id="c", name="n", input={"xs": (1, 2), "f": _Float(0.5)}),
        ],
        metadata={"tags": ("a", "b"), "label": Label("x")},
        created_at=1_700_000_000,  # an int is a number of seconds too
    )
    with MemoryRuntime(session_dir=tmp_path) as rt:
        rt.add(given_msg)
        stored = rt.messages()[0]
        assert stored.metadata == {"tags": ["a", "b"], "label": "x"}
        assert stored.content[1] == ToolUseBlock(id="c", name="n", input={"xs": [1, 2], "f": 0.5})
        rt.save_session("n")
    with MemoryRuntime(session_dir=tmp_path) as rt2:
        rt2.load_session("n")
        assert rt2.messages() == [stored]


class _Float(float):
    pass


def test_call_tool_arguments_go_through_the_door(tmp_path: Path) -> None:
    with MemoryRuntime(session_dir=tmp_path, store=tmp_path / "m.duckdb", long_term="BOTH") as rt:
        with pytest.raises(MessageError, match=r"retrieve_from_memory\.arguments(\.a)+: nested"):
            rt.call_tool("retrieve_from_memory", nested(500))
        with pytest.raises(MessageError, match=r"record_to_memory\.arguments\.content\[0\]"):
            rt.call_tool("record_to_memory", {"thinking": "x", "content": [math.inf]})
        with pytest.raises(ValueError, match="must be a JSON object"):
            rt.call_tool("retrieve_from_memory", ["x"])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"max_msg_bytes": -1}, "MemoryRuntime.max_msg_bytes"),
        ({"max_msg_bytes": 0}, "MemoryRuntime.max_msg_bytes"),
        ({"max_msg_bytes": 1.5}, "MemoryRuntime.max_msg_bytes"),
        ({"max_msg_bytes": 10**12}, "MemoryRuntime.max_msg_bytes"),
        ({"max_restarts": -1}, "MemoryRuntime.max_restarts"),
        ({"max_restarts": True}, "MemoryRuntime.max_restarts"),
    ],
)
def test_runtime_numbers_are_refused_where_they_enter(
    tmp_path: Path, kwargs: dict[str, Any], field: str
) -> None:
    with pytest.raises(ValueError, match=field):
        MemoryRuntime(session_dir=tmp_path, **kwargs)


# -- the invariant, over generated messages -------------------------------------------

_KEYS = st.text(max_size=6)
_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8)
    | st.binary(max_size=3)
)
_JSONISH = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner, inner)
        | st.dictionaries(_KEYS | st.integers(0, 3), inner, max_size=3)
    ),
    max_leaves=12,
)
_TIMES = (
    st.floats(allow_nan=True, allow_infinity=True)
    | st.integers(-10, 10**12)
    | st.none()
    | st.text(max_size=3)
)
_BLOCKS = st.one_of(
    st.builds(TextBlock, st.text(max_size=10) | st.integers()),
    st.builds(
        ToolUseBlock,
        id=st.text(max_size=4),
        name=st.text(max_size=4) | st.none(),
        input=st.dictionaries(_KEYS, _JSONISH, max_size=3) | st.lists(st.integers(), max_size=2),
    ),
    st.builds(
        ToolResultBlock,
        tool_use_id=st.text(max_size=4),
        output=st.text(max_size=8),
        is_error=st.booleans() | st.integers(0, 2),
    ),
    st.builds(OffloadRefBlock, st.text(max_size=4), st.text(max_size=4), st.integers() | st.text()),
)
_MSGS = st.builds(
    Msg,
    role=st.sampled_from(["user", "assistant", "system", "tool", "robot"]),
    content=st.lists(_BLOCKS, max_size=3).map(tuple),
    name=st.text(max_size=4) | st.none() | st.integers(),
    metadata=st.dictionaries(_KEYS | st.integers(0, 3), _JSONISH, max_size=4),
    created_at=_TIMES,
)


@pytest.fixture(scope="module")
def runtimes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[MemoryRuntime, ...]]:
    folder = tmp_path_factory.mktemp("door")
    with MemoryRuntime(session_dir=folder) as rt, MemoryRuntime(session_dir=folder) as rt2:
        yield rt, rt2


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(msgs=st.lists(_MSGS, min_size=1, max_size=4))
def test_whatever_add_accepts_a_save_then_a_load_restores_equal(
    runtimes: tuple[MemoryRuntime, ...], msgs: list[Msg]
) -> None:
    rt, rt2 = runtimes
    rt.clear()
    for m in msgs:
        try:
            rt.add(m)
        except MessageError:
            continue
    accepted = rt.messages()
    rt.save_session("prop")  # a real session file, read back by another runtime
    assert rt2.load_session("prop")
    assert rt2.messages() == accepted


def test_the_property_holds_through_a_real_runtime(tmp_path: Path) -> None:
    # The same invariant end to end on a few hand-picked edge values.
    msgs = [
        user(
            metadata={"big": 2**70, "neg": -(2**64), "f": 1e308, "e": "", "u": "\u00e9\U0001f600"}
        ),
        user(created_at=0.0, name=""),
        call({"nested": nested(10, [1, None, True, 0.5])}),
    ]
    with MemoryRuntime(session_dir=tmp_path) as rt:
        rt.add(msgs)
        before = rt.messages()
        rt.save_session("p")
    with MemoryRuntime(session_dir=tmp_path) as rt2:
        rt2.load_session("p")
        assert rt2.messages() == before


def test_check_json_object_names_the_path() -> None:
    with pytest.raises(MessageError, match=r"args\['a b'\]\[1\]: nan"):
        check_json_object({"a b": [0, math.nan]}, "args")


def test_the_stores_door_checks_metadata_the_same_way(tmp_path: Path) -> None:
    from actormem.models.embedders import HashEmbedder
    from actormem.store import DuckDBStore, InvalidMemoryError, Namespace

    ns = Namespace(user_id="u")
    with DuckDBStore(tmp_path / "m.duckdb", embedder=HashEmbedder(8)) as store:
        # 2,000 levels used to raise RecursionError from deep inside the encoder.
        with pytest.raises(InvalidMemoryError, match=r"metadata(\.a)+: nested deeper than 64"):
            store.add(ns, "deep", metadata=nested(2_000))
        with pytest.raises(InvalidMemoryError, match=r"metadata\.x: nan"):
            store.add(ns, "nan", metadata={"x": math.nan})  # was stored as null
        with pytest.raises(InvalidMemoryError, match=r"metadata: key 1 is a int"):
            store.add(ns, "int key", metadata={1: "x"})  # was stored as "1"
        ok = store.add(ns, "fine", metadata={"tags": ("a",)})
        with pytest.raises(InvalidMemoryError, match="nested deeper"):
            store.update(ns, ok.id, metadata=nested(100))
        assert store.count(ns) == 1


def test_the_journal_log_checks_its_metadata(tmp_path: Path) -> None:
    with MemoryRuntime(session_dir=tmp_path, store=tmp_path / "m.duckdb", journal=True) as rt:
        with pytest.raises(ValueError, match=r"log metadata(\.a)+: nested deeper"):
            rt.log("SYSTEM", "deep", a=nested(2_000))
        with pytest.raises(ValueError, match=r"log metadata\.x: nan"):
            rt.log("SYSTEM", "nan", x=math.nan)
        rt.log("SYSTEM", "fine", step=1)


@pytest.mark.parametrize("backend", ["duckdb", "postgres"])
def test_a_nul_in_a_message_is_replaced_and_the_turn_is_recorded(
    tmp_path: Path, request: pytest.FixtureRequest, backend: str
) -> None:
    """A tool's output with binary junk: no backend keeps a NUL character (PostgreSQL's
    text cannot), so the door replaces it with U+FFFD in every string of a message --
    the turn is kept in the session and recorded on both backends (before: on
    PostgreSQL the episode's write was refused, the turn never reached long-term memory)."""
    store: Any = tmp_path / "m.duckdb" if backend == "duckdb" else request.getfixturevalue("pg_dsn")
    turn = [
        Msg.user("what does the sensor say about zorbulite\x00?", raw="a\x00b"),
        Msg(
            role="tool",
            content=(ToolResultBlock(tool_use_id="t1", output="zorbulite level \x00\x00 high"),),
        ),
        Msg.assistant("the zorbulite level is high"),
    ]
    with MemoryRuntime(session_dir=tmp_path, store=store, long_term="STATIC_CONTROL") as rt:
        rt.add(turn)
        kept = rt.messages()
        assert kept[0].text == "what does the sensor say about zorbulite\ufffd?"
        assert kept[0].metadata == {"raw": "a\ufffdb"}
        assert b"\\u0000" not in msgspec.json.encode(kept)
        rt.record(kept)
        rt.flush()
        assert rt.recording_stats()["failed"] == 0
        hits = rt.retrieve("zorbulite sensor level")
        assert hits and "zorbulite" in hits[0].memory.content
        rt.save_session("nul")
    with MemoryRuntime(session_dir=tmp_path) as rt2:
        rt2.load_session("nul")
        assert rt2.messages() == kept


def test_a_literal_backslash_u0000_is_text_not_a_nul(tmp_path: Path) -> None:
    text = "the escape \\u0000 is six characters, \\\\u0000 too"
    with MemoryRuntime(session_dir=tmp_path) as rt:
        rt.add(Msg.user(text))
        assert rt.messages()[0].text == text

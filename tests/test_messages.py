from __future__ import annotations

import json

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from actormem.messages import (
    ImageBlock,
    MessageError,
    Msg,
    OffloadRefBlock,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    decode_msgs,
    encode_msgs,
    from_openai,
    to_openai,
    validate_msg,
)

text = st.text(max_size=200)
json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**53), 2**53), text)
json_values = st.recursive(
    json_scalars,
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=10), c, max_size=4),
    max_leaves=10,
)
blocks = st.one_of(
    st.builds(TextBlock, text),
    st.builds(
        ToolUseBlock, id=text, name=text, input=st.dictionaries(text, json_values, max_size=4)
    ),
    st.builds(ToolResultBlock, tool_use_id=text, output=text, is_error=st.booleans(), name=text),
    st.builds(ImageBlock, url=text, media_type=text),
    st.builds(
        OffloadRefBlock, offload_id=text, preview=text, original_tokens=st.integers(0, 10**6)
    ),
)
msgs = st.builds(
    Msg,
    role=st.sampled_from(["system", "user", "assistant", "tool"]),
    content=st.lists(blocks, max_size=5).map(tuple),
    name=text,
    id=st.text(min_size=1, max_size=40),
    metadata=st.dictionaries(st.text(max_size=10), json_values, max_size=4),
    created_at=st.floats(0, 4e9, allow_nan=False),
)


@given(st.lists(msgs, max_size=8))
def test_json_round_trip_keeps_every_field(items: list[Msg]) -> None:
    assert decode_msgs(encode_msgs(items)) == items
    for m in items:
        assert Msg.from_json(m.to_json()) == m


def test_constructors_and_text() -> None:
    u = Msg.user("hello", name="ada", tags=["plan"])
    assert (u.role, u.text, u.name, u.tags) == ("user", "hello", "ada", ("plan",))
    assert Msg.system("be brief").role == "system"
    a = Msg.assistant("thinking", tool_calls=[ToolUseBlock(id="c1", name="search", input={"q": 1})])
    assert a.text == "thinking" and a.tool_uses[0].name == "search"
    call = Msg.tool_call("search", {"q": "x"})
    res = Msg.tool_result(call.tool_uses[0].id, "found", name="search")
    assert res.role == "tool" and res.tool_results[0].tool_use_id == call.tool_uses[0].id
    assert res.text == "found"
    assert u.id != Msg.user("hello").id


def test_messages_are_frozen() -> None:
    m = Msg.user("x")
    with pytest.raises(AttributeError):
        m.role = "assistant"  # type: ignore[misc]


def test_decode_rejects_bad_types_with_clear_error() -> None:
    with pytest.raises(MessageError, match="role"):
        Msg.from_json(b'{"role": "robot", "content": []}')
    with pytest.raises(MessageError, match="invalid message"):
        Msg.from_json(b'{"role": "user", "content": "plain string"}')
    with pytest.raises(MessageError):
        decode_msgs(b"not json")


@pytest.mark.parametrize(
    ("bad", "needle"),
    [
        ("hello", "expected an actormem Msg"),
        (Msg(role="robot", content=()), "unknown role"),  # type: ignore[arg-type]
        (Msg(role="user", content="hi"), "content must be a tuple"),  # type: ignore[arg-type]
        (Msg(role="user", content=("hi",)), "unknown content block"),  # type: ignore[arg-type]
        (Msg(role="user", content=(TextBlock(5),)), r"content\[0\]\.text must be a str"),  # type: ignore[arg-type]
        (Msg(role="user", content=(), id=""), "id must be"),
    ],
)
def test_validate_names_the_problem(bad: object, needle: str) -> None:
    with pytest.raises(MessageError, match=needle):
        validate_msg(bad)


def test_validate_refuses_oversized() -> None:
    big = Msg.user("x" * 2000)
    assert validate_msg(big, max_bytes=10_000) is big
    with pytest.raises(MessageError, match="over the limit"):
        validate_msg(big, max_bytes=1000)


def test_openai_conversion_with_tool_calls_round_trips() -> None:
    call = Msg.assistant(
        "let me look",
        tool_calls=[
            ToolUseBlock(id="c1", name="weather", input={"city": "Oslo"}),
            ToolUseBlock(id="c2", name="time", input={}),
        ],
    )
    convo = [
        Msg.system("sys"),
        Msg.user("weather?", name="bob"),
        call,
        Msg.tool_result("c1", "rain"),
        Msg.tool_result("c2", "noon", is_error=False),
        Msg.assistant("rain at noon"),
    ]
    wire = to_openai(convo)
    assert [w["role"] for w in wire] == ["system", "user", "assistant", "tool", "tool", "assistant"]
    assert wire[1]["name"] == "bob"
    assert wire[2]["tool_calls"][0]["function"] == {
        "name": "weather",
        "arguments": '{"city": "Oslo"}',
    }
    assert wire[3] == {"role": "tool", "tool_call_id": "c1", "content": "rain"}
    json.dumps(wire)  # serialisable as is
    back = [from_openai(w) for w in wire]
    assert [m.role for m in back] == [m.role for m in convo]
    assert back[2].tool_uses == call.tool_uses
    assert back[2].text == "let me look"
    assert back[3].tool_results[0].tool_use_id == "c1"


def test_openai_tool_call_only_has_empty_string_content_and_offload_is_explained() -> None:
    wire = to_openai([Msg.tool_call("f", {"a": 1}, call_id="x")])
    assert wire[0]["content"] == ""  # never null: llama.cpp's server rejects that
    off = Msg(role="user", content=(OffloadRefBlock(offload_id="off1", preview="big log"),))
    assert "context_reload" in to_openai([off])[0]["content"]


@pytest.mark.parametrize(
    ("item", "needle"),
    [
        ({"role": "robot", "content": "x"}, "unknown role"),
        ({"role": "tool", "content": "x"}, "tool_call_id"),
        (
            {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{"}}]},
            "malformed",
        ),
        ({"role": "user", "content": 5}, "content must be"),
        ("nope", "must be an object"),
    ],
)
def test_from_openai_errors(item: object, needle: str) -> None:
    with pytest.raises(MessageError, match=needle):
        from_openai(item)  # type: ignore[arg-type]


def test_from_openai_response_message_with_tool_calls() -> None:
    m = from_openai(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_9",
                    "type": "function",
                    "function": {"name": "add", "arguments": '{"a": 2}'},
                }
            ],
        }
    )
    assert m.tool_uses == (ToolUseBlock(id="call_9", name="add", input={"a": 2}),)
    assert msgspec.json.decode(m.to_json())["content"][0]["type"] == "tool_use"


def test_to_openai_never_drops_content() -> None:
    mixed = Msg(
        role="tool", content=(ToolResultBlock(tool_use_id="c", output="42"), TextBlock("note"))
    )
    assert to_openai([mixed]) == [{"role": "tool", "tool_call_id": "c", "content": "42\nnote"}]
    user = Msg(
        role="user", content=(ToolResultBlock(tool_use_id="c", output="r"), TextBlock("and?"))
    )
    assert [w["role"] for w in to_openai([user])] == ["tool", "user"]
    with pytest.raises(MessageError, match="no tool_result"):
        to_openai([Msg(role="tool", content=(TextBlock("orphan"),))])
    with pytest.raises(MessageError, match="malformed"):
        from_openai({"role": "assistant", "tool_calls": [{"id": "x", "function": "f"}]})


def test_new_ids_are_unique_uuid4_hex_also_in_a_forked_child() -> None:
    import os
    import uuid

    from actormem.messages import new_id

    ids = [new_id() for _ in range(10_000)]
    assert len(set(ids)) == len(ids)
    assert all(len(i) == 32 and uuid.UUID(i).version == 4 for i in ids[:100])
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child's next ids must not repeat the parent's
        os.write(write, " ".join(new_id() for _ in range(100)).encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    with os.fdopen(read) as fh:
        child = fh.read().split()
    parent = [new_id() for _ in range(100)]
    assert len(child) == 100 and not set(child) & set(parent)

"""Tests for actormem.agent.tools: schemas from signatures, validation, the registry."""

from __future__ import annotations

import asyncio
import enum
import json
import threading
from typing import Annotated, Any, Literal, TypedDict

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from structlog.testing import capture_logs

from actormem.agent.tools import Tool, ToolError, ToolRegistry, parse_docstring, tool
from actormem.messages import Msg, ToolUseBlock


class Point(msgspec.Struct):
    """A point on the plane."""

    x: int
    y: int = 0


class Filters(TypedDict):
    tag: str
    min_score: float


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Node(msgspec.Struct):
    value: int
    children: list[Node] = []


class Opaque:
    """Not something msgspec knows."""

    def __str__(self) -> str:
        return "<opaque>"


@tool
def search(
    query: str,
    limit: int = 5,
    mode: Literal["fast", "deep"] = "fast",
    tags: list[str] | None = None,
    exact: bool = False,
) -> list[dict[str, Any]]:
    """Search the long-term memory.

    Returns the best matches first. This second paragraph is not part of
    the description.

    Args:
        query: what to look for; may span
            two lines in the docstring.
        limit (int): how many results to return.
        mode: ``fast`` uses keywords, ``deep`` uses vectors.

    Returns:
        The matches.
    """
    return [{"query": query, "limit": limit, "mode": mode, "tags": tags, "exact": exact}]


def test_spec_has_openai_function_shape() -> None:
    spec = search.spec()
    assert spec["type"] == "function"
    fn = spec["function"]
    assert fn["name"] == "search"
    assert fn["description"] == "Search the long-term memory."
    params = fn["parameters"]
    assert params["type"] == "object"
    assert params["required"] == ["query"]
    assert params["additionalProperties"] is False
    props = params["properties"]
    assert props["query"] == {
        "type": "string",
        "description": "what to look for; may span two lines in the docstring.",
    }
    assert props["limit"] == {
        "type": "integer",
        "description": "how many results to return.",
        "default": 5,
    }
    assert props["mode"]["enum"] == ["deep", "fast"]
    assert props["mode"]["type"] == "string"
    assert props["mode"]["default"] == "fast"
    assert props["tags"]["anyOf"] == [
        {"type": "array", "items": {"type": "string"}},
        {"type": "null"},
    ]
    assert props["exact"] == {"type": "boolean", "default": False}
    json.dumps(spec)  # plain JSON, ready to send


def test_types_without_defaults_are_required_and_floats_dicts_any() -> None:
    def f(a: float, b: dict[str, int], c: Any, d: dict, e: int | None = None) -> None:  # type: ignore[type-arg]
        """F."""

    params = Tool.from_function(f).parameters
    assert params["required"] == ["a", "b", "c", "d"]
    assert params["properties"]["a"] == {"type": "number"}
    assert params["properties"]["b"] == {
        "type": "object",
        "additionalProperties": {"type": "integer"},
    }
    assert params["properties"]["c"] == {}
    assert params["properties"]["d"] == {"type": "object"}
    assert params["properties"]["e"]["anyOf"] == [{"type": "integer"}, {"type": "null"}]


def test_structs_typeddicts_enums_and_constraints_are_inlined() -> None:
    def place(
        p: Point,
        f: Filters,
        color: Color,
        n: Annotated[int, msgspec.Meta(ge=1, le=10, description="how many")] = 1,
    ) -> str:
        """Place a point."""
        return f"{p.x},{p.y} {f['tag']} {color.value} x{n}"

    t = Tool.from_function(place)
    text = json.dumps(t.parameters)
    assert "$ref" not in text and "$defs" not in text
    p = t.parameters["properties"]["p"]
    assert p["type"] == "object" and p["required"] == ["x"]
    assert p["description"] == "A point on the plane."
    assert t.parameters["properties"]["f"]["required"] == ["min_score", "tag"]
    assert t.parameters["properties"]["color"]["enum"] == ["blue", "red"]
    n = t.parameters["properties"]["n"]
    assert (n["minimum"], n["maximum"], n["description"]) == (1, 10, "how many")
    args = {"p": {"x": 3}, "f": {"tag": "a", "min_score": 0.5}, "color": "red", "n": 2}
    assert t.call(args) == "3,0 a red x2"
    with pytest.raises(ToolError, match=r"Expected `int` <= 10 - at `\$.n`"):
        t.call({**args, "n": 11})


def test_recursive_struct_does_not_loop() -> None:
    def walk(root: Node) -> int:
        """Walk."""
        return root.value

    t = Tool.from_function(walk)
    assert "$ref" not in json.dumps(t.parameters)
    assert t.call({"root": {"value": 1, "children": [{"value": 2}]}}) == "1"


def test_call_validates_and_converts_result_to_text() -> None:
    out = json.loads(search.call({"query": "cats", "limit": "3"}))  # lax: "3" -> 3
    assert out == [{"query": "cats", "limit": 3, "mode": "fast", "tags": None, "exact": False}]
    assert search(query="dogs")[0]["limit"] == 5  # still callable as a function


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({}, "missing required field `query`"),
        ({"query": 1}, r"Expected `str`, got `int` - at `\$.query`"),
        ({"query": "x", "limit": "many"}, r"Expected `int`, got `str` - at `\$.limit`"),
        ({"query": "x", "mode": "slow"}, r"Invalid enum value 'slow' - at `\$.mode`"),
        ({"query": "x", "colour": "red"}, "unknown field `colour`"),
        (["x"], "expected a JSON object, got list"),
    ],
)
def test_bad_arguments_raise_tool_error_naming_the_problem(arguments: Any, message: str) -> None:
    with pytest.raises(ToolError, match=message) as info:
        search.call(arguments)
    assert "'search'" in str(info.value)


def test_return_values_become_text() -> None:
    def give(kind: str) -> Any:
        """Give."""
        return {
            "s": "plain",
            "n": 42,
            "none": None,
            "struct": Point(1, 2),
            "odd": {"obj": Opaque()},
        }[kind]

    t = Tool.from_function(give)
    assert t.call({"kind": "s"}) == "plain"
    assert t.call({"kind": "n"}) == "42"
    assert t.call({"kind": "none"}) == "null"
    assert json.loads(t.call({"kind": "struct"})) == {"x": 1, "y": 2}
    assert t.call({"kind": "odd"}) == '{"obj":"<opaque>"}'  # unknown objects: str()


def test_async_tools_sync_and_async_calls() -> None:
    @tool
    async def double(x: int) -> int:
        """Double it."""
        await asyncio.sleep(0)
        return x * 2

    assert double.call({"x": 2}) == "4"
    assert asyncio.run(double.acall({"x": 3})) == "6"

    async def sync_call_inside_loop() -> str:
        return double.call({"x": 5})  # runs on a private loop, does not crash

    assert asyncio.run(sync_call_inside_loop()) == "10"


def test_acall_runs_sync_tools_off_the_event_loop() -> None:
    seen: list[int | None] = []

    def where() -> str:
        """Where."""
        seen.append(threading.get_ident())
        return "ok"

    async def main() -> str:
        seen.append(threading.get_ident())
        return await Tool.from_function(where).acall({})

    assert asyncio.run(main()) == "ok"
    assert seen[0] != seen[1]


def test_decorator_with_options_and_names() -> None:
    @tool(name="get-weather", description="Weather for a city.")
    def weather(city: str) -> str:
        return f"sunny in {city}"

    assert weather.name == "get-weather"
    assert weather.spec()["function"]["description"] == "Weather for a city."
    undocumented = Tool.from_function(lambda: 1, name="one")
    assert undocumented.description == ""
    assert "required" not in undocumented.parameters
    with pytest.raises(ToolError, match="invalid tool name '<lambda>'"):
        Tool.from_function(lambda: 1)
    with pytest.raises(ToolError, match="invalid tool name 'has space'"):
        Tool.from_function(weather.fn, name="has space")


def test_positional_only_var_args_and_kwargs() -> None:
    def f(a: int, b: int = 10, /, *rest: int, c: int = 0, **extra: Any) -> str:
        """F."""
        return f"{a} {b} {rest} {c} {sorted(extra.items())}"

    t = Tool.from_function(f)
    assert "additionalProperties" not in t.parameters
    assert set(t.parameters["properties"]) == {"a", "b", "c"}
    assert t.call({"a": 1, "c": 2, "z": "extra"}) == "1 10 () 2 [('z', 'extra')]"


def test_unsupported_annotation_is_a_clear_definition_error() -> None:
    def f(x: Opaque) -> None:
        """F."""

    with pytest.raises(ToolError, match="tool 'f': unsupported parameter type"):
        Tool.from_function(f)


def test_unresolvable_forward_reference_is_a_clear_error() -> None:
    def f(x: NotDefinedAnywhere) -> None:  # type: ignore[name-defined]  # noqa: F821
        """F."""

    with pytest.raises(ToolError, match="cannot resolve the type hints"):
        Tool.from_function(f)


def test_manual_tool_with_hand_written_schema_still_validates() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    t = Tool(name="inc", description="Increment.", parameters=schema, fn=lambda n: n + 1)
    assert t.spec()["function"]["parameters"] is schema
    assert t.call({"n": 1}) == "2"
    with pytest.raises(ToolError):
        t.call({"m": 1})
    with pytest.raises(ToolError, match="fn must be callable"):
        Tool(name="x", description="", parameters={}, fn=42)  # type: ignore[arg-type]


def test_parse_docstring_sections() -> None:
    doc = """Summary line
    continues here.

    Body.

    Arguments:
        a (int): first.
        b: second,
            continued.
        *args: ignored.

    Raises:
        ValueError: not an argument.
    """
    summary, params = parse_docstring(doc)
    assert summary == "Summary line continues here."
    assert params == {"a": "first.", "b": "second, continued.", "args": "ignored."}
    assert parse_docstring(None) == ("", {})
    assert parse_docstring("Do it.\n\n    Args:\n        x: only.\n    ") == (
        "Do it.",
        {"x": "only."},
    )


@given(st.integers(), st.text())
def test_round_trip_of_arguments_property(n: int, s: str) -> None:
    @tool
    def echo(n: int, s: str) -> dict[str, Any]:
        """Echo."""
        return {"n": n, "s": s}

    wire = json.loads(json.dumps({"n": n, "s": s}))
    assert json.loads(echo.call(wire)) == {"n": n, "s": s}


# -- registry ------------------------------------------------------------------------


def boom(x: int) -> str:
    """Always fails."""
    raise ValueError(f"cannot handle {x}")


def test_registry_add_get_specs() -> None:
    reg = ToolRegistry([search, boom])
    assert reg.names() == ["search", "boom"]
    assert len(reg) == 2 and "boom" in reg and "nope" not in reg
    assert [s["function"]["name"] for s in reg.specs()] == ["search", "boom"]
    assert reg.get("boom").fn is boom
    assert [t.name for t in reg] == ["search", "boom"]
    with pytest.raises(ToolError, match="already registered"):
        reg.add(boom)
    reg.add(Tool.from_function(boom, description="new"), replace=True)
    assert reg.get("boom").description == "new"
    with pytest.raises(ToolError, match=r"unknown tool 'nope' \(available: boom, search\)"):
        reg.get("nope")
    reg.remove("boom")
    assert reg.names() == ["search"]
    assert "search" in repr(reg)


def test_execute_success_is_paired_tool_result() -> None:
    reg = ToolRegistry([search])
    call = ToolUseBlock(id="call_1", name="search", input={"query": "q"})
    result = reg.execute(call)
    assert result.role == "tool"
    (block,) = result.tool_results
    assert block.tool_use_id == "call_1" and block.name == "search" and not block.is_error
    assert json.loads(block.output)[0]["query"] == "q"


@pytest.mark.parametrize(
    ("call", "text", "error_type"),
    [
        (ToolUseBlock(id="c", name="nope"), "Error: unknown tool 'nope'", "ToolError"),
        (
            ToolUseBlock(id="c", name="boom", input={"x": "y"}),
            "Error: invalid arguments for tool 'boom': Expected `int`",
            "ToolError",
        ),
        (
            ToolUseBlock(id="c", name="boom", input={"x": 7}),
            "Error: tool 'boom' failed: ValueError: cannot handle 7",
            "ValueError",
        ),
    ],
)
def test_execute_failures_become_error_results(
    call: ToolUseBlock, text: str, error_type: str
) -> None:
    reg = ToolRegistry([boom])
    with capture_logs() as logs:
        result = reg.execute(call)
    (block,) = result.tool_results
    assert block.is_error and block.tool_use_id == "c"
    assert block.output.startswith(text)
    assert result.metadata["error"]["type"] == error_type
    if error_type == "ValueError":
        assert "cannot handle 7" in result.metadata["error"]["traceback"]
    assert logs[0]["event"] == "tool_failed" and logs[0]["log_level"] == "warning"
    Msg.from_json(result.to_json())  # the error metadata is JSON-serialisable


def test_aexecute_and_execute_all() -> None:
    @tool
    async def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    reg = ToolRegistry([add, boom])
    reply = Msg.assistant(
        "two calls",
        tool_calls=[
            ToolUseBlock(id="1", name="add", input={"a": 1, "b": 2}),
            ToolUseBlock(id="2", name="boom", input={"x": 1}),
        ],
    )
    results = asyncio.run(reg.aexecute_all(reply))
    assert [r.tool_results[0].tool_use_id for r in results] == ["1", "2"]
    assert results[0].text == "3" and not results[0].tool_results[0].is_error
    assert results[1].tool_results[0].is_error
    sync_results = reg.execute_all(reply)
    assert [r.tool_results[0].is_error for r in sync_results] == [False, True]


def test_base_exceptions_are_not_swallowed() -> None:
    def interrupt() -> str:
        """Stop."""
        raise KeyboardInterrupt

    reg = ToolRegistry([interrupt])
    with pytest.raises(KeyboardInterrupt):
        reg.execute(ToolUseBlock(id="1", name="interrupt"))

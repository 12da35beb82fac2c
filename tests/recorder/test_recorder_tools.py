from __future__ import annotations

from typing import Any

import pytest

from actormem.recorder import (
    UnknownToolError,
    parse_record_args,
    parse_retrieve_args,
    record_to_memory_tool,
    render_recorded,
    render_retrieved,
    retrieve_from_memory_tool,
)
from actormem.store import WriteResult


def test_specs_are_function_calling_definitions() -> None:
    rec, ret = record_to_memory_tool(), retrieve_from_memory_tool()
    assert rec["type"] == ret["type"] == "function"
    assert rec["function"]["name"] == "record_to_memory"
    assert rec["function"]["parameters"]["required"] == ["thinking", "content"]
    assert rec["function"]["parameters"]["properties"]["content"]["type"] == "array"
    assert ret["function"]["name"] == "retrieve_from_memory"
    assert ret["function"]["parameters"]["properties"]["limit"]["default"] == 5


def test_parse_record_args() -> None:
    assert parse_record_args({"thinking": " why ", "content": [" a ", "", "b"]}) == (
        "why",
        ["a", "b"],
    )
    assert parse_record_args({"content": "single"}) == ("", ["single"])


def test_parse_retrieve_args() -> None:
    assert parse_retrieve_args({"keywords": ["tea"]}) == (["tea"], 5)
    assert parse_retrieve_args({"keywords": ["tea"], "limit": 3.0}) == (["tea"], 3)


@pytest.mark.parametrize(
    ("fn", "args", "message"),
    [
        (parse_record_args, {"thinking": "x"}, "missing required argument.*'content'"),
        (parse_record_args, {"content": ["a"], "extra": 1}, "unknown argument.*'extra'"),
        (parse_record_args, {"content": [1]}, r"content\[0\] must be a string"),
        (parse_record_args, {"content": ["", " "]}, "at least one non-empty"),
        (parse_record_args, {"content": 5}, "must be a list of strings"),
        (parse_record_args, {"content": ["a"], "thinking": 3}, "'thinking' must be a string"),
        (parse_record_args, {"content": ["a"] * 51}, "the limit is 50"),
        (parse_record_args, "x", "arguments must be a JSON object"),
        (parse_retrieve_args, {}, "'keywords'"),
        (parse_retrieve_args, {"keywords": ["a"], "limit": 0}, "'limit' must be an integer"),
        (parse_retrieve_args, {"keywords": ["a"], "limit": True}, "'limit'"),
    ],
)
def test_bad_arguments_are_named(fn: Any, args: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        fn(args)


def test_rendering_and_unknown_tool_error() -> None:
    results = [WriteResult(id="1", op="ADD"), WriteResult(id="2", op="MERGE")]
    text = render_recorded(["a", "b"], results)
    assert text.startswith("Recorded 2 item(s) to long-term memory (1 new, 1 already known)")
    assert render_retrieved(["x", "y"], []) == "No long-term memories match: x, y."
    assert str(UnknownToolError("unknown tool 'z'")) == "unknown tool 'z'"
    assert isinstance(UnknownToolError("z"), KeyError)

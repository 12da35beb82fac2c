"""AutoContextConfig: defaults, validation, presets, prompts."""

from __future__ import annotations

from typing import Any

import pytest

from actormem.compress import DEFAULT_PROMPTS, AutoContextConfig, EstimateTokenCounter


def test_defaults_follow_agentscope() -> None:
    c = AutoContextConfig()
    assert (c.msg_threshold, c.max_token, c.token_ratio, c.last_keep) == (100, 131072, 0.75, 50)
    assert (c.large_payload_threshold, c.offload_preview) == (5120, 200)
    assert (c.min_consecutive_tool_messages, c.current_round_ratio) == (6, 0.3)
    assert c.min_compression_tokens == 5000
    assert c.token_budget == 98304
    assert isinstance(c.token_counter, EstimateTokenCounter)
    assert c.model_timeout == 30.0


@pytest.mark.parametrize(
    ("field", "value", "error", "match"),
    [
        ("msg_threshold", 1, ValueError, "msg_threshold must be >= 2"),
        ("msg_threshold", "100", TypeError, "msg_threshold must be an int"),
        ("max_token", True, TypeError, "max_token must be an int"),
        ("token_ratio", 0.0, ValueError, r"token_ratio must be in \(0, 1\]"),
        ("token_ratio", 1.5, ValueError, "token_ratio"),
        ("current_round_ratio", float("nan"), ValueError, "current_round_ratio"),
        ("last_keep", -1, ValueError, "last_keep must be >= 0"),
        ("last_keep", 100, ValueError, "last_keep .100. must be smaller than msg_threshold"),
        ("offload_preview", 6000, ValueError, "offload_preview"),
        ("min_consecutive_tool_messages", 1, ValueError, "min_consecutive_tool_messages"),
        ("prompts", {"nope": "x"}, ValueError, "unknown strategy names"),
        ("prompts", {"tool_runs": "  "}, ValueError, "non-empty"),
        ("prompts", ["x"], TypeError, "mapping"),
        ("protect_roles", "system", TypeError, "not a single string"),
        ("protect_tags", [1], TypeError, "must hold strings"),
        ("protect", 3, TypeError, "protect must be callable"),
        ("model_timeout", 0, ValueError, "model_timeout must be > 0"),
        ("model_timeout", "1", TypeError, "model_timeout must be a number"),
        ("token_counter", object(), TypeError, "token_counter must have count"),
    ],
)
def test_validation_names_the_field(field: str, value: Any, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        AutoContextConfig(**{field: value})


def test_frozen_and_replace_validates() -> None:
    c = AutoContextConfig(protect_roles=["system"], prompts={"tool_runs": "Custom."})
    assert c.protect_roles == frozenset({"system"})
    with pytest.raises(AttributeError):
        c.last_keep = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        c.prompts["tool_runs"] = "x"  # type: ignore[index]
    assert c.prompt_for("tool_runs") == "Custom."
    assert c.prompt_for("summarize_rounds") == DEFAULT_PROMPTS["summarize_rounds"]
    d = c.replace(last_keep=10)
    assert d.last_keep == 10 and c.last_keep == 50
    with pytest.raises(ValueError):
        c.replace(last_keep=500)


def test_default_prompts_ask_for_third_person_facts() -> None:
    for text in DEFAULT_PROMPTS.values():
        low = text.lower()
        assert "third person" in low and "first person" in low
        for word in ("name", "number", "date", "decision", "error", "open task"):
            assert word in low


def test_for_window_small_model() -> None:
    c = AutoContextConfig.for_window(8192)
    assert c.max_token == 8192
    assert c.token_budget == 6144
    assert c.last_keep < c.msg_threshold <= 100
    assert c.large_payload_threshold <= 2048
    assert c.summary_max_tokens <= 8192 // 8
    assert c.min_compression_tokens < c.token_budget
    big = AutoContextConfig.for_window(131072)
    assert (big.msg_threshold, big.last_keep, big.large_payload_threshold) == (100, 50, 5120)
    assert AutoContextConfig.for_window(8192, last_keep=4).last_keep == 4
    with pytest.raises(ValueError, match="at least 1024"):
        AutoContextConfig.for_window(100)


def test_a_small_threshold_alone_derives_last_keep() -> None:
    cfg = AutoContextConfig(msg_threshold=8)
    assert cfg.last_keep == 4 and cfg.keep_last == 4
    assert AutoContextConfig().last_keep == 50  # the default is unchanged
    assert AutoContextConfig(msg_threshold=2).last_keep == 1
    # A derived value follows the threshold through replace(); an explicit one stays.
    assert AutoContextConfig().replace(msg_threshold=10).last_keep == 5
    assert AutoContextConfig(last_keep=3).replace(msg_threshold=10).last_keep == 3
    with pytest.raises(ValueError, match=r"last_keep \(8\) must be smaller than msg_threshold"):
        AutoContextConfig(msg_threshold=8, last_keep=8)

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


def test_summaries_fill_a_bigger_share_by_default_but_never_the_budget() -> None:
    c = AutoContextConfig()
    # 0.4 / 12,288 keeps >= 80% of the LoCoMo dev answers in every conversation (README).
    assert (c.summary_ratio, c.summary_max_tokens) == (0.4, 12288)
    assert c.summary_cap == 12288 <= c.token_budget // 4
    small = AutoContextConfig(max_token=1024, msg_threshold=20)
    assert small.summary_max_tokens == 12288 and small.summary_cap == 768 // 4
    assert AutoContextConfig.for_window(8192).summary_cap <= 6144 // 4


def test_a_small_window_with_the_default_summary_size_compresses_within_budget() -> None:
    """``max_token=1024`` with ``summary_max_tokens`` 12,288: a summary stays at a quarter of 768.

    Without the cap the summary of these 76 messages took 726 of the 768
    tokens and the pass ended over budget.
    """
    from actormem.compress import ExtractiveSummarizer, compress
    from actormem.messages import Msg

    plants = ["tomatoes", "fennel", "leeks", "chard", "beans", "kale", "garlic", "pumpkins"]
    plants += ["basil", "radishes", "peas", "onions"]
    people = ["Marek", "Ines", "Tobias", "Wren", "Ottilie", "Samir", "Greta", "Kofi", "Lucia"]
    people += ["Anselm", "Mirela", "Jonas"]
    tools = ["spade", "hoe", "rake", "trowel", "wheelbarrow", "shears"]
    counter = EstimateTokenCounter()
    config = AutoContextConfig(max_token=1024, msg_threshold=60, last_keep=4)
    msgs = [Msg.system("You help Ana plan the garden.")]
    for i in range(40):
        plant = plants[i % 12] + ("" if i < 12 else str(i))
        who, tool = people[(i * 5) % 12], tools[i % 6]
        msgs.append(
            Msg.user(
                f"{who} will sow {plant} in bed {i + 1} on day {i + 3} and borrows the "
                f"{tool} from shed {40 + i}.",
                name="Ana",
            )
        )
        msgs.append(Msg.assistant(f"Bed {i + 1} then holds {plant}; {who} returns the {tool}."))
    assert counter.count_msgs(msgs) > 2 * config.token_budget
    out = compress(msgs, config, ExtractiveSummarizer(counter), counter)
    assert out.triggered and out.within_budget, out.reason
    assert out.tokens_after <= config.token_budget
    summaries = [m for m in out.apply(msgs) if m.metadata.get("actormem") == "summary"]
    assert summaries
    for m in summaries:  # the lines after the header (which names the offload and how to reload)
        assert counter.count(m.text.split("\n", 1)[1]) <= config.summary_cap

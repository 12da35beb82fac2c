"""Invariants of :func:`compress` on random conversations (hypothesis)."""

from __future__ import annotations

import os
from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem.compress import (
    AutoContextConfig,
    CompressionOutcome,
    EstimateTokenCounter,
    ExtractiveSummarizer,
    compress,
)
from actormem.messages import Msg, ToolResultBlock, ToolUseBlock

COUNTER = EstimateTokenCounter()
SUMM = ExtractiveSummarizer(COUNTER)
EXAMPLES = int(os.environ.get("COMPRESS_EXAMPLES", "150"))
TIER_B = {"offload_recent", "summarize_large_current", "compress_current_round"}
WORDS = ["Ana", "paid", "42", "EUR", "on", "2024-05-01", "the", "build", "failed", "we", "decided"]


@st.composite
def texts(draw: Any) -> str:
    n = draw(st.sampled_from([1, 3, 12, 200, 900]))
    start = draw(st.integers(0, len(WORDS) - 1))
    return " ".join(WORDS[(start + i) % len(WORDS)] for i in range(n)) + "."


@st.composite
def conversations(draw: Any) -> list[Msg]:
    counter = 0
    msgs: list[Msg] = [Msg.system(f"system {i}") for i in range(draw(st.integers(0, 2)))]
    for _ in range(draw(st.integers(1, 14))):
        kind = draw(st.sampled_from(["user", "assistant", "tools", "tools", "system"]))
        tags = ["protected"] if draw(st.integers(0, 9)) == 0 else []
        if kind == "user":
            msgs.append(Msg.user(draw(texts()), tags=tags))
        elif kind == "assistant":
            msgs.append(Msg.assistant(draw(texts()), tags=tags))
        elif kind == "system":
            msgs.append(Msg.system(draw(texts())))
        else:
            for _ in range(draw(st.integers(1, 5))):
                n_calls = draw(st.integers(1, 3))
                calls = []
                for _ in range(n_calls):
                    counter += 1
                    name = draw(st.sampled_from(["search", "read", "plan"]))
                    calls.append(ToolUseBlock(id=f"call{counter}", name=name, input={"q": "x"}))
                msgs.append(
                    Msg.assistant(draw(st.sampled_from(["", "let me look"])), tool_calls=calls)
                )
                results = [
                    Msg.tool_result(c.id, draw(texts()), is_error=draw(st.booleans()), tags=tags)
                    for c in calls
                ]
                if draw(st.booleans()):  # sometimes a user message slips between call and result
                    msgs.append(Msg.user(draw(texts())))
                msgs += results
    if draw(st.booleans()):  # a call still waiting for its result
        counter += 1
        msgs.append(Msg.tool_call("slow", call_id=f"call{counter}"))
    return msgs


@st.composite
def configs(draw: Any) -> AutoContextConfig:
    last_keep = draw(st.integers(0, 8))
    threshold = draw(st.integers(max(2, last_keep + 1), 40))
    large = draw(st.sampled_from([64, 300, 2000]))
    return AutoContextConfig(
        msg_threshold=threshold,
        last_keep=last_keep,
        max_token=draw(st.sampled_from([256, 1024, 4096, 20000])),
        token_ratio=draw(st.sampled_from([0.3, 0.75, 1.0])),
        large_payload_threshold=large,
        offload_preview=draw(st.integers(0, large - 1)),
        min_consecutive_tool_messages=draw(st.integers(2, 6)),
        min_compression_tokens=draw(st.sampled_from([0, 200, 5000])),
        summary_max_tokens=draw(st.sampled_from([16, 64, 400])),
        protect_tools=draw(st.sampled_from([frozenset(), frozenset({"plan"})])),
    )


def _pairs(msgs: list[Msg]) -> tuple[dict[str, int], dict[str, list[int]]]:
    uses: dict[str, int] = {}
    results: dict[str, list[int]] = {}
    for i, m in enumerate(msgs):
        for b in m.content:
            if isinstance(b, ToolUseBlock):
                uses[b.id] = i
            elif isinstance(b, ToolResultBlock):
                results.setdefault(b.tool_use_id, []).append(i)
    return uses, results


def check(msgs: list[Msg], config: AutoContextConfig, out: CompressionOutcome) -> list[Msg]:
    final = out.apply(msgs)
    assert len(final) == out.messages_after
    # the outcome is a prefix replacement: the untouched tail is the same objects
    tail = msgs[out.count :]
    assert all(a is b for a, b in zip(final[len(out.replacement) :], tail, strict=True))
    # leading system messages are kept verbatim
    head = 0
    while head < len(msgs) and msgs[head].role == "system":
        assert final[head] is msgs[head]
        head += 1
    # protected messages survive as the same objects, in order
    from actormem.compress import is_protected

    names = {b.id: b.name for m in msgs for b in m.content if isinstance(b, ToolUseBlock)}
    kept = [m for m in msgs if is_protected(m, config, names)]
    final_ids = {id(m) for m in final}
    assert all(id(m) in final_ids for m in kept)
    # tool pairs: never separated, never orphaned
    uses0, results0 = _pairs(msgs)
    uses1, results1 = _pairs(final)
    for call_id in uses0:
        if call_id in results0:  # answered: both present or both gone
            assert (call_id in uses1) == (call_id in results1), call_id
            if call_id in uses1:
                assert len(results1[call_id]) == len(results0[call_id])
        else:  # pending: the call stays
            assert call_id in uses1, f"pending call {call_id} was removed"
    for call_id in results1:
        if call_id in uses0:
            assert call_id in uses1
    # last_keep verbatim unless the token budget forced strategies 3, 5 or 6
    keep = min(config.last_keep, len(msgs) - head)
    if keep and not any(a.strategy in TIER_B for a in out.applied):
        assert all(a is b for a, b in zip(final[-keep:], msgs[-keep:], strict=True))
    for a in out.applied:
        if a.strategy in TIER_B:
            assert a.tokens_before >= config.token_budget
        assert a.tokens_after < a.tokens_before or a.messages_replaced > 0
    # accounting and budget
    assert out.tokens_after == COUNTER.count_msgs(final)
    within = len(final) < config.msg_threshold and out.tokens_after < config.token_budget
    assert out.within_budget == within or not out.triggered
    return final


@settings(max_examples=EXAMPLES, deadline=None)
@given(conversations(), configs())
def test_compress_invariants(msgs: list[Msg], config: AutoContextConfig) -> None:
    out = compress(msgs, config, SUMM, COUNTER, max_steps=500)
    final = check(msgs, config, out)
    if out.triggered and not out.within_budget:
        # never over budget when a strategy could still apply: the result is a fixpoint
        again = compress(final, config, SUMM, COUNTER, max_steps=500)
        assert not again.applied, (out.reason, [a.strategy for a in again.applied])
        assert "no strategy can change anything more" in out.reason


@settings(max_examples=max(20, EXAMPLES // 4), deadline=None)
@given(conversations(), configs())
def test_compress_is_deterministic(msgs: list[Msg], config: AutoContextConfig) -> None:
    a = compress(msgs, config, SUMM, EstimateTokenCounter())
    b = compress(msgs, config, ExtractiveSummarizer(), EstimateTokenCounter())
    enc = msgspec.json.encode
    assert a.count == b.count
    assert enc(a.replacement) == enc(b.replacement)
    assert {k: enc(v) for k, v in a.offloads.items()} == {k: enc(v) for k, v in b.offloads.items()}
    assert [x.strategy for x in a.applied] == [x.strategy for x in b.applied]

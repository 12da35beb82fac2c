"""Each strategy on its own, then the driver."""

from __future__ import annotations

from actormem.compress import (
    OFFLOADED,
    SUMMARIZED,
    SUMMARY,
    AutoContextConfig,
    EstimateTokenCounter,
    ExtractiveSummarizer,
    compress,
    compress_current_round,
    is_protected,
    needs_compression,
    offload_old,
    offload_recent,
    summarize_large_current,
    summarize_rounds,
    tool_runs,
)
from actormem.messages import Msg, OffloadRefBlock, ToolResultBlock, ToolUseBlock


def tool_pair(name: str, output: str, *, call_id: str, **args: object) -> list[Msg]:
    """An assistant tool call and its result."""
    call = Msg.tool_call(name, dict(args), call_id=call_id)
    return [call, Msg.tool_result(call_id, output, name=name)]


def conversation(rounds: int, *, tools_per_round: int = 0, big: int = 0) -> list[Msg]:
    """A system prompt, then ``rounds`` of user question, tool calls and answer."""
    msgs = [Msg.system("You are a careful assistant.")]
    for r in range(rounds):
        msgs.append(Msg.user(f"Round {r}: please check ticket T-{100 + r} for Dana Smith."))
        for k in range(tools_per_round):
            out = "x" * big if big else f"ticket T-{100 + r} status open, step {k}"
            msgs += tool_pair("lookup", out, call_id=f"c{r}_{k}", ticket=f"T-{100 + r}")
        msgs.append(
            Msg.assistant(f"Ticket T-{100 + r} is open; Dana Smith owns it since May {r % 28 + 1}.")
        )
    return msgs


COUNTER = EstimateTokenCounter()
SUMM = ExtractiveSummarizer(COUNTER)


def cfg(**kw: object) -> AutoContextConfig:
    base: dict[str, object] = {
        "msg_threshold": 20,
        "last_keep": 4,
        "large_payload_threshold": 500,
        "offload_preview": 60,
        "min_consecutive_tool_messages": 6,
        "min_compression_tokens": 0,
    }
    base.update(kw)
    return AutoContextConfig(**base)  # type: ignore[arg-type]


def ids(msgs: list[Msg] | tuple[Msg, ...]) -> list[str]:
    return [m.id for m in msgs]


# -- 1. tool runs ---------------------------------------------------------------


def test_tool_runs_summarizes_long_old_runs_and_offloads_originals() -> None:
    msgs = conversation(3, tools_per_round=4)  # runs of 8 tool messages
    res = tool_runs(msgs, cfg(), SUMM, COUNTER)
    assert res is not None and res.strategy == "tool_runs"
    summaries = [m for m in res.messages if m.metadata.get("actormem") == SUMMARY]
    # the last round's run reaches into last_keep and is shrunk below 6 messages -> left alone
    assert len(summaries) == 2
    for s in summaries:
        oid = s.metadata["offload_id"]
        assert len(res.offloads[oid]) == 8
        assert all(m.tool_uses or m.tool_results for m in res.offloads[oid])
        assert s.text.startswith("Summary of 8 earlier tool-call messages")
        assert oid in s.text and "context_reload" in s.text
        assert not s.tool_uses and not s.tool_results
    assert res.replaced == 16
    assert res.tokens_after < res.tokens_before
    assert res.tokens_after == COUNTER.count_msgs(res.messages)
    assert list(res.messages[-4:]) == msgs[-4:]


def test_tool_runs_ignores_short_and_protected_runs() -> None:
    msgs = conversation(3, tools_per_round=2)  # runs of 4 < 6
    assert tool_runs(msgs, cfg(), SUMM, COUNTER) is None
    msgs = conversation(3, tools_per_round=4)
    assert tool_runs(msgs, cfg(protect_tools={"lookup"}), SUMM, COUNTER) is None


def test_tool_runs_never_splits_a_pair() -> None:
    # An old run whose last call is answered only after last_keep starts.
    msgs = [Msg.user("go")]
    for k in range(4):
        msgs += tool_pair("ls", f"out {k}", call_id=f"a{k}")
    call = Msg.tool_call("ls", call_id="late")
    msgs += [call, Msg.assistant("thinking"), Msg.user("more"), Msg.tool_result("late", "x")]
    msgs += [Msg.assistant("done")] * 2
    res = tool_runs(msgs, cfg(last_keep=3), SUMM, COUNTER)
    assert res is not None
    kept_calls = {b.id for m in res.messages for b in m.content if isinstance(b, ToolUseBlock)}
    assert kept_calls == {"late"}


# -- 2. and 3. offloading ---------------------------------------------------------


def test_offload_old_leaves_preview_and_reference() -> None:
    msgs = [
        Msg.system("sys"),
        Msg.user("B" * 2000),
        *tool_pair("cat", "line\n" * 400, call_id="c1"),
    ]
    msgs += [Msg.assistant("ok")] * 4
    res = offload_old(msgs, cfg(), SUMM, COUNTER)
    assert res is not None and res.replaced == 2
    user, call, result = res.messages[1:4]
    (ref,) = user.content
    assert isinstance(ref, OffloadRefBlock) and len(ref.preview) <= 60
    assert ref.original_tokens > 0 and res.offloads[ref.offload_id] == (msgs[1],)
    assert user.id == msgs[1].id and user.metadata["actormem"] == OFFLOADED
    assert call is msgs[2]  # the call is small and kept
    (block,) = result.content
    assert isinstance(block, ToolResultBlock) and block.tool_use_id == "c1"
    assert "offloaded as off_" in block.output and "context_reload" in block.output
    assert res.messages[0] is msgs[0]
    # idempotent: already offloaded messages are not offloaded again
    assert offload_old(list(res.messages), cfg(), SUMM, COUNTER) is None


def test_offload_old_respects_last_keep_and_recent_spares_latest() -> None:
    msgs = [Msg.user("x"), Msg.user("A" * 900), Msg.assistant("B" * 900), Msg.user("C" * 900)]
    assert offload_old(msgs, cfg(last_keep=3), SUMM, COUNTER) is None
    res = offload_recent(msgs, cfg(last_keep=3), SUMM, COUNTER)
    assert res is not None
    assert [m.metadata.get("actormem") for m in res.messages] == [None, OFFLOADED, OFFLOADED, None]
    assert res.messages[-1] is msgs[-1]


def test_offload_skips_protected() -> None:
    msgs = [Msg.user("A" * 900, tags=["protected"]), Msg.user("B" * 900), Msg.user("z")]
    res = offload_recent(msgs, cfg(), SUMM, COUNTER)
    assert res is not None and res.messages[0] is msgs[0] and res.replaced == 1


# -- 4. earlier rounds --------------------------------------------------------------


def test_summarize_rounds_cuts_at_a_round_boundary() -> None:
    msgs = conversation(6)  # system + 6 x (user, assistant)
    res = summarize_rounds(msgs, cfg(last_keep=3), SUMM, COUNTER)
    assert res is not None
    summary = res.messages[1]
    assert summary.metadata["actormem"] == SUMMARY
    assert summary.text.startswith("Summary of earlier conversation (8 messages)")
    assert "Dana Smith" in summary.text
    # last_keep=3 would cut inside round 4; the cut moves back to round 4's user message
    assert ids(res.messages[2:]) == ids(msgs[9:])
    assert res.messages[0] is msgs[0]
    # after the system prompt the first turn must be the user's; before a user turn no role
    # alternates, so the tie goes to "user" (never mistaken for the assistant's own words)
    assert summary.role == "user"
    assert summary.created_at == msgs[8].created_at


def test_summarize_rounds_is_progressive_and_keeps_the_task() -> None:
    msgs = conversation(6)
    first = summarize_rounds(msgs, cfg(last_keep=3), SUMM, COUNTER)
    assert first is not None
    more = list(first.messages) + conversation(4)[1:]
    second = summarize_rounds(more, cfg(last_keep=3), SUMM, COUNTER)
    assert second is not None
    new = second.messages[1]
    oid = new.metadata["offload_id"]
    assert first.messages[1] in second.offloads[oid]  # the old summary was folded in
    # a single summary alone is not summarized again
    lone = [msgs[0], new, *more[-3:]]
    assert summarize_rounds(lone, cfg(last_keep=3), SUMM, COUNTER) is None
    # a long current round: its opening user message is never summarized
    task = Msg.user("Task: migrate the billing DB")
    steps = [Msg.assistant(f"step {i} done for Acme") for i in range(10)]
    res = summarize_rounds([task, *steps], cfg(last_keep=3), SUMM, COUNTER)
    assert res is not None and res.messages[0] is task


# -- 5. and 6. current round ------------------------------------------------------------


def test_summarize_large_current_in_place() -> None:
    big = "The export of invoices for Acme failed on 2024-05-02 with error E17. " * 40
    msgs = [Msg.user("old"), Msg.assistant("old")]
    msgs += [Msg.user("Task: fix the export"), *tool_pair("logs", big, call_id="c9")]
    res = summarize_large_current(msgs, cfg(), SUMM, COUNTER)
    assert res is not None and res.replaced == 1
    result = res.messages[-1]
    (block,) = result.content
    assert isinstance(block, ToolResultBlock) and block.tool_use_id == "c9"
    assert block.output.startswith("Summary of a long message") and "E17" in block.output
    assert result.metadata["actormem"] == SUMMARIZED
    assert res.offloads[result.metadata["offload_id"]] == (msgs[-1],)
    assert summarize_large_current(msgs, cfg(min_compression_tokens=10**6), SUMM, COUNTER) is None


def test_compress_current_round_keeps_task_latest_and_pending_call() -> None:
    task = Msg.user("Task: find why the nightly job for Orion fails")
    steps: list[Msg] = []
    for k in range(6):
        steps += tool_pair(
            "grep", f"match {k}: job orion failed at 02:{k}0 with code 137", call_id=f"g{k}"
        )
    pending = Msg.tool_call("restart", {"job": "orion"}, call_id="p1")
    msgs = [Msg.system("sys"), task, *steps, pending]
    res = compress_current_round(msgs, cfg(), SUMM, COUNTER)
    assert res is not None
    assert res.messages[0] is msgs[0] and res.messages[1] is task and res.messages[-1] is pending
    assert len(res.messages) == 4
    summary = res.messages[2]
    assert summary.text.startswith("Summary of 12 earlier steps of the current task")
    assert summary.role == "user"  # between a user task and an assistant call: a tie
    assert compress_current_round(msgs, cfg(min_compression_tokens=10**6), SUMM, COUNTER) is None


def test_compress_current_round_keeps_an_unanswered_call_and_what_follows() -> None:
    task = Msg.user("Task")
    pending = Msg.tool_call("slow", call_id="s1")
    msgs = [task, pending, *[Msg.assistant(f"note {i}") for i in range(5)]]
    assert compress_current_round(msgs, cfg(), SUMM, COUNTER) is None


# -- protection ----------------------------------------------------------------------


def test_is_protected_by_every_rule() -> None:
    c = cfg(
        protect_roles={"system"},
        protect_names={"planner"},
        protect_tags={"skill"},
        protect_tools={"plan"},
        protect=lambda m: "KEEP" in m.text,
    )
    call = Msg.tool_call("plan", call_id="p")
    assert is_protected(Msg.system("s"), c)
    assert is_protected(Msg.assistant("x", name="planner"), c)
    assert is_protected(Msg.user("x", tags=["skill"]), c)
    assert is_protected(call, c)
    assert is_protected(Msg.tool_result("p", "r"), c, {"p": "plan"})
    assert is_protected(Msg.user("please KEEP this"), c)
    assert not is_protected(Msg.user("plain"), c)

    def boom(m: Msg) -> bool:
        raise RuntimeError("bad predicate")

    assert is_protected(Msg.user("x"), cfg(protect=boom))


# -- the driver -----------------------------------------------------------------------


def test_compress_below_thresholds_does_nothing() -> None:
    msgs = conversation(3)
    out = compress(msgs, cfg(), SUMM, COUNTER)
    assert not out.triggered and out.within_budget and out.count == 0 and not out.applied
    assert "below thresholds" in out.reason
    assert needs_compression(msgs, cfg())[0] is False


def test_compress_count_trigger_reaches_budget_without_touching_recent() -> None:
    msgs = conversation(30, tools_per_round=3)
    c = cfg(msg_threshold=40, last_keep=10)
    out = compress(msgs, c, SUMM, COUNTER)
    assert out.triggered and out.within_budget, out.reason
    assert out.applied[0].strategy == "tool_runs"
    assert all(a.strategy in {"tool_runs", "offload_old", "summarize_rounds"} for a in out.applied)
    final = out.apply(msgs)
    assert final[-10:] == msgs[-10:] and all(
        a is b for a, b in zip(final[-10:], msgs[-10:], strict=True)
    )
    assert len(final) == out.messages_after < 40
    assert out.tokens_after == COUNTER.count_msgs(final)
    assert set(out.offloads) == {i for a in out.applied for i in a.offload_ids}


def test_compress_outcome_applies_to_a_grown_list() -> None:
    msgs = conversation(30)
    out = compress(msgs, cfg(), SUMM, COUNTER)
    extra = [Msg.user("added during compression")]
    final = out.apply([*msgs, *extra])
    assert final[-1] is extra[0] and final[: len(out.replacement)] == list(out.replacement)


def test_compress_token_trigger_escalates_and_reports_why_not() -> None:
    # Everything is recent and huge: only strategies 3, 5, 6 can help.
    msgs = [Msg.user("Task: read these files")]
    for k in range(3):
        msgs += tool_pair("read", f"file {k} contents " * 400, call_id=f"r{k}")
    c = cfg(msg_threshold=50, last_keep=40, max_token=1024, token_ratio=0.5)
    out = compress(msgs, c, SUMM, COUNTER)
    names = [a.strategy for a in out.applied]
    assert "offload_recent" in names
    assert all(a.tokens_before >= c.token_budget for a in out.applied)
    assert out.tokens_after < out.tokens_before
    # a protected giant cannot be reduced: the reason says so
    giant = [Msg.user("G " * 5000, tags=["protected"]), Msg.user("hi")]
    out = compress(giant, c, SUMM, COUNTER)
    assert out.triggered and not out.within_budget and not out.applied
    assert "no strategy can change anything more" in out.reason and "protected" in out.reason


def test_compress_reports_model_fallback() -> None:
    class Failing:
        name = "failing"

        def summarize(self, msgs: object, *, target_tokens: int, instruction: str) -> object:
            from actormem.compress import Summary

            return Summary("- user: something happened", "extractive", "TimeoutError: slow")

    msgs = conversation(30)
    out = compress(msgs, cfg(), Failing(), COUNTER)  # type: ignore[arg-type]
    assert out.applied and out.applied[0].fallback_error == "TimeoutError: slow"
    assert out.applied[0].summarizer == "extractive"


def test_summary_role_alternates_when_it_can() -> None:
    # user question, a long tool run, then the next user question: the run's summary
    # sits between two user turns and takes the assistant role.
    msgs = [Msg.user("q1")]
    for k in range(3):
        msgs += tool_pair("ls", f"out {k}", call_id=f"x{k}")
    msgs += [Msg.user("q2"), *[Msg.assistant("a")] * 4]
    res = tool_runs(msgs, cfg(), SUMM, COUNTER)
    assert res is not None and res.messages[1].role == "assistant"

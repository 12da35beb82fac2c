"""The six compression strategies and the pass driver.

Everything here is pure: functions of a message list, a configuration, a
summarizer and a token counter; no threads, no clocks in the results, no
shared state.  The compressor actor reads the working messages with their
version, calls :func:`compress`, and applies the outcome as "replace the
first ``count`` messages with ``replacement``".

Strategies, in the order a pass tries them:

1. ``tool_runs``: a run of at least ``min_consecutive_tool_messages``
   consecutive tool-call / tool-result messages older than the last
   ``last_keep`` becomes one summary; the originals are offloaded.
2. ``offload_old``: a message older than the last ``last_keep`` whose text is
   longer than ``large_payload_threshold`` characters is replaced in place
   by a preview and a reference to its offloaded original.
3. ``offload_recent``: the same inside the last ``last_keep`` messages,
   except the very latest message (the one the model is about to answer;
   a preview of it would only make the agent reload it at once).
4. ``summarize_rounds``: the earlier user -> assistant rounds older than the
   last ``last_keep`` become one summary (earlier summaries included, so
   summaries stay progressive); the opening message of the current round is
   never part of it.
5. ``summarize_large_current``: each large message of the current round
   (the latest one included) is replaced in place by a summary of about
   ``current_round_ratio`` of its size.
6. ``compress_current_round``: the messages of the current round between
   its opening user message and the latest message become one summary of
   about ``current_round_ratio`` of their size.

Strategies 3, 5 and 6 reach into the last ``last_keep`` messages, so they
run only when the context is still over its *token* budget after 1, 2 and
4 found nothing more to do; the message-count trigger alone never touches
the last ``last_keep`` messages.  Strategies 5 and 6 also leave a current
round of fewer than ``min_compression_tokens`` tokens alone.

Rules every strategy follows: leading system messages and protected
messages are never touched; a span that is summarized never separates a
tool call from its results (both are in the span or neither is), and a tool
call whose result has not arrived yet is never summarized; messages
rewritten in place keep their tool-call and tool-result blocks (only the
text changes), so pairs stay intact.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

from actormem.compress._config import AutoContextConfig
from actormem.compress._edits import (
    StrategyResult,
    _Edit,
    _offload_id,
    _offload_range,
    _offloadable,
    _reload_hint,
    _summarize_span,
    _target,
    _with_output,
)
from actormem.compress._summarize import Summarizer
from actormem.compress._tokens import TokenCounter
from actormem.compress._view import SUMMARIZED, SUMMARY, _is_tool_msg, _is_user_turn, _View
from actormem.messages import (
    ContentBlock,
    ImageBlock,
    Msg,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)

__all__ = [
    "STRATEGIES",
    "compress_current_round",
    "offload_old",
    "offload_recent",
    "summarize_large_current",
    "summarize_rounds",
    "tool_runs",
]


# -- the strategies ------------------------------------------------------------------


def tool_runs(
    messages: Sequence[Msg],
    config: AutoContextConfig,
    summarizer: Summarizer,
    counter: TokenCounter,
    *,
    tokens: Sequence[int] | None = None,
) -> StrategyResult | None:
    """Strategy 1: summarize long runs of old tool-call/result messages.

    Args:
        messages: the working messages.
        config: the configuration.
        summarizer: writes the summaries.
        counter: counts tokens.
        tokens: precomputed tokens per message (optional).

    Returns:
        The change, or None when no run outside the last ``last_keep``
        messages is long enough.
    """
    v = _View(messages, config, counter, tokens)
    edit = _Edit(v, "tool_runs")
    i = v.head
    while i < v.keep_from:
        if not _is_tool_msg(v.msgs[i]) or v.protected[i]:
            i += 1
            continue
        j = i
        while j < v.keep_from and _is_tool_msg(v.msgs[j]) and not v.protected[j]:
            j += 1
        for span in v.segments(i, j):
            if len(span) >= config.min_consecutive_tool_messages:
                _summarize_span(
                    edit,
                    span,
                    summarizer=summarizer,
                    counter=counter,
                    config=config,
                    prompt="tool_runs",
                    ratio=config.summary_ratio,
                    header="Summary of {n} earlier tool-call messages",
                )
        i = j
    return edit.result(counter)


def offload_old(
    messages: Sequence[Msg],
    config: AutoContextConfig,
    summarizer: Summarizer,
    counter: TokenCounter,
    *,
    tokens: Sequence[int] | None = None,
) -> StrategyResult | None:
    """Strategy 2: offload large messages older than the last ``last_keep``.

    Args:
        messages: the working messages.
        config: the configuration.
        summarizer: unused (kept for a uniform signature).
        counter: counts tokens.
        tokens: precomputed tokens per message (optional).

    Returns:
        The change, or None when no old message is large.
    """
    n = len(messages)
    keep_from = max(0, n - config.keep_last)
    return _offload_range("offload_old", range(keep_from), messages, config, counter, tokens)


def offload_recent(
    messages: Sequence[Msg],
    config: AutoContextConfig,
    summarizer: Summarizer,
    counter: TokenCounter,
    *,
    tokens: Sequence[int] | None = None,
) -> StrategyResult | None:
    """Strategy 3: offload large messages anywhere except the very latest one.

    Args:
        messages: the working messages.
        config: the configuration.
        summarizer: unused (kept for a uniform signature).
        counter: counts tokens.
        tokens: precomputed tokens per message (optional).

    Returns:
        The change, or None when no message but the latest is large.
    """
    n = len(messages)
    return _offload_range("offload_recent", range(n - 1), messages, config, counter, tokens)


def summarize_rounds(
    messages: Sequence[Msg],
    config: AutoContextConfig,
    summarizer: Summarizer,
    counter: TokenCounter,
    *,
    tokens: Sequence[int] | None = None,
) -> StrategyResult | None:
    """Strategy 4: summarize the earlier rounds older than the last ``last_keep``.

    The span ends at the latest round start (a user message) at or before
    the last ``last_keep`` messages; when the current round began earlier
    than that, at the latest safe boundary instead, keeping the round's
    opening user message.

    Args:
        messages: the working messages.
        config: the configuration.
        summarizer: writes the summaries.
        counter: counts tokens.
        tokens: precomputed tokens per message (optional).

    Returns:
        The change, or None when nothing old enough can be summarized.
    """
    v = _View(messages, config, counter, tokens)
    cut = v.keep_from
    while cut > v.head and not (v.safe[cut] and (cut == len(v.msgs) or _is_user_turn(v.msgs[cut]))):
        cut -= 1
    if cut <= v.head:
        cut = v.keep_from
        while cut > v.head and not v.safe[cut]:
            cut -= 1
    edit = _Edit(v, "summarize_rounds")
    exclude = frozenset({v.opening}) if v.opening >= 0 else frozenset()
    for span in v.segments(v.head, cut, exclude=exclude):
        if len(span) == 1 and v.msgs[span.start].metadata.get("actormem") == SUMMARY:
            continue
        _summarize_span(
            edit,
            span,
            summarizer=summarizer,
            counter=counter,
            config=config,
            prompt="summarize_rounds",
            ratio=config.summary_ratio,
            header="Summary of earlier conversation ({n} messages)",
        )
    return edit.result(counter)


def _round_tokens(v: _View) -> int:
    return sum(v.toks[v.round_start :])


def summarize_large_current(
    messages: Sequence[Msg],
    config: AutoContextConfig,
    summarizer: Summarizer,
    counter: TokenCounter,
    *,
    tokens: Sequence[int] | None = None,
) -> StrategyResult | None:
    """Strategy 5: summarize, in place, each large message of the current round.

    Args:
        messages: the working messages.
        config: the configuration.
        summarizer: writes the summaries.
        counter: counts tokens.
        tokens: precomputed tokens per message (optional).

    Returns:
        The change, or None when the round is small or holds no large message.
    """
    v = _View(messages, config, counter, tokens)
    if _round_tokens(v) < config.min_compression_tokens:
        return None
    edit = _Edit(v, "summarize_large_current")
    for i in range(max(v.round_start, v.head), len(v.msgs)):
        m = v.msgs[i]
        if v.protected[i] or not _offloadable(m, config):
            continue
        summary = summarizer.summarize(
            [m],
            target_tokens=_target(v.toks[i], config.current_round_ratio, config),
            instruction=config.prompt_for("summarize_large_current"),
        )
        oid = _offload_id("summarize_large_current", [m])
        head = f"Summary of a long message (offloaded as {oid}; {_reload_hint(oid)}):\n"
        blocks: list[ContentBlock] = []
        if m.tool_results:
            first = True
            for b in m.content:
                if isinstance(b, ToolResultBlock):
                    out = head + summary.text if first else f"(see the summary above, {oid})"
                    blocks.append(_with_output(b, out))
                    first = False
                elif isinstance(b, ToolUseBlock | ImageBlock):
                    blocks.append(b)
        else:
            blocks.append(TextBlock(head + summary.text))
            blocks += [b for b in m.content if isinstance(b, ToolUseBlock | ImageBlock)]
        new = m.with_content(blocks, actormem=SUMMARIZED, offload_id=oid)
        if edit.add(i, i + 1, (new,), oid, counter):
            edit.summarizers.append(summary.summarizer)
            if summary.error:
                edit.errors.append(summary.error)
    return edit.result(counter)


def compress_current_round(
    messages: Sequence[Msg],
    config: AutoContextConfig,
    summarizer: Summarizer,
    counter: TokenCounter,
    *,
    tokens: Sequence[int] | None = None,
) -> StrategyResult | None:
    """Strategy 6: summarize the current round between its opening message and the latest.

    Args:
        messages: the working messages.
        config: the configuration.
        summarizer: writes the summaries.
        counter: counts tokens.
        tokens: precomputed tokens per message (optional).

    Returns:
        The change, or None when the round is small or has nothing between
        its first and latest message that can be cut out safely.
    """
    v = _View(messages, config, counter, tokens)
    n = len(v.msgs)
    if n == 0 or _round_tokens(v) < config.min_compression_tokens:
        return None
    start = v.opening + 1 if v.opening >= 0 else v.round_start
    edit = _Edit(v, "compress_current_round")
    for span in v.segments(start, n - 1):
        if len(span) < 2:
            continue
        _summarize_span(
            edit,
            span,
            summarizer=summarizer,
            counter=counter,
            config=config,
            prompt="compress_current_round",
            ratio=config.current_round_ratio,
            header="Summary of {n} earlier steps of the current task",
        )
    return edit.result(counter)


StrategyFn = Callable[..., StrategyResult | None]

#: (name, function, runs only when over the token budget), in the order a pass tries them.
STRATEGIES: Final[tuple[tuple[str, StrategyFn, bool], ...]] = (
    ("tool_runs", tool_runs, False),
    ("offload_old", offload_old, False),
    ("offload_recent", offload_recent, True),
    ("summarize_rounds", summarize_rounds, False),
    ("summarize_large_current", summarize_large_current, True),
    ("compress_current_round", compress_current_round, True),
)

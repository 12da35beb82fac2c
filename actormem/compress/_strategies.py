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

import dataclasses
import hashlib
import time
from collections.abc import Callable, Sequence
from typing import Final, Literal

import structlog

from actormem.compress._config import AutoContextConfig
from actormem.compress._summarize import ExtractiveSummarizer, Summarizer
from actormem.compress._tokens import TokenCounter
from actormem.messages import (
    ContentBlock,
    ImageBlock,
    Msg,
    OffloadRefBlock,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)

__all__ = [
    "OFFLOADED",
    "STRATEGIES",
    "SUMMARIZED",
    "SUMMARY",
    "AppliedStrategy",
    "CompressionOutcome",
    "StrategyResult",
    "compress",
    "compress_current_round",
    "is_protected",
    "needs_compression",
    "offload_old",
    "offload_recent",
    "summarize_large_current",
    "summarize_rounds",
    "tool_runs",
]

log = structlog.get_logger("actormem.compress")

#: ``metadata["actormem"]`` of a summary message made by strategies 1, 4 and 6.
SUMMARY: Final = "summary"
#: ``metadata["actormem"]`` of a message whose text was offloaded in place (2, 3).
OFFLOADED: Final = "offloaded"
#: ``metadata["actormem"]`` of a message whose text was summarized in place (5).
SUMMARIZED: Final = "summarized"

_MIN_SUMMARY_TOKENS: Final = 48


@dataclasses.dataclass(frozen=True)
class StrategyResult:
    """What one strategy changed.

    Attributes:
        strategy: the strategy's name.
        messages: the whole new working list (unchanged messages are the same objects).
        offloads: offload id -> the original messages it holds.
        replaced: how many original messages were summarized or rewritten.
        tokens_before: tokens of the whole list before.
        tokens_after: tokens of the whole list after.
        token_counts: tokens of each message of ``messages``.
        summarizer: the summarizer that wrote the summaries ("" when none was made).
        errors: why the preferred summarizer fell back, one entry per fallback.
    """

    strategy: str
    messages: tuple[Msg, ...]
    offloads: dict[str, tuple[Msg, ...]]
    replaced: int
    tokens_before: int
    tokens_after: int
    token_counts: tuple[int, ...]
    summarizer: str = ""
    errors: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class AppliedStrategy:
    """A strategy that changed the context during a :func:`compress` pass.

    Attributes:
        strategy: the strategy's name.
        messages_replaced: original messages summarized or rewritten.
        tokens_before: tokens of the working context before it ran.
        tokens_after: tokens after it ran.
        offload_ids: the offloads it created.
        summarizer: the summarizer used ("" when none was needed).
        fallback_error: non-empty when a model summarizer failed and the
            offline one was used (the actor emits ``ModelFallback``).
        duration_ms: its run time.
    """

    strategy: str
    messages_replaced: int
    tokens_before: int
    tokens_after: int
    offload_ids: tuple[str, ...]
    summarizer: str
    fallback_error: str
    duration_ms: float


@dataclasses.dataclass(frozen=True)
class CompressionOutcome:
    """The result of :func:`compress`: replace the first ``count`` messages with ``replacement``.

    Messages of the input beyond ``count`` are unchanged (same objects), so the
    actor can apply the outcome to a list that grew meanwhile.

    Attributes:
        count: how many leading input messages to replace (0: nothing changed).
        replacement: what to put in their place.
        offloads: offload id -> original messages, for every offload created.
        applied: the strategies that changed something, in order.
        tokens_before: tokens of the input.
        tokens_after: tokens of the compressed context.
        messages_before: messages in the input.
        messages_after: messages in the compressed context.
        triggered: whether the input reached a threshold.
        within_budget: whether the result is under both the token budget and
            the message threshold.
        reason: a readable account (why nothing was done, or why the result is
            still over budget).
    """

    count: int
    replacement: tuple[Msg, ...]
    offloads: dict[str, tuple[Msg, ...]]
    applied: list[AppliedStrategy]
    tokens_before: int
    tokens_after: int
    messages_before: int
    messages_after: int
    triggered: bool
    within_budget: bool
    reason: str

    @property
    def changed(self) -> bool:
        """True when at least one strategy changed the context."""
        return bool(self.applied)

    def apply(self, messages: Sequence[Msg]) -> list[Msg]:
        """Return ``messages`` with the outcome applied.

        Args:
            messages: the list the outcome was computed from, possibly with
                messages appended since.

        Returns:
            The new working list.
        """
        return [*self.replacement, *messages[self.count :]]


# -- analysis of a message list -------------------------------------------------------


def _tool_names(msgs: Sequence[Msg]) -> dict[str, str]:
    return {b.id: b.name for m in msgs for b in m.content if isinstance(b, ToolUseBlock)}


def is_protected(
    msg: Msg, config: AutoContextConfig, tool_names: dict[str, str] | None = None
) -> bool:
    """Return True when ``config`` protects ``msg`` from compression.

    A message is protected by its role, its name, one of its tags, a tool it
    calls or answers (``tool_names`` maps tool-call ids to tool names so a
    result without a name is matched through its call), or the ``protect``
    callable.  A callable that raises protects the message (and logs why).

    Args:
        msg: the message.
        config: the configuration.
        tool_names: tool-call id -> tool name for the surrounding conversation.

    Returns:
        Whether the message must stay verbatim.
    """
    if msg.role in config.protect_roles or (msg.name and msg.name in config.protect_names):
        return True
    if config.protect_tags and not config.protect_tags.isdisjoint(msg.tags):
        return True
    if config.protect_tools:
        for b in msg.content:
            if isinstance(b, ToolUseBlock) and b.name in config.protect_tools:
                return True
            if isinstance(b, ToolResultBlock):
                name = b.name or (tool_names or {}).get(b.tool_use_id, "")
                if name in config.protect_tools:
                    return True
    if config.protect is not None:
        try:
            return bool(config.protect(msg))
        except Exception as exc:
            log.warning("protect_predicate_failed", msg_id=msg.id, error=repr(exc))
            return True
    return False


def _is_tool_msg(m: Msg) -> bool:
    return m.role == "tool" or any(isinstance(b, ToolUseBlock | ToolResultBlock) for b in m.content)


def _is_user_turn(m: Msg) -> bool:
    """A message that opens a round: from the user and not a tool result or summary."""
    return (
        m.role == "user"
        and not any(isinstance(b, ToolResultBlock) for b in m.content)
        and m.metadata.get("actormem") != SUMMARY
    )


class _View:
    """Positions and constraints of one message list, computed once per strategy call."""

    def __init__(
        self,
        msgs: Sequence[Msg],
        config: AutoContextConfig,
        counter: TokenCounter,
        tokens: Sequence[int] | None,
    ) -> None:
        self.msgs = list(msgs)
        n = len(self.msgs)
        if tokens is not None and len(tokens) == n:
            self.toks = list(tokens)
        else:
            self.toks = [counter.count_msgs([m]) for m in self.msgs]
        self.total = sum(self.toks)
        head = 0
        while head < n and self.msgs[head].role == "system":
            head += 1
        self.head = head
        self.keep_from = max(head, n - config.keep_last)
        round_start = head
        for i in range(n - 1, head - 1, -1):
            if _is_user_turn(self.msgs[i]):
                round_start = i
                break
        self.round_start = round_start
        #: index of the user message that opened the current round, or -1
        self.opening = (
            round_start if round_start < n and _is_user_turn(self.msgs[round_start]) else -1
        )
        names = _tool_names(self.msgs)
        self.protected = [is_protected(m, config, names) for m in self.msgs]
        # safe[c]: a span may begin or end at boundary c (just before message c)
        # without separating a tool call from its results.
        use_at: dict[str, int] = {}
        for i, m in enumerate(self.msgs):
            for b in m.content:
                if isinstance(b, ToolUseBlock):
                    use_at.setdefault(b.id, i)
        diff = [0] * (n + 2)
        answered: set[str] = set()
        for r, m in enumerate(self.msgs):
            for b in m.content:
                if isinstance(b, ToolResultBlock) and b.tool_use_id in use_at:
                    answered.add(b.tool_use_id)
                    lo, hi = sorted((use_at[b.tool_use_id], r))
                    if lo < hi:
                        diff[lo + 1] += 1
                        diff[hi + 1] -= 1
        for call_id, a in use_at.items():
            if call_id not in answered:  # pending call: its result will come later
                diff[a + 1] += 1
                diff[n + 1] -= 1
        self.safe = [True] * (n + 1)
        depth = 0
        for c in range(n + 1):
            depth += diff[c]
            self.safe[c] = depth == 0

    def segments(self, lo: int, hi: int, *, exclude: frozenset[int] = frozenset()) -> list[range]:
        """Maximal runs of unprotected messages in ``[lo, hi)``, shrunk to safe boundaries."""
        out: list[range] = []
        i = max(lo, self.head)
        while i < hi:
            if self.protected[i] or i in exclude:
                i += 1
                continue
            j = i
            while j < hi and not self.protected[j] and j not in exclude:
                j += 1
            s, e = i, j
            while s < e and not self.safe[s]:
                s += 1
            while e > s and not self.safe[e]:
                e -= 1
            if s < e:
                out.append(range(s, e))
            i = j
        return out


# -- building blocks -----------------------------------------------------------------


def _digest(*parts: str) -> str:
    h = hashlib.blake2b(digest_size=16)
    for p in parts:
        h.update(p.encode("utf-8", "surrogatepass"))
        h.update(b"\x1f")
    return h.hexdigest()


def _offload_id(strategy: str, originals: Sequence[Msg]) -> str:
    parts = [strategy] + [f"{m.id}:{len(m.content)}:{len(m.text)}" for m in originals]
    return "off_" + _digest(*parts)[:20]


def _preview(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: max(0, limit - 1)].rstrip() + "…"


def _reload_hint(offload_id: str) -> str:
    return f'call context_reload(offload_id="{offload_id}") to read the original'


def _summary_role(prev: Msg | None, nxt: Msg | None) -> Literal["user", "assistant"]:
    """The role that keeps user/assistant alternation where the neighbours allow it.

    A tool result counts as a user turn (Anthropic sends results as user
    messages) and the start of the conversation counts as an assistant turn
    (the first turn must be the user's).  When neither role avoids a repeat,
    ``user`` is used: both OpenAI and Anthropic accept consecutive turns of
    one role, and a user-side summary is not mistaken for the assistant's
    own words.
    """

    def eff(m: Msg | None, *, before: bool) -> str:
        if m is None or m.role == "system":
            return "assistant" if before else ""
        return "user" if m.role in ("user", "tool") else "assistant"

    p, q = eff(prev, before=True), eff(nxt, before=False)
    roles: tuple[Literal["user", "assistant"], ...] = ("user", "assistant")
    for role in roles:
        if role != p and role != q:
            return role
    return "user"


def _target(tokens: int, ratio: float, config: AutoContextConfig) -> int:
    return max(_MIN_SUMMARY_TOKENS, min(config.summary_max_tokens, int(tokens * ratio)))


@dataclasses.dataclass
class _Edit:
    """Accumulates the replacements of one strategy over one view."""

    view: _View
    strategy: str
    spans: list[tuple[int, int, tuple[Msg, ...]]] = dataclasses.field(default_factory=list)
    offloads: dict[str, tuple[Msg, ...]] = dataclasses.field(default_factory=dict)
    replaced: int = 0
    summarizers: list[str] = dataclasses.field(default_factory=list)
    errors: list[str] = dataclasses.field(default_factory=list)

    def add(
        self, start: int, end: int, new: tuple[Msg, ...], oid: str, counter: TokenCounter
    ) -> bool:
        """Record ``[start, end) -> new`` if it saves tokens; return whether it was kept."""
        old_tokens = sum(self.view.toks[start:end])
        new_tokens = sum(counter.count_msgs([m]) for m in new)
        if new_tokens >= old_tokens and len(new) >= end - start:
            return False
        self.spans.append((start, end, new))
        self.offloads[oid] = tuple(self.view.msgs[start:end])
        self.replaced += end - start
        return True

    def result(self, counter: TokenCounter) -> StrategyResult | None:
        if not self.spans:
            return None
        v = self.view
        out: list[Msg] = []
        toks: list[int] = []
        pos = 0
        for start, end, new in sorted(self.spans, key=lambda s: s[0]):
            out += v.msgs[pos:start]
            toks += v.toks[pos:start]
            out += new
            toks += [counter.count_msgs([m]) for m in new]
            pos = end
        out += v.msgs[pos:]
        toks += v.toks[pos:]
        names = sorted(set(self.summarizers))
        return StrategyResult(
            strategy=self.strategy,
            messages=tuple(out),
            offloads=self.offloads,
            replaced=self.replaced,
            tokens_before=v.total,
            tokens_after=sum(toks),
            token_counts=tuple(toks),
            summarizer="+".join(names),
            errors=tuple(self.errors),
        )


def _summarize_span(
    edit: _Edit,
    span: range,
    *,
    summarizer: Summarizer,
    counter: TokenCounter,
    config: AutoContextConfig,
    prompt: str,
    ratio: float,
    header: str,
) -> None:
    v = edit.view
    originals = v.msgs[span.start : span.stop]
    span_tokens = sum(v.toks[span.start : span.stop])
    summary = summarizer.summarize(
        originals,
        target_tokens=_target(span_tokens, ratio, config),
        instruction=config.prompt_for(prompt),
    )
    oid = _offload_id(edit.strategy, originals)
    prev = v.msgs[span.start - 1] if span.start > 0 else None
    nxt = v.msgs[span.stop] if span.stop < len(v.msgs) else None
    text = (
        f"{header.format(n=len(originals))} (offloaded as {oid}; {_reload_hint(oid)}):\n"
        f"{summary.text or '(no text)'}"
    )
    msg = Msg(
        role=_summary_role(prev, nxt),
        content=(TextBlock(text),),
        id=_digest("summary", oid)[:32],
        metadata={
            "actormem": SUMMARY,
            "offload_id": oid,
            "strategy": edit.strategy,
            "summarized_count": len(originals),
            "summarizer": summary.summarizer,
        },
        created_at=originals[-1].created_at,
    )
    if edit.add(span.start, span.stop, (msg,), oid, counter):
        edit.summarizers.append(summary.summarizer)
        if summary.error:
            edit.errors.append(summary.error)


def _offload_in_place(msg: Msg, oid: str, config: AutoContextConfig, tokens: int) -> Msg:
    blocks: list[ContentBlock] = []
    results = [b for b in msg.content if isinstance(b, ToolResultBlock)]
    if results:
        # Tool results keep their block (APIs need the pairing); the reference goes inline.
        for b in msg.content:
            if isinstance(b, ToolResultBlock):
                preview = _preview(b.output, config.offload_preview)
                out = f"[output offloaded as {oid}, {tokens} tokens; {_reload_hint(oid)}] {preview}"
                blocks.append(_with_output(b, out))
            elif isinstance(b, ToolUseBlock | ImageBlock):
                blocks.append(b)
    else:
        text = "\n".join(b.text for b in msg.content if isinstance(b, TextBlock))
        blocks.append(
            OffloadRefBlock(
                offload_id=oid,
                preview=_preview(text, config.offload_preview),
                original_tokens=tokens,
                message_count=1,
            )
        )
        blocks += [b for b in msg.content if isinstance(b, ToolUseBlock | ImageBlock)]
    return msg.with_content(blocks, actormem=OFFLOADED, offload_id=oid)


def _with_output(block: ToolResultBlock, output: str) -> ToolResultBlock:
    """A copy of ``block`` with another output (same call id, error flag and name)."""
    return ToolResultBlock(
        tool_use_id=block.tool_use_id, output=output, is_error=block.is_error, name=block.name
    )


def _offloadable(m: Msg, config: AutoContextConfig) -> bool:
    if m.metadata.get("actormem") in (OFFLOADED, SUMMARY, SUMMARIZED):
        return False
    return len(m.text) > config.large_payload_threshold


def _offload_range(
    strategy: str,
    indices: range,
    messages: Sequence[Msg],
    config: AutoContextConfig,
    counter: TokenCounter,
    tokens: Sequence[int] | None,
) -> StrategyResult | None:
    v = _View(messages, config, counter, tokens)
    edit = _Edit(v, strategy)
    for i in indices:
        if i < v.head or v.protected[i] or not _offloadable(v.msgs[i], config):
            continue
        oid = _offload_id(strategy, [v.msgs[i]])
        new = _offload_in_place(v.msgs[i], oid, config, v.toks[i])
        edit.add(i, i + 1, (new,), oid, counter)
    return edit.result(counter)


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


# -- the driver ------------------------------------------------------------------------


def needs_compression(
    messages: Sequence[Msg], config: AutoContextConfig, counter: TokenCounter | None = None
) -> tuple[bool, int]:
    """Check the trigger: message count or token budget reached.

    Args:
        messages: the working messages.
        config: the configuration.
        counter: counts tokens (default: ``config.token_counter``).

    Returns:
        ``(triggered, tokens)``.
    """
    counter = counter or config.token_counter
    tokens = counter.count_msgs(messages)
    return len(messages) >= config.msg_threshold or tokens >= config.token_budget, tokens


def compress(
    messages: Sequence[Msg],
    config: AutoContextConfig,
    summarizer: Summarizer | None = None,
    counter: TokenCounter | None = None,
    *,
    max_steps: int = 32,
) -> CompressionOutcome:
    """Compress ``messages`` progressively until they are within budget.

    When the message count reaches ``msg_threshold`` or the tokens reach the
    budget (``max_token * token_ratio``), the strategies are tried in order;
    the first one that changes something ends the step, and steps repeat
    from strategy 1 until the context is under both thresholds or no
    strategy changes anything (or ``max_steps`` steps ran).  A strategy that
    finds nothing to do is never reported as applied.  Strategies 3, 5 and 6
    are only tried while the context is over its token budget.

    Args:
        messages: the working messages, oldest first.
        config: the configuration.
        summarizer: writes summaries (default: :class:`ExtractiveSummarizer`
            with the counter).
        counter: counts tokens (default: ``config.token_counter``).
        max_steps: the most strategy applications in one call.

    Returns:
        The outcome: replace the first ``count`` input messages with
        ``replacement``.  Equal inputs give equal outcomes.
    """
    counter = counter or config.token_counter
    summarizer = summarizer or ExtractiveSummarizer(counter)
    original = list(messages)
    toks = [counter.count_msgs([m]) for m in original]
    total_before = sum(toks)
    budget = config.token_budget
    over_count = len(original) >= config.msg_threshold
    over_tokens = total_before >= budget
    if not (over_count or over_tokens):
        return CompressionOutcome(
            count=0,
            replacement=(),
            offloads={},
            applied=[],
            tokens_before=total_before,
            tokens_after=total_before,
            messages_before=len(original),
            messages_after=len(original),
            triggered=False,
            within_budget=True,
            reason=(
                f"below thresholds: {len(original)} < {config.msg_threshold} messages and "
                f"{total_before} < {budget} tokens"
            ),
        )
    msgs = original
    total = total_before
    applied: list[AppliedStrategy] = []
    offloads: dict[str, tuple[Msg, ...]] = {}
    exhausted = False
    skipped: list[str] = []
    for _ in range(max_steps):
        over_count = len(msgs) >= config.msg_threshold
        over_tokens = total >= budget
        if not (over_count or over_tokens):
            break
        for name, fn, tokens_only in STRATEGIES:
            if tokens_only and not over_tokens:
                continue
            t0 = time.perf_counter()
            res = fn(msgs, config, summarizer, counter, tokens=toks)
            if res is None:
                continue
            if res.tokens_after >= res.tokens_before:
                # A pass that does not shrink the context is never applied.
                skipped.append(f"{name} ({res.tokens_before} -> {res.tokens_after} tokens)")
                log.info(
                    "strategy_skipped_not_smaller",
                    strategy=name,
                    tokens_before=res.tokens_before,
                    tokens_after=res.tokens_after,
                )
                continue
            applied.append(
                AppliedStrategy(
                    strategy=name,
                    messages_replaced=res.replaced,
                    tokens_before=res.tokens_before,
                    tokens_after=res.tokens_after,
                    offload_ids=tuple(res.offloads),
                    summarizer=res.summarizer,
                    fallback_error="; ".join(res.errors),
                    duration_ms=(time.perf_counter() - t0) * 1000,
                )
            )
            log.debug(
                "strategy_applied",
                strategy=name,
                replaced=res.replaced,
                tokens_before=res.tokens_before,
                tokens_after=res.tokens_after,
            )
            offloads.update(res.offloads)
            msgs = list(res.messages)
            toks = list(res.token_counts)
            total = res.tokens_after
            break
        else:
            exhausted = True
            break
    within = len(msgs) < config.msg_threshold and total < budget
    count, replacement = _prefix_change(original, msgs)
    not_applied = (
        f"; not applied because they would not shrink the context: {', '.join(skipped[:3])}"
        if skipped
        else ""
    )
    if within:
        reason = f"within budget after {len(applied)} strategy step(s)"
    else:
        v = _View(msgs, config, counter, toks)
        protected = sum(t for t, p in zip(v.toks, v.protected, strict=True) if p)
        recent = sum(v.toks[v.keep_from :])
        why = (
            "no strategy can change anything more"
            if exhausted
            else f"stopped after {max_steps} steps"
        )
        reason = (
            f"still over budget ({len(msgs)} messages, threshold {config.msg_threshold}; "
            f"{total} tokens, budget {budget}): {why}; the last {config.keep_last} messages "
            f"hold {recent} tokens, protected messages {protected}, leading system messages "
            f"{sum(v.toks[: v.head])}"
        )
    reason += not_applied
    return CompressionOutcome(
        count=count,
        replacement=replacement,
        offloads=offloads,
        applied=applied,
        tokens_before=total_before,
        tokens_after=total,
        messages_before=len(original),
        messages_after=len(msgs),
        triggered=True,
        within_budget=within,
        reason=reason,
    )


def _prefix_change(before: Sequence[Msg], after: Sequence[Msg]) -> tuple[int, tuple[Msg, ...]]:
    """Express ``after`` as ``before`` with its first ``count`` messages replaced."""
    i, j = len(before), len(after)
    while i > 0 and j > 0 and before[i - 1] is after[j - 1]:
        i -= 1
        j -= 1
    return i, tuple(after[:j])

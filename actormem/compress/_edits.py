"""What a strategy produces: summaries and offloads of spans, accumulated into one result.

The strategies decide *which* messages to compress; the building blocks here
decide *how* a span becomes a summary message or an offloaded message
(ids, headers, the reload hint, roles that keep user/assistant alternation,
the summary's token target) and collect the edits into a
:class:`StrategyResult`.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence
from typing import Final, Literal

from actormem.compress._config import AutoContextConfig
from actormem.compress._summarize import Summarizer
from actormem.compress._tokens import TokenCounter
from actormem.compress._view import OFFLOADED, SUMMARIZED, SUMMARY, _View
from actormem.messages import (
    ContentBlock,
    ImageBlock,
    Msg,
    OffloadRefBlock,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)

__all__ = ["StrategyResult"]

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


def _target(tokens: int, ratio: float, config: AutoContextConfig, *, kept: int = 0) -> int:
    """The token target of a summary: ``ratio`` of ``tokens`` plus ``kept`` whole.

    ``kept`` is the size of an earlier conversation summary inside the span:
    it is already a selection, so shrinking it by ``ratio`` again at every
    pass would make the oldest facts decay geometrically (a 1,000-message
    conversation compressed as it grew ended at 3% of its tokens with 4 of 45
    planted facts).  The summary may grow up to ``config.summary_cap``
    (``summary_max_tokens``, and never more than a quarter of the pass's
    token budget, so a small window still compresses within it).
    """
    cap = config.summary_cap
    return max(min(_MIN_SUMMARY_TOKENS, cap), min(cap, kept + int(tokens * ratio)))


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
    kept = sum(
        v.toks[i]
        for i in span
        if v.msgs[i].metadata.get("actormem") == SUMMARY
        and v.msgs[i].metadata.get("strategy") == "summarize_rounds"
    )
    span_tokens = sum(v.toks[span.start : span.stop]) - kept
    summary = summarizer.summarize(
        originals,
        target_tokens=_target(span_tokens, ratio, config, kept=kept),
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

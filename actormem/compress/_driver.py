"""The pass driver: try the strategies in order until the context is within budget.

Kept apart from the strategies so that the loop, its stopping rules and the
outcome the actor applies (replace the first ``count`` messages) read in one
place.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence

import structlog

from actormem.compress._config import AutoContextConfig
from actormem.compress._extractive import ExtractiveSummarizer
from actormem.compress._strategies import STRATEGIES
from actormem.compress._summarize import Summarizer
from actormem.compress._tokens import TokenCounter
from actormem.compress._view import _View
from actormem.messages import Msg

__all__ = ["AppliedStrategy", "CompressionOutcome", "compress", "needs_compression"]

log = structlog.get_logger("actormem.compress")


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

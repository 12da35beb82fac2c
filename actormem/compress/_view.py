"""Reading a message list: which messages are protected, where rounds start, where a span may cut.

Every strategy looks at the same facts about the working list (system head,
the last ``last_keep`` messages, the current round, protected messages, the
boundaries that do not separate a tool call from its result); they are
computed here once per strategy call so that the strategies read as policy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

import structlog

from actormem._pace import pace
from actormem.messages import Msg, ToolResultBlock, ToolUseBlock

if TYPE_CHECKING:
    from actormem.compress._config import AutoContextConfig
    from actormem.compress._tokens import TokenCounter

__all__ = ["OFFLOADED", "SUMMARIZED", "SUMMARY", "is_protected"]

log = structlog.get_logger("actormem.compress")

#: ``metadata["actormem"]`` of a summary message made by strategies 1, 4 and 6.
SUMMARY: Final = "summary"
#: ``metadata["actormem"]`` of a message whose text was offloaded in place (2, 3).
OFFLOADED: Final = "offloaded"
#: ``metadata["actormem"]`` of a message whose text was summarized in place (5).
SUMMARIZED: Final = "summarized"


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
    pace()  # called once per message of a pass
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

"""Configuration of the AutoContext compressor."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Collection, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final

from actormem._settings import AUTOCONTEXT_FIELDS, check_fields
from actormem.compress._tokens import EstimateTokenCounter, TokenCounter

if TYPE_CHECKING:
    from actormem.messages import Msg

__all__ = ["DEFAULT_PROMPTS", "STRATEGY_NAMES", "SUMMARY_BUDGET_SHARE", "AutoContextConfig"]

#: A summary never takes more than ``1 / SUMMARY_BUDGET_SHARE`` of a pass's token budget.
SUMMARY_BUDGET_SHARE: Final = 4

#: The strategies, in the order a pass tries them.
STRATEGY_NAMES: Final = (
    "tool_runs",
    "offload_old",
    "offload_recent",
    "summarize_rounds",
    "summarize_large_current",
    "compress_current_round",
)

_COMMON_RULES: Final = (
    "Write in the third person as a neutral record (for example 'The user asked ...', "
    "'The assistant ran ...'). Never write in the first person and never address the "
    "reader. Keep every name, number, date, identifier, file path, decision, error and "
    "open task exactly as written. Leave out greetings and filler. Answer with the "
    "summary only."
)

#: The default instruction per strategy; override any of them with ``AutoContextConfig.prompts``.
DEFAULT_PROMPTS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "tool_runs": (
            "You condense a sequence of tool calls and their results from an agent's "
            "working context. State which tools were called with which key arguments, "
            "what each returned that matters for the task, and any errors. " + _COMMON_RULES
        ),
        "summarize_rounds": (
            "You condense earlier rounds of a conversation between a user and an "
            "assistant. Record what the user asked or said, what the assistant did or "
            "answered, and what was decided or left open. " + _COMMON_RULES
        ),
        "summarize_large_current": (
            "You condense one long message from the current task so the agent can keep "
            "working without the full text. Keep the facts the task depends on. " + _COMMON_RULES
        ),
        "compress_current_round": (
            "You condense the steps taken so far in the current task: what was tried, "
            "what was found, what failed and what remains to do. " + _COMMON_RULES
        ),
    }
)

_KNOWN_PROMPTS: Final = frozenset(DEFAULT_PROMPTS)


def _positive_int(name: str, value: object, *, minimum: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"AutoContextConfig.{name} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"AutoContextConfig.{name} must be >= {minimum}, got {value}")


def _ratio(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"AutoContextConfig.{name} must be a number, got {type(value).__name__}")
    if not (0.0 < float(value) <= 1.0) or math.isnan(float(value)):
        raise ValueError(f"AutoContextConfig.{name} must be in (0, 1], got {value}")


def _str_set(name: str, value: object) -> frozenset[str]:
    if isinstance(value, str) or not isinstance(value, Collection):
        raise TypeError(
            f"AutoContextConfig.{name} must be a collection of strings (not a single "
            f"string), got {type(value).__name__}"
        )
    items = frozenset(value)
    bad = [v for v in items if not isinstance(v, str)]
    if bad:
        raise TypeError(f"AutoContextConfig.{name} must hold strings, got {bad[0]!r}")
    return items


@dataclasses.dataclass(frozen=True, kw_only=True)
class AutoContextConfig:
    """Budget, strategy parameters and protection rules of the compressor.

    The defaults follow AgentScope's AutoContextMemory for a 128k-token model;
    :meth:`for_window` derives a configuration for a smaller window.

    Attributes:
        msg_threshold: compress when the context holds at least this many messages.
        max_token: the model's context window in tokens.
        token_ratio: compress when the context reaches ``max_token * token_ratio``
            tokens; that product is also the budget a pass aims for.
        last_keep: the most recent messages that strategies 1, 2 and 4 never touch;
            must be smaller than ``msg_threshold``.  Default (``None``): half of
            ``msg_threshold``, at most 50 (so ``AutoContextConfig(msg_threshold=8)``
            keeps the last 4).
        large_payload_threshold: a message whose text is longer than this many
            characters is "large" (offloaded by strategies 2 and 3, summarized by 5).
        offload_preview: characters of an offloaded message kept as its preview.
        min_consecutive_tool_messages: the shortest run of tool-call/tool-result
            messages that strategy 1 summarizes.
        current_round_ratio: the target size of summaries made in the current
            round (strategies 5 and 6), as a share of the tokens they replace.
        min_compression_tokens: strategies 5 and 6 leave a current round that
            holds fewer tokens than this alone.
        summary_ratio: the target size of summaries of old messages
            (strategies 1 and 4), as a share of the tokens they replace.
            0.4 keeps >= 80% of the LoCoMo dev QA answers in every
            conversation (0.2 kept 58-88%); see the README.
        summary_max_tokens: the largest summary a strategy asks for; a
            summary is also never more than a quarter of
            :attr:`token_budget` (see :attr:`summary_cap`).
        prompts: instructions per strategy name that replace
            :data:`DEFAULT_PROMPTS` (keys: ``tool_runs``, ``summarize_rounds``,
            ``summarize_large_current``, ``compress_current_round``).
        protect_roles: messages with these roles are never compressed.
        protect_names: messages with these ``name``s are never compressed.
        protect_tags: messages with any of these tags (``metadata["tags"]``) are
            never compressed.
        protect_tools: tool calls to these tools, and their results, are never
            compressed.
        protect: any callable ``Msg -> bool``; True protects the message.
        model_timeout: seconds one summarization model call may take before the
            offline summarizer is used instead.
        token_counter: the counter used for the budget.

    Raises:
        TypeError: a field has the wrong type.
        ValueError: a field is out of range or inconsistent with another.
    """

    msg_threshold: int = 100
    max_token: int = 131072
    token_ratio: float = 0.75
    last_keep: int | None = None
    large_payload_threshold: int = 5120
    offload_preview: int = 200
    min_consecutive_tool_messages: int = 6
    current_round_ratio: float = 0.3
    min_compression_tokens: int = 5000
    summary_ratio: float = 0.4
    summary_max_tokens: int = 12288
    prompts: Mapping[str, str] = dataclasses.field(default_factory=dict)
    protect_roles: frozenset[str] = frozenset()
    protect_names: frozenset[str] = frozenset()
    protect_tags: frozenset[str] = frozenset({"protected"})
    protect_tools: frozenset[str] = frozenset()
    protect: Callable[[Msg], bool] | None = None
    model_timeout: float = 30.0
    token_counter: TokenCounter = dataclasses.field(default_factory=EstimateTokenCounter)
    _derived_keep: bool = dataclasses.field(default=False, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _positive_int("msg_threshold", self.msg_threshold, minimum=2)
        if self.last_keep is None:
            object.__setattr__(self, "last_keep", min(50, self.msg_threshold // 2))
            object.__setattr__(self, "_derived_keep", True)

        _positive_int("max_token", self.max_token, minimum=256)
        _ratio("token_ratio", self.token_ratio)
        _positive_int("last_keep", self.last_keep, minimum=0)
        _positive_int("large_payload_threshold", self.large_payload_threshold, minimum=64)
        _positive_int("offload_preview", self.offload_preview, minimum=0)
        _positive_int(
            "min_consecutive_tool_messages", self.min_consecutive_tool_messages, minimum=2
        )
        _ratio("current_round_ratio", self.current_round_ratio)
        _positive_int("min_compression_tokens", self.min_compression_tokens, minimum=0)
        _ratio("summary_ratio", self.summary_ratio)
        _positive_int("summary_max_tokens", self.summary_max_tokens, minimum=16)
        if self.keep_last >= self.msg_threshold:
            raise ValueError(
                f"AutoContextConfig.last_keep ({self.last_keep}) must be smaller than "
                f"msg_threshold ({self.msg_threshold}), or no pass could ever get under "
                "the message threshold"
            )
        if self.offload_preview >= self.large_payload_threshold:
            raise ValueError(
                f"AutoContextConfig.offload_preview ({self.offload_preview}) must be smaller "
                f"than large_payload_threshold ({self.large_payload_threshold})"
            )
        if not isinstance(self.prompts, Mapping):
            raise TypeError(
                f"AutoContextConfig.prompts must be a mapping, got {type(self.prompts).__name__}"
            )
        unknown = sorted(set(self.prompts) - _KNOWN_PROMPTS)
        if unknown:
            raise ValueError(
                f"AutoContextConfig.prompts has unknown strategy names {unknown}; "
                f"known: {sorted(_KNOWN_PROMPTS)}"
            )
        for key, text in self.prompts.items():
            if not isinstance(text, str) or not text.strip():
                raise ValueError(f"AutoContextConfig.prompts[{key!r}] must be a non-empty string")
        object.__setattr__(self, "prompts", MappingProxyType(dict(self.prompts)))
        for name in ("protect_roles", "protect_names", "protect_tags", "protect_tools"):
            object.__setattr__(self, name, _str_set(name, getattr(self, name)))
        if self.protect is not None and not callable(self.protect):
            raise TypeError(
                f"AutoContextConfig.protect must be callable, got {type(self.protect).__name__}"
            )
        timeout = self.model_timeout
        if isinstance(timeout, bool) or not isinstance(timeout, int | float):
            raise TypeError(
                f"AutoContextConfig.model_timeout must be a number, got {type(timeout).__name__}"
            )
        if not timeout > 0 or math.isinf(timeout):
            raise ValueError(f"AutoContextConfig.model_timeout must be > 0 seconds, got {timeout}")
        counter = self.token_counter
        if not (
            callable(getattr(counter, "count", None))
            and callable(getattr(counter, "count_msgs", None))
        ):
            raise TypeError(
                "AutoContextConfig.token_counter must have count(text) and count_msgs(msgs), "
                f"got {type(counter).__name__}"
            )
        # Every numeric field has a declared range, upper bound included (actormem._settings).
        check_fields(self, AUTOCONTEXT_FIELDS, "AutoContextConfig", error=ValueError)

    @property
    def token_budget(self) -> int:
        """The token count at which compression starts and under which a pass stops."""
        return int(self.max_token * self.token_ratio)

    def prompt_for(self, strategy: str) -> str:
        """Return the instruction for ``strategy`` (the override or the default).

        Args:
            strategy: a key of :data:`DEFAULT_PROMPTS`.

        Returns:
            The prompt text.

        Raises:
            KeyError: no prompt exists for ``strategy``.
        """
        if strategy in self.prompts:
            return self.prompts[strategy]
        return DEFAULT_PROMPTS[strategy]

    def replace(self, **changes: Any) -> AutoContextConfig:
        """Return a copy with ``changes`` applied (and validated).

        Args:
            **changes: field values to change.

        Returns:
            The new configuration.
        """
        if self._derived_keep and "msg_threshold" in changes and "last_keep" not in changes:
            changes["last_keep"] = None  # derived again from the new threshold
        return dataclasses.replace(self, **changes)

    @property
    def summary_cap(self) -> int:
        """The largest summary a pass writes, in tokens.

        ``summary_max_tokens``, but never more than a quarter of
        :attr:`token_budget`: a summary that took most of the budget would
        leave no room for the messages kept whole, and a pass could not get
        under the budget (``max_token=1024`` with ``summary_max_tokens``
        12,288 would otherwise ask for summaries bigger than the window).
        """
        return max(1, min(self.summary_max_tokens, self.token_budget // SUMMARY_BUDGET_SHARE))

    @property
    def keep_last(self) -> int:
        """``last_keep`` as an int (derived from ``msg_threshold`` when not given)."""
        assert self.last_keep is not None  # set by __post_init__
        return self.last_keep

    @classmethod
    def for_window(cls, window: int, **overrides: Any) -> AutoContextConfig:
        """Return a configuration scaled to a model with a ``window``-token context.

        Thresholds shrink with the window (a 8,192-token model gets
        ``last_keep=12``, ``msg_threshold=40``, large payloads from 2,048
        characters, summaries of at most 768 tokens); ``overrides`` win.

        Args:
            window: the model's context window in tokens (>= 1024).
            **overrides: any field to set explicitly.

        Returns:
            The configuration.

        Raises:
            ValueError: ``window`` is too small, or an override is invalid.
        """
        if isinstance(window, bool) or not isinstance(window, int) or window < 1024:
            raise ValueError(f"for_window needs a window of at least 1024 tokens, got {window!r}")
        scale = min(1.0, window / 131072)
        fields: dict[str, Any] = {
            "max_token": window,
            "token_ratio": 0.75,
            "msg_threshold": max(20, min(100, round(window / 205))),
            "last_keep": max(6, min(50, round(window / 680))),
            "large_payload_threshold": max(1024, min(5120, round(window / 4))),
            "offload_preview": 200 if window >= 16384 else 120,
            "min_compression_tokens": max(256, round(5000 * scale)),
            "summary_max_tokens": max(128, min(12288, window * 3 // 32)),
        }
        fields.update(overrides)
        return cls(**fields)

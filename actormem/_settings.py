"""The declared range of every number the runtime's own settings accept.

The store's and the recorder's numbers have theirs in
:mod:`actormem.store._limits`; this module does the same for the configs
that enter the runtime (:class:`~actormem.compress.AutoContextConfig`,
:class:`~actormem.journal.JournalConfig`, :class:`~actormem.ui.UIConfig`,
the agent's arguments), so a value that would fail later -- a NaN or
infinite timeout, a threshold of 10**30 -- is refused where it enters,
naming the field.  The lower bounds are the ones each config already
checked; the upper ones are what the parts they feed can take (a timeout
fits a thread wait, a count a list, a size an allocation).  Tests walk
these tables and check that every numeric field of each config has a
declared range.

:data:`CALL_ARGS` does the same for the numbers given to one call
(``flush(timeout=...)``, ``format_for_injection(query, max_tokens)``):
``flush(timeout=float("nan"))`` returned at once as if everything were
committed, ``on_idle(nan)`` raised an empty ``TimeoutError``, and
``working_memory(-1)`` answered ``""``.  :func:`check_arg` refuses them
with a ``ValueError`` naming the call and the parameter.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, TypeVar

from actormem.store._limits import MAX_LIMIT, Span, check_fields

__all__ = [
    "AGENT_ARGS",
    "AUTOCONTEXT_FIELDS",
    "CALL_ARGS",
    "DEFAULT_MAX_REPLY_BYTES",
    "JOURNAL_FIELDS",
    "OPENAI_ARGS",
    "UI_FIELDS",
    "check_arg",
    "check_fields",
]

T = TypeVar("T")

_RATIO: Final = Span(0.0, 1.0, lo_open=True)
_TIMEOUT: Final = Span(0.0, 7 * 86_400.0, lo_open=True, note="seconds, up to a week")
_COUNT: Final = 10_000_000
_BYTES: Final = 2**31

#: :class:`~actormem.compress.AutoContextConfig`.
AUTOCONTEXT_FIELDS: Final[Mapping[str, Span]] = {
    "msg_threshold": Span(2, _COUNT, integer=True),
    "max_token": Span(256, 1_000_000_000, integer=True),
    "token_ratio": _RATIO,
    "last_keep": Span(0, _COUNT - 1, integer=True, optional=True),  # below msg_threshold
    "large_payload_threshold": Span(64, _BYTES, integer=True),
    "offload_preview": Span(0, _BYTES - 1, integer=True),  # below the threshold
    "min_consecutive_tool_messages": Span(2, _COUNT, integer=True),
    "current_round_ratio": _RATIO,
    "min_compression_tokens": Span(0, 1_000_000_000, integer=True),
    "summary_ratio": _RATIO,
    "summary_max_tokens": Span(16, _COUNT, integer=True),
    "model_timeout": _TIMEOUT,
}

#: :class:`~actormem.journal.JournalConfig`.
JOURNAL_FIELDS: Final[Mapping[str, Span]] = {
    "log_max_entries": Span(2, _COUNT, integer=True),
    "log_max_bytes": Span(1_000, _BYTES, integer=True),
    "log_keep_entries": Span(0, _COUNT - 1, integer=True),  # below log_max_entries
    "entry_max_chars": Span(80, _COUNT, integer=True),
    "summary_tokens": Span(20, _COUNT, integer=True),
    "context_max_tokens": Span(40, _COUNT, integer=True),
    "context_log_entries": Span(0, 1_000_000, integer=True),
    "journal_line_chars": Span(40, 1_000_000, integer=True),
    "dream_lookback_days": Span(1, 36_500, integer=True),
    "dream_interval_seconds": Span(0.0, 365 * 86_400.0, optional=True),
    "memory_max_items": Span(1, 1_000_000, integer=True),
    "dream_duplicate_threshold": _RATIO,
    "dream_consolidate_threshold": _RATIO,
    "model_timeout": Span(0.001, 7 * 86_400.0, note="seconds, up to a week"),
}

#: :class:`~actormem.ui.UIConfig`.
UI_FIELDS: Final[Mapping[str, Span]] = {
    "port": Span(0, 65_535, integer=True),
    "ring": Span(10, _COUNT, integer=True),
    "read_timeout": Span(0.0, 3_600.0, lo_open=True, note="seconds, up to an hour"),
}

#: The numeric arguments of :class:`~actormem.agent.ReActAgent`.
AGENT_ARGS: Final[Mapping[str, Span]] = {
    "max_iters": Span(1, 10_000, integer=True),
    "inject_max_tokens": Span(1, _COUNT, integer=True),
    "model_timeout": Span(0.0, 7 * 86_400.0, lo_open=True, optional=True),
}

#: The numeric arguments of :class:`~actormem.models.openai.OpenAIChatModel`.
OPENAI_ARGS: Final[Mapping[str, Span]] = {
    "timeout": _TIMEOUT,
    "total_timeout": Span(0.0, 7 * 86_400.0, lo_open=True, optional=True),
    "max_retries": Span(0, 100, integer=True),
    "backoff": Span(0.0, 3_600.0),
    "max_backoff": Span(0.0, 86_400.0),
    "max_reply_bytes": Span(1_024, _BYTES, integer=True),
}

#: The default of ``max_reply_bytes`` (chat model and embedder): 32 MiB, far
#: above any chat reply or embeddings batch, far below what hurts the process.
DEFAULT_MAX_REPLY_BYTES: Final = 32 * 2**20

#: The numeric arguments of single calls of the public API, by parameter name
#: (``MemoryRuntime.flush/on_idle/on_session_end/compress_now/close``,
#: ``retrieve``, ``format_for_injection``, ``working_memory``, the journal's
#: ``entries/context/sync``, the models' ``chat/stream``, the UI server's
#: ``wait/stop``).  A timeout of ``None`` waits without a limit.
CALL_ARGS: Final[Mapping[str, Span]] = {
    "timeout": Span(0.0, 7 * 86_400.0, optional=True, note="seconds, up to a week"),
    "max_tokens": Span(1, _COUNT, integer=True),
    "limit": Span(1, MAX_LIMIT, integer=True),
    "lookback_days": Span(1, 36_500, integer=True, optional=True),
    # the same names where None means "the config's default" or "all"
    "max_tokens?": Span(1, _COUNT, integer=True, optional=True),
    "limit?": Span(0, _COUNT, integer=True, optional=True),
}


def check_arg(call: str, name: str, value: T, *, kind: str | None = None) -> T:
    """Return ``value`` if it is in the range :data:`CALL_ARGS` gives ``name``.

    Args:
        call: the call, as errors name it (``"MemoryRuntime.flush"``).
        name: the parameter.
        value: what was given.
        kind: the entry of :data:`CALL_ARGS` when it is not ``name``
            (``"max_tokens?"``: ``None`` accepted).

    Raises:
        ValueError: ``"MemoryRuntime.flush(timeout=...) must be a number in
            [0, 604800] (seconds, up to a week) or None, got nan"``.
    """
    CALL_ARGS[kind or name].check(value, f"{call}({name}=...)")
    return value

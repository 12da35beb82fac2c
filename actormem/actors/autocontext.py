"""The AutoContext compressor actor: keeps the working context within budget.

It listens to the short-term memory's stream.  ``MessageAdded`` events keep
a running count of messages and tokens; when either reaches its threshold
the actor runs a compression pass on its own thread, so ``add()`` never
waits for it:

1. read the working messages with their version (a request to the
   short-term actor, which never asks back, so there is no cycle);
2. :func:`actormem.compress.compress` computes "replace the first ``count``
   messages with ``replacement``";
3. apply it with ``ReplaceMessages(expected_version=...)``: messages added
   meanwhile are kept; if something else reshaped the list, the pass retries
   on the new base (three times, then ``CompressionFailed``).

Every replaced message is kept in the offload map (id -> originals), which
is this actor's saved state: ``reload(offload_id)`` returns them, and
:meth:`history` rebuilds the full original conversation by expanding
summaries and offload references recursively.  When the short-term memory
is cleared, the offloads that no remaining working message reaches are
dropped, so the map holds the current conversation, not every past one.

A pass that cannot reach the budget says why (``CompressionSkipped``) and
is not retried until the context has grown by 10% or 10 messages.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, Final

import msgspec
import structlog

from actormem.actors._supervisor import SupervisedActor, Supervisor
from actormem.compress import (
    OFFLOADED,
    SUMMARIZED,
    SUMMARY,
    AutoContextConfig,
    CompressionOutcome,
    ExtractiveSummarizer,
    ModelSummarizer,
    Summarizer,
    compress,
)
from actormem.events import (
    CompressionFailed,
    CompressionSkipped,
    CompressionStarted,
    ContextCompressed,
    Event,
    GetMessages,
    GetState,
    LoadState,
    MemoryCleared,
    MessageAdded,
    MessagesDeleted,
    MessagesReplaced,
    ModelFallback,
    ReplaceMessages,
)
from actormem.messages import Msg, new_id
from actormem.models.base import ChatModel

__all__ = [
    "AUTOCONTEXT",
    "CONTEXT_RELOAD",
    "AutoContextActor",
    "CompressNow",
    "CompressorState",
    "GetHistory",
    "OffloadNotFoundError",
    "ReloadOffload",
    "context_reload_tool",
    "parse_context_reload_args",
]

log = structlog.get_logger(__name__)

#: The actor's name: the ``source`` of its events.
AUTOCONTEXT: Final = "autocontext"
#: The name of the tool that loads compressed-away messages back.
CONTEXT_RELOAD: Final = "context_reload"
_RETRIES: Final = 3
#: Compression events kept in the saved state (the newest).
_MAX_LOGGED: Final = 200


class OffloadNotFoundError(KeyError):
    """``reload`` was given an offload id that this memory never created."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown offload id"


class CompressNow(msgspec.Struct, frozen=True, tag=True, tag_field="cmd"):
    """Run a pass now if the context is over budget (no hold-off after a failed pass)."""


class ReloadOffload(msgspec.Struct, frozen=True, tag=True, tag_field="cmd"):
    """Return the original messages of ``offload_id``."""

    offload_id: str


class GetHistory(msgspec.Struct, frozen=True, tag=True, tag_field="cmd"):
    """Return the original conversation: working messages with every offload expanded."""


class CompressorState(msgspec.Struct):
    """The compressor's saved state."""

    offloads: dict[str, list[Msg]] = msgspec.field(default_factory=dict)
    compressions: list[ContextCompressed] = msgspec.field(default_factory=list)


class AutoContextActor(SupervisedActor):
    """See the module docstring.

    Args:
        supervisor: restarts this actor when a command fails.
        publish: where events go.
        stm: the short-term memory actor's supervisor (read and replace).
        config: budget and strategy settings.
        model: summarizes with this model (offline extractive summarizer if None).
        state: the state to start from.
        on_offload: called with ``(offload_id, originals)`` for every new
            offload (the runtime copies them to the long-term store).
    """

    def __init__(
        self,
        supervisor: Supervisor | None,
        publish: Callable[[Event], None],
        stm: Supervisor,
        config: AutoContextConfig,
        model: ChatModel | None = None,
        state: CompressorState | None = None,
        on_offload: Callable[[str, tuple[Msg, ...]], None] | None = None,
    ) -> None:
        super().__init__(supervisor)
        self._publish = publish
        self._stm = stm
        self._config = config
        self._counter = config.token_counter
        self._summarizer: Summarizer = (
            ModelSummarizer(model, config)
            if model is not None
            else ExtractiveSummarizer(self._counter)
        )
        st = state or CompressorState()
        self._offloads: dict[str, list[Msg]] = dict(st.offloads)
        self._compressions: list[ContextCompressed] = list(st.compressions)
        self._on_offload = on_offload
        self._count = 0
        self._tokens = 0
        self._dirty = True  # running totals must be re-read from the short-term memory
        self._hold_until: tuple[int, int] | None = None  # (messages, tokens) after a failed pass

    def restart_state(self) -> CompressorState:
        return CompressorState(offloads=dict(self._offloads), compressions=list(self._compressions))

    # -- commands ------------------------------------------------------------------

    def handle(self, cmd: Any) -> Any:
        match cmd:
            case MessageAdded(msg=msg):
                if not self._dirty:
                    self._count += 1
                    self._tokens += self._counter.count_msgs([msg])
                self._check()
                return None
            case MessagesReplaced() | MessagesDeleted():
                self._dirty = True
                self._hold_until = None
                return None
            case MemoryCleared():
                self._dirty = True
                self._hold_until = None
                self._drop_unreachable_offloads()
                return None
            case CompressNow():
                return self._run_pass()
            case ReloadOffload(offload_id=oid):
                return self._reload(oid)
            case GetHistory():
                _, msgs = self._stm.ask(GetMessages())
                return self._expand(msgs, set())
            case GetState():
                return self.restart_state()
            case LoadState(state=state):
                st = (
                    state
                    if isinstance(state, CompressorState)
                    else msgspec.convert(state, CompressorState)
                )
                # Keep offloads made meanwhile (a pass can run between the short-term
                # memory's load and this one): a summary must never lose its originals.
                self._offloads = {**st.offloads, **self._offloads}
                self._compressions = list(st.compressions)[-_MAX_LOGGED:]
                self._dirty = True
                return None
        raise TypeError(f"compressor got an unknown command {type(cmd).__name__}")

    # -- budget ----------------------------------------------------------------------

    def _refresh(self) -> None:
        _, msgs = self._stm.ask(GetMessages())
        self._count = len(msgs)
        self._tokens = self._counter.count_msgs(msgs)
        self._dirty = False

    def _check(self) -> None:
        if self._dirty:
            self._refresh()
        cfg = self._config
        if self._count < cfg.msg_threshold and self._tokens < cfg.token_budget:
            return
        if self._hold_until is not None:
            n, t = self._hold_until
            if self._count < n and self._tokens < t:
                return
        self._run_pass()

    # -- a pass --------------------------------------------------------------------------

    def _run_pass(self) -> CompressionOutcome | None:
        cfg = self._config
        for _attempt in range(_RETRIES):
            version, msgs = self._stm.ask(GetMessages())
            tokens = self._counter.count_msgs(msgs)
            if len(msgs) < cfg.msg_threshold and tokens < cfg.token_budget:
                self._count, self._tokens, self._dirty = len(msgs), tokens, False
                return None
            pass_id = new_id()[:12]
            self._publish(
                CompressionStarted(
                    source=AUTOCONTEXT,
                    pass_id=pass_id,
                    messages=len(msgs),
                    tokens=tokens,
                    base_version=version,
                )
            )
            t0 = time.perf_counter()
            try:
                outcome = compress(msgs, cfg, self._summarizer, self._counter)
            except Exception as exc:
                log.exception("compress.failed", pass_id=pass_id)
                self._publish(
                    CompressionFailed(source=AUTOCONTEXT, error=repr(exc), pass_id=pass_id)
                )
                self._hold(len(msgs), tokens)
                return None
            if not outcome.changed:
                self._publish(
                    CompressionSkipped(
                        source=AUTOCONTEXT, reason=outcome.reason, tokens=tokens, messages=len(msgs)
                    )
                )
                self._hold(len(msgs), tokens)
                return outcome
            applied = self._stm.ask(
                ReplaceMessages(
                    expected_version=version,
                    count=outcome.count,
                    replacement=outcome.replacement,
                    reason=f"compression {pass_id}",
                )
            )
            if applied == -1:
                log.info("compress.base_changed", pass_id=pass_id, version=version)
                continue
            self._commit(pass_id, outcome, (time.perf_counter() - t0) * 1e3)
            return outcome
        self._publish(
            CompressionFailed(
                source=AUTOCONTEXT,
                error=f"the working messages changed under {_RETRIES} passes in a row; will retry",
            )
        )
        return None

    def _hold(self, count: int, tokens: int) -> None:
        self._hold_until = (max(count + 10, int(count * 1.1)), int(tokens * 1.1) + 1)

    def _commit(self, pass_id: str, outcome: CompressionOutcome, ms: float) -> None:
        for oid, originals in outcome.offloads.items():
            self._offloads[oid] = list(originals)
            if self._on_offload is not None:
                try:
                    self._on_offload(oid, originals)
                except Exception:
                    log.exception("compress.offload_copy_failed", offload_id=oid)
        for a in outcome.applied:
            ev = ContextCompressed(
                source=AUTOCONTEXT,
                pass_id=pass_id,
                strategy=a.strategy,
                tokens_before=a.tokens_before,
                tokens_after=a.tokens_after,
                messages_replaced=a.messages_replaced,
                offload_ids=a.offload_ids,
                duration_ms=a.duration_ms,
                summarizer=a.summarizer,
            )
            self._compressions.append(ev)
            del self._compressions[:-_MAX_LOGGED]
            self._publish(ev)
            if a.fallback_error:
                log.warning("compress.model_fallback", error=a.fallback_error, strategy=a.strategy)
                self._publish(
                    ModelFallback(
                        source=AUTOCONTEXT,
                        component="summarizer",
                        error=a.fallback_error,
                        fallback="extractive",
                    )
                )
        if not outcome.within_budget:
            self._publish(
                CompressionSkipped(
                    source=AUTOCONTEXT,
                    reason=f"still over budget after the pass: {outcome.reason}",
                    tokens=outcome.tokens_after,
                    messages=outcome.messages_after,
                )
            )
            self._hold(outcome.messages_after, outcome.tokens_after)
        else:
            self._hold_until = None
        log.debug(
            "compress.pass",
            pass_id=pass_id,
            ms=round(ms, 2),
            before=outcome.tokens_before,
            after=outcome.tokens_after,
        )
        self._dirty = True

    # -- reload and history -----------------------------------------------------------------

    def _reload(self, oid: str) -> list[Msg]:
        if not isinstance(oid, str) or oid not in self._offloads:
            known = len(self._offloads)
            raise OffloadNotFoundError(
                f"no offloaded content with id {oid!r} ({known} offload(s) exist in this memory; "
                "ids look like the one quoted in the summary or offload reference)"
            )
        return list(self._offloads[oid])

    def _drop_unreachable_offloads(self) -> None:
        """Forget the originals that no working message leads to any more.

        Called when the short-term memory is cleared (a session ends): the
        summaries and references that pointed at those offloads are gone, so
        the map would otherwise keep every message of every past session for
        the life of the runtime (and write them into every session save).  The
        offloads the current working messages still reach (transitively) stay;
        with a long-term store, each offload was copied there when it was made.
        """
        if not self._offloads:
            return
        _, msgs = self._stm.ask(GetMessages())
        reachable: set[str] = set()
        self._expand(msgs, reachable)
        dropped = len(self._offloads) - len(reachable)
        if dropped:
            self._offloads = {k: v for k, v in self._offloads.items() if k in reachable}
            log.debug("compress.offloads_dropped", dropped=dropped, kept=len(self._offloads))

    def _expand(self, msgs: list[Msg], seen: set[str]) -> list[Msg]:
        out: list[Msg] = []
        for m in msgs:
            oid = m.metadata.get("offload_id")
            kind = m.metadata.get("actormem")
            if (
                kind in (SUMMARY, OFFLOADED, SUMMARIZED)
                and isinstance(oid, str)
                and oid in self._offloads
            ):
                if oid in seen:
                    continue
                seen.add(oid)
                out.extend(self._expand(self._offloads[oid], seen))
            else:
                out.append(m)
        return out


def parse_context_reload_args(arguments: Mapping[str, Any]) -> str:
    """The offload id of a ``context_reload`` call (its only argument).

    Raises:
        ValueError: a missing, unknown or mistyped argument (named).
    """
    missing = {"offload_id"} - set(arguments)
    unknown = set(arguments) - {"offload_id"}
    if missing or unknown:
        raise ValueError(
            f"{CONTEXT_RELOAD}: missing {sorted(missing)} / unknown {sorted(unknown)} "
            "argument(s); it takes exactly 'offload_id'"
        )
    oid = arguments["offload_id"]
    if not isinstance(oid, str) or not oid:
        raise ValueError(f"{CONTEXT_RELOAD}: 'offload_id' must be a non-empty string")
    return oid


def context_reload_tool() -> dict[str, Any]:
    """The ``context_reload`` tool definition (OpenAI function-calling format)."""
    return {
        "type": "function",
        "function": {
            "name": CONTEXT_RELOAD,
            "description": (
                "Load back the original messages that were compressed out of the context window. "
                "Use it when a summary or an '[offloaded ...]' reference in the conversation hides "
                "details you need (exact numbers, code, tool output). Pass the offload id quoted "
                "in that summary or reference."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "offload_id": {
                        "type": "string",
                        "description": "The id quoted in the summary or offload reference.",
                    }
                },
                "required": ["offload_id"],
                "additionalProperties": False,
            },
        },
    }

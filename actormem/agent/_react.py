"""ReActAgent: a reason-act loop with the memory runtime embedded.

Each turn (``reply(msg)``):

1. the user message goes to the short-term memory; the agent's status
   becomes ``in_flight`` (and the session is saved, when the agent has one,
   so a process killed mid-turn can be resumed);
2. each iteration: :meth:`MemoryHooks.before_reasoning` (compress if over
   budget, inject long-term memory in STATIC_CONTROL / BOTH), call the model
   with the tools (the user's, plus the memory tools and ``context_reload``
   that the runtime offers), store its reply; tool calls run and their
   results are stored as tool messages paired with the calls;
3. a reply without tool calls ends the turn: it is recorded to long-term
   memory (STATIC_CONTROL / BOTH), the status goes back to ``idle``, and
   the session is saved.  A save that fails raises
   :class:`AutosaveError` (carrying the turn's answer when it came after it):
   the caller learns that the session on disk is behind.

Self-annealing: when the model fails (after its own retries) the error is
recorded in long-term memory (when there is a store), the status says what
was in flight, what failed and what to do next, the session is saved, and
the reply explains it.  An agent restarted from that session continues the
interrupted task when the user says "continue".

With a journal (``MemoryRuntime(journal=...)``) the agent also keeps NOW.md
current -- the task and its next steps on start, each finished tool call as
a ``done:`` step, ``done`` on completion, ``error`` with recovery steps on a
failure -- and writes every user message, thought, tool call, tool result
and error to the activity log.  A process killed mid-task and restarted
without its session still finds the task in NOW.md: "continue" resumes it,
and the model sees what was already done.
"""

from __future__ import annotations

import asyncio
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import msgspec
import structlog

from actormem._door import check_settings
from actormem._settings import AGENT_ARGS
from actormem.agent._hooks import MemoryHooks, log_messages, message_entries
from actormem.agent.tools import Tool, ToolRegistry
from actormem.messages import MessageError, Msg, TextBlock, ToolUseBlock
from actormem.models.base import ChatModel, MalformedToolCallError, ModelError, ToolSpec
from actormem.session import SessionError
from actormem.state import StateModule

if TYPE_CHECKING:
    from actormem.journal import NowStatus
    from actormem.runtime import MemoryRuntime

__all__ = ["AgentStatus", "AutosaveError", "ReActAgent"]

log = structlog.get_logger(__name__)


class AutosaveError(SessionError):
    """The agent's automatic session save failed; the turn itself went through.

    Attributes:
        reply: the answer of the turn when the failed save came after it
            (None when it failed as the turn started).
    """

    def __init__(self, message: str, reply: Msg | None = None) -> None:
        super().__init__(message)
        self.reply = reply


_CONTINUE: Final = frozenset({"continue", "go on", "resume", "keep going", "carry on"})


class AgentStatus(msgspec.Struct):
    """What the agent is doing, saved with the session.

    Attributes:
        state: ``idle``, ``in_flight`` (a turn is running or was cut off) or
            ``error`` (the last turn failed).
        task: the user request of the turn in flight.
        task_msg_id: its message id.
        iteration: the reasoning iteration reached.
        error: what failed (type and message), when ``state`` is ``error``.
        traceback: a short traceback summary of the failure.
        next_step: what to do next, in words.
        updated_at: Unix time of the last change.
    """

    state: str = "idle"
    task: str = ""
    task_msg_id: str = ""
    iteration: int = 0
    error: str = ""
    traceback: str = ""
    next_step: str = ""
    updated_at: float = 0.0


class ReActAgent(StateModule):
    """An agent that reasons, calls tools and remembers.

    Args:
        name: the agent's name (its replies carry it).
        model: any :class:`~actormem.models.base.ChatModel`.
        memory: the memory runtime.
        tools: plain Python functions (schemas derived from their signatures
            and docstrings) or :class:`~actormem.agent.tools.Tool` objects.
        sys_prompt: the system prompt.
        max_iters: reasoning iterations per turn before giving up.
        session_id: when set, the agent saves the session (agent + memory) at
            the start and the end of every turn and on errors.
        inject_max_tokens: budget of the injected long-term memory block.
        model_timeout: per-call timeout passed to the model.
    """

    def __init__(
        self,
        name: str,
        model: ChatModel,
        memory: MemoryRuntime,
        *,
        tools: Sequence[Tool | Callable[..., Any]] = (),
        sys_prompt: str = "You are a helpful assistant.",
        max_iters: int = 10,
        session_id: str | None = None,
        inject_max_tokens: int = 800,
        model_timeout: float | None = None,
    ) -> None:
        super().__init__()
        check_settings(
            {
                "max_iters": max_iters,
                "inject_max_tokens": inject_max_tokens,
                "model_timeout": model_timeout,
            },
            AGENT_ARGS,
            "ReActAgent",
        )
        self.name = name
        self.sys_prompt = sys_prompt
        self.max_iters = max_iters
        self.status = AgentStatus()
        self.register_state("name")
        self.register_state("sys_prompt")
        self.register_state(
            "status",
            to_json=msgspec.to_builtins,
            from_json=lambda v: msgspec.convert(v, AgentStatus),
        )
        self.model = model
        object.__setattr__(self, "memory", memory)  # saved beside the agent, not inside it
        self.memory: MemoryRuntime
        self.session_id = session_id
        self.model_timeout = model_timeout
        self.registry = ToolRegistry(tools)
        self._memory_tools = {spec["function"]["name"] for spec in memory.tools()}
        clash = self._memory_tools & set(self.registry.names())
        if clash:
            raise ValueError(f"tool name(s) {sorted(clash)} are reserved by the memory runtime")
        self.hooks = MemoryHooks(memory, inject_max_tokens=inject_max_tokens, log_turns=False)
        self._done: list[str] = []

    @property
    def component_name(self) -> str:
        return "agent"

    # -- sessions ----------------------------------------------------------------------

    def save_session(self, session_id: str | None = None) -> Path | str:
        """Save the agent and its memory (components ``agent`` and ``runtime``).

        Returns:
            The file for JSON sessions, the location for PostgreSQL ones.

        Raises:
            SessionConflictError: another worker saved this PostgreSQL
                session since it was loaded (``load_session`` to continue).
        """
        sid = session_id or self.session_id
        if not sid:
            raise ValueError("no session id: pass one or create the agent with session_id=...")
        return self.memory.session.save(sid, {"agent": self, "runtime": self.memory})

    def load_session(self, session_id: str | None = None) -> bool:
        """Restore the agent and its memory; False when the session does not exist."""
        sid = session_id or self.session_id
        if not sid:
            raise ValueError("no session id: pass one or create the agent with session_id=...")
        return self.memory.session.load(sid, {"agent": self, "runtime": self.memory}, strict=False)

    def _autosave(self, reply: Msg | None = None) -> None:
        """Save the session when the agent has one; a failure is the caller's to see.

        Raises:
            AutosaveError: the save failed (``reply`` is the turn's answer, if any).
        """
        if not self.session_id:
            return
        try:
            self.save_session()
        except Exception as exc:
            log.error("agent.autosave_failed", session_id=self.session_id, error=repr(exc))
            raise AutosaveError(
                f"the session {self.session_id!r} could not be saved: {exc}", reply
            ) from exc

    def _set_status(self, **changes: Any) -> None:
        self.status = msgspec.structs.replace(self.status, updated_at=time.time(), **changes)

    # -- the loop --------------------------------------------------------------------------

    def tool_specs(self) -> list[ToolSpec]:
        """Every tool the model is offered: the user's and the memory's."""
        return [*self.registry.specs(), *self.memory.tools()]

    def reply(self, msg: Msg | str) -> Msg:
        """Answer one user message (see the module docstring for the steps).

        Args:
            msg: the user message (a string becomes ``Msg.user``).

        Returns:
            The final assistant message of the turn (on a model failure, an
            assistant message that explains it; see ``status``).

        Raises:
            AutosaveError: the agent has a session and saving it failed (the
                error's ``reply`` is the answer when the turn got that far).
        """
        user = Msg.user(msg) if isinstance(msg, str) else msg
        resuming = self._is_continue(user)
        if resuming:
            now = self._journal_now()
            if self.status.state in ("in_flight", "error") and self.status.task:
                task, task_id = self.status.task, self.status.task_msg_id
                why = self.status.error or "the process stopped"
            else:  # no session state: the task comes from NOW.md (the amnesia case)
                assert now is not None
                task, task_id = now.objective, ""
                why = now.note or "the process stopped"
            self._done = [s for s in (now.next_steps if now else ()) if s.startswith("done:")]
            note = Msg.user(
                f"(The previous attempt at this task was interrupted: {why}. "
                f"Continue the task: {task})",
                actormem="resume",
            )
            self.memory.add(note)
            turn = [note]
            self._update_now(
                task,
                [*self._done, "continue the task from the steps already done"],
                note=f"resumed after: {why}",
                sync=False,  # the turn's end syncs it (see _turn)
            )
            self._log("SYSTEM", f"resuming the task after: {why}")
        else:
            self.memory.add(user)
            task, task_id = user.text, user.id
            turn = [user]
            self._done = []
            # NOW and the user's message commit together (one transaction);
            # synced in the background: the turn's end syncs it (see _turn)
            self._update_now(
                task,
                ["work out the answer, using tools as needed", "reply"],
                also_log=message_entries([user]),
                sync=False,
            )
        self._set_status(
            state="in_flight",
            task=task,
            task_msg_id=task_id,
            iteration=0,
            error="",
            traceback="",
            next_step="answer the task; if interrupted, say 'continue' to resume",
        )
        self._autosave()
        return self._turn(turn)

    def _turn(self, turn: list[Msg]) -> Msg:
        """The turn's loop; what it wrote to the journal is synced when it returns.

        The turn's start was written with ``sync=False`` (its sync overlaps the
        model call); the end's synced write covers it, and on any other way
        out this waits for it.
        """
        try:
            return self._loop(turn)
        finally:
            if self.memory.journal is not None:
                try:
                    self.memory.sync_journal()
                except Exception:
                    log.exception("agent.journal_failed", call="sync_journal")

    def _is_continue(self, user: Msg) -> bool:
        if user.text.strip().lower().rstrip(".!") not in _CONTINUE:
            return False
        if self.status.state in ("in_flight", "error") and self.status.task:
            return True
        now = self._journal_now()
        return now is not None and now.state in ("in_flight", "error") and bool(now.objective)

    # -- journal (NOW and LOG); failures are logged, never raised into the turn ------------

    def _journal_now(self) -> NowStatus | None:
        if self.memory.journal is None:
            return None
        try:
            return self.memory.now()
        except Exception:
            log.exception("agent.journal_failed", call="now")
            return None

    def _update_now(
        self,
        objective: str,
        next_steps: Sequence[str],
        *,
        state: str = "in_flight",
        note: str = "",
        also_log: Sequence[tuple[str, str, dict[str, Any]]] = (),
        sync: bool = True,
    ) -> None:
        if self.memory.journal is None:
            return
        try:
            self.memory.update_now(
                objective, next_steps, state=state, note=note, also_log=also_log, sync=sync
            )
        except Exception:
            log.exception("agent.journal_failed", call="update_now")
            for entry_type, text, meta in also_log:  # the entries still go to the log
                self._log(entry_type, text, **meta)

    def _log(self, entry_type: str, text: str, **metadata: Any) -> None:
        if self.memory.journal is None:
            return
        try:
            self.memory.log(entry_type, text, agent=self.name, **metadata)
        except Exception:
            log.exception("agent.journal_failed", call="log")

    def _log_msgs(self, msgs: Sequence[Msg]) -> None:
        log_messages(self.memory, msgs)

    def _context(self) -> list[Msg]:
        return [Msg.system(self.sys_prompt), *self.hooks.before_reasoning()]

    def _loop(self, turn: list[Msg]) -> Msg:
        specs = self.tool_specs()
        for iteration in range(1, self.max_iters + 1):
            self._set_status(iteration=iteration)
            context = self._context()
            try:
                out = self.model.chat(context, tools=specs or None, timeout=self.model_timeout)
            except MalformedToolCallError as exc:  # the model sees its mistake and retries
                self._give_back(exc, turn)
                continue
            except Exception as exc:  # any model failure: anneal, never a traceback
                return self._anneal(exc, turn)
            out = msgspec.structs.replace(out, name=out.name or self.name)
            try:
                self.memory.add(out)
            except MessageError as exc:  # e.g. tool arguments no session could hold
                self._refuse(out, exc, turn)
                continue
            turn.append(out)
            if not out.tool_uses:  # logged with the closing NOW update (one transaction)
                return self._finish(turn, out, log_final=True)
            self._log_msgs([out])
            results = self._run_tools(out.tool_uses)
            for result in results:
                self.memory.add(result)
                turn.append(result)
            self._log_msgs(results)
            if self.memory.journal is not None:
                self._note_done(out.tool_uses, results)
        final = Msg.assistant(
            f"I stopped after {self.max_iters} reasoning steps without a final answer.",
            name=self.name,
        )
        self.memory.add(final)
        turn.append(final)
        self._log_msgs([final])
        return self._finish(turn, final)

    def _give_back(self, exc: MalformedToolCallError, turn: list[Msg]) -> None:
        """Store the malformed calls with one error result each, so the model can correct them.

        The calls keep their ids and names (arguments ``{}``: the raw text is in
        the error result); the usable calls of the same reply are not run,
        because the model may have meant them together with the broken ones.
        """
        blocks: list[TextBlock | ToolUseBlock] = [TextBlock(exc.text)] if exc.text else []
        blocks += [ToolUseBlock(id=c.id, name=c.name, input={}) for c in exc.calls]
        call_msg = Msg(
            role="assistant",
            content=tuple(blocks),
            name=self.name,
            metadata={"actormem": "malformed"},
        )
        cut = (
            " Your reply was cut off at the token limit: write shorter arguments."
            if exc.truncated
            else ""
        )
        results = []
        for c in exc.calls:
            if c.problem:
                text = (
                    f"Error: the call was not run because {c.problem}. You wrote: "
                    f"{c.arguments[:500]!r}. Call {c.name} again with arguments as one JSON "
                    f"object.{cut}"
                )
            else:
                text = "Error: not run because another call in the same reply was malformed."
            results.append(Msg.tool_result(c.id, text, is_error=True, name=c.name))
        log.warning(
            "agent.tool_call_malformed",
            agent=self.name,
            calls=len(exc.calls),
            truncated=exc.truncated,
            iteration=self.status.iteration,
        )
        for m in (call_msg, *results):
            self.memory.add(m)
            turn.append(m)
        self._log_msgs([call_msg, *results])

    def _refuse(self, out: Msg, exc: MessageError, turn: list[Msg]) -> None:
        """A reply the memory refused: keep its text and calls (arguments ``{}``) and
        give each call an error result naming the problem, so the model can retry."""
        blocks: list[TextBlock | ToolUseBlock] = [TextBlock(out.text)] if out.text else []
        blocks += [ToolUseBlock(id=str(c.id), name=str(c.name), input={}) for c in out.tool_uses]
        if not blocks:
            blocks = [TextBlock("(a reply the memory could not store)")]
        kept = Msg(
            role="assistant",
            content=tuple(blocks),
            name=self.name,
            metadata={"actormem": "refused"},
        )
        text = f"Error: the call was not run because its message was refused: {exc}"
        results = [
            Msg.tool_result(str(c.id), text, is_error=True, name=str(c.name)) for c in out.tool_uses
        ]
        log.warning("agent.reply_refused", agent=self.name, error=str(exc)[:300])
        for m in (kept, *results):
            self.memory.add(m)
            turn.append(m)
        self._log_msgs([kept, *results])

    def _note_done(self, calls: Sequence[ToolUseBlock], results: Sequence[Msg]) -> None:
        """Each finished tool call becomes a ``done:`` step of NOW (what a restart skips)."""
        for call, res in zip(calls, results, strict=False):
            out = res.tool_results[0].output if res.tool_results else res.text
            args = ", ".join(f"{k}={v!r}" for k, v in call.input.items())[:120]
            self._done.append(f"done: {call.name}({args}) -> {' '.join(out.split())[:160]}")
        self._update_now(
            self.status.task,
            [*self._done[-8:], "continue from these results to complete the task"],
        )

    def _run_tools(self, calls: Sequence[ToolUseBlock]) -> list[Msg]:
        results = []
        for call in calls:
            if call.name in self._memory_tools:
                try:
                    text = self.memory.call_tool(call.name, dict(call.input))
                    results.append(Msg.tool_result(call.id, text, name=call.name))
                except Exception as exc:  # bad arguments, a failing store or embedder
                    log.warning("agent.memory_tool_failed", tool=call.name, error=repr(exc))
                    results.append(
                        Msg.tool_result(call.id, f"Error: {exc}", is_error=True, name=call.name)
                    )
            else:
                results.append(self.registry.execute(call))
        return results

    def _finish(self, turn: list[Msg], final: Msg, *, log_final: bool = False) -> Msg:
        self.hooks.after_reply(turn)
        self._update_now(
            self.status.task,
            ["wait for the next request"],
            state="done",
            note=f"answered: {' '.join(final.text.split())[:200]}",
            also_log=message_entries([final]) if log_final else (),
        )
        self._set_status(state="idle", task="", task_msg_id="", next_step="")
        self._autosave(final)
        return final

    def _anneal(self, exc: BaseException, turn: list[Msg]) -> Msg:
        """A failed model call: say so, record it, and leave the task ready to resume.

        What the model will read later -- the long-term episode, NOW's note,
        LOG.md and ``status.error`` (the resume note quotes it) -- names only
        the error's class, problem, status and endpoint
        (:meth:`ModelError.summary`): a broken server's error page is text
        anyone can write, and must not become a memory.  The user's reply,
        the structlog event and ``status.traceback`` keep the full message.
        """
        summary = f"{type(exc).__name__}: {exc}"
        safe = exc.summary() if isinstance(exc, ModelError) else type(exc).__name__
        tb = "".join(traceback.format_exception(exc, limit=3))[-1500:]
        frames = "".join(traceback.format_tb(exc.__traceback__, limit=3))[-1000:]
        log.error("agent.model_failed", agent=self.name, error=summary, task=self.status.task[:200])
        self._log("ERROR", f"model call failed: {safe}", traceback=frames)
        self._update_now(
            self.status.task,
            [
                *self._done[-8:],
                "review the error in LOG.md",
                "say 'continue' to retry once the model is reachable",
            ],
            state="error",
            note=safe,
        )
        self._set_status(
            state="error",
            error=safe,
            traceback=tb,
            next_step="say 'continue' to retry the task once the model is reachable",
        )
        store = self.memory.store
        if store is not None:
            try:
                store.add(
                    self.memory.namespace,
                    f"Error while working on '{self.status.task[:300]}': {safe}",
                    kind="episode",
                    tags=("error", "agent"),
                    importance=0.6,
                )
            except Exception:
                log.exception("agent.error_record_failed")
        reply = Msg.assistant(
            f"I could not finish because the model call failed ({summary}). "
            "Say 'continue' and I will pick the task up where it stopped.",
            name=self.name,
            actormem="error",
        )
        self._autosave(reply)
        return reply

    async def areply(self, msg: Msg | str) -> Msg:
        """Async :meth:`reply` (runs in a worker thread; the event loop stays free)."""
        return await asyncio.to_thread(self.reply, msg)

"""``actormem chat``: a memory-backed agent on any OpenAI-compatible server.

Kept apart from :mod:`actormem.cli` (which grew past 800 lines) because it has
its own concerns: the request fields a local model needs (``--max-tokens``,
``--temperature``, ``--extra-body``), one deadline per model call, and log
lines that never print over the ``you>`` prompt.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import threading
from collections.abc import Iterator
from typing import Any

from rich.console import Console
from rich.text import Text

from actormem.runtime import MemoryRuntime

__all__ = ["UsageError", "cmd_chat"]


#: Longest --timeout accepted (the models' own limit for a call).
_MAX_TIMEOUT = 7 * 86_400.0


class UsageError(Exception):
    """A command line that cannot work; the CLI prints it without a traceback."""


def cmd_chat(args: argparse.Namespace, console: Console) -> int:
    import os

    from actormem.agent import ReActAgent
    from actormem.models.openai import OpenAIChatModel
    from actormem.recorder import LongTermMemoryMode
    from actormem.store import Namespace

    api_key = args.api_key or os.environ.get("OPENAI_API_KEY")
    extra = _chat_body(args)
    # --timeout bounds a whole call, retries included: a hung server costs one
    # timeout per turn, not one per attempt.
    model = OpenAIChatModel(
        args.base_url,
        args.model,
        api_key=api_key,
        timeout=args.timeout,
        total_timeout=args.timeout,
        extra_body=extra,
    )
    mode = {
        "static": LongTermMemoryMode.STATIC_CONTROL,
        "agent": LongTermMemoryMode.AGENT_CONTROL,
        "both": LongTermMemoryMode.BOTH,
    }[args.mode]
    runtime = MemoryRuntime(
        session_dir=args.dir,
        sessions=args.sessions,
        autocontext=True,
        model=model,
        store=args.db,
        long_term=mode,
        namespace=Namespace(user_id=args.user, agent_id="chat"),
    )
    with runtime:
        agent = ReActAgent(
            "assistant", model, runtime, session_id=args.session, sys_prompt=args.system
        )
        if args.session and agent.load_session():
            console.print(
                Text(f"resumed session {args.session!r} ({runtime.size()} messages)", "dim")
            )
        console.print(Text("type /quit to leave, /save to save the session", "dim"))
        while True:
            try:
                with _LOG_STREAM.held():  # log lines wait until the prompt is answered
                    line = input("you> ")
            except EOFError:
                break
            if line.strip() in ("/quit", "/exit"):
                break
            if line.strip() == "/save":
                if args.session:
                    console.print(Text(f"saved {agent.save_session()}", "dim"))
                else:
                    console.print(Text("no --session given: nothing to save", "dim"))
                continue
            if not line.strip():
                continue
            out = agent.reply(line)
            console.print(Text.assemble((f"{agent.name}>", "bold"), " ", out.text))
            if out.metadata.get("finish_reason") == "length":
                console.print(Text(f"(the reply was cut at --max-tokens {args.max_tokens})", "dim"))
        # Each model call of the recorder is bounded by --timeout; extraction and
        # reconciliation may each take two attempts.
        runtime.flush(args.timeout * 4)
    return 0


def _chat_body(args: argparse.Namespace) -> dict[str, Any]:
    """The extra request fields of ``actormem chat``: --extra-body, then the named flags."""
    extra: dict[str, Any] = {}
    if args.extra_body:
        try:
            extra = json.loads(args.extra_body)
        except ValueError as exc:
            raise UsageError(f"--extra-body is not valid JSON: {exc}") from None
        if not isinstance(extra, dict):
            raise UsageError(
                f"--extra-body must be a JSON object, got {type(extra).__name__}: "
                f"{args.extra_body[:80]}"
            )
    if args.max_tokens is not None:
        if args.max_tokens < 0:
            raise UsageError(f"--max-tokens must be >= 0, got {args.max_tokens}")
        if args.max_tokens:
            extra["max_tokens"] = args.max_tokens
    if args.temperature is not None:
        if not 0 <= args.temperature <= 2:
            raise UsageError(f"--temperature must be from 0 to 2, got {args.temperature}")
        extra["temperature"] = args.temperature
    if not 0 < args.timeout <= _MAX_TIMEOUT:  # NaN fails this too
        raise UsageError(
            f"--timeout must be positive seconds up to {_MAX_TIMEOUT:g} (a week), "
            f"got {args.timeout}"
        )
    return extra


class _HeldStream:
    """stderr for log lines that never print over an input prompt.

    While :meth:`held` is active (``input("you> ")`` is waiting), lines are
    kept; they are written when the prompt has been answered, so a warning
    from background work (the recorder) never lands in the middle of the
    line the user is typing.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held = False
        self._lines: list[str] = []

    def write(self, text: str) -> int:
        with self._lock:
            if self._held:
                self._lines.append(text)
                return len(text)
        sys.stderr.write(text)
        return len(text)

    def flush(self) -> None:
        with self._lock:
            if self._held:
                return
        sys.stderr.flush()

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        with self._lock:
            self._held = True
        try:
            yield
        finally:
            with self._lock:
                self._held = False
                lines, self._lines = self._lines, []
            if lines:
                sys.stderr.write("".join(lines))
                sys.stderr.flush()


_LOG_STREAM = _HeldStream()

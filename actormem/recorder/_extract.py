"""Fact extraction: turns in, typed facts out.

Two extractors share one output type, :class:`ExtractedFact`:

* :class:`RuleExtractor` -- offline and deterministic (``_rules.py``): the
  user's first-person statements in many phrasings, across names, homes and
  moves, work, family, pets, diet, health, possessions, likes, hobbies,
  languages, education, relationships, plans and requests about how the
  assistant should answer; questions never become facts.  Single-valued facts
  carry a ``slot`` so that a correction replaces the earlier fact.
* :class:`ModelExtractor` -- asks a :class:`~actormem.models.base.ChatModel`
  for JSON facts (content, kind, importance, confidence, tags) with one call
  per batch of turns.  Output that is not the expected JSON is retried
  (``retries`` times, with the parse error quoted back), then
  :class:`ExtractionError` is raised.  Facts the conversation does not
  support are dropped (``_support.py``).

:func:`render_turn` turns a turn into the text of an ``episode`` memory.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Final, TypeVar

import structlog

from actormem.messages import Msg
from actormem.models.base import ChatModel, ModelTimeoutError
from actormem.models.gate import TurnGate, call_between_turns
from actormem.recorder._rules import RuleExtractor
from actormem.recorder._support import SupportChecker
from actormem.recorder._types import ExtractedFact

__all__ = [
    "EXTRACTION_PROMPT",
    "ExtractedFact",
    "ExtractionError",
    "ModelExtractor",
    "RuleExtractor",
    "ask_json",
    "facts_from_json",
    "last_question",
    "parse_json_reply",
    "render_turn",
    "reply_context",
    "speaker_label",
    "turn_speaker",
]

log = structlog.get_logger(__name__)

_T = TypeVar("_T")


class ExtractionError(ValueError):
    """A model's reply could not be used (not JSON, or not the expected shape)."""


# -- turns as text ----------------------------------------------------------------------


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = max(0, limit - head - 5)
    return f"{text[:head]} ... {text[-tail:]}" if tail else text[:limit]


def speaker_label(msg: Msg) -> str:
    """Who said ``msg``: the ``name`` of a user or assistant message, else its role."""
    name = " ".join(msg.name.split()) if msg.role in ("user", "assistant") else ""
    return name if name else msg.role


def render_turn(msgs: Sequence[Msg], max_chars: int = 4_000) -> str:
    """The text of a turn as ``speaker: text`` lines (tool calls and results abbreviated).

    The speaker is the message's ``name`` when it has one ("Andrew: ..."),
    else its role ("user: ..."), so the two people of a conversation stay
    apart.  System messages are left out.  The result is clipped to
    ``max_chars`` (head and tail kept).

    Args:
        msgs: The messages of the turn, in order.
        max_chars: The length limit.

    Returns:
        The text ("" when the turn holds no text).
    """
    lines: list[str] = []
    for m in msgs:
        if m.role == "system":
            continue
        text = m.text.strip()
        if text:
            lines.append(f"{speaker_label(m)}: {text}")
        for use in m.tool_uses:
            args = json.dumps(use.input, ensure_ascii=False, default=str)
            lines.append(f"{speaker_label(m)} called {use.name}({_clip(args, 200)})")
        for res in m.tool_results:
            label = res.name or res.tool_use_id
            lines.append(f"tool {label} returned: {_clip(res.output.strip(), 300)}")
    return _clip("\n".join(lines), max_chars)


_QUESTION_RE: Final = re.compile(r"[^.!?\n]*\?")
_MAX_CONTEXT_CHARS: Final = 160


def turn_speaker(msgs: Sequence[Msg]) -> str | None:
    """The one speaker of a turn (``speaker_label``), or None when several speak."""
    labels = {speaker_label(m) for m in msgs if m.role != "system"}
    return labels.pop() if len(labels) == 1 else None


def last_question(msgs: Sequence[Msg]) -> str:
    """The last question asked in a turn's text ("" when its last sentence is no question)."""
    text = " ".join(m.text for m in msgs if m.role in ("user", "assistant")).strip()
    if not text.endswith("?"):
        return ""
    found = _QUESTION_RE.findall(text)
    question = " ".join(found[-1].split()) if found else ""
    return question if len(question) <= _MAX_CONTEXT_CHARS else ""


def reply_context(asker: str, question: str) -> str:
    """The note an episode carries about the question it answers."""
    return f' (replying to {asker}: "{question}")'


# -- with a model -----------------------------------------------------------------------------

EXTRACTION_PROMPT: Final = """\
You maintain the long-term memory of an assistant. Read the conversation and \
extract the facts worth remembering in later conversations: who the user is, \
their preferences, plans, dates, decisions, and corrections of earlier facts.

Rules:
- One fact per item, self-contained and in the third person \
("User's sister lives in Lyon", not "she lives there").
- Skip greetings, small talk and anything only useful right now.
- Turn relative dates into absolute ones using today's date: {today}.
- kind is one of: fact, preference, procedure, episode.
- importance (how much it matters later) and confidence (how sure you are \
that the user meant it) are numbers from 0 to 1.
- Reply with only this JSON object and nothing else:
{{"facts": [{{"content": "...", "kind": "fact", "importance": 0.7, \
"confidence": 0.9, "tags": ["..."]}}]}}
- If nothing is worth remembering, reply {{"facts": []}}.
"""

_FENCE_RE: Final = re.compile(r"^```[a-zA-Z]*\s*|\s*```$")


def parse_json_reply(text: str) -> Any:
    """Decode the JSON value in a model reply (code fences and chatter around it allowed).

    Raises:
        ExtractionError: no JSON object or array could be decoded.
    """
    stripped = _FENCE_RE.sub("", text.strip()).strip()
    try:
        return json.loads(stripped)
    except ValueError:
        pass
    starts = [i for i in (stripped.find("{"), stripped.find("[")) if i >= 0]
    if starts:
        try:
            value, _ = json.JSONDecoder().raw_decode(stripped[min(starts) :])
            return value
        except ValueError as exc:
            raise ExtractionError(f"the reply is not valid JSON: {exc}") from None
    raise ExtractionError(f"the reply holds no JSON object: {_clip(text, 120)!r}")


def _number(item: dict[str, Any], name: str, default: float) -> float:
    value = item.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        try:
            value = float(value)
        except (TypeError, ValueError):
            raise ExtractionError(f"fact field {name!r} is not a number: {value!r}") from None
    return min(1.0, max(0.0, float(value)))


def facts_from_json(value: Any, source_ids: tuple[str, ...] = ()) -> list[ExtractedFact]:
    """Validate the decoded reply of the extraction prompt.

    Items without a usable ``content`` are skipped (logged); a reply that is
    not ``{"facts": [...]}`` (or a bare list), or whose items all lack a
    usable ``content``, is an error.

    Raises:
        ExtractionError: the reply does not have the expected shape.
    """
    items = value.get("facts") if isinstance(value, dict) else value
    if not isinstance(items, list):
        raise ExtractionError('expected {"facts": [...]}, got ' + _clip(repr(value), 120))
    out: list[ExtractedFact] = []
    for i, item in enumerate(items):
        if isinstance(item, str):
            item = {"content": item}
        if not isinstance(item, dict):
            raise ExtractionError(f"fact #{i} is {type(item).__name__}, expected an object")
        content = item.get("content")
        if not isinstance(content, str) or not content.strip():
            log.warning("recorder.fact_without_content", index=i)
            continue
        kind = item.get("kind") or "fact"
        tags = item.get("tags") or ()
        if isinstance(tags, str):
            tags = (tags,)
        if not isinstance(kind, str) or not isinstance(tags, list | tuple):
            raise ExtractionError(f"fact #{i} has a malformed kind or tags")
        out.append(
            ExtractedFact(
                content=content.strip(),
                kind=kind.strip()[:64] or "fact",
                importance=_number(item, "importance", 0.5),
                confidence=_number(item, "confidence", 1.0),
                tags=tuple(str(t)[:256] for t in tags if str(t).strip()),
                source_ids=source_ids,
            )
        )
    if items and not out:
        # Every item lacked a usable content ({"facts": [{"fact": ...}]} from a weak
        # model): taking that as "no facts" would store less than no model at all.
        raise ExtractionError(f"none of the {len(items)} fact(s) has a non-empty string 'content'")
    return out


class ModelExtractor:
    """Extracts facts with a chat model: one call per batch of turns.

    Facts without support in the conversation (a name, number or most
    content words it never mentions: :mod:`actormem.recorder._support`) are
    dropped and counted in ``unsupported``.

    Args:
        model: The chat model.
        timeout: Seconds per call.
        retries: Extra attempts after a malformed reply or a failed call.
        max_chars: The conversation text sent is clipped to this length.
        prompt: The system prompt (``{today}`` is filled in).
        gate: When given, calls run only between conversation turns and give
            way to a turn that starts (:mod:`actormem.models.gate`).
    """

    name = "model"

    def __init__(
        self,
        model: ChatModel,
        *,
        timeout: float = 60.0,
        retries: int = 1,
        max_chars: int = 60_000,
        prompt: str = EXTRACTION_PROMPT,
        gate: TurnGate | None = None,
    ) -> None:
        self._model = model
        self._gate = gate
        self._timeout = timeout
        self._retries = retries
        self._max_chars = max_chars
        self._prompt = prompt
        self.calls = 0
        self.unsupported = 0  # facts dropped because the conversation does not support them

    def extract(self, turns: Sequence[Sequence[Msg]]) -> list[ExtractedFact]:
        """The facts the model finds in ``turns``.

        Raises:
            ExtractionError: every attempt gave malformed output or failed.
        """
        parts = [render_turn(t, self._max_chars) for t in turns]
        conversation = _clip("\n\n".join(p for p in parts if p), self._max_chars)
        if not conversation:
            return []
        source_ids = tuple(m.id for t in turns for m in t if m.role == "user")
        today = time.strftime("%Y-%m-%d", time.gmtime())
        messages = [
            Msg.system(self._prompt.format(today=today)),
            Msg.user(f"Conversation:\n{conversation}"),
        ]
        facts = ask_json(
            self._model,
            messages,
            lambda value: facts_from_json(value, source_ids),
            timeout=self._timeout,
            retries=self._retries,
            counter=self,
            gate=self._gate,
        )
        # A fact the conversation does not support is made up: drop it.
        source = "\n".join(m.text for t in turns for m in t if m.role != "system")
        speakers = tuple(m.name for t in turns for m in t if m.name)
        checker = SupportChecker(source, speakers)
        kept = [f for f in facts if checker.supported(f.content)]
        if len(kept) < len(facts):
            dropped = [f.content for f in facts if not checker.supported(f.content)]
            self.unsupported += len(dropped)
            log.warning("recorder.unsupported_facts_dropped", facts=dropped[:10], n=len(dropped))
        return kept


def ask_json(
    model: ChatModel,
    messages: list[Msg],
    validate: Callable[[Any], _T],
    *,
    timeout: float,
    retries: int,
    counter: Any = None,
    gate: TurnGate | None = None,
) -> _T:
    """Ask ``model``, decode the JSON of its reply and validate it, retrying ``retries`` times.

    A retry quotes the problem back to the model.  ``counter.calls`` (if
    given) is incremented per call.

    Args:
        model: The chat model.
        messages: The prompt.
        validate: Turns the decoded JSON into the result; raises
            :class:`ExtractionError` when its shape is wrong.
        timeout: Seconds per call.
        retries: Extra attempts.
        counter: An object with a ``calls`` attribute to count calls on.
        gate: Run each call between conversation turns (see
            :func:`~actormem.models.gate.call_between_turns`).

    Returns:
        What ``validate`` returned.

    Raises:
        ExtractionError: every attempt failed; the message names the last problem.
    """
    convo = list(messages)
    problem = ""
    for attempt in range(retries + 1):
        if counter is not None:
            counter.calls += 1
        try:
            if gate is not None:
                reply = call_between_turns(model, convo, timeout, gate)
            else:
                reply = _chat_within(model, convo, timeout)
        except Exception as exc:  # a model failure must not kill the recorder
            problem = f"model call failed: {exc!r}"
            log.warning("recorder.model_failed", attempt=attempt, error=repr(exc))
            continue
        try:
            return validate(parse_json_reply(reply.text))
        except ExtractionError as exc:
            problem = str(exc)
            log.warning("recorder.malformed_reply", attempt=attempt, error=problem)
            convo = [
                *messages,
                reply,
                Msg.user(
                    f"That reply could not be used ({problem}). "
                    "Reply again with only the JSON object, nothing else."
                ),
            ]
    raise ExtractionError(f"no usable model reply after {retries + 1} attempt(s): {problem}")


def _chat_within(model: ChatModel, messages: list[Msg], timeout: float) -> Msg:
    """``model.chat`` that returns or raises within ``timeout`` even if the model ignores it.

    The call runs on a daemon thread; a model still busy at the deadline is
    abandoned (its late answer is dropped) and :class:`ModelTimeoutError` raised,
    so a stuck model never stalls the recorder's batches.
    """
    box: dict[str, Any] = {}
    done = threading.Event()

    def run() -> None:
        try:
            box["reply"] = model.chat(messages, timeout=timeout)
        except BaseException as exc:  # handed to the caller's thread
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=run, name="actormem-recorder-model", daemon=True).start()
    if not done.wait(timeout):
        name = getattr(model, "name", type(model).__name__)
        raise ModelTimeoutError(f"model {name} did not answer within {timeout:g} s")
    if "error" in box:
        raise box["error"]
    reply = box.get("reply")
    if not isinstance(reply, Msg):
        raise ExtractionError(f"the model returned {type(reply).__name__}, expected a Msg")
    return reply

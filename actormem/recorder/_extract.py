"""Fact extraction: turns in, typed facts out.

Two extractors share one output type, :class:`ExtractedFact`:

* :class:`RuleExtractor` -- offline and deterministic.  It reads the user's
  own sentences and recognises simple first-person statements: names ("my
  name is", "call me"), places ("I live in", "I moved to", "I'm from"), work,
  likes and dislikes, allergies, "my X is Y", "remember that ...", and
  sentences that carry a date.  Single-valued facts (a name, a home town, a
  preference about one thing) carry a ``slot`` so that a later statement
  replaces the earlier one instead of piling up beside it.
* :class:`ModelExtractor` -- asks a :class:`~actormem.models.base.ChatModel`
  for JSON facts (content, kind, importance, confidence, tags) with one call
  per batch of turns.  Output that is not the expected JSON is retried
  (``retries`` times, with the parse error quoted back), then
  :class:`ExtractionError` is raised: the caller skips the facts and says so.

:func:`render_turn` turns a turn into the text of an ``episode`` memory.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Final, TypeVar

import msgspec
import structlog

from actormem.messages import Msg
from actormem.models.base import ChatModel, ModelTimeoutError

__all__ = [
    "EXTRACTION_PROMPT",
    "ExtractedFact",
    "ExtractionError",
    "ModelExtractor",
    "RuleExtractor",
    "ask_json",
    "facts_from_json",
    "parse_json_reply",
    "render_turn",
]

log = structlog.get_logger(__name__)

_T = TypeVar("_T")


class ExtractionError(ValueError):
    """A model's reply could not be used (not JSON, or not the expected shape)."""


class ExtractedFact(msgspec.Struct, frozen=True, kw_only=True):
    """One fact found in a conversation.

    Attributes:
        content: A self-contained statement ("User lives in Paris").
        kind: ``fact``, ``preference``, ``procedure``, ``episode``, ...
        importance: How much it matters, in ``[0, 1]``.
        confidence: How sure the extractor is, in ``[0, 1]``.
        tags: Labels.
        slot: For single-valued facts, what it is about ("location",
            "pref:coffee"); a newer fact with the same slot replaces the older.
        source_ids: Ids of the messages it came from.
    """

    content: str
    kind: str = "fact"
    importance: float = 0.5
    confidence: float = 1.0
    tags: tuple[str, ...] = ()
    slot: str = ""
    source_ids: tuple[str, ...] = ()


# -- turns as text ----------------------------------------------------------------------


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = max(0, limit - head - 5)
    return f"{text[:head]} ... {text[-tail:]}" if tail else text[:limit]


def render_turn(msgs: Sequence[Msg], max_chars: int = 4_000) -> str:
    """The text of a turn as ``role: text`` lines (tool calls and results abbreviated).

    System messages are left out.  The result is clipped to ``max_chars``
    (head and tail kept).

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
            lines.append(f"{m.role}: {text}")
        for use in m.tool_uses:
            args = json.dumps(use.input, ensure_ascii=False, default=str)
            lines.append(f"{m.role} called {use.name}({_clip(args, 200)})")
        for res in m.tool_results:
            label = res.name or res.tool_use_id
            lines.append(f"tool {label} returned: {_clip(res.output.strip(), 300)}")
    return _clip("\n".join(lines), max_chars)


# -- offline rules -------------------------------------------------------------------------


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_SENTENCE_RE: Final = re.compile(r"[^.!?\n]+[.!?]?")
_VALUE: Final = r"([^,;:!?()\n]{1,80}?)"
_END: Final = r"\s*(?:[,;:!?()\n]|\.(?:\s|$)|\s+(?:and|but|because|since|so|which|who)\s|$)"
_NAME_WORD: Final = r"[A-Z][\w'-]*"
_NOT_NAMES: Final = _words(
    "Sorry Sure Fine Good Glad Happy Here Back Done Ready Not Just Okay Ok Afraid Tired "
    "Busy Going Trying Looking Still Also Really New Hungry Excited Interested"
)
_NOT_OWNED: Final = _words(
    "question questions problem problems idea doubt issue issues feeling look go try"
)
_MONTHS: Final = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_DATE_RE: Final = re.compile(
    rf"\b(?:\d{{4}}-\d{{2}}-\d{{2}}|\d{{1,2}}/\d{{1,2}}(?:/\d{{2,4}})?|"
    rf"{_MONTHS}\.? \d{{1,2}}(?:st|nd|rd|th)?(?:,? \d{{4}})?|"
    rf"\d{{1,2}}(?:st|nd|rd|th)? (?:of )?{_MONTHS}(?:,? \d{{4}})?|"
    r"(?:next|this) (?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|week|month|year)|"
    r"tomorrow|tonight)\b",
    re.IGNORECASE,
)
_FIRST_PERSON_RE: Final = re.compile(r"\b(?:I|I'm|I've|I'll|my|we|we're|our)\b", re.IGNORECASE)


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


# (pattern, template, kind, slot template, importance, confidence, tags)
_Rule = tuple[re.Pattern[str], str, str, str, float, float, tuple[str, ...]]
_RULES: Final[tuple[_Rule, ...]] = (
    (
        _rx(r"\b(?:please )?remember (?:that )?([^!?\n]{3,200}?)\s*(?:[.!?]|$)"),
        "{0}",
        "fact",
        "",
        0.8,
        0.9,
        ("remember",),
    ),
    (
        re.compile(rf"\b[Mm]y name is ({_NAME_WORD}(?: {_NAME_WORD}){{0,3}})"),
        "User's name is {0}",
        "fact",
        "name",
        0.9,
        0.95,
        ("identity",),
    ),
    (
        re.compile(rf"\b(?:[Cc]all me|I'm called|I am called) ({_NAME_WORD})"),
        "User's name is {0}",
        "fact",
        "name",
        0.9,
        0.9,
        ("identity",),
    ),
    (
        re.compile(
            rf"^\s*(?:[Hh]i|[Hh]ello|[Hh]ey)?[,!]?\s*I(?:'m| am) ({_NAME_WORD})\s*(?:[.,!]|$)"
        ),
        "User's name is {0}",
        "fact",
        "name",
        0.8,
        0.75,
        ("identity",),
    ),
    (
        _rx(rf"\bI(?: now)? (?:live|am living|'m living|reside) in {_VALUE}{_END}"),
        "User lives in {0}",
        "fact",
        "location",
        0.7,
        0.9,
        ("location",),
    ),
    (
        _rx(rf"\bI(?: just| recently)? (?:moved|relocated) to {_VALUE}{_END}"),
        "User lives in {0}",
        "fact",
        "location",
        0.7,
        0.85,
        ("location",),
    ),
    (
        _rx(rf"\bI(?:'m| am| come) from {_VALUE}{_END}"),
        "User is from {0}",
        "fact",
        "origin",
        0.6,
        0.85,
        ("location",),
    ),
    (
        _rx(rf"\bI(?: now)? work (?:at|for) {_VALUE}{_END}"),
        "User works at {0}",
        "fact",
        "employer",
        0.7,
        0.85,
        ("work",),
    ),
    (
        _rx(rf"\bI(?: now)? work as ((?:an? )?{_VALUE[1:-1]}){_END}"),
        "User works as {0}",
        "fact",
        "occupation",
        0.7,
        0.85,
        ("work",),
    ),
    (
        _rx(rf"\bI(?:'m| am) allergic to {_VALUE}{_END}"),
        "User is allergic to {0}",
        "fact",
        "allergy:{0}",
        0.9,
        0.9,
        ("health",),
    ),
    (
        _rx(
            rf"\bI (?:do not|don't|dont|never) (?:really )?(?:like|love|enjoy|eat|drink) "
            rf"{_VALUE}{_END}"
        ),
        "User dislikes {0}",
        "preference",
        "pref:{0}",
        0.6,
        0.85,
        ("preference",),
    ),
    (
        _rx(rf"\bI (?:really |truly )?(?:hate|dislike|can't stand|cannot stand) {_VALUE}{_END}"),
        "User dislikes {0}",
        "preference",
        "pref:{0}",
        0.6,
        0.85,
        ("preference",),
    ),
    (
        _rx(
            rf"\bI (?:really |absolutely |truly )?(?:like|love|enjoy|prefer|adore) "
            rf"{_VALUE}{_END}"
        ),
        "User likes {0}",
        "preference",
        "pref:{0}",
        0.6,
        0.8,
        ("preference",),
    ),
    (
        _rx(rf"\bmy (favou?rite [a-z]+(?: [a-z]+)?) is {_VALUE}{_END}"),
        "User's {0} is {1}",
        "preference",
        "my:{0}",
        0.6,
        0.9,
        ("preference",),
    ),
    (
        _rx(rf"\bmy ([a-z]+(?:'s)?(?: [a-z]+){{0,2}}) (?:is|are) {_VALUE}{_END}"),
        "User's {0} is {1}",
        "fact",
        "my:{0}",
        0.6,
        0.65,
        ("personal",),
    ),
    (
        _rx(rf"\bI (?:have|own|'ve got|have got) ((?:an?|one|two|three|four|\d+) {_VALUE}){_END}"),
        "User has {0}",
        "fact",
        "",
        0.5,
        0.7,
        ("personal",),
    ),
)
_VAGUE_SUBJECTS: Final = _words(
    "problem question point guess bad fault turn pleasure idea plan issue feeling "
    "opinion answer goal"
)
_TRAILING_JUNK: Final = re.compile(
    r"\s+(?:too|as well|now|though|anyway|actually|a lot|recently|yesterday|today|"
    r"(?:last|this|next) (?:week|month|year)|in \d{4}|since \d{4}|for (?:\w+ )?years?)$",
    re.IGNORECASE,
)


_PRONOUNS: Final = (
    (re.compile(r"\bI am\b|\bI'm\b"), "User is"),
    (re.compile(r"\bI've\b"), "User has"),
    (re.compile(r"\bI\b"), "User"),
    (re.compile(r"\b[Mm]y\b"), "User's"),
    (re.compile(r"\b[Mm]e\b"), "User"),
)


def _third_person(text: str) -> str:
    for pattern, repl in _PRONOUNS:
        text = pattern.sub(repl, text)
    return text[:1].upper() + text[1:]


def _clean(value: str) -> str:
    value = value.strip().strip("\"'`").strip()
    value = _TRAILING_JUNK.sub("", value)
    return value.rstrip(" .")


class RuleExtractor:
    """Offline extractor of simple first-person facts (see the module docstring).

    Only user messages are read; facts are phrased in the third person
    ("User lives in Paris").  Deterministic; about 20 us per short message.

    Args:
        min_confidence: Facts below this confidence are left out.
    """

    name = "rules"

    def __init__(self, *, min_confidence: float = 0.0) -> None:
        self._min_confidence = min_confidence

    def extract(self, turns: Sequence[Sequence[Msg]]) -> list[ExtractedFact]:
        """The facts stated by the user in ``turns``, in order, without exact repeats.

        Args:
            turns: Turns, each a sequence of messages.

        Returns:
            The facts.
        """
        out: list[ExtractedFact] = []
        seen: set[str] = set()
        for turn in turns:
            for msg in turn:
                if msg.role != "user":
                    continue
                text = msg.text
                if not text:
                    continue
                for fact in self._from_text(text, msg.id):
                    key = fact.content.casefold()
                    if key in seen or fact.confidence < self._min_confidence:
                        continue
                    seen.add(key)
                    out.append(fact)
        return out

    def _from_text(self, text: str, msg_id: str) -> list[ExtractedFact]:
        found: list[ExtractedFact] = []
        for sentence in _SENTENCE_RE.findall(text):
            sentence = sentence.strip()
            if len(sentence) < 4:
                continue
            taken: list[tuple[int, int]] = []
            hits: list[tuple[int, ExtractedFact]] = []
            for pattern, template, kind, slot, importance, confidence, tags in _RULES:
                m = pattern.search(sentence)
                if m is None or any(m.start() < e and s < m.end() for s, e in taken):
                    continue
                groups = [_clean(g) for g in m.groups()]
                if not all(groups):
                    continue
                if template.startswith("User's {0} is") and (
                    groups[0].casefold() in _VAGUE_SUBJECTS or groups[0].casefold() == "name"
                ):
                    continue
                if template == "User has {0}" and any(
                    w in _NOT_OWNED for w in groups[0].casefold().split()
                ):
                    continue
                if template.startswith("User's name") and groups[0] in _NOT_NAMES:
                    continue
                if template == "{0}":
                    content = _third_person(groups[0])
                else:
                    content = template.format(*groups)
                hits.append(
                    (
                        m.start(),
                        ExtractedFact(
                            content=content,
                            kind=kind,
                            importance=importance,
                            confidence=confidence,
                            tags=tags,
                            slot=slot.format(*(g.casefold() for g in groups)) if slot else "",
                            source_ids=(msg_id,),
                        ),
                    )
                )
                taken.append(m.span())
            found.extend(f for _, f in sorted(hits, key=lambda h: h[0]))
            if not taken and _DATE_RE.search(sentence) and _FIRST_PERSON_RE.search(sentence):
                found.append(
                    ExtractedFact(
                        content=f"User said: {sentence.rstrip('.')}",
                        kind="fact",
                        importance=0.6,
                        confidence=0.7,
                        tags=("date",),
                        source_ids=(msg_id,),
                    )
                )
        return found


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
    not ``{"facts": [...]}`` (or a bare list) is an error.

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
    return out


class ModelExtractor:
    """Extracts facts with a chat model: one call per batch of turns.

    Args:
        model: The chat model.
        timeout: Seconds per call.
        retries: Extra attempts after a malformed reply or a failed call.
        max_chars: The conversation text sent is clipped to this length.
        prompt: The system prompt (``{today}`` is filled in).
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
    ) -> None:
        self._model = model
        self._timeout = timeout
        self._retries = retries
        self._max_chars = max_chars
        self._prompt = prompt
        self.calls = 0

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
        return ask_json(
            self._model,
            messages,
            lambda value: facts_from_json(value, source_ids),
            timeout=self._timeout,
            retries=self._retries,
            counter=self,
        )


def ask_json(
    model: ChatModel,
    messages: list[Msg],
    validate: Callable[[Any], _T],
    *,
    timeout: float,
    retries: int,
    counter: Any = None,
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

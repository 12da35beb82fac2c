"""Reconciliation: decide what each new fact does to the store (ADD / UPDATE / DELETE / NONE).

This is mem0's original algorithm.  For a batch of new facts, the stored
memories most similar to them are shown to the model under short temporary
ids ("0", "1", ...; the model never sees or invents real ids), and the model
answers, per fact, one of:

* ``ADD`` -- new information: store it;
* ``UPDATE`` -- it refines or corrects memory ``id``: replace that memory's
  text with ``text`` (the store keeps the old text in its history);
* ``DELETE`` -- it contradicts memory ``id``, which is removed;
* ``NONE`` -- already known.

:func:`reconcile_by_slot` is the offline counterpart for rule-extracted
facts: a fact whose ``slot`` (name, location, ``pref:coffee``,
``consume:espresso``, ...) is already held by a stored memory updates that
memory; a correction ("I switched from espresso to decaf", "I sold the
Volvo") also names the slots it ``replaces``, and updates (or deletes) the
memory that holds them; others are added.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal, get_args

import msgspec
import structlog

from actormem.messages import Msg
from actormem.models.base import ChatModel
from actormem.models.gate import TurnGate
from actormem.recorder._corrections import family_of_slot, rewrite, slot_of
from actormem.recorder._extract import ExtractedFact, ExtractionError, ask_json
from actormem.recorder._support import is_supported
from actormem.store import MemoryRecord

__all__ = [
    "RECONCILE_PROMPT",
    "Decision",
    "ModelReconciler",
    "ReconcileOp",
    "decisions_from_json",
    "reconcile_by_slot",
]

log = structlog.get_logger(__name__)

ReconcileOp = Literal["ADD", "UPDATE", "DELETE", "NONE"]
_OPS: Final = frozenset(get_args(ReconcileOp))


class Decision(msgspec.Struct, frozen=True, kw_only=True):
    """What to do with one new fact.

    Attributes:
        op: ``ADD``, ``UPDATE``, ``DELETE`` or ``NONE``.
        fact: The new fact.
        memory_id: The stored memory it updates, deletes or duplicates.
        content: The text to store (``ADD`` and ``UPDATE``).
        old: The stored memory's text before (``UPDATE``, ``DELETE``, ``NONE``).
        retag: An ``UPDATE`` that moves the memory to the fact's slot and
            category (a correction by another thing: "espresso" -> "decaf").
    """

    op: ReconcileOp
    fact: ExtractedFact
    memory_id: str | None = None
    content: str = ""
    old: str = ""
    retag: bool = False


RECONCILE_PROMPT: Final = """\
You keep an assistant's long-term memory consistent. You get the stored \
memories that look related (with short ids) and new facts (numbered). For \
every new fact choose one event:
- ADD: the fact is new information.
- UPDATE: the fact refines or corrects a stored memory; give that memory's id \
and the full new text that replaces it.
- DELETE: the fact shows a stored memory is no longer true and nothing should \
replace it; give that memory's id.
- NONE: the stored memories already say this; give the id of the memory that does.

Reply with only this JSON object, one item per new fact:
{"memory": [{"fact": 0, "event": "ADD", "id": null, "text": "..."}]}
"""


def _prompt(facts: Sequence[ExtractedFact], existing: Sequence[MemoryRecord]) -> list[Msg]:
    stored = [{"id": str(i), "text": rec.content} for i, rec in enumerate(existing)]
    new = [{"fact": i, "text": f.content} for i, f in enumerate(facts)]
    body = (
        "Stored memories:\n"
        + json.dumps(stored, ensure_ascii=False, indent=1)
        + "\n\nNew facts:\n"
        + json.dumps(new, ensure_ascii=False, indent=1)
    )
    return [Msg.system(RECONCILE_PROMPT), Msg.user(body)]


def decisions_from_json(
    value: Any, facts: Sequence[ExtractedFact], existing: Sequence[MemoryRecord]
) -> list[Decision]:
    """Validate the model's reply to the reconciliation prompt.

    Facts the reply does not mention are added (nothing is lost silently;
    a log line says so).

    Raises:
        ExtractionError: the reply has the wrong shape, an unknown event, a
            fact number out of range, or an UPDATE/DELETE/NONE without a
            valid memory id.
    """
    items = value.get("memory") if isinstance(value, dict) else value
    if not isinstance(items, list):
        raise ExtractionError('expected {"memory": [...]}, got ' + repr(value)[:120])
    decided: dict[int, Decision] = {}
    for n, item in enumerate(items):
        if not isinstance(item, dict):
            raise ExtractionError(f"item #{n} is {type(item).__name__}, expected an object")
        op = str(item.get("event", "")).strip().upper()
        if op not in _OPS:
            raise ExtractionError(f"item #{n} has an unknown event {item.get('event')!r}")
        index = item.get("fact", n if len(items) == len(facts) else None)
        if isinstance(index, str) and index.strip().isdigit():
            index = int(index)
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(facts):
            raise ExtractionError(f"item #{n} names no new fact (fact={item.get('fact')!r})")
        fact = facts[index]
        text = item.get("text")
        text = text.strip() if isinstance(text, str) and text.strip() else fact.content
        if op == "ADD":
            decided[index] = Decision(op="ADD", fact=fact, content=text)
            continue
        raw_id = item.get("id")
        pos = int(raw_id) if isinstance(raw_id, int | str) and str(raw_id).isdigit() else -1
        if not 0 <= pos < len(existing):
            raise ExtractionError(
                f"item #{n}: {op} needs the id of a stored memory, got {raw_id!r}"
            )
        rec = existing[pos]
        decided[index] = Decision(
            op=op,  # type: ignore[arg-type]
            fact=fact,
            memory_id=rec.id,
            content=text if op == "UPDATE" else "",
            old=rec.content,
        )
    out: list[Decision] = []
    for i, fact in enumerate(facts):
        if i not in decided:
            log.info("recorder.reconcile_unanswered", fact=fact.content[:80])
            out.append(Decision(op="ADD", fact=fact, content=fact.content))
        else:
            out.append(decided[i])
    return out


class ModelReconciler:
    """Asks a chat model for ADD / UPDATE / DELETE / NONE (one call per batch).

    Args:
        model: The chat model.
        timeout: Seconds per call.
        retries: Extra attempts after a malformed reply.
        gate: When given, calls run only between conversation turns.
    """

    def __init__(
        self,
        model: ChatModel,
        *,
        timeout: float = 60.0,
        retries: int = 1,
        gate: TurnGate | None = None,
    ) -> None:
        self._model = model
        self._gate = gate
        self._timeout = timeout
        self._retries = retries
        self.calls = 0
        self.unsupported = 0  # texts the model made up, replaced by the fact's own

    def decide(
        self,
        facts: Sequence[ExtractedFact],
        existing: Sequence[MemoryRecord],
        *,
        source: str | None = None,
        subjects: tuple[str, ...] = (),
    ) -> list[Decision]:
        """Decide every fact against ``existing`` (no call when nothing is stored nearby).

        Args:
            facts: The new facts (already checked against the conversation).
            existing: The stored memories that look related.
            source: The conversation the facts come from.  When given, the
                text an ``ADD`` or ``UPDATE`` stores must have support in it
                (or in the fact, or in the memory it updates): text the model
                made up is replaced by the fact's own content.
            subjects: Names that may start a fact (the speakers).

        Raises:
            ExtractionError: the model's output stayed malformed after the retries.
        """
        if not facts:
            return []
        if not existing:
            return [Decision(op="ADD", fact=f, content=f.content) for f in facts]
        decisions = ask_json(
            self._model,
            _prompt(facts, existing),
            lambda value: decisions_from_json(value, facts, existing),
            timeout=self._timeout,
            retries=self._retries,
            counter=self,
            gate=self._gate,
        )
        if source is None:
            return decisions
        return [self._supported(d, source, subjects) for d in decisions]

    def _supported(self, d: Decision, source: str, subjects: tuple[str, ...]) -> Decision:
        if d.op not in ("ADD", "UPDATE") or d.content == d.fact.content:
            return d
        basis = "\n".join((source, d.fact.content, d.old))
        if is_supported(d.content, basis, subjects):
            return d
        self.unsupported += 1
        log.warning(
            "recorder.unsupported_reconcile_text",
            op=d.op,
            text=d.content[:120],
            kept=d.fact.content[:120],
        )
        return msgspec.structs.replace(d, content=d.fact.content)


def reconcile_by_slot(
    facts: Sequence[ExtractedFact], held: Mapping[str, MemoryRecord]
) -> list[Decision]:
    """Offline reconciliation of rule-extracted facts.

    Within the batch, only the last fact of each slot counts, and a fact
    whose slot a later fact ``replaces`` is dropped.  A fact's *targets* are
    the held memories of its slot and of the slots it ``replaces`` (see
    ``_corrections``); a target that a later fact of the batch also has
    belongs to the later fact, and a fact left with none of its targets is
    dropped (it was superseded in the same batch).  Then:

    * no target: ``ADD`` (a fact marked ``if_held`` is dropped instead: it
      only corrects);
    * the first target: ``NONE`` when it says the same, else ``UPDATE`` to
      the fact's text (for a swap, the held text with the new thing in
      place of the old; the memory takes the fact's slot);
    * any other target: ``DELETE`` (the fact said it is no longer true).

    Args:
        facts: The new facts, in the order they were said.
        held: Stored memory per slot (the facts' slots and the slots they replace).

    Returns:
        One decision per surviving fact (and per extra target deleted), in order.
    """
    last: dict[str, int] = {}
    replaced_later: dict[str, int] = {}
    for i, f in enumerate(facts):
        if f.slot:
            last[f.slot] = i
        for r in f.replaces:
            replaced_later[r] = i
    targets: list[list[MemoryRecord]] = []
    for f in facts:
        seen: dict[str, MemoryRecord] = {}
        for s in (f.slot, *f.replaces):
            rec = held.get(s) if s else None
            if rec is not None:
                seen.setdefault(rec.id, rec)
        targets.append(list(seen.values()))
    claimed: set[str] = set()
    keep = [True] * len(facts)
    for i in range(len(facts) - 1, -1, -1):
        f = facts[i]
        if f.slot and (
            last[f.slot] != i or (replaced_later.get(f.slot, -1) > i and not f.retraction)
        ):
            keep[i] = False
            continue
        mine = [r for r in targets[i] if r.id not in claimed]
        if targets[i] and not mine:
            keep[i] = False
            continue
        targets[i] = mine
        claimed.update(r.id for r in mine)
    out: list[Decision] = []
    for i, f in enumerate(facts):
        if not keep[i]:
            continue
        if not targets[i]:
            if not f.if_held:
                out.append(Decision(op="ADD", fact=f, content=f.content))
            continue
        first, *rest = targets[i]
        g = _as_correction(f, first)
        if first.content.casefold() == g.content.casefold():
            out.append(Decision(op="NONE", fact=g, memory_id=first.id, old=first.content))
        else:
            out.append(
                Decision(
                    op="UPDATE",
                    fact=g,
                    memory_id=first.id,
                    content=g.content,
                    old=first.content,
                    retag=_slot(first) != g.slot,
                )
            )
        for rec in rest:
            out.append(Decision(op="DELETE", fact=g, memory_id=rec.id, old=rec.content))
    return out


def _slot(rec: MemoryRecord) -> str:
    value = rec.metadata.get("slot", "")
    return value if isinstance(value, str) else ""


def _as_correction(f: ExtractedFact, target: MemoryRecord) -> ExtractedFact:
    """``f`` as it replaces ``target``: a swap's text and slot come from the held fact."""
    held_slot = _slot(target)
    if not f.swap:
        if f.slot or not held_slot:
            return f
        # "I gave up sugar" (no family of its own): it takes the slot it corrects
        return msgspec.structs.replace(f, slot=held_slot)
    subject, old, new = f.swap
    text = rewrite(target.content, subject, old, new)
    if not text:
        text = f.content
    family = family_of_slot(held_slot)
    slot = held_slot
    if new and family is not None:
        prefix = held_slot.rsplit("/", 1)[0] + "/" if "/" in held_slot else ""
        slot = prefix + slot_of(family, new)
    tags = target.tags[:1] if target.tags and not target.tags[0].startswith("slot:") else f.tags
    return msgspec.structs.replace(
        f, content=text, slot=slot, tags=tags, kind=target.kind, if_held=False
    )

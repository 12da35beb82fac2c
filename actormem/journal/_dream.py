"""Deep dream: consolidate long-term memory and rewrite MEMORY.md, with a diary.

A dream (seed 003) reads the consolidated memory and the recent daily
journal files and writes ``MEMORY.md``, the agent's durable knowledge:

1. A hand edit of MEMORY.md is imported first (see :mod:`._journal`).
2. The *input* -- every live memory of the namespace (id and content hash),
   the journal days read, the dreamer -- is hashed.  Unchanged input means
   nothing to do: the dream is skipped and nothing is written.
3. The store's duplicate pruning and consolidation run on the namespace
   (every merge leaves a ``MERGE`` history row; nothing is deleted).
4. The durable items are chosen.  Offline: pinned memories (hand-written
   lines) first, then the live memories of ``dream_kinds`` ranked by seed
   000's relevance plus a boost for memories named in the recent journal
   days; deterministic for a given input.  With a model: the model reads
   MEMORY.md, the candidates and the journal days and answers a JSON list;
   an item that names a memory id keeps (or rewrites) that memory, a new
   item becomes a memory tagged ``dream``; malformed output falls back to
   the offline choice (``ModelFallback`` event).
5. MEMORY.md membership is the ``core`` tag: promoting or dropping an item
   is a store ``update`` of its tags, with a history row saying why.
6. MEMORY.md is rewritten atomically (only if its text changed), a diary
   entry is appended to DREAMS.md, a SYSTEM log entry is written and
   ``DreamCompleted`` is published.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

import msgspec
import structlog

from actormem.events import DreamCompleted, ModelFallback
from actormem.journal._files import append_text, read_text, text_hash, write_text
from actormem.journal._format import (
    MemoryItem,
    clip,
    parse_journal_ids,
    parse_memory_md,
    render_memory_md,
    stamp,
)
from actormem.messages import Msg
from actormem.store import KEYED_KIND, MemoryRecord, NewMemory

if TYPE_CHECKING:
    from actormem.journal._journal import Journal

__all__ = [
    "CORE_TAG",
    "DISMISSED_TAG",
    "PINNED_TAG",
    "DreamReport",
    "dream_due",
    "import_memory_md",
    "run_dream",
]

log = structlog.get_logger(__name__)

#: Tag of the memories MEMORY.md shows.
CORE_TAG: Final = "core"
#: Tag of memories a person wrote or edited in MEMORY.md (always kept).
PINNED_TAG: Final = "pinned"
#: Tag of memories a person removed from MEMORY.md (dreams leave them out).
DISMISSED_TAG: Final = "dismissed"
_MEMORY_FILE: Final = "MEMORY.md"
_DREAMS_FILE: Final = "DREAMS.md"
_ALL: Final = 100_000
_JOURNAL_BOOST: Final = 0.15
_KIND_BONUS: Final = {"preference": 0.05, "procedure": 0.05}
_DREAM_PROMPT: Final = (
    "You maintain MEMORY.md, the durable knowledge of an AI agent about its user and work. "
    "Read the current MEMORY.md, the candidate memories (id · kind · text) and the recent "
    "journal, and answer with JSON only: "
    '{"items": [{"id": "<id of the candidate it comes from, or null>", '
    '"kind": "fact|preference|procedure", "text": "<one durable statement>"}]}. '
    "Keep what stays true and useful; merge duplicates; prefer newer statements over "
    "older contradicted ones; leave out chit-chat and one-off events; at most {n} items."
)


class DreamReport(msgspec.Struct, frozen=True, kw_only=True):
    """What one dream did.

    Attributes:
        skipped: True when the input was unchanged (nothing was written).
        changes: Store changes made (promotions, drops, rewrites, creations, merges,
            imported hand edits).
        promoted: Memories added to MEMORY.md.
        dropped: Memories taken out of MEMORY.md (they stay in the store).
        rewritten: Memories whose content the dream (model) or a hand edit changed.
        created: Memories the dream (model) or a hand edit created.
        merged: ``(survivor, absorbed)`` pairs of the consolidation.
        items: Items MEMORY.md holds now.
        days: Journal days read.
        input_hash: The hash of the input the dream saw (after consolidation).
        dreamer: ``offline`` or ``model:<name>`` (``offline`` after a fallback).
        path: MEMORY.md.
    """

    skipped: bool
    changes: int = 0
    promoted: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()
    rewritten: tuple[str, ...] = ()
    created: tuple[str, ...] = ()
    merged: tuple[tuple[str, str], ...] = ()
    items: int = 0
    days: tuple[str, ...] = ()
    input_hash: str = ""
    dreamer: str = "offline"
    path: str = ""


class _ModelItem(msgspec.Struct):
    text: str
    kind: str = "fact"
    id: str | None = None


class _ModelAnswer(msgspec.Struct):
    items: list[_ModelItem]


def _with_tags(rec: MemoryRecord, add: Sequence[str] = (), remove: Sequence[str] = ()) -> list[str]:
    tags = [t for t in rec.tags if t not in remove]
    return tags + [t for t in add if t not in tags]


def _live(journal: Journal) -> list[MemoryRecord]:
    """The memories the dream may promote, rewrite or merge: keyed facts left out
    (they change only through ``save_fact``, whatever scope dreams)."""
    recs = journal._store.list(journal.namespace, limit=_ALL)
    return [r for r in recs if r.kind != KEYED_KIND]


def import_memory_md(journal: Journal) -> tuple[list[str], list[str], list[str], list[str]]:
    """Import a hand-edited MEMORY.md into the store (caller holds the journal's lock).

    Returns:
        ``(pinned, rewritten, created, dropped)`` memory ids; all empty when the
        file is missing or unchanged since the journal wrote it.
    """
    store, ns = journal._store, journal.namespace
    path = journal.path(_MEMORY_FILE)
    text = read_text(path)
    if text is None or text_hash(text) == journal._hashes.get(_MEMORY_FILE):
        return [], [], [], []
    items = parse_memory_md(text)
    reason = "hand-edited MEMORY.md"
    pinned: list[str] = []
    rewritten: list[str] = []
    created: list[str] = []
    kept: list[MemoryItem] = []
    for item in items:
        rec = store.get(ns, item.memory_id) if item.memory_id else None
        if rec is not None and rec.alive and rec.kind != KEYED_KIND:
            tags = _with_tags(rec, (CORE_TAG, PINNED_TAG), remove=(DISMISSED_TAG,))
            if clip(rec.content, 2_000) != item.text:
                store.update(ns, rec.id, content=item.text, tags=tags, reason=reason)
                rewritten.append(rec.id)
            elif tuple(tags) != rec.tags:
                store.update(ns, rec.id, tags=tags, reason=f"{reason}: pinned")
                pinned.append(rec.id)
            kept.append(MemoryItem(text=item.text, kind=rec.kind, memory_id=rec.id))
            continue
        res = store.add(
            ns,
            NewMemory(
                content=item.text,
                kind=item.kind,
                importance=0.8,
                tags=(CORE_TAG, PINNED_TAG),
                metadata={"source": _MEMORY_FILE},
            ),
        )
        if res.op != "ADD":  # merged into an existing memory: pin that one
            survivor = store.get(ns, res.id)
            if survivor is not None:
                store.update(
                    ns,
                    res.id,
                    tags=_with_tags(survivor, (CORE_TAG, PINNED_TAG), remove=(DISMISSED_TAG,)),
                    reason=f"{reason}: pinned",
                )
        created.append(res.id)
        kept.append(MemoryItem(text=item.text, kind=item.kind, memory_id=res.id))
    kept_ids = {k.memory_id for k in kept}
    dropped: list[str] = []
    for rec in _live(journal):
        if CORE_TAG in rec.tags and rec.id not in kept_ids:
            store.update(
                ns,
                rec.id,
                tags=_with_tags(rec, (DISMISSED_TAG,), remove=(CORE_TAG, PINNED_TAG)),
                reason=f"{reason}: line removed",
            )
            dropped.append(rec.id)
    canonical = render_memory_md(kept, journal.label, journal.config.clock())
    journal._save_hash(_MEMORY_FILE, write_text(path, canonical))
    n = len(pinned) + len(rewritten) + len(created) + len(dropped)
    journal._append(
        "SYSTEM",
        f"MEMORY.md was edited by hand; imported {n} change(s): {len(created)} new, "
        f"{len(rewritten)} rewritten, {len(pinned)} pinned, {len(dropped)} removed",
    )
    log.info("journal.memory_md_imported", path=str(path), changes=n)
    return pinned, rewritten, created, dropped


def _input_hash(journal: Journal, day_texts: dict[str, str], dreamer: str) -> str:
    h = hashlib.sha256(dreamer.encode())
    for rec in sorted(_live(journal), key=lambda r: r.id):
        h.update(f"{rec.id}:{rec.content_hash}\n".encode())
    for day in sorted(day_texts):
        h.update(f"{day}:{text_hash(day_texts[day])}\n".encode())
    return h.hexdigest()


def _rank(
    journal: Journal, live: Sequence[MemoryRecord], mentioned: set[str], now: float
) -> list[MemoryRecord]:
    kinds = set(journal.config.dream_kinds)
    pool = [
        r for r in live if (r.kind in kinds or PINNED_TAG in r.tags) and DISMISSED_TAG not in r.tags
    ]
    if not pool:
        return []
    # Imported here, not at the top: a runtime that never dreams (short-term
    # memory only) then never loads numpy (tests/test_lazy_import.py).
    import numpy as np

    from actormem.store._relevance import relevance

    scores = relevance(
        np.array([r.importance for r in pool]),
        np.array([r.access_count for r in pool]),
        np.array([r.last_accessed for r in pool]),
        np.array([r.created_at for r in pool]),
        now,
    )
    keyed = []
    for rec, score in zip(pool, scores.tolist(), strict=True):
        total = float(score) + _KIND_BONUS.get(rec.kind, 0.0)
        if rec.id in mentioned:
            total += _JOURNAL_BOOST
        if PINNED_TAG in rec.tags:
            total += 10.0
        keyed.append((-round(total, 9), rec.created_at, rec.id, rec))
    keyed.sort(key=lambda k: k[:3])
    return [k[3] for k in keyed[: journal.config.memory_max_items]]


def _model_items(
    journal: Journal, live: Sequence[MemoryRecord], day_texts: dict[str, str]
) -> list[_ModelItem]:
    assert journal.model is not None
    n = journal.config.memory_max_items
    kinds = set(journal.config.dream_kinds)
    cands = [
        r for r in live if (r.kind in kinds or CORE_TAG in r.tags) and DISMISSED_TAG not in r.tags
    ][:400]
    current = read_text(journal.path(_MEMORY_FILE)) or "(empty)"
    journal_text = "\n\n".join(day_texts[d] for d in sorted(day_texts))[-12_000:]
    user = (
        f"Current MEMORY.md:\n{current[:8_000]}\n\nCandidate memories:\n"
        + "\n".join(f"{r.id} · {r.kind} · {clip(r.content, 300)}" for r in cands)
        + f"\n\nRecent journal:\n{journal_text or '(none)'}"
    )
    reply = journal.model.chat(
        [Msg.system(_DREAM_PROMPT.replace("{n}", str(n))), Msg.user(user)],
        timeout=journal.config.model_timeout,
    )
    text = reply.text
    match = re.search(r"\{.*\}", text, re.S)
    if match is None:
        raise ValueError(f"the dream model answered no JSON object: {text[:200]!r}")
    answer = msgspec.json.decode(match.group(0), type=_ModelAnswer)
    items = [i for i in answer.items if i.text.strip()][:n]
    if not items and cands:
        raise ValueError("the dream model kept nothing")
    return items


def run_dream(
    journal: Journal, lookback_days: int | None = None, *, force: bool = False
) -> DreamReport:
    """One deep dream (see the module docstring); the caller holds the journal's lock."""
    t0 = time.perf_counter()
    cfg, store, ns = journal.config, journal._store, journal.namespace
    path = journal.path(_MEMORY_FILE)
    lookback = cfg.dream_lookback_days if lookback_days is None else lookback_days
    if not isinstance(lookback, int) or isinstance(lookback, bool) or lookback < 1:
        raise ValueError(f"lookback_days must be an int >= 1, got {lookback!r}")
    pinned, rewritten, created, dropped_by_hand = import_memory_md(journal)
    imported = len(pinned) + len(rewritten) + len(created) + len(dropped_by_hand)
    now = cfg.clock()
    today = dt.date.fromisoformat(stamp(now, "%Y-%m-%d"))
    wanted = {(today - dt.timedelta(days=i)).isoformat() for i in range(lookback)}
    day_texts = {d: read_text(journal.day_path(d)) or "" for d in journal.days() if d in wanted}
    dreamer = "offline" if journal.model is None else f"model:{journal.model.name}"
    before = _input_hash(journal, day_texts, dreamer)
    state = store.journal_state(ns)
    file_ok = journal._hashes.get(_MEMORY_FILE) is not None and path.exists()
    if not force and not imported and file_ok and state.get("dream:input") == before:
        journal._save_hash("dream", before, {"dream:last_at": repr(now)})
        report = DreamReport(
            skipped=True,
            days=tuple(sorted(day_texts)),
            input_hash=before,
            dreamer=dreamer,
            path=str(path),
            items=len([r for r in _live(journal) if CORE_TAG in r.tags]),
        )
        journal._publish(
            DreamCompleted(
                source="journal", changes=0, path=str(path), skipped=True, input_hash=before
            )
        )
        return report

    merged: list[tuple[str, str]] = []
    for rep in (
        store.prune_duplicates(ns, threshold=cfg.dream_duplicate_threshold),
        store.consolidate(ns, threshold=cfg.dream_consolidate_threshold),
    ):
        merged += list(rep.merged)
    live = _live(journal)
    by_id = {r.id: r for r in live}
    mentioned = {mid for text in day_texts.values() for mid, _ in parse_journal_ids(text)}
    chosen: list[MemoryRecord] = []
    if journal.model is not None:
        try:
            items = _model_items(journal, live, day_texts)
        except Exception as exc:
            log.warning("journal.dream_model_failed", error=repr(exc))
            journal._publish(
                ModelFallback(
                    source="journal", component="journal.dream", error=repr(exc), fallback="offline"
                )
            )
            dreamer = "offline"
        else:
            for item in items:
                rec = by_id.get(item.id) if item.id else None
                if rec is not None:
                    if item.text.strip() != rec.content.strip():
                        store.update(
                            ns, rec.id, content=item.text.strip(), reason="dream: rewritten"
                        )
                        rewritten.append(rec.id)
                        rec = store.get(ns, rec.id) or rec
                    chosen.append(rec)
                    continue
                res = store.add(
                    ns,
                    NewMemory(
                        content=item.text.strip(),
                        kind=item.kind if item.kind in cfg.dream_kinds else "fact",
                        importance=0.7,
                        tags=("dream",),
                        metadata={"source": "dream"},
                    ),
                )
                created.append(res.id)
                got = store.get(ns, res.id)
                if got is not None:
                    chosen.append(got)
            pins = [r for r in live if PINNED_TAG in r.tags and r.id not in {c.id for c in chosen}]
            chosen = pins + chosen
    if dreamer == "offline":
        chosen = _rank(journal, live, mentioned, now)
    chosen = list({r.id: r for r in chosen}.values())[: cfg.memory_max_items]
    chosen_ids = {r.id for r in chosen}
    promoted: list[str] = []
    dropped: list[str] = list(dropped_by_hand)
    for rec in chosen:
        if CORE_TAG not in rec.tags:
            store.update(
                ns, rec.id, tags=_with_tags(rec, (CORE_TAG,)), reason="dream: into MEMORY.md"
            )
            promoted.append(rec.id)
    for rec in _live(journal):
        if CORE_TAG in rec.tags and rec.id not in chosen_ids:
            store.update(
                ns,
                rec.id,
                tags=_with_tags(rec, remove=(CORE_TAG,)),
                reason="dream: out of MEMORY.md (less relevant or superseded)",
            )
            dropped.append(rec.id)
    items_md = [MemoryItem(text=r.content, kind=r.kind, memory_id=r.id) for r in chosen]
    old_text = read_text(path)
    old_items = parse_memory_md(old_text) if old_text is not None else []
    if old_text is None or [(i.memory_id, i.text) for i in old_items] != [
        (i.memory_id, clip(i.text, 2_000)) for i in items_md
    ]:
        journal._save_hash(
            _MEMORY_FILE, write_text(path, render_memory_md(items_md, journal.label, now))
        )
    if created:
        journal._journal_records(created, now)
        day_texts[today.isoformat()] = read_text(journal.day_path(today)) or ""
    after = _input_hash(
        journal, day_texts, "offline" if journal.model is None else f"model:{journal.model.name}"
    )
    journal._save_hash("dream", after, {"dream:input": after, "dream:last_at": repr(now)})
    changes = (
        len(promoted) + len(dropped) + len(rewritten) + len(created) + len(merged) + len(pinned)
    )
    report = DreamReport(
        skipped=False,
        changes=changes,
        promoted=tuple(promoted),
        dropped=tuple(dropped),
        rewritten=tuple(rewritten),
        created=tuple(created),
        merged=tuple(merged),
        items=len(chosen),
        days=tuple(sorted(day_texts)),
        input_hash=after,
        dreamer=dreamer,
        path=str(path),
    )
    _write_diary(journal, report, by_id, now)
    journal._append(
        "SYSTEM",
        f"deep dream ({dreamer}): {changes} change(s), MEMORY.md holds {len(chosen)} item(s)",
        {"dream": True, "input_hash": after[:16]},
    )
    ms = (time.perf_counter() - t0) * 1e3
    log.info("journal.dream", changes=changes, items=len(chosen), ms=round(ms, 1))
    journal._publish(
        DreamCompleted(
            source="journal",
            changes=changes,
            path=str(path),
            added=len(promoted) + len(created),
            removed=len(dropped),
            updated=len(rewritten),
            merged=len(merged),
            items=len(chosen),
            input_hash=after,
        )
    )
    return report


def _write_diary(
    journal: Journal, rep: DreamReport, before: dict[str, MemoryRecord], now: float
) -> None:
    store, ns = journal._store, journal.namespace

    def text_of(mid: str) -> str:
        rec = before.get(mid) or store.get(ns, mid, include_deleted=True)
        return clip(rec.content, 100) if rec is not None else "?"

    days = f"{rep.days[0]}..{rep.days[-1]}" if rep.days else "none"
    lines = [
        f"## Dream {stamp(now)} · {rep.dreamer} · {rep.changes} change(s)",
        "",
        f"- read: journal days {days}; input {rep.input_hash[:16]}",
        f"- MEMORY.md: {rep.items} item(s)",
    ]
    for label, ids in (
        ("promoted", rep.promoted),
        ("dropped", rep.dropped),
        ("rewritten", rep.rewritten),
        ("created", rep.created),
    ):
        lines += [f"- {label}: {text_of(mid)} · id:{mid}" for mid in ids]
    lines += [f"- merged: {text_of(lose)} · id:{lose} into id:{keep}" for keep, lose in rep.merged]
    path = journal.path(_DREAMS_FILE)
    head = (
        ""
        if path.exists()
        else (
            f"# DREAMS — {journal.label}\n\n<!-- the dream diary: one entry per deep dream that "
            "changed something; every change is also a row of the store's history. -->\n\n"
        )
    )
    append_text(path, head + "\n".join(lines) + "\n\n")


def dream_due(state: dict[str, Any], now: float, interval: float | None) -> bool:
    """Whether a scheduled dream is due (never dreamt, or the last one is ``interval`` old)."""
    if interval is None:
        return False
    last = state.get("dream:last_at")
    try:
        return last is None or now - float(last) >= interval
    except ValueError:
        return True

"""The long-term recorder actor: turns in, committed long-term memories out.

Pipeline (one actor thread; the store does the I/O)::

    record(turn) --tell--> RecordTurn --> Subject --buffer_with_time_or_count--> batch
        --tell--> ProcessBatch --> episodes + extract facts + reconcile --> store (commit)

* ``RecordTurn`` commands feed a reactivex Subject on the actor's thread
  (its only producer).  ``buffer_with_time_or_count(batch_seconds,
  batch_count)`` closes a batch by time or size; each batch comes back to
  the actor as one ``ProcessBatch`` command, so a burst of turns costs one
  extraction call and one store transaction for its adds (model UPDATE /
  DELETE decisions are one transaction each).
* Nothing is dropped.  Every submitted turn is counted by a
  :class:`RecordingTracker` on the caller's side: ``pending`` is what was
  submitted and not yet committed.  Past ``backlog_limit`` a
  ``RecordingBacklog`` event is published; at ``max_pending`` the submitter
  waits (back-pressure) instead of anything being thrown away.
  ``flush()`` waits until every turn submitted before it is committed.
  Stopping the actor completes the Subject, which emits the last partial
  batch, and that batch is committed before the thread ends.
* Failures never kill the actor: when a model reply stays unusable after
  its retry, the offline extractor handles that batch instead
  (``ModelFallback``; a model never makes memory worse than no model), a
  failed store write is retried once and then reported
  (``RecordingFailed``, and ``flush()`` raises :class:`RecordingError`).
* ``EndSession`` summarizes the short-term memory (a request to the
  short-term actor, which never asks anyone back) and promotes important
  messages; ``RunMaintenance`` runs the store's maintenance on the namespace.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Callable, Sequence
from typing import Any, Final

import structlog
from reactivex import abc as rx_abc
from reactivex import operators as ops
from reactivex.subject import Subject

from actormem._pace import pace
from actormem.actors._recording import (
    CutBatch,
    EndSession,
    ProcessBatch,
    RecordingError,
    RecordingTracker,
    RecordTurn,
    RunMaintenance,
)
from actormem.actors._supervisor import (
    ActorUnavailableError,
    Request,
    SupervisedActor,
    Supervisor,
)
from actormem.compress import ExtractiveSummarizer, ModelSummarizer, Summarizer
from actormem.events import (
    Event,
    FactReconciled,
    GetMessages,
    MaintenanceRan,
    MemoryRecorded,
    ModelFallback,
    RecordingFailed,
)
from actormem.messages import Msg
from actormem.models.base import ChatModel
from actormem.models.gate import TurnGate
from actormem.recorder import (
    Decision,
    ExtractedFact,
    ExtractionError,
    ModelExtractor,
    ModelReconciler,
    RecorderConfig,
    RuleExtractor,
    last_question,
    reconcile_by_slot,
    render_turn,
    reply_context,
    speaker_label,
    turn_speaker,
)
from actormem.recorder._batch_write import write_each
from actormem.recorder._rules import CATEGORIES
from actormem.store import (
    KEYED_KIND,
    MemoryNotFoundError,
    MemoryRecord,
    MemoryStore,
    Namespace,
    NewMemory,
    SearchFilters,
    StoreError,
    StoreFencedError,
    WriteResult,
    content_hash,
)

__all__ = [
    "RECORDER",
    "EndSession",
    "ProcessBatch",
    "RecordTurn",
    "RecorderActor",
    "RecordingError",
    "RecordingTracker",
    "RunMaintenance",
]

log = structlog.get_logger(__name__)

#: The actor's name: the ``source`` of its events.
RECORDER: Final = "recorder"
_SESSION_INSTRUCTION: Final = (
    "Summarize this conversation for long-term memory in the third person: who the user is, "
    "what they wanted, what was decided or done, and anything left open. Keep names, numbers "
    "and dates."
)
_WRITE_RETRY_DELAY: Final = 0.05
_NOT_RECONCILED: Final = frozenset({"episode", KEYED_KIND})


class _Refused(Exception):
    """A batch was written but the store refused some of its memories (``out``: the rest)."""

    def __init__(self, out: _Outcome, refused: int, message: str) -> None:
        super().__init__(message)
        self.out = out
        self.refused = refused


# -- the actor -----------------------------------------------------------------------------------


class _Outcome:
    __slots__ = ("added", "deleted", "ids", "unchanged", "updated")

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.added = 0
        self.updated = 0
        self.deleted = 0
        self.unchanged = 0


class RecorderActor(SupervisedActor):
    """See the module docstring.

    Args:
        supervisor: restarts this actor when a command fails (the handlers
            are written not to raise).
        publish: where events go.
        store: the long-term store.
        namespace: where memories are written (and the maintenance scope).
        config: batching, extraction and maintenance settings.
        tracker: the caller-side counters to report commits to.
        scheduler: the Rx scheduler of the batch timer.
        stm: the short-term memory actor (for ``EndSession``).
        model: extracts and reconciles facts (offline rules when None).
        gate: the conversation's turn gate: model calls run between turns and
            give way to a turn that starts (``RecorderConfig.yield_to_turns``).
        state: unused (the recorder keeps nothing that a restart must carry).
    """

    def __init__(
        self,
        supervisor: Supervisor | None,
        publish: Callable[[Event], None],
        *,
        store: MemoryStore,
        namespace: Namespace,
        config: RecorderConfig,
        tracker: RecordingTracker,
        scheduler: rx_abc.SchedulerBase,
        stm: Supervisor | None = None,
        model: ChatModel | None = None,
        state: Any = None,
        gate: TurnGate | None = None,
    ) -> None:
        super().__init__(supervisor)
        self._publish = publish
        self._store = store
        self._ns = namespace
        self._cfg = config
        self._tracker = tracker
        self._scheduler = scheduler
        self._stm = stm
        self._model = model
        self._rules = RuleExtractor(min_confidence=config.confidence_threshold)
        self._extractor: ModelExtractor | None = None
        self._reconciler: ModelReconciler | None = None
        self._summarizer: Summarizer = ExtractiveSummarizer()
        if model is not None:
            gate = gate if config.yield_to_turns else None
            self._extractor = ModelExtractor(
                model, timeout=config.model_timeout, retries=config.model_retries, gate=gate
            )
            self._reconciler = ModelReconciler(
                model, timeout=config.model_timeout, retries=config.model_retries, gate=gate
            )
            self._summarizer = ModelSummarizer(model, timeout=config.model_timeout)
        self._slots: dict[str, str] = {}  # slot -> memory id (offline reconciliation)
        self._prev_turn: tuple[str | None, str] | None = None  # (speaker, its last question)
        self._subject: Subject[RecordTurn] = Subject()
        self._pipe: rx_abc.DisposableBase | None = None
        self._stopping = False

    def restart_state(self) -> None:
        return None

    # -- pipeline ---------------------------------------------------------------------

    def on_start(self) -> None:
        super().on_start()
        self._pipe = self._subject.pipe(
            ops.buffer_with_time_or_count(
                self._cfg.batch_seconds, self._cfg.batch_count, scheduler=self._scheduler
            ),
        ).subscribe(on_next=self._emit, on_error=self._pipe_error)

    def on_stop(self) -> None:
        # Turns and batches that reached the inbox behind the stop message
        # (a timer emission racing the stop) are handled here, then completing
        # the subject emits the partial batch, which is processed right here
        # too: shutdown commits everything it was given.
        self._stopping = True
        for cmd in _drain_inbox(self.actor_inbox):
            try:
                if isinstance(cmd, RecordTurn):
                    self._subject.on_next(cmd)
                elif isinstance(cmd, ProcessBatch):
                    self._process(cmd.turns)
            except Exception:
                log.exception("recorder.drain_failed", command=type(cmd).__name__)
        try:
            self._subject.on_completed()
        except Exception:
            log.exception("recorder.final_batch_failed")
        if self._pipe is not None:
            self._pipe.dispose()

    def _cut_batch(self) -> None:
        """Emit the open batch now: complete this pipeline and start a fresh one."""
        old_subject, old_pipe = self._subject, self._pipe
        self._subject = Subject()
        self.on_start()
        try:
            old_subject.on_completed()  # the partial batch goes out through _emit
        finally:
            if old_pipe is not None:
                old_pipe.dispose()

    def on_replaced(self) -> None:
        # A supervised restart: hand the turns still buffered in this instance's
        # pipeline to the replacement (through the supervisor), then stop its timer.
        try:
            self._subject.on_completed()
        finally:
            if self._pipe is not None:
                self._pipe.dispose()

    def _emit(self, batch: list[RecordTurn]) -> None:
        if not batch:
            return
        cmd = ProcessBatch(turns=tuple(batch))
        try:
            if self._stopping:
                self._process(cmd.turns)
            elif self._supervisor is not None:
                self._supervisor.tell(cmd)
            else:
                self.actor_ref.tell(cmd)
        except Exception as exc:  # the actor is gone: say so, never lose count silently
            log.error("recorder.batch_undeliverable", turns=len(batch), error=repr(exc))
            self._tracker.done(len(batch), failed=True, error=repr(exc))
            self._publish(
                RecordingFailed(
                    source=RECORDER, error=repr(exc), turns=len(batch), action="not recorded"
                )
            )

    def _pipe_error(self, exc: Exception) -> None:
        log.error("recorder.pipeline_error", error=repr(exc))

    # -- commands -----------------------------------------------------------------------

    def handle(self, cmd: Any) -> Any:
        match cmd:
            case RecordTurn():
                self._subject.on_next(cmd)
                return None
            case ProcessBatch(turns=turns):
                self._process(turns)
                return None
            case EndSession():
                return self._end_session()
            case RunMaintenance(reason=reason):
                return self._maintenance(reason)
            case CutBatch():
                self._cut_batch()
                return None
        raise TypeError(f"recorder got an unknown command {type(cmd).__name__}")

    # -- a batch ---------------------------------------------------------------------------

    def _process(self, turns: tuple[RecordTurn, ...]) -> None:
        n = len(turns)
        t0 = time.perf_counter()
        refused: _Refused | None = None
        try:
            out = self._record_batch(turns)
        except _Refused as exc:  # the rest of the batch was recorded
            out, refused = exc.out, exc
        except Exception as exc:
            log.exception("recorder.batch_failed", turns=n)
            self._tracker.done(n, failed=True, error=repr(exc))
            self._publish(
                RecordingFailed(source=RECORDER, error=repr(exc), turns=n, action="not recorded")
            )
            return
        ms = (time.perf_counter() - t0) * 1e3
        # Publish before marking the turns done: a flush() that returns has then
        # already handed the ids to subscribers (the journal waits on its queue).
        self._publish(
            MemoryRecorded(
                source=RECORDER,
                ids=tuple(out.ids),
                added=out.added,
                updated=out.updated,
                deleted=out.deleted,
                unchanged=out.unchanged,
                turns=n,
                duration_ms=ms,
            )
        )
        if refused is not None:
            # The turns were processed and their other memories stored: they are
            # committed, not failed; the refused memories are counted apart.
            log.error("recorder.memories_refused", turns=n, error=str(refused))
            self._publish(
                RecordingFailed(
                    source=RECORDER,
                    error=str(refused),
                    refused=refused.refused,
                    action="the refused memories were not recorded; the rest of the batch was",
                )
            )
            self._tracker.done(n, refused=refused.refused, error=str(refused))
            return
        self._tracker.done(n)
        log.debug("recorder.batch", turns=n, ms=round(ms, 2), added=out.added)

    def _record_batch(self, turns: tuple[RecordTurn, ...]) -> _Outcome:
        cfg = self._cfg
        items: list[NewMemory] = []
        if cfg.record_episodes:
            for t in turns:
                pace()
                text = render_turn(t.msgs, cfg.max_episode_chars)
                text += self._reply_note(t.msgs)
                if text:
                    items.append(
                        NewMemory(
                            content=text,
                            kind="episode",
                            importance=cfg.episode_importance,
                            tags=("episode",),
                            source_ids=tuple(m.id for m in t.msgs),
                            created_at=t.msgs[0].created_at,
                            metadata=_speaker_meta(t.msgs),
                        )
                    )
        episodes = len(items)
        decisions = self._decide([t.msgs for t in turns])
        adds = [d for d in decisions if d.op == "ADD"]
        items.extend(_fact_memory(d) for d in adds)
        out = _Outcome()
        results: list[WriteResult | None] = []
        refused: list[str] = []
        if items:
            results, refused = self._write_each(items)
        for r in results[:episodes]:
            if r is None:
                continue
            out.ids.append(r.id)
            if r.op == "ADD":
                out.added += 1
            else:
                out.unchanged += 1
        for d, r in zip(adds, results[episodes:], strict=True):
            if r is None:
                continue
            out.ids.append(r.id)
            if d.fact.slot:
                self._slots[d.fact.slot] = r.id
            if r.op == "ADD":
                out.added += 1
                self._publish(
                    FactReconciled(source=RECORDER, op="ADD", memory_id=r.id, new=d.content)
                )
            else:  # the store merged it into an existing duplicate
                out.unchanged += 1
                self._publish(
                    FactReconciled(
                        source=RECORDER, op="NONE", memory_id=r.id, old=d.content, new=d.content
                    )
                )
        for d in decisions:
            if d.op != "ADD":
                self._apply(d, out)
        if refused:
            raise _Refused(
                out,
                len(refused),
                f"the store refused {len(refused)} of {len(items)} memories of the batch "
                f"(the others were recorded): {'; '.join(refused)}",
            )
        return out

    def _reply_note(self, msgs: Sequence[Msg]) -> str:
        """A one-speaker turn that answers the previous turn's question says so.

        Recorded one message at a time (a conversation between people), the
        answer "Yes, Oscar, my guinea pig" means little without "Do you have
        any pets?": the question travels with the episode that answers it.
        """
        speaker = turn_speaker(msgs)
        prev, self._prev_turn = self._prev_turn, (speaker, last_question(msgs))
        if speaker is None or prev is None:
            return ""
        asker, question = prev
        if not question or asker is None or asker == speaker:
            return ""
        return reply_context(asker, question)

    def _write_each(self, items: list[NewMemory]) -> tuple[list[WriteResult | None], list[str]]:
        """``items`` written as one batch, or one by one if the store refuses the batch."""
        return write_each(self._store, self._ns, items, self._write)

    def _write(self, fn: Callable[[], list[WriteResult]]) -> list[WriteResult]:
        try:
            return fn()
        except StoreError as exc:
            if isinstance(exc, StoreFencedError):  # refused for good: never tried again
                raise
            log.warning("recorder.write_retry", error=repr(exc))
            time.sleep(_WRITE_RETRY_DELAY)
            return fn()

    def _apply(self, d: Decision, out: _Outcome) -> None:
        assert d.memory_id is not None
        if d.op == "NONE":
            out.unchanged += 1
            self._publish(
                FactReconciled(
                    source=RECORDER, op="NONE", memory_id=d.memory_id, old=d.old, new=d.fact.content
                )
            )
            return
        reason = f"reconciled ({'rules' if self._model is None else 'model'}): {d.fact.content}"
        try:
            if d.op == "UPDATE" and d.retag:
                res = self._retag(d, reason)
                if res.op == "UPDATE":
                    out.updated += 1
                else:
                    out.unchanged += 1
            elif d.op == "UPDATE":
                res = self._store.update(self._ns, d.memory_id, content=d.content, reason=reason)
                if res.op == "UPDATE":
                    out.updated += 1
                else:
                    out.unchanged += 1
            else:
                self._store.delete(self._ns, d.memory_id, reason=reason)
                out.deleted += 1
                self._slots = {k: v for k, v in self._slots.items() if v != d.memory_id}
        except MemoryNotFoundError:
            log.info("recorder.reconcile_target_gone", op=d.op, memory_id=d.memory_id)
            return
        out.ids.append(d.memory_id)
        self._publish(
            FactReconciled(
                source=RECORDER, op=d.op, memory_id=d.memory_id, old=d.old, new=d.content
            )
        )

    def _retag(self, d: Decision, reason: str) -> WriteResult:
        """An UPDATE that moves a memory to the correcting fact's slot (espresso -> decaf)."""
        assert d.memory_id is not None
        rec = self._store.get(self._ns, d.memory_id)
        if rec is None:
            raise MemoryNotFoundError(d.memory_id)
        new = _fact_memory(d)
        kept = [t for t in rec.tags if not t.startswith("slot:") and t not in CATEGORIES]
        tags = tuple(dict.fromkeys((*new.tags, *kept)))
        meta = {k: v for k, v in rec.metadata.items() if k != "slot"}
        if d.fact.slot:
            meta["slot"] = d.fact.slot
        res = self._store.update(
            self._ns, d.memory_id, content=d.content, tags=tags, metadata=meta, reason=reason
        )
        self._slots = {k: v for k, v in self._slots.items() if v != d.memory_id}
        if d.fact.slot:
            self._slots[d.fact.slot] = d.memory_id
        return res

    # -- extraction and reconciliation -------------------------------------------------------

    def _decide(self, turns: Sequence[Sequence[Msg]]) -> list[Decision]:
        threshold = self._cfg.confidence_threshold
        if self._extractor is None:
            return self._offline(turns)
        try:
            facts = _unique(self._extractor.extract(turns), threshold)
        except ExtractionError as exc:
            # A model never makes memory worse than no model: its unusable reply
            # gives way to the offline extractor for this batch.
            self._fall_back(exc, len(turns), "extraction")
            return self._offline(turns)
        if not facts:
            return []
        assert self._reconciler is not None
        try:
            source = "\n".join(m.text for t in turns for m in t if m.role != "system")
            speakers = tuple(m.name for t in turns for m in t if m.name)
            return self._reconciler.decide(
                facts, self._similar(facts), source=source, subjects=speakers
            )
        except ExtractionError as exc:
            self._fall_back(exc, len(turns), "reconciliation")
            return self._offline(turns)

    def _offline(self, turns: Sequence[Sequence[Msg]]) -> list[Decision]:
        facts = _unique(self._rules.extract(turns), self._cfg.confidence_threshold)
        return reconcile_by_slot(facts, self._held_slots(facts)) if facts else []

    def _fall_back(self, exc: Exception, turns: int, stage: str) -> None:
        log.warning("recorder.model_fallback", stage=stage, error=str(exc), turns=turns)
        self._publish(
            ModelFallback(
                source=RECORDER,
                component=f"recorder.{stage}",
                error=str(exc),
                fallback=f"offline rules for the batch of {turns} turn(s)",
            )
        )

    def _similar(self, facts: Sequence[ExtractedFact]) -> list[MemoryRecord]:
        found: dict[str, MemoryRecord] = {}
        limit = self._cfg.similar_limit
        for f in facts:
            hits = self._store.search(f.content, self._ns, limit=limit * 3, touch=False)
            # the reconciler may update or delete what it sees: never an episode
            # (an event) nor a keyed fact (changed only through save_fact)
            kept = [h.memory for h in hits if h.memory.kind not in _NOT_RECONCILED][:limit]
            for rec in kept:
                found.setdefault(rec.id, rec)
        return list(found.values())

    def _held_slots(self, facts: Sequence[ExtractedFact]) -> dict[str, MemoryRecord]:
        held: dict[str, MemoryRecord] = {}
        for f in facts:
            for slot in (f.slot, *f.replaces):
                if not slot or slot in held:
                    continue
                rec: MemoryRecord | None = None
                mid = self._slots.get(slot)
                if mid is not None:
                    rec = self._store.get(self._ns, mid)
                if rec is None:
                    hits = self._store.search(
                        f.content,
                        self._ns,
                        limit=1,
                        filters=SearchFilters(tags_all=(_slot_tag(slot),)),
                        touch=False,
                    )
                    rec = hits[0].memory if hits else None
                if rec is not None and rec.kind not in _NOT_RECONCILED:
                    held[slot] = rec
                    self._slots[slot] = rec.id
                else:
                    self._slots.pop(slot, None)
        return held

    # -- lifecycle -------------------------------------------------------------------------------

    def _end_session(self) -> dict[str, Any]:
        cfg = self._cfg
        msgs: list[Msg] = []
        if self._stm is not None:
            _, msgs = self._stm.ask(GetMessages())
        report: dict[str, Any] = {"messages": len(msgs), "summary_id": None, "promoted": 0}
        if not msgs:
            return report
        items: list[NewMemory] = []
        summary = self._summarizer.summarize(
            msgs, target_tokens=cfg.summary_tokens, instruction=_SESSION_INSTRUCTION
        )
        if summary.text.strip():
            items.append(
                NewMemory(
                    content=summary.text.strip(),
                    kind="summary",
                    importance=0.6,
                    tags=("session-summary",),
                    source_ids=tuple(m.id for m in msgs)[:1000],
                    metadata={"summarizer": summary.summarizer, "messages": len(msgs)},
                )
            )
        promoted = [m for m in msgs if _promotable(m, cfg)]
        for m in promoted:
            text = render_turn([m], cfg.max_episode_chars)
            if not text:
                continue
            meta_kind = m.metadata.get("kind")
            items.append(
                NewMemory(
                    content=text,
                    kind=meta_kind if isinstance(meta_kind, str) and meta_kind else "fact",
                    importance=_importance(m),
                    tags=("promoted",),
                    source_ids=(m.id,),
                    created_at=m.created_at,
                    metadata={"access_count": _access_count(m)},
                )
            )
        if not items:
            return report
        t0 = time.perf_counter()
        # Isolated like a recorder batch: one memory the store refuses does not
        # lose the summary and the other promoted messages.
        results, refused = self._write_each(items)
        has_summary = bool(summary.text.strip())
        if has_summary and results[0] is not None:
            report["summary_id"] = results[0].id
        written = [r for r in results if r is not None]
        report["promoted"] = sum(1 for r in results[1 if has_summary else 0 :] if r is not None)
        self._publish(
            MemoryRecorded(
                source=RECORDER,
                ids=tuple(r.id for r in written),
                added=sum(1 for r in written if r.op == "ADD"),
                unchanged=sum(1 for r in written if r.op != "ADD"),
                duration_ms=(time.perf_counter() - t0) * 1e3,
            )
        )
        if refused:
            error = (
                f"the store refused {len(refused)} of {len(items)} memories of the session's end "
                f"(the others were recorded): {'; '.join(refused)}"
            )
            log.error("recorder.session_memories_refused", error=error)
            report["refused"] = refused
            self._publish(
                RecordingFailed(
                    source=RECORDER,
                    error=error,
                    refused=len(refused),
                    action="the refused memories were not recorded; the rest of the session's was",
                )
            )
        return report

    def _maintenance(self, reason: str) -> dict[str, Any]:
        cfg = self._cfg
        store, ns = self._store, self._ns
        t0 = time.perf_counter()
        report: dict[str, Any] = {"reason": reason, "namespace": str(ns)}
        actions: dict[str, Callable[[], Any]] = {
            "decay": lambda: store.decay(ns, rate=cfg.decay_rate, threshold=cfg.decay_threshold),
            "auto_forget": lambda: store.auto_forget(ns, threshold=cfg.forget_threshold),
            "prune_stale": lambda: store.prune_stale(ns, max_age_days=cfg.stale_days),
            "prune_duplicates": lambda: store.prune_duplicates(
                ns, threshold=cfg.duplicate_threshold
            ),
            "consolidate": lambda: store.consolidate(ns, threshold=cfg.consolidate_threshold),
            "enforce_cap": lambda: store.enforce_cap(ns, cfg.max_memories or 0),
        }
        for name in cfg.maintenance:
            if name == "enforce_cap" and cfg.max_memories is None:
                continue
            try:
                rep = actions[name]()
                report[name] = {
                    "examined": rep.examined,
                    "removed": len(rep.removed),
                    "merged": len(rep.merged),
                }
            except Exception as exc:  # one failing action must not stop the others
                log.exception("recorder.maintenance_failed", action=name)
                report[name] = {"error": repr(exc)}
        try:
            store.flush()
        except Exception as exc:
            report["flush"] = {"error": repr(exc)}
        self._slots.clear()
        ms = (time.perf_counter() - t0) * 1e3
        self._publish(MaintenanceRan(source=RECORDER, report=report, duration_ms=ms))
        log.info("recorder.maintenance", reason=reason, ms=round(ms, 2))
        return report


# -- helpers ------------------------------------------------------------------------------------


def _drain_inbox(inbox: Any) -> list[Any]:
    out: list[Any] = []
    while True:
        try:
            env = inbox.get_nowait()
        except queue.Empty:
            return out
        msg = getattr(env, "message", None)
        if isinstance(msg, RecordTurn | ProcessBatch):
            out.append(msg)
        elif isinstance(msg, Request) and not msg.reply.done():
            msg.reply.set_exception(ActorUnavailableError("the recorder is stopping"))


def _speaker_meta(msgs: Sequence[Msg]) -> dict[str, Any]:
    """``{"speaker": name}`` when the turn's named messages all have one name."""
    names = {speaker_label(m) for m in msgs if m.name and m.role in ("user", "assistant")}
    return {"speaker": names.pop()} if len(names) == 1 else {}


def _slot_tag(slot: str) -> str:
    return f"slot:{slot}"[:256]


def _unique(facts: Sequence[ExtractedFact], threshold: float) -> list[ExtractedFact]:
    seen: set[str] = set()
    out: list[ExtractedFact] = []
    for f in facts:
        if f.confidence < threshold:
            continue
        h = content_hash(f.content)
        if h in seen:
            continue
        seen.add(h)
        out.append(f)
    return out


def _fact_memory(d: Decision) -> NewMemory:
    f = d.fact
    tags = f.tags + ((_slot_tag(f.slot),) if f.slot else ())
    meta: dict[str, Any] = {"confidence": round(f.confidence, 3)}
    if f.slot:
        meta["slot"] = f.slot
    return NewMemory(
        content=d.content or f.content,
        kind=f.kind or "fact",
        importance=f.importance,
        tags=tuple(dict.fromkeys(t for t in tags if t)),
        source_ids=f.source_ids,
        metadata=meta,
    )


def _importance(m: Msg) -> float:
    value = m.metadata.get("importance", 0.0)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return min(1.0, max(0.0, float(value)))
    return 0.0


def _access_count(m: Msg) -> int:
    value = m.metadata.get("access_count", 0)
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else 0


def _promotable(m: Msg, cfg: RecorderConfig) -> bool:
    if m.role == "system":
        return False
    return _importance(m) >= cfg.promote_importance or (
        cfg.promote_access_count > 0 and _access_count(m) >= cfg.promote_access_count
    )

"""The recorder actor and the runtime's long-term API, end to end on real DuckDB files."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from actormem import Event, MemoryRuntime, Msg, RecordingError
from actormem.events import (
    FactReconciled,
    MaintenanceRan,
    MemoryRecorded,
    MemoryRetrieved,
    ModelFallback,
    RecordingBacklog,
    RecordingFailed,
)
from actormem.models.base import ToolSpec
from actormem.models.embedders import HashEmbedder
from actormem.models.scripted import ScriptedModel
from actormem.recorder import (
    MAINTENANCE_ACTIONS,
    LongTermMemoryMode,
    RecorderConfig,
    UnknownToolError,
)
from actormem.store import DuckDBStore, Namespace, StoreError

FAST = RecorderConfig(batch_seconds=0.02, idle_seconds=None)


def wait_for(pred: Callable[[], bool], timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > end:
            raise AssertionError("condition not met in time")
        time.sleep(0.01)


class Events:
    """Collects the events of a runtime (delivered on the bus thread)."""

    def __init__(self, rt: MemoryRuntime) -> None:
        self.items: list[Event] = []
        self._sub = rt.subscribe(self.items.append)

    def of(self, kind: type[Event]) -> list[Any]:
        return [e for e in list(self.items) if isinstance(e, kind)]


@pytest.fixture
def make_rt(tmp_path: Path) -> Iterator[Callable[..., MemoryRuntime]]:
    opened: list[MemoryRuntime] = []

    def make(**kwargs: Any) -> MemoryRuntime:
        kwargs.setdefault("session_dir", tmp_path / "sessions")
        if "store" not in kwargs:
            kwargs["store"] = tmp_path / "memory.duckdb"
            kwargs.setdefault("embedder", HashEmbedder(64))
        kwargs.setdefault("recorder", FAST)
        rt = MemoryRuntime(**kwargs)
        opened.append(rt)
        return rt

    yield make
    for rt in opened:
        rt.close()


def turn(user: str, reply: str = "Noted.") -> list[Msg]:
    return [Msg.user(user), Msg.assistant(reply)]


def _conversation(messages: Sequence[Msg]) -> str:
    return messages[-1].text


def model_fn(
    facts: Callable[[str], list[dict[str, Any]]],
    reconcile: Callable[[list[dict[str, Any]], list[dict[str, Any]]], list[dict[str, Any]]]
    | None = None,
) -> Callable[[Sequence[Msg], Sequence[ToolSpec] | None], str]:
    """A scripted model that answers the extraction and reconciliation prompts."""

    def reply(messages: Sequence[Msg], tools: Sequence[ToolSpec] | None) -> str:
        body = _conversation(messages)
        if body.startswith("Stored memories:"):
            stored_txt, new_txt = body[len("Stored memories:") :].split("\n\nNew facts:")
            stored, new = json.loads(stored_txt), json.loads(new_txt)
            decided = reconcile(stored, new) if reconcile else []
            return json.dumps({"memory": decided})
        return json.dumps({"facts": facts(body)})

    return reply


# -- modes end to end ---------------------------------------------------------------------


def test_static_control_offline_records_and_injects(make_rt: Callable[..., MemoryRuntime]) -> None:
    rt = make_rt()
    ev = Events(rt)
    assert rt.long_term_mode is LongTermMemoryMode.STATIC_CONTROL
    assert rt.tools() == []  # no memory tools in STATIC_CONTROL
    assert rt.format_for_injection("anything") == ""
    rt.add(Msg.user("Hi, I'm Ada. I live in Paris and I love green tea."))
    rt.add(Msg.assistant("Nice to meet you, Ada!"))
    rt.record(rt.messages())
    rt.flush()
    block = rt.format_for_injection("Where does Ada live?")
    assert block.startswith("<long_term_memory>") and block.endswith("</long_term_memory>")
    for fact in ("User's name is Ada", "User lives in Paris", "User likes green tea"):
        assert fact in block
    assert "(episode) user: Hi, I'm Ada." in block
    hits = rt.retrieve("green tea", limit=3)
    assert hits and any("green tea" in h.memory.content for h in hits)
    wait_for(lambda: bool(ev.of(MemoryRetrieved)) and bool(ev.of(MemoryRecorded)))
    rec = ev.of(MemoryRecorded)[0]
    assert rec.turns == 1 and rec.added == 4  # the episode and three facts
    assert {e.op for e in ev.of(FactReconciled)} == {"ADD"}
    with pytest.raises(UnknownToolError, match="AGENT_CONTROL or BOTH"):
        rt.call_tool("record_to_memory", {"content": ["x"]})


def test_static_control_with_model_one_extraction_per_batch(
    make_rt: Callable[..., MemoryRuntime],
) -> None:
    def facts(body: str) -> list[dict[str, Any]]:
        return [
            {"content": f"User mentioned {w}", "kind": "fact", "importance": 0.6, "confidence": 0.9}
            for w in ("kayaking", "Lisbon")
            if w in body
        ]

    model = ScriptedModel(model_fn(facts))
    rt = make_rt(model=model, recorder=RecorderConfig(batch_seconds=0.3, idle_seconds=None))
    for i in range(5):  # one burst -> one batch -> one extraction call
        rt.record(turn(f"Day {i}: I went kayaking near Lisbon."))
    rt.flush()
    assert model.call_count == 1
    block = rt.format_for_injection("kayaking")
    assert "User mentioned kayaking" in block and "User mentioned Lisbon" in block
    assert rt.store is not None
    assert rt.store.count(rt.namespace) == 5 + 2


def test_agent_control_tools_with_a_scripted_model(make_rt: Callable[..., MemoryRuntime]) -> None:
    rt = make_rt(long_term=LongTermMemoryMode.AGENT_CONTROL)
    names = [t["function"]["name"] for t in rt.tools()]
    assert names == ["record_to_memory", "retrieve_from_memory"]
    model = ScriptedModel(
        [
            Msg.tool_call(
                "record_to_memory",
                {"thinking": "the user told me", "content": ["User's sister Mia lives in Lyon"]},
            ),
            Msg.tool_call("retrieve_from_memory", {"keywords": ["sister", "Lyon"], "limit": 3}),
        ]
    )
    outputs = []
    for _ in range(2):  # a minimal agent loop: the model calls, the runtime runs the tool
        call = model.chat([Msg.user("...")], tools=rt.tools()).tool_uses[0]
        outputs.append(rt.call_tool(call.name, call.input))
    assert outputs[0].startswith("Recorded 1 item(s)")
    assert "User's sister Mia lives in Lyon" in outputs[1]
    assert model.last_call.tool_names == ("record_to_memory", "retrieve_from_memory")
    with pytest.raises(ValueError, match="'keywords'"):
        rt.call_tool("retrieve_from_memory", {"limit": 3})
    with pytest.raises(ValueError, match="unknown argument"):
        rt.call_tool("record_to_memory", {"content": ["a"], "bogus": 1})
    with pytest.raises(KeyError, match="unknown tool 'nope'"):
        rt.call_tool("nope", {})


def test_both_mode_tools_injection_and_recording(make_rt: Callable[..., MemoryRuntime]) -> None:
    model = ScriptedModel(
        model_fn(lambda body: [{"content": "User works at Acme", "confidence": 0.95}])
    )
    rt = make_rt(long_term="both", model=model, autocontext=True)
    names = [t["function"]["name"] for t in rt.tools()]
    assert names == ["context_reload", "record_to_memory", "retrieve_from_memory"]
    rt.record(turn("I work at Acme."))
    rt.flush()
    assert "User works at Acme" in rt.format_for_injection("job")
    assert "User works at Acme" in rt.call_tool("retrieve_from_memory", {"keywords": ["Acme"]})
    assert rt.call_tool("context_reload", {"offload_id": "nope"}).startswith("Error:")
    with pytest.raises(ValueError, match="offload_id"):
        rt.call_tool("context_reload", {})


# -- reconciliation ---------------------------------------------------------------------------


def test_reconciliation_ops_with_history_rows(make_rt: Callable[..., MemoryRuntime]) -> None:
    first = ["User lives in Paris", "User owns a red bike", "User likes jazz"]

    def facts(body: str) -> list[dict[str, Any]]:
        if "second" not in body:
            return [{"content": c} for c in first]
        return [
            {"content": "User moved to Berlin"},
            {"content": "User sold the red bike"},
            {"content": "User enjoys jazz"},
            {"content": "User has a cat named Tom"},
        ]

    def reconcile(stored: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[dict[str, Any]]:
        ids = {m["text"]: m["id"] for m in stored}
        return [
            {"fact": 0, "event": "UPDATE", "id": ids[first[0]], "text": "User lives in Berlin"},
            {"fact": 1, "event": "DELETE", "id": ids[first[1]]},
            {"fact": 2, "event": "NONE", "id": ids[first[2]]},
            {"fact": 3, "event": "ADD", "text": "User has a cat named Tom"},
        ]

    model = ScriptedModel(model_fn(facts, reconcile))
    rt = make_rt(model=model, recorder=FAST.replace(record_episodes=False))
    ev = Events(rt)
    rt.record(turn("first turn: I live in Paris, I own a red bike and I like jazz."))
    rt.flush()
    # The facts must be supported by what was said (a model's made-up facts are dropped).
    rt.record(turn("second turn: I moved to Berlin, sold the red bike, jazz is great, my cat Tom"))
    rt.flush()
    store, ns = rt.store, rt.namespace
    assert store is not None
    live = {m.content for m in store.list(ns)}
    assert live == {"User lives in Berlin", "User likes jazz", "User has a cat named Tom"}
    ops = [(h.op, h.old_content, h.new_content) for h in store.history(ns)]
    assert ("UPDATE", "User lives in Paris", "User lives in Berlin") in ops
    assert ("DELETE", "User owns a red bike", None) in ops
    assert ("ADD", None, "User has a cat named Tom") in ops
    wait_for(lambda: len(ev.of(FactReconciled)) == 7)
    assert sorted(e.op for e in ev.of(FactReconciled)) == [
        "ADD",
        "ADD",
        "ADD",
        "ADD",
        "DELETE",
        "NONE",
        "UPDATE",
    ]
    wait_for(lambda: len(ev.of(MemoryRecorded)) == 2)
    last = ev.of(MemoryRecorded)[-1]
    assert (last.added, last.updated, last.deleted, last.unchanged) == (1, 1, 1, 1)
    assert model.call_count == 3  # extraction, extraction + reconciliation


def test_offline_correction_updates_the_slot(make_rt: Callable[..., MemoryRuntime]) -> None:
    rt = make_rt()
    rt.record(turn("I live in Paris."))
    rt.flush()
    rt.record(turn("Actually I moved to Berlin last month."))
    rt.flush()
    store = rt.store
    assert store is not None
    facts = [m.content for m in store.list(rt.namespace, kinds=["fact"])]
    assert facts == ["User lives in Berlin"]
    rows = [h for h in store.history(rt.namespace) if h.op == "UPDATE"]
    assert [(h.old_content, h.new_content) for h in rows] == [
        ("User lives in Paris", "User lives in Berlin")
    ]
    assert "User lives in Berlin" in rt.format_for_injection("where does the user live")


def test_episodes_keep_who_spoke(make_rt: Callable[..., MemoryRuntime]) -> None:
    rt = make_rt()
    rt.record(Msg.user("I adopted a greyhound called Pixel last spring.", name="Andrew"))
    rt.record(Msg.user("I work at Lumen Labs.", name="Audrey"))
    rt.record(Msg.user("Where do dolphins sleep?"))  # no name: the role stays the label
    rt.flush()
    store = rt.store
    assert store is not None
    episodes = {m.content: m for m in store.list(rt.namespace, kinds=["episode"])}
    andrew = episodes["Andrew: I adopted a greyhound called Pixel last spring."]
    assert andrew.metadata.get("speaker") == "Andrew"
    assert episodes["Audrey: I work at Lumen Labs."].metadata.get("speaker") == "Audrey"
    assert "speaker" not in episodes["user: Where do dolphins sleep?"].metadata
    block = rt.format_for_injection("What dog did Andrew adopt?")
    assert "(episode) Andrew: I adopted a greyhound called Pixel" in block
    assert "user: I adopted" not in block
    facts = sorted(m.content for m in store.list(rt.namespace, kinds=["fact"]))
    assert facts == [  # the facts name their speakers too
        "Andrew adopted a greyhound called Pixel last spring",
        "Audrey works at Lumen Labs",
    ]


def test_an_answer_recorded_alone_carries_the_question_it_answers(
    make_rt: Callable[..., MemoryRuntime],
) -> None:
    rt = make_rt()
    rt.record(Msg.user("Congrats on the new flat! Do you have any pets?", name="Mel"))
    rt.record(Msg.user("Yes! Oscar, my guinea pig.", name="Caro"))
    rt.record(Msg.user("So cute. Is he loud?", name="Mel"))
    rt.record(Msg.user("Is it raining there?", name="Mel"))  # same speaker: no reply
    rt.record(Msg.user("Not at all.", name="Mel"))
    rt.record(Msg.user("What a day.", name="Caro"))  # the question was not the last sentence
    rt.record([Msg.user("Do you cook?"), Msg.assistant("Sometimes.")])  # a whole exchange
    rt.record(Msg.user("Fine, thanks.", name="Caro"))  # follows a two-speaker turn
    rt.flush()
    store = rt.store
    assert store is not None
    episodes = [m.content for m in store.list(rt.namespace, kinds=["episode"])]
    assert 'Caro: Yes! Oscar, my guinea pig. (replying to Mel: "Do you have any pets?")' in episodes
    for plain in ("Mel: Is it raining there?", "Mel: Not at all.", "Caro: Fine, thanks."):
        assert plain in episodes
    assert "Caro: What a day." in episodes
    block = rt.format_for_injection("Does Caro have pets?")
    assert "Oscar, my guinea pig" in block


def test_named_speakers_keep_their_own_slots(make_rt: Callable[..., MemoryRuntime]) -> None:
    rt = make_rt()
    rt.record(Msg.user("I live in Paris.", name="Ada"))
    rt.record(Msg.user("I live in Rome.", name="Bea"))
    rt.flush()
    rt.record(Msg.user("We moved! I live in Lyon now.", name="Ada"))
    rt.flush()
    store = rt.store
    assert store is not None
    facts = sorted(m.content for m in store.list(rt.namespace, kinds=["fact"]))
    assert facts == ["Ada lives in Lyon", "Bea lives in Rome"]


@pytest.mark.parametrize("second", ["still not json", '{"facts": [{"content": "User is 40"}]}'])
def test_malformed_model_output_is_retried_once_then_the_offline_extractor_runs(
    make_rt: Callable[..., MemoryRuntime], second: str
) -> None:
    model = ScriptedModel(["```json\n{not json at all", second])
    rt = make_rt(model=model)
    ev = Events(rt)
    rt.record(turn("I turned 40 today."))
    rt.flush()
    assert model.call_count == 2  # the retry quotes the problem back
    assert "could not be used" in model.last_call.messages[-1].text
    store = rt.store
    assert store is not None
    kinds = sorted(m.kind for m in store.list(rt.namespace))
    assert kinds == ["episode", "fact"]  # no garbage, and no fewer facts than without a model
    assert not ev.of(RecordingFailed)
    facts = [m.content for m in store.list(rt.namespace, kinds=["fact"])]
    if second.startswith("{"):
        assert facts == ["User is 40"]
        assert not ev.of(ModelFallback)
    else:
        assert facts == ["User is 40 years old"]  # the offline rules read the batch
        wait_for(lambda: bool(ev.of(ModelFallback)))
        fb = ev.of(ModelFallback)[0]
        assert fb.component == "recorder.extraction" and "offline" in fb.fallback
        assert "not valid JSON" in fb.error or "no JSON" in fb.error
    assert all(h.op == "ADD" for h in store.history(rt.namespace))


SAID = "Hi! I'm Ada, I live in Porto and I'm allergic to peanuts."
OFFLINE = {"User's name is Ada", "User lives in Porto", "User is allergic to peanuts"}


@pytest.mark.parametrize(
    "replies",
    [
        ["Sure! Here are the facts you asked for.", "I cannot comply."],  # junk
        ['{"facts": "Ada, Porto"}', '{"memories": []}'],  # wrong shapes
        ["[1, 2, 3]", '{"facts": [42]}'],  # wrong item shapes
    ],
    ids=["junk", "wrong-shape", "wrong-items"],
)
def test_a_model_never_makes_memory_worse_than_no_model(
    make_rt: Callable[..., MemoryRuntime], replies: list[str]
) -> None:
    rt = make_rt(model=ScriptedModel(replies), recorder=FAST.replace(record_episodes=False))
    ev = Events(rt)
    rt.record(turn(SAID))
    rt.flush()
    store = rt.store
    assert store is not None
    assert {m.content for m in store.list(rt.namespace)} == OFFLINE
    wait_for(lambda: bool(ev.of(ModelFallback)))
    assert ev.of(ModelFallback)[0].component == "recorder.extraction"


def test_invented_facts_are_dropped_and_supported_ones_kept(
    make_rt: Callable[..., MemoryRuntime],
) -> None:
    reply = json.dumps(
        {
            "facts": [
                {"content": "User lives in Porto"},
                {"content": "User has a cat named Whiskers"},
                {"content": "User works at Google as a pilot"},
            ]
        }
    )
    rt = make_rt(model=ScriptedModel([reply]), recorder=FAST.replace(record_episodes=False))
    rt.record(turn(SAID))
    rt.flush()
    store = rt.store
    assert store is not None
    assert [m.content for m in store.list(rt.namespace)] == ["User lives in Porto"]


def test_an_unusable_reconciliation_falls_back_to_the_offline_path(
    make_rt: Callable[..., MemoryRuntime],
) -> None:
    first = json.dumps({"facts": [{"content": "User lives in Porto"}]})
    second = json.dumps({"facts": [{"content": "User lives in Braga"}]})
    model = ScriptedModel([first, second, "not json", "still not json"])
    rt = make_rt(model=model, recorder=FAST.replace(record_episodes=False))
    ev = Events(rt)
    rt.record(turn("I live in Porto."))
    rt.flush()
    rt.record(turn("We moved, I live in Braga now."))
    rt.flush()
    store = rt.store
    assert store is not None
    live = {m.content for m in store.list(rt.namespace)}
    assert "User lives in Braga" in live
    wait_for(lambda: bool(ev.of(ModelFallback)))
    assert ev.of(ModelFallback)[0].component == "recorder.reconciliation"


# -- the pipeline: nothing lost -------------------------------------------------------------


def test_ten_thousand_turns_in_bursts_nothing_lost(tmp_path: Path) -> None:
    store = DuckDBStore(
        tmp_path / "burst.duckdb",
        embedder=HashEmbedder(32),
        near_duplicate_threshold=None,
        touch_flush_interval=None,
    )
    rt = MemoryRuntime(
        session_dir=tmp_path / "s",
        store=store,
        recorder=RecorderConfig(batch_seconds=0.05, batch_count=500, idle_seconds=None),
    )
    ev = Events(rt)
    n_threads, per_thread = 4, 2_500

    def producer(t: int) -> None:
        for i in range(per_thread):
            rt.record([Msg.user(f"thread {t} turn {i} ping"), Msg.assistant(f"pong {t}-{i}")])
            if i % 500 == 499:
                time.sleep(0.01)  # bursts with gaps

    threads = [threading.Thread(target=producer, args=(t,)) for t in range(n_threads)]
    started = time.monotonic()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    rt.flush(timeout=120)
    elapsed = time.monotonic() - started
    assert rt.recording_stats() == {
        "submitted": 10_000,
        "finished": 10_000,
        "failed": 0,
        "pending": 0,
        "refused": 0,
    }
    assert store.count(rt.namespace) == 10_000
    wait_for(lambda: sum(e.turns for e in ev.of(MemoryRecorded)) == 10_000)
    # Batched, not one transaction per turn -- a bound that holds under any scheduling
    # (a fixed "< 200" could fail when a loaded machine stretched the bursts): a batch closes
    # when full (at most 10,000 / 500 of them), when its 0.05 s window ends (one window
    # after another: at most elapsed / 0.05 + 1) or at the final flush.
    assert len(ev.of(MemoryRecorded)) <= 10_000 // 500 + elapsed / 0.05 + 2
    rt.close()
    store.close()


def test_shutdown_commits_what_it_was_given(tmp_path: Path) -> None:
    path = tmp_path / "m.duckdb"
    config = RecorderConfig(batch_seconds=60, batch_count=10_000, idle_seconds=None)
    rt = MemoryRuntime(
        session_dir=tmp_path / "s", store=path, embedder=HashEmbedder(64), recorder=config
    )
    for i in range(25):
        rt.record(turn(f"message number {i} about topic {i * 7}"))
    assert rt.recording_stats()["pending"] == 25  # the 60 s batch window is still open
    rt.close(timeout=0.05)  # flush gives up; stopping the actor still commits the last batch
    with DuckDBStore(path, embedder=HashEmbedder(64)) as store:
        assert store.count(Namespace(user_id="default")) == 25


def test_backlog_event_and_back_pressure(make_rt: Callable[..., MemoryRuntime]) -> None:
    model = ScriptedModel(lambda m, t: '{"facts": []}', delay=0.15)
    config = RecorderConfig(
        batch_seconds=0.01, batch_count=2, backlog_limit=6, max_pending=10, idle_seconds=None
    )
    rt = make_rt(model=model, recorder=config)
    ev = Events(rt)
    peak = 0
    for i in range(30):
        rt.record(turn(f"turn {i}"))
        peak = max(peak, rt.recording_stats()["pending"])
    assert peak <= 10  # record() waited instead of queueing without bound
    rt.flush(timeout=60)
    assert rt.recording_stats()["finished"] == 30
    wait_for(lambda: bool(ev.of(RecordingBacklog)))
    assert ev.of(RecordingBacklog)[0].limit == 6


class _FailingStore:
    """A store whose add_many fails (everything else is the real store)."""

    def __init__(self, inner: DuckDBStore) -> None:
        self._inner = inner
        self.fail = True

    def add_many(self, *args: Any, **kwargs: Any) -> Any:
        if self.fail:
            raise StoreError("disk full (simulated)")
        return self._inner.add_many(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def test_failed_commit_is_reported_and_flush_raises(tmp_path: Path) -> None:
    inner = DuckDBStore(tmp_path / "f.duckdb", embedder=HashEmbedder(64))
    store = _FailingStore(inner)
    rt = MemoryRuntime(session_dir=tmp_path / "s", store=store, recorder=FAST)  # type: ignore[arg-type]
    ev = Events(rt)
    rt.record(turn("this will not be written"))
    with pytest.raises(RecordingError, match="disk full"):
        rt.flush()
    wait_for(lambda: bool(ev.of(RecordingFailed)))
    assert ev.of(RecordingFailed)[0].action == "not recorded"
    store.fail = False  # the recorder lives on
    rt.record(turn("this one is written"))
    rt.flush()
    assert inner.count(rt.namespace) == 1
    rt.close()
    inner.close()


# -- lifecycle ---------------------------------------------------------------------------------


def test_on_idle_fires_after_quiet_period_not_during_a_turn(
    make_rt: Callable[..., MemoryRuntime],
) -> None:
    rt = make_rt(recorder=RecorderConfig(batch_seconds=0.02, idle_seconds=0.25))
    ev = Events(rt)
    rt.add(Msg.user("a question that takes the model a while"))  # the turn is in flight
    time.sleep(0.8)
    assert ev.of(MaintenanceRan) == []
    rt.add(Msg.assistant("the answer"))
    rt.on_turn_end()
    wait_for(lambda: len(ev.of(MaintenanceRan)) == 1, timeout=60)
    ran = ev.of(MaintenanceRan)[0]
    assert ran.report["reason"] == "idle" and "decay" in ran.report
    time.sleep(0.7)  # no new activity: it does not run again
    assert len(ev.of(MaintenanceRan)) == 1
    rt.record(turn("new activity"))
    wait_for(lambda: len(ev.of(MaintenanceRan)) == 2, timeout=60)


def test_on_session_end_summarizes_and_promotes(make_rt: Callable[..., MemoryRuntime]) -> None:
    rt = make_rt()
    rt.add(Msg.user("We planned the launch of Project Falcon for March 3rd in Lisbon."))
    rt.add(Msg.assistant("Launch checklist drafted.", importance=0.9))
    rt.add(Msg.user("The budget is 40,000 euros.", access_count=3))
    rt.add(Msg.assistant("Small talk.", importance=0.1))
    rt.fleeting["scratch"] = 42
    report = rt.on_session_end()
    assert report["messages"] == 4 and report["promoted"] == 2 and report["summary_id"]
    assert len(rt.fleeting) == 0
    store = rt.store
    assert store is not None
    summary = store.get(rt.namespace, report["summary_id"])
    assert summary is not None and summary.kind == "summary" and "Falcon" in summary.content
    promoted = {m.content for m in store.list(rt.namespace) if "promoted" in m.tags}
    assert promoted == {"assistant: Launch checklist drafted.", "user: The budget is 40,000 euros."}


def test_fleeting_tier_per_turn_and_in_sessions(make_rt: Callable[..., MemoryRuntime]) -> None:
    rt = make_rt()
    rt.fleeting["calc"] = {"x": 1}
    rt.fleeting["handle"] = object()  # not JSON: left out of the saved state
    rt.save_session("s1")
    rt.on_turn_end()
    assert dict(rt.fleeting) == {}
    assert rt.load_session("s1")
    assert dict(rt.fleeting) == {"calc": {"x": 1}}


# -- keyed facts and namespaces ------------------------------------------------------------------


def test_keyed_facts_exact_with_history(make_rt: Callable[..., MemoryRuntime]) -> None:
    rt = make_rt(recorder=FAST.replace(maintenance=("decay", "auto_forget", "consolidate")))
    assert rt.get_fact("plan") is None
    rt.save_fact("plan", "pro", category="billing")
    rt.save_fact("plan", "enterprise", category="billing")
    rt.save_fact("plan ", "enterprise", category="billing")  # same value: no change
    rt.save_fact("account", "DE44 5001 0517 5407 3249 31")
    assert rt.get_fact("plan") == "enterprise"
    assert rt.get_fact("account") == "DE44 5001 0517 5407 3249 31"
    hist = rt.facts.history("plan")
    assert [(h.op, h.old_content, h.new_content) for h in hist] == [
        ("ADD", None, "plan: pro"),
        ("UPDATE", "plan: pro", "plan: enterprise"),
    ]
    assert rt.facts.items() == {"plan": "enterprise", "account": "DE44 5001 0517 5407 3249 31"}
    rt.on_idle()  # maintenance never touches keyed facts
    assert rt.get_fact("plan") == "enterprise"
    with pytest.raises(ValueError, match="key must not be empty"):
        rt.save_fact("  ", "x")
    with pytest.raises(ValueError, match="value must be a str"):
        rt.save_fact("k", 3)  # type: ignore[arg-type]
    assert any(h.memory.kind == "keyed_fact" for h in rt.retrieve("plan enterprise"))


def test_every_recorded_turn_keeps_its_episode(make_rt: Callable[..., MemoryRuntime]) -> None:
    """Regression: near-duplicate merging left 22% of distinct turns without an episode.

    Turns that differ by one token, and turns that are equal, are still separate events."""
    rt = make_rt(embedder=None, recorder=RecorderConfig(batch_seconds=0.05, idle_seconds=None))
    turns = [turn(f"Order number {i} shipped today.", "Okay.") for i in range(120)]
    turns += [turn("ok", "ok") for _ in range(10)]  # ten turns of new messages
    for t in turns:
        rt.record(t)
    rt.flush()
    rt.on_idle()  # duplicate pruning and consolidation must not fold them either
    assert rt.store is not None
    episodes = rt.store.list(rt.namespace, kinds=["episode"], limit=1_000)
    assert len(episodes) == len(turns)


def test_a_turn_recorded_twice_keeps_one_episode(make_rt: Callable[..., MemoryRuntime]) -> None:
    """The same messages recorded again (a retry, a resumed agent) are the same turn;
    another turn with the same words is another episode."""
    rt = make_rt(embedder=None, recorder=RecorderConfig(batch_seconds=0.05, idle_seconds=None))
    same = turn("ok", "ok")
    rt.record(same)
    rt.flush()
    rt.record(same)  # in a later batch ...
    rt.record(same)  # ... and twice in one batch
    other = turn("ok", "ok")
    rt.record(other)
    rt.flush()
    assert rt.store is not None
    episodes = rt.store.list(rt.namespace, kinds=["episode"], limit=100)
    assert sorted(e.source_ids for e in episodes) == sorted(
        tuple(m.id for m in msgs) for msgs in (same, other)
    )
    assert len(episodes) == 2


_ADA = Namespace(user_id="ada")
_BOT = Namespace(user_id="ada", agent_id="bot")
_RUN = Namespace(user_id="ada", agent_id="bot", run_id="r1")
_SESSION = Namespace(user_id="ada", agent_id="bot", run_id="r1", session_id="s1")


@pytest.mark.parametrize(
    ("owner", "wide"),
    [(_RUN, _BOT), (_SESSION, _BOT), (_SESSION, _RUN), (_BOT, _ADA), (_RUN, _ADA)],
    ids=["run-by-agent", "session-by-agent", "session-by-run", "agent-by-user", "run-by-user"],
)
def test_keyed_facts_survive_every_maintenance_path_of_a_wider_runtime(
    tmp_path: Path, owner: Namespace, wide: Namespace
) -> None:
    """Regression: an agent-level runtime's on_idle, idle timer and dream() pruned and
    merged a run-level runtime's keyed facts (4 of 6 vanished with max_memories=2)."""
    store = DuckDBStore(tmp_path / "shared.duckdb", embedder=HashEmbedder(64))
    values = {f"card_{i}": f"card number 4000 0000 0000 000{i}" for i in range(6)}
    with MemoryRuntime(
        session_dir=tmp_path / "o", store=store, namespace=owner, recorder=FAST
    ) as o:
        for key, value in values.items():
            o.save_fact(key, value)
        o.record(turn("I like green tea."))
        o.flush()
    config = RecorderConfig(
        batch_seconds=0.02,
        idle_seconds=0.2,
        max_memories=2,
        maintenance=MAINTENANCE_ACTIONS,
        decay_threshold=0.99,
        forget_threshold=0.99,
        stale_days=0,
        duplicate_threshold=0.1,
        consolidate_threshold=0.05,
    )
    with MemoryRuntime(
        session_dir=tmp_path / "w", store=store, namespace=wide, recorder=config, journal=True
    ) as w:
        ev = Events(w)
        wait_for(lambda: any(e.report["reason"] == "idle" for e in ev.of(MaintenanceRan)))
        report = w.on_idle()
        assert [a for a in MAINTENANCE_ACTIONS if "error" in report[a]] == []
        w.dream(force=True)
    try:
        with MemoryRuntime(session_dir=tmp_path / "o", store=store, namespace=owner) as again:
            assert {k: again.get_fact(k) for k in values} == values
            assert again.facts.items() == values
            assert all(h.op != "MERGE" for k in values for h in again.facts.history(k))
        # the maintenance did run over the owner's other memories (the test can fail)
        assert [m.kind for m in store.list(owner) if m.kind != "keyed_fact"] == []
    finally:
        store.close()


def test_namespace_isolation_through_the_recorder(tmp_path: Path) -> None:
    store = DuckDBStore(tmp_path / "shared.duckdb", embedder=HashEmbedder(64))
    alice = MemoryRuntime(
        session_dir=tmp_path / "a",
        store=store,
        namespace=Namespace(user_id="alice", agent_id="bot"),
        recorder=FAST,
    )
    bob = MemoryRuntime(
        session_dir=tmp_path / "b",
        store=store,
        namespace=Namespace(user_id="bob", agent_id="bot"),
        recorder=FAST,
    )
    alice.record(turn("I live in Paris and I love jazz."))
    bob.record(turn("I live in Tokyo and I love techno."))
    alice.save_fact("pin", "1111")
    bob.save_fact("pin", "2222")
    alice.flush()
    bob.flush()
    for rt, mine, theirs in ((alice, "Paris", "Tokyo"), (bob, "Tokyo", "Paris")):
        text = " ".join(h.memory.content for h in rt.retrieve("where do I live? music", limit=50))
        assert mine in text and theirs not in text
        block = rt.format_for_injection("live music", max_tokens=2_000)
        assert mine in block and theirs not in block
    assert alice.get_fact("pin") == "1111" and bob.get_fact("pin") == "2222"
    alice.close()
    bob.close()
    assert not store._closed  # the runtimes did not own the store
    store.close()


def test_amnesia_test_with_the_real_embedder(tmp_path: Path) -> None:
    """Session 1 tells facts and saves; a fresh runtime in session 2 recalls them from DuckDB."""
    path = tmp_path / "long_term.duckdb"
    sessions = tmp_path / "sessions"
    with MemoryRuntime(session_dir=sessions, store=path, recorder=FAST) as rt1:
        rt1.add(Msg.user("My name is Ada and I'm allergic to peanuts."))
        rt1.add(Msg.assistant("Got it."))
        rt1.record(rt1.messages())
        rt1.save_fact("preferred_name", "Ada")
        rt1.save_session("day1")
    with MemoryRuntime(session_dir=sessions, store=path, recorder=FAST) as rt2:
        assert rt2.messages() == []  # a new process state: nothing in short-term memory
        block = rt2.format_for_injection("Can I eat this peanut cookie?")
        assert "User is allergic to peanuts" in block
        assert rt2.get_fact("preferred_name") == "Ada"
        assert rt2.load_session("day1") and len(rt2.messages()) == 2


# -- the facade ------------------------------------------------------------------------------------


def test_runtime_without_long_term_memory(tmp_path: Path) -> None:
    with MemoryRuntime(session_dir=tmp_path) as rt:
        assert rt.long_term_mode is None and rt.store is None and rt.tools() == []
        with pytest.raises(RuntimeError, match="no long-term memory"):
            rt.retrieve("x")
        with pytest.raises(RuntimeError, match="no long-term memory"):
            rt.record(turn("x"))
        rt.flush()  # nothing to wait for
        rt.fleeting["a"] = 1
        rt.on_turn_end()
        assert len(rt.fleeting) == 0 and rt.on_idle() == {}
    with pytest.raises(ValueError, match="only apply to long-term memory"):
        MemoryRuntime(session_dir=tmp_path, namespace=Namespace(user_id="u"))
    with pytest.raises(ValueError, match="unknown long-term memory mode"):
        MemoryRuntime(session_dir=tmp_path, long_term="sometimes")


def test_long_term_mode_alone_opens_a_store_in_the_session_dir(tmp_path: Path) -> None:
    with MemoryRuntime(
        session_dir=tmp_path, long_term="agent_control", embedder=HashEmbedder(64)
    ) as rt:
        assert isinstance(rt.store, DuckDBStore)
        assert Path(rt.store.path) == tmp_path / "long_term.duckdb"
        assert rt.format_for_injection("x") == ""


def test_bad_input_errors(make_rt: Callable[..., MemoryRuntime]) -> None:
    rt = make_rt(long_term="both")
    with pytest.raises(ValueError, match="limit"):
        rt.retrieve("x", limit=0)
    with pytest.raises(ValueError, match="query must be a str"):
        rt.retrieve(3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_tokens"):
        rt.format_for_injection("x", max_tokens=0)
    from actormem import MessageError

    with pytest.raises(MessageError, match="at least one message"):
        rt.record([])
    with pytest.raises(ValueError, match=r"content\[0\] must be a string"):
        rt.call_tool("record_to_memory", {"content": [1]})
    with pytest.raises(ValueError, match="arguments must be a JSON object"):
        rt.call_tool("record_to_memory", ["x"])  # type: ignore[arg-type]


def test_async_twins(make_rt: Callable[..., MemoryRuntime]) -> None:
    rt = make_rt(long_term="both")

    async def main() -> None:
        await rt.arecord(turn("I live in Oslo."))
        await rt.aflush()
        assert "Oslo" in await rt.aformat_for_injection("where")
        assert (await rt.aretrieve("Oslo"))[0].memory.content
        await rt.asave_fact("k", "v")
        assert await rt.aget_fact("k") == "v"
        assert "Oslo" in await rt.acall_tool("retrieve_from_memory", {"keywords": ["Oslo"]})
        assert "decay" in await rt.aon_idle()
        assert (await rt.aon_session_end())["messages"] == 0

    asyncio.run(main())


def test_keyed_facts_of_another_namespace_cannot_be_read_through_a_hash_id(tmp_path: Path) -> None:
    """Regression: Namespace(user_id="alice#facts") read alice's keyed facts."""
    from actormem.models.embedders import HashEmbedder
    from actormem.store import DuckDBStore, Namespace

    with (
        DuckDBStore(tmp_path / "m.duckdb", embedder=HashEmbedder(32)) as store,
        pytest.raises(ValueError, match="'#' is reserved"),
    ):
        MemoryRuntime(session_dir=tmp_path, store=store, namespace=Namespace(user_id="a#facts"))


def test_two_runtimes_sharing_a_store_agree_on_keyed_facts(tmp_path: Path) -> None:
    """Regression: a runtime whose fact cache predated another's save added a second row."""
    from actormem.models.embedders import HashEmbedder
    from actormem.store import DuckDBStore, Namespace

    ns = Namespace(user_id="ada")
    with DuckDBStore(tmp_path / "m.duckdb", embedder=HashEmbedder(32)) as store:
        a = MemoryRuntime(session_dir=tmp_path / "a", store=store, namespace=ns)
        b = MemoryRuntime(session_dir=tmp_path / "b", store=store, namespace=ns)
        assert a.get_fact("plan") is None and b.get_fact("plan") is None  # both cached
        a.save_fact("plan", "free")
        b.save_fact("plan", "enterprise")
        assert a.get_fact("plan") == b.get_fact("plan") == "enterprise"
        assert len(a.facts.items()) == 1
        a.close()
        b.close()


def test_a_recorder_restart_loses_no_buffered_turn(
    make_rt: Callable[..., MemoryRuntime], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Turns buffered in the failed instance's Rx pipeline go to its replacement."""
    from actormem.actors.recorder import RecorderActor, RecordTurn
    from actormem.recorder import RecorderConfig

    original = RecorderActor.handle
    failed = {"n": 0}

    def flaky(self: RecorderActor, cmd: Any) -> Any:
        if isinstance(cmd, RecordTurn) and "poison" in cmd.msgs[0].text and not failed["n"]:
            failed["n"] += 1
            raise RuntimeError("transient recorder fault")
        return original(self, cmd)

    monkeypatch.setattr(RecorderActor, "handle", flaky)
    rt = make_rt(recorder=RecorderConfig(batch_seconds=1.0, batch_count=10_000))
    for i in range(20):  # buffered: the batch closes after 1 s or 10,000 turns
        rt.record(turn(f"note number {i} about topic{i}"))
    rt.record(turn("poison note"))
    rt.record(turn("after the fault"))
    rt.flush(timeout=60)
    assert rt.restart_count == 1
    assert rt.store is not None
    episodes = [r.content for r in rt.store.list(rt.namespace, kinds=["episode"], limit=100)]
    assert len(episodes) == 22
    assert any("poison note" in e for e in episodes)


def test_flush_closes_the_open_batch_instead_of_waiting_for_its_timer(
    make_rt: Callable[..., MemoryRuntime],
) -> None:
    from actormem.recorder import RecorderConfig

    rt = make_rt(recorder=RecorderConfig(batch_seconds=3_000.0, batch_count=10_000))
    for i in range(5):
        rt.record(turn(f"note {i}"))
    rt.flush(timeout=60)  # raises if it waited for the 3,000 s batch timer
    assert rt.recording_stats()["pending"] == 0
    rt.record(turn("after the flush"))  # the fresh pipeline still records
    rt.flush(timeout=60)
    assert rt.store is not None
    assert len(rt.store.list(rt.namespace, kinds=["episode"], limit=100)) == 6

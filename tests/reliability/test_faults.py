"""Fault injection: failing models, embedders, disks and subscribers.

Each fault is injected into a running runtime.  Every time: the actors stay
alive (no restart, no ActorUnavailableError), the caller gets a clear error or
a degraded result with an event that says so, and nothing already stored is
damaged (the old session file is byte-identical, the store's rows unchanged).
"""

from __future__ import annotations

import errno
import os
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import numpy.typing as npt
import pytest
import structlog

from actormem import MemoryRuntime, Msg
from actormem.actors.recorder import RecordingError
from actormem.compress import AutoContextConfig
from actormem.events import (
    Event,
    MessageAdded,
    ModelFallback,
    RecordingFailed,
)
from actormem.models.base import ToolSpec
from actormem.models.embedders import HashEmbedder
from actormem.models.scripted import ScriptedModel
from actormem.recorder import RecorderConfig
from actormem.store import DuckDBStore, EmbeddingError, Namespace, StoreError

NS = Namespace(user_id="faults", agent_id="a")
FAST = RecorderConfig(batch_seconds=0.02, idle_seconds=None, model_timeout=0.3)


class Events:
    """Collects a runtime's events; ``wait_for`` polls until one matches."""

    def __init__(self, rt: MemoryRuntime) -> None:
        self.items: list[Event] = []
        self._lock = threading.Lock()
        rt.subscribe(self._on)

    def _on(self, e: Event) -> None:
        with self._lock:
            self.items.append(e)

    def of(self, kind: type[Event]) -> list[Any]:
        with self._lock:
            return [e for e in self.items if isinstance(e, kind)]

    def wait_for(self, kind: type[Event], timeout: float = 60.0) -> list[Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.of(kind)
            if found:
                return found
            time.sleep(0.01)
        raise AssertionError(f"no {kind.__name__} event within {timeout}s: {self.items[-5:]}")


class SlowModel:
    """A model that ignores its timeout: every call sleeps ``seconds`` and then answers."""

    name = "slow"

    def __init__(self, seconds: float, reply: str = '{"facts": []}') -> None:
        self.seconds = seconds
        self.reply = reply
        self.calls = 0

    def chat(
        self,
        messages: Sequence[Msg],
        *,
        tools: Sequence[ToolSpec] | None = None,
        timeout: float | None = None,
    ) -> Msg:
        self.calls += 1
        time.sleep(self.seconds)
        return Msg.assistant(self.reply)

    async def achat(
        self,
        messages: Sequence[Msg],
        *,
        tools: Sequence[ToolSpec] | None = None,
        timeout: float | None = None,
    ) -> Msg:  # pragma: no cover - the runtime calls chat()
        return self.chat(messages, tools=tools, timeout=timeout)


class FlakyEmbedder:
    """HashEmbedder that can be switched to raise, return NaN or the wrong dimension."""

    name = "hash-64"
    dim = 64

    def __init__(self) -> None:
        self.inner = HashEmbedder(64)
        self.mode = "ok"

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        out = self.inner.embed(texts)
        if self.mode == "raise":
            raise ConnectionError("embedding server went away")
        if self.mode == "nan":
            out[:, 3] = np.nan
        if self.mode == "dim":
            return np.zeros((len(texts), 32), dtype=np.float32)
        return out


def _alive(rt: MemoryRuntime) -> None:
    """Every actor answers, and none had to be restarted."""
    rt.add(Msg.user("still there?"))
    assert rt.messages()[-1].text == "still there?"
    assert rt.restart_count == 0
    for sup in rt._supervisors():
        assert sup.alive, sup.name


def _rows(path: Path) -> list[tuple[Any, ...]]:
    con = duckdb.connect(str(path))
    try:
        return sorted(
            con.execute(
                "SELECT id, content, content_hash, deleted_at, superseded_by FROM memories"
            ).fetchall()
        )
    finally:
        con.close()


def _turn(text: str) -> list[Msg]:
    return [Msg.user(text), Msg.assistant(f"Noted: {text}")]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[DuckDBStore]:
    s = DuckDBStore(tmp_path / "m.duckdb", embedder=HashEmbedder(64), touch_flush_interval=None)
    yield s
    s.close()


# -- models into the compressor -------------------------------------------------------------

COMPRESS = AutoContextConfig(msg_threshold=8, last_keep=2, model_timeout=0.3)


def _fill(rt: MemoryRuntime, n: int = 12) -> None:
    for i in range(n):
        rt.add(Msg.user(f"question {i} about the harbor schedule and the ferry to island {i}"))
        rt.add(Msg.assistant(f"answer {i}: the ferry leaves at {i}:15 from pier {i}"))


@pytest.mark.parametrize(
    "model",
    [
        ScriptedModel.failing(),
        ScriptedModel.hanging(),  # honours the timeout, raises at it
        SlowModel(60.0),  # ignores the timeout (compress_now's 30 s bound would fail)
        ScriptedModel([""], cycle=True),  # empty summary
        ScriptedModel([Msg.tool_call("lookup", {"q": "x"})], cycle=True),  # no text at all
        ScriptedModel([RuntimeError("boom"), "ok"], cycle=True),
    ],
    ids=["raises", "hangs", "ignores-timeout", "empty", "tool-call", "flaky"],
)
def test_compressor_model_faults_degrade_to_offline_summaries(tmp_path: Path, model: Any) -> None:
    with MemoryRuntime(session_dir=tmp_path, autocontext=COMPRESS, model=model) as rt:
        ev = Events(rt)
        _fill(rt)
        rt.compress_now(timeout=30)  # raises if the pass waited for a model past its timeout
        before = len(rt.history())
        assert rt.size() < 24
        fallbacks = ev.wait_for(ModelFallback)
        assert fallbacks[0].component == "summarizer" and fallbacks[0].error
        assert before == 24  # nothing of the conversation was lost
        _alive(rt)


# -- models into the recorder ------------------------------------------------------------------


@pytest.mark.parametrize(
    "model",
    [
        ScriptedModel.failing(),
        ScriptedModel.hanging(),
        ScriptedModel(["not json at all", '{"facts": "nope"}'], cycle=True),
        ScriptedModel(['{"facts": [{"content": "x", "importance": "high"}]}'], cycle=True),
    ],
    ids=["raises", "hangs", "garbage", "wrong-shape"],
)
def test_recorder_model_faults_fall_back_to_the_offline_extractor_and_say_so(
    tmp_path: Path, store: DuckDBStore, model: Any
) -> None:
    with MemoryRuntime(
        session_dir=tmp_path, store=store, namespace=NS, recorder=FAST, model=model
    ) as rt:
        ev = Events(rt)
        rt.record(_turn("I live in Lisbon and my dog is called Rex"))
        rt.flush(60)
        fallback = ev.wait_for(ModelFallback)
        assert fallback[0].component == "recorder.extraction" and fallback[0].error
        assert "offline" in fallback[0].fallback
        episodes = store.list(NS, kinds=["episode"])
        assert len(episodes) == 1 and "Lisbon" in episodes[0].content
        facts = {m.content for m in store.list(NS, kinds=["fact"])}
        assert "User lives in Lisbon" in facts  # no fewer facts than without a model
        _alive(rt)


def test_recorder_model_that_ignores_its_timeout_does_not_stall_recording(
    tmp_path: Path, store: DuckDBStore
) -> None:
    # The model would take 40 s a call.  The recorder gives each call 0.3 s
    # (one retry): the flush returns within its 20 s bound under any load if
    # the recorder does not wait for the model, and can never if it does
    # (no wall-clock measurement, so a loaded machine cannot fail it).
    model = SlowModel(40.0)
    with MemoryRuntime(
        session_dir=tmp_path, store=store, namespace=NS, recorder=FAST, model=model
    ) as rt:
        ev = Events(rt)
        rt.record(_turn("I live in Porto"))
        rt.flush(20)
        assert "1 turn" in ev.wait_for(ModelFallback)[0].fallback
        assert len(store.list(NS, kinds=["episode"])) == 1
        _alive(rt)


# -- embedder ----------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["raise", "nan", "dim"])
def test_embedder_faults_fail_cleanly_and_damage_nothing(tmp_path: Path, mode: str) -> None:
    emb = FlakyEmbedder()
    path = tmp_path / "e.duckdb"
    store = DuckDBStore(path, embedder=emb, touch_flush_interval=None)
    try:
        with MemoryRuntime(
            session_dir=tmp_path, store=store, namespace=NS, recorder=FAST, autocontext=COMPRESS
        ) as rt:
            ev = Events(rt)
            rt.record(_turn("I work at the observatory"))
            rt.save_fact("plan", "gold")
            rt.flush(60)
            before_count = store.count(NS)
            emb.mode = mode
            rt.record(_turn("I live in Oslo"))
            with pytest.raises(RecordingError, match="could not be committed"):
                rt.flush(60)
            assert ev.wait_for(RecordingFailed)[0].action == "not recorded"
            with pytest.raises(EmbeddingError, match="embedder 'hash-64'"):
                rt.retrieve("observatory")
            with pytest.raises(EmbeddingError):
                rt.save_fact("plan", "platinum")
            _fill(rt)  # compressions copy offloads to the store: that copy fails, quietly
            rt.compress_now()
            assert store.count(NS) == before_count
            assert rt.get_fact("plan") == "gold"
            _alive(rt)
            emb.mode = "ok"  # the embedder heals: everything works again
            rt.record(_turn("I live in Bergen"))
            rt.flush(60)
            assert any("Bergen" in h.memory.content for h in rt.retrieve("Bergen"))
            rt.save_fact("plan", "platinum")
            assert rt.get_fact("plan") == "platinum"
    finally:
        store.close()


# -- disk full ---------------------------------------------------------------------------------


def _enospc(*_a: Any, **_k: Any) -> Any:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.mark.parametrize("where", ["fsync", "replace", "mkstemp"])
def test_disk_full_during_session_save_keeps_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    with MemoryRuntime(session_dir=tmp_path) as rt:
        rt.add(Msg.user("version one"))
        path = rt.save_session("s")
        old = path.read_bytes()
        rt.add(Msg.user("version two"))
        with monkeypatch.context() as m:
            if where == "mkstemp":
                m.setattr("tempfile.mkstemp", _enospc)
            else:
                m.setattr(os, where, _enospc)
            with pytest.raises(OSError, match="No space left") as info:
                rt.save_session("s")
            assert info.value.errno == errno.ENOSPC
        assert path.read_bytes() == old
        assert sorted(p.name for p in tmp_path.iterdir()) == ["s.json"]  # no temp file left
        _alive(rt)
        rt.save_session("s")  # space is back
    with MemoryRuntime(session_dir=tmp_path) as rt2:
        assert rt2.load_session("s")
        assert [m.text for m in rt2.messages()][:2] == ["version one", "version two"]


class _FullDisk:
    """Wraps the store's writer cursor: writes fail like a full disk, reads pass."""

    def __init__(self, cur: Any) -> None:
        self._cur = cur

    def execute(self, sql: str, *args: Any) -> Any:
        # single writes are one script: BEGIN; INSERT ...; ...; COMMIT.  In a script
        # the failure comes after BEGIN opened the transaction, as on a real full
        # disk, so the store's rollback is exercised too.
        statements = [part.lstrip().upper() for part in sql.split(";\n")]
        if any(st.startswith(("INSERT", "UPDATE", "DELETE")) for st in statements):
            if len(statements) > 1 and statements[0].startswith("BEGIN"):
                self._cur.execute("BEGIN TRANSACTION")
            raise duckdb.IOException("Could not write file: No space left on device")
        return self._cur.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cur, name)


def test_disk_full_during_store_writes_fails_cleanly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "d.duckdb"
    store = DuckDBStore(path, embedder=HashEmbedder(64), touch_flush_interval=None)
    try:
        with MemoryRuntime(session_dir=tmp_path, store=store, namespace=NS, recorder=FAST) as rt:
            ev = Events(rt)
            rt.record(_turn("I live in Riga"))
            rt.save_fact("tier", "basic")
            rt.flush(60)
            rt.retrieve("Riga")
            store.flush()
            snapshot = store.list(NS, limit=1000)
            real = store._wcur
            store._wcur = _FullDisk(real)
            # small writes are acknowledged in the store's own log: its sync fails too
            # (pwrite + fdatasync, or one pwritev with RWF_DSYNC where the kernel has it)
            real_sync, real_pwritev = os.fdatasync, os.pwritev
            monkeypatch.setattr(os, "fdatasync", _enospc)
            monkeypatch.setattr(os, "pwritev", _enospc)
            try:
                rt.record(_turn("I live in Tallinn"))
                with pytest.raises(RecordingError, match="No space left"):
                    rt.flush(60)
                failed = ev.wait_for(RecordingFailed)[0].error
                # the write rolled back; a later one waits until its remains are erased
                assert "No space left" in failed
                assert "rolled back" in failed or "could not be erased" in failed
                with pytest.raises(StoreError, match="No space left"):
                    rt.save_fact("tier", "gold")
                with pytest.raises(StoreError, match="No space left"):
                    store.add(NS, "direct write")
                assert rt.get_fact("tier") == "basic"
                assert store.list(NS, limit=1000) == snapshot
                _alive(rt)
            finally:
                store._wcur = real
                monkeypatch.setattr(os, "fdatasync", real_sync)
                monkeypatch.setattr(os, "pwritev", real_pwritev)
            rt.record(_turn("I live in Vilnius"))
            rt.flush(60)
            rt.save_fact("tier", "gold")
            assert rt.get_fact("tier") == "gold"
    finally:
        store.close()
    contents = [r[1] for r in _rows(path) if r[3] is None and r[4] is None]
    assert any("Riga" in c for c in contents) and any("Vilnius" in c for c in contents)
    assert not any("Tallinn" in c for c in contents)


# -- subscribers -------------------------------------------------------------------------------


def test_subscriber_that_raises_is_logged_and_breaks_nothing(tmp_path: Path) -> None:
    def bad(e: Event) -> None:
        raise ValueError("subscriber bug")

    with structlog.testing.capture_logs() as logs, MemoryRuntime(session_dir=tmp_path) as rt:
        rt.subscribe(bad)
        good = Events(rt)
        for i in range(200):
            rt.add(Msg.user(f"m{i}"))
        assert rt.size() == 200

        def errors() -> list[Any]:
            return [
                e
                for e in list(logs)
                if e["event"] == "stream.subscriber_error" and e["event_type"] == "MessageAdded"
            ]

        # Both delivery threads are waited for here (each subscriber has its own): the
        # bad one used to be left to close(), whose 5 s join a loaded machine can outlast.
        deadline = time.monotonic() + 60
        while len(good.of(MessageAdded)) < 200 or len(errors()) < 200:
            assert time.monotonic() < deadline, "the events were not all delivered in 60 s"
            time.sleep(0.01)
        assert [e.msg.text for e in good.of(MessageAdded)] == [f"m{i}" for i in range(200)]
        _alive(rt)
    assert len(errors()) >= 200 and "subscriber bug" in errors()[0]["error"]  # + _alive's


def test_subscriber_that_blocks_never_blocks_the_actors(tmp_path: Path) -> None:
    gate = threading.Event()
    got: list[str] = []

    def blocked(e: Event) -> None:
        gate.wait()
        if isinstance(e, MessageAdded):
            got.append(e.msg.text)

    # The subscriber is stuck until the gate opens: by the work below finishing
    # (the test opens it), or by a 120 s watchdog.  The work must finish while
    # the subscriber is still stuck -- an order, not a wall-clock measurement.
    watchdog = threading.Timer(120, gate.set)
    watchdog.start()
    try:
        with MemoryRuntime(session_dir=tmp_path, autocontext=COMPRESS) as rt:
            rt.subscribe(blocked)
            for i in range(500):
                rt.add(Msg.user(f"m{i}"))
            rt.compress_now()
            rt.messages()
            rt.save_session("b")
            assert not gate.is_set() and got == []  # done while the subscriber was stuck
            _alive(rt)
            gate.set()
    finally:
        watchdog.cancel()
        gate.set()
    assert got[:500] == [f"m{i}" for i in range(500)]

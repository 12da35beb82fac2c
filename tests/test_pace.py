"""The library's background threads pause in long work; an application's threads never do.

``actormem._pace.pace`` sits in the loops of the recorder, the compressor,
the embedder and the store's tokenizer (issue 16, point 6: an asyncio loop
beside them waited whole GIL switch intervals).  A fake clock and a counting
sleep make these checks exact instead of timed.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from actormem import MemoryRuntime, Msg, _pace
from actormem.actors._supervisor import SupervisedActor, Supervisor
from actormem.models.embedders import HashEmbedder
from actormem.store import DuckDBStore


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    fake = _Clock()
    monkeypatch.setattr(_pace, "_clock", fake)
    monkeypatch.setattr(_pace, "_sleep", fake.sleep)
    return fake


def _in_thread(fn: Any) -> Any:
    out: list[Any] = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    t.join()
    return out[0]


def test_an_application_thread_never_pauses(clock: _Clock) -> None:
    def work() -> list[float]:
        for _ in range(100):
            clock.now += 0.0009
            _pace.pace()
        return clock.sleeps

    assert _in_thread(work) == []
    assert not _in_thread(_pace.is_background)


def test_a_background_thread_pauses_after_each_busy_stretch(clock: _Clock) -> None:
    def work() -> int:
        _pace.mark_background()
        for _ in range(100):  # 100 units of 0.25 ms: 25 ms busy
            clock.now += 0.00025
            _pace.pace()
        return len(clock.sleeps)

    pauses = _in_thread(work)
    assert pauses == 25  # one per EVERY (1 ms) of work
    assert set(clock.sleeps) == {_pace.PAUSE}


def test_a_thread_back_from_idle_starts_a_new_stretch(clock: _Clock) -> None:
    def work() -> list[float]:
        _pace.mark_background()
        clock.now += 0.0005
        _pace.pace()
        clock.now += 10.0  # waited for its next message
        _pace.pace()  # no pause for the idle time
        assert clock.sleeps == []
        clock.now += _pace.EVERY * 1.01
        _pace.pace()
        return clock.sleeps

    assert _in_thread(work) == [_pace.PAUSE]


class _Probe(SupervisedActor):
    def handle(self, cmd: Any) -> Any:
        return _pace.is_background()

    def restart_state(self) -> Any:
        return None


def test_actor_threads_are_background_threads() -> None:
    sup = Supervisor("probe", lambda s, _state: _Probe.start(s), lambda _e: None)
    try:
        assert sup.ask("which thread?") is True
        assert not _pace.is_background()  # the caller's thread is not
    finally:
        sup.stop()


def test_the_runtime_works_with_pauses_in_its_threads(tmp_path: Path) -> None:
    # The recorder, the compressor and the store's threads all pace; the
    # results are those of any run: every message recorded and searchable.
    store = DuckDBStore(tmp_path / "m.duckdb", embedder=HashEmbedder(32))
    with MemoryRuntime(session_dir=tmp_path, store=store) as rt:
        msgs = [Msg.user(f"I moved to Lisbon in {2000 + i}") for i in range(40)]
        rt.add(msgs)
        rt.record(msgs)
        rt.flush()
        assert rt.size() == 40
        assert rt.retrieve("Lisbon", 3)

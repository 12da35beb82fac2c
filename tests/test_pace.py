"""The library's background threads pause in long work; an application's threads never do.

``actormem._pace.pace`` sits in the loops of the recorder, the compressor,
the embedder and the store's tokenizer (issue 16, point 6: an asyncio loop
beside them waited whole GIL switch intervals).  A fake clock and a counting
sleep make these checks exact instead of timed.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
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
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Clock]:
    # A fresh turn: a thread of an earlier test may have ended holding it, and
    # with the clock standing still its lapse never comes.
    monkeypatch.setattr(_pace, "_turn", _pace._Turn())
    fake = _Clock()
    monkeypatch.setattr(_pace, "_clock", fake)
    monkeypatch.setattr(_pace, "_sleep", fake.sleep)
    yield fake


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


# -- one turn at a time ------------------------------------------------------------------


def _wait_until(cond: Any, what: str) -> None:
    """Poll ``cond`` (state another thread sets) for up to 30 s."""
    deadline = time.monotonic() + 30
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.001)


class _Worker(threading.Thread):
    """A background thread that runs the steps it is given, one at a time."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.steps: queue.Queue[Any] = queue.Queue()
        self.done: queue.Queue[Any] = queue.Queue()

    def run(self) -> None:
        _pace.mark_background()
        while (step := self.steps.get()) is not None:
            self.done.put(step())

    def do(self, step: Any) -> Any:
        self.steps.put(step)
        return self.done.get(timeout=30)

    def start_step(self, step: Any) -> None:
        self.steps.put(step)

    def stop(self) -> None:
        self.steps.put(None)
        self.join(30)


@pytest.fixture
def workers(clock: _Clock) -> Iterator[tuple[_Worker, _Worker]]:
    pair = (_Worker(), _Worker())
    for w in pair:
        w.start()
    yield pair
    for w in pair:
        w.stop()


def test_one_background_thread_runs_paced_work_at_a_time(
    clock: _Clock, workers: tuple[_Worker, _Worker]
) -> None:
    a, b = workers
    a.do(_pace.pace)  # a takes the turn
    assert _pace._turn.holder == a.ident
    order: list[str] = []

    def b_step() -> None:
        _pace.pace()
        order.append("b runs")

    b.start_step(b_step)
    _wait_until(lambda: b.ident in _pace._turn.queue, "b never waited for the turn")
    order.append("a still runs")  # the fake clock stands still: a never lapses
    a.do(_pace.rest)  # a's unit of work ends
    b.done.get(timeout=30)
    assert order == ["a still runs", "b runs"]
    assert _pace._turn.holder == b.ident
    b.do(_pace.rest)
    assert _pace._turn.holder is None


def test_a_pause_hands_the_turn_to_the_waiting_thread(
    clock: _Clock, workers: tuple[_Worker, _Worker]
) -> None:
    a, b = workers
    a.do(_pace.pace)
    b.start_step(_pace.pace)
    _wait_until(lambda: b.ident in _pace._turn.queue, "b never waited for the turn")

    def busy_then_pace() -> None:
        clock.now += _pace.EVERY * 1.5  # a has worked past its stretch
        _pace.pace()  # pauses (holding the turn), hands it over, waits for it back

    a.start_step(busy_then_pace)
    b.done.get(timeout=30)  # b got the turn from a's pause
    assert _pace._turn.holder == b.ident
    _wait_until(lambda: a.ident in _pace._turn.queue, "a did not queue for its next turn")
    assert clock.sleeps == [_pace.PAUSE]  # a paused once, before handing over
    b.do(_pace.rest)
    a.done.get(timeout=30)  # and a has it back
    assert _pace._turn.holder == a.ident
    a.do(_pace.rest)


def test_a_holder_that_stopped_pacing_loses_the_turn(
    clock: _Clock, workers: tuple[_Worker, _Worker]
) -> None:
    # A holder blocked (waiting for b, say) or gone without rest() must not
    # hold the others up: past LAPSE since its last pace() the turn is free.
    a, b = workers
    a.do(_pace.pace)
    clock.now += _pace.LAPSE * 1.1
    b.do(_pace.pace)  # returns at once: no wait for a
    assert _pace._turn.holder == b.ident
    assert not _pace._turn.queue
    b.do(_pace.rest)


def test_application_threads_never_take_the_turn(
    clock: _Clock, workers: tuple[_Worker, _Worker]
) -> None:
    a, _ = workers
    a.do(_pace.pace)

    def app() -> bool:
        for _ in range(10):
            clock.now += 0.0009
            _pace.pace()  # no wait for a's turn, no pause
        _pace.rest()  # harmless outside background threads
        return _pace.holds_turn()

    assert _in_thread(app) is False
    assert _pace._turn.holder == a.ident
    assert clock.sleeps == []
    a.do(_pace.rest)


class _Pacer(SupervisedActor):
    def handle(self, cmd: Any) -> Any:
        _pace.pace()
        return _pace.holds_turn()

    def restart_state(self) -> Any:
        return None


def test_an_actor_gives_the_turn_up_before_it_waits_for_another(clock: _Clock) -> None:
    # An actor that asks another actor (the compressor asks the short-term
    # memory) gives its turn up first: the other actor's paced work never
    # waits for the asker's lapse (the fake clock stands still: it never comes).
    inner = Supervisor("inner", lambda s, _state: _Pacer.start(s), lambda _e: None)
    outer_ask = inner.ask
    try:

        def outer() -> tuple[bool, bool]:
            _pace.mark_background()
            _pace.pace()
            held = _pace.holds_turn()
            return held, outer_ask("pace", timeout=10)

        held_before, inner_held = _in_thread(outer)
        assert held_before is True
        assert inner_held is True  # the inner actor had the turn while the asker waited
    finally:
        inner.stop()

"""What a handle does with an agent's actor past its deadline (``_capacity.wait_started``).

In this process: Ray's answers are scripted -- what the actor's table row and the
raylets' queues say at each check (``_no_process``), whether the call's answer is
there at each wait -- so each case is exact.  The 2-node run (``test_cluster.py``)
reads the real tables: a worker's boot and ``__init__`` held past ``start_timeout``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from actormem.cluster import ClusterError, _capacity
from actormem.cluster._spec import make_spec
from actormem.store import Namespace

SPEC = make_spec("cap", Namespace(user_id="cap"), None, None, False, {}, None)


class _Script:
    """Ray as the case says: the checks' verdicts in turn, the answer after some waits."""

    def __init__(self, verdicts: list[tuple[bool, str]], answered_at_wait: int | None) -> None:
        self.verdicts = verdicts
        self.checks = 0
        self.waits = 0
        self.answered_at_wait = answered_at_wait
        self.killed: list[Any] = []

    def no_process(self, actor: Any, wanted: Any = None) -> tuple[bool, str]:
        verdict = self.verdicts[min(self.checks, len(self.verdicts) - 1)]
        self.checks += 1
        return verdict

    def wait(self, refs: list[Any], timeout: float = 0) -> tuple[list[Any], list[Any]]:
        self.waits += 1
        if self.answered_at_wait is not None and self.waits >= self.answered_at_wait:
            return refs, []
        return [], refs

    def kill(self, actor: Any, no_restart: bool = False) -> None:
        self.killed.append(actor)


@pytest.fixture
def script(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    def make(verdicts: list[tuple[bool, str]], answered_at_wait: int | None = None) -> _Script:
        s = _Script(verdicts, answered_at_wait)

        class _Ray:
            wait = staticmethod(s.wait)
            kill = staticmethod(s.kill)

        monkeypatch.setattr(_capacity, "_ray", lambda: _Ray)
        monkeypatch.setattr(_capacity, "_no_process", s.no_process)
        monkeypatch.setattr(_capacity, "no_room", lambda *a: "no node has room for it")
        return s

    yield make


def wait(ref: Any = "ref") -> None:
    _capacity.wait_started(ref, "actor", SPEC, {}, time.monotonic(), "could not start")


def test_a_starting_actor_gets_more_time_and_is_not_removed(script: Any) -> None:
    # its worker boots (no process id: not accounted for by the queues), then __init__ runs
    s = script([(False, "PENDING_CREATION")] * 3, answered_at_wait=4)
    wait()  # answered on the fourth wait: the deadline's and three re-checks'
    assert s.killed == []
    assert s.checks == 3


def test_an_actor_waiting_for_room_is_removed_after_two_checks_in_a_row(script: Any) -> None:
    s = script([(True, "PENDING_CREATION")])
    with pytest.raises(ClusterError, match="no node has room"):
        wait()
    assert s.checks == 2  # a second apart: the raylets' queues are reported late
    assert s.killed == ["actor"]


def test_a_single_no_room_verdict_then_starting_is_not_removed(script: Any) -> None:
    # a lease granted just now still counted as queued by a late report, then its worker boots
    s = script([(True, "PENDING_CREATION"), (False, "PENDING_CREATION")], answered_at_wait=3)
    wait()
    assert s.killed == []


def test_a_restarting_actor_without_room_is_not_killed(script: Any) -> None:
    s = script([(True, "RESTARTING")])
    with pytest.raises(ClusterError, match="no node has room"):
        wait()
    assert s.killed == []  # Ray's to restart once there is room


def test_an_actor_still_starting_past_the_grace_is_reported_not_removed(
    script: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_capacity, "STARTING_GRACE", 0.0)  # the bound is the deadline itself
    s = script([(False, "PENDING_CREATION")])
    with pytest.raises(ClusterError, match="still starting") as err:
        wait()
    assert "no node has room" not in str(err.value)
    assert s.killed == []  # a later call or connect reaches it


def test_a_running_actor_is_left_to_the_caller(script: Any) -> None:
    s = script([(False, "ALIVE")])  # a long call: the caller waits for it as before
    wait()
    assert s.checks == 1 and s.killed == []


def test_a_check_only_decides_at_once(script: Any) -> None:
    s = script([(True, "PENDING_CREATION")])
    with pytest.raises(ClusterError, match="no node has room"):
        wait(None)  # no call to wait on (a failover's last check): one verdict
    assert s.checks == 1
    starting = script([(False, "PENDING_CREATION")])
    wait(None)
    assert starting.checks == 1 and starting.killed == []

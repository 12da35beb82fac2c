"""Several worker processes on one PostgreSQL store and one sessions table.

Four real processes (``_pg_worker.py``), each with four runtimes serving the
same four users, as web workers behind a load balancer would: they write the
same namespaces at once, read each other's writes right after a flush, hand
sessions to one another, and one is SIGKILLed in the middle of a batch.  The
parent talks to them through pipes and waits on their answers, never on time.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actormem.store import Namespace
from tests._postgres import pg_url
from tests.reliability import _pg_worker as pgw

WORKER = Path(__file__).with_name("_pg_worker.py")
TOKEN = re.compile(r"\bw[a-z]+u[a-z]\b")


class Proc:
    """One worker process and its command pipe."""

    def __init__(self, url: str, index: int, cwd: Path) -> None:
        self.err = (cwd / f"worker{index}.err").open("w+")
        self.p = subprocess.Popen(
            [sys.executable, str(WORKER), url, str(index)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.err,
            text=True,
            cwd=cwd,
        )

    def read(self) -> dict[str, Any]:
        assert self.p.stdout is not None
        line = self.p.stdout.readline()
        if not line:
            self.err.seek(0)
            pytest.fail(f"worker exited ({self.p.poll()}):\n{self.err.read()[-3000:]}")
        out: dict[str, Any] = json.loads(line)
        return out

    def send(self, **cmd: Any) -> None:
        assert self.p.stdin is not None
        self.p.stdin.write(json.dumps(cmd) + "\n")
        self.p.stdin.flush()

    def ask(self, **cmd: Any) -> dict[str, Any]:
        self.send(**cmd)
        return self.read()


@pytest.fixture
def workers(pg_dsn: str, tmp_path: Path) -> Iterator[tuple[str, list[Proc]]]:
    url = pg_url(pg_dsn)
    # The schema is created once before the workers race to open it (they may race
    # too: migrations take an advisory lock; this keeps the test about the workload).
    pgw.open_shared_store(url).close()
    procs = [Proc(url, i, tmp_path) for i in range(4)]
    try:
        for i, proc in enumerate(procs):
            assert proc.read() == {"ready": i}
        yield url, procs
    finally:
        for proc in procs:
            if proc.p.poll() is None:
                proc.p.kill()
            proc.p.wait(60)
            proc.err.close()


def _episodes(store: Any, user: int) -> dict[str, int]:
    """Token -> how many live episodes (recorded turns) of ``user`` mention it."""
    seen: dict[str, int] = {}
    for rec in store.list(Namespace(user_id=f"user{user}"), kinds=["episode"], limit=10_000):
        for tok in set(TOKEN.findall(rec.content)):
            seen[tok] = seen.get(tok, 0) + 1
    return seen


def test_four_worker_processes_share_one_store_and_one_sessions_table(
    workers: tuple[str, list[Proc]],
) -> None:
    url, procs = workers
    acked: dict[int, set[str]] = {u: set() for u in range(pgw.USERS)}

    def collect(reply: dict[str, Any]) -> None:
        assert reply["errors"] == [], reply["errors"]
        for user, toks in reply["acked"].items():
            acked[int(user)].update(toks)

    # 1. every worker writes every user's namespace at the same moment (16 runtimes)
    for proc in procs:
        proc.send(op="write", n=6)
    for proc in procs:
        collect(proc.read())

    # 2. read your writes across processes: written by one, found by the next search of another
    for writer, reader, user, word in ((0, 1, 2, "wzebrafinchuc"), (3, 2, 1, "wquokkaub")):
        assert procs[writer].ask(op="note", user=user, word=word) == {"ok": True}
        hits = procs[reader].ask(op="find", user=user, word=word)["hits"]
        assert any(word in content for _, content in hits), hits
        assert all(u == f"user{user}" for u, _ in hits), hits
        acked[user].add(word)

    # 3. a session saved by one worker resumes in another
    saved = procs[1].ask(op="save", user=3, sid="ticket-7", text="my order number is 4411")
    assert saved["where"].endswith("#actormem_sessions/ticket-7")
    loaded = procs[2].ask(op="load", user=3, sid="ticket-7")
    assert loaded["found"] and loaded["texts"] == saved["texts"]
    assert "my order number is 4411" in loaded["texts"]

    # 4. one worker is SIGKILLed in the middle of a batch: what it acknowledged stays
    victim = procs[3]
    victim.send(op="stream")
    streamed: set[str] = set()
    in_flight = 0
    while True:
        msg = victim.read()
        if "acked" in msg:
            streamed.update(msg["acked"])
            in_flight = 0
        else:
            in_flight += 1
            # killed after >= 9 acknowledged, with turns submitted and not yet flushed
            if len(streamed) >= 9 and in_flight == 2:
                break
    os.kill(victim.p.pid, signal.SIGKILL)
    victim.p.wait(60)
    acked[0].update(streamed)

    # 5. the survivors keep working on the same namespaces
    for proc in procs[:3]:
        proc.send(op="write", n=2)
    for proc in procs[:3]:
        collect(proc.read())
    for proc in procs[:3]:
        assert proc.ask(op="quit") == {"bye": procs.index(proc)}
        assert proc.p.wait(60) == 0

    # every acknowledged memory is present, once, and only in its own namespace
    store = pgw.open_shared_store(url)
    try:
        for user in range(pgw.USERS):
            seen = _episodes(store, user)
            lost = sorted(acked[user] - set(seen))
            assert not lost, f"user{user}: acknowledged and lost: {lost}"
            strangers = sorted(t for t in seen if pgw.user_of(t) != user)
            assert not strangers, f"user{user} holds other users' memories: {strangers}"
            twice = sorted(t for t in acked[user] if seen[t] > 1)
            assert not twice, f"user{user}: stored twice: {twice}"
        assert sum(len(a) for a in acked.values()) == 4 * 4 * 6 + 2 + len(streamed) + 3 * 4 * 2
    finally:
        store.close()

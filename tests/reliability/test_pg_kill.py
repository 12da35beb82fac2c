"""A process writing a PostgreSQL store is SIGKILLed inside a batch's transaction.

The batch was copied in full (rows, history, keyword statistics) and its
namespace's advisory lock was held when the process died, just before the
commit: the server must roll all of it back, keep every batch acknowledged
before, and leave nothing locked, so the next writer goes on at once.  The
parent waits on the worker's lines and on the server, never on time.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from actormem.models.embedders import HashEmbedder
from actormem.store._postgres import PostgresStore
from tests._postgres import pg_url
from tests.reliability import _pg_batch_worker as bw

psycopg = pytest.importorskip("psycopg")

WORKER = Path(__file__).with_name("_pg_batch_worker.py")
HOLD = 3
_LIVE = "deleted_at IS NULL AND superseded_by IS NULL"
_NS = "user_id, agent_id, run_id, session_id"


def test_a_writer_killed_inside_a_batch_leaves_no_half_batch_and_no_lock(
    pg_dsn: str, tmp_path: Path
) -> None:
    url = pg_url(pg_dsn)
    PostgresStore(url, embedder=HashEmbedder(64), touch_flush_interval=None).close()
    err = (tmp_path / "worker.err").open("w+")
    proc = subprocess.Popen(
        [sys.executable, str(WORKER), url, str(HOLD)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=err,
        text=True,
    )
    acked: list[int] = []
    try:
        assert proc.stdout is not None
        while True:
            line = proc.stdout.readline()
            if not line:
                err.seek(0)
                pytest.fail(f"worker exited ({proc.poll()}):\n{err.read()[-3000:]}")
            msg = json.loads(line)
            if "acked" in msg:
                acked.append(msg["acked"])
                continue
            assert msg["holding"] == HOLD
            backend = msg["pid"]
            break
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            # the batch is in the database, uncommitted, under the namespace's lock
            state = conn.execute(
                "SELECT state FROM pg_stat_activity WHERE pid = %s", (backend,)
            ).fetchone()
            assert state is not None and state[0] == "idle in transaction"
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        err.close()
    assert acked == list(range(HOLD))

    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        # the backend rolls back when it reads the closed socket; end it if it has not
        # yet, and wait (server side) until it is gone
        conn.execute("SELECT pg_terminate_backend(%s, 30000)", (backend,))
        gone = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (backend,))
        assert gone.fetchone() == (0,)

    # the next writer of the same namespace is not kept waiting by a lock left behind
    store = PostgresStore(
        url, embedder=HashEmbedder(64), touch_flush_interval=None, near_duplicate_threshold=None
    )
    try:
        contents = {r.content for r in store.list(bw.NS, limit=10_000)}
        want = {bw.content(b, i) for b in acked for i in range(bw.SIZE)}
        assert contents == want  # every acknowledged batch, nothing of the killed one
        assert store.count(bw.NS) == len(acked) * bw.SIZE
        assert len(store.history(bw.NS)) == len(acked) * bw.SIZE
        res = store.add_many(bw.NS, [bw.content(HOLD, i) for i in range(bw.SIZE)])
        assert [r.op for r in res] == ["ADD"] * bw.SIZE
        hits = store.search(f"b{HOLD}x r7x", bw.NS, limit=1, mode="keyword")
        assert hits and hits[0].memory.content == bw.content(HOLD, 7)
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            docs = conn.execute(
                f"SELECT docs FROM scope_stats WHERE ({_NS}) = ('batch', '', '', '')"
            ).fetchone()
            assert docs == ((HOLD + 1) * bw.SIZE,)
            want_t = conn.execute(
                f"SELECT t, count(*) FROM memories, unnest(terms) AS t WHERE {_LIVE} "
                "GROUP BY t ORDER BY t"
            ).fetchall()
            got_t = conn.execute(
                "SELECT term, df FROM term_stats WHERE df <> 0 ORDER BY term"
            ).fetchall()
            assert got_t == want_t
    finally:
        store.close()

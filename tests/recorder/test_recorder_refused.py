"""One memory the database refuses does not lose the rest of its batch (pgprobe finding 2).

A turn whose text PostgreSQL cannot index failed the recorder's whole batch:
flush() raised RecordingError and the innocent turn recorded beside it, and
its facts, were lost.  The recorder now writes a refused batch one memory at
a time: the others are recorded, the refused one is reported by flush().

The refusal is real: in a namespace of ~2,500 bytes, a 64-character term of
four-byte letters makes a posting-group key past PostgreSQL's 2,704-byte
btree limit, while short terms fit.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from actormem import MemoryRuntime, Msg
from actormem.actors.recorder import RecordingError
from actormem.models.embedders import HashEmbedder
from actormem.store import Namespace


def _part(rnd: random.Random, n: int) -> str:
    return "".join(chr(0x20000 + rnd.randrange(40_000)) for _ in range(n))


def test_a_refused_turn_does_not_lose_its_batch(pg_dsn: str, tmp_path: Path) -> None:
    from actormem.store._postgres import PostgresStore

    rnd = random.Random(11)
    ns = Namespace(user_id=_part(rnd, 256), agent_id=_part(rnd, 256), run_id=_part(rnd, 113))
    store = PostgresStore(pg_dsn, embedder=HashEmbedder(64), touch_flush_interval=None)
    innocent = [Msg.user("I am Ada and I love green tea"), Msg.assistant("Noted, Ada.")]
    hostile = [Msg.user("the dump follows"), Msg.assistant("dump " + _part(rnd, 80))]
    after = [Msg.user("I work at the bakery on Elm Street"), Msg.assistant("Good to know.")]
    with MemoryRuntime(store=store, namespace=ns, session_dir=tmp_path / "s") as rt:
        for turn in (innocent, hostile, after):
            rt.add(turn)
            rt.record(turn)
        with pytest.raises(RecordingError):
            rt.flush(timeout=120)
        stored = [m.content for m in store.list(ns, limit=100)]
        assert any("green tea" in c for c in stored), stored
        assert any("bakery" in c for c in stored), stored
        assert not any("dump" in c and len(c) > 50 for c in stored)
        rt.record([Msg.user("I like jazz"), Msg.assistant("Nice.")])
        rt.flush(timeout=120)  # the next batch is recorded and nothing is left to report
        assert any("jazz" in m.content for m in store.list(ns, limit=100))
    store.close()

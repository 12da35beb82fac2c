"""One memory the store refuses does not lose the rest of its batch (pgprobe finding 2).

A turn whose text PostgreSQL could not index failed the recorder's whole
batch: flush() raised RecordingError and the innocent turn recorded beside
it, and its facts, were lost.  The recorder writes a refused batch one memory
at a time: the others are recorded, the refused one is reported by flush().
The end of a session does the same with its summary and promoted messages.

The refusal here is an embedder's NaN vector for one text, refused by the
store on both backends.  (The PostgreSQL refusal first found, a posting key
past the btree limit in a namespace of ~2,500 bytes, cannot happen any more:
``Namespace`` refuses parts past ``NAMESPACE_MAX_BYTES`` together, see
tests/store/test_store_namespace_bytes.py.)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from actormem import MemoryRuntime, Msg
from actormem.actors.recorder import RecordingError
from actormem.events import MemoryRecorded, RecordingFailed
from actormem.models.embedders import HashEmbedder
from actormem.recorder import RecorderConfig
from actormem.store import DuckDBStore, Namespace

# -- a refusal on both backends: an embedder that returns NaN for one text -------------------
#
# A model can return NaN for an odd input; the store then refuses that memory
# ("returned NaN or infinite values ... nothing was stored") on either backend.


class _NaNForPoison:
    """HashEmbedder, except that a rendered message holding ``POISON`` gets a NaN vector.

    (A session summary that quotes it starts with its date line: it is not refused.)
    """

    def __init__(self) -> None:
        self._inner = HashEmbedder(64)
        self.name = self._inner.name
        self.dim = self._inner.dim

    def embed(self, texts: Sequence[str]) -> Any:
        vecs = self._inner.embed(texts)
        for i, text in enumerate(texts):
            if text.startswith("user: ") and "POISON" in text:
                vecs[i] = np.nan
        return vecs


@pytest.fixture(params=["duckdb", "postgres"])
def refusing_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "duckdb":
        store: Any = DuckDBStore(
            tmp_path / "m.duckdb", embedder=_NaNForPoison(), touch_flush_interval=None
        )
    else:
        from actormem.store._postgres import PostgresStore

        dsn = request.getfixturevalue("pg_dsn")
        store = PostgresStore(dsn, embedder=_NaNForPoison(), touch_flush_interval=None)
    yield store
    store.close()


_NS = Namespace(user_id="ada", agent_id="helper")


def _wait(pred: Callable[[], bool]) -> None:
    """Events reach subscribers on the bus's thread: wait for the one expected."""
    end = time.monotonic() + 60
    while not pred():
        assert time.monotonic() < end, "the event never came"
        time.sleep(0.01)


def test_session_end_keeps_what_the_store_accepts(refusing_store: Any, tmp_path: Path) -> None:
    """One promoted message the store refuses does not lose the summary and the others."""
    store = refusing_store
    ev: list[Any] = []
    with MemoryRuntime(store=store, namespace=_NS, session_dir=tmp_path / "s") as rt:
        rt.subscribe(ev.append)
        rt.add(
            [
                Msg.user("My sister Grete lives in Lisbon", importance=0.9),
                Msg.user("The POISON pill text", importance=0.9),
                Msg.user("I keep bees on the roof", importance=0.9),
            ]
        )
        with pytest.raises(RecordingError, match="refused 1 memory") as info:
            rt.on_session_end(timeout=120)
        assert "#3 " in str(info.value)  # the summary is #1, the refused message #3
        report = info.value.report
        assert report is not None
        assert report["promoted"] == 2
        assert report["summary_id"] is not None
        assert len(report["refused"]) == 1
        stored = {m.kind: m for m in store.list(_NS, limit=100) if m.kind == "summary"}
        assert stored["summary"].id == report["summary_id"]
        contents = [m.content for m in store.list(_NS, limit=100)]
        assert "user: My sister Grete lives in Lisbon" in contents
        assert any("bees" in c for c in contents)
        assert not any(c.startswith("user: The POISON") for c in contents), contents
        _wait(lambda: any(isinstance(e, RecordingFailed) for e in ev))
        failed = [e for e in ev if isinstance(e, RecordingFailed)]
        assert len(failed) == 1 and failed[0].refused == 1 and failed[0].turns == 0
        recorded = [e for e in ev if isinstance(e, MemoryRecorded)]
        assert recorded and report["summary_id"] in recorded[-1].ids


def test_a_refused_memory_is_not_a_failed_turn(refusing_store: Any, tmp_path: Path) -> None:
    """Stats, events and flush() say that a memory was refused, not that turns failed."""
    store = refusing_store
    ev: list[Any] = []
    cfg = RecorderConfig(batch_seconds=60, batch_count=1000)
    with MemoryRuntime(store=store, namespace=_NS, session_dir=tmp_path / "s", recorder=cfg) as rt:
        rt.subscribe(ev.append)
        for turn in (
            [Msg.user("I am Ada and I love green tea"), Msg.assistant("Noted, Ada.")],
            [Msg.user("here is the POISON text"), Msg.assistant("I see.")],
            [Msg.user("I work at the bakery on Elm Street"), Msg.assistant("Good to know.")],
        ):
            rt.record(turn)
        with pytest.raises(RecordingError) as info:
            rt.flush(timeout=120)
        message = str(info.value)
        assert "refused 1 memory" in message, message
        assert "could not be committed" not in message, message
        assert "episode #2" in message, message
        stats = rt.recording_stats()
        assert stats == {"submitted": 3, "finished": 3, "failed": 0, "pending": 0, "refused": 1}
        _wait(lambda: any(isinstance(e, RecordingFailed) for e in ev))
        failed = [e for e in ev if isinstance(e, RecordingFailed)]
        assert len(failed) == 1 and failed[0].turns == 0 and failed[0].refused == 1
        rt.flush(timeout=120)  # reported once
        contents = [m.content for m in store.list(_NS, limit=100)]
        assert any("green tea" in c for c in contents)
        assert any("bakery" in c for c in contents)

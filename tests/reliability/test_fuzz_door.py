"""Fuzzing the runtime-side classes of issue 12: the door, huge queries, special files.

Bounded for ``make test`` by the "ci" hypothesis profile; ``make fuzz`` runs
the "fuzz" profile.  Invariants:

* mistyped fields and deep nesting: any message (any value in any field,
  metadata and tool inputs nested up to 200 levels) is either refused by
  ``add()`` with ``MessageError`` naming ``messages[i]...``, or saved and
  loaded back equal -- never another exception, never an unloadable session;
* tool-call arguments of any shape and depth give a tool result or a
  ``ValueError`` (``MessageError``) naming the argument, never a
  ``RecursionError``;
* huge queries: any query up to 2 MB is searched with bounded work (the
  characters read and the query terms weighed have fixed ceilings);
* special files: a FIFO, socket, character device (``/dev/zero``'s numbers:
  reading it never ends), folder, dangling link or link out of the folder in
  the place of a session file, a store file, its WAL, ``NOW.md`` or an
  import file gives an error naming it, or works (a link inside the
  folder) -- never a blocked call;
* cross-level namespaces: keyed facts saved by runtimes at the user, agent,
  run and session levels keep their values through the maintenance
  (``on_idle``, the idle timer, ``dream``) of a runtime at any level.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import socket
import stat
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actormem import MemoryRuntime, Msg
from actormem.events import MaintenanceRan
from actormem.journal._paths import JournalPathError
from actormem.messages import MessageError, TextBlock, ToolResultBlock, ToolUseBlock
from actormem.models.embedders import HashEmbedder
from actormem.recorder import MAINTENANCE_ACTIONS, RecorderConfig
from actormem.session import SessionError
from actormem.store import DuckDBStore, InvalidMemoryError, Namespace, SearchConfig, StoreError
from actormem.store._records import MAX_QUERY_CHARS, clip_query
from actormem.store._rerank import MAX_QUERY_TERMS, Reranker

_FIXTURES = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
FEW = max(10, (settings.default.max_examples or 100) // 6)

# -- mistyped fields and depth ------------------------------------------------------------

_ANY_SCALAR = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats()
    | st.text(max_size=6)
    | st.binary(max_size=3)
    | st.just(object())
    | st.sets(st.integers(0, 3), max_size=2)
)


@st.composite
def _nested(draw: st.DrawFn) -> Any:
    """A value nested 0-200 levels deep (dicts, lists, tuples), any leaf."""
    depth = draw(st.integers(0, 200))
    value: Any = draw(_ANY_SCALAR)
    kinds = draw(st.lists(st.sampled_from(["d", "l", "t", "k"]), min_size=depth, max_size=depth))
    for kind in kinds:
        if kind == "d":
            value = {"a": value}
        elif kind == "l":
            value = [value]
        elif kind == "t":
            value = (value, 1)
        else:
            value = {1: value}
    return value


_FIELD_VALUES = _ANY_SCALAR | _nested()


@st.composite
def _messages(draw: st.DrawFn) -> Msg:
    base = draw(
        st.sampled_from(
            [
                Msg.user("hello"),
                Msg.assistant(tool_calls=[ToolUseBlock(id="c", name="t", input={"q": 1})]),
                Msg(role="tool", content=(ToolResultBlock(tool_use_id="c", output="out"),)),
            ]
        )
    )
    changes: dict[str, Any] = {}
    for field in draw(st.sets(st.sampled_from(["created_at", "name", "id", "metadata", "role"]))):
        changes[field] = draw(_FIELD_VALUES | st.dictionaries(st.text(max_size=3), _nested()))
    msg = msgspec.structs.replace(base, **changes)
    if draw(st.booleans()):  # a mistyped or deep block
        block = draw(
            st.sampled_from(
                [
                    lambda v: TextBlock(v),
                    lambda v: ToolUseBlock(id="c", name="t", input=v),
                    lambda v: ToolUseBlock(id=v, name="t"),
                    lambda v: ToolResultBlock(tool_use_id="c", output="o", is_error=v),
                ]
            )
        )(draw(_FIELD_VALUES))
        msg = msgspec.structs.replace(msg, content=(*msg.content, block))
    return msg


@pytest.fixture(scope="module")
def runtimes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[MemoryRuntime, ...]]:
    folder = tmp_path_factory.mktemp("fuzzdoor")
    with MemoryRuntime(session_dir=folder) as rt, MemoryRuntime(session_dir=folder) as rt2:
        yield rt, rt2


@settings(suppress_health_check=_FIXTURES)
@given(msgs=st.lists(_messages(), min_size=1, max_size=3))
def test_fuzz_any_message_is_refused_naming_it_or_restored_equal(
    runtimes: tuple[MemoryRuntime, ...], msgs: list[Msg]
) -> None:
    rt, rt2 = runtimes
    rt.clear()
    for m in msgs:
        try:
            rt.add([Msg.user("first"), m])
        except MessageError as exc:
            assert str(exc).startswith("messages[1]"), exc
    before = rt.messages()
    rt.save_session("fuzz")
    assert rt2.load_session("fuzz")
    assert rt2.messages() == before


@pytest.fixture(scope="module")
def tool_runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MemoryRuntime]:
    folder = tmp_path_factory.mktemp("fuzztools")
    with MemoryRuntime(
        session_dir=folder,
        store=DuckDBStore(folder / "m.duckdb", embedder=HashEmbedder(32)),
        long_term="AGENT_CONTROL",
        recorder=RecorderConfig(idle_seconds=None),
    ) as rt:
        yield rt


@settings(suppress_health_check=_FIXTURES)
@given(
    name=st.sampled_from(["record_to_memory", "retrieve_from_memory"]),
    arguments=st.dictionaries(
        st.sampled_from(["thinking", "content", "keywords", "limit", "other"]), _FIELD_VALUES
    )
    | _FIELD_VALUES,
)
def test_fuzz_tool_arguments_of_any_shape_and_depth(
    tool_runtime: MemoryRuntime, name: str, arguments: Any
) -> None:
    try:
        out = tool_runtime.call_tool(name, arguments)
    except ValueError as exc:  # MessageError is one; the message names the tool
        assert name in str(exc), exc
    else:
        assert isinstance(out, str)


# -- huge queries -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def query_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DuckDBStore]:
    path = tmp_path_factory.mktemp("fuzzquery") / "m.duckdb"
    with DuckDBStore(path, embedder=HashEmbedder(32), touch_flush_interval=None) as store:
        store.add_many(Namespace(user_id="q"), [f"note {i} about ferries" for i in range(20)])
        yield store


_WORDS = st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=12)


@settings(max_examples=FEW, suppress_health_check=_FIXTURES)
@given(words=st.lists(_WORDS, min_size=1, max_size=50), size=st.integers(1, 2_000_000))
def test_fuzz_a_huge_query_is_bounded_work(
    query_store: DuckDBStore, words: list[str], size: int
) -> None:
    unit = " ".join(words) + " "
    query = (unit * (size // len(unit) + 1))[:size]
    assert len(clip_query(query)) <= MAX_QUERY_CHARS + 1
    rerank = Reranker(_WordVectorsOf(query_store)).prepare(clip_query(query), SearchConfig())
    if rerank is not None:
        assert rerank.term_count <= MAX_QUERY_TERMS
    hits = query_store.search(query, Namespace(user_id="q"), 5)
    assert len(hits) <= 5


class _WordVectorsOf:
    """The store's own (hash) embedder with per-word vectors: turns the soft match on."""

    def __init__(self, store: DuckDBStore) -> None:
        self._embedder = store.embedder

    def word_vectors(self, words: Any) -> Any:
        return self._embedder.embed(list(words))


# -- special files ------------------------------------------------------------------------

_KINDS = ["fifo", "socket", "device", "folder", "dangling", "outside", "inside"]


def _make(kind: str, path: Path, outside: Path) -> list[Path]:
    """Put a special file of ``kind`` at ``path``; return the FIFOs made (to unblock)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
        return [path]
    if kind == "socket":
        # Bound in a short folder (socket paths are limited to ~108 bytes), then moved.
        short = Path(tempfile.mkdtemp(dir="/tmp"))
        sock = socket.socket(socket.AF_UNIX)
        try:
            sock.bind(str(short / "s"))
            os.rename(short / "s", path)
        finally:
            sock.close()
            shutil.rmtree(short, ignore_errors=True)
    elif kind == "device":
        if os.geteuid() == 0:  # /dev/zero's numbers: endless zeros to whoever reads it
            os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 5))
        else:  # making a device needs root: a link to one (it also leaves the folder)
            path.symlink_to("/dev/zero")
    elif kind == "folder":
        path.mkdir()
    elif kind == "dangling":
        path.symlink_to(path.parent / "nowhere")
    elif kind == "outside":
        outside.mkdir(parents=True, exist_ok=True)
        target = outside / "fifo"
        if not target.exists():
            os.mkfifo(target)
        path.symlink_to(target)
        return [target]
    elif kind == "inside":
        target = path.parent / "regular.bin"
        target.write_bytes(b"")
        path.symlink_to(target)
    return []


def _bounded(fifos: list[Path], fn: Callable[[], Any]) -> BaseException | None:
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            fn()
        except BaseException as exc:
            outcome.append(exc)
        else:
            outcome.append(None)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(60)
    if worker.is_alive():
        for f in fifos:
            with contextlib.suppress(OSError):
                os.close(os.open(f, os.O_WRONLY | os.O_NONBLOCK))
        worker.join(60)
        pytest.fail(f"{fn} blocked on a special file")
    return outcome[0]


def _session(tmp: Path) -> Callable[[], Any]:
    def load() -> Any:
        with MemoryRuntime(session_dir=tmp / "s") as rt:
            return rt.load_session("x")

    return load


_TARGETS: dict[str, tuple[Callable[[Path], Path], Callable[[Path], Callable[[], Any]], Any]] = {
    "session file": (lambda t: t / "s" / "x.json", _session, SessionError),
    "store file": (
        lambda t: t / "m.duckdb",
        lambda t: lambda: DuckDBStore(t / "m.duckdb", embedder=HashEmbedder(8)).close(),
        StoreError,
    ),
    "store WAL": (
        lambda t: t / "m.duckdb.wal",
        lambda t: lambda: DuckDBStore(t / "m.duckdb", embedder=HashEmbedder(8)).close(),
        StoreError,
    ),
    "NOW.md": (
        lambda t: t / "memory" / "default" / "agent" / "NOW.md",
        lambda t: (
            lambda: MemoryRuntime(
                session_dir=t,
                store=DuckDBStore(t / "j.duckdb", embedder=HashEmbedder(8)),
                journal=True,
            ).close()
        ),
        JournalPathError,
    ),
    "import file": (
        lambda t: t / "rows.jsonl",
        lambda t: lambda: _import(t),
        InvalidMemoryError,
    ),
}


def _import(tmp: Path) -> Any:
    with DuckDBStore(tmp / "i.duckdb", embedder=HashEmbedder(8)) as store:
        return store.import_(tmp / "rows.jsonl")


@settings(max_examples=FEW, suppress_health_check=_FIXTURES)
@given(kind=st.sampled_from(_KINDS), target=st.sampled_from(sorted(_TARGETS)))
def test_fuzz_special_files_are_named_never_blocking(
    tmp_path: Path, kind: str, target: str
) -> None:
    tmp = tmp_path / uuid.uuid4().hex
    where, call, error = _TARGETS[target]
    path = where(tmp)
    fifos = _make(kind, path, tmp_path / "outside" / uuid.uuid4().hex)
    err = _bounded(fifos, call(tmp))
    if err is None:
        # Only what is harmless may work: an empty file behind a link in the folder,
        # a missing session (dangling link), a store created over a dangling WAL link.
        assert kind in ("inside", "dangling"), (kind, target)
        return
    assert isinstance(err, error | StoreError | SessionError | MessageError), repr(err)
    assert not isinstance(err, RecursionError)
    text = str(err)
    assert str(path.name) in text or str(path) in text or path.name in text, text


# -- cross-level namespaces ---------------------------------------------------------------

_LEVELS = {
    "user": Namespace(user_id="ada"),
    "agent": Namespace(user_id="ada", agent_id="bot"),
    "run": Namespace(user_id="ada", agent_id="bot", run_id="r1"),
    "session": Namespace(user_id="ada", agent_id="bot", run_id="r1", session_id="s1"),
}
_PATHS = ["on_idle", "idle timer", "dream"]


# Each example opens up to six runtimes on a fresh store (~1 s): half the examples.
@settings(max_examples=max(5, FEW // 2), suppress_health_check=_FIXTURES)
@given(
    owners=st.lists(st.sampled_from(sorted(_LEVELS)), min_size=1, max_size=4),
    maintainer=st.sampled_from(sorted(_LEVELS)),
    cap=st.integers(1, 3),
    paths=st.sets(st.sampled_from(_PATHS), min_size=1),
)
def test_fuzz_keyed_facts_survive_maintenance_from_any_level(
    tmp_path: Path, owners: list[str], maintainer: str, cap: int, paths: set[str]
) -> None:
    tmp = tmp_path / uuid.uuid4().hex
    store = DuckDBStore(tmp / "m.duckdb", embedder=HashEmbedder(16), touch_flush_interval=None)
    config = RecorderConfig(idle_seconds=None, max_memories=cap)
    saved: dict[tuple[str, str], str] = {}
    try:
        for i, level in enumerate(owners):
            with MemoryRuntime(
                session_dir=tmp, store=store, namespace=_LEVELS[level], recorder=config
            ) as rt:
                for j in range(3):
                    key, value = f"k{i}_{j}", f"value {i} {j} {math.pi:.3f}"
                    rt.save_fact(key, value)
                    saved[(level, key)] = value
                rt.record([Msg.user(f"turn {i} about trains"), Msg.assistant("noted")])
                rt.flush(60)
        timer = "idle timer" in paths
        ran = threading.Event()
        with MemoryRuntime(
            session_dir=tmp,
            store=store,
            namespace=_LEVELS[maintainer],
            # Every maintenance action at its most aggressive (a keyed fact it could
            # touch would go); the idle timer runs it after 0.05 s without a call.
            recorder=RecorderConfig(
                idle_seconds=0.05 if timer else None,
                max_memories=cap,
                maintenance=MAINTENANCE_ACTIONS,
                decay_threshold=0.99,
                forget_threshold=0.99,
                stale_days=0,
                duplicate_threshold=0.1,
                consolidate_threshold=0.05,
            ),
            journal="dream" in paths,
        ) as boss:
            boss.subscribe(
                lambda e: (
                    ran.set()
                    if isinstance(e, MaintenanceRan) and e.report.get("reason") == "idle"
                    else None
                )
            )
            if timer:
                # A call after subscribing is new activity: the timer runs the maintenance
                # again once the runtime has been quiet for 0.05 s (a run before the
                # subscription, possible on a loaded machine, would otherwise be missed).
                boss.get_fact("no such key")
                assert ran.wait(60), "the idle timer never ran the maintenance"
            if "on_idle" in paths:
                boss.on_idle()
            if "dream" in paths:
                boss.dream(force=True)
        for level in _LEVELS:
            with MemoryRuntime(
                session_dir=tmp, store=store, namespace=_LEVELS[level], recorder=config
            ) as rt:
                for (owner, key), value in saved.items():
                    if owner == level:
                        assert rt.get_fact(key) == value, (owner, key, maintainer)
    finally:
        store.close()

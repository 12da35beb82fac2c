"""The commit record: a damaged WAL or database file is refused, never opened silently short.

Real processes commit acknowledged memories and are SIGKILLed (their WAL is
not checkpointed); the test then damages the files the way a disk or a
careless copy would and opens the store again.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
import structlog

from actormem.models.embedders import HashEmbedder
from actormem.store import DuckDBStore, Namespace, StoreError, StoreLockedError

NS = Namespace(user_id="ada", agent_id="bot")
N = 100


def _open(path: Path, **kwargs: object) -> DuckDBStore:
    kwargs.setdefault("embedder", HashEmbedder(64))
    kwargs.setdefault("touch_flush_interval", None)
    return DuckDBStore(path, **kwargs)  # type: ignore[arg-type]


def _commit_then_die(path: Path, first: int = 0, n: int = N) -> list[str]:
    """A child process adds ``n`` memories one commit each, prints each id once
    ``add`` returned (acknowledged), applies them all to DuckDB (``flush``: the
    acknowledgement log is empty, so DuckDB's WAL is their only copy), then is
    SIGKILLed: the WAL stays as it is."""
    script = textwrap.dedent(
        f"""
        import os, signal, sys
        from actormem.models.embedders import HashEmbedder
        from actormem.store import DuckDBStore, Namespace
        store = DuckDBStore({str(path)!r}, embedder=HashEmbedder(64), touch_flush_interval=None)
        ns = Namespace(user_id="ada", agent_id="bot")
        for i in range({first}, {first + n}):
            res = store.add(ns, f"acknowledged memory number {{i}} of the test")
            print("ACK", res.id, flush=True)
        store.flush()  # into DuckDB's WAL, the acknowledgement log emptied
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    acks = [line.split()[1] for line in proc.stdout.splitlines() if line.startswith("ACK")]
    assert len(acks) == n
    return acks


def _garble_start(wal: Path) -> None:
    with open(wal, "r+b") as f:
        f.write(os.urandom(64))


def _truncate_half(wal: Path) -> None:
    os.truncate(wal, wal.stat().st_size // 2)


def _remove(wal: Path) -> None:
    wal.unlink()


DAMAGES: dict[str, Callable[[Path], None]] = {
    "garbled-start": _garble_start,
    "truncated-half": _truncate_half,
    "removed": _remove,
}


def test_a_killed_process_with_an_intact_wal_loses_nothing(tmp_path: Path) -> None:
    path = tmp_path / "m.duckdb"
    acks = _commit_then_die(path)
    assert Path(str(path) + ".wal").stat().st_size > 0  # the commits live in the WAL
    with _open(path) as store:
        assert store.lost_commits == 0
        assert all(store.get(NS, mid) is not None for mid in acks)
        store.add(NS, "after the crash")
    with _open(path) as again:  # a clean close, then a clean open
        assert again.count(NS) == N + 1 and again.lost_commits == 0


@pytest.mark.parametrize("damage", DAMAGES, ids=list(DAMAGES))
def test_a_damaged_wal_is_refused_naming_what_is_missing(tmp_path: Path, damage: str) -> None:
    """Regression: a garbled or half-truncated WAL opened cleanly without 100 acknowledged
    memories and without a word."""
    path = tmp_path / "m.duckdb"
    with _open(path) as store:  # some memories already in the main file
        store.add_many(NS, [f"checkpointed memory {i}" for i in range(10)])
    acks = _commit_then_die(path)
    wal = Path(str(path) + ".wal")
    DAMAGES[damage](wal)
    for _ in range(2):  # refused, and refused again: the refusal changed nothing
        with pytest.raises(StoreError, match="acknowledged commit") as info:
            _open(path)
        msg = str(info.value)
        assert str(path) in msg and f"{path}.wal" in msg and "on_lost_commits='warn'" in msg
        assert not isinstance(info.value, StoreLockedError)
        found = re.search(r"(\d+) acknowledged commit\(s\) are missing", msg)
        assert found is not None and 1 <= int(found.group(1)) <= N
    # accepting the loss opens it, says so loudly, and the store then works as before
    with structlog.testing.capture_logs() as logs, _open(path, on_lost_commits="warn") as store:
        assert store.lost_commits == int(found.group(1))
        kept = sum(store.get(NS, mid) is not None for mid in acks)
        assert kept == N - store.lost_commits  # one memory per commit: the count is exact
        assert store.count(NS) == 10 + kept
        new = store.add(NS, "written after accepting the loss").id
    assert next(e for e in logs if e["event"] == "store.commits_lost")["lost"] == N - kept
    with _open(path) as again:
        assert again.lost_commits == 0 and again.get(NS, new) is not None


def test_a_database_restored_from_an_older_copy_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "m.duckdb"
    with _open(path) as store:
        store.add(NS, "first")
    shutil.copy(path, tmp_path / "backup.duckdb")
    with _open(path) as store:
        store.add_many(NS, ["second", "third"])
    shutil.copy(tmp_path / "backup.duckdb", path)
    with pytest.raises(StoreError, match="1 acknowledged commit"):
        _open(path)


def test_a_replaced_database_is_not_taken_for_a_damaged_one(tmp_path: Path) -> None:
    path = tmp_path / "m.duckdb"
    with _open(path) as store:
        store.add_many(NS, ["first", "second"])
    other = tmp_path / "other.duckdb"
    with _open(other) as store:
        store.add(NS, "another store")
    shutil.copy(other, path)  # its record stays behind, naming the old store
    with _open(path) as store:
        assert store.count(NS) == 1 and store.lost_commits == 0
    path.unlink()  # a fresh file where the old one was
    with _open(path) as store:
        assert store.count(NS) == 0 and store.lost_commits == 0


def _garble(offset: float, size: int) -> Callable[[Path], None]:
    def damage(path: Path) -> None:
        with open(path, "r+b") as f:
            f.seek(int(path.stat().st_size * offset))
            f.write(os.urandom(size))

    return damage


def _cut(fraction: float) -> Callable[[Path], None]:
    return lambda path: os.truncate(path, int(path.stat().st_size * fraction))


FILE_DAMAGES: dict[str, Callable[[Path], None]] = {
    "garbled-header": _garble(0.0, 4096),
    "garbled-second-block": _garble(0.0016, 8192),
    "garbled-middle": _garble(0.5, 65536),
    "truncated-half": _cut(0.5),
    "truncated-100-bytes": lambda p: os.truncate(p, 100),
    "empty": lambda p: os.truncate(p, 0),
}


@pytest.mark.parametrize("damage", FILE_DAMAGES, ids=list(FILE_DAMAGES))
def test_a_damaged_database_file_raises_store_error_naming_it(tmp_path: Path, damage: str) -> None:
    """Regression: a garbled or truncated file raised a raw duckdb.IOException."""
    path = tmp_path / "m.duckdb"
    with _open(path) as store:
        store.add_many(NS, [f"memory {i} about something" for i in range(3000)])
    FILE_DAMAGES[damage](path)
    with pytest.raises(StoreError) as info:
        _open(path)
    assert str(path) in str(info.value)
    assert not isinstance(info.value, StoreLockedError)

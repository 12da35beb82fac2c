"""``load(check=...)`` and ``delete(check=...)``: a decision made on the document used.

Both storages hand the check the components of the very document a load is
about to apply or a delete is about to remove, so a caller deciding from the
document (a cluster agent checking whose a session is) never decides on one
read and acts on another.  A check that raises refuses the operation: no
component changes, no version is recorded, nothing is deleted.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

import msgspec
import psycopg
import pytest

from actormem.session import (
    DocumentCheck,
    JsonSession,
    PostgresSession,
    SessionError,
    SessionVersions,
)
from actormem.state import StateModule


class Counter(StateModule):
    def __init__(self, value: int = 0) -> None:
        super().__init__()
        self.value = value
        self.register_state("value")


class Refused(Exception):
    pass


@pytest.fixture(params=["json", "postgres"])
def storage(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[JsonSession | PostgresSession]:
    if request.param == "json":
        yield JsonSession(tmp_path / "sessions")
        return
    with PostgresSession(request.getfixturevalue("pg_dsn")) as s:
        yield s


def _owner_is(who: str, seen: list[dict[str, object]]) -> DocumentCheck:
    def check(raw: Mapping[str, msgspec.Raw]) -> None:
        seen.append({k: msgspec.json.decode(v) for k, v in raw.items()})
        if msgspec.json.decode(raw["owner"]) != who:
            raise Refused(who)

    return check


def test_a_refusing_check_loads_nothing_and_records_no_version(
    storage: JsonSession | PostgresSession,
) -> None:
    storage.save_state("s", {"owner": "bob", "c": {"value": 7}})
    c, seen = Counter(1), []
    loader = SessionVersions()  # a loader that never saw the session
    where = storage.location("s")
    kw = {"versions": loader} if isinstance(storage, PostgresSession) else {}
    with pytest.raises(Refused):
        storage.load("s", {"c": c}, check=_owner_is("alice", seen), **kw)
    assert c.value == 1
    assert seen == [{"owner": "bob", "c": {"value": 7}}]  # the document as stored
    assert loader.get(where) is None  # never loaded: its save over the session is a conflict
    assert storage.load("s", {"c": c}, check=_owner_is("bob", seen), **kw)
    assert c.value == 7
    if isinstance(storage, PostgresSession):
        assert loader.version(where) == 1


def test_a_check_is_not_called_for_an_absent_session_and_a_damaged_one_is_refused_first(
    storage: JsonSession | PostgresSession, request: pytest.FixtureRequest
) -> None:
    seen: list[dict[str, object]] = []
    check = _owner_is("alice", seen)
    assert storage.load("none", {"c": Counter()}, check=check) is False
    assert storage.delete("none", check=check) is False
    storage.save_state("s", {"owner": "alice", "c": {"value": 2}})
    damaged = b'{"format": "actormem.session", "schema_version": 1, "comp'
    if isinstance(storage, JsonSession):
        storage.path("s").write_bytes(damaged)
    else:
        with psycopg.connect(request.getfixturevalue("pg_dsn"), autocommit=True) as conn:
            conn.execute(
                "UPDATE actormem_sessions SET document = %b WHERE session_id = 's'", (damaged,)
            )
    for refused in (
        lambda: storage.load("s", {"c": Counter()}, check=check),
        lambda: storage.delete("s", check=check),
    ):
        with pytest.raises(SessionError, match=r"malformed|corrupt"):
            refused()
    assert seen == []
    assert storage.exists("s")  # a damaged document is never deleted by a checked delete


def test_a_refusing_check_deletes_nothing(storage: JsonSession | PostgresSession) -> None:
    storage.save_state("s", {"owner": "bob", "c": {"value": 7}})
    seen: list[dict[str, object]] = []
    with pytest.raises(Refused):
        storage.delete("s", check=_owner_is("alice", seen))
    assert storage.read("s") == {"owner": "bob", "c": {"value": 7}}
    assert storage.delete("s", check=_owner_is("bob", seen)) is True
    assert not storage.exists("s")
    assert [s["owner"] for s in seen] == ["bob", "bob"]


def test_a_postgres_delete_checks_the_row_it_deletes_under_its_lock(pg_dsn: str) -> None:
    """While the check runs, the row is locked: no other writer can replace or
    delete it before the delete (another connection's lock request fails at once)."""
    with PostgresSession(pg_dsn) as pg:
        pg.save_state("s", {"owner": "alice"})

        def check(raw: Mapping[str, msgspec.Raw]) -> None:
            with (
                psycopg.connect(pg_dsn, autocommit=True) as other,
                pytest.raises(psycopg.errors.LockNotAvailable),
            ):
                other.execute(
                    "SELECT 1 FROM actormem_sessions WHERE session_id = 's' FOR UPDATE NOWAIT"
                )

        assert pg.delete("s", check=check) is True
        assert not pg.exists("s")

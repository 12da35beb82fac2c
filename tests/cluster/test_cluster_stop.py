"""Ending an agent: an idle release or a stop whose save fails, a stop that meets a lost
actor, arguments that cannot travel.  In this process, on the suite's real PostgreSQL.

The hosting actor's class runs here (``MemoryHost``; building a second one on
the same spec is Ray's restart after a node death).  For the handle's side, a
stand-in for Ray's actor handle runs each method in the current host as it is
sent; the test says when the node dies (the next answer is Ray's
``ActorDiedError``, and Ray restarts the actor, same actor id, from the
session).  Ray's lookup by name and the actor's state in the GCS are the
stand-in's too.  Found by a hostile test of session 11, each on a real
2-node cluster (``/work/wt-rayprobe``'s scenarios).
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from actormem.cluster import AgentRestartedError
from actormem.cluster._host import MemoryHost
from actormem.cluster._spec import AgentSpec, make_spec
from actormem.messages import Msg
from actormem.models.embedders import HashEmbedder
from actormem.session import SessionStorageError
from actormem.store import Namespace
from tests._postgres import pg_url

ALICE = Namespace(user_id="alice", agent_id="helper")


@pytest.fixture
def url(pg_dsn: str) -> str:
    return pg_url(pg_dsn)


def spec(url: str, idle_release: float | None = None) -> AgentSpec:
    return make_spec("stops", ALICE, url, url, False, {"embedder": HashEmbedder(32)}, idle_release)


@pytest.fixture
def hosts() -> Iterator[list[MemoryHost]]:
    made: list[MemoryHost] = []
    yield made
    for h in made:
        if not h._closed:
            h._rt.close()


def texts(host: MemoryHost, expect: str | None = None) -> list[str]:
    return [m.text for m in host.call("messages", (), {}, expect, False)[1]]


# -- F2: a release (or stop) whose save fails ---------------------------------------------


class _DatabaseDown:
    """Every update of a stored session fails in PostgreSQL (a trigger), as in a failover."""

    def __init__(self, dsn: str) -> None:
        self.conn = psycopg.connect(dsn, autocommit=True)

    def __enter__(self) -> _DatabaseDown:
        self.conn.execute(
            "CREATE FUNCTION down() RETURNS trigger AS $$ BEGIN "
            "RAISE EXCEPTION 'the database is failing over'; END $$ LANGUAGE plpgsql"
        )
        self.conn.execute(
            "CREATE TRIGGER down BEFORE UPDATE ON actormem_sessions "
            "FOR EACH ROW EXECUTE FUNCTION down()"
        )
        return self

    def __exit__(self, *exc: object) -> None:
        self.conn.execute("DROP TRIGGER down ON actormem_sessions")
        self.conn.close()


@pytest.mark.parametrize("ending", ["release", "shutdown", "stop"])
def test_an_ending_whose_save_failed_does_not_record_the_incarnation_released(
    url: str, pg_dsn: str, hosts: list[MemoryHost], ending: str
) -> None:
    first = MemoryHost(spec(url, idle_release=3600))
    hosts.append(first)
    mine = first.incarnation
    first.call("add", (Msg.user("acknowledged"),), {}, None, False)
    first.call("flush", (), {}, None, False)
    first._last_call -= 7200  # idle for two hours: the release goes ahead
    with _DatabaseDown(pg_dsn), pytest.raises(SessionStorageError, match="failing over"):
        if ending == "release":
            first.release_if_idle()
        else:
            getattr(first, ending)(30)
    assert not first._closed  # it did not end: it keeps serving
    assert mine not in first.released()[1]
    first.call("save_session", (), {}, None, False)  # another handle's save succeeds
    # a handle adds on the running incarnation, and the node dies before a flush
    first.call("add", (Msg.user("unacknowledged"),), {}, mine, False)
    again = MemoryHost(spec(url, idle_release=3600))
    hosts.append(again)
    assert mine not in again.released()[1]
    # the handle's change is lost: it is told, never carried on silently
    with pytest.raises(AgentRestartedError, match="restarted"):
        texts(again, expect=mine)
    assert texts(again) == ["acknowledged"]


def test_a_release_whose_save_failed_goes_ahead_once_the_database_is_back(
    url: str, pg_dsn: str, hosts: list[MemoryHost]
) -> None:
    first = MemoryHost(spec(url, idle_release=3600))
    hosts.append(first)
    mine = first.incarnation
    first.call("add", (Msg.user("saved by the release"),), {}, None, False)
    first._last_call -= 7200
    with _DatabaseDown(pg_dsn), pytest.raises(SessionStorageError):
        first.release_if_idle()
    assert first.release_if_idle() is True  # asked again by its watcher: released now
    assert first._closed
    again = MemoryHost(spec(url, idle_release=3600))
    hosts.append(again)
    assert mine in again.released()[1]  # a handle with changes on it lost nothing
    assert texts(again, expect=mine) == ["saved by the release"]

"""PostgresSession refuses a look-alike table it did not make (pgprobe finding 7).

``CREATE TABLE IF NOT EXISTS`` adopted any table of the sessions table's
name: without a key on ``session_id`` every save failed in ``ON CONFLICT``,
with other columns with "column saved_at does not exist" -- after the open
had stamped the table as actormem's.  Like the store with foreign tables,
the open now refuses it clearly and changes nothing.
"""

from __future__ import annotations

import psycopg
import pytest

from actormem.session import PostgresSession, SessionStorageError

LAYOUT = (
    "session_id text {key}, version bigint, schema_version integer, document bytea, "
    "nbytes integer, saved_at timestamptz DEFAULT now(), saved_by text, save_id uuid"
)


@pytest.mark.parametrize(
    ("ddl", "says"),
    [
        (
            "CREATE TABLE {t} (session_id text PRIMARY KEY, data jsonb, updated timestamptz)",
            "lacks the columns",
        ),
        ("CREATE TABLE {t} (" + LAYOUT.format(key="") + ")", "session_id is not its primary key"),
        (
            "CREATE TABLE {t} (" + LAYOUT.format(key="PRIMARY KEY") + ", owner text)",
            "other columns (owner)",
        ),
        ("CREATE VIEW {t} AS SELECT 'a'::text AS session_id", "not a table"),
    ],
)
@pytest.mark.parametrize("table", ["actormem_sessions", "s2"])
def test_a_look_alike_table_is_refused_and_left_alone(
    pg_dsn: str, ddl: str, says: str, table: str
) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(ddl.format(t=table))
    with pytest.raises(SessionStorageError, match="not an actormem sessions table") as err:
        PostgresSession(pg_dsn, table=table)
    assert says in str(err.value)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        assert conn.execute("SELECT to_regclass(%s)", (f"{table}_schema",)).fetchone() == (None,)


def test_a_table_of_exactly_this_layout_is_adopted(pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE actormem_sessions (" + LAYOUT.format(key="PRIMARY KEY") + ")")
    with PostgresSession(pg_dsn) as sessions:
        assert sessions.put("a", {"c": {"v": 1}}).version == 1
        assert sessions.put("a", {"c": {"v": 2}}).version == 2
    with PostgresSession(pg_dsn) as again:  # stamped: opened as its own
        assert again.exists("a")

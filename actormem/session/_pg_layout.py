"""The sessions table's layout: its migrations, and adopting or refusing a table found.

Split from :mod:`actormem.session._postgres` (which reads and writes
sessions) because the layout is a concern of its own: the statements that
move a table from one layout version to the next, run once under an
advisory lock when workers open at once, and the check that a table of the
configured name that no actormem made is refused rather than adopted.  This
module knows the table's shape; the session module knows the rows.  psycopg
is imported only by the caller that already has a connection.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import structlog

from actormem.session._common import SessionStorageError

if TYPE_CHECKING:
    import psycopg

__all__ = ["LAYOUT_VERSION", "MIGRATIONS", "migrate"]

log = structlog.get_logger("actormem.session")

#: Statements that move the table layout from version ``i`` to ``i + 1``
#: (``{t}`` is the sessions table).  Append; never edit a released step.
MIGRATIONS: list[tuple[str, ...]] = [
    (
        """CREATE TABLE IF NOT EXISTS {t} (
            session_id text PRIMARY KEY CHECK (length(session_id) BETWEEN 1 AND 128),
            version bigint NOT NULL CHECK (version > 0),
            schema_version integer NOT NULL,
            document bytea NOT NULL,
            nbytes integer NOT NULL,
            saved_at timestamptz NOT NULL DEFAULT clock_timestamp(),
            saved_by text NOT NULL,
            save_id uuid NOT NULL
        )""",
        "CREATE INDEX IF NOT EXISTS {t_saved_at} ON {t} (saved_at DESC)",
    ),
    # 2: the row's generation, so a version can never match another incarnation
    # of a session (deleted and created again).  Added without a default, then
    # given one, so existing rows keep NULL and the table is not rewritten under
    # an exclusive lock (a volatile default in ADD COLUMN rewrites every row);
    # a row created from then on -- by a process of the previous layout too --
    # draws one, so a remembered NULL never matches a re-created row.
    (
        "ALTER TABLE {t} ADD COLUMN IF NOT EXISTS generation uuid",
        "ALTER TABLE {t} ALTER COLUMN generation SET DEFAULT gen_random_uuid()",
    ),
]
#: The layout this actormem writes.
LAYOUT_VERSION: Final = len(MIGRATIONS)
#: The columns of the layout at :data:`LAYOUT_VERSION` (name -> ``format_type``).
_COLUMNS: Final = {
    "session_id": "text",
    "version": "bigint",
    "schema_version": "integer",
    "document": "bytea",
    "nbytes": "integer",
    "saved_at": "timestamp with time zone",
    "saved_by": "text",
    "save_id": "uuid",
    "generation": "uuid",
}
#: Columns a migration adds: a table of an earlier layout (its layout record
#: lost) may lack them and is still adopted (the migration adds them).
_ADDED_LATER: Final = frozenset({"generation"})


def migrate(conn: psycopg.Connection[Any], table: str, url: str) -> None:
    """Bring ``table`` to :data:`LAYOUT_VERSION` in one transaction, once among workers.

    The pending steps of :data:`MIGRATIONS` run under an advisory lock on the
    table's name, so workers opening at once migrate once.  ``url`` (without
    its password) names the database in errors.

    Raises:
        SessionStorageError: the stored layout is newer than this actormem, or
            a table of this name exists that is no actormem sessions table.
        psycopg.Error: the database failed (the caller words it).
    """
    from psycopg import sql

    meta = sql.Identifier(f"{table}_schema")
    names = {"t": sql.Identifier(table), "t_saved_at": sql.Identifier(f"{table}_saved_at")}
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"actormem.{table}",))
        conn.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {m} (one boolean PRIMARY KEY DEFAULT true "
                "CHECK (one), version integer NOT NULL, migrated_at timestamptz NOT NULL)"
            ).format(m=meta)
        )
        row = conn.execute(sql.SQL("SELECT version FROM {m}").format(m=meta)).fetchone()
        current = int(row[0]) if row else 0
        if current > LAYOUT_VERSION:
            raise SessionStorageError(
                f"sessions table {table} in {url} has layout version {current}, "
                f"newer than this actormem supports ({LAYOUT_VERSION}); upgrade actormem"
            )
        if current == 0:
            _refuse_foreign_table(conn, table, url)
        for step in range(current, LAYOUT_VERSION):
            for statement in MIGRATIONS[step]:
                conn.execute(sql.SQL(statement).format(**names))
        if current < LAYOUT_VERSION:
            conn.execute(
                sql.SQL(
                    "INSERT INTO {m} (one, version, migrated_at) VALUES (true, %s, now()) "
                    "ON CONFLICT (one) DO UPDATE SET version = EXCLUDED.version, "
                    "migrated_at = EXCLUDED.migrated_at"
                ).format(m=meta),
                (LAYOUT_VERSION,),
            )
            log.info(
                "session.pg_migrated", table=table, from_version=current, to_version=LAYOUT_VERSION
            )


def _refuse_foreign_table(conn: psycopg.Connection[Any], table: str, url: str) -> None:
    """Refuse a table of this name that no actormem made (no layout record beside it).

    ``CREATE TABLE IF NOT EXISTS`` would adopt it silently and every save would
    then fail (no key for ``ON CONFLICT``, a missing column) -- or worse, write
    into someone else's table.  A table with exactly this layout (the layout
    record lost, say) is adopted.
    """
    row = conn.execute(
        "SELECT c.oid, c.relkind FROM pg_class c WHERE c.oid = to_regclass(%s)",
        (table,),
    ).fetchone()
    if row is None:
        return
    oid, relkind = row
    found = dict(
        conn.execute(
            "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attrelid = %s AND attnum > 0 AND NOT attisdropped",
            (oid,),
        ).fetchall()
    )
    keyed = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM pg_index i JOIN pg_attribute a "
        "ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0] "
        "WHERE i.indrelid = %s AND i.indisunique AND i.indnkeyatts = 1 "
        "AND i.indpred IS NULL AND a.attname = 'session_id')",
        (oid,),
    ).fetchone()
    problems = []
    if str(relkind) not in ("r", "p"):
        problems.append(f"it is not a table (relkind {relkind!r})")
    missing = [
        f"{c} {t}"
        for c, t in _COLUMNS.items()
        if found.get(c) != t and not (c in _ADDED_LATER and c not in found)
    ]
    if missing:
        problems.append(f"it lacks the columns {', '.join(missing)}")
    extra = sorted(set(found) - set(_COLUMNS))
    if extra:
        problems.append(f"it has other columns ({', '.join(extra)})")
    if not (keyed and keyed[0]):
        problems.append("session_id is not its primary key")
    if problems:
        raise SessionStorageError(
            f"{table} in {url} exists but is not an actormem sessions table "
            f"({'; '.join(problems)}); nothing was changed -- pass another table= name "
            "or remove that table"
        )

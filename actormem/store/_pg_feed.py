"""The change feed of ``memories``: what a process's search cache catches up from.

Schema version 10 (:func:`add_change_feed`) stamps every row version that a
search's first stage can see differently with the id of the transaction
that wrote it (``memories.chg``, an ``xid8``), and records hard deletes in
``memory_gone`` (id, namespace, stamp).  A reader keeps, beside what it has
copied, the *snapshot* (``pg_current_snapshot()``) its copy is exact for;
the rows it is missing are exactly those whose stamp that snapshot did not
see and its next statement's snapshot does (``NOT pg_visible_in_snapshot(chg,
old)``), read with two index conditions: the range ``chg >= xmax(old)`` and
the old snapshot's in-progress stamps (:func:`snapshot_unseen`).  (Until
schema v10's first revision the range started at ``xmin(old)``: one
idle-in-transaction session anywhere pinned ``xmin``, and every check then
read every row written since -- 20k writes took a cached keyword search from
2.7 to 17.3 ms.)

Why transaction ids and not a sequence: sequence values (and commit
timestamps) are handed out before commit, so a reader that has seen stamp
100 can later see 99 commit -- a position "the largest stamp seen" would skip
it.  Visibility in a snapshot is what PostgreSQL itself decides a statement
sees, so a change is caught up exactly once whatever order transactions
commit in, across any number of concrete namespaces and writers that do not
share a lock, and without any lock of the writers' (``lock_keys``) being
involved.  Every stamp is taken inside the writing transaction by the
database (a column default and a ``BEFORE UPDATE`` trigger): no write path of
the store, of a migration or a hand-written statement can forget it.

What is stamped
    Inserts (the column's default).  Updates that change a column the
    first stage reads (liveness: ``deleted_at``/``superseded_by``; the
    embedding, the BM25 terms, the namespace, kind, tags, importance,
    ``created_at``, ``seq``): a row trigger that leaves the
    access-counter flushes (``access_count``/``last_accessed``, written on
    every few searches) unstamped, so they never make readers catch up (the
    comparison runs in the trigger's function, a few microseconds per updated
    row); the
    relevance blend reads those two columns from the database for the final
    candidates instead.  A row moved to another namespace also leaves a
    ``memory_gone`` row for its old one.  Deletes: ``memory_gone`` (a
    statement trigger over the deleted rows).

Trimming
    ``memory_gone`` is the one table that grows without rows of its own to
    shrink with; :func:`trim_gone`, run each time a store opens, drops its rows
    older than :data:`GONE_KEEP_SECONDS` (a week) and
    records the largest stamp dropped in ``store_meta`` (``feed_trimmed``): a
    copy whose snapshot is older than that can no longer learn of those
    deletes and is reloaded whole.
"""

from __future__ import annotations

from typing import Any, Final

__all__ = [
    "FEED_VERSION",
    "FIRST_STAGE_COLUMNS",
    "GONE_KEEP_SECONDS",
    "TRIMMED_KEY",
    "add_change_feed",
    "snapshot_unseen",
    "snapshot_xmin",
    "trim_gone",
]

#: The schema version that added the feed.
FEED_VERSION: Final = 10

#: ``memory_gone`` rows older than this are trimmed each time a store opens: a copy not
#: searched for a week is loaded again rather than caught up.
GONE_KEEP_SECONDS: Final = 7 * 86_400.0

#: The ``memories`` columns whose change a search cache must learn of.
FIRST_STAGE_COLUMNS: Final = (
    "user_id",
    "agent_id",
    "run_id",
    "session_id",
    "kind",
    "embedding",
    "importance",
    "tags",
    "created_at",
    "superseded_by",
    "deleted_at",
    "terms",
    "tfs",
    "doclen",
    "seq",
)

#: ``store_meta`` key: the largest ``memory_gone`` stamp trimmed so far.
TRIMMED_KEY: Final = "feed_trimmed"

_NS: Final = ("user_id", "agent_id", "run_id", "session_id")


def add_change_feed(conn: Any, dim: int) -> None:
    """Schema step 9 -> 10: ``memories.chg``, ``memory_gone`` and their triggers (module doc).

    Rows already stored keep ``chg`` NULL: a reader loads a scope whole
    before it follows the feed, and the feed's range ``chg >= xmin`` never
    selects NULL.  Adding the column without a default and setting the
    default afterwards keeps the step from rewriting the table.
    """
    conn.execute("ALTER TABLE memories ADD COLUMN chg xid8")
    conn.execute("ALTER TABLE memories ALTER COLUMN chg SET DEFAULT pg_current_xact_id()")
    conn.execute("CREATE INDEX memories_chg ON memories (chg)")
    conn.execute(
        "CREATE TABLE memory_gone (id text NOT NULL, user_id text NOT NULL, "
        "agent_id text NOT NULL, run_id text NOT NULL, session_id text NOT NULL, "
        "chg xid8 NOT NULL DEFAULT pg_current_xact_id(), "
        "at timestamptz NOT NULL DEFAULT now())"
    )
    conn.execute("CREATE INDEX memory_gone_chg ON memory_gone (chg)")
    conn.execute("CREATE INDEX memory_gone_at ON memory_gone (at)")
    ns = ", ".join(_NS)
    old_ns = ", ".join(f"OLD.{c}" for c in _NS)
    moved = " OR ".join(f"OLD.{c} IS DISTINCT FROM NEW.{c}" for c in _NS)
    changed = " OR ".join(f"OLD.{c} IS DISTINCT FROM NEW.{c}" for c in FIRST_STAGE_COLUMNS)
    # the comparison is in the function's body, not in the trigger's WHEN clause: a
    # WHEN naming ``embedding`` would forbid the ALTER COLUMN ... TYPE a re-embedding
    # to another dimension runs
    conn.execute(
        f"""
        CREATE FUNCTION actormem_stamp() RETURNS trigger LANGUAGE plpgsql AS $fn$
        BEGIN
            IF {changed} THEN
                NEW.chg := pg_current_xact_id();
            END IF;
            IF {moved} THEN
                INSERT INTO memory_gone (id, {ns}) VALUES (OLD.id, {old_ns});
            END IF;
            RETURN NEW;
        END $fn$"""
    )
    conn.execute(
        "CREATE TRIGGER memories_stamp BEFORE UPDATE ON memories FOR EACH ROW "
        "EXECUTE FUNCTION actormem_stamp()"
    )
    conn.execute(
        f"""
        CREATE FUNCTION actormem_gone() RETURNS trigger LANGUAGE plpgsql AS $fn$
        BEGIN
            INSERT INTO memory_gone (id, {ns}) SELECT id, {ns} FROM old_rows;
            RETURN NULL;
        END $fn$"""
    )
    conn.execute(
        "CREATE TRIGGER memories_gone AFTER DELETE ON memories REFERENCING OLD TABLE AS "
        "old_rows FOR EACH STATEMENT EXECUTE FUNCTION actormem_gone()"
    )


def snapshot_xmin(snapshot: str) -> int:
    """The ``xmin`` of a ``pg_snapshot`` in its text form ``xmin:xmax:xip,...``."""
    return int(snapshot.split(":", 1)[0])


def snapshot_unseen(snapshot: str) -> tuple[str, str]:
    """``(xmax, '{xip,...}')`` of a ``pg_snapshot`` text: the stamps the snapshot did not see.

    A stamp below ``xmin`` is seen (committed or aborted); one at or past
    ``xmax`` is not; one between is not seen exactly when it is in the
    in-progress list ``xip``.  So ``chg >= xmax OR chg = ANY(xip)`` is
    ``NOT pg_visible_in_snapshot(chg, snapshot)`` written as two index
    conditions: a reader's check reads the rows written since its snapshot
    and those of the transactions it saw in progress, never every row written
    since ``xmin`` -- which an idle-in-transaction session anywhere holds
    back for as long as it stays open.
    """
    _, xmax, xip = snapshot.split(":")
    return xmax, "{" + xip + "}"


def trim_gone(conn: Any, older_than: float) -> int:
    """Drop ``memory_gone`` rows older than ``older_than`` seconds; returns how many.

    Runs in one transaction with the ``feed_trimmed`` update (the caller's,
    or autocommit's single statement): a reader either still finds a row or
    sees a horizon that tells it to reload.
    """
    row = conn.execute(
        "WITH d AS (DELETE FROM memory_gone WHERE at < now() - make_interval(secs => %s) "
        "RETURNING chg), m AS (SELECT max(chg) AS top, count(*) AS n FROM d), "
        "u AS (INSERT INTO store_meta (key, value) SELECT %s, top::text FROM m "
        "WHERE top IS NOT NULL ON CONFLICT (key) DO UPDATE SET value = "
        "greatest(store_meta.value::xid8, excluded.value::xid8)::text) "
        "SELECT n FROM m",
        (float(older_than), TRIMMED_KEY),
    ).fetchone()
    return int(row[0]) if row else 0

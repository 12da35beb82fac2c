"""The PostgreSQL schema of the long-term store and its forward migrations.

Tables (all in the connection's ``search_path`` schema):

* ``memories`` -- one row per memory version, as in DuckDB, plus the BM25
  terms of its content (``terms``: the distinct terms of
  :func:`~actormem.store._index.tokenize`, ``tfs``: how often each occurs,
  ``doclen``: the number of terms), so keyword search ranks exactly like the
  DuckDB backend's in-memory BM25.  Timestamps are integer Unix microseconds
  (``bigint``), the rounding DuckDB applies, so both backends return the
  same values; the embedding is a pgvector ``vector(dim)``.
* ``history`` -- the audit trail (``seq`` orders rows written in one
  transaction).
* ``activity_log``, ``log_compactions``, ``journal_state`` -- the journal's
  tables (:mod:`actormem.journal`), keyed by the concrete namespace.
* ``store_meta`` (embedder name and dimension) and ``schema_version``.
* ``scope_stats`` / ``term_stats`` (BM25 statistics per concrete namespace),
  ``postings`` / ``term_bounds`` (the keyword side's index and its bounds;
  since version 8 views of ``posting_groups`` and ``term_stats``, see
  :mod:`actormem.store._pg_groups`; since version 9 ``term_stats`` is a view of
  ``posting_groups`` too, see :mod:`actormem.store._pg_group_stats`), written for
  new rows by the store's
  insert path and for updates and deletes by statement-level triggers on
  ``memories``; ``vector_indexes``.
* ``memory_gone`` and ``memories.chg`` -- the change feed (hard deletes; the
  transaction that wrote each row version), :mod:`actormem.store._pg_feed`.
* ``agent_fences`` -- the epoch of each fenced writer (a cluster agent), whose
  older incarnations' writes are refused: :mod:`actormem.store._pg_fence`.

Indexes: a partial btree over the live rows' namespace columns and content
hash (exact-duplicate lookups, and the scan a tenant's search runs), a
partial GIN index over ``terms`` (keyword candidates), btrees for history
and the journal.  No HNSW index is created here: see
:mod:`actormem.store._postgres` on why an approximate index over the whole
table is a trap.

:func:`ensure_schema` creates the tables at :data:`PG_SCHEMA_VERSION` or runs
the pending migrations, in one transaction under an advisory lock, so two
workers starting at once migrate once; a database written by a newer
actormem raises :class:`SchemaVersionError` and is left untouched.  A
migration also locks ``memories`` against writes (``SHARE ROW EXCLUSIVE``)
before its first step: workers of the older version that are still running
wait until it commits, and from version 6 on their writes are refused
(:func:`_writers_declare_version`).  Shipped steps are never edited: a change
is a new step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import structlog

from actormem.store._pg_feed import add_change_feed
from actormem.store._pg_fence import add_fences
from actormem.store._pg_group_stats import stats_from_groups
from actormem.store._pg_groups import group_postings, statement_triggers
from actormem.store._pg_open_groups import share_small_groups
from actormem.store._pg_queries import PG_LIVE, PG_NS
from actormem.store._pg_terms import cap_stored_terms
from actormem.store._types import SchemaVersionError, StoreError

__all__ = [
    "PG_SCHEMA_VERSION",
    "WRITER_SETTING",
    "bound_sql",
    "declare_writer",
    "ensure_schema",
    "post_sql",
    "read_meta",
    "write_meta",
]

log = structlog.get_logger(__name__)

#: Version history: **1** -- the tables above; **2** -- ``memories.seq``, the order
#: rows were added in (neighbouring episodes as search context); **3** -- the
#: keyword statistics ``scope_stats`` / ``term_stats`` kept by triggers, the
#: episodes' neighbour index and ``vector_indexes``; **4** -- ``postings``, one row per
#: (live memory, term) kept by triggers, the keyword side's index (:func:`_add_postings`);
#: **5** -- new rows are added to the statistics by the inserting transaction instead
#: of a trigger (:func:`_inserts_counted_by_writer`); **6** -- writers of ``memories``
#: declare their version, older ones are refused (:func:`_writers_declare_version`);
#: **7** -- new rows are added to the postings and their bounds by the inserting
#: transaction too, ``postings_key`` unique (:func:`_postings_written_by_writer`);
#: **8** -- postings stored by groups (one row per term, namespace and inserted batch),
#: the bounds kept in ``term_stats``, rows inserted only by the store
#: (:func:`actormem.store._pg_groups.group_postings`); **9** -- each posting group carries its
#: document frequency and bounds, ``term_stats`` / ``term_bounds`` become views of the groups
#: and a batch no longer upserts a statistics row per term
#: (:func:`actormem.store._pg_group_stats.stats_from_groups`); **10** -- the change
#: feed the per-process search cache catches up from: ``memories.chg`` (the writing
#: transaction's id) and ``memory_gone`` (:func:`actormem.store._pg_feed.add_change_feed`);
#: **11** -- a batch's few rows of a namespace join that namespace's open posting group
#: (``posting_open``) instead of a group of their own, and small groups already stored are
#: regrouped (:func:`actormem.store._pg_open_groups.share_small_groups`); **12** --
#: ``agent_fences``, the write fence of a cluster agent's incarnations
#: (:mod:`actormem.store._pg_fence`).
#: A shipped step is never edited: a change to the schema is a new step (a database
#: already at a version never runs that version's step again).
PG_SCHEMA_VERSION: Final = 12

#: The session setting a writer declares its code's schema version in (:func:`declare_writer`).
WRITER_SETTING: Final = "actormem.writer_version"

#: The advisory lock taken while creating or migrating the schema.
_MIGRATE_LOCK: Final = "actormem.store.schema"


def _create_v1(conn: Any, dim: int) -> None:
    conn.execute(
        f"""
        CREATE TABLE memories (
            id text PRIMARY KEY,
            user_id text NOT NULL DEFAULT '',
            agent_id text NOT NULL DEFAULT '',
            run_id text NOT NULL DEFAULT '',
            session_id text NOT NULL DEFAULT '',
            kind text NOT NULL,
            content text NOT NULL,
            content_hash text NOT NULL,
            embedding vector({int(dim)}),
            importance double precision NOT NULL,
            tags text[] NOT NULL DEFAULT '{{}}',
            source_ids text[] NOT NULL DEFAULT '{{}}',
            created_at bigint NOT NULL,
            updated_at bigint NOT NULL,
            last_accessed bigint NOT NULL,
            access_count bigint NOT NULL DEFAULT 0,
            superseded_by text,
            deleted_at bigint,
            metadata jsonb NOT NULL DEFAULT '{{}}',
            terms text[] NOT NULL DEFAULT '{{}}',
            tfs integer[] NOT NULL DEFAULT '{{}}',
            doclen integer NOT NULL DEFAULT 0
        )"""
    )
    live = "WHERE deleted_at IS NULL AND superseded_by IS NULL"
    conn.execute(
        "CREATE INDEX memories_live_key ON memories "
        f"(user_id, agent_id, run_id, session_id, content_hash) {live}"
    )
    conn.execute(f"CREATE INDEX memories_live_agent ON memories (agent_id) {live}")
    conn.execute(f"CREATE INDEX memories_terms ON memories USING gin (terms) {live}")
    conn.execute(
        "CREATE INDEX memories_key_all ON memories (user_id, agent_id, run_id, session_id)"
    )
    conn.execute(
        """
        CREATE TABLE history (
            seq bigserial PRIMARY KEY,
            id text NOT NULL,
            memory_id text NOT NULL,
            user_id text NOT NULL DEFAULT '',
            agent_id text NOT NULL DEFAULT '',
            run_id text NOT NULL DEFAULT '',
            session_id text NOT NULL DEFAULT '',
            op text NOT NULL,
            old_content text,
            new_content text,
            ts bigint NOT NULL,
            reason text NOT NULL DEFAULT ''
        )"""
    )
    conn.execute("CREATE INDEX history_key ON history (user_id, agent_id, run_id, session_id)")
    conn.execute("CREATE INDEX history_memory ON history (memory_id)")
    conn.execute(
        """
        CREATE TABLE activity_log (
            id text PRIMARY KEY,
            user_id text NOT NULL DEFAULT '',
            agent_id text NOT NULL DEFAULT '',
            run_id text NOT NULL DEFAULT '',
            session_id text NOT NULL DEFAULT '',
            seq bigint NOT NULL,
            ts bigint NOT NULL,
            entry_type text NOT NULL,
            content text NOT NULL,
            metadata jsonb NOT NULL DEFAULT '{}',
            compaction_id text,
            UNIQUE (user_id, agent_id, run_id, session_id, seq)
        )"""
    )
    conn.execute(
        """
        CREATE TABLE log_compactions (
            id text PRIMARY KEY,
            user_id text NOT NULL DEFAULT '',
            agent_id text NOT NULL DEFAULT '',
            run_id text NOT NULL DEFAULT '',
            session_id text NOT NULL DEFAULT '',
            ts bigint NOT NULL,
            entries bigint NOT NULL,
            first_seq bigint NOT NULL,
            last_seq bigint NOT NULL,
            summary_id text NOT NULL,
            summary text NOT NULL,
            summarizer text NOT NULL DEFAULT '',
            bytes_before bigint NOT NULL DEFAULT 0,
            bytes_after bigint NOT NULL DEFAULT 0
        )"""
    )
    conn.execute(
        "CREATE INDEX log_compactions_key ON log_compactions "
        "(user_id, agent_id, run_id, session_id)"
    )
    conn.execute(
        """
        CREATE TABLE journal_state (
            user_id text NOT NULL DEFAULT '',
            agent_id text NOT NULL DEFAULT '',
            run_id text NOT NULL DEFAULT '',
            session_id text NOT NULL DEFAULT '',
            key text NOT NULL,
            value text NOT NULL,
            updated_at bigint NOT NULL,
            PRIMARY KEY (user_id, agent_id, run_id, session_id, key)
        )"""
    )
    conn.execute("CREATE TABLE store_meta (key text PRIMARY KEY, value text NOT NULL)")


def _add_seq(conn: Any, dim: int) -> None:
    # Existing rows are numbered in their physical order, close to the order
    # they were added in.
    conn.execute("ALTER TABLE memories ADD COLUMN seq bigserial")


# What a set of rows adds to the statistics (``sign`` 1) or takes away (-1): used
# by the triggers below on their transition tables.
_DELTA_SCOPES: Final = f"""
    INSERT INTO scope_stats AS s ({PG_NS}, docs, doclen, episodes)
    SELECT {PG_NS}, sum(sign), sum(sign * doclen),
        coalesce(sum(sign) FILTER (WHERE kind = 'episode'), 0)
    FROM d GROUP BY {PG_NS} ORDER BY {PG_NS}
    ON CONFLICT ({PG_NS}) DO UPDATE SET docs = s.docs + excluded.docs,
        doclen = s.doclen + excluded.doclen,
        episodes = s.episodes + excluded.episodes"""
_DELTA_TERMS: Final = f"""
    INSERT INTO term_stats AS t (term, {PG_NS}, df)
    SELECT u.term, {PG_NS}, sum(sign) FROM d, unnest(d.terms) AS u(term)
    GROUP BY u.term, {PG_NS} HAVING sum(sign) <> 0 ORDER BY u.term, {PG_NS}
    ON CONFLICT (term, {PG_NS}) DO UPDATE SET df = t.df + excluded.df"""


_PICK: Final = f"{PG_NS}, doclen, kind, terms"
#: Per event, the rows of a statement whose statistics change (``sign`` 1: added, -1: taken
#: away), read by the statistics' statement triggers (schema v3; v9 keeps them for
#: ``scope_stats`` only, :mod:`actormem.store._pg_group_stats`).
STATS_ROWS: Final = {
    "insert": f"SELECT {_PICK}, 1 AS sign FROM new_rows WHERE {PG_LIVE}",
    "delete": f"SELECT {_PICK}, -1 AS sign FROM old_rows WHERE {PG_LIVE}",
    # only rows whose statistics can change (not access counters, vectors)
    "update": """
        SELECT n.user_id, n.agent_id, n.run_id, n.session_id, n.doclen, n.kind, n.terms,
            1 AS sign FROM new_rows n JOIN old_rows o USING (id)
        WHERE n.deleted_at IS NULL AND n.superseded_by IS NULL AND (
            o.deleted_at IS NOT NULL OR o.superseded_by IS NOT NULL
            OR (n.terms, n.doclen, n.kind, n.user_id, n.agent_id, n.run_id, n.session_id)
            IS DISTINCT FROM
            (o.terms, o.doclen, o.kind, o.user_id, o.agent_id, o.run_id, o.session_id))
        UNION ALL
        SELECT o.user_id, o.agent_id, o.run_id, o.session_id, o.doclen, o.kind, o.terms,
            -1 AS sign FROM new_rows n JOIN old_rows o USING (id)
        WHERE o.deleted_at IS NULL AND o.superseded_by IS NULL AND (
            n.deleted_at IS NOT NULL OR n.superseded_by IS NOT NULL
            OR (n.terms, n.doclen, n.kind, n.user_id, n.agent_id, n.run_id, n.session_id)
            IS DISTINCT FROM
            (o.terms, o.doclen, o.kind, o.user_id, o.agent_id, o.run_id, o.session_id))""",
}


def _add_stats(conn: Any, dim: int) -> None:
    """Keyword statistics per concrete namespace, kept by statement-level triggers.

    ``scope_stats`` holds each concrete namespace's live row count, total term
    count and episode count; ``term_stats`` how many of its live rows hold each
    term.  A search sums the rows of the namespaces in its scope instead of
    reading every memory of the scope.  The triggers run once per statement
    (``COPY`` included) over its transition tables, in the writing
    transaction, so the figures always match the committed rows whichever
    code (or person) writes them; writers of one namespace already take its
    advisory lock, writers of different namespaces touch different rows.
    (Version 5 drops the trigger on inserts, version 7 the postings' one: the
    store adds new rows itself, see :func:`_inserts_counted_by_writer` and
    :func:`_postings_written_by_writer`.)
    """
    conn.execute(
        f"""
        CREATE TABLE scope_stats (
            user_id text NOT NULL, agent_id text NOT NULL, run_id text NOT NULL,
            session_id text NOT NULL, docs bigint NOT NULL DEFAULT 0,
            doclen bigint NOT NULL DEFAULT 0, episodes bigint NOT NULL DEFAULT 0,
            PRIMARY KEY ({PG_NS}))"""
    )
    conn.execute(
        f"""
        CREATE TABLE term_stats (
            term text NOT NULL, user_id text NOT NULL, agent_id text NOT NULL,
            run_id text NOT NULL, session_id text NOT NULL, df bigint NOT NULL,
            PRIMARY KEY (term, {PG_NS}))"""
    )
    conn.execute(
        f"""
        WITH d AS (SELECT {PG_NS}, 1 AS sign, doclen, kind, terms FROM memories WHERE {PG_LIVE})
        {_DELTA_SCOPES}"""
    )
    conn.execute(
        f"""
        WITH d AS (SELECT {PG_NS}, 1 AS sign, doclen, kind, terms FROM memories WHERE {PG_LIVE})
        {_DELTA_TERMS}"""
    )
    statement_triggers(
        conn,
        "stats",
        "stats",
        {
            op: f"WITH d AS ({body}) {_DELTA_SCOPES};\n"
            f"                WITH d AS ({body}) {_DELTA_TERMS};"
            for op, body in STATS_ROWS.items()
        },
    )
    # neighbouring episodes (search context) of a concrete namespace, in order
    conn.execute(
        f"CREATE INDEX memories_episodes ON memories ({PG_NS}, seq) "
        f"WHERE kind = 'episode' AND {PG_LIVE}"
    )
    # approximate vector indexes of large scopes (see actormem.store._pg_hnsw)
    conn.execute(
        """
        CREATE TABLE vector_indexes (
            scope text PRIMARY KEY, index_name text NOT NULL, predicate text NOT NULL,
            state text NOT NULL, rows bigint NOT NULL, started_at bigint NOT NULL,
            ready_at bigint)"""
    )


_POSTED: Final = f"{PG_NS}, id, doclen, terms, tfs"
# an update's rows whose postings go (``_GONE``) or come (``_CAME``)
_SAME: Final = """(n.terms, n.tfs, n.doclen, n.user_id, n.agent_id, n.run_id, n.session_id)
        IS NOT DISTINCT FROM
        (o.terms, o.tfs, o.doclen, o.user_id, o.agent_id, o.run_id, o.session_id)"""
_GONE: Final = f"""o.deleted_at IS NULL AND o.superseded_by IS NULL AND NOT (
        n.deleted_at IS NULL AND n.superseded_by IS NULL AND {_SAME})"""
_CAME: Final = f"""n.deleted_at IS NULL AND n.superseded_by IS NULL AND NOT (
        o.deleted_at IS NULL AND o.superseded_by IS NULL AND {_SAME})"""


def post_sql(rows: str) -> str:
    """``INSERT`` of the postings of ``rows`` (a query of :data:`_POSTED` columns)."""
    return (
        f"INSERT INTO postings (term, {PG_NS}, id, tf, doclen) "
        f"SELECT u.term, {PG_NS}, r.id, u.tf, r.doclen FROM ({rows}) AS r, "
        "unnest(r.terms, r.tfs) AS u(term, tf)"
    )


def bound_sql(rows: str) -> str:
    """Raise ``term_bounds`` to cover ``rows`` (a query of :data:`_POSTED` columns)."""
    # only ever raised: a bound that a deletion left loose is still a bound
    return (
        f"INSERT INTO term_bounds AS b (term, {PG_NS}, max_tf, min_doclen) "
        f"SELECT u.term, {PG_NS}, max(u.tf), min(r.doclen) FROM ({rows}) AS r, "
        f"unnest(r.terms, r.tfs) AS u(term, tf) GROUP BY u.term, {PG_NS} "
        f"ORDER BY u.term, {PG_NS} ON CONFLICT (term, {PG_NS}) DO UPDATE SET "
        "max_tf = greatest(b.max_tf, excluded.max_tf), "
        "min_doclen = least(b.min_doclen, excluded.min_doclen) "
        "WHERE b.max_tf < excluded.max_tf OR b.min_doclen > excluded.min_doclen"
    )


def _unpost_sql(rows: str) -> str:
    return (
        f"DELETE FROM postings p USING (SELECT u.term, {PG_NS}, r.id FROM ({rows}) AS r, "
        "unnest(r.terms) AS u(term)) AS d WHERE p.term = d.term AND p.user_id = d.user_id "
        "AND p.agent_id = d.agent_id AND p.run_id = d.run_id AND p.session_id = d.session_id "
        "AND p.id = d.id"
    )


def _add_postings(conn: Any, dim: int) -> None:
    """The keyword side's index: ``postings``, one row per (live memory, distinct term).

    Each row holds the term, the memory's concrete namespace and id, the term's
    count in it and its length: everything BM25 needs, so a search scores a
    term's memories from the btree alone (an index-only scan ordered by term
    and namespace) instead of reading every memory that holds a query term
    (:mod:`actormem.store._pg_search`).  Statement-level triggers beside the
    statistics' ones keep it equal to the live rows in the writing
    transaction (``COPY`` included): a row that goes live posts its terms, one
    that is deleted, superseded, rewritten or moved takes them back.

    ``term_bounds`` holds, per term and concrete namespace, the largest count
    and the shortest length of a memory that ever held it: upper bounds of a
    term's BM25 contribution, which let a large scope's search skip the
    postings of common terms that cannot change its top rows
    (:mod:`actormem.store._pg_keyword`).  Deletions leave them as they are (a
    looser bound is still a bound).
    """
    conn.execute(
        """
        CREATE TABLE postings (
            term text NOT NULL, user_id text NOT NULL, agent_id text NOT NULL,
            run_id text NOT NULL, session_id text NOT NULL, id text NOT NULL,
            tf integer NOT NULL, doclen integer NOT NULL)"""
    )
    conn.execute(
        f"""
        CREATE TABLE term_bounds (
            term text NOT NULL, user_id text NOT NULL, agent_id text NOT NULL,
            run_id text NOT NULL, session_id text NOT NULL, max_tf integer NOT NULL,
            min_doclen integer NOT NULL, PRIMARY KEY (term, {PG_NS}))"""
    )
    conn.execute(post_sql(f"SELECT {_POSTED} FROM memories WHERE {PG_LIVE}"))
    conn.execute(bound_sql(f"SELECT {_POSTED} FROM memories WHERE {PG_LIVE}"))
    conn.execute(f"CREATE INDEX postings_key ON postings (term, {PG_NS}, id) INCLUDE (tf, doclen)")
    live_new = f"SELECT {_POSTED} FROM new_rows WHERE {PG_LIVE}"
    live_old = f"SELECT {_POSTED} FROM old_rows WHERE {PG_LIVE}"
    came = (
        "SELECT n.user_id, n.agent_id, n.run_id, n.session_id, n.id, n.doclen, n.terms, "
        f"n.tfs FROM new_rows n JOIN old_rows o USING (id) WHERE {_CAME}"
    )
    bodies = {
        "insert": post_sql(live_new) + ";\n" + bound_sql(live_new) + ";",
        "delete": _unpost_sql(live_old) + ";",
        "update": _unpost_sql(
            "SELECT o.user_id, o.agent_id, o.run_id, o.session_id, o.id, o.doclen, o.terms, "
            f"o.tfs FROM new_rows n JOIN old_rows o USING (id) WHERE {_GONE}"
        )
        + ";\n"
        + post_sql(came)
        + ";\n"
        + bound_sql(came)
        + ";",
    }
    statement_triggers(conn, "postings", "postings", bodies)
    conn.execute("ANALYZE postings")
    conn.execute("ANALYZE term_bounds")


def _inserts_counted_by_writer(conn: Any, dim: int) -> None:
    """Drop the statistics trigger on inserts: the store counts new rows itself.

    The figures stay as they are (they already match the rows); from now on
    :func:`~actormem.store._pg_write.copy_inserts`, the only way rows enter
    ``memories``, adds them in the same transaction.  Updates and deletes
    keep their triggers.  (This step shipped as version 5; a build that also
    dropped the postings' insert trigger here met databases already at 5 with
    the trigger in place, and posted each new row twice: that change is
    version 7, :func:`_postings_written_by_writer`.)
    """
    conn.execute("DROP TRIGGER IF EXISTS memories_stats_insert ON memories")
    conn.execute("DROP FUNCTION IF EXISTS actormem_stats_insert()")


def _postings_written_by_writer(conn: Any, dim: int) -> None:
    """Drop the postings' insert trigger: the store posts new rows itself; unique postings.

    From now on :func:`~actormem.store._pg_write.copy_inserts` adds a batch's
    postings and raises their bounds in the inserting transaction
    (:func:`~actormem.store._pg_write.add_insert_stats` says why).
    ``postings_key`` becomes a ``UNIQUE`` index, so a posting written twice
    (a trigger left beside a writer that posts) fails the write instead of
    counting a term twice.  A database written by the build that made this
    change inside version 5 (on a database already at 5, trigger and writer
    both posted each new row) holds doubled postings: they are rebuilt from
    the live rows before the index is made.  The bounds only ever rise and
    hold as they are.
    """
    conn.execute("DROP TRIGGER IF EXISTS memories_postings_insert ON memories")
    conn.execute("DROP FUNCTION IF EXISTS actormem_postings_insert()")
    unique = (
        f"CREATE UNIQUE INDEX postings_unique ON postings (term, {PG_NS}, id) INCLUDE (tf, doclen)"
    )
    try:
        with conn.transaction():  # a savepoint: a doubled posting undoes only this
            conn.execute(unique)
    except Exception as exc:
        if type(exc).__name__ != "UniqueViolation":
            raise
        log.warning("store.pg_postings_rebuilt", reason="postings written twice")
        conn.execute("DELETE FROM postings")
        conn.execute(post_sql(f"SELECT {_POSTED} FROM memories WHERE {PG_LIVE}"))
        conn.execute(unique)
    conn.execute("DROP INDEX postings_key")
    conn.execute("ALTER INDEX postings_unique RENAME TO postings_key")
    conn.execute("ANALYZE postings")


def _writers_declare_version(conn: Any, dim: int) -> None:
    """Refuse writes to ``memories`` from a connection of an older actormem.

    The migration's lock holds off only the workers that open the store after
    it; a worker started before it keeps its connections and goes on writing
    as its version did (rows without what a later version keeps beside
    them: postings, statistics counted by the writer).  A statement-level
    ``BEFORE INSERT OR UPDATE`` trigger compares the version the connection
    declares in the ``actormem.writer_version`` setting (:func:`declare_writer`,
    set by every connection of the store) with the database's schema version
    and raises, naming both and telling the old worker to upgrade, when the
    declared one is older or missing.  It reads ``schema_version`` (a few
    rows), so later versions need not re-create it.  A statement-level trigger
    leaves ``COPY``'s batched inserts as they are.
    """
    conn.execute(
        f"""
        CREATE FUNCTION actormem_writer_check() RETURNS trigger LANGUAGE plpgsql AS $fn$
        DECLARE
            declared text := current_setting('{WRITER_SETTING}', true);
            needed integer := (SELECT max(version) FROM schema_version);
        BEGIN
            IF declared IS NULL OR declared !~ '^[0-9]{{1,9}}$' OR declared::integer < needed
            THEN
                RAISE EXCEPTION '%', format('this database holds actormem store schema '
                    'version %s and this connection declares %s (setting {WRITER_SETTING}): '
                    'a worker running an older actormem is still writing; stop it and '
                    'restart it with an actormem that understands schema version %s',
                    needed, coalesce(nullif(declared, ''), 'no version'), needed);
            END IF;
            RETURN NULL;
        END $fn$"""
    )
    conn.execute(
        "CREATE TRIGGER memories_writer_version BEFORE INSERT OR UPDATE ON memories "
        "FOR EACH STATEMENT EXECUTE FUNCTION actormem_writer_check()"
    )


def declare_writer(conn: Any) -> None:
    """Declare on ``conn`` (for its session) the schema version this code writes."""
    conn.execute("SELECT set_config(%s, %s, false)", (WRITER_SETTING, str(PG_SCHEMA_VERSION)))


#: ``MIGRATIONS[v]`` moves a database from version ``v`` to ``v + 1`` (0: a new one).
MIGRATIONS: Final[dict[int, Callable[[Any, int], None]]] = {
    0: _create_v1,
    1: _add_seq,
    2: _add_stats,
    3: _add_postings,
    4: _inserts_counted_by_writer,
    5: _writers_declare_version,
    6: _postings_written_by_writer,
    7: group_postings,
    8: stats_from_groups,
    9: add_change_feed,
    10: share_small_groups,
    11: add_fences,
}


def ensure_schema(conn: Any, dim: int, where: str) -> tuple[int, int]:
    """Create or upgrade the schema on ``conn`` (an autocommit psycopg connection).

    Args:
        conn: The connection.
        dim: The embedding dimension of a new database.
        where: The database, for messages (no password).

    Returns:
        ``(version_found, version_now)``; ``version_found`` is 0 for a new database.

    Raises:
        SchemaVersionError: The database is newer than :data:`PG_SCHEMA_VERSION`.
        StoreError: A migration failed (nothing was changed).
    """
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (_MIGRATE_LOCK,))
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_version (version integer NOT NULL, "
            "applied_at timestamptz NOT NULL DEFAULT now())"
        )
        row = conn.execute("SELECT max(version) FROM schema_version").fetchone()
        found = int(row[0]) if row and row[0] is not None else 0
        if found > PG_SCHEMA_VERSION:
            raise SchemaVersionError(
                f"{where} has store schema version {found}; this actormem understands up to "
                f"{PG_SCHEMA_VERSION} -- upgrade actormem to open it"
            )
        declare_writer(conn)
        if 0 < found < PG_SCHEMA_VERSION:
            # the steps read memories: writers that are already running (older
            # workers the advisory lock does not hold) wait until the migration has
            # committed, so no row of theirs lands between a step's reading of the
            # table and the triggers or tables it sets up
            conn.execute("LOCK TABLE memories IN SHARE ROW EXCLUSIVE MODE")
        for version in range(found, PG_SCHEMA_VERSION):
            try:
                MIGRATIONS[version](conn, dim)
            except Exception as exc:
                raise StoreError(
                    f"migrating {where} from store schema version {version} to {version + 1} "
                    f"failed (nothing was changed): {exc}"
                ) from exc
            conn.execute("INSERT INTO schema_version (version) VALUES (%s)", (version + 1,))
        cap_stored_terms(conn, found == 0, where)
    if found < PG_SCHEMA_VERSION:
        log.info("store.schema_migrated", where=where, old=found, new=PG_SCHEMA_VERSION)
    return found, PG_SCHEMA_VERSION


def read_meta(conn: Any) -> dict[str, str]:
    """All rows of ``store_meta`` as a dict."""
    rows = conn.execute("SELECT key, value FROM store_meta").fetchall()
    return {str(k): str(v) for k, v in rows}


def write_meta(conn: Any, values: dict[str, str]) -> None:
    """Upsert ``values`` into ``store_meta`` (the caller manages the transaction)."""
    for key, value in values.items():
        conn.execute(
            "INSERT INTO store_meta (key, value) VALUES (%s, %s) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

"""Stored BM25 terms written before the term cap, brought under it once per database.

:data:`~actormem.store._tokenize.MAX_TERM_CHARS` cuts a long run of letters and
digits to its first characters.  A PostgreSQL database written before the cap
may hold longer terms (any run short enough for the posting groups' btree,
about 2,700 bytes with the namespace): a query, cut now, would never match
them and the BM25 statistics would differ from DuckDB's.  Kept apart from the
schema steps because it is not one: the schema is unchanged, only the
``terms``/``tfs``/``doclen`` of the rows holding such a term are computed
again, and the statement triggers on ``memories`` move their postings and
statistics as for any update.  ``store_meta`` records the cap the stored terms
obey (``term_cap``), so the scan runs once, in :func:`ensure_schema`'s
transaction under its lock (two workers opening at once repair once).
"""

from __future__ import annotations

from typing import Any, Final

import structlog

from actormem.store import _tokenize

__all__ = ["TERM_CAP_KEY", "cap_stored_terms"]

log = structlog.get_logger(__name__)

#: The ``store_meta`` key naming the term cap the stored terms obey.
TERM_CAP_KEY: Final = "term_cap"


def cap_stored_terms(conn: Any, new_database: bool, where: str) -> int:
    """Recompute the terms of the rows holding a term past the cap; returns how many.

    ``conn`` is inside the schema transaction.  A new database only records the cap.
    """
    from actormem.store._pg_search import term_counts
    from actormem.store._pg_write import array_text

    cap = _tokenize.MAX_TERM_CHARS
    row = conn.execute("SELECT value FROM store_meta WHERE key = %s", (TERM_CAP_KEY,)).fetchone()
    if row is not None and str(row[0]) == str(cap):
        return 0
    fixed = 0
    if not new_database:
        rows = conn.execute(
            "SELECT id, content FROM memories "
            "WHERE EXISTS (SELECT 1 FROM unnest(terms) AS t(term) WHERE length(t.term) > %s)",
            (cap,),
        ).fetchall()
        if rows:
            counted = [term_counts(str(r[1])) for r in rows]
            conn.execute(
                "UPDATE memories m SET terms = u.terms::text[], tfs = u.tfs::int4[], "
                "doclen = u.doclen FROM unnest(%s::text[], %s::text[], %s::text[], %s::int4[]) "
                "AS u(id, terms, tfs, doclen) WHERE m.id = u.id",
                (
                    [str(r[0]) for r in rows],
                    [array_text(c[0]) for c in counted],
                    ["{" + ",".join(map(str, c[1])) + "}" for c in counted],
                    [c[2] for c in counted],
                ),
            )
            fixed = len(rows)
            log.info("store.terms_capped", where=where, rows=fixed, cap=cap)
    conn.execute(
        "INSERT INTO store_meta (key, value) VALUES (%s, %s) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (TERM_CAP_KEY, str(cap)),
    )
    return fixed

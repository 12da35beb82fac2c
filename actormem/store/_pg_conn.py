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

import re
from typing import Any, Final
from urllib.parse import quote, unquote, urlencode

from actormem._dsn import redact_dsn

__all__ = ["SaysDriverErrors", "first_line", "is_lost", "redacted", "secrets_of"]

# a key/value password runs to the next ``word=`` (an unquoted one may hold spaces)
_KV_SECRET: Final = re.compile(
    r"(?:^|\s)(?:ssl)?password\s*=\s*(.*?)(?=\s+[A-Za-z_]+\s*=|$)", re.I | re.S
)
_URL_USERINFO: Final = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://([^/?#]*)@")
_URL_SECRET: Final = re.compile(r"[?&](?:ssl)?password=([^&#]*)", re.I)


def secrets_of(dsn: str) -> tuple[str, ...]:
    """Every spelling of a secret ``dsn`` holds, parsable or not, longest first.

    libpq's own messages can echo a connection string it could not parse (a
    URL with a typo, an unencoded ``%`` in a password, an unquoted space in a
    key/value password), secrets included: a message naming the database
    without its password still carried it after the colon.  The connecting
    objects keep these and pass them to :func:`first_line`.
    """
    raw: list[str] = [m.group(1) for m in _KV_SECRET.finditer(dsn)]
    raw += _URL_SECRET.findall(dsn)
    user = _URL_USERINFO.match(dsn)
    if user is not None and ":" in user.group(1):
        raw.append(user.group(1).split(":", 1)[1])
    try:
        from psycopg.conninfo import conninfo_to_dict

        params = conninfo_to_dict(dsn)
        raw += [str(params[k]) for k in ("password", "sslpassword") if params.get(k)]
    except Exception:  # unparsable: the raw spellings above
        pass
    found: set[str] = set()
    for value in raw:
        for v in (value, value.strip("'\""), unquote(value), unquote(value).strip("'\"")):
            if v:
                found.add(v)
    return tuple(sorted(found, key=len, reverse=True))


def first_line(exc: BaseException, secrets: tuple[str, ...] = ()) -> str:
    """The first line of an exception's message (its type name when it has none), each
    of ``secrets`` (:func:`secrets_of`) replaced by ``***``.

    A secret holding spaces is also hidden piece by piece (pieces of 3 or
    more characters): libpq splits an unquoted key/value password at its
    spaces and echoes a piece alone (``missing "=" after "S3cr3t"``).  A
    piece is hidden only where it stands as a word of its own, not inside
    another word: a password "let ion out" once turned "connection" into
    "connect***" and "timeout" into "time***".  The whole secret is hidden
    wherever it occurs.
    """
    text = (str(exc).strip() or type(exc).__name__).splitlines()[0]
    pieces: set[str] = set()
    for secret in secrets:
        text = text.replace(secret, "***")
        parts = secret.split()
        if len(parts) > 1:
            pieces.update(p for p in parts if len(p) >= 3)
    for piece in sorted(pieces, key=len, reverse=True):
        text = re.sub(rf"(?<!\w){re.escape(piece)}(?!\w)", "***", text)
    return text


class SaysDriverErrors:
    """``_say(exc)`` for a class holding a DSN's secrets: the PostgreSQL store's
    connections and the PostgreSQL sessions word driver errors alike."""

    _secrets: tuple[str, ...]

    def _say(self, exc: BaseException) -> str:
        """The driver's first line with this DSN's secrets hidden (libpq may echo it)."""
        return first_line(exc, self._secrets)


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

"""Whether a ``store=`` / ``session_dir=`` / ``--db`` value names a PostgreSQL database.

Why a module of its own: the store, the sessions and the CLI must agree on
what a PostgreSQL connection string looks like, and this test must not
import either backend.  libpq takes two spellings: a URL
(``postgresql://user@host/db``) and key/value words
(``host=/tmp dbname=mem user=app``, what ``psycopg.conninfo.make_conninfo``
returns).  Only URLs were recognised; the key/value form was taken for a
file name and silently created a DuckDB file with that name in the working
directory.  Now a string that starts with a libpq keyword and ``=`` is a
connection string too.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["DSN_PREFIXES", "is_dsn", "redact_dsn", "without_password"]

#: What a PostgreSQL URL starts with (libpq accepts both spellings).
DSN_PREFIXES: Final = ("postgresql://", "postgres://")

# The libpq connection keywords a key/value string starts with in practice.
_KEYWORD_DSN: Final = re.compile(
    r"\s*(host|hostaddr|port|dbname|user|password|passfile|service|sslmode|"
    r"application_name|connect_timeout|options|target_session_attrs)\s*=",
)
_PASSWORD_WORD: Final = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)")


def is_dsn(target: object) -> bool:
    """Whether ``target`` is a PostgreSQL connection string (a URL or libpq key/value words)."""
    if not isinstance(target, str):
        return False
    return target.startswith(DSN_PREFIXES) or _KEYWORD_DSN.match(target) is not None


def without_password(dsn: str) -> str:
    """A key/value connection string fit for messages (``password=`` hidden)."""
    return _PASSWORD_WORD.sub(r"\1***", dsn)


#: libpq parameters that hold a secret (a URL may carry them in its query).
_SECRET_PARAMS: Final = frozenset({"password", "sslpassword"})


def redact_dsn(dsn: str) -> str:
    """``dsn`` fit for messages and logs: every secret hidden, either spelling.

    A URL loses the password of its user part and any ``password`` /
    ``sslpassword`` of its query (``?host=/tmp&password=...`` is a valid
    libpq URL); an IPv6 host keeps its brackets.  Key/value words lose their
    ``password=`` / ``sslpassword=`` values.
    """
    if not dsn.startswith(DSN_PREFIXES):
        return without_password(dsn)
    from urllib.parse import parse_qsl, urlencode, urlsplit

    try:
        parts = urlsplit(dsn)
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        user = f"{parts.username}@" if parts.username else ""
        netloc = f"{user}{host}{f':{parts.port}' if parts.port else ''}"
        query = [
            (k, "***" if k.strip().lower() in _SECRET_PARAMS else v)
            for k, v in parse_qsl(parts.query, keep_blank_values=True)
        ]
        text = urlencode(query, safe="/*")
        # Not urlunsplit: it drops an empty host ("postgresql:///db?host=/tmp"
        # came back as "postgresql:/db?...", which libpq does not read).
        return f"{parts.scheme}://{netloc}{parts.path}" + (f"?{text}" if text else "")
    except ValueError:
        return "postgresql://(unparsable URL)"

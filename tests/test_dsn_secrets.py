"""No message carries a connection's password, whatever the DSN's shape (pgprobe finding 3).

The connect paths named the database without its password, then appended
libpq's own first line -- which echoes a connection string it could not
parse: an unencoded ``%`` in a URL password, a URL typo, an unquoted space
in a key/value password.  The store, the sessions, ``open_store`` and the
CLI all printed it.  Every driver message now goes through the secrets of
the DSN it was about.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from psycopg.conninfo import conninfo_to_dict

from actormem.session import PostgresSession, SessionStorageError
from actormem.store import StoreError, open_store
from actormem.store._pg_conn import first_line, secrets_of

SECRET = "S3cr3tPw"


def _shapes(server: str) -> list[str]:
    params = conninfo_to_dict(server)
    host, port = params.get("host", "localhost"), params.get("port", "5432")
    kv = f"host={host} port={port} dbname=postgres user=nobody"
    url = f"postgresql://nobody:{SECRET}@/postgres?host={host}&port={port}"
    return [
        f"{kv} password={SECRET} junk",
        f"{kv} password=ab {SECRET}",
        f"{kv} password='{SECRET}",
        f"{kv} password={SECRET}",  # well formed: a refused login
        url + "&bogus=1",
        url + "&sslmode=bogus",  # libpq refuses the value; non-secret words are shown
        url.replace(SECRET, SECRET + "%zz"),
        url.replace(SECRET, "50%off" + SECRET),
        f"postgresql://nobody:{SECRET}@[::1/postgres",
        url,
    ]


def _message(exc: BaseException) -> str:
    """What a traceback shows: the message, the cause, the context unless suppressed."""
    context = "" if exc.__suppress_context__ else repr(exc.__context__)
    return f"{type(exc).__name__}: {exc} {exc.__cause__!r} {context}"


def test_secrets_of_every_shape() -> None:
    assert secrets_of("host=/x dbname=db") == ()
    for dsn in _shapes("host=/tmp port=5432"):
        hidden = first_line(ValueError(f"libpq said: {dsn!r}"), secrets_of(dsn))
        assert SECRET not in hidden, dsn
        assert "libpq said" in hidden


@pytest.mark.parametrize("what", ["store", "session", "open_store"])
def test_no_connect_error_carries_the_password(pg_server_dsn: str, what: str) -> None:
    from actormem.store._postgres import PostgresStore

    opens: dict[str, Any] = {
        "store": lambda d: PostgresStore(d, connect_timeout=2),
        "session": lambda d: PostgresSession(d, connect_timeout=2),
        "open_store": lambda d: open_store(d, connect_timeout=2),
    }
    for dsn in _shapes(pg_server_dsn):
        with pytest.raises((StoreError, SessionStorageError)) as err:
            opens[what](dsn)
        assert SECRET not in _message(err.value), dsn


def test_the_cli_never_prints_the_password(pg_server_dsn: str) -> None:
    for dsn in _shapes(pg_server_dsn)[::3]:
        run = subprocess.run(
            [sys.executable, "-m", "actormem", "memories", "search", "x", "--db", dsn],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert run.returncode != 0
        assert SECRET not in run.stdout + run.stderr, (dsn, run.stderr[-500:])


def test_pieces_of_a_password_are_hidden_only_as_words_of_their_own() -> None:
    """A key/value password with spaces is hidden piece by piece where libpq echoes a
    piece alone -- and no longer inside unrelated words ("connection", "timeout")."""
    dsn = "host=/tmp dbname=db user=u password=let ion out S3cr3tPw now"
    secrets = secrets_of(dsn)
    echo = 'missing "=" after "S3cr3tPw" in connection info string'
    assert first_line(ValueError(echo), secrets) == (
        'missing "=" after "***" in connection info string'
    )
    hidden = first_line(ValueError("let the connection time out: now (S3cr3tPw)"), secrets)
    assert hidden == "*** the connection time ***: *** (***)", hidden
    whole = first_line(ValueError(f"conninfo {dsn!r}"), secrets)
    assert "S3cr3tPw" not in whole and "let ion out" not in whole, whole

